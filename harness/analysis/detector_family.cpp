// The family-wise limit on a lone series (the rule: regression.h): the largest excursion that any
// series of the run made by itself, and came back from, within its looked-back history.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "harness/analysis/detector.h"

namespace attnbench {
namespace {

// statistics.h's median() of `values`, by selection in `scratch` (every series, every run, looks
// back over its whole history with it).
double median_in(const std::vector<double>& values, std::vector<double>& scratch) {
  scratch.assign(values.begin(), values.end());
  const size_t below = (scratch.size() - 1) / 2;
  const auto middle = scratch.begin() + static_cast<std::ptrdiff_t>(below);
  std::nth_element(scratch.begin(), middle, scratch.end());
  if (scratch.size() % 2 == 1) return *middle;
  const double high = *std::min_element(middle + 1, scratch.end());
  return *middle + 0.5 * (high - *middle);
}

}  // namespace

double FamilyExcursion::limit(double threshold) const {
  if (in_thresholds.ratio <= 0) return 0;
  return std::max(in_thresholds.ratio * threshold, in_size.change);
}

double relative_threshold(const Baseline& baseline, const DetectorOptions& options) {
  return std::max(options.min_change, options.spreads * baseline.spread / baseline.center);
}

namespace {

// One pass over `points` (in either direction) of largest_excursion.
Excursion largest_excursion_in(const std::vector<const SeriesPoint*>& points,
                               const RunLevels& levels, double threshold,
                               const DetectorOptions& options) {
  Excursion largest;
  // The reference: the median of the last K points within the threshold, so that it holds still
  // during an excursion (and a step that stays never comes back).
  std::vector<double> reference, scratch;
  Excursion open;  // the excursion under way; ratio 0 when none
  for (const SeriesPoint* point : points) {
    const auto level = levels.find(point->run_id);
    const double value =
        std::log(point->median_s) - (level != levels.end() ? level->second : point->level);
    if (reference.size() >= static_cast<size_t>(options.min_baseline_runs)) {
      const double change = std::exp(value - median_in(reference, scratch)) - 1;
      const double ratio = change / threshold;
      // Out beyond the threshold; back once within half of it, as an open regression ends: a
      // step at the threshold that flickers around it has not come back.
      if (ratio > 1 || (open.ratio > 0 && ratio > kHysteresis)) {
        if (ratio > open.ratio) open = {ratio, change, point->run_id, {}};
        continue;
      }
    }
    if (open.ratio > largest.ratio) largest = open;
    open = {};
    reference.push_back(value);
    if (reference.size() > static_cast<size_t>(options.window)) reference.erase(reference.begin());
  }
  return largest;
}

}  // namespace

Excursion largest_excursion(const std::vector<SeriesPoint>& history, const std::string& chip,
                            double threshold, const RunLevels& levels,
                            const DetectorOptions& options) {
  std::vector<const SeriesPoint*> points;
  for (const SeriesPoint& point : history) {
    if (point.status == ResultStatus::passed && is_timed(point) && point.chip == chip) {
      points.push_back(&point);
    }
  }
  // Forward from the oldest runs, and backward from the newest: the first runs a pass looks at
  // only make its reference, so an excursion among them is seen by the other pass.
  Excursion forward = largest_excursion_in(points, levels, threshold, options);
  Excursion backward = largest_excursion_in(
      std::vector<const SeriesPoint*>(points.rbegin(), points.rend()), levels, threshold, options);
  return backward.ratio > forward.ratio ? backward : forward;
}

Excursions measure_excursions(const std::vector<SeriesInput>& inputs,
                              const std::vector<SeriesAnalysis>& series, const RunLevels& levels,
                              const DetectorOptions& options) {
  Excursions excursions;
  excursions.own.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Baseline& baseline = series[i].baseline;
    const SeriesInput& input = inputs[i];
    if (!baseline.usable || input.history.empty()) continue;
    const std::string& chip = input.candidate ? input.candidate->chip : input.history.back().chip;
    Excursion& own = excursions.own[i];
    own = largest_excursion(input.history, chip, relative_threshold(baseline, options), levels,
                            options);
    own.series_key = input.key;
    FamilyExcursion& family = excursions.family;
    if (own.ratio > family.in_thresholds.ratio) family.in_thresholds = own;
    if (own.ratio > 0 && !(own.change <= family.in_size.change)) family.in_size = own;
  }
  return excursions;
}

}  // namespace attnbench
