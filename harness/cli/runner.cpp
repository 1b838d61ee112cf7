// run_cases in named steps:
//
//   select_run      devices, suite (+ --shape problems, exact cases), the case matrix
//   begin_run       the run's row, its devices and their ceilings, the protocol
//   run_all_cases   one queue per device: GPUs in parallel threads, then the CPU alone; each case
//                   is a result (identity, request, outcome, derived figures) stored at once
//   finish_run      the protocol with each device's timer, the run marked complete
//   write_outputs   the table, Google Benchmark's JSON, JUnit XML, the Markdown summary
//   exit_code       what the results and the infrastructure say
#include "harness/cli/runner.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/cli/ci_reports.h"
#include "harness/cli/summary_table.h"
#include "harness/core/progress.h"
#include "harness/core/series_key.h"
#include "harness/core/shell.h"
#include "harness/measure/calibrate.h"
#include "harness/measure/case_runner.h"
#include "harness/measure/checker.h"
#include "harness/measure/environment.h"
#include "harness/measure/executor.h"
#include "harness/measure/inputs.h"
#include "harness/measure/timing.h"
#include "harness/measure/worker.h"
#include "harness/store/store.h"
#include "harness/suite/case_matrix.h"
#include "kernels/registry.h"
#include "reference/flops.h"

namespace attnbench {
namespace {

using json = nlohmann::json;

std::string case_label(const CaseSpec& spec) {
  std::string label = spec.kernel->name + " " + shape_string(spec.problem);
  if (spec.distribution != Distribution::normal)
    label += " dist=" + std::string(distribution_name(spec.distribution));
  return label;
}

uint64_t case_seed(uint64_t run_seed, const Problem& problem, Distribution distribution) {
  // Independent of the kernel: every kernel on a shape sees the same inputs, and a repro command
  // with the run's seed regenerates them exactly.
  return mix_seed(run_seed, hash_string(shape_string(problem) + "|" +
                                        std::string(distribution_name(distribution))));
}

// ---- what to run ---------------------------------------------------------------------------------

// Everything a run needs before anything is stored.
struct RunSelection {
  std::vector<Device> devices;
  Suite suite;
  std::vector<CaseSpec> cases;
};

Result<std::vector<Device>> select_run_devices(const RunOptions& options,
                                               const std::vector<Device>& found) {
  const char* require_env = std::getenv("ATTNBENCH_REQUIRE_GPU");
  const bool require_gpu =
      options.require_gpu || (require_env != nullptr && std::string(require_env) == "1");
  const bool any_gpu = std::any_of(found.begin(), found.end(),
                                   [](const Device& d) { return d.backend == Backend::cuda; });
  if (require_gpu && !any_gpu) {
    return Status::Error("--require-gpu (or ATTNBENCH_REQUIRE_GPU=1): no GPU found: " +
                         gpu_absence_reason());
  }
  return select_devices(options.devices, found);
}

// The suite file, then the --shape problems, then the exact cases, as one suite.
Result<Suite> load_run_suite(const RunOptions& options) {
  return selection_suite(options.suite, options.shapes, options.distribution, options.pass, options.cases,
                         "nothing to run: give --suite NAME|FILE (see `attnbench list suites`) or "
                         "--shape b=..,hq=..,...");
}

// The case matrix of harness/suite/case_matrix.h, then this runner's shard.
Result<std::vector<CaseSpec>> select_run_cases(const RunOptions& options, const Suite& suite,
                                               const std::vector<Device>& devices) {
  if (Status s = load_selected_kernels(suite, options.kernel_globs, options.plugins); !s.ok) return s;
  const Result<std::optional<std::regex>> filter = parse_case_filter(options.filter);
  if (!filter) return filter.status();
  Shard shard;
  if (!options.shard.empty()) {
    const Result<Shard> parsed = parse_shard(options.shard);
    if (!parsed) return parsed.status();
    shard = *parsed;
  }
  std::vector<MatrixDevice> matrix_devices;
  for (const Device& device : devices) matrix_devices.push_back({device.backend, device.label()});
  std::vector<CaseSpec> cases =
      shard_cases(expand_cases(suite, options.kernel_globs, *filter, matrix_devices), shard);
  if (cases.empty()) {
    return Status::Error("nothing was measured: no case matches (suite '" +
                         (suite.name.empty() ? std::string("--shape") : suite.name) + "', kernels [" +
                         kernel_names() + "], devices '" + options.devices + "'" +
                         (options.filter.empty() ? "" : ", filter '" + options.filter + "'") + ")");
  }
  return cases;
}

Result<RunSelection> select_run(const RunOptions& options, const std::vector<Device>& found) {
  RunSelection selection;
  Result<std::vector<Device>> devices = select_run_devices(options, found);
  if (!devices) return devices.status();
  selection.devices = std::move(*devices);
  Result<Suite> suite = load_run_suite(options);
  if (!suite) return suite.status();
  selection.suite = std::move(*suite);
  Result<std::vector<CaseSpec>> cases =
      select_run_cases(options, selection.suite, selection.devices);
  if (!cases) return cases.status();
  selection.cases = std::move(*cases);
  return selection;
}

// ---- the run record ------------------------------------------------------------------------------

// The run as stored: its row, its devices with their ceilings, and the measurement protocol,
// which gains each device's timer as its cases report it.
struct RunRecord {
  std::unique_ptr<Store> store;
  int64_t id = 0;
  RunInfo info;
  uint64_t seed = 0;
  int repetitions = 0;
  double max_case_seconds = 0;
  json protocol;
  std::vector<int64_t> device_ids;                         // per selected device
  std::vector<std::vector<CalibrationRecord>> calibrations;  // per selected device
};

// What was asked for, so that runs of the same job can be compared case for case.
std::string selection_text(const RunOptions& options) {
  std::string kernels, shapes;
  for (const std::string& glob : options.kernel_globs) kernels += (kernels.empty() ? "" : ",") + glob;
  for (const std::string& shape : options.shapes) shapes += (shapes.empty() ? "" : ";") + shape;
  return std::string(options.check_only ? "check" : "run") + " suite=" + options.suite +
         " shapes=" + shapes + " kernels=" + kernels + " filter=" + options.filter +
         " devices=" + options.devices + " dist=" + options.distribution + " shard=" + options.shard;
}

// The measurement protocol's parameters; "timers" is filled as the devices report theirs.
json run_protocol(const RunOptions& options, const RunSelection& selection, const RunRecord& run,
                  size_t case_count) {
  return {{"mode", options.check_only ? "check" : "run"},
          {"seed", run.seed},
          {"repetitions", run.repetitions},
          {"max_case_seconds", run.max_case_seconds},
          {"target_repetition_seconds", kTargetRepetitionSeconds},
          {"stable_relative_stddev", kStableRelativeStddev},
          {"min_stable_repetitions", kMinStableRepetitions},
          {"full_check_work", kFullCheckWork},
          {"case_timeout_seconds", options.case_timeout_seconds},
          {"breaker", options.breaker},
          {"interleaved", interleaves_on(Backend::cpu, options, selection.suite)},
          {"interleaved_gpus", interleaves_on(Backend::cuda, options, selection.suite)},
          {"cases", case_count},
          {"timers", json::object()}};
}

// Text columns may hold anything a device or library calls itself: invalid UTF-8 is replaced
// rather than refused.
std::string dump_json(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

Result<RunRecord> begin_run(const RunOptions& options, const RunSelection& selection) {
  RunRecord run;
  run.seed = options.seed.value_or((static_cast<uint64_t>(std::random_device{}()) << 32) ^
                                   std::random_device{}());
  run.repetitions = resolve_repetitions(options.repetitions, selection.suite);
  run.max_case_seconds = resolve_max_case_seconds(options.max_case_seconds, selection.suite);
  Result<std::unique_ptr<Store>> store = Store::open(options.db_path);
  if (!store) return store.status();
  run.store = std::move(*store);
  run.info.uuid = make_uuid();
  run.info.started_at = now_utc_iso8601();
  run.info.suite = selection.suite.name.empty() ? "adhoc" : selection.suite.name;
  run.info.command = options.command_line;
  run.info.env = capture_environment();
  run.info.shard = options.shard;
  run.info.rerun_of = options.rerun_of;
  run.info.selection = selection_text(options);
  run.protocol = run_protocol(options, selection, run, selection.cases.size());
  // What the suite asks the gate to see: the analysis reads it from here (detect_target).
  if (selection.suite.detect_target > 0) {
    run.protocol["detect_target"] = selection.suite.detect_target;
  }
  run.info.protocol_json = dump_json(run.protocol);
  const Result<int64_t> run_id = run.store->begin_run(run.info);
  if (!run_id) return run_id.status();
  run.id = *run_id;
  for (const Device& device : selection.devices) {
    DeviceInfo stored = device.info;
    stored.extra_json = json_object_column(stored.extra_json);
    const Result<int64_t> device_id = run.store->add_device(run.id, stored);
    if (!device_id) return device_id.status();
    run.device_ids.push_back(*device_id);
    Result<std::vector<CalibrationRecord>> ceilings =
        run.store->latest_calibrations(device.info.uuid);
    if (!ceilings) return ceilings.status();
    run.calibrations.push_back(std::move(*ceilings));
  }
  return run;
}

// ---- one case ------------------------------------------------------------------------------------

std::string repro_command(const CaseSpec& spec, const Device& device, uint64_t run_seed) {
  return shell_join({"attnbench", "check", "--shape", shape_string(spec.problem), "--kernels",
                     spec.kernel->name, "--dist", std::string(distribution_name(spec.distribution)),
                     "--seed", std::to_string(run_seed), "--devices", device.label()});
}

// What identifies the result whatever happens to the case: kernel, problem, device, series,
// the work it stands for and the command that reproduces it.
ResultRecord result_identity(const CaseSpec& spec, const Device& device, int64_t device_id,
                             const RunRecord& run) {
  ResultRecord result;
  result.kernel = spec.kernel->name;
  result.problem = spec.problem;
  result.distribution = std::string(distribution_name(spec.distribution));
  result.seed = run.seed;
  result.device_id = device_id;
  result.device_name = device.info.name;
  result.series_key = SeriesKey{result.kernel, shape_string(spec.problem), result.distribution,
                                device.info.name, series_build(run.info.env)}
                          .text();
  result.flops = attention_flops(spec.problem);
  result.bytes = attention_bytes(spec.problem);
  result.repro = repro_command(spec, device, run.seed);
  return result;
}

CaseRequest case_request(const CaseSpec& spec, const ResultRecord& result, const RunOptions& options,
                         const RunSelection& selection, const RunRecord& run) {
  CaseRequest request;
  request.name = spec.name;
  request.kernel = spec.kernel->name;
  request.problem = spec.problem;
  request.distribution = result.distribution;
  request.seed = case_seed(run.seed, spec.problem, spec.distribution);
  request.check_only = options.check_only;
  request.repetitions = run.repetitions;
  request.max_case_seconds = run.max_case_seconds;
  request.measure_energy = options.measure_energy || selection.suite.measure_energy;
  request.dump_dir = options.dump_dir;
  request.failure_dump_dir =
      (std::filesystem::path(options.db_path).parent_path() / ("failures/run" + std::to_string(run.id)))
          .string();
  request.repro = result.repro;
  return request;
}

// The device's measurements, and what follows from them and the device's ceilings.
void take_outcome(const CaseOutcome& outcome, const CaseSpec& spec,
                  const std::vector<CalibrationRecord>& ceilings, ResultRecord& result) {
  result.status = outcome.status;
  result.message = outcome.message;
  result.check = outcome.check;
  result.timing = outcome.timing;
  result.samples = outcome.samples;
  result.extra_memory_bytes = outcome.extra_memory_bytes;
  result.launches = outcome.launches;
  result.energy_j = outcome.energy_j;
  result.details_json = outcome.details_json;
  if (!result.timing.timed) return;
  result.flops_per_s = result.flops / result.timing.median_s;
  result.bytes_per_s = result.bytes / result.timing.median_s;
  result.fraction_of_peak_flops =
      result.flops_per_s / peak_flops_for(ceilings, std::string(dtype_name(spec.problem.input_dtype)));
  result.fraction_of_peak_bandwidth = result.bytes_per_s / peak_bandwidth(ceilings);
  if (spec.kernel->predicted_seconds) {
    result.predicted_s = spec.kernel->predicted_seconds(spec.problem);
  } else if (spec.kernel->bytes_moved) {
    result.predicted_s = spec.kernel->bytes_moved(spec.problem) / peak_bandwidth(ceilings);
  }
}

// ---- the cases -----------------------------------------------------------------------------------

// What the device threads share, each member guarded by `mutex`.
struct RunProgress {
  RunProgress(size_t cases, std::ostream& messages, bool interactive)
      : progress(static_cast<int>(cases), messages, interactive), err(messages) {}
  std::mutex mutex;
  Progress progress;
  std::ostream& err;
  Breaker breaker;
  std::vector<std::pair<size_t, ResultRecord>> finished;  // (case index, result)
  bool store_failed = false;
};

// One device's cases, in order, on one worker process (or in this process: --no-isolation).
class DeviceQueue {
 public:
  DeviceQueue(const RunOptions& options, const RunSelection& selection, RunRecord& run,
              RunProgress& shared, size_t device_index)
      : options_(options), selection_(selection), run_(run), shared_(shared),
        device_index_(device_index), device_(selection.devices[device_index]) {}

  // Problem by problem: the cases that share one (the kernels of a shape, pass and distribution,
  // consecutive within their input group) are measured together where the device interleaves.
  // On the CPU a kernel joins its problem's group once one of its cases has run without crashing
  // or timing out: until then it runs alone, so a kernel that crashes or hangs costs its own case
  // (and watchdog) only, never a group's. A GPU interleaves only when asked, for kernels compared
  // at their first shape (gpu-figures, tune): there every kernel joins at once, and a crash or a
  // hang inside the group still lands on its own case when the group reruns one by one.
  void run(const std::vector<size_t>& case_indices) {
    for (const std::vector<size_t>& problem : by_problem(case_indices)) {
      std::vector<size_t> together;
      for (size_t case_index : problem) {
        if (record_if_skipped(case_index)) continue;
        const bool proven = device_.backend != Backend::cpu ||
                            ran_before_.count(selection_.cases[case_index].kernel->name) > 0;
        if (interleaves() && proven) {
          together.push_back(case_index);
        } else {
          measure_alone(case_index);
        }
      }
      if (together.size() > 1) {
        measure_together(together);
      } else {
        for (size_t case_index : together) measure_alone(case_index);
      }
    }
  }

 private:
  bool interleaves() const { return interleaves_on(device_.backend, options_, selection_.suite); }

  // The queue's cases as problems: each input group's cases (back to back in the queue) split
  // by problem, in the order each problem first appears.
  std::vector<std::vector<size_t>> by_problem(const std::vector<size_t>& case_indices) const {
    std::vector<std::vector<size_t>> problems;
    std::map<std::string, size_t> index_of;  // problem -> its position in problems
    std::string group;
    for (size_t case_index : case_indices) {
      const CaseSpec& spec = selection_.cases[case_index];
      if (spec.group != group) index_of.clear();
      group = spec.group;
      const auto [found, added] = index_of.emplace(shape_string(spec.problem), problems.size());
      if (added) problems.emplace_back();
      problems[found->second].push_back(case_index);
    }
    return problems;
  }

  ResultRecord identity(size_t case_index) const {
    return result_identity(selection_.cases[case_index], device_, run_.device_ids[device_index_],
                           run_);
  }

  // A case the kernel cannot run, or whose kernel's breaker is open, is recorded skipped at once.
  bool record_if_skipped(size_t case_index) {
    const CaseSpec& spec = selection_.cases[case_index];
    std::optional<std::string> broken;
    {
      std::lock_guard<std::mutex> lock(shared_.mutex);
      if (options_.breaker) broken = shared_.breaker.open_reason(spec.kernel->name);
    }
    std::string reason = skip_reason(*spec.kernel, spec.problem);
    if (reason.empty() && !broken) return false;
    ResultRecord result = identity(case_index);
    result.status = ResultStatus::skipped;
    result.message = reason.empty() ? *broken : reason;
    finish(case_index, result, nullptr);
    return true;
  }

  void measure_alone(size_t case_index) {
    const CaseSpec& spec = selection_.cases[case_index];
    {
      std::lock_guard<std::mutex> lock(shared_.mutex);
      shared_.progress.start_case(case_label(spec));
    }
    ResultRecord result = identity(case_index);
    const CaseOutcome outcome =
        measure({case_request(spec, result, options_, selection_, run_)}).front();
    finish(case_index, result, &outcome);
  }

  // The problem's cases timed together. A crash, a timeout or a device made unusable in the
  // group says nothing of which case caused it: then each case runs alone, as without
  // interleaving, and the failure lands on its own case.
  void measure_together(const std::vector<size_t>& case_indices) {
    std::vector<ResultRecord> results;
    std::vector<CaseRequest> requests;
    {
      std::lock_guard<std::mutex> lock(shared_.mutex);
      for (size_t case_index : case_indices)
        shared_.progress.start_case(case_label(selection_.cases[case_index]));
    }
    for (size_t case_index : case_indices) {
      results.push_back(identity(case_index));
      requests.push_back(
          case_request(selection_.cases[case_index], results.back(), options_, selection_, run_));
    }
    const std::vector<CaseOutcome> outcomes = measure(requests);
    const bool group_failed =
        std::any_of(outcomes.begin(), outcomes.end(), [](const CaseOutcome& o) {
          return o.status == ResultStatus::crashed || o.status == ResultStatus::timeout ||
                 o.device_unusable;
        });
    if (group_failed) {
      for (size_t case_index : case_indices) measure_alone(case_index);
      return;
    }
    for (size_t i = 0; i < case_indices.size(); ++i) finish(case_indices[i], results[i], &outcomes[i]);
  }

  // The result as stored: the device's outcome (none for a skipped case) and the expectations.
  void finish(size_t case_index, ResultRecord& result, const CaseOutcome* outcome) {
    const CaseSpec& spec = selection_.cases[case_index];
    if (outcome != nullptr) {
      take_outcome(*outcome, spec, run_.calibrations[device_index_], result);
      result.details_json =
          with_expectation(json_object_column(result.details_json), *spec.kernel, spec.problem);
      if (!outcome->timer.empty()) {
        std::lock_guard<std::mutex> lock(shared_.mutex);
        run_.protocol["timers"][device_.label()] = outcome->timer;
      }
    }
    result.details_json = with_origin(json_object_column(result.details_json), *spec.kernel);
    if (outcome != nullptr && result.status != ResultStatus::crashed &&
        result.status != ResultStatus::timeout) {
      ran_before_.insert(spec.kernel->name);
    }
    record(case_index, case_label(spec), std::move(result));
  }

  // One case, or a problem's cases timed together; the watchdog allows each its own timeout.
  std::vector<CaseOutcome> measure(const std::vector<CaseRequest>& requests) {
    if (options_.isolate) {
      if (!worker_) worker_ = std::make_unique<WorkerProcess>(worker_command(), device_.label());
      const auto timeout = std::chrono::seconds(options_.case_timeout_seconds);
      return worker_->run_group(requests, timeout * static_cast<int64_t>(requests.size()));
    }
    if (CaseRunner* runner = in_process_runner()) return runner->run_group(requests);
    std::vector<CaseOutcome> outcomes(requests.size());
    for (CaseOutcome& outcome : outcomes) outcome.message = in_process_error_;
    return outcomes;
  }

  std::vector<std::string> worker_command() const {
    return options_.worker_command.empty() ? std::vector<std::string>{"/proc/self/exe"}
                                           : options_.worker_command;
  }

  // The executor and runner of --no-isolation, made once; nullptr (and in_process_error_) when
  // the device has none.
  CaseRunner* in_process_runner() {
    if (!in_process_runner_ && in_process_error_.empty()) {
      Result<std::unique_ptr<DeviceExecutor>> executor = make_device_executor(device_.label());
      if (!executor) {
        in_process_error_ = executor.status().message;
        return nullptr;
      }
      in_process_executor_ = std::move(*executor);
      in_process_runner_ = std::make_unique<CaseRunner>(*in_process_executor_);
    }
    return in_process_runner_.get();
  }

  // Stored at once (one transaction per result), so a killed run keeps what it finished.
  void record(size_t case_index, const std::string& label, ResultRecord result) {
    std::lock_guard<std::mutex> lock(shared_.mutex);
    if (options_.breaker) shared_.breaker.record(label, result);
    if (Status s = run_.store->add_result(run_.id, result); !s.ok) {
      shared_.err << "error: storing " << selection_.cases[case_index].name << ": " << s.message << "\n";
      shared_.store_failed = true;
    }
    shared_.progress.finish_case(label, result);
    shared_.finished.emplace_back(case_index, std::move(result));
  }

  const RunOptions& options_;
  const RunSelection& selection_;
  RunRecord& run_;
  RunProgress& shared_;
  size_t device_index_;
  const Device& device_;
  std::unique_ptr<WorkerProcess> worker_;
  std::unique_ptr<DeviceExecutor> in_process_executor_;
  std::unique_ptr<CaseRunner> in_process_runner_;
  std::string in_process_error_;
  std::set<std::string> ran_before_;  // kernels with a case that neither crashed nor timed out
};

// One queue per device. GPUs run in parallel, one worker each; the CPU's cases run after them,
// alone, so host timings are not disturbed by the GPU workers' threads. The results come back
// in case order.
void run_all_cases(const RunOptions& options, const RunSelection& selection, RunRecord& run,
                   RunProgress& shared) {
  const std::vector<Device>& devices = selection.devices;
  std::vector<std::vector<size_t>> queues(devices.size());
  for (size_t i = 0; i < selection.cases.size(); ++i) queues[selection.cases[i].device_index].push_back(i);
  auto run_queue = [&](size_t d) { DeviceQueue(options, selection, run, shared, d).run(queues[d]); };
  std::vector<std::thread> gpu_threads;
  for (size_t d = 0; d < devices.size(); ++d) {
    if (devices[d].backend != Backend::cpu && !queues[d].empty()) gpu_threads.emplace_back(run_queue, d);
  }
  for (std::thread& t : gpu_threads) t.join();
  for (size_t d = 0; d < devices.size(); ++d) {
    if (devices[d].backend == Backend::cpu) run_queue(d);
  }
  std::sort(shared.finished.begin(), shared.finished.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
}

// ---- outputs and the verdict ---------------------------------------------------------------------

// Writes each output asked for; false when one could not be written (each says why on `err`).
bool write_outputs(const RunOptions& options, const RunSelection& selection, const RunRecord& run,
                   const std::vector<std::pair<size_t, ResultRecord>>& finished, std::ostream& out,
                   std::ostream& err) {
  std::vector<ResultRecord> results;
  std::vector<benchmark::BenchmarkReporter::Run> gbench_runs;
  for (const auto& [index, result] : finished) {
    results.push_back(result);
    const auto runs = gbench_runs_from_samples(selection.cases[index].name, static_cast<int64_t>(index),
                                               result.samples);
    gbench_runs.insert(gbench_runs.end(), runs.begin(), runs.end());
  }
  std::ostream& table = options.gbench_json_stdout ? err : out;
  table << "\nrun " << run.id << " (" << run.info.suite << ", " << (options.check_only ? "check" : "run")
        << ") stored in " << options.db_path << "\n";
  print_summary_table(results, table);
  if (options.gbench_json_stdout) write_gbench_json(out, gbench_runs);

  bool written = true;
  const auto write = [&](const std::string& what, const std::string& path, const auto& make_text) {
    if (path.empty()) return;
    if (Status s = write_text_file(path, make_text()); !s.ok) {
      err << "error: " << what << s.message << "\n";
      written = false;
    }
  };
  if (!options.gbench_out.empty()) {
    if (Status s = write_gbench_json(options.gbench_out, gbench_runs); !s.ok) {
      err << "error: " << s.message << "\n";
      written = false;
    }
  }
  write("--junit: ", options.junit_path,
        [&] { return junit_xml("attnbench " + run.info.suite, ci_cases_from_results(results)); });
  write("--summary-md: ", options.summary_md_path,
        [&] { return run_summary_markdown(run.id, run.info.suite, results); });
  return written;
}

int exit_code(const std::vector<std::pair<size_t, ResultRecord>>& finished, bool infrastructure_failed,
              std::ostream& err) {
  int measured = 0, bad = 0;
  for (const auto& [index, r] : finished) {
    if (was_measured(r.status)) ++measured;
    if (r.status != ResultStatus::passed && r.status != ResultStatus::skipped) ++bad;
  }
  if (infrastructure_failed) return kExitUsage;
  if (bad > 0) return kExitFailures;
  if (measured == 0) {
    err << "error: nothing was measured: every case was skipped\n";
    return kExitUsage;
  }
  return kExitClean;
}

int usage_error(const Status& status, std::ostream& err) {
  err << "error: " << status.message << "\n";
  return kExitUsage;
}

}  // namespace

void Breaker::record(const std::string& case_label, const ResultRecord& result) {
  const bool trips = result.status == ResultStatus::crashed || result.status == ResultStatus::timeout;
  if (!trips || first_failure_.count(result.kernel)) return;
  first_failure_[result.kernel] = std::string(kBreakerPrefix) + result.kernel + " " +
                                  std::string(result_status_name(result.status)) + " first, at " +
                                  case_label + " (" + result.message.substr(0, kBreakerMessageChars) +
                                  "); reproduce: " + result.repro;
}

std::optional<std::string> Breaker::open_reason(const std::string& kernel) const {
  const auto found = first_failure_.find(kernel);
  if (found == first_failure_.end()) return std::nullopt;
  return found->second;
}

int resolve_repetitions(int asked, const Suite& suite) {
  if (asked > 0) return asked;
  return suite.repetitions > 0 ? suite.repetitions : kDefaultRepetitions;
}

double resolve_max_case_seconds(double asked, const Suite& suite) {
  if (asked > 0) return asked;
  return suite.max_case_seconds > 0 ? suite.max_case_seconds : kDefaultMaxCaseSeconds;
}

bool interleaves_on(Backend backend, const RunOptions& options, const Suite& suite) {
  if (!options.interleave || options.check_only) return false;
  switch (backend) {
    case Backend::cpu: return true;
    case Backend::cuda: return options.interleave_gpus || suite.interleave_gpus;
    case Backend::emu: return false;
  }
  return false;
}

std::string with_origin(const std::string& details_json, const Kernel& kernel) {
  if (kernel.origin.empty()) return details_json;
  json details = json::parse(details_json);
  details["origin"] = kernel.origin;
  return dump_json(details);
}

json expectation_json(const ResourceExpectation& expected) {
  json declared = json::object();
  if (expected.extra_memory_bytes) declared["extra_memory_bytes"] = *expected.extra_memory_bytes;
  if (expected.launches) declared["launches"] = *expected.launches;
  return declared;
}

std::string with_expectation(const std::string& details_json, const Kernel& kernel,
                             const Problem& problem) {
  const json expected = expectation_json(expected_resources(kernel, problem));
  if (expected.empty()) return details_json;
  json details = json::parse(details_json);
  details["expected"] = expected;
  return dump_json(details);
}

std::string json_object_column(const std::string& reported) {
  if (reported.empty()) return "{}";
  const json parsed = json::parse(reported, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_object()) return dump_json(parsed);
  return dump_json(json{{"unparsed", reported}});
}

int run_cases(const RunOptions& options, std::ostream& out, std::ostream& err) {
  return run_cases(options, discover_devices(), out, err);
}

int run_cases(const RunOptions& options, const std::vector<Device>& found, std::ostream& out,
              std::ostream& err) {
  const Result<RunSelection> selected = select_run(options, found);
  if (!selected) return usage_error(selected.status(), err);
  const RunSelection& selection = *selected;
  Result<RunRecord> begun = begin_run(options, selection);
  if (!begun) return usage_error(begun.status(), err);
  RunRecord& run = *begun;
  err << "attnbench " << (options.check_only ? "check" : "run") << " " << run.id << ": "
      << selection.cases.size() << " cases, suite " << run.info.suite << ", seed " << run.seed
      << ", database " << options.db_path << "\n";

  RunProgress shared(selection.cases.size(), err, options.interactive);
  run_all_cases(options, selection, run, shared);
  bool infrastructure_failed = shared.store_failed;
  if (Status s = run.store->finish_run(run.id, dump_json(run.protocol)); !s.ok) {
    err << "error: " << s.message << "\n";
    infrastructure_failed = true;
  }
  if (!write_outputs(options, selection, run, shared.finished, out, err)) infrastructure_failed = true;
  return exit_code(shared.finished, infrastructure_failed, err);
}

}  // namespace attnbench
