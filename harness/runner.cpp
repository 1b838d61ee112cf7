#include "harness/runner.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <memory>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness/calibrate.h"
#include "harness/case_matrix.h"
#include "harness/case_runner.h"
#include "harness/checker.h"
#include "harness/ci_reports.h"
#include "harness/devices.h"
#include "harness/environment.h"
#include "harness/executor.h"
#include "harness/inputs.h"
#include "harness/progress.h"
#include "harness/statistics.h"
#include "harness/store.h"
#include "harness/suite.h"
#include "harness/summary_table.h"
#include "harness/timing.h"
#include "harness/worker.h"
#include "kernels/registry.h"
#include "reference/flops.h"

namespace attnbench {
namespace {

using Clock = std::chrono::steady_clock;

// Host kernels may take at most this much scratch: beyond it they report out of memory and the
// case is skipped, instead of the machine swapping.
constexpr double kHostScratchFractionOfMemory = 0.5;

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

// The executor for --no-isolation: the same recipe, in this process.
std::unique_ptr<DeviceExecutor> make_executor_in_process(const Device& device) {
  if (device.backend == Backend::cpu) {
    return make_cpu_executor(static_cast<size_t>(kHostScratchFractionOfMemory *
                                                 static_cast<double>(device.info.memory_bytes)));
  }
#if defined(ATTNBENCH_HAVE_CUDA)
  Status status;
  auto executor = make_cuda_executor(device.info.ordinal, status);
  if (!executor) throw std::runtime_error(status.message);
  return executor;
#else
  throw std::runtime_error("device " + device.label() + " needs the CUDA backend");
#endif
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

bool parse_shard(const std::string& text, int& index, int& count, std::string& error) {
  const size_t slash = text.find('/');
  try {
    size_t used_index = 0, used_count = 0;
    if (slash == std::string::npos) throw std::invalid_argument(text);
    index = std::stoi(text.substr(0, slash), &used_index);
    count = std::stoi(text.substr(slash + 1), &used_count);
    if (used_index != slash || used_count != text.size() - slash - 1) throw std::invalid_argument(text);
  } catch (const std::exception&) {
    index = count = 0;
  }
  if (count < 1 || index < 1 || index > count) {
    error = "--shard '" + text + "': accepted: i/n with 1 <= i <= n, e.g. 2/4";
    return false;
  }
  return true;
}

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
    if (Status s = shape_entry(text, entry); !s.ok) {
      err << "error: " << s.message << "\n";
      return kExitUsage;
    }
    entry.distribution = std::string(distribution_name(shape_distribution));
    suite.entries.push_back(entry);
  }
  for (const std::string& text : options.cases) {
    const size_t first = text.find('|');
    const size_t last = text.rfind('|');
    SuiteEntry entry;
    Distribution distribution = Distribution::normal;
    if (first == std::string::npos || first == last ||
        !parse_distribution(text.substr(last + 1), distribution) ||
        !parse_shape(text.substr(first + 1, last - first - 1), entry.problem).ok) {
      err << "error: case '" << text << "': accepted: kernel|shape|distribution\n";
      return kExitUsage;
    }
    entry.kernel_globs = {text.substr(0, first)};
    entry.distribution = std::string(distribution_name(distribution));
    suite.entries.push_back(entry);
  }
  if (options.suite.empty() && options.shapes.empty() && options.cases.empty()) {
    err << "error: nothing to run: give --suite NAME|FILE (see `attnbench list suites`) or --shape "
           "b=..,hq=..,...\n";
    return kExitUsage;
  }
  std::optional<std::regex> filter;
  for (const Status& s : {check_kernel_globs(options.kernel_globs), parse_case_filter(options.filter, filter)}) {
    if (!s.ok) {
      err << "error: " << s.message << "\n";
      return kExitUsage;
    }
  }
  std::vector<MatrixDevice> matrix_devices;
  for (const Device& device : devices) matrix_devices.push_back({device.backend, device.label()});
  std::vector<CaseSpec> cases = expand_cases(suite, options.kernel_globs, filter, matrix_devices);
  if (!options.shard.empty()) {
    // Whole shapes go to one shard (their cases share inputs and the reference); shapes are
    // dealt round-robin in sorted order, independent of device names, so every runner of a
    // job computes the same split.
    int shard_index = 0, shard_count = 0;
    std::string shard_error;
    if (!parse_shard(options.shard, shard_index, shard_count, shard_error)) {
      err << "error: " << shard_error << "\n";
      return kExitUsage;
    }
    std::map<std::string, int> shard_of;
    for (const CaseSpec& spec : cases) {
      shard_of.emplace(shape_string(spec.problem) + "|" + std::string(distribution_name(spec.distribution)), 0);
    }
    int position = 0;
    for (auto& [shape, shard] : shard_of) shard = position++ % shard_count + 1;
    std::erase_if(cases, [&](const CaseSpec& spec) {
      return shard_of[shape_string(spec.problem) + "|" + std::string(distribution_name(spec.distribution))] != shard_index;
    });
  }
  if (cases.empty()) {
    err << "error: nothing was measured: no case matches (suite '"
        << (suite.name.empty() ? "--shape" : suite.name) << "', kernels [" << kernel_names()
        << "], devices '" << options.devices << "'"
        << (options.filter.empty() ? "" : ", filter '" + options.filter + "'") << ")\n";
    return kExitUsage;
  }
  // ---- the run record ---------------------------------------------------------------------------
  const uint64_t run_seed = options.seed.value_or(
      (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}());
  const int repetitions = resolve_repetitions(options.repetitions, suite);
  const double max_case_seconds = resolve_max_case_seconds(options.max_case_seconds, suite);
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
  info.shard = options.shard;
  info.rerun_of = options.rerun_of;
  {
    std::string kernels, shapes;
    for (const std::string& glob : options.kernel_globs) kernels += (kernels.empty() ? "" : ",") + glob;
    for (const std::string& shape : options.shapes) shapes += (shapes.empty() ? "" : ";") + shape;
    info.selection = std::string(options.check_only ? "check" : "run") + " suite=" + options.suite +
                     " shapes=" + shapes + " kernels=" + kernels + " filter=" + options.filter +
                     " devices=" + options.devices + " dist=" + options.distribution +
                     " shard=" + options.shard;
  }
  // The measurement protocol's parameters; the timer each device used is added as its cases
  // report it (the executor names its own timer) and stored when the run finishes.
  nlohmann::json protocol = {{"mode", options.check_only ? "check" : "run"},
                             {"seed", run_seed},
                             {"repetitions", repetitions},
                             {"max_case_seconds", max_case_seconds},
                             {"target_repetition_seconds", kTargetRepetitionSeconds},
                             {"stable_relative_stddev", kStableRelativeStddev},
                             {"min_stable_repetitions", kMinStableRepetitions},
                             {"full_check_work", kFullCheckWork},
                             {"case_timeout_seconds", options.case_timeout_seconds},
                             {"breaker", options.breaker},
                             {"cases", cases.size()},
                             {"timers", nlohmann::json::object()}};
  info.protocol_json = protocol.dump();
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
  // One queue per device. GPUs run in parallel, one worker each; the CPU's cases run after
  // them, alone, so host timings are not disturbed by the GPU workers' threads.
  std::vector<std::vector<size_t>> queues(devices.size());
  for (size_t i = 0; i < cases.size(); ++i) queues[cases[i].device_index].push_back(i);
  const std::string failure_dump_dir =
      (std::filesystem::path(options.db_path).parent_path() / ("failures/run" + std::to_string(run_id))).string();
  std::vector<std::string> worker_command = options.worker_command;
  if (worker_command.empty()) worker_command = {"/proc/self/exe"};

  Progress progress(static_cast<int>(cases.size()), err, options.interactive);
  std::mutex record_mutex;  // the store, the progress output, the result list and the breaker
  Breaker breaker;
  std::vector<std::pair<size_t, ResultRecord>> finished;
  bool store_failed = false;

  auto run_queue = [&](size_t device_index) {
    const Device& device = devices[device_index];
    std::unique_ptr<WorkerProcess> worker;
    std::unique_ptr<DeviceExecutor> in_process_executor;
    std::unique_ptr<CaseRunner> in_process_runner;
    for (size_t case_index : queues[device_index]) {
      const CaseSpec& spec = cases[case_index];
      const Kernel& kernel = *spec.kernel;
      const std::string label = case_label(spec);
      {
        std::lock_guard<std::mutex> lock(record_mutex);
        progress.start_case(label);
      }
      ResultRecord result;
      result.kernel = kernel.name;
      result.problem = spec.problem;
      result.distribution = std::string(distribution_name(spec.distribution));
      result.seed = run_seed;
      result.device_id = device_ids[device_index];
      result.device_name = device.info.name;
      result.series_key = kernel.name + "|" + shape_string(spec.problem) + "|" + result.distribution + "|" +
                          device.info.name + "|" + info.env.build_type + " " + info.env.compiler;
      result.flops = attention_flops(spec.problem);
      result.bytes = attention_bytes(spec.problem);
      result.repro = "attnbench check --shape " + shell_quote(shape_string(spec.problem)) + " --kernels " +
                     kernel.name + " --dist " + result.distribution + " --seed " + std::to_string(run_seed) +
                     " --devices " + device.label();
      const std::string reason = unsupported_reason(kernel.support, spec.problem);
      std::optional<std::string> broken;
      if (options.breaker) {
        std::lock_guard<std::mutex> lock(record_mutex);
        broken = breaker.open_reason(kernel.name);
      }
      if (!reason.empty()) {
        result.status = ResultStatus::skipped;
        result.message = reason;
      } else if (broken) {
        result.status = ResultStatus::skipped;
        result.message = *broken;
      } else {
        CaseRequest request;
        request.name = spec.name;
        request.kernel = kernel.name;
        request.problem = spec.problem;
        request.distribution = result.distribution;
        request.seed = case_seed(run_seed, spec.problem, spec.distribution);
        request.check_only = options.check_only;
        request.repetitions = repetitions;
        request.max_case_seconds = max_case_seconds;
        request.measure_energy = options.measure_energy || suite.measure_energy;
        request.dump_dir = options.dump_dir;
        request.failure_dump_dir = failure_dump_dir;
        request.repro = result.repro;
        CaseOutcome outcome;
        if (options.isolate) {
          if (!worker) worker = std::make_unique<WorkerProcess>(worker_command, device.label());
          outcome = worker->run(request, std::chrono::seconds(options.case_timeout_seconds));
        } else {
          if (!in_process_runner) {
            in_process_executor = make_executor_in_process(device);
            in_process_runner = std::make_unique<CaseRunner>(*in_process_executor);
          }
          outcome = in_process_runner->run(request);
        }
        if (!outcome.timer.empty()) {
          std::lock_guard<std::mutex> lock(record_mutex);
          protocol["timers"][device.label()] = outcome.timer;
        }
        result.status = outcome.status;
        result.message = outcome.message;
        result.check = outcome.check;
        result.timing = outcome.timing;
        result.samples = outcome.samples;
        result.extra_memory_bytes = outcome.extra_memory_bytes;
        result.launches = outcome.launches;
        result.energy_j = outcome.energy_j;
        result.details_json = outcome.details_json;
        if (result.timing.timed) {
          result.flops_per_s = result.flops / result.timing.median_s;
          result.bytes_per_s = result.bytes / result.timing.median_s;
          const std::vector<CalibrationRecord>& ceilings = calibrations[device_index];
          result.fraction_of_peak_flops =
              result.flops_per_s / peak_flops_for(ceilings, std::string(dtype_name(spec.problem.input_dtype)));
          result.fraction_of_peak_bandwidth = result.bytes_per_s / peak_bandwidth(ceilings);
          if (kernel.bytes_moved) result.predicted_s = kernel.bytes_moved(spec.problem) / peak_bandwidth(ceilings);
        }
      }
      std::lock_guard<std::mutex> lock(record_mutex);
      if (options.breaker) breaker.record(label, result);
      if (Status s = store->add_result(run_id, result); !s.ok) {
        err << "error: storing " << spec.name << ": " << s.message << "\n";
        store_failed = true;
      }
      progress.finish_case(label, result);
      finished.emplace_back(case_index, std::move(result));
    }
  };

  std::vector<std::thread> gpu_threads;
  for (size_t d = 0; d < devices.size(); ++d) {
    if (devices[d].backend != Backend::cpu && !queues[d].empty()) gpu_threads.emplace_back(run_queue, d);
  }
  for (std::thread& t : gpu_threads) t.join();
  for (size_t d = 0; d < devices.size(); ++d) {
    if (devices[d].backend == Backend::cpu) run_queue(d);
  }
  std::sort(finished.begin(), finished.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<benchmark::BenchmarkReporter::Run> gbench_runs;
  for (const auto& [index, result] : finished) {
    const auto runs = gbench_runs_from_samples(cases[index].name, static_cast<int64_t>(index), result.samples);
    gbench_runs.insert(gbench_runs.end(), runs.begin(), runs.end());
  }

  std::vector<ResultRecord> results;
  for (auto& [index, result] : finished) results.push_back(std::move(result));
  if (Status s = store->finish_run(run_id, protocol.dump()); !s.ok) {
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

  if (!options.junit_path.empty()) {
    if (Status s = write_text_file(options.junit_path,
                                   junit_xml("attnbench " + info.suite, ci_cases_from_results(results)));
        !s.ok) {
      err << "error: --junit: " << s.message << "\n";
      store_failed = true;
    }
  }
  if (!options.summary_md_path.empty()) {
    if (Status s = write_text_file(options.summary_md_path, run_summary_markdown(run_id, info.suite, results));
        !s.ok) {
      err << "error: --summary-md: " << s.message << "\n";
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
