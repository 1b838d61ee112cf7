// Inside the analysis room: one series judged against its own history (detector.cpp), shared
// with the kernel-wide aggregates (kernel_wide.cpp) and the run's analysis (regression.cpp).
// The rule itself is written out in regression.h.
#pragma once

#include <cstdint>
#include <map>
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

// A level (log) per run id: a run's level as measured today, against today's centers.
using RunLevels = std::map<int64_t, double>;

// Both need input.candidate. `baseline` is compute_baseline(input.history); `family` is the run's
// family excursion and `own` the series' own largest excursion (measure_excursions).
PerformanceJudgement judge_performance(const SeriesInput& input, const Baseline& baseline,
                                       const FamilyExcursion& family, const Excursion& own,
                                       const DetectorOptions& options);
AccuracyJudgement judge_accuracy(const SeriesInput& input, const Baseline& baseline,
                                 const DetectorOptions& options);

// Whether the host left the point's run clear: its level within level_tolerance of 1 and its
// scatter within max_scatter (what detectable.h calls a clear nightly).
bool run_is_clear(const SeriesPoint& point, const DetectorOptions& options);

// ---- the family-wise limit (detector_family.cpp)
// -------------------------------------------------

// The trip threshold, relative: more than both min_change and `spreads` spreads.
double relative_threshold(const Baseline& baseline, const DetectorOptions& options);

// The largest excursion of a series' history on `chip` that came back: a run slower than the
// median of the last K runs within the threshold before it (once there are min_baseline_runs of
// them) by more than `threshold` (relative), then a run back within half of it; looked for
// forward and backward in time. Each run's level is taken from `levels` (measured today), else
// the stored one. The ratio is the change in thresholds, 0 when none; the series key is empty.
Excursion largest_excursion(const std::vector<SeriesPoint>& history, const std::string& chip,
                            double threshold, const RunLevels& levels,
                            const DetectorOptions& options);

// Every series' largest excursion in thresholds (one per input, on the chip of its candidate,
// else of its newest result; none without a usable baseline) and the family excursion: the
// largest of them in thresholds, and in size.
struct Excursions {
  std::vector<Excursion> own;
  FamilyExcursion family;
};
Excursions measure_excursions(const std::vector<SeriesInput>& inputs,
                              const std::vector<SeriesAnalysis>& series, const RunLevels& levels,
                              const DetectorOptions& options);

}  // namespace attnbench
