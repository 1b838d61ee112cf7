// Timing driven by Google Benchmark: each case is a registered benchmark with UseManualTime();
// the iteration time is the backend's measurement of one forward (host clock on the CPU; device
// events on a GPU). A sample is one repetition (the mean of its iterations); all samples are
// kept. The harness chooses iterations and repetitions to fit the case's time budget.
#pragma once

#include <benchmark/benchmark.h>

#include <functional>
#include <string>
#include <vector>

#include "harness/records.h"
#include "reference/status.h"

namespace attnbench {

// Seconds taken by one forward, or a negative value with `error` set when the forward failed.
using TimedForward = std::function<double(std::string& error)>;

struct TimingPlan {
  int repetitions = 5;
  int64_t iterations = 1;  // per repetition
};

// Aim each repetition at this long, so host-clock jitter and launch overhead average out.
constexpr double kTargetRepetitionSeconds = 0.02;
constexpr int kMinRepetitions = 3;

// Fits `repetitions` of about kTargetRepetitionSeconds into `max_case_seconds`, given how long
// one forward took during the (untimed) warm-up. Never fewer than one iteration; fewer
// repetitions (down to kMinRepetitions, then 1) when one forward alone is slow.
TimingPlan plan_timing(double forward_seconds, int repetitions, double max_case_seconds);

struct TimingResult {
  Status status;
  std::vector<Sample> samples;
  TimingSummary summary;
};

TimingResult time_case(const std::string& name, const TimedForward& forward,
                       const TimingPlan& plan);

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
