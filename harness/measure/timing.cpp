#include "harness/measure/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <optional>

#include "harness/core/statistics.h"

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

int TimingPlan::repetitions_within_budget() const {
  const int fitting =
      repetition_wall_s > 0
          ? static_cast<int>(std::min<double>(budget_s / repetition_wall_s, max_repetitions))
          : max_repetitions;
  return std::clamp(fitting, std::max(1, min_repetitions), std::max(1, max_repetitions));
}

TimingPlan plan_timing(const ForwardCost& cost, int repetitions, double max_case_seconds) {
  TimingPlan plan;
  plan.max_repetitions = std::max(1, repetitions);
  plan.min_repetitions = std::min(kMinRepetitions, plan.max_repetitions);
  plan.budget_s = max_case_seconds;
  const double wall = std::max(cost.wall_s(), 1e-9);
  const double target = std::min(kTargetRepetitionSeconds, max_case_seconds / plan.max_repetitions);
  plan.iterations = std::max<int64_t>(1, static_cast<int64_t>(target / wall));
  plan.repetition_wall_s = static_cast<double>(plan.iterations) * wall;
  // One forward alone is slow: rather one sample than spend more than twice the budget.
  if (plan.min_repetitions * plan.repetition_wall_s > 2 * max_case_seconds)
    plan.min_repetitions = 1;
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
  for (const Sample& s : samples) summary.forwards_timed += s.iterations;
  return summary;
}

namespace {

// One repetition through Google Benchmark: a registered benchmark with UseManualTime whose
// iteration time is the forward's own timer; the sample is the mean over its iterations.
Status time_one_repetition(const std::string& name, const TimedForward& forward, int64_t iterations,
                           Sample& sample) {
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
      ->Iterations(iterations)
      ->Repetitions(1)
      ->ReportAggregatesOnly(false);
  CollectingReporter collector;
  benchmark::RunSpecifiedBenchmarks(&collector, nullptr, ".");
  benchmark::ClearRegisteredBenchmarks();
  for (const auto& run : collector.collected) {
    if (run.error_occurred) return Status::Error(error.empty() ? run.error_message : error);
    if (run.run_type != benchmark::BenchmarkReporter::Run::RT_Iteration) continue;
    sample.iterations = run.iterations;
    sample.time_s = run.real_accumulated_time / static_cast<double>(run.iterations);
    return Status::Ok();
  }
  return Status::Error("Google Benchmark reported no repetition for " + name);
}

bool samples_are_stable(const std::vector<Sample>& samples) {
  const TimingSummary summary = summarize_samples(samples);
  return summary.mean_s > 0 && summary.cv < kStableRelativeStddev;
}

}  // namespace

std::vector<TimingResult> time_interleaved(const std::vector<TimedCase>& cases) {
  using Clock = std::chrono::steady_clock;
  std::vector<TimingResult> results(cases.size());
  std::vector<double> elapsed(cases.size(), 0.0);  // each case's own repetitions' wall time
  std::vector<bool> timing(cases.size(), true);
  for (bool any = !cases.empty(); any;) {
    any = false;
    for (size_t c = 0; c < cases.size(); ++c) {
      if (!timing[c]) continue;
      const TimedCase& timed = cases[c];
      TimingResult& result = results[c];
      const Clock::time_point repetition_start = Clock::now();
      Sample sample;
      sample.repetition = static_cast<int>(result.samples.size());
      if (Status s = time_one_repetition(timed.name, timed.forward, timed.plan.iterations, sample);
          !s.ok) {
        result.status = s;
        timing[c] = false;
        continue;
      }
      if (timed.after_repetition) timed.after_repetition(sample);
      result.samples.push_back(sample);
      const double last =
          std::chrono::duration<double>(Clock::now() - repetition_start).count();
      elapsed[c] += last;
      const int done = static_cast<int>(result.samples.size());
      std::optional<TimingStop> stop;
      if (done >= kMinStableRepetitions && samples_are_stable(result.samples))
        stop = TimingStop::stable;
      else if (done >= timed.plan.max_repetitions)
        stop = TimingStop::repetitions;
      else if (done >= timed.plan.min_repetitions && elapsed[c] + last > timed.plan.budget_s)
        stop = TimingStop::budget;
      if (!stop) {
        any = true;
        continue;
      }
      timing[c] = false;
      result.summary = summarize_samples(result.samples);
      result.summary.wall_s = elapsed[c];
      result.summary.stop = stop;
    }
  }
  return results;
}

TimingResult time_case(const std::string& name, const TimedForward& forward, const TimingPlan& plan,
                       const RepetitionHook& after_repetition) {
  return time_interleaved({{name, forward, plan, after_repetition}}).front();
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
