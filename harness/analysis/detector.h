// Inside the analysis room: one series judged against its own history (detector.cpp), shared
// with the kernel-wide aggregates (kernel_wide.cpp) and the run's analysis (regression.cpp).
// The rule itself is written out in regression.h.
#pragma once

#include <string>
#include <vector>

#include "harness/analysis/regression.h"

namespace attnbench {

bool is_suspicion(Verdict state);

// An open (confirmed) regression ends only once the series is back within this fraction of the
// threshold, so a step close to the threshold is one alert, not one per crossing.
constexpr double kHysteresis = 0.5;

// "+3.7 %"-style text of a relative change, for reasons.
std::string percent(double fraction);

// The newest result judged clearly: passed, timed, neither unclear nor without history. An
// unclear run in the middle of an open regression neither ends nor confirms it. nullptr: none.
const SeriesPoint* newest_clear(const std::vector<SeriesPoint>& history);
bool has_open_regression(const std::vector<SeriesPoint>& history);

// Both need input.candidate. `baseline` is compute_baseline(input.history).
PerformanceJudgement judge_performance(const SeriesInput& input, const Baseline& baseline,
                                       const DetectorOptions& options, double family_record = 0);
struct ExcursionRecord {
  int episodes = 0;
  double largest = 0;  // in thresholds
};
ExcursionRecord excursion_record(const std::vector<SeriesPoint>& history, int64_t before_run,
                                 double threshold, const std::string& chip);
AccuracyJudgement judge_accuracy(const SeriesInput& input, const Baseline& baseline,
                                 const DetectorOptions& options);

}  // namespace attnbench
