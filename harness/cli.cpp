#include "harness/cli.h"

#include <benchmark/benchmark.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <sstream>

#include "harness/calibrate.h"
#include "harness/devices.h"
#include "harness/environment.h"
#include "harness/plan_command.h"
#include "harness/progress.h"
#include "harness/runner.h"
#include "harness/store.h"
#include "harness/suite.h"
#include "harness/summary_table.h"
#include "harness/history_cli.h"
#include "harness/worker.h"
#include "kernels/registry.h"

namespace attnbench {

namespace {

// `attnbench report`: the HTML report is Python (reports/, reading the database only); this
// wrapper runs `python3 -m reports build` with the package found in this checkout.
int report_command(const std::string& db_path, const std::string& out_dir, const std::string& run,
                   const std::string& compare_to) {
  std::vector<std::string> arguments = {"python3", "-m", "reports", "build", "--db", db_path,
                                        "--out", out_dir};
  for (const auto& [flag, value] : {std::pair{"--run", run}, std::pair{"--compare-to", compare_to}}) {
    if (value.empty() || (value == "latest" && std::string(flag) == "--run")) continue;
    if (value.find_first_not_of("0123456789") != std::string::npos) {
      std::cerr << "error: " << flag << " '" << value << "': accepted: a run id"
                << (std::string(flag) == "--run" ? " or 'latest'" : "") << "\n";
      return kExitUsage;
    }
    arguments.insert(arguments.end(), {flag, value});
  }
  const char* old_path = std::getenv("PYTHONPATH");
  const std::string python_path =
      std::string(ATTNBENCH_SOURCE_DIR) + (old_path && *old_path ? ":" + std::string(old_path) : "");
  setenv("PYTHONPATH", python_path.c_str(), 1);
  std::vector<char*> argv;
  for (std::string& a : arguments) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, "python3", nullptr, nullptr, argv.data(), environ) != 0) {
    std::cerr << "error: attnbench report needs python3 on PATH (with reports/requirements.txt; "
                 "ci/install-deps.sh installs them)\n";
    return kExitUsage;
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status)) return kExitUsage;
  const int code = WEXITSTATUS(status);
  return code == 0 ? kExitClean : kExitUsage;  // a report that cannot be built: infrastructure
}

}  // namespace
namespace {

std::string quote_argument(const std::string& arg) {
  if (!arg.empty() && arg.find_first_of(" '\"$`\\(),;&|<>*?") == std::string::npos) return arg;
  std::string quoted = "'";
  for (char c : arg) quoted += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Google Benchmark's own flags keep working: the ones that select or shape the measurement are
// mapped onto ours; anything else --benchmark_* goes to benchmark::Initialize.
struct BenchmarkFlags {
  std::string filter;
  int repetitions = 0;
  std::string format;  // console (our tables) or json (GB's JSON on stdout)
  std::string out;
  std::string out_format;
  std::vector<std::string> passthrough;
};

bool take_flag(const std::string& arg, const std::string& name, std::string& value) {
  const std::string prefix = "--" + name + "=";
  if (arg.rfind(prefix, 0) != 0) return false;
  value = arg.substr(prefix.size());
  return true;
}

int list_command(const std::string& what, bool support, const std::string& db_path) {
  (void)db_path;
  if (what == "kernels") {
    for (const Kernel& kernel : all_kernels()) {
      std::cout << kernel.name << "  [" << backend_name(kernel.backend) << "]  " << kernel.summary
                << "\n";
      if (support) {
        std::istringstream lines(describe_support(kernel.support));
        std::string line;
        while (std::getline(lines, line)) std::cout << "    " << line << "\n";
        std::cout << "    deterministic: " << (kernel.deterministic ? "yes" : "no")
                  << ", returns LSE: " << (kernel.returns_lse ? "yes" : "no") << "\n";
      }
    }
#if !defined(ATTNBENCH_HAVE_CUDA)
    std::cout << "GPU kernels (cuda.*, cudnn.*): not in this build: " << gpu_absence_reason()
              << "\n";
#endif
    // The PyTorch peers need libtorch at configure time; no build of attnbench links it yet.
    std::cout << "PyTorch peers (torch.sdpa_flash, torch.sdpa_efficient, torch.sdpa_cudnn, "
                 "torch.sdpa_math): not built: this build has no libtorch support\n";
    return kExitClean;
  }
  if (what == "suites") {
    const auto suites = list_suites();
    if (suites.empty()) {
      std::cerr << "error: no suite found in " << suites_directory() << "\n";
      return kExitUsage;
    }
    for (const auto& [name, description] : suites) std::cout << name << "  " << description << "\n";
    return kExitClean;
  }
  if (what == "devices") {
    for (const Device& d : discover_devices()) {
      std::cout << d.label() << "  " << d.info.name << "  " << d.info.threads << " threads, "
                << format_bytes(static_cast<double>(d.info.memory_bytes)) << " memory, L2 "
                << format_bytes(static_cast<double>(d.info.l2_bytes)) << "\n";
    }
    const std::string absence = gpu_absence_reason();
    if (!absence.empty()) std::cout << "no GPU: " << absence << "\n";
    return kExitClean;
  }
  std::cerr << "error: list '" << what << "': accepted: kernels, suites, devices\n";
  return kExitUsage;
}

int show_command(const std::string& run_text, const std::string& db_path) {
  Status status;
  std::unique_ptr<Store> store = Store::open(db_path, status);
  if (!store) {
    std::cerr << "error: " << status.message << "\n";
    return kExitUsage;
  }
  int64_t run_id = 0;
  if (run_text == "latest") {
    std::optional<int64_t> latest = store->latest_run_id(status);
    if (!latest) {
      std::cerr << "error: " << (status.ok ? "no run stored in " + db_path : status.message)
                << "\n";
      return kExitUsage;
    }
    run_id = *latest;
  } else {
    try {
      size_t used = 0;
      run_id = std::stoll(run_text, &used);
      if (used != run_text.size() || run_id <= 0) throw std::invalid_argument(run_text);
    } catch (const std::exception&) {
      std::cerr << "error: show: run '" << run_text
                << "' is not a run id; accepted: a positive integer or 'latest'\n";
      return kExitUsage;
    }
  }
  std::optional<StoredRun> run = store->load_run(run_id, status);
  if (!run) {
    std::cerr << "error: "
              << (status.ok ? "no run " + std::to_string(run_id) + " in " + db_path
                            : status.message)
              << "\n";
    return kExitUsage;
  }
  std::cout << "run " << run->id << "  suite " << run->info.suite << "  " << run->status
            << "  started " << run->info.started_at
            << (run->finished_at.empty() ? "" : "  finished " + run->finished_at) << "\n"
            << "commit " << run->info.env.git_sha << (run->info.env.git_dirty ? " (dirty)" : "")
            << "  build " << run->info.env.build_type << "  " << run->info.env.compiler << "\n";
  for (const DeviceInfo& d : run->devices) {
    std::cout << "device " << d.kind << ":" << d.ordinal << "  " << d.name << "  " << d.threads
              << " threads\n";
  }
  std::cout << "command " << run->info.command << "\n\n";
  print_summary_table(run->results, std::cout);
  return kExitClean;
}

int calibrate_command(const std::string& devices_spec, const std::string& db_path) {
  std::vector<Device> devices;
  if (Status s = select_devices(devices_spec, discover_devices(), devices); !s.ok) {
    std::cerr << "error: " << s.message << "\n";
    return kExitUsage;
  }
  Status status;
  std::unique_ptr<Store> store = Store::open(db_path, status);
  if (!store) {
    std::cerr << "error: " << status.message << "\n";
    return kExitUsage;
  }
  for (const Device& device : devices) {
    std::cerr << "calibrating " << device.label() << " (" << device.info.name << ") ...\n";
    std::vector<CalibrationRecord> records;
    if (Status s = calibrate_device(device, records); !s.ok) {
      std::cerr << "error: " << s.message << "\n";
      return kExitUsage;
    }
    for (const CalibrationRecord& r : records) {
      if (Status s = store->add_calibration(r); !s.ok) {
        std::cerr << "error: " << s.message << "\n";
        return kExitUsage;
      }
      std::ostringstream value;
      value.precision(4);
      if (r.kind == "gemm")
        value << r.value / 1e9 << " GFLOP/s";
      else
        value << r.value / 1e9 << " GB/s";
      std::cout << device.label() << "  " << r.kind << " " << r.dtype << "  " << value.str()
                << "  (" << r.details << ")\n";
    }
  }
  std::cout << "stored in " << db_path << "\n";
  return kExitClean;
}

}  // namespace

int run_cli(int argc, char** argv) {
  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + quote_argument(argv[i]);

  // Peel off Google Benchmark's flags before CLI11 sees the arguments.
  BenchmarkFlags gbench;
  std::vector<std::string> arguments;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    std::string value;
    if (take_flag(arg, "benchmark_filter", gbench.filter)) continue;
    if (take_flag(arg, "benchmark_format", gbench.format)) continue;
    if (take_flag(arg, "benchmark_out", gbench.out)) continue;
    if (take_flag(arg, "benchmark_out_format", gbench.out_format)) continue;
    if (take_flag(arg, "benchmark_repetitions", value)) {
      try {
        gbench.repetitions = std::stoi(value);
      } catch (const std::exception&) {
        gbench.repetitions = -1;
      }
      if (gbench.repetitions < 1) {
        std::cerr << "error: --benchmark_repetitions=" << value << ": accepted: an integer >= 1\n";
        return kExitUsage;
      }
      continue;
    }
    if (arg.rfind("--benchmark_", 0) == 0) {
      gbench.passthrough.push_back(arg);
      continue;
    }
    arguments.push_back(arg);
  }
  if (!gbench.format.empty() && gbench.format != "console" && gbench.format != "json") {
    std::cerr << "error: --benchmark_format=" << gbench.format << ": accepted: console, json\n";
    return kExitUsage;
  }
  if (!gbench.out_format.empty() && gbench.out_format != "json") {
    std::cerr << "error: --benchmark_out_format=" << gbench.out_format << ": accepted: json\n";
    return kExitUsage;
  }
  {
    std::vector<char*> gbench_argv = {argv[0]};
    for (std::string& arg : gbench.passthrough) gbench_argv.push_back(arg.data());
    int gbench_argc = static_cast<int>(gbench_argv.size());
    benchmark::Initialize(&gbench_argc, gbench_argv.data());
    if (gbench_argc > 1) {
      std::cerr
          << "error: unknown Google Benchmark flag '" << gbench_argv[1]
          << "'; attnbench maps --benchmark_filter, --benchmark_repetitions, --benchmark_format, "
             "--benchmark_out, --benchmark_out_format and passes the others to Google Benchmark\n";
      return kExitUsage;
    }
  }

  CLI::App app{"attnbench: benchmark and regression suite for attention kernels"};
  app.require_subcommand(1);
  std::string db_path = kDefaultDatabase;

  auto* list = app.add_subcommand("list", "List kernels, suites or devices");
  std::string list_what;
  bool list_support = false;
  list->add_option("what", list_what, "kernels | suites | devices")
      ->required()
      ->check(CLI::IsMember({"kernels", "suites", "devices"}));
  list->add_flag("--support", list_support, "With `list kernels`: each kernel's support table");

  RunOptions run_options;
  bool no_isolation = false;
  std::string kernels_text;
  std::string seed_text;
  auto add_selection = [&](CLI::App* sub) {
    sub->add_option("--suite,-s", run_options.suite,
                    "Suite name (see `attnbench list suites`) or path to a .toml file");
    sub->add_option("--shape", run_options.shapes,
                    "Ad-hoc problem, e.g. "
                    "b=2,hq=8,hkv=2,sq=113,sk=203,d=64,dtype=bf16,mask=causal_br (repeatable)");
    sub->add_option("--kernels,-k", kernels_text,
                    "Comma-separated kernel names or globs, e.g. cpu.flash,cpu.masked_*");
    sub->add_option("--filter", run_options.filter,
                    "Regex on case names kernel/shape/distribution");
    sub->add_option("--devices", run_options.devices,
                    "all | cpu | gpu | GPU ordinals 0,1 (default all)");
    sub->add_option("--dist", run_options.distribution,
                    "Input distribution for --shape: normal | large_logits | outliers");
    sub->add_option("--dump", run_options.dump_dir,
                    "Write q, k, v, out, ref (.npy) and repro.txt of every case here");
    sub->add_option("--db", db_path, "SQLite database (default results/attnbench.sqlite)");
    sub->add_option("--seed", seed_text, "Run seed (default: fresh random, stored with the run)");
    sub->add_flag("--require-gpu", run_options.require_gpu,
                  "A missing GPU is an error (also ATTNBENCH_REQUIRE_GPU=1)");
    sub->add_option("--case-timeout", run_options.case_timeout_seconds,
                    "Watchdog: seconds a case may take before its worker is killed (default 60)")
        ->check(CLI::Range(1, 86400));
    sub->add_flag("--breaker", run_options.breaker,
                  "After a kernel's first crash or timeout, skip its remaining cases "
                  "(\"not run: breaker\", with the first failure's reproducing command)");
    sub->add_option("--shard", run_options.shard,
                    "i/n: run this runner's share of the suite (whole shapes, split the same way "
                    "on every runner)");
    sub->add_option("--junit", run_options.junit_path,
                    "Write JUnit XML here (one test case per kernel x shape)");
    sub->add_option("--summary-md", run_options.summary_md_path, "Write a Markdown summary here");
    sub->add_flag("--no-isolation", no_isolation,
                  "Run cases in this process, not in worker processes (for debuggers; a crash "
                  "then ends the run)");
  };
  auto* run =
      app.add_subcommand("run", "Check and time a suite or ad-hoc shapes; store the results");
  add_selection(run);
  run->add_option("--repetitions", run_options.repetitions, "Timed repetitions per case (samples)")
      ->check(CLI::Range(1, 10000));
  run->add_option("--max-case-seconds", run_options.max_case_seconds, "Time cap per case")
      ->check(CLI::Range(0.001, 3600.0));
  run->add_flag("--energy", run_options.measure_energy,
                "Energy per forward from a >= 1 s hot loop (GPU)");
  auto* check =
      app.add_subcommand("check", "Correctness only (no timing), same selection flags as run");
  add_selection(check);

  auto* plan = app.add_subcommand(
      "plan", "Predict what a selection costs on a modeled GPU, without running it");
  PlanOptions plan_options;
  std::string plan_kernels;
  plan->add_option("--suite,-s", plan_options.suite, "Suite name or path to a .toml file");
  plan->add_option("--shape", plan_options.shapes, "Ad-hoc problem (repeatable)");
  plan->add_option("--kernels,-k", plan_kernels, "Kernel names or globs, comma-separated");
  plan->add_option("--filter", plan_options.filter, "Regex on case names kernel/shape/dist");
  plan->add_option("--device-model", plan_options.device_model, "The modeled device (h200)");
  plan->add_flag("--check", plan_options.check_only, "Correctness only, as `attnbench check`");
  plan->add_option("--repetitions", plan_options.repetitions, "As `run --repetitions`")
      ->check(CLI::Range(1, 10000));
  plan->add_option("--max-case-seconds", plan_options.max_case_seconds, "As `run --max-case-seconds`")
      ->check(CLI::Range(0.001, 3600.0));
  plan->add_flag("--energy", plan_options.measure_energy, "As `run --energy`");
  plan->add_flag("--json", plan_options.json, "JSON: every case's predicted seconds and the total");

  auto* show = app.add_subcommand("show", "Print a stored run as a table");
  std::string show_run = "latest";
  show->add_option("run", show_run, "Run id or 'latest' (default)");
  show->add_option("--db", db_path, "SQLite database (default results/attnbench.sqlite)");

  auto* calibrate = app.add_subcommand(
      "calibrate", "Measure and store the devices' ceilings (GEMM FLOP/s, copy bandwidth)");
  std::string calibrate_devices = "all";
  calibrate->add_option("--devices", calibrate_devices, "all | cpu | gpu | GPU ordinals");
  calibrate->add_option("--db", db_path, "SQLite database (default results/attnbench.sqlite)");

  auto* report = app.add_subcommand(
      "report", "Build the HTML report from the database (runs `python3 -m reports build`)");
  std::string report_out = "results/report", report_run = "latest", report_compare;
  report->add_option("--db", db_path, "SQLite database (default results/attnbench.sqlite)");
  report->add_option("--out", report_out, "Output folder (default results/report)");
  report->add_option("--run", report_run, "Run id or 'latest' (default)");
  report->add_option("--compare-to", report_compare, "Run id to compare against");

  // The history and regression commands (harness/history_cli.cpp).
  const std::function<std::optional<int>()> history_dispatch = add_history_commands(app, db_path);

  // Internal: the worker process the parent starts for each device (see harness/worker.h).
  auto* worker = app.add_subcommand("__worker", "");
  worker->group("");  // hidden from --help
  std::string worker_device;
  worker->add_option("--device", worker_device)->required();

  std::vector<std::string> reversed(arguments.rbegin(), arguments.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "error: " << e.what() << " (see attnbench --help)\n";
    return kExitUsage;
  }

  if (*worker) return worker_main(worker_device);
  if (std::optional<int> code = history_dispatch()) return *code;
  if (*list) return list_command(list_what, list_support, db_path);
  if (*show) return show_command(show_run, db_path);
  if (*plan) {
    std::stringstream globs(plan_kernels);
    for (std::string glob; std::getline(globs, glob, ',');) {
      if (!glob.empty()) plan_options.kernel_globs.push_back(glob);
    }
    return plan_command(plan_options, std::cout, std::cerr);
  }
  if (*calibrate) return calibrate_command(calibrate_devices, db_path);
  if (*report) return report_command(db_path, report_out, report_run, report_compare);

  // run / check
  run_options.check_only = check->parsed();
  run_options.isolate = !no_isolation;
  run_options.db_path = db_path;
  run_options.command_line = command_line;
  run_options.interactive = isatty(STDERR_FILENO) != 0;
  std::stringstream kernels_stream(kernels_text);
  for (std::string glob; std::getline(kernels_stream, glob, ',');) {
    if (!glob.empty()) run_options.kernel_globs.push_back(glob);
  }
  if (!seed_text.empty()) {
    try {
      size_t used = 0;
      run_options.seed = std::stoull(seed_text, &used);
      if (used != seed_text.size()) throw std::invalid_argument(seed_text);
    } catch (const std::exception&) {
      std::cerr << "error: --seed '" << seed_text << "': accepted: an unsigned 64-bit integer\n";
      return kExitUsage;
    }
  }
  if (!gbench.filter.empty()) {
    if (!run_options.filter.empty()) {
      std::cerr << "error: give --filter or --benchmark_filter, not both\n";
      return kExitUsage;
    }
    run_options.filter = gbench.filter;
  }
  if (gbench.repetitions > 0) run_options.repetitions = gbench.repetitions;
  run_options.gbench_out = gbench.out;
  run_options.gbench_json_stdout = gbench.format == "json";
  return run_cases(run_options, std::cout, std::cerr);
}

}  // namespace attnbench
