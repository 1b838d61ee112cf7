// One series judged against its own history: its baseline, its trip, and the verdict on its
// performance and accuracy (the rule is written out in regression.h).
#include "harness/analysis/detector.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>

#include "harness/core/series_key.h"
#include "harness/core/statistics.h"

namespace attnbench {

std::string percent(double fraction) {
  std::ostringstream text;
  text.precision(1);
  text << std::fixed << fraction * 100 << " %";
  return text.str();
}

bool is_suspicion(Verdict state) {
  return state == Verdict::suspected || state == Verdict::confirmed;
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
  for (size_t i = history.size();
       i-- > 0 && baseline.points.size() < static_cast<size_t>(options.window);) {
    const SeriesPoint& point = history[i];
    if (!counts_for_baseline(point)) continue;
    baseline.points.push_back(i);
    logs.push_back(level_free_log(point));
    if (std::isfinite(point.clock_mhz)) clocks.push_back(point.clock_mhz);
    if (std::isfinite(point.cv)) cvs.push_back(point.cv);
    if (std::isfinite(point.error)) errors.push_back(point.error);
    if (!point.chip.empty() && std::find(baseline.chips.begin(), baseline.chips.end(),
                                         point.chip) == baseline.chips.end()) {
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
  result.threshold = relative_threshold(baseline, options);
  result.slower = result.change > result.threshold;
  result.faster = -result.change > result.threshold;
  return result;
}

// ---- the state of a series' history ------------------------------------------------------------

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

std::string clock_difference(const SeriesPoint& point, const Baseline& baseline,
                             const DetectorOptions& options) {
  if (!std::isfinite(point.clock_mhz) || !std::isfinite(baseline.usual_clock) ||
      baseline.usual_clock <= 0 ||
      std::fabs(point.clock_mhz / baseline.usual_clock - 1) <= options.clock_tolerance) {
    return {};
  }
  std::ostringstream why;
  why.precision(3);
  why << "SM clock " << point.clock_mhz << " MHz, usual " << baseline.usual_clock << " MHz";
  return why.str();
}

double suspect_clock_below(const Baseline& baseline, const DetectorOptions& options) {
  if (!std::isfinite(baseline.usual_clock) || baseline.usual_clock <= 0) return kNotMeasured;
  return (1 - options.clock_tolerance) * baseline.usual_clock;
}

double noisy_cv_limit(const Baseline& baseline, const DetectorOptions& options) {
  return std::isfinite(baseline.usual_cv)
             ? std::max(options.noisy_cv_floor, options.noisy_cv_factor * baseline.usual_cv)
             : options.noisy_cv_floor;
}

std::optional<bool> too_noisy(const SeriesPoint& point, const Baseline& baseline,
                              const DetectorOptions& options) {
  if (!std::isfinite(point.cv)) return std::nullopt;
  return point.cv > noisy_cv_limit(baseline, options);
}

namespace {

// Why a slower result cannot be taken at face value; empty when it can. `run_wide` says the
// reason is the whole run's (its level or scatter): a rerun in the same busy hour does not
// settle that, only a later run can.
std::string ambiguity(const Baseline& baseline, const SeriesPoint& point,
                      const DetectorOptions& options, bool* run_wide = nullptr) {
  if (run_wide != nullptr) *run_wide = false;
  if (std::string clock = clock_difference(point, baseline, options); !clock.empty()) return clock;
  std::ostringstream why;
  why.precision(3);
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
  // A first judgement with no usual CV of its own does not make a trip unclear.
  if (std::isfinite(baseline.usual_cv) && too_noisy(point, baseline, options).value_or(false)) {
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
    why << "too noisy: the series' run-to-run spread is "
        << percent(baseline.spread / baseline.center) << " of its center";
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

// ---- judging a series' performance, step by step -----------------------------------------------

// What speaks for and against a slower result, gathered once: its rerun, the previous clear
// run's suspicion, the series' recent excursions.
struct Evidence {
  const SeriesInput* input = nullptr;
  const SeriesPoint* previous_clear = nullptr;  // newest_clear(history)
  const SeriesPoint* rerun = nullptr;           // passed and timed, else nullptr
  bool previous_suspicion = false;              // the previous clear run was suspected or confirmed
  bool previous_confirmed = false;              // ... confirmed: a regression is open
  // Slower in absolute terms too, not only relative to the run's level: a confirmation must not
  // rest on the level estimate alone (a host that got faster than its baseline's would otherwise
  // make every series it sped up less look slower).
  bool raw_slower = false;
  bool rerun_agrees = false;     // the rerun trips again, clean, of the same size, significant
  bool previous_agrees = false;  // the previous clear run's suspicion measured the same slowdown
  int excursions = 0;            // recent outliers and unclear runs
  bool erratic = false;
  // Slower, with no regression open, but not beyond the largest excursion a series of the run
  // came back from by itself, or of the size of one this series came back from (`repeats_own`).
  bool within_family = false;
  bool repeats_own = false;
  const FamilyExcursion* family = nullptr;
  const Excursion* own_excursion = nullptr;
  int64_t suspicion_start = 0;  // where a confirmation dates from
};

// Fills the judgement's trip, chip change, rerun trip and Mann-Whitney test, and gathers the rest.
Evidence gather_evidence(const SeriesInput& input, const Baseline& baseline,
                         const FamilyExcursion& family, const Excursion& own,
                         const DetectorOptions& options, PerformanceJudgement& judgement) {
  Evidence e;
  e.input = &input;
  e.family = &family;
  const SeriesPoint& candidate = *input.candidate;
  e.previous_clear = newest_clear(input.history);
  judgement.trip = trip(baseline, level_free_log(candidate), options);
  judgement.chip_changed = on_new_chip(baseline, candidate);
  e.previous_suspicion = e.previous_clear != nullptr && is_suspicion(e.previous_clear->state);
  e.previous_confirmed = e.previous_suspicion && e.previous_clear->state == Verdict::confirmed;
  if (input.rerun && input.rerun->status == ResultStatus::passed && is_timed(*input.rerun)) {
    e.rerun = &*input.rerun;
    judgement.rerun_trip = trip(baseline, level_free_log(*e.rerun), options);
    if (!input.rerun_samples.empty() && !input.baseline_samples.empty()) {
      judgement.mann_whitney =
          mann_whitney_u(level_free_samples(input.rerun_samples, e.rerun->level),
                         level_free_samples(input.baseline_samples, input.baseline_samples_level));
    }
  }
  e.raw_slower = trip(baseline, std::log(candidate.median_s), options).slower;
  const bool rerun_raw_slower =
      e.rerun != nullptr && trip(baseline, std::log(e.rerun->median_s), options).slower;
  e.rerun_agrees =
      e.rerun != nullptr && judgement.rerun_trip.slower && e.raw_slower && rerun_raw_slower &&
      ambiguity(baseline, *e.rerun, options).empty() &&
      agrees(judgement.trip.change, judgement.rerun_trip.change, judgement.trip.threshold) &&
      (!judgement.mann_whitney || judgement.mann_whitney->p_greater < options.mann_whitney_alpha);
  e.excursions = recent_excursions(input.history, options);
  e.erratic = e.excursions >= options.erratic_runs;
  if (options.family_wise && judgement.trip.slower) {
    const double limit = family.limit(judgement.trip.threshold);
    if (limit > 0) judgement.family_limit = limit;
    e.own_excursion = &own;
    e.repeats_own =
        own.ratio > 0 && agrees(own.change, judgement.trip.change, judgement.trip.threshold);
    // An open regression stays open: the limit is on confirming a new one.
    e.within_family =
        !e.previous_confirmed && (e.repeats_own || judgement.trip.change <= judgement.family_limit);
  }
  e.suspicion_start = !e.previous_suspicion                 ? candidate.run_id
                      : e.previous_clear->since_run_id != 0 ? e.previous_clear->since_run_id
                                                            : e.previous_clear->run_id;
  e.previous_agrees =
      e.previous_confirmed ||
      (e.previous_suspicion && e.raw_slower &&
       (!std::isfinite(e.previous_clear->change) ||
        agrees(e.previous_clear->change, judgement.trip.change, judgement.trip.threshold)));
  return e;
}

// A series too noisy to judge alone: its spread beyond noisy_spread of its center, or a second
// speed in its baseline (max_wide_points runs beyond the threshold).
bool structurally_noisy(const Baseline& baseline, const DetectorOptions& options) {
  return baseline.spread / baseline.center > options.noisy_spread ||
         baseline.wide_points >= options.max_wide_points;
}

// A slower result that cannot be taken at face value (`unclear` says why). A clean rerun settles
// a doubt about this result's clock or repetitions; not one about a busy run (the rerun shares
// its hour) nor a series too noisy to judge alone.
void judge_unclear_trip(const Evidence& e, const Baseline& baseline, const std::string& unclear,
                        bool run_wide, const DetectorOptions& options,
                        PerformanceJudgement& judgement) {
  const SeriesPoint& candidate = *e.input->candidate;
  judgement.state = Verdict::ambiguous;
  judgement.reason = unclear;
  if (e.rerun == nullptr || structurally_noisy(baseline, options) || run_wide ||
      !ambiguity(baseline, *e.rerun, options).empty()) {
    return;
  }
  const std::string rerun_text =
      "run was unclear (" + unclear + "); its rerun " + std::to_string(e.rerun->run_id);
  if (e.rerun_agrees && !judgement.chip_changed && !e.erratic && !e.within_family &&
      (!e.input->host_timed || e.previous_agrees)) {
    judgement.state = Verdict::confirmed;
    // Where the previous run agreed, the regression began with its suspicion.
    judgement.since_run_id = e.previous_agrees ? e.suspicion_start : candidate.run_id;
    judgement.reason =
        rerun_text + " is clean and slower too" +
        (e.previous_agrees ? ", and so was run " + std::to_string(e.previous_clear->run_id)
                           : std::string());
  } else if (!judgement.rerun_trip.slower) {
    judgement.state = Verdict::outlier;
    judgement.since_run_id = candidate.run_id;
    judgement.reason = rerun_text + " is back within the baseline";
  }
}

// Why a slower result stays suspected for now.
std::string awaiting_reason(const Evidence& e) {
  const SeriesPoint& candidate = *e.input->candidate;
  if (e.input->host_timed && e.rerun_agrees) {
    return "rerun " + std::to_string(e.rerun->run_id) +
           " is slower too; a host-timed (CPU) series also needs the next run to confirm";
  }
  if (!e.raw_slower) {
    return "slower than the run's other series, but not in absolute terms (the whole run was " +
           percent(std::exp(candidate.level) - 1) + " off): awaiting a run that shows it both ways";
  }
  if (e.rerun != nullptr) {
    return "rerun " + std::to_string(e.rerun->run_id) +
           " is slower but does not confirm (unclear, a different size, or not significant by "
           "Mann-Whitney); awaiting the next run";
  }
  return "awaiting confirmation (rerun, or the next run)";
}

// "cpu.naive b=2,... was +37.0 % (12x its threshold) at run 41 and came back"; the series' own
// excursion as "it was ...": the alert's case names it already.
std::string excursion_text(const Excursion& excursion, bool own = false) {
  std::ostringstream ratio;
  ratio.precision(2);
  ratio << excursion.ratio;
  const std::optional<SeriesKey> other = parse_series_key(excursion.series_key);
  const std::string name = own     ? std::string("it")
                           : other ? other->kernel + " " + other->case_label()
                                   : excursion.series_key;
  return name + " was " + percent(excursion.change) + " (" + ratio.str() +
         "x its threshold) at run " + std::to_string(excursion.run_id) + " and came back";
}

// Why a slower result within the family's excursions stays suspected.
std::string within_family_reason(const Evidence& e, const PerformanceJudgement& judgement) {
  const std::string alone =
      ", so it is not confirmed on its own (its kernel-wide aggregate still is)";
  if (e.repeats_own)
    return "the size of an excursion of its own: " + excursion_text(*e.own_excursion, true) + alone;
  const FamilyExcursion& family = *e.family;
  const std::string& key = e.input->key;
  std::string seen = excursion_text(family.in_thresholds, family.in_thresholds.series_key == key);
  if (family.in_size.series_key != family.in_thresholds.series_key ||
      family.in_size.run_id != family.in_thresholds.run_id) {
    seen += ", and " + excursion_text(family.in_size, family.in_size.series_key == key);
  }
  return "within what the run's series do by themselves: " + seen +
         "; a lone series is confirmed only beyond both, in its own thresholds and in size (" +
         percent(judgement.family_limit) + ")" + alone;
}

// A slower result that can be taken at face value: a chip change, an outlier by its rerun, an
// erratic series, a confirmation (by the previous run, or by the rerun), or a suspicion.
void judge_clear_trip(const Evidence& e, const DetectorOptions& options,
                      PerformanceJudgement& judgement) {
  const SeriesInput& input = *e.input;
  const SeriesPoint& candidate = *input.candidate;
  const SeriesPoint* previous = e.previous_clear;
  if (judgement.chip_changed && e.previous_confirmed) {
    // Not a new confirmation: a regression established on the old chip is still there.
    judgement.state = Verdict::confirmed;
    judgement.since_run_id = previous->since_run_id;
    judgement.reason = "open since run " + std::to_string(previous->since_run_id) +
                       "; still slower on the new chip " + candidate.chip;
  } else if (judgement.chip_changed) {
    judgement.state = Verdict::suspected;
    judgement.since_run_id = candidate.run_id;
    judgement.reason = "on chip " + candidate.chip +
                       ", which the baseline never ran on: a chip change alone is never a "
                       "confirmed regression";
  } else if (e.rerun != nullptr && !judgement.rerun_trip.slower) {
    judgement.state = Verdict::outlier;
    judgement.since_run_id = candidate.run_id;
    judgement.reason = "rerun " + std::to_string(e.rerun->run_id) + " is back within the baseline";
  } else if (e.erratic && !e.previous_confirmed) {
    judgement.state = Verdict::suspected;
    judgement.since_run_id = e.previous_suspicion ? previous->since_run_id : candidate.run_id;
    judgement.reason =
        "erratic series: " + std::to_string(e.excursions) + " of its last " +
        std::to_string(std::min<size_t>(input.history.size(), options.erratic_window)) +
        " runs were outliers or unclear, so it is not confirmed on its own (its kernel-wide "
        "aggregate still is)";
  } else if (e.within_family) {
    judgement.state = Verdict::suspected;
    judgement.since_run_id = e.previous_suspicion ? previous->since_run_id : candidate.run_id;
    judgement.reason = within_family_reason(e, judgement);
  } else if (e.previous_suspicion && !previous->chip_changed && e.previous_agrees &&
             (!input.host_timed || e.previous_confirmed || e.rerun_agrees)) {
    judgement.state = Verdict::confirmed;
    judgement.since_run_id = e.suspicion_start;
    judgement.reason = "run " + std::to_string(previous->run_id) + " was slower too" +
                       (input.host_timed && !e.previous_confirmed
                            ? ", and so is rerun " + std::to_string(e.rerun->run_id)
                            : std::string());
  } else if (e.rerun_agrees && !input.host_timed) {
    judgement.state = Verdict::confirmed;
    judgement.since_run_id = candidate.run_id;
    judgement.reason = "rerun " + std::to_string(e.rerun->run_id) + " is slower too";
  } else {
    judgement.state = Verdict::suspected;
    // A suspicion that began on a new chip carries its start forward.
    judgement.since_run_id =
        e.previous_suspicion && previous->chip_changed ? previous->since_run_id : candidate.run_id;
    judgement.reason = awaiting_reason(e);
  }
}

// A result that did not trip slower: an open regression that is not yet back, or an improvement.
void judge_untripped(const Evidence& e, PerformanceJudgement& judgement) {
  if (e.previous_confirmed && judgement.trip.change > kHysteresis * judgement.trip.threshold) {
    judgement.state = Verdict::confirmed;
    judgement.since_run_id = e.previous_clear->since_run_id;
    judgement.reason = "open since run " + std::to_string(e.previous_clear->since_run_id) +
                       ": not yet back within half the threshold";
  } else if (judgement.trip.faster) {
    judgement.state = Verdict::improved;
    judgement.since_run_id = e.input->candidate->run_id;
  }
}

}  // namespace

bool run_is_clear(const SeriesPoint& point, const DetectorOptions& options) {
  return std::fabs(std::exp(point.level) - 1) <= options.level_tolerance &&
         !(point.scatter > options.max_scatter);
}

namespace {

// What a series can be confirmed for on its own: beyond its threshold and the family's limit in
// it, at its spread; blind when the rule never confirms it alone.
Detectable series_detectable(const SeriesInput& input, const Baseline& baseline,
                             const FamilyExcursion& family, bool erratic,
                             const DetectorOptions& options) {
  if (erratic || structurally_noisy(baseline, options)) return {kBlind, kBlind};
  DetectionNoise noise;
  noise.threshold = relative_threshold(baseline, options);
  if (options.family_wise) {
    noise.threshold = std::max(noise.threshold, family.limit(noise.threshold));
  }
  noise.spread = baseline.spread / baseline.center;
  noise.host_timed = input.host_timed;
  // Its recent runs as noise: every clear judgement, outliers and unclear runs included, not the
  // runs of a suspicion or regression (a real slowdown is not noise).
  for (auto point = input.history.rbegin();
       point != input.history.rend() &&
       noise.deviations.size() < static_cast<size_t>(options.max_history);
       ++point) {
    if (point->status != ResultStatus::passed || !is_timed(*point) ||
        point->state == Verdict::suspected || point->state == Verdict::confirmed) {
      continue;
    }
    noise.deviations.push_back(std::exp(level_free_log(*point)) / baseline.center - 1);
    noise.clear.push_back(run_is_clear(*point, options));
  }
  return detectable_change(noise);
}

}  // namespace

PerformanceJudgement judge_performance(const SeriesInput& input, const Baseline& baseline,
                                       const FamilyExcursion& family, const Excursion& own,
                                       const DetectorOptions& options) {
  PerformanceJudgement judgement;
  const SeriesPoint& candidate = *input.candidate;
  if (candidate.status != ResultStatus::passed || !is_timed(candidate)) return judgement;
  if (!baseline.usable) {
    judgement.state = Verdict::insufficient_history;
    return judgement;
  }
  const Evidence evidence = gather_evidence(input, baseline, family, own, options, judgement);
  judgement.detectable = series_detectable(input, baseline, family, evidence.erratic, options);
  if (judgement.trip.slower) {
    bool run_wide = false;
    const std::string unclear = ambiguity(baseline, candidate, options, &run_wide);
    if (!unclear.empty()) {
      judge_unclear_trip(evidence, baseline, unclear, run_wide, options, judgement);
    } else {
      judge_clear_trip(evidence, options, judgement);
    }
  } else {
    judge_untripped(evidence, judgement);
  }
  const SeriesPoint* previous = input.history.empty() ? nullptr : &input.history.back();
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
      judgement.since_run_id =
          previous->accuracy_since_run_id != 0 ? previous->accuracy_since_run_id : previous->run_id;
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

}  // namespace attnbench
