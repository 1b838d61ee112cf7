#include "harness/regression.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <sstream>

#include "harness/statistics.h"

namespace attnbench {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

double normal_upper_tail(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

std::string percent(double fraction) {
  std::ostringstream text;
  text.precision(1);
  text << std::fixed << fraction * 100 << " %";
  return text.str();
}

// ---- Mann-Whitney: the exact null distribution -------------------------------------------------

// counts[u] = how many of the C(n1 + n2, n1) orderings of two tie-free samples give U = u.
// Built by placing the largest value last: if it belongs to the first sample it beats all n2
// values of the second (U grows by n2), otherwise U is unchanged.
std::vector<double> exact_u_counts(size_t n1, size_t n2) {
  // table[i][j]: the distribution for samples of sizes i and j.
  std::vector<std::vector<std::vector<double>>> table(n1 + 1,
                                                      std::vector<std::vector<double>>(n2 + 1));
  for (size_t i = 0; i <= n1; ++i) {
    for (size_t j = 0; j <= n2; ++j) {
      std::vector<double>& counts = table[i][j];
      counts.assign(i * j + 1, 0.0);
      if (i == 0 || j == 0) {
        counts[0] = 1;
        continue;
      }
      const std::vector<double>& largest_in_first = table[i - 1][j];
      const std::vector<double>& largest_in_second = table[i][j - 1];
      for (size_t u = 0; u < largest_in_first.size(); ++u) counts[u + j] += largest_in_first[u];
      for (size_t u = 0; u < largest_in_second.size(); ++u) counts[u] += largest_in_second[u];
    }
  }
  return table[n1][n2];
}

}  // namespace

MannWhitneyResult mann_whitney_u(const std::vector<double>& first,
                                 const std::vector<double>& second) {
  MannWhitneyResult result;
  const size_t n1 = first.size();
  const size_t n2 = second.size();
  if (n1 == 0 || n2 == 0) return result;

  // Ranks of the pooled sample, ties sharing their average rank.
  std::vector<std::pair<double, bool>> pooled;  // value, from the first sample
  for (double v : first) pooled.emplace_back(v, true);
  for (double v : second) pooled.emplace_back(v, false);
  std::sort(pooled.begin(), pooled.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  const size_t n = pooled.size();
  double first_rank_sum = 0;
  double tie_term = 0;  // sum of t^3 - t over groups of t tied values
  bool ties = false;
  for (size_t start = 0; start < n;) {
    size_t end = start + 1;
    while (end < n && pooled[end].first == pooled[start].first) ++end;
    const double tied = static_cast<double>(end - start);
    const double average_rank = (static_cast<double>(start + 1) + static_cast<double>(end)) / 2;
    for (size_t k = start; k < end; ++k) {
      if (pooled[k].second) first_rank_sum += average_rank;
    }
    if (tied > 1) {
      ties = true;
      tie_term += tied * tied * tied - tied;
    }
    start = end;
  }
  const double size1 = static_cast<double>(n1);
  const double size2 = static_cast<double>(n2);
  const double total = static_cast<double>(n);
  result.u = first_rank_sum - size1 * (size1 + 1) / 2;

  const double mean_u = size1 * size2 / 2;
  const double variance =
      size1 * size2 / 12 * ((total + 1) - tie_term / (total * (total - 1)));
  if (variance > 0) {
    const double sd = std::sqrt(variance);
    result.z = (result.u - mean_u) / sd;
    // Continuity correction: U moves in steps of at least one half.
    result.p_greater = normal_upper_tail((result.u - mean_u - 0.5) / sd);
    result.p_less = 1 - normal_upper_tail((result.u - mean_u + 0.5) / sd);
  } else {
    result.z = 0;  // every value tied: no evidence either way
    result.p_greater = 1;
    result.p_less = 1;
  }
  if (!ties && n1 <= kMannWhitneyExactMax && n2 <= kMannWhitneyExactMax) {
    const std::vector<double> counts = exact_u_counts(n1, n2);
    const double orderings = std::accumulate(counts.begin(), counts.end(), 0.0);
    const auto observed = static_cast<size_t>(std::llround(result.u));
    double at_least = 0;
    double at_most = 0;
    for (size_t u = 0; u < counts.size(); ++u) {
      if (u >= observed) at_least += counts[u];
      if (u <= observed) at_most += counts[u];
    }
    result.p_greater = at_least / orderings;
    result.p_less = at_most / orderings;
    result.exact = true;
  }
  result.p_two_sided = std::min(1.0, 2 * std::min(result.p_greater, result.p_less));
  return result;
}

// ---- change points -----------------------------------------------------------------------------

std::vector<size_t> pelt_change_points(const std::vector<double>& values, double penalty,
                                       size_t min_segment) {
  const size_t n = values.size();
  min_segment = std::max<size_t>(min_segment, 1);
  if (n < 2 * min_segment) return {};
  // Prefix sums: the cost of [a, b) is sum (x - mean)^2 = S2 - S1^2 / len.
  std::vector<double> sum(n + 1, 0.0), sum_squares(n + 1, 0.0);
  for (size_t i = 0; i < n; ++i) {
    sum[i + 1] = sum[i] + values[i];
    sum_squares[i + 1] = sum_squares[i] + values[i] * values[i];
  }
  auto cost = [&](size_t a, size_t b) {
    const double s = sum[b] - sum[a];
    return std::max(0.0, sum_squares[b] - sum_squares[a] - s * s / static_cast<double>(b - a));
  };

  // best[t]: the least penalized cost of values[0, t); previous[t]: where its last segment
  // begins. best[0] = -penalty so that the first segment carries no penalty.
  std::vector<double> best(n + 1, kInfinity);
  std::vector<size_t> previous(n + 1, 0);
  best[0] = -penalty;
  struct Candidate {
    size_t start;
    size_t pruned_at;  // 0 while not pruned
  };
  std::vector<Candidate> candidates = {{0, 0}};
  for (size_t t = min_segment; t <= n; ++t) {
    for (const Candidate& c : candidates) {
      if (t - c.start < min_segment) continue;
      const double value = best[c.start] + cost(c.start, t) + penalty;
      if (value < best[t]) {
        best[t] = value;
        previous[t] = c.start;
      }
    }
    // PELT's pruning: a start whose cost up to t already exceeds best[t] can never begin the
    // last segment of a longer prefix s, because splitting at t is then always cheaper. That
    // argument needs [t, s) to be a valid segment, so the pruned start leaves only once
    // s >= t + min_segment.
    std::vector<Candidate> kept;
    for (Candidate c : candidates) {
      if (c.pruned_at != 0 && t >= c.pruned_at + min_segment) continue;
      if (c.pruned_at == 0 && t - c.start >= min_segment &&
          best[c.start] + cost(c.start, t) > best[t]) {
        c.pruned_at = t;
      }
      kept.push_back(c);
    }
    candidates = std::move(kept);
    if (std::isfinite(best[t])) candidates.push_back({t, 0});
  }
  std::vector<size_t> changes;
  for (size_t t = n; previous[t] > 0; t = previous[t]) changes.push_back(previous[t]);
  std::reverse(changes.begin(), changes.end());
  return changes;
}

double change_point_penalty(const std::vector<double>& values, double min_sigma) {
  if (values.size() < 3) return kInfinity;
  std::vector<double> differences;
  for (size_t i = 1; i < values.size(); ++i) differences.push_back(values[i] - values[i - 1]);
  // A difference of two independent values has twice their variance.
  double sigma = kMadToSigma * median_absolute_deviation(differences) / std::sqrt(2.0);
  const double scale = std::fabs(median(values));
  sigma = std::max({sigma, min_sigma, 1e-9 * std::max(scale, 1.0)});
  return 3 * sigma * sigma * std::log(static_cast<double>(values.size()));
}

std::vector<double> despike(const std::vector<double>& values) {
  constexpr size_t kHalfWindow = 2;
  constexpr double kClampSigmas = 4;
  const size_t n = values.size();
  if (n < 2 * kHalfWindow + 1) return values;
  std::vector<double> running(n), residuals(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t low = i >= kHalfWindow ? i - kHalfWindow : 0;
    const size_t high = std::min(n, i + kHalfWindow + 1);
    running[i] = median(std::vector<double>(values.begin() + static_cast<std::ptrdiff_t>(low),
                                            values.begin() + static_cast<std::ptrdiff_t>(high)));
    residuals[i] = values[i] - running[i];
  }
  const double sigma = kMadToSigma * median_absolute_deviation(residuals);
  std::vector<double> clamped(n);
  for (size_t i = 0; i < n; ++i) {
    const double limit = kClampSigmas * sigma;
    clamped[i] = std::clamp(values[i], running[i] - limit, running[i] + limit);
  }
  return clamped;
}

// ---- verdict names -----------------------------------------------------------------------------

namespace {
constexpr std::array kVerdicts = {Verdict::ok,       Verdict::improved,  Verdict::suspected,
                                  Verdict::confirmed, Verdict::outlier,   Verdict::ambiguous,
                                  Verdict::insufficient_history};
}  // namespace

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::ok:
      return "ok";
    case Verdict::improved:
      return "improved";
    case Verdict::suspected:
      return "suspected";
    case Verdict::confirmed:
      return "confirmed";
    case Verdict::outlier:
      return "outlier";
    case Verdict::ambiguous:
      return "ambiguous";
    case Verdict::insufficient_history:
      return "insufficient_history";
  }
  return "unknown";
}

std::optional<Verdict> parse_verdict(std::string_view text) {
  for (Verdict verdict : kVerdicts) {
    if (verdict_name(verdict) == text) return verdict;
  }
  return std::nullopt;
}

// ---- baseline and trips ------------------------------------------------------------------------

bool is_timed(const SeriesPoint& point) {
  return std::isfinite(point.median_s) && point.median_s > 0;
}

double level_free_log(const SeriesPoint& point) { return std::log(point.median_s) - point.level; }

bool counts_for_baseline(const SeriesPoint& point) {
  if (point.status != ResultStatus::passed || !is_timed(point)) return false;
  switch (point.state) {
    case Verdict::ok:
    case Verdict::improved:
    case Verdict::insufficient_history:
      return true;
    case Verdict::suspected:
      return point.chip_changed;
    case Verdict::confirmed:
    case Verdict::outlier:
    case Verdict::ambiguous:
      return false;
  }
  return false;
}

Baseline compute_baseline(const std::vector<SeriesPoint>& history, const DetectorOptions& options) {
  Baseline baseline;
  std::vector<double> logs, clocks, cvs, errors;
  for (size_t i = history.size(); i-- > 0 && baseline.points.size() <
                                                 static_cast<size_t>(options.window);) {
    const SeriesPoint& point = history[i];
    if (!counts_for_baseline(point)) continue;
    baseline.points.push_back(i);
    logs.push_back(level_free_log(point));
    if (std::isfinite(point.clock_mhz)) clocks.push_back(point.clock_mhz);
    if (std::isfinite(point.cv)) cvs.push_back(point.cv);
    if (std::isfinite(point.error)) errors.push_back(point.error);
    if (!point.chip.empty() &&
        std::find(baseline.chips.begin(), baseline.chips.end(), point.chip) ==
            baseline.chips.end()) {
      baseline.chips.push_back(point.chip);
    }
  }
  if (logs.empty()) return baseline;
  // Logs make the spread relative; for spreads of a few percent it equals MAD / center.
  const double center_log = median(logs);
  size_t nearest = 0;
  for (size_t k = 1; k < logs.size(); ++k) {
    if (std::fabs(logs[k] - center_log) < std::fabs(logs[nearest] - center_log)) nearest = k;
  }
  baseline.representative = baseline.points[nearest];
  const double relative_spread =
      std::max(kMadToSigma * median_absolute_deviation(logs), options.spread_floor);
  baseline.center = std::exp(center_log);
  baseline.spread = baseline.center * relative_spread;
  baseline.usual_clock = clocks.empty() ? kNotMeasured : median(clocks);
  baseline.usual_cv = cvs.empty() ? kNotMeasured : median(cvs);
  baseline.error = errors.empty() ? kNotMeasured : *std::max_element(errors.begin(), errors.end());
  const double threshold = std::max(options.min_change, options.spreads * relative_spread);
  for (double value : logs) {
    baseline.wide_points += std::fabs(std::exp(value - center_log) - 1) > threshold;
  }
  baseline.usable = logs.size() >= static_cast<size_t>(options.min_baseline_runs);
  return baseline;
}

Trip trip(const Baseline& baseline, double level_free_log_median, const DetectorOptions& options) {
  Trip result;
  if (!std::isfinite(baseline.center) || !std::isfinite(level_free_log_median)) return result;
  result.change = std::exp(level_free_log_median - std::log(baseline.center)) - 1;
  result.threshold =
      std::max(options.min_change, options.spreads * baseline.spread / baseline.center);
  result.slower = result.change > result.threshold;
  result.faster = -result.change > result.threshold;
  return result;
}

// ---- groups of series --------------------------------------------------------------------------

namespace {

std::vector<std::string> split_key(const std::string& key) {
  std::vector<std::string> fields;
  size_t start = 0;
  for (size_t bar; (bar = key.find('|', start)) != std::string::npos; start = bar + 1) {
    fields.push_back(key.substr(start, bar - start));
  }
  fields.push_back(key.substr(start));
  return fields;
}

constexpr size_t kSeriesKeyFields = 5;  // kernel | shape | distribution | device | build

}  // namespace

std::string group_key(const std::string& series_key) {
  const std::vector<std::string> fields = split_key(series_key);
  if (fields.size() != kSeriesKeyFields) return series_key;
  return fields[0] + "|*|*|" + fields[3] + "|" + fields[4];
}

std::string kernel_of_series_key(const std::string& series_key) {
  return split_key(series_key).front();
}

std::string shape_of_series_key(const std::string& series_key) {
  const std::vector<std::string> fields = split_key(series_key);
  if (fields.size() != kSeriesKeyFields) return series_key;
  return fields[1] + (fields[2] == "normal" ? "" : " dist=" + fields[2]);
}

// ---- judging one run ---------------------------------------------------------------------------

namespace {

bool is_suspicion(Verdict state) { return state == Verdict::suspected || state == Verdict::confirmed; }

// An open (confirmed) regression ends only once the series is back within this fraction of the
// threshold, so a step close to the threshold is one alert, not one per crossing.
constexpr double kHysteresis = 0.5;

// The newest result judged clearly: passed, timed, neither unclear nor without history. An
// unclear run in the middle of an open regression neither ends nor confirms it.
const SeriesPoint* newest_clear(const std::vector<SeriesPoint>& history) {
  for (size_t i = history.size(); i-- > 0;) {
    const SeriesPoint& point = history[i];
    if (point.status == ResultStatus::passed && is_timed(point) &&
        point.state != Verdict::ambiguous && point.state != Verdict::insufficient_history) {
      return &point;
    }
  }
  return nullptr;
}

bool has_open_regression(const std::vector<SeriesPoint>& history) {
  const SeriesPoint* clear = newest_clear(history);
  return clear != nullptr && clear->state == Verdict::confirmed;
}

// Why a slower result cannot be taken at face value; empty when it can. `run_wide` says the
// reason is the whole run's (its level or scatter): a rerun in the same busy hour does not
// settle that, only a later run can.
std::string ambiguity(const Baseline& baseline, const SeriesPoint& point,
                      const DetectorOptions& options, bool* run_wide = nullptr) {
  if (run_wide != nullptr) *run_wide = false;
  std::ostringstream why;
  why.precision(3);
  if (std::isfinite(point.clock_mhz) && std::isfinite(baseline.usual_clock) &&
      baseline.usual_clock > 0 &&
      std::fabs(point.clock_mhz / baseline.usual_clock - 1) > options.clock_tolerance) {
    why << "SM clock " << point.clock_mhz << " MHz, usual " << baseline.usual_clock << " MHz";
    return why.str();
  }
  if (std::fabs(std::exp(point.level) - 1) > options.level_tolerance) {
    if (run_wide != nullptr) *run_wide = true;
    why << "the whole run was " << percent(std::exp(point.level) - 1)
        << " off its usual level (a busy host, a throttled device, or a change that slows "
           "everything)";
    return why.str();
  }
  if (std::isfinite(point.scatter) && point.scatter > options.max_scatter) {
    if (run_wide != nullptr) *run_wide = true;
    why << "the run's series scattered " << point.scatter
        << "x more than usual around its level (a busy host)";
    return why.str();
  }
  if (std::isfinite(point.cv) && std::isfinite(baseline.usual_cv) &&
      point.cv > std::max(options.noisy_cv_floor, options.noisy_cv_factor * baseline.usual_cv)) {
    why << "too noisy: repetitions' CV " << percent(point.cv) << ", usual "
        << percent(baseline.usual_cv);
    return why.str();
  }
  if (baseline.wide_points >= options.max_wide_points) {
    why << "too noisy: " << baseline.wide_points << " of its " << baseline.points.size()
        << " baseline runs lie beyond the threshold from its center (more than one speed)";
    return why.str();
  }
  if (baseline.spread / baseline.center > options.noisy_spread) {
    why << "too noisy: the series' run-to-run spread is " << percent(baseline.spread / baseline.center)
        << " of its center";
    return why.str();
  }
  return {};
}

// How many of the series' recent results an earlier analysis set aside as outliers or unclear.
int recent_excursions(const std::vector<SeriesPoint>& history, const DetectorOptions& options) {
  int excursions = 0;
  const size_t window = std::min(history.size(), static_cast<size_t>(options.erratic_window));
  for (size_t i = history.size() - window; i < history.size(); ++i) {
    excursions += history[i].state == Verdict::outlier || history[i].state == Verdict::ambiguous;
  }
  return excursions;
}

// A confirmation measures the same slowdown as the first trip: the two changes differ by less
// than the threshold, or by less than half the change. A host that was merely busier during one
// of them does not agree with itself this way.
bool agrees(double first_change, double second_change, double threshold) {
  return std::fabs(second_change - first_change) <= std::max(threshold, 0.5 * first_change);
}

bool on_new_chip(const Baseline& baseline, const SeriesPoint& point) {
  return !point.chip.empty() && !baseline.chips.empty() &&
         std::find(baseline.chips.begin(), baseline.chips.end(), point.chip) ==
             baseline.chips.end();
}

std::vector<double> level_free_samples(const std::vector<double>& samples, double level) {
  std::vector<double> scaled;
  for (double s : samples) scaled.push_back(s * std::exp(-level));
  return scaled;
}

PerformanceJudgement judge_performance(const SeriesInput& input, const Baseline& baseline,
                                       const DetectorOptions& options) {
  PerformanceJudgement judgement;
  const SeriesPoint& candidate = *input.candidate;
  const SeriesPoint* previous = input.history.empty() ? nullptr : &input.history.back();
  const SeriesPoint* previous_clear = newest_clear(input.history);
  if (candidate.status != ResultStatus::passed || !is_timed(candidate)) return judgement;
  if (!baseline.usable) {
    judgement.state = Verdict::insufficient_history;
    return judgement;
  }
  judgement.trip = trip(baseline, level_free_log(candidate), options);
  judgement.chip_changed = on_new_chip(baseline, candidate);
  const bool previous_suspicion = previous_clear != nullptr && is_suspicion(previous_clear->state);
  const SeriesPoint* rerun =
      input.rerun && input.rerun->status == ResultStatus::passed && is_timed(*input.rerun)
          ? &*input.rerun
          : nullptr;
  if (rerun != nullptr) {
    judgement.rerun_trip = trip(baseline, level_free_log(*rerun), options);
    if (!input.rerun_samples.empty() && !input.baseline_samples.empty()) {
      judgement.mann_whitney =
          mann_whitney_u(level_free_samples(input.rerun_samples, rerun->level),
                         level_free_samples(input.baseline_samples, input.baseline_samples_level));
    }
  }
  // A confirmation must not rest on the level estimate alone: the result is slower in
  // absolute terms too (a host that got faster than its baseline's would otherwise make every
  // series it sped up less look slower).
  const bool raw_slower = trip(baseline, std::log(candidate.median_s), options).slower;
  const bool rerun_raw_slower =
      rerun != nullptr && trip(baseline, std::log(rerun->median_s), options).slower;
  const bool rerun_agrees =
      rerun != nullptr && judgement.rerun_trip.slower && raw_slower && rerun_raw_slower &&
      ambiguity(baseline, *rerun, options).empty() &&
      agrees(judgement.trip.change, judgement.rerun_trip.change, judgement.trip.threshold) &&
      (!judgement.mann_whitney || judgement.mann_whitney->p_greater < options.mann_whitney_alpha);
  const int excursions = recent_excursions(input.history, options);
  const bool erratic = excursions >= options.erratic_runs;
  // An open (confirmed) regression continues; a suspicion is confirmed by a next run that is
  // slower in absolute terms too and agrees with it in size.
  // Where the previous clear run's suspicion began: the run a confirmation dates from.
  const int64_t suspicion_start =
      !previous_suspicion                 ? candidate.run_id
      : previous_clear->since_run_id != 0 ? previous_clear->since_run_id
                                          : previous_clear->run_id;
  const bool previous_agrees =
      previous_suspicion &&
      (previous_clear->state == Verdict::confirmed ||
       (raw_slower && (!std::isfinite(previous_clear->change) ||
                       agrees(previous_clear->change, judgement.trip.change, judgement.trip.threshold))));

  if (judgement.trip.slower) {
    bool run_wide = false;
    const std::string unclear = ambiguity(baseline, candidate, options, &run_wide);
    const bool structural_noise = baseline.spread / baseline.center > options.noisy_spread ||
                                  baseline.wide_points >= options.max_wide_points;
    if (!unclear.empty()) {
      // A clean rerun settles a doubt about this result's clock or repetitions; not one about
      // a busy run (the rerun shares its hour) nor a series too noisy to judge alone.
      if (rerun != nullptr && !structural_noise && !run_wide &&
          ambiguity(baseline, *rerun, options).empty()) {
        if (rerun_agrees && !judgement.chip_changed && !erratic &&
            (!input.host_timed || previous_agrees)) {
          judgement.state = Verdict::confirmed;
          // Where the previous run agreed, the regression began with its suspicion.
          judgement.since_run_id = previous_agrees ? suspicion_start : candidate.run_id;
          judgement.reason = "run was unclear (" + unclear + "); its rerun " +
                             std::to_string(rerun->run_id) + " is clean and slower too" +
                             (previous_agrees ? ", and so was run " +
                                                    std::to_string(previous_clear->run_id)
                                              : std::string());
        } else if (!judgement.rerun_trip.slower) {
          judgement.state = Verdict::outlier;
          judgement.since_run_id = candidate.run_id;
          judgement.reason = "run was unclear (" + unclear + "); its rerun " +
                             std::to_string(rerun->run_id) + " is back within the baseline";
        } else {
          judgement.state = Verdict::ambiguous;
          judgement.reason = unclear;
        }
      } else {
        judgement.state = Verdict::ambiguous;
        judgement.reason = unclear;
      }
    } else if (judgement.chip_changed && previous_suspicion &&
               previous_clear->state == Verdict::confirmed) {
      // Not a new confirmation: a regression established on the old chip is still there.
      judgement.state = Verdict::confirmed;
      judgement.since_run_id = previous_clear->since_run_id;
      judgement.reason = "open since run " + std::to_string(previous_clear->since_run_id) +
                         "; still slower on the new chip " + candidate.chip;
    } else if (judgement.chip_changed) {
      judgement.state = Verdict::suspected;
      judgement.since_run_id = candidate.run_id;
      judgement.reason = "on chip " + candidate.chip +
                         ", which the baseline never ran on: a chip change alone is never a "
                         "confirmed regression";
    } else if (rerun != nullptr && !judgement.rerun_trip.slower) {
      judgement.state = Verdict::outlier;
      judgement.since_run_id = candidate.run_id;
      judgement.reason = "rerun " + std::to_string(rerun->run_id) + " is back within the baseline";
    } else if (erratic && !(previous_suspicion && previous_clear->state == Verdict::confirmed)) {
      judgement.state = Verdict::suspected;
      judgement.since_run_id = previous_suspicion ? previous_clear->since_run_id : candidate.run_id;
      judgement.reason = "erratic series: " + std::to_string(excursions) + " of its last " +
                         std::to_string(std::min<size_t>(input.history.size(), options.erratic_window)) +
                         " runs were outliers or unclear, so it is not confirmed on its own (its "
                         "kernel-wide aggregate still is)";
    } else if (previous_suspicion && !previous_clear->chip_changed && previous_agrees &&
               (!input.host_timed || previous_clear->state == Verdict::confirmed ||
                rerun_agrees)) {
      judgement.state = Verdict::confirmed;
      judgement.since_run_id = suspicion_start;
      judgement.reason = "run " + std::to_string(previous_clear->run_id) + " was slower too" +
                         (input.host_timed && previous_clear->state != Verdict::confirmed
                              ? ", and so is rerun " + std::to_string(rerun->run_id)
                              : std::string());
    } else if (rerun != nullptr && rerun_agrees && !input.host_timed) {
      judgement.state = Verdict::confirmed;
      judgement.since_run_id = candidate.run_id;
      judgement.reason = "rerun " + std::to_string(rerun->run_id) + " is slower too";
    } else {
      judgement.state = Verdict::suspected;
      // A suspicion that began on a new chip carries its start forward.
      judgement.since_run_id = previous_suspicion && previous_clear->chip_changed
                                   ? previous_clear->since_run_id
                                   : candidate.run_id;
      judgement.reason = input.host_timed && rerun_agrees
                             ? "rerun " + std::to_string(rerun->run_id) +
                                   " is slower too; a host-timed (CPU) series also needs the "
                                   "next run to confirm"
                         : !raw_slower
                             ? "slower than the run's other series, but not in absolute terms "
                               "(the whole run was " + percent(std::exp(candidate.level) - 1) +
                                   " off): awaiting a run that shows it both ways"
                         : rerun != nullptr
                             ? "rerun " + std::to_string(rerun->run_id) +
                                   " is slower but does not confirm (unclear, a different size, "
                                   "or not significant by Mann-Whitney); awaiting the next run"
                             : "awaiting confirmation (rerun, or the next run)";
    }
  } else if (previous_suspicion && previous_clear->state == Verdict::confirmed &&
             judgement.trip.change > kHysteresis * judgement.trip.threshold) {
    judgement.state = Verdict::confirmed;
    judgement.since_run_id = previous_clear->since_run_id;
    judgement.reason = "open since run " + std::to_string(previous_clear->since_run_id) +
                       ": not yet back within half the threshold";
  } else if (judgement.trip.faster) {
    judgement.state = Verdict::improved;
    judgement.since_run_id = candidate.run_id;
  }
  judgement.previous_reverted =
      previous != nullptr && previous->state == Verdict::suspected &&
      (judgement.state == Verdict::ok || judgement.state == Verdict::improved);
  return judgement;
}

AccuracyJudgement judge_accuracy(const SeriesInput& input, const Baseline& baseline,
                                 const DetectorOptions& options) {
  AccuracyJudgement judgement;
  const SeriesPoint& candidate = *input.candidate;
  const SeriesPoint* previous = input.history.empty() ? nullptr : &input.history.back();
  if (candidate.status != ResultStatus::passed || !std::isfinite(candidate.error) ||
      !baseline.usable || !std::isfinite(baseline.error) || baseline.error <= 0) {
    return judgement;
  }
  judgement.ratio = candidate.error / baseline.error;
  const bool grew = judgement.ratio > options.accuracy_growth;
  if (grew) {
    const bool rerun_grew = input.rerun && std::isfinite(input.rerun->error) &&
                            input.rerun->error / baseline.error > options.accuracy_growth;
    if (previous != nullptr && is_suspicion(previous->accuracy_state)) {
      judgement.state = Verdict::confirmed;
      judgement.since_run_id = previous->accuracy_since_run_id != 0
                                   ? previous->accuracy_since_run_id
                                   : previous->run_id;
    } else if (input.rerun && std::isfinite(input.rerun->error)) {
      judgement.state = rerun_grew ? Verdict::confirmed : Verdict::outlier;
      judgement.since_run_id = candidate.run_id;
    } else {
      judgement.state = Verdict::suspected;
      judgement.since_run_id = candidate.run_id;
    }
  }
  judgement.previous_reverted =
      !grew && previous != nullptr && previous->accuracy_state == Verdict::suspected;
  return judgement;
}

// ---- run levels ------------------------------------------------------------------------------

// One series at one run: log(median) - log(its baseline's center), before any level is taken out.
struct RunDeviation {
  const std::string* group;
  double deviation;
  double relative_spread;  // of its baseline
};

double median_deviation(const std::vector<RunDeviation>& deviations) {
  std::vector<double> values;
  for (const RunDeviation& d : deviations) values.push_back(d.deviation);
  return median(values);
}

// The groups (kernels) whose series moved together by more than min_change against the level of
// the whole run: a kernel that changed, or one a busy host slows more than the others. Largest
// move first, and only while the others keep at least half the series: when most kernels moved
// apart, the run as a whole is the best level there is.
std::set<std::string> moved_groups(const std::vector<RunDeviation>& deviations,
                                   const DetectorOptions& options) {
  std::set<std::string> moved;
  if (deviations.size() < static_cast<size_t>(options.min_series_for_run_level)) return moved;
  const double level = median_deviation(deviations);
  std::map<std::string, std::vector<double>> by_group;
  for (const RunDeviation& d : deviations) by_group[*d.group].push_back(d.deviation);
  std::vector<std::pair<double, const std::string*>> moves;  // |move|, group
  for (const auto& [group, values] : by_group) {
    const double move = std::fabs(std::exp(median(values) - level) - 1);
    if (values.size() >= static_cast<size_t>(options.min_series_for_group) && move > options.min_change) {
      moves.emplace_back(move, &group);
    }
  }
  std::sort(moves.begin(), moves.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  size_t left = deviations.size();
  for (const auto& [move, group] : moves) {
    const size_t size = by_group[*group].size();
    if (2 * (left - size) < deviations.size() ||
        left - size < static_cast<size_t>(options.min_series_for_run_level)) {
      break;
    }
    moved.insert(*group);
    left -= size;
  }
  return moved;
}

// Passed, timed, and not set aside as a regression (suspected or confirmed; a chip-change
// suspicion does count).
bool counts_for_group_history(const SeriesPoint& point) {
  return point.status == ResultStatus::passed && is_timed(point) &&
         (!is_suspicion(point.state) || (point.state == Verdict::suspected && point.chip_changed));
}

// A kernel-wide aggregate against its runs' levels: aggregate = center + slope x level. The slope
// is Theil and Sen's (the median of the slopes between pairs of runs), over the pairs whose
// levels differ by at least load_level_gap (closer ones measure only noise); 0 when fewer than
// min_baseline_runs such pairs exist (a quiet history, as on a GPU), and at most
// max_load_sensitivity either way. The center is the median of aggregate - slope x level.
struct LoadFit {
  double center = 0;
  double slope = 0;
  double expected(double level) const { return center + slope * level; }
};

LoadFit fit_load(const std::vector<double>& levels, const std::vector<double>& aggregates,
                 const DetectorOptions& options) {
  LoadFit fit;
  std::vector<double> slopes;
  for (size_t i = 0; i < levels.size(); ++i) {
    for (size_t j = i + 1; j < levels.size(); ++j) {
      const double gap = levels[j] - levels[i];
      if (std::fabs(gap) >= options.load_level_gap) slopes.push_back((aggregates[j] - aggregates[i]) / gap);
    }
  }
  if (slopes.size() >= static_cast<size_t>(options.min_baseline_runs)) {
    fit.slope = std::clamp(median(slopes), -options.max_load_sensitivity, options.max_load_sensitivity);
  }
  std::vector<double> centers;
  for (size_t k = 0; k < levels.size(); ++k) centers.push_back(aggregates[k] - fit.slope * levels[k]);
  fit.center = median(centers);
  return fit;
}

// One run's series as the kernel-wide aggregates see them, with the kernels that moved as a whole.
struct RunSeries {
  std::vector<RunDeviation> deviations;
  std::set<std::string> moved;
};

// The run's level as a kernel-wide aggregate sees it: from the other kernels' series, less those
// of kernels that moved as a whole (0 when too few are left, as for any run without enough
// series).
double level_without(const RunSeries& run, const std::string& group, const DetectorOptions& options) {
  std::vector<double> others;
  for (const RunDeviation& d : run.deviations) {
    if (*d.group != group && !run.moved.count(*d.group)) others.push_back(d.deviation);
  }
  return others.size() >= static_cast<size_t>(options.min_series_for_run_level) ? median(others) : 0;
}

// The aggregate of a group at one run: the median over its members of their level-free change
// against their own centers.
struct GroupMember {
  const SeriesInput* input;
  const Baseline* baseline;
};

// A member's change at one run against its own center, with the run's level taken out: the
// level measured without the group's own series (`levels_without_group`, by run id), so a kernel
// that slowed as a whole cannot carry the level with it and hide part of its own slowdown.
using RunLevels = std::map<int64_t, double>;

double member_deviation(const GroupMember& member, const SeriesPoint& point, double level) {
  return std::log(point.median_s) - level - std::log(member.baseline->center);
}

double level_at(const RunLevels& levels, int64_t run_id) {
  const auto found = levels.find(run_id);
  return found == levels.end() ? 0 : found->second;
}

GroupAnalysis judge_group(const std::string& key, const std::vector<GroupMember>& members,
                          const RunLevels& levels_without_group, const GroupPrior& prior,
                          const DetectorOptions& options) {
  GroupAnalysis group;
  group.group = key;
  group.members = members.size();

  // The aggregate's own history: for each earlier run, the median deviation over its members
  // (at least half of them) that were not then suspected of a regression of their own, at the
  // runs where the kernel as a whole did not trip. Unlike a
  // series' baseline it keeps the runs a busy host made unclear: they show how the kernel feels
  // one, and a median over many shapes is not thrown by a few strays.
  std::map<int64_t, std::vector<double>> by_run;
  std::vector<std::string> chips;
  std::vector<double> usual_clocks;
  for (const GroupMember& member : members) {
    for (const SeriesPoint& point : member.input->history) {
      if (!counts_for_group_history(point) || prior.set_aside_runs.count(point.run_id)) continue;
      by_run[point.run_id].push_back(
          member_deviation(member, point, level_at(levels_without_group, point.run_id)));
    }
    for (const std::string& chip : member.baseline->chips) {
      if (std::find(chips.begin(), chips.end(), chip) == chips.end()) chips.push_back(chip);
    }
    if (std::isfinite(member.baseline->usual_clock)) usual_clocks.push_back(member.baseline->usual_clock);
    if (!member.input->history.empty()) {
      group.previous_run_id = std::max(group.previous_run_id, member.input->history.back().run_id);
    }
  }
  std::vector<double> aggregates, levels;
  for (auto run = by_run.rbegin(); run != by_run.rend(); ++run) {
    if (2 * run->second.size() < members.size()) continue;
    aggregates.push_back(median(run->second));
    levels.push_back(level_at(levels_without_group, run->first));
    if (aggregates.size() == static_cast<size_t>(options.window)) break;
  }
  if (aggregates.size() < static_cast<size_t>(options.min_baseline_runs)) {
    group.state = Verdict::insufficient_history;
    return group;
  }
  // The aggregate expected at a run of a given level: a kernel can feel a busy host more or less
  // than the median series does (on the project's shared CPU host, cpu.naive slows 1.8x as much
  // as the run and cpu.flash 0.85x), which no single level can take out.
  const LoadFit fit = fit_load(levels, aggregates, options);
  group.load_sensitivity = fit.slope;
  std::vector<double> residuals;
  for (size_t k = 0; k < aggregates.size(); ++k) {
    residuals.push_back(aggregates[k] - fit.expected(levels[k]));
  }
  group.spread = std::max(kMadToSigma * median_absolute_deviation(residuals), options.spread_floor);
  auto aggregate_trip = [&](auto point_of) {
    std::vector<double> deviations;
    int64_t at_run = 0;
    for (const GroupMember& member : members) {
      if (const SeriesPoint* point = point_of(member)) {
        at_run = point->run_id;
        deviations.push_back(
            member_deviation(member, *point, level_at(levels_without_group, point->run_id)));
      }
    }
    Trip result;
    if (2 * deviations.size() < members.size() || deviations.empty()) return result;
    result.change =
        std::exp(median(deviations) - fit.expected(level_at(levels_without_group, at_run))) - 1;
    result.threshold = std::max(options.min_change, options.spreads * group.spread);
    result.slower = result.change > result.threshold;
    result.faster = -result.change > result.threshold;
    return result;
  };
  group.trip = aggregate_trip([](const GroupMember& m) { return &*m.input->candidate; });
  group.reference_level = level_at(levels_without_group, members.front().input->candidate->run_id);
  group.rerun_trip = aggregate_trip([](const GroupMember& m) -> const SeriesPoint* {
    const auto& rerun = m.input->rerun;
    return rerun && rerun->status == ResultStatus::passed && is_timed(*rerun) ? &*rerun : nullptr;
  });
  const bool has_rerun = std::isfinite(group.rerun_trip.change);

  std::vector<double> clocks;
  size_t on_new_chips = 0;
  for (const GroupMember& member : members) {
    const SeriesPoint& candidate = *member.input->candidate;
    if (std::isfinite(candidate.clock_mhz)) clocks.push_back(candidate.clock_mhz);
    if (!candidate.chip.empty() && !chips.empty() &&
        std::find(chips.begin(), chips.end(), candidate.chip) == chips.end()) {
      ++on_new_chips;
    }
  }
  group.chip_changed = 2 * on_new_chips > members.size();
  const bool clock_off =
      (!clocks.empty() && !usual_clocks.empty() &&
       std::fabs(median(clocks) / median(usual_clocks) - 1) > options.clock_tolerance) ||
      std::fabs(std::exp(members.front().input->candidate->level) - 1) > options.level_tolerance ||
      members.front().input->candidate->scatter > options.max_scatter;

  const int64_t run_id = members.front().input->candidate->run_id;
  // A rerun is clean when the re-measured cases' own level is near 1.
  const SeriesPoint* any_rerun = nullptr;
  for (const GroupMember& member : members) {
    if (member.input->rerun) any_rerun = &*member.input->rerun;
  }
  const bool clean_rerun = has_rerun && any_rerun != nullptr &&
                           std::fabs(std::exp(any_rerun->level) - 1) <= options.level_tolerance &&
                           !(any_rerun->scatter > options.max_scatter);
  // A host-timed (CPU) kernel needs both its rerun and the next run, as its series do: a busy
  // host, or a kernel with two speeds, stays slow for longer than a rerun is apart.
  const bool host_timed = members.front().input->host_timed;
  const bool prior_suspicion = is_suspicion(prior.state) && !prior.chip_changed;
  const int64_t prior_run_id = prior.run_id != 0 ? prior.run_id : group.previous_run_id;
  const std::string needs_next = "; a host-timed (CPU) kernel also needs the next run to confirm";
  if (group.trip.slower) {
    group.since_run_id = run_id;
    if (clock_off && clean_rerun && !group.chip_changed) {
      // A clean rerun settles the doubt about an unclear run.
      group.reason = std::string("the run was unclear (its clock or level far from usual); ") +
                     (group.rerun_trip.slower ? "its clean rerun is slower too"
                                              : "its clean rerun is back within the baseline");
      if (!group.rerun_trip.slower) {
        group.state = Verdict::outlier;
      } else if (!host_timed || prior_suspicion) {
        group.state = Verdict::confirmed;
        if (prior_suspicion) {
          group.since_run_id = prior.since_run_id;
          group.reason += ", and so was run " + std::to_string(prior_run_id);
        }
      } else {
        group.state = Verdict::suspected;
        group.reason += needs_next;
      }
    } else if (clock_off) {
      group.state = Verdict::ambiguous;
      group.reason = "SM clock far from the kernel's usual, or the whole run far from its usual level";
    } else if (group.chip_changed) {
      group.state = Verdict::suspected;
      group.reason = "on a chip the baseline never ran on: a chip change alone is never confirmed";
    } else if (prior_suspicion &&
               (!host_timed || prior.state == Verdict::confirmed ||
                (has_rerun && group.rerun_trip.slower))) {
      group.state = Verdict::confirmed;
      group.since_run_id = prior.since_run_id;
      group.reason = "run " + std::to_string(prior_run_id) + " was slower too";
      if (host_timed && prior.state != Verdict::confirmed) group.reason += ", and so is the rerun";
    } else if (has_rerun && !group.rerun_trip.slower) {
      group.state = Verdict::outlier;
      group.reason = "the rerun is back within the baseline";
    } else if (has_rerun && !host_timed) {
      group.state = Verdict::confirmed;
      group.reason = "the rerun is slower too";
    } else {
      group.state = Verdict::suspected;
      group.reason = has_rerun ? "the rerun is slower too" + needs_next
                               : "awaiting confirmation (rerun, or the next run)";
      // A suspicion carries its start forward (one that began on a new chip too).
      if (is_suspicion(prior.state)) group.since_run_id = prior.since_run_id;
    }
  } else if (prior.state == Verdict::confirmed &&
             group.trip.change > kHysteresis * group.trip.threshold) {
    group.state = Verdict::confirmed;
    group.since_run_id = prior.since_run_id;
    group.reason = "open: not yet back within half the threshold";
  } else if (group.trip.faster) {
    group.state = Verdict::improved;
    group.since_run_id = run_id;
  }
  group.previous_reverted = prior.state == Verdict::suspected &&
                            (group.state == Verdict::ok || group.state == Verdict::improved);
  return group;
}

// How widely deviations scatter around the level, in units of each series' own relative spread:
// a robust sigma of (deviation - level) / spread, about 1 when every series behaves as usual.
// Only the series faster than the level count: a busy host scatters series both ways, while a
// real regression, however many series it takes, only adds slower ones and must not make its
// own run look busy.
double scatter_around(const std::vector<RunDeviation>& deviations, double level) {
  std::vector<double> below;
  for (const RunDeviation& d : deviations) {
    const double score = (d.deviation - level) / d.relative_spread;
    if (score < 0) below.push_back(-score);
  }
  // For a normal sample, the median of |z| over its lower half is the MAD.
  return below.empty() ? 0 : kMadToSigma * median(below);
}

}  // namespace

RunAnalysis analyze_run(std::vector<SeriesInput>& inputs,
                        const std::map<std::string, GroupPrior>& group_priors,
                        const DetectorOptions& options) {
  RunAnalysis analysis;
  analysis.series.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    analysis.series[i].baseline = compute_baseline(inputs[i].history, options);
  }
  auto judgeable = [&](size_t i, const std::optional<SeriesPoint>& point) {
    return point && point->status == ResultStatus::passed && is_timed(*point) &&
           analysis.series[i].baseline.usable;
  };

  // The run's level: what moved every series together. Series with an open regression are
  // left out: their own slowdown is known, and many of them would drag the median along. So are,
  // in a second pass, the series of a kernel that moved as a whole by more than min_change
  // against that first level: one slowed kernel of five is a fifth of the series and would carry
  // the level, and so hide part of its own slowdown, with it.
  std::vector<RunDeviation> candidates;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!judgeable(i, inputs[i].candidate) || has_open_regression(inputs[i].history)) continue;
    const Baseline& baseline = analysis.series[i].baseline;
    candidates.push_back({&inputs[i].group,
                          std::log(inputs[i].candidate->median_s) - std::log(baseline.center),
                          baseline.spread / baseline.center});
  }
  const std::set<std::string> moved = moved_groups(candidates, options);
  std::vector<RunDeviation> level_series;
  for (const RunDeviation& d : candidates) {
    if (!moved.count(*d.group)) level_series.push_back(d);
  }
  if (level_series.size() < static_cast<size_t>(options.min_series_for_run_level)) level_series = candidates;
  if (level_series.size() >= static_cast<size_t>(options.min_series_for_run_level)) {
    analysis.level = median_deviation(level_series);
    analysis.level_series = static_cast<int>(level_series.size());
    analysis.scatter = scatter_around(level_series, analysis.level);
  }
  for (SeriesInput& input : inputs) {
    if (input.candidate) {
      input.candidate->level = analysis.level;
      input.candidate->scatter = analysis.scatter;
    }
  }
  // The rerun's level, from the series it re-measured as controls: not the suspects, which
  // cannot tell a slow moment of the host from their own slowdown, so neither the series that
  // tripped nor those of a kernel that moved as a whole.
  std::vector<RunDeviation> controls;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!judgeable(i, inputs[i].candidate) || !judgeable(i, inputs[i].rerun)) continue;
    if (moved.count(inputs[i].group)) continue;
    const Baseline& baseline = analysis.series[i].baseline;
    if (trip(baseline, level_free_log(*inputs[i].candidate), options).slower) continue;
    controls.push_back({&inputs[i].group,
                        std::log(inputs[i].rerun->median_s) - std::log(baseline.center),
                        baseline.spread / baseline.center});
  }
  analysis.rerun_level = analysis.level;
  analysis.rerun_scatter = analysis.scatter;
  if (controls.size() >= static_cast<size_t>(options.min_series_for_run_level)) {
    analysis.rerun_level = median_deviation(controls);
    analysis.rerun_level_series = static_cast<int>(controls.size());
    analysis.rerun_scatter = scatter_around(controls, analysis.rerun_level);
  }
  for (SeriesInput& input : inputs) {
    if (input.rerun) {
      input.rerun->level = analysis.rerun_level;
      input.rerun->scatter = analysis.rerun_scatter;
    }
  }

  std::map<std::string, std::vector<GroupMember>> groups;
  for (size_t i = 0; i < inputs.size(); ++i) {
    SeriesInput& input = inputs[i];
    SeriesAnalysis& result = analysis.series[i];
    const SeriesPoint* previous = input.history.empty() ? nullptr : &input.history.back();
    if (!input.candidate) {
      result.missing = true;
      if (previous != nullptr && previous->status == ResultStatus::passed) {
        result.status_change = "passed -> missing";
      }
      continue;
    }
    result.performance = judge_performance(input, result.baseline, options);
    result.accuracy = judge_accuracy(input, result.baseline, options);
    if (previous != nullptr && previous->status == ResultStatus::passed &&
        input.candidate->status != ResultStatus::passed) {
      result.status_change =
          "passed -> " + std::string(result_status_name(input.candidate->status));
    }
    if (judgeable(i, input.candidate)) groups[input.group].push_back({&input, &result.baseline});
  }
  // A kernel-wide aggregate is judged against levels measured without its own series, at every
  // run it compares: its earlier runs (from the histories of every series, against today's
  // centers, so the aggregate's history does not depend on what an earlier analysis could see),
  // the run, and its rerun (from the controls).
  std::map<int64_t, RunSeries> by_run;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Baseline& baseline = analysis.series[i].baseline;
    if (!baseline.usable) continue;
    const double relative_spread = baseline.spread / baseline.center;
    for (const SeriesPoint& point : inputs[i].history) {
      if (point.status != ResultStatus::passed || !is_timed(point)) continue;
      by_run[point.run_id].deviations.push_back({&inputs[i].group,
                                      std::log(point.median_s) - std::log(baseline.center),
                                      relative_spread});
    }
  }
  const std::optional<int64_t> run_id = [&]() -> std::optional<int64_t> {
    for (const SeriesInput& input : inputs) {
      if (input.candidate) return input.candidate->run_id;
    }
    return std::nullopt;
  }();
  const std::optional<int64_t> rerun_id = [&]() -> std::optional<int64_t> {
    for (const SeriesInput& input : inputs) {
      if (input.rerun) return input.rerun->run_id;
    }
    return std::nullopt;
  }();
  if (run_id) by_run[*run_id].deviations = candidates;
  if (rerun_id) by_run[*rerun_id].deviations = controls;
  for (auto& [id, run] : by_run) run.moved = moved_groups(run.deviations, options);
  for (const auto& [key, members] : groups) {
    if (members.size() < static_cast<size_t>(options.min_series_for_group)) continue;
    RunLevels levels_without_group;
    for (const auto& [id, run] : by_run) levels_without_group[id] = level_without(run, key, options);
    const auto prior = group_priors.find(key);
    analysis.groups.push_back(judge_group(key, members, levels_without_group,
                                          prior == group_priors.end() ? GroupPrior{} : prior->second,
                                          options));
  }
  return analysis;
}

}  // namespace attnbench
