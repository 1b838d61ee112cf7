// run_cli in steps: Google Benchmark's flags are peeled off the arguments first; each
// subcommand then adds its options to the CLI11 app (add_*_command) and hands back the action
// that runs it; after parsing, the one subcommand named runs.
#include "harness/cli/cli.h"

#include <benchmark/benchmark.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "harness/cli/command_support.h"
#include "harness/cli/describe_command.h"
#include "harness/cli/history_cli.h"
#include "harness/cli/plan_command.h"
#include "harness/cli/profile_command.h"
#include "harness/cli/runner.h"
#include "harness/cli/summary_table.h"
#include "harness/cli/tune_command.h"
#include "harness/core/progress.h"
#include "harness/core/shell.h"
#include "harness/measure/calibrate.h"
#include "harness/measure/cost_model.h"
#include "harness/measure/devices.h"
#include "harness/measure/environment.h"
#include "harness/measure/worker.h"
#include "harness/store/store.h"
#include "harness/suite/suite.h"
#include "kernels/python/python_kernels.h"
#include "kernels/registry.h"

namespace attnbench {
namespace {

// ---- the commands -------------------------------------------------------------------------------

// `attnbench report`: the HTML report is Python (reports/, reading the database only); this
// wrapper runs `python3 -m reports build` with the package found in this checkout.
int report_command(const std::string& db_path, const std::string& out_dir, const std::string& run,
                   const std::string& compare_to) {
  std::vector<std::string> arguments = {"python3", "-m",    "reports", "build",
                                        "--db",    db_path, "--out",   out_dir};
  for (const auto& [flag, value] :
       {std::pair{"--run", run}, std::pair{"--compare-to", compare_to}}) {
    if (value.empty() || (value == "latest" && std::string(flag) == "--run")) continue;
    if (value.find_first_not_of("0123456789") != std::string::npos) {
      std::cerr << "error: " << flag << " '" << value << "': accepted: a run id"
                << (std::string(flag) == "--run" ? " or 'latest'" : "") << "\n";
      return kExitUsage;
    }
    arguments.insert(arguments.end(), {flag, value});
  }
  const char* old_path = std::getenv("PYTHONPATH");
  const std::string python_path = std::string(ATTNBENCH_SOURCE_DIR) +
                                  (old_path && *old_path ? ":" + std::string(old_path) : "");
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

// `list kernels --json`: what scripts read (ci/gpucheck/plan.py: each kernel's correctness suite).
void print_kernels_json(std::ostream& out) {
  nlohmann::json kernels = nlohmann::json::array();
  for (const Kernel& kernel : all_kernels()) {
    nlohmann::json passes = nlohmann::json::array();
    for (const Pass pass : kernel.support.passes) passes.push_back(std::string(pass_name(pass)));
    kernels.push_back({{"name", kernel.name},
                       {"backend", std::string(backend_name(kernel.backend))},
                       {"summary", kernel.summary},
                       {"correctness_suite", kernel.correctness_suite},
                       {"passes", passes},
                       {"backward_deterministic", kernel.backward_deterministic},
                       {"unavailable", kernel.unavailable_reason},
                       {"origin", kernel.origin},
                       {"variant_of", kernel.variant_of}});
  }
  out << kernels.dump(1) << "\n";
}

// `list devices --json`: what scripts read (ci/gpucheck's setup: the GPU's device model, decided
// by harness/measure/cost_model.h, never by a copy of its name rule).
void print_devices_json(std::ostream& out) {
  nlohmann::json devices = nlohmann::json::array();
  for (const Device& d : discover_devices()) {
    const std::optional<DeviceModel> model =
        d.backend == Backend::cuda ? device_model_of_gpu(d.info.name) : std::nullopt;
    devices.push_back({{"label", d.label()},
                       {"backend", std::string(backend_name(d.backend))},
                       {"name", d.info.name},
                       {"threads", d.info.threads},
                       {"memory_bytes", d.info.memory_bytes},
                       {"l2_bytes", d.info.l2_bytes},
                       {"device_model", model ? nlohmann::json(model->name) : nlohmann::json()}});
  }
  out << nlohmann::json{{"devices", devices}, {"no_gpu_reason", gpu_absence_reason()}}.dump(1)
      << "\n";
}

int list_command(const std::string& what, bool support, bool json,
                 const std::vector<std::string>& plugins, const std::string& db_path) {
  (void)db_path;
  if (what == "kernels") {
    // The shipped Python kernels are listed, loaded or with the reason they are absent.
    if (Status s = add_requested_kernels(plugins, {"torch.*"}); !s.ok) {
      std::cerr << "error: " << s.message << "\n";
      return kExitUsage;
    }
    if (json) {
      print_kernels_json(std::cout);
      return kExitClean;
    }
    for (const Kernel& kernel : all_kernels()) {
      std::cout << kernel.name << "  [" << backend_name(kernel.backend) << "]  " << kernel.summary
                << "\n";
      if (!kernel.unavailable_reason.empty()) {
        std::cout << "    unavailable: " << kernel.unavailable_reason << "\n";
        continue;
      }
      if (!kernel.origin.empty()) std::cout << "    from " << kernel.origin << "\n";
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
    if (const std::string absent = python_kernels_unavailable_reason(); !absent.empty()) {
      std::cout << "Python kernels (py:module:function, torch.*): " << absent << "\n";
    } else {
      std::cout << "Python kernels: --kernels py:module:function (see examples/python/)\n";
    }
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
    if (json) {
      print_devices_json(std::cout);
      return kExitClean;
    }
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
  Result<std::unique_ptr<Store>> opened = Store::open(db_path);
  if (!opened) {
    std::cerr << "error: " << opened.status().message << "\n";
    return kExitUsage;
  }
  Store& store = **opened;
  // "latest" as every command reads it: the latest nightly's own run, not its rerun of suspects.
  const std::optional<int64_t> resolved = resolve_run(store, run_text, "show: run", std::cerr);
  if (!resolved) return kExitUsage;
  const int64_t run_id = *resolved;
  const Result<StoredRun> run = store.load_run(run_id);
  if (!run) {
    std::cerr << "error: " << run.status().message << "\n";
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
  std::cout << "command " << run->info.command << "\n";
  if (const Result<std::optional<int64_t>> rerun = store.latest_rerun_of(run_id); rerun && *rerun) {
    std::cout << "rerun of its suspects: run " << **rerun << " (attnbench show " << **rerun
              << ")\n";
  }
  std::cout << "\n";
  print_summary_table(run->results, std::cout);
  return kExitClean;
}

int calibrate_command(const std::string& devices_spec, const std::string& db_path) {
  const Result<std::vector<Device>> devices = select_devices(devices_spec, discover_devices());
  if (!devices) {
    std::cerr << "error: " << devices.status().message << "\n";
    return kExitUsage;
  }
  Result<std::unique_ptr<Store>> store = Store::open(db_path);
  if (!store) {
    std::cerr << "error: " << store.status().message << "\n";
    return kExitUsage;
  }
  for (const Device& device : *devices) {
    std::cerr << "calibrating " << device.label() << " (" << device.info.name << ") ...\n";
    const Result<std::vector<CalibrationRecord>> records = calibrate_device(device);
    if (!records) {
      std::cerr << "error: " << records.status().message << "\n";
      return kExitUsage;
    }
    for (const CalibrationRecord& r : *records) {
      if (Status s = (*store)->add_calibration(r); !s.ok) {
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

// ---- Google Benchmark's flags ------------------------------------------------------------------

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

// Splits the arguments after argv[0] into Google Benchmark's flags and the rest (for CLI11).
Status take_benchmark_flags(int argc, char** argv, BenchmarkFlags& gbench,
                            std::vector<std::string>& arguments) {
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
        return Status::Error("--benchmark_repetitions=" + value + ": accepted: an integer >= 1");
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
    return Status::Error("--benchmark_format=" + gbench.format + ": accepted: console, json");
  }
  if (!gbench.out_format.empty() && gbench.out_format != "json") {
    return Status::Error("--benchmark_out_format=" + gbench.out_format + ": accepted: json");
  }
  return Status::Ok();
}

// Hands the flags we do not map to benchmark::Initialize; one it does not know is an error.
Status initialize_google_benchmark(char* argv0, BenchmarkFlags& gbench) {
  std::vector<char*> gbench_argv = {argv0};
  for (std::string& arg : gbench.passthrough) gbench_argv.push_back(arg.data());
  int gbench_argc = static_cast<int>(gbench_argv.size());
  benchmark::Initialize(&gbench_argc, gbench_argv.data());
  if (gbench_argc > 1) {
    return Status::Error(
        "unknown Google Benchmark flag '" + std::string(gbench_argv[1]) +
        "'; attnbench maps --benchmark_filter, --benchmark_repetitions, --benchmark_format, "
        "--benchmark_out, --benchmark_out_format and passes the others to Google Benchmark");
  }
  return Status::Ok();
}

// ---- the subcommands' options ------------------------------------------------------------------

// A subcommand: its CLI11 app and what runs when the command line names it. The options it
// parses into live in the action (shared with the app's bindings).
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> action;
};

// What every subcommand shares: the database and how attnbench was called.
struct CommonOptions {
  std::string db_path = kDefaultDatabase;
  std::string command_line;  // argv, shell-quoted: stored with a run
  BenchmarkFlags gbench;
};

int usage_error(const std::string& message) {
  std::cerr << "error: " << message << "\n";
  return kExitUsage;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> items;
  std::string item;
  int depth = 0;  // inside a variant's brackets, "cpu.flash[block_q=128,block_k=256]"
  for (const char c : text) {
    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    if (c == ',' && depth == 0) {
      if (!item.empty()) items.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  if (!item.empty()) items.push_back(item);
  return items;
}

Subcommand add_list_command(CLI::App& app, CommonOptions& common) {
  struct Options {
    std::string what;
    bool support = false;
    bool json = false;
    std::vector<std::string> plugins;
  };
  auto options = std::make_shared<Options>();
  CLI::App* list = app.add_subcommand("list", "List kernels, suites or devices");
  list->add_option("what", options->what, "kernels | suites | devices")
      ->required()
      ->check(CLI::IsMember({"kernels", "suites", "devices"}));
  list->add_flag("--support", options->support, "With `list kernels`: each kernel's support table");
  list->add_flag("--json", options->json,
                 "JSON: with `list kernels` (name, backend, summary, correctness_suite, passes, "
                 "unavailable, origin); with `list devices` (label, backend, name, threads, "
                 "memory_bytes, l2_bytes, device_model)");
  list->add_option("--plugin", options->plugins,
                   "With `list kernels`: also this plugin's kernels (repeatable)");
  return {list, [options, &common] {
            return list_command(options->what, options->support, options->json, options->plugins,
                                common.db_path);
          }};
}

constexpr const char* kPassHelp =
    "fwd | bwd | fwd_bwd | all, or a list (fwd,bwd): the suite's cases of these passes, and "
    "each --shape in each "
    "(bwd: the backward alone, from the kernel's own forward outputs; default: every pass the "
    "suite names, fwd for --shape)";

// The selection flags `run` and `check` share.
struct RunFlags {
  RunOptions options;
  bool no_isolation = false;
  bool no_interleave = false;
  std::string kernels;
  std::string seed;
};

void add_selection_options(CLI::App* sub, RunFlags& flags, CommonOptions& common) {
  RunOptions& o = flags.options;
  sub->add_option("--suite,-s", o.suite,
                  "Suite name (see `attnbench list suites`) or path to a .toml file");
  sub->add_option("--shape", o.shapes,
                  "Ad-hoc problem, e.g. "
                  "b=2,hq=8,hkv=2,sq=113,sk=203,d=64,dtype=bf16,mask=causal_br (repeatable)");
  sub->add_option("--kernels,-k", flags.kernels,
                  "Comma-separated kernel names or globs, e.g. cpu.flash,cpu.masked_*");
  sub->add_option("--plugin", o.plugins,
                  "Shared library of kernels built against kernels/plugin/attnbench_plugin.h "
                  "(repeatable)");
  sub->add_option("--filter", o.filter, "Regex on case names kernel/shape/distribution");
  sub->add_option("--devices", o.devices,
                  "all | cpu | emu | gpu | GPU ordinals 0,1 (default all; emu: the emulated "
                  "device, never in all)");
  sub->add_option("--dist", o.distribution,
                  "Input distribution for --shape: " + accepted_distribution_names());
  sub->add_option("--pass", o.pass, kPassHelp);
  sub->add_option("--dump", o.dump_dir,
                  "Write q, k, v, out, ref (.npy) and repro.txt of every case here");
  sub->add_option("--db", common.db_path, "SQLite database (default results/attnbench.sqlite)");
  sub->add_option("--seed", flags.seed, "Run seed (default: fresh random, stored with the run)");
  sub->add_flag("--require-gpu", o.require_gpu,
                "A missing GPU is an error (also ATTNBENCH_REQUIRE_GPU=1)");
  sub->add_option("--case-timeout", o.case_timeout_seconds,
                  "Watchdog: seconds a case may take before its worker is killed (default 60)")
      ->check(CLI::Range(1, 86400));
  sub->add_flag("--breaker", o.breaker,
                "After a kernel's first crash or timeout, skip its remaining cases "
                "(\"not run: breaker\", with the first failure's reproducing command)");
  sub->add_option("--shard", o.shard,
                  "i/n: run this runner's share of the suite (whole shapes, split the same way "
                  "on every runner)");
  sub->add_option("--junit", o.junit_path,
                  "Write JUnit XML here (one test case per kernel x shape)");
  sub->add_option("--summary-md", o.summary_md_path, "Write a Markdown summary here");
  sub->add_flag("--no-interleave", flags.no_interleave,
                "On the CPU, time each case's repetitions back to back instead of round-robin "
                "with the other kernels of its problem");
  sub->add_flag("--interleave-gpus", o.interleave_gpus,
                "On GPUs too, time the kernels of a problem round-robin (a suite's "
                "interleave_gpus = true does the same)");
  sub->add_flag("--no-isolation", flags.no_isolation,
                "Run cases in this process, not in worker processes (for debuggers; a crash "
                "then ends the run)");
}

// After parsing: what the flags say that CLI11 could not check, and Google Benchmark's flags
// mapped onto ours.
Status complete_run_options(RunFlags& flags, const CommonOptions& common, bool check_only) {
  RunOptions& o = flags.options;
  o.check_only = check_only;
  o.isolate = !flags.no_isolation;
  o.interleave = !flags.no_interleave;
  if (flags.no_interleave && o.interleave_gpus) {
    return Status::Error("--no-interleave and --interleave-gpus: accepted: one of them");
  }
  o.db_path = common.db_path;
  o.command_line = common.command_line;
  o.interactive = isatty(STDERR_FILENO) != 0;
  o.kernel_globs = split_commas(flags.kernels);
  if (!flags.seed.empty()) {
    try {
      size_t used = 0;
      o.seed = std::stoull(flags.seed, &used);
      if (used != flags.seed.size()) throw std::invalid_argument(flags.seed);
    } catch (const std::exception&) {
      return Status::Error("--seed '" + flags.seed + "': accepted: an unsigned 64-bit integer");
    }
  }
  if (!common.gbench.filter.empty()) {
    if (!o.filter.empty()) return Status::Error("give --filter or --benchmark_filter, not both");
    o.filter = common.gbench.filter;
  }
  if (common.gbench.repetitions > 0) o.repetitions = common.gbench.repetitions;
  o.gbench_out = common.gbench.out;
  o.gbench_json_stdout = common.gbench.format == "json";
  return Status::Ok();
}

// `run` and `check`: the same selection; run also times.
std::pair<Subcommand, Subcommand> add_run_commands(CLI::App& app, CommonOptions& common) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* run =
      app.add_subcommand("run", "Check and time a suite or ad-hoc shapes; store the results");
  add_selection_options(run, *flags, common);
  run->add_option("--repetitions", flags->options.repetitions,
                  "Timed repetitions per case (samples)")
      ->check(CLI::Range(1, 10000));
  run->add_option("--max-case-seconds", flags->options.max_case_seconds, "Time cap per case")
      ->check(CLI::Range(0.001, 3600.0));
  run->add_flag("--energy", flags->options.measure_energy,
                "Energy per forward from a >= 1 s hot loop (GPU)");
  CLI::App* check =
      app.add_subcommand("check", "Correctness only (no timing), same selection flags as run");
  add_selection_options(check, *flags, common);
  const auto action = [flags, &common](bool check_only) {
    if (Status s = complete_run_options(*flags, common, check_only); !s.ok) {
      std::cerr << "error: " << s.message << "\n";
      return kExitUsage;
    }
    return run_cases(flags->options, std::cout, std::cerr);
  };
  return {{run, [action] { return action(false); }}, {check, [action] { return action(true); }}};
}

// `tune`: `run`'s selection and measurement over one kernel and its variants.
Subcommand add_tune_command(CLI::App& app, CommonOptions& common) {
  struct Options {
    RunFlags flags;
    std::string kernel;
  };
  auto options = std::make_shared<Options>();
  CLI::App* tune = app.add_subcommand(
      "tune", "Check and time a kernel's variants beside it, per shape; print the fastest");
  tune->add_option("--kernel", options->kernel, "The kernel whose variants to time, e.g. cpu.flash")
      ->required();
  add_selection_options(tune, options->flags, common);
  tune->add_option("--repetitions", options->flags.options.repetitions, "As `run --repetitions`")
      ->check(CLI::Range(1, 10000));
  tune->add_option("--max-case-seconds", options->flags.options.max_case_seconds,
                   "As `run --max-case-seconds`")
      ->check(CLI::Range(0.001, 3600.0));
  return {tune, [options, &common] {
            if (!options->flags.kernels.empty()) {
              return usage_error(
                  "tune selects its kernels itself (--kernel and its variants): "
                  "drop --kernels");
            }
            if (Status s = complete_run_options(options->flags, common, false); !s.ok) {
              return usage_error(s.message);
            }
            return tune_command({options->kernel, options->flags.options}, std::cout, std::cerr);
          }};
}

Subcommand add_plan_command(CLI::App& app) {
  struct Options {
    PlanOptions plan;
    std::string kernels;
  };
  auto options = std::make_shared<Options>();
  PlanOptions& o = options->plan;
  CLI::App* plan = app.add_subcommand(
      "plan", "Predict what a selection costs on a modeled GPU, without running it");
  plan->add_option("--suite,-s", o.suite, "Suite name or path to a .toml file");
  plan->add_option("--shape", o.shapes, "Ad-hoc problem (repeatable)");
  plan->add_option("--pass", o.pass, kPassHelp);
  plan->add_option("--kernels,-k", options->kernels, "Kernel names or globs, comma-separated");
  plan->add_option("--plugin", o.plugins, "As `run --plugin` (repeatable)");
  plan->add_option("--filter", o.filter, "Regex on case names kernel/shape/dist");
  plan->add_option("--device-model", o.device_model,
                   "The modeled GPU: h100 or h200 (default: the GPU present, else h200)");
  plan->add_flag("--check", o.check_only, "Correctness only, as `attnbench check`");
  plan->add_option("--repetitions", o.repetitions, "As `run --repetitions`")
      ->check(CLI::Range(1, 10000));
  plan->add_option("--max-case-seconds", o.max_case_seconds, "As `run --max-case-seconds`")
      ->check(CLI::Range(0.001, 3600.0));
  plan->add_flag("--energy", o.measure_energy, "As `run --energy`");
  plan->add_flag("--json", o.json, "JSON: every case's predicted seconds and the total");
  return {plan, [options] {
            options->plan.kernel_globs = split_commas(options->kernels);
            return plan_command(options->plan, std::cout, std::cerr);
          }};
}

Subcommand add_describe_command(CLI::App& app) {
  struct Options {
    DescribeOptions describe;
    std::string kernels;
  };
  auto options = std::make_shared<Options>();
  DescribeOptions& o = options->describe;
  CLI::App* describe = app.add_subcommand(
      "describe",
      "What attnbench would store about cases, without running them: canonical shape, FLOPs, "
      "bytes, series keys, each kernel's expected extra memory and launches");
  describe->add_option("--shape", o.shapes, "Problem, as `run --shape` (repeatable)");
  describe->add_option("--kernels,-k", options->kernels,
                       "Kernel names or globs of the registry, comma-separated");
  describe->add_option("--kernel-name", o.kernel_names,
                       "A kernel name described as it is, registry or not (repeatable): its "
                       "series key and stored case; an expectation only from the registry");
  describe->add_option(
      "--dist", o.distributions,
      "Input distribution (repeatable; default normal): " + accepted_distribution_names());
  describe->add_option("--device-name", o.device_names,
                       "Device model a series key names, e.g. 'NVIDIA H200' (repeatable)");
  describe->add_flag("--json", o.json,
                     "JSON: shapes (shape, flops, bytes) and cases (kernel, case_key, case_row, "
                     "series_keys, kernel_wide_keys, case_label, supported, expected)");
  return {describe, [options] {
            options->describe.kernel_globs = split_commas(options->kernels);
            return describe_command(options->describe, std::cout, std::cerr);
          }};
}

Subcommand add_profile_command(CLI::App& app, CommonOptions& common) {
  struct Options {
    ProfileOptions profile;
    std::string kernels;
  };
  auto options = std::make_shared<Options>();
  ProfileOptions& o = options->profile;
  CLI::App* profile = app.add_subcommand(
      "profile",
      "Where one forward's time goes: CPU phases per thread, GPU activities (CUPTI) or emulated "
      "launches; a trace and a stored breakdown");
  profile->add_option("--suite,-s", o.suite, "Suite name or path to a .toml file");
  profile->add_option("--shape", o.shapes, "Ad-hoc problem (repeatable)");
  profile->add_option("--pass", o.pass, kPassHelp);
  profile->add_option("--kernels,-k", options->kernels, "Kernel names or globs, comma-separated");
  profile->add_option("--plugin", o.plugins, "As `run --plugin` (repeatable)");
  profile->add_option("--filter", o.filter, "Regex on case names kernel/shape/dist");
  profile->add_option("--dist", o.distribution,
                      "Input distribution for --shape: " + accepted_distribution_names());
  profile->add_option("--trace", o.trace_path,
                      "Write the activities as a Chrome/Perfetto trace (JSON) to this file");
  profile->add_option("--devices", o.devices,
                      "all (CPU and GPUs), cpu, gpu, emu (the in-house CUDA kernels emulated), "
                      "GPU ordinals, or a mix like cpu,0");
  profile
      ->add_option("--case-timeout", o.case_timeout_seconds,
                   "Seconds a case may take in its worker before it is stopped")
      ->check(CLI::Range(1, 86400));
  profile
      ->add_option("--timed", o.timed_forwards,
                   "Pairs of a plain and a recorded forward (median of each)")
      ->check(CLI::Range(1, 1000));
  profile->add_option("--db", common.db_path, "SQLite database (default results/attnbench.sqlite)");
  return {profile, [options, &common] {
            options->profile.kernel_globs = split_commas(options->kernels);
            options->profile.db_path = common.db_path;
            return profile_command(options->profile, std::cout, std::cerr);
          }};
}

Subcommand add_show_command(CLI::App& app, CommonOptions& common) {
  auto run = std::make_shared<std::string>("latest");
  CLI::App* show = app.add_subcommand("show", "Print a stored run as a table");
  show->add_option("run", *run, "Run id or 'latest' (default)");
  show->add_option("--db", common.db_path, "SQLite database (default results/attnbench.sqlite)");
  return {show, [run, &common] { return show_command(*run, common.db_path); }};
}

Subcommand add_calibrate_command(CLI::App& app, CommonOptions& common) {
  auto devices = std::make_shared<std::string>("all");
  CLI::App* calibrate = app.add_subcommand(
      "calibrate", "Measure and store the devices' ceilings (GEMM FLOP/s, copy bandwidth)");
  calibrate->add_option("--devices", *devices, "all | cpu | gpu | GPU ordinals");
  calibrate->add_option("--db", common.db_path,
                        "SQLite database (default results/attnbench.sqlite)");
  return {calibrate, [devices, &common] { return calibrate_command(*devices, common.db_path); }};
}

Subcommand add_report_command(CLI::App& app, CommonOptions& common) {
  struct Options {
    std::string out = "results/report";
    std::string run = "latest";
    std::string compare_to;
  };
  auto options = std::make_shared<Options>();
  CLI::App* report = app.add_subcommand(
      "report", "Build the HTML report from the database (runs `python3 -m reports build`)");
  report->add_option("--db", common.db_path, "SQLite database (default results/attnbench.sqlite)");
  report->add_option("--out", options->out, "Output folder (default results/report)");
  report->add_option("--run", options->run, "Run id or 'latest' (default)");
  report->add_option("--compare-to", options->compare_to, "Run id to compare against");
  return {report, [options, &common] {
            return report_command(common.db_path, options->out, options->run, options->compare_to);
          }};
}

// Internal: the worker process the parent starts for each device (harness/measure/worker.h).
Subcommand add_worker_command(CLI::App& app) {
  struct Options {
    std::string device;
    std::vector<std::string> plugins, kernel_globs;
  };
  auto options = std::make_shared<Options>();
  CLI::App* worker = app.add_subcommand("__worker", "");
  worker->group("");  // hidden from --help
  worker->add_option("--device", options->device)->required();
  worker->add_option("--plugin", options->plugins);
  worker->add_option("--kernels", options->kernel_globs);
  return {worker, [options] {
            return worker_main(options->device, options->plugins, options->kernel_globs);
          }};
}

}  // namespace

int run_cli(int argc, char** argv) {
  CommonOptions common;
  common.command_line = shell_join(std::vector<std::string>(argv, argv + argc));
  std::vector<std::string> arguments;
  if (Status s = take_benchmark_flags(argc, argv, common.gbench, arguments); !s.ok)
    return usage_error(s.message);
  if (Status s = initialize_google_benchmark(argv[0], common.gbench); !s.ok)
    return usage_error(s.message);

  CLI::App app{"attnbench: benchmark and regression suite for attention kernels"};
  app.require_subcommand(1);
  std::vector<Subcommand> subcommands = {add_list_command(app, common)};
  const auto [run, check] = add_run_commands(app, common);
  subcommands.insert(
      subcommands.end(),
      {run, check, add_tune_command(app, common), add_plan_command(app), add_describe_command(app),
       add_profile_command(app, common), add_show_command(app, common),
       add_calibrate_command(app, common), add_report_command(app, common)});
  // The history and regression commands (harness/cli/history_cli.cpp).
  const std::function<std::optional<int>()> history_dispatch =
      add_history_commands(app, common.db_path);
  subcommands.push_back(add_worker_command(app));

  std::vector<std::string> reversed(arguments.rbegin(), arguments.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(std::string(e.what()) + " (see attnbench --help)");
  }
  for (const Subcommand& subcommand : subcommands) {
    if (subcommand.app->parsed()) return subcommand.action();
  }
  if (std::optional<int> code = history_dispatch()) return *code;
  return usage_error("no command given (see attnbench --help)");
}

}  // namespace attnbench
