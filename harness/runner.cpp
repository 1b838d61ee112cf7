#include "harness/runner.h"

#include <fnmatch.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <sstream>

#include "harness/calibrate.h"
#include "harness/checker.h"
#include "harness/devices.h"
#include "harness/environment.h"
#include "harness/inputs.h"
#include "harness/npy.h"
#include "harness/progress.h"
#include "harness/statistics.h"
#include "harness/store.h"
#include "harness/suite.h"
#include "harness/summary_table.h"
#include "harness/timing.h"
#include "harness/tracking_allocator.h"
#include "kernels/registry.h"
#include "reference/flops.h"

namespace attnbench {
namespace {

using Clock = std::chrono::steady_clock;

// Host kernels may take at most this much scratch: beyond it they report out of memory and the
// case is skipped, instead of the machine swapping.
constexpr double kHostScratchFractionOfMemory = 0.5;

struct CaseSpec {
  const Kernel* kernel = nullptr;
  Problem problem;
  Distribution distribution = Distribution::normal;
  size_t device_index = 0;
  std::string name;   // kernel/shape/distribution: the benchmark name, matched by --filter
  std::string group;  // device + shape + distribution: cases sharing inputs and reference
};

bool glob_match(const std::string& pattern, const std::string& text) {
  return fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

std::string kernel_names() {
  std::string names;
  for (const Kernel& k : all_kernels()) names += (names.empty() ? "" : ", ") + k.name;
  return names;
}

std::string case_label(const CaseSpec& spec) {
  std::string label = spec.kernel->name + " " + shape_string(spec.problem);
  if (spec.distribution != Distribution::normal)
    label += " dist=" + std::string(distribution_name(spec.distribution));
  return label;
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

uint64_t case_seed(uint64_t run_seed, const Problem& problem, Distribution distribution) {
  // Independent of the kernel: every kernel on a shape sees the same inputs, and a repro command
  // with the run's seed regenerates them exactly.
  return mix_seed(run_seed, hash_string(shape_string(problem) + "|" +
                                        std::string(distribution_name(distribution))));
}

std::string sanitize(const std::string& text) {
  std::string out;
  for (char c : text)
    out +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '=' || c == '-') ? c : '_';
  return out;
}

Status dump_case(const std::string& directory, const ProblemInputs& inputs,
                 const KernelOutputs* outputs, const ReferenceRows* reference,
                 const ResultRecord& result) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::create_directories(directory, error);
  if (error)
    return Status::Error("cannot create dump folder '" + directory + "': " + error.message());
  const Problem& p = inputs.problem;
  const AttentionInputs view = inputs.view();
  auto dump_tensor = [&](const std::string& name, const TensorView& tensor, int64_t seqlen,
                         int64_t heads, int64_t dim) -> Status {
    std::vector<float> values(static_cast<size_t>(p.batch * seqlen * heads * dim));
    size_t i = 0;
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t s = 0; s < seqlen; ++s)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t d = 0; d < dim; ++d) values[i++] = tensor.at(b, s, h, d);
    return write_npy(directory + "/" + name + ".npy", {p.batch, seqlen, heads, dim}, values.data());
  };
  Status status = dump_tensor("q", view.q, p.seqlen_q, p.heads_q, p.head_dim_qk);
  if (status.ok) status = dump_tensor("k", view.k, p.seqlen_k, p.heads_kv, p.head_dim_qk);
  if (status.ok) status = dump_tensor("v", view.v, p.seqlen_k, p.heads_kv, p.head_dim_v);
  if (status.ok && outputs != nullptr) {
    TensorView out_view{p.output_dtype, outputs->out.data(), inputs.layout.out, 1.0f};
    status = dump_tensor("out", out_view, p.seqlen_q, p.heads_q, p.head_dim_v);
  }
  if (status.ok && reference != nullptr) {
    const int64_t rows = static_cast<int64_t>(reference->rows.size());
    std::vector<int64_t> indices;
    for (const RowIndex& r : reference->rows) indices.insert(indices.end(), {r.b, r.query, r.h});
    status = write_npy(directory + "/ref.npy", {rows, p.head_dim_v}, reference->ref.data());
    if (status.ok) status = write_npy(directory + "/ref_rows.npy", {rows, 3}, indices.data());
  }
  std::ofstream repro(directory + "/repro.txt");
  repro << "# " << result.kernel << " " << shape_string(p) << " dist=" << result.distribution
        << "\n"
        << "# status: " << result_status_name(result.status)
        << (result.message.empty() ? "" : " (" + result.message + ")") << "\n"
        << "# q, k, v, out: (batch, seq, heads, dim) float32 (real values, FP8 descaled);\n"
        << "# ref: fp64 reference rows; ref_rows: their (batch, query, head) indices\n"
        << result.repro << "\n";
  if (!repro) return Status::Error("cannot write '" + directory + "/repro.txt'");
  return status;
}

}  // namespace

int run_cases(const RunOptions& options, std::ostream& out, std::ostream& err) {
  // ---- what to run ------------------------------------------------------------------------------
  const char* require_env = std::getenv("ATTNBENCH_REQUIRE_GPU");
  const bool require_gpu =
      options.require_gpu || (require_env != nullptr && std::string(require_env) == "1");
  const std::vector<Device> found = discover_devices();
  if (require_gpu) {
    bool any_gpu = false;
    for (const Device& d : found) any_gpu = any_gpu || d.backend == Backend::cuda;
    if (!any_gpu) {
      err << "error: --require-gpu (or ATTNBENCH_REQUIRE_GPU=1): no GPU found: "
          << gpu_absence_reason() << "\n";
      return kExitUsage;
    }
  }
  std::vector<Device> devices;
  if (Status s = select_devices(options.devices, found, devices); !s.ok) {
    err << "error: " << s.message << "\n";
    return kExitUsage;
  }

  Suite suite;
  if (!options.suite.empty()) {
    if (Status s = load_suite(options.suite, suite); !s.ok) {
      err << "error: " << s.message << "\n";
      return kExitUsage;
    }
  }
  Distribution shape_distribution = Distribution::normal;
  if (!options.distribution.empty() &&
      !parse_distribution(options.distribution, shape_distribution)) {
    err << "error: --dist '" << options.distribution
        << "': accepted: normal, large_logits, outliers\n";
    return kExitUsage;
  }
  for (const std::string& text : options.shapes) {
    SuiteEntry entry;
    entry.kernel_globs = {"*"};
    entry.distribution = std::string(distribution_name(shape_distribution));
    if (Status s = parse_shape(text, entry.problem); !s.ok) {
      err << "error: --shape '" << text << "': " << s.message << "\n";
      return kExitUsage;
    }
    if (Status s = validate(entry.problem); !s.ok) {
      err << "error: --shape '" << text << "': " << s.message << "\n";
      return kExitUsage;
    }
    suite.entries.push_back(entry);
  }
  if (options.suite.empty() && options.shapes.empty()) {
    err << "error: nothing to run: give --suite NAME|FILE (see `attnbench list suites`) or --shape "
           "b=..,hq=..,...\n";
    return kExitUsage;
  }
  for (const std::string& glob : options.kernel_globs) {
    bool any = false;
    for (const Kernel& k : all_kernels()) any = any || glob_match(glob, k.name);
    if (!any) {
      err << "error: --kernels: unknown kernel '" << glob << "'; accepted: " << kernel_names()
          << " (globs allowed)\n";
      return kExitUsage;
    }
  }
  std::optional<std::regex> filter;
  if (!options.filter.empty()) {
    try {
      filter.emplace(options.filter, std::regex::extended);
    } catch (const std::regex_error& e) {
      err << "error: --filter '" << options.filter
          << "' is not a valid regular expression: " << e.what() << "\n";
      return kExitUsage;
    }
  }

  std::vector<CaseSpec> cases;
  std::map<std::string, bool> seen;
  for (const SuiteEntry& entry : suite.entries) {
    Distribution distribution = Distribution::normal;
    parse_distribution(entry.distribution, distribution);
    for (const Kernel& kernel : all_kernels()) {
      bool in_suite = false;
      for (const std::string& glob : entry.kernel_globs)
        in_suite = in_suite || glob_match(glob, kernel.name);
      bool selected = options.kernel_globs.empty();
      for (const std::string& glob : options.kernel_globs)
        selected = selected || glob_match(glob, kernel.name);
      if (!in_suite || !selected) continue;
      for (size_t d = 0; d < devices.size(); ++d) {
        if (devices[d].backend != kernel.backend) continue;
        CaseSpec spec;
        spec.kernel = &kernel;
        spec.problem = entry.problem;
        spec.distribution = distribution;
        spec.device_index = d;
        spec.name = kernel.name + "/" + shape_string(entry.problem) + "/" +
                    std::string(distribution_name(distribution));
        spec.group = devices[d].label() + "|" + shape_string(entry.problem) + "|" +
                     std::string(distribution_name(distribution));
        if (filter && !std::regex_search(spec.name, *filter)) continue;
        if (seen[devices[d].label() + "|" + spec.name]) continue;
        seen[devices[d].label() + "|" + spec.name] = true;
        cases.push_back(spec);
      }
    }
  }
  if (cases.empty()) {
    err << "error: nothing was measured: no case matches (suite '"
        << (suite.name.empty() ? "--shape" : suite.name) << "', kernels [" << kernel_names()
        << "], devices '" << options.devices << "'"
        << (options.filter.empty() ? "" : ", filter '" + options.filter + "'") << ")\n";
    return kExitUsage;
  }
  // Cases sharing inputs run back to back, so inputs and the reference are made once per group.
  {
    std::map<std::string, size_t> first_position;
    for (size_t i = 0; i < cases.size(); ++i) first_position.emplace(cases[i].group, i);
    std::stable_sort(cases.begin(), cases.end(), [&](const CaseSpec& a, const CaseSpec& b) {
      return first_position[a.group] < first_position[b.group];
    });
  }

  // ---- the run record ---------------------------------------------------------------------------
  const uint64_t run_seed = options.seed.value_or(
      (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}());
  const int repetitions = options.repetitions > 0
                              ? options.repetitions
                              : (suite.repetitions > 0 ? suite.repetitions : kDefaultRepetitions);
  const double max_case_seconds =
      options.max_case_seconds > 0
          ? options.max_case_seconds
          : (suite.max_case_seconds > 0 ? suite.max_case_seconds : kDefaultMaxCaseSeconds);
  Status status;
  std::unique_ptr<Store> store = Store::open(options.db_path, status);
  if (!store) {
    err << "error: " << status.message << "\n";
    return kExitUsage;
  }
  RunInfo info;
  info.uuid = make_uuid();
  info.started_at = now_utc_iso8601();
  info.suite = suite.name.empty() ? "adhoc" : suite.name;
  info.command = options.command_line;
  info.env = capture_environment();
  {
    std::ostringstream protocol;
    protocol << "{\"mode\": \"" << (options.check_only ? "check" : "run")
             << "\", \"seed\": " << run_seed << ", \"repetitions\": " << repetitions
             << ", \"max_case_seconds\": " << max_case_seconds
             << ", \"target_repetition_seconds\": " << kTargetRepetitionSeconds
             << ", \"timer\": \"host steady_clock around one forward (CPU)\""
             << ", \"full_check_work\": " << kFullCheckWork << ", \"cases\": " << cases.size()
             << "}";
    info.protocol_json = protocol.str();
  }
  const int64_t run_id = store->begin_run(info, status);
  if (!status.ok) {
    err << "error: " << status.message << "\n";
    return kExitUsage;
  }
  std::vector<int64_t> device_ids;
  std::vector<std::vector<CalibrationRecord>> calibrations;
  for (const Device& device : devices) {
    device_ids.push_back(store->add_device(run_id, device.info, status));
    if (!status.ok) {
      err << "error: " << status.message << "\n";
      return kExitUsage;
    }
    calibrations.push_back(store->latest_calibrations(device.info.uuid, status));
  }
  err << "attnbench " << (options.check_only ? "check" : "run") << " " << run_id << ": "
      << cases.size() << " cases, suite " << info.suite << ", seed " << run_seed << ", database "
      << options.db_path << "\n";

  // ---- the cases --------------------------------------------------------------------------------
  Progress progress(static_cast<int>(cases.size()), err, options.interactive);
  std::vector<ResultRecord> results;
  std::vector<benchmark::BenchmarkReporter::Run> gbench_runs;
  bool store_failed = false;
  std::string current_group;
  std::unique_ptr<ProblemInputs> inputs;
  std::unique_ptr<ReferenceRows> reference;
  const size_t scratch_limit = static_cast<size_t>(
      kHostScratchFractionOfMemory * static_cast<double>(devices.front().info.memory_bytes));

  for (const CaseSpec& spec : cases) {
    const Device& device = devices[spec.device_index];
    const Kernel& kernel = *spec.kernel;
    const std::string label = case_label(spec);
    progress.start_case(label);
    if (spec.group != current_group) {
      current_group = spec.group;
      inputs.reset();
      reference.reset();
    }
    const uint64_t seed = case_seed(run_seed, spec.problem, spec.distribution);
    ResultRecord result;
    result.kernel = kernel.name;
    result.problem = spec.problem;
    result.distribution = std::string(distribution_name(spec.distribution));
    result.seed = run_seed;
    result.device_id = device_ids[spec.device_index];
    result.device_name = device.info.name;
    result.series_key = kernel.name + "|" + shape_string(spec.problem) + "|" + result.distribution +
                        "|" + device.info.name + "|" + info.env.build_type + " " +
                        info.env.compiler;
    result.flops = attention_flops(spec.problem);
    result.bytes = attention_bytes(spec.problem);
    result.repro = "attnbench check --shape " + shell_quote(shape_string(spec.problem)) +
                   " --kernels " + kernel.name + " --dist " + result.distribution + " --seed " +
                   std::to_string(run_seed) + " --devices " + device.label();
    KernelOutputs outputs;
    bool have_outputs = false;
    try {
      const std::string reason = unsupported_reason(kernel.support, spec.problem);
      if (!reason.empty()) {
        result.status = ResultStatus::skipped;
        result.message = reason;
      } else {
        if (!inputs) {
          inputs = std::make_unique<ProblemInputs>();
          status = make_inputs(spec.problem, spec.distribution, seed, *inputs);
          if (!status.ok) throw std::runtime_error("inputs: " + status.message);
        }
        TrackingHostAllocator scratch(scratch_limit);
        Status plan_status;
        std::unique_ptr<Plan> plan = kernel.make_plan(spec.problem, PlanContext{scratch}, plan_status);
        if (!plan) {
          const bool oom = plan_status.message.find("out of memory") != std::string::npos;
          result.status = oom ? ResultStatus::skipped : ResultStatus::error;
          result.message = "plan: " + plan_status.message;
        } else {
          if (!reference)
            reference = std::make_unique<ReferenceRows>(compute_reference(*inputs, seed, 1.0f));
          std::string failure;
          result.check = check_kernel(kernel, *plan, *inputs, *reference, outputs, failure);
          have_outputs = true;
          result.extra_memory_bytes = static_cast<int64_t>(scratch.peak_bytes());
          result.status = failure.empty() ? ResultStatus::passed : ResultStatus::failed;
          result.message = failure;
          if (result.status == ResultStatus::passed && !options.check_only) {
            AttentionParams params = make_params(
                *inputs, outputs.out.data(),
                outputs.has_lse ? static_cast<float*>(outputs.lse.data()) : nullptr, 1.0f);
            TimedForward forward = [&plan, &params](std::string& error) -> double {
              const auto start = Clock::now();
              const Status s = plan->run(params);
              const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
              if (!s.ok) {
                error = s.message;
                return -1;
              }
              return seconds;
            };
            std::string error;
            const double warmup_seconds =
                forward(error);  // untimed: caches, page faults, thread pool
            if (warmup_seconds < 0) throw std::runtime_error("warm-up: " + error);
            const TimingPlan timing_plan =
                plan_timing(warmup_seconds, repetitions, max_case_seconds);
            TimingResult timing = time_case(spec.name, forward, timing_plan);
            if (!timing.status.ok) {
              result.status = ResultStatus::error;
              result.message = "timing: " + timing.status.message;
            } else {
              result.samples = timing.samples;
              result.timing = timing.summary;
              result.flops_per_s = result.flops / timing.summary.median_s;
              result.bytes_per_s = result.bytes / timing.summary.median_s;
              const std::vector<CalibrationRecord>& ceilings = calibrations[spec.device_index];
              result.fraction_of_peak_flops =
                  result.flops_per_s /
                  peak_flops_for(ceilings, std::string(dtype_name(spec.problem.input_dtype)));
              result.fraction_of_peak_bandwidth = result.bytes_per_s / peak_bandwidth(ceilings);
              for (auto& run : timing.gbench_runs) {
                run.family_index = static_cast<int64_t>(results.size());
                gbench_runs.push_back(run);
              }
            }
            // The timed iterations overwrote the output; the checked output must be what is dumped.
            if (result.status == ResultStatus::passed) have_outputs = false;
          }
        }
      }
    } catch (const std::exception& e) {
      result.status = ResultStatus::error;
      result.message = e.what();
    }

    const bool failed = result.status == ResultStatus::failed;
    if (inputs && (failed || !options.dump_dir.empty())) {
      const std::string base = !options.dump_dir.empty()
                                   ? options.dump_dir
                                   : (std::filesystem::path(options.db_path).parent_path() /
                                      ("failures/run" + std::to_string(run_id)))
                                         .string();
      const std::string directory =
          (std::filesystem::path(base.empty() ? "." : base) /
           sanitize(kernel.name + "__" + shape_string(spec.problem) + "__" + result.distribution))
              .string();
      Status dumped =
          dump_case(directory, *inputs, have_outputs ? &outputs : nullptr, reference.get(), result);
      if (!dumped.ok)
        err << "warning: dump failed: " << dumped.message << "\n";
      else if (failed)
        result.message += " [dumped to " + directory + "]";
    }

    if (Status s = store->add_result(run_id, result); !s.ok) {
      err << "error: storing " << spec.name << ": " << s.message << "\n";
      store_failed = true;
    }
    progress.finish_case(label, result);
    results.push_back(std::move(result));
  }

  if (Status s = store->finish_run(run_id); !s.ok) {
    err << "error: " << s.message << "\n";
    store_failed = true;
  }

  // ---- summary and verdict ----------------------------------------------------------------------
  std::ostream& table = options.gbench_json_stdout ? err : out;
  table << "\nrun " << run_id << " (" << info.suite << ", "
        << (options.check_only ? "check" : "run") << ") stored in " << options.db_path << "\n";
  print_summary_table(results, table);
  if (options.gbench_json_stdout) write_gbench_json(out, gbench_runs);
  if (!options.gbench_out.empty()) {
    if (Status s = write_gbench_json(options.gbench_out, gbench_runs); !s.ok) {
      err << "error: " << s.message << "\n";
      store_failed = true;
    }
  }

  int measured = 0, bad = 0;
  for (const ResultRecord& r : results) {
    if (r.status == ResultStatus::passed || r.status == ResultStatus::failed) ++measured;
    if (r.status != ResultStatus::passed && r.status != ResultStatus::skipped) ++bad;
  }
  if (store_failed) return kExitUsage;
  if (bad > 0) return kExitFailures;
  if (measured == 0) {
    err << "error: nothing was measured: every case was skipped\n";
    return kExitUsage;
  }
  return kExitClean;
}

}  // namespace attnbench
