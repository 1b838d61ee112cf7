// What one run produces, as plain structs: the contract between the runner and the store.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "reference/problem.h"

namespace attnbench {

// Where the inputs come from: standard normal; large_logits (q and k scaled by
// kLargeLogitsScale so scaled logits reach the hundreds: catches a missing max subtraction);
// outliers (N(0,1) plus, with probability 0.001, an extra N(0, 10^2), as in the FA3 FP8 study);
// sink (attention sinks: every query shares a direction with a few keys, whose scaled logits
// stand about 20 above the rest, so they take most of each row's weight and set K's amax; how P
// underflows in FP8 then depends on the order keys are visited). harness/measure/inputs.cpp
// draws them.
enum class Distribution : uint8_t { normal, large_logits, outliers, sink };
inline constexpr std::array kDistributions = {Distribution::normal, Distribution::large_logits,
                                       Distribution::outliers, Distribution::sink};
bool parse_distribution(const std::string& text, Distribution& distribution);
std::string_view distribution_name(Distribution distribution);
// "normal, large_logits, outliers, sink": what --dist and a suite accept.
std::string accepted_distribution_names();

constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

struct EnvironmentInfo {
  std::string git_sha;  // "unknown" outside a git checkout
  bool git_dirty = false;
  std::string build_type;    // Release, Debug, ...
  std::string build_flags;   // CMAKE_CXX_FLAGS + config flags
  std::string compiler;      // "GNU 12.2.0"
  std::string cuda_runtime;  // empty without CUDA
  std::string cuda_driver;
  std::string cudnn;           // "compiled 9.19.0, loaded 9.19.0"
  std::string cudnn_frontend;  // cudnn-frontend version compiled in
  std::string cublas;
  std::string blas;  // "OpenBLAS 0.3.21 (openmp)"
  std::string host;
  std::string cpu;
  std::string os;
};

// One field of an environment as attnbench names it to people ("driver", "580.65.06").
struct EnvironmentEntry {
  std::string what;
  std::string value;
};
// A run's environment field by field, the one list of what an environment is: what an alert's
// environment difference compares (harness/analysis/alert_wording.h) and what runs stores as
// environment_json, so that a reader comparing any two runs (the report's compare page) compares
// these entries and keeps no list of its own. The commit is not among them: every reader names
// it apart ("commits a..b").
std::vector<EnvironmentEntry> environment_entries(const EnvironmentInfo& env);

// The emulated device's kind (harness/measure/devices.cpp): a correctness device, never timed.
inline constexpr const char* kEmuDeviceKind = "emu";

struct DeviceInfo {
  std::string kind;  // "cpu", "cuda" or kEmuDeviceKind
  int ordinal = 0;
  std::string name;  // "Intel(R) Xeon(R) Processor", "NVIDIA H200"
  std::string uuid;  // the chip (GPU UUID); for a CPU, host name + model
  int sm_version = 0;
  int sm_count = 0;
  int threads = 0;  // CPU threads used by the kernels
  int64_t memory_bytes = 0;
  int64_t l2_bytes = 0;
  double clock_mhz = 0;
  double power_limit_w = 0;
  int ecc = -1;  // -1 unknown
  int persistence = -1;
  std::string extra_json;  // anything else, as a JSON object
};

struct RunInfo {
  std::string uuid;
  std::string started_at;  // ISO 8601 UTC
  std::string suite;
  std::string command;        // the exact command line
  std::string protocol_json;  // the measurement protocol's parameters
  EnvironmentInfo env;
  // What was asked for (suite, kernels, filter, devices, shard), so that runs of the same job
  // can be compared case for case.
  std::string selection;
  std::string shard;     // "2/4" for `run --shard 2/4`; empty for a whole suite
  int64_t rerun_of = 0;  // the run whose suspects this run re-measured (0: none)
  std::string merged_from;  // the database this run was merged from (empty: measured here)
};

// The number at "key" in a run's protocol_json (as the runner writes it: repetitions,
// max_case_seconds, a suite's detect_target); 0 when absent or not a number.
double protocol_number(const RunInfo& run, const std::string& key);

enum class ResultStatus : uint8_t { passed, failed, skipped, crashed, timeout, error };
std::string_view result_status_name(ResultStatus status);
// A result that ran its forward to the end and was checked: passed, or failed its check. A run
// with none measured nothing (exit 2; the gate then has nothing to judge).
inline bool was_measured(ResultStatus status) {
  return status == ResultStatus::passed || status == ResultStatus::failed;
}
// The inverse of result_status_name; nullopt for any other text.
std::optional<ResultStatus> parse_result_status(std::string_view text);

struct CheckSummary {
  bool checked = false;
  double max_abs_error = kNotMeasured;  // max |out - ref| over the checked rows
  double lowp_error = kNotMeasured;     // max |out_lowp - ref|
  double atol = kNotMeasured;
  double bound = kNotMeasured;  // 2 * lowp_error + atol
  double rel_l2 = kNotMeasured;
  double rmse = kNotMeasured;
  int64_t nan_count = 0;  // over the whole output
  int64_t inf_count = 0;
  int64_t rows_checked = 0;
  int64_t rows_total = 0;
  double lse_max_error = kNotMeasured;  // NaN when the kernel returns no LSE
  bool canaries_ok = true;
  bool repeatable = true;  // deterministic kernels: two runs bit-for-bit equal
};

struct Sample {
  int repetition = 0;
  double time_s = 0;  // mean time of one forward over the repetition's iterations
  int64_t iterations = 0;
  double sm_clock_mhz = kNotMeasured;
  std::string clock_reasons;
};
// The repetitions' times (seconds), in order.
std::vector<double> sample_times(const std::vector<Sample>& samples);
// The median SM clock of the repetitions that recorded one; NaN when none did.
double median_sample_clock(const std::vector<Sample>& samples);

// Why timing a case stopped: its samples were stable, it took every repetition asked for, or
// its wall-clock budget was spent (harness/timing.h has the rule).
enum class TimingStop : uint8_t { stable, repetitions, budget };
std::string_view timing_stop_name(TimingStop stop);
std::optional<TimingStop> parse_timing_stop(std::string_view text);

struct TimingSummary {
  bool timed = false;
  double median_s = kNotMeasured;
  double mean_s = kNotMeasured;
  double min_s = kNotMeasured;
  double max_s = kNotMeasured;
  double stddev_s = kNotMeasured;
  double cv = kNotMeasured;  // stddev / mean
  int repetitions = 0;
  int64_t iterations_per_repetition = 0;
  // What the measurement cost and why it ended (not derivable from the samples).
  int64_t forwards_timed = 0;
  double wall_s = kNotMeasured;  // wall-clock seconds spent in the timed repetitions
  std::optional<TimingStop> stop;
};

struct ResultRecord {
  std::string kernel;
  Problem problem;
  std::string distribution;  // normal, large_logits, outliers
  uint64_t seed = 0;
  int64_t device_id = 0;  // devices.id in the store
  std::string device_name;
  std::string series_key;  // kernel | shape | distribution | device model | build
  ResultStatus status = ResultStatus::error;
  std::string message;  // reason for skipped/failed/crashed
  CheckSummary check;
  TimingSummary timing;
  std::vector<Sample> samples;
  double flops = 0;
  double bytes = 0;
  double flops_per_s = kNotMeasured;
  double bytes_per_s = kNotMeasured;
  double fraction_of_peak_flops = kNotMeasured;  // vs the calibrated ceiling of its dtype
  double fraction_of_peak_bandwidth = kNotMeasured;
  int64_t extra_memory_bytes = -1;  // high-water mark of the tracking allocator; -1 unknown
  int launches = -1;                // kernel launches per forward; -1 unknown (CPU)
  double energy_j = kNotMeasured;   // per forward
  double predicted_s = kNotMeasured;
  std::string details_json;  // what the kernel reported (Plan::details): FP8 amax, engine, ...
  std::string repro;  // the command that reproduces this case
};

struct CalibrationRecord {
  std::string device_name;
  std::string device_uuid;
  std::string kind;     // "gemm" or "copy"
  std::string dtype;    // gemm: fp32/fp16/bf16/e4m3; copy: "bytes"
  double value = 0;     // FLOP/s for gemm, bytes/s for copy
  std::string details;  // how it was measured (shape, threads, repetitions)
  std::string measured_at;
};

// One phase of one profiled forward (`attnbench profile`, issue 17). The rows of one profile share
// its profile_id; the phase "gaps" holds the thread time no phase recorded (idle threads, work
// outside the kernel's phases), so a profile's shares add up to 1.
struct ProfilePhaseRecord {
  std::string profile_id;   // random uuid of the profiled forward
  std::string profiled_at;  // ISO 8601 UTC
  std::string kernel;
  std::string shape;  // shape_string
  std::string distribution;
  std::string device;     // the device's name (CPU model, "NVIDIA H200")
  double forward_s = 0;   // the recorded forward, as the device times a forward
  double median_s = 0;    // the median of the timed forwards, recorded by none
  int64_t threads = 0;    // tracks that did work: threads on the CPU, streams on a GPU
  int64_t extra_memory_bytes = 0;  // the plan's scratch high-water mark, as `run` measures it
  std::string name;                // the phase, the kernel's short name, "memcpy HtoD", "gaps"
  int64_t count = 0;      // its activities (scopes, launches) over all tracks
  double total_s = 0;     // track time
  double share = 0;       // of forward_s x threads
  std::string kind = "phase";   // phase, kernel, memcpy, memset, gaps (harness/measure/profile.h)
  std::string source = "phases";  // how the forward was recorded: phases, CUPTI
  // The launches the kernel declares for the forward (Kernel::expected_resources), beside what
  // was recorded; -1 when it declares none. Schema 10.
  int64_t expected_launches = -1;
};

}  // namespace attnbench
