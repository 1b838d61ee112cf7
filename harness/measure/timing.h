// Timing driven by Google Benchmark: each case is a registered benchmark with UseManualTime();
// the iteration time is the backend's measurement of one forward (host clock on the CPU; device
// events on a GPU). A sample is one repetition (the mean of its iterations); all samples are
// kept. The harness chooses iterations and repetitions to fit the case's time budget.
#pragma once

#include <benchmark/benchmark.h>

#include <functional>
#include <string>
#include <vector>

#include "harness/core/records.h"
#include "reference/status.h"

namespace attnbench {

// Seconds taken by one forward, or a negative value with `error` set when the forward failed.
using TimedForward = std::function<double(std::string& error)>;
// Called after each repetition with its sample: the device adds what it reads once per
// repetition (NVML's SM clock and clock-event reasons on a GPU), never once per forward.
using RepetitionHook = std::function<void(Sample&)>;

// What one timed forward costs in wall-clock time. A GPU forward of 10 us also pays the L2
// flush, two events and a synchronize (tens of microseconds); a plan that counted device time
// only took thousands of forwards and seconds of wall time for a microsecond-scale case.
struct ForwardCost {
  double forward_s = 0;   // the forward, as its timer measures it (from the untimed warm-up)
  double overhead_s = 0;  // the rest of one timed forward, measured once per device
  double wall_s() const { return forward_s + overhead_s; }
};

// Aim each repetition at this much wall time, so host-clock jitter and launch overhead average
// out while a case still fits a short budget.
constexpr double kTargetRepetitionSeconds = 0.02;
// Repetitions stop early once the samples agree: NVBench's default rule, the relative standard
// deviation of the samples under 0.5 %, after at least kMinStableRepetitions samples (a rerun's
// Mann-Whitney test against its baseline run needs five a side to reach p < 0.01). A case whose
// budget runs out stops after kMinRepetitions.
constexpr double kStableRelativeStddev = 0.005;
constexpr int kMinStableRepetitions = 5;
constexpr int kMinRepetitions = 3;

struct TimingPlan {
  int max_repetitions = 5;
  int min_repetitions = kMinRepetitions;  // unless the budget allows fewer (one slow forward)
  int64_t iterations = 1;                 // per repetition
  double budget_s = 2.0;                  // wall-clock time for the repetitions
  double repetition_wall_s = 0;           // predicted wall time of one repetition
  // The repetitions that fit the budget (at most max_repetitions, at least one): what a case
  // costs when its samples never settle, the planner's conservative prediction.
  int repetitions_within_budget() const;
  double predicted_wall_s() const { return repetitions_within_budget() * repetition_wall_s; }
};

// Fits repetitions of about kTargetRepetitionSeconds of wall time into `max_case_seconds`,
// given the wall cost of one timed forward. Never fewer than one iteration; when one forward
// alone is slow, fewer repetitions (down to one when kMinRepetitions would take more than
// twice the budget).
TimingPlan plan_timing(const ForwardCost& cost, int repetitions, double max_case_seconds);

struct TimingResult {
  Status status;
  std::vector<Sample> samples;
  TimingSummary summary;
};

// Runs the plan's repetitions one at a time through Google Benchmark (each a registered
// benchmark with UseManualTime and the plan's iterations), calls `after_repetition` with each
// sample, and stops by the rule above. The summary records forwards timed, wall time spent and
// why it stopped.
TimingResult time_case(const std::string& name, const TimedForward& forward, const TimingPlan& plan,
                       const RepetitionHook& after_repetition = {});

// One case of an interleaved group: what time_case takes.
struct TimedCase {
  std::string name;
  TimedForward forward;
  TimingPlan plan;
  RepetitionHook after_repetition;
};

// Several cases timed round-robin (issue 41): each round runs one repetition of every case
// still timing, so what the host does meanwhile (a neighbour's burst, a clock that drifts)
// reaches all of them alike instead of whichever case it found. Each case keeps its own plan
// and stops by its own rule, its budget counted over its own repetitions. One result per case,
// in order; a case whose forward fails stops with the error and the others go on. time_case is
// this with one case.
std::vector<TimingResult> time_interleaved(const std::vector<TimedCase>& cases);

TimingSummary summarize_samples(const std::vector<Sample>& samples);

// Google Benchmark's own records of one case's repetitions, rebuilt from stored samples, so the
// JSON written from a run (or from the database) is what GB itself would write.
std::vector<benchmark::BenchmarkReporter::Run> gbench_runs_from_samples(
    const std::string& name, int64_t family_index, const std::vector<Sample>& samples);

// Writes Google Benchmark's JSON (accepted by GB's tools/compare.py) for the collected runs.
Status write_gbench_json(const std::string& path,
                         const std::vector<benchmark::BenchmarkReporter::Run>& runs);
// The same JSON to a stream (for --benchmark_format=json on stdout).
void write_gbench_json(std::ostream& out,
                       const std::vector<benchmark::BenchmarkReporter::Run>& runs);

}  // namespace attnbench
