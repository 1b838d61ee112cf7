#include "harness/timing.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "harness/statistics.h"

namespace attnbench {
namespace {

// GB's default unit. tools/compare.py prints times without decimals, so a coarser unit would
// show a 20 us GPU forward as 0 ms.
constexpr benchmark::TimeUnit kGbenchTimeUnit = benchmark::kNanosecond;

// Collects every repetition GB reports instead of printing it: the harness prints its own
// progress and tables, and stores the samples.
class CollectingReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) collected.push_back(run);
  }
  std::vector<Run> collected;
};

}  // namespace

TimingPlan plan_timing(double forward_seconds, int repetitions, double max_case_seconds) {
  TimingPlan plan;
  forward_seconds = std::max(forward_seconds, 1e-9);
  plan.repetitions = std::max(1, repetitions);
  const double per_repetition_budget = max_case_seconds / plan.repetitions;
  const double target = std::min(kTargetRepetitionSeconds, per_repetition_budget);
  plan.iterations = std::max<int64_t>(1, static_cast<int64_t>(target / forward_seconds));
  if (plan.iterations == 1 && forward_seconds * plan.repetitions > max_case_seconds) {
    const int fitting = static_cast<int>(max_case_seconds / forward_seconds);
    plan.repetitions =
        std::clamp(fitting, std::min(kMinRepetitions, plan.repetitions), plan.repetitions);
    if (forward_seconds * plan.repetitions > 2 * max_case_seconds) plan.repetitions = 1;
  }
  return plan;
}

TimingSummary summarize_samples(const std::vector<Sample>& samples) {
  TimingSummary summary;
  if (samples.empty()) return summary;
  std::vector<double> times;
  for (const Sample& s : samples) times.push_back(s.time_s);
  summary.timed = true;
  summary.median_s = median(times);
  summary.mean_s = mean(times);
  summary.min_s = *std::min_element(times.begin(), times.end());
  summary.max_s = *std::max_element(times.begin(), times.end());
  summary.stddev_s = sample_stddev(times);
  summary.cv = summary.mean_s > 0 ? summary.stddev_s / summary.mean_s : 0;
  summary.repetitions = static_cast<int>(samples.size());
  summary.iterations_per_repetition = samples.front().iterations;
  return summary;
}

TimingResult time_case(const std::string& name, const TimedForward& forward,
                       const TimingPlan& plan) {
  TimingResult result;
  std::string error;
  benchmark::ClearRegisteredBenchmarks();
  benchmark::RegisterBenchmark(name.c_str(),
                               [&forward, &error](benchmark::State& state) {
                                 for (auto _ : state) {
                                   const double seconds = forward(error);
                                   if (seconds < 0) {
                                     state.SkipWithError(error.c_str());
                                     break;
                                   }
                                   state.SetIterationTime(seconds);
                                 }
                               })
      ->UseManualTime()
      ->Unit(kGbenchTimeUnit)
      ->Iterations(plan.iterations)
      ->Repetitions(plan.repetitions)
      ->ReportAggregatesOnly(false);
  CollectingReporter collector;
  benchmark::RunSpecifiedBenchmarks(&collector, nullptr, ".");
  benchmark::ClearRegisteredBenchmarks();

  for (const auto& run : collector.collected) {
    if (run.error_occurred) {
      result.status = Status::Error(error.empty() ? run.error_message : error);
      return result;
    }
    if (run.run_type != benchmark::BenchmarkReporter::Run::RT_Iteration) continue;
    Sample sample;
    sample.repetition = static_cast<int>(result.samples.size());
    sample.iterations = run.iterations;
    sample.time_s = run.real_accumulated_time / static_cast<double>(run.iterations);
    result.samples.push_back(sample);
  }
  if (result.samples.empty()) {
    result.status = Status::Error("Google Benchmark reported no repetition for " + name);
    return result;
  }
  result.summary = summarize_samples(result.samples);
  return result;
}

std::vector<benchmark::BenchmarkReporter::Run> gbench_runs_from_samples(
    const std::string& name, int64_t family_index, const std::vector<Sample>& samples) {
  std::vector<benchmark::BenchmarkReporter::Run> runs;
  for (const Sample& sample : samples) {
    benchmark::BenchmarkReporter::Run run;
    run.run_name.function_name = name;
    run.run_name.iterations = "iterations:" + std::to_string(sample.iterations);
    run.run_name.repetitions = "repeats:" + std::to_string(samples.size());
    run.run_name.time_type = "manual_time";
    run.family_index = family_index;
    run.per_family_instance_index = 0;
    run.run_type = benchmark::BenchmarkReporter::Run::RT_Iteration;
    run.iterations = sample.iterations;
    run.repetitions = static_cast<int64_t>(samples.size());
    run.repetition_index = sample.repetition;
    run.threads = 1;
    run.time_unit = kGbenchTimeUnit;
    run.real_accumulated_time = sample.time_s * static_cast<double>(sample.iterations);
    // The device time is the only time measured; GB's CPU-time column repeats it.
    run.cpu_accumulated_time = run.real_accumulated_time;
    runs.push_back(run);
  }
  return runs;
}

void write_gbench_json(std::ostream& out,
                       const std::vector<benchmark::BenchmarkReporter::Run>& runs) {
  benchmark::JSONReporter reporter;
  reporter.SetOutputStream(&out);
  reporter.SetErrorStream(&out);
  benchmark::BenchmarkReporter::Context context;
  reporter.ReportContext(context);
  if (!runs.empty()) reporter.ReportRuns(runs);
  reporter.Finalize();
}

Status write_gbench_json(const std::string& path,
                         const std::vector<benchmark::BenchmarkReporter::Run>& runs) {
  std::ofstream out(path);
  if (!out) return Status::Error("cannot write Google Benchmark JSON to '" + path + "'");
  write_gbench_json(out, runs);
  return out ? Status::Ok() : Status::Error("error writing '" + path + "'");
}

}  // namespace attnbench
