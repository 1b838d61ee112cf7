// Kernels as wholes: which moved together in a run, the run's level without a kernel's own
// series, and the kernel-wide aggregate judged against its history (the rule: regression.h).
#include "harness/analysis/kernel_wide.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "harness/analysis/detector.h"
#include "harness/core/statistics.h"

namespace attnbench {
namespace {

// statistics.h's median(), by selection instead of a full sort (the same value to the bit): the
// aggregates take medians of every run of every series' history, for each kernel, every run.
double selected_median(std::vector<double> values) {
  if (values.empty()) return median(std::move(values));
  const size_t below = (values.size() - 1) / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(below),
                   values.end());
  const double low = values[below];
  if (values.size() % 2 == 1) return low;
  const double high =
      *std::min_element(values.begin() + static_cast<std::ptrdiff_t>(below) + 1, values.end());
  return low + 0.5 * (high - low);
}

}  // namespace

// ---- run levels --------------------------------------------------------------------------------

double median_deviation(const std::vector<RunDeviation>& deviations) {
  std::vector<double> values;
  values.reserve(deviations.size());
  for (const RunDeviation& d : deviations) values.push_back(d.deviation);
  return selected_median(std::move(values));
}

std::set<std::string> moved_groups(const std::vector<RunDeviation>& deviations,
                                   const DetectorOptions& options) {
  std::set<std::string> moved;
  if (deviations.size() < static_cast<size_t>(options.min_series_for_run_level)) return moved;
  const double level = median_deviation(deviations);
  std::map<std::string, std::vector<double>> by_group;
  for (const RunDeviation& d : deviations) by_group[*d.group].push_back(d.deviation);
  std::vector<std::pair<double, const std::string*>> moves;  // |move|, group
  for (const auto& [group, values] : by_group) {
    const double move = std::fabs(std::exp(selected_median(values) - level) - 1);
    if (values.size() >= static_cast<size_t>(options.min_series_for_group) &&
        move > options.min_change) {
      moves.emplace_back(move, &group);
    }
  }
  std::sort(moves.begin(), moves.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
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

double scatter_around(const std::vector<RunDeviation>& deviations, double level) {
  std::vector<double> below;
  for (const RunDeviation& d : deviations) {
    const double score = (d.deviation - level) / d.relative_spread;
    if (score < 0) below.push_back(-score);
  }
  // For a normal sample, the median of |z| over its lower half is the MAD.
  return below.empty() ? 0 : kMadToSigma * median(below);
}

double level_without(const RunSeries& run, const std::string& group,
                     const DetectorOptions& options) {
  std::vector<double> others;
  others.reserve(run.deviations.size());
  for (const RunDeviation& d : run.deviations) {
    if (*d.group != group && !run.moved.count(*d.group)) others.push_back(d.deviation);
  }
  return others.size() >= static_cast<size_t>(options.min_series_for_run_level)
             ? selected_median(std::move(others))
             : 0;
}

namespace {

// ---- the aggregate's history and its fit to the run levels -------------------------------------

// Passed, timed, and not set aside as a regression (suspected or confirmed; a chip-change
// suspicion does count).
bool counts_for_group_history(const SeriesPoint& point) {
  return point.status == ResultStatus::passed && is_timed(point) &&
         (!is_suspicion(point.state) || (point.state == Verdict::suspected && point.chip_changed));
}

double level_at(const RunLevels& levels, int64_t run_id) {
  const auto found = levels.find(run_id);
  return found == levels.end() ? 0 : found->second;
}

// A member's change at one run against its own center, with the run's level (as the group sees
// it) taken out.
double member_deviation(const GroupMember& member, const SeriesPoint& point, double level) {
  return std::log(point.median_s) - level - std::log(member.baseline->center);
}

// The aggregate's own history: for each earlier run, the median deviation over its members (at
// least half of them) that were not then suspected of a regression of their own, at the runs
// where the kernel as a whole did not trip, newest first, at most K runs. Unlike a series'
// baseline it keeps the runs a busy host made unclear: they show how the kernel feels one, and a
// median over many shapes is not thrown by a few strays.
struct AggregateHistory {
  std::vector<double> aggregates;  // newest first
  std::vector<double> levels;      // the run levels without the group, same order
  std::vector<bool> clear;         // whether each run was clear (run_is_clear), same order
  std::vector<std::string> chips;  // every member baseline's
  std::vector<double> usual_clocks;
  int64_t previous_run_id = 0;
};

// At most `runs` runs. The baseline's K runs leave out what was set aside as a regression; the
// noise of what the gate can detect (`as_noise`) keeps every passed, timed point, since the runs
// a noisy host made a kernel's shapes suspects of are its noise too.
AggregateHistory aggregate_history(const std::vector<GroupMember>& members,
                                   const RunLevels& levels_without_group, const GroupPrior& prior,
                                   const DetectorOptions& options, int runs,
                                   bool as_noise = false) {
  AggregateHistory history;
  std::map<int64_t, std::vector<double>> by_run;
  std::map<int64_t, bool> clear_runs;
  for (const GroupMember& member : members) {
    for (const SeriesPoint& point : member.input->history) {
      const bool counts = as_noise ? point.status == ResultStatus::passed && is_timed(point)
                                   : counts_for_group_history(point) &&
                                         !prior.set_aside_runs.count(point.run_id);
      if (!counts) continue;
      by_run[point.run_id].push_back(
          member_deviation(member, point, level_at(levels_without_group, point.run_id)));
      clear_runs.emplace(point.run_id, run_is_clear(point, options));
    }
    for (const std::string& chip : member.baseline->chips) {
      if (std::find(history.chips.begin(), history.chips.end(), chip) == history.chips.end()) {
        history.chips.push_back(chip);
      }
    }
    if (std::isfinite(member.baseline->usual_clock)) {
      history.usual_clocks.push_back(member.baseline->usual_clock);
    }
    if (!member.input->history.empty()) {
      history.previous_run_id =
          std::max(history.previous_run_id, member.input->history.back().run_id);
    }
  }
  for (auto run = by_run.rbegin(); run != by_run.rend(); ++run) {
    if (2 * run->second.size() < members.size()) continue;
    history.aggregates.push_back(selected_median(run->second));
    history.levels.push_back(level_at(levels_without_group, run->first));
    history.clear.push_back(clear_runs[run->first]);
    if (history.aggregates.size() == static_cast<size_t>(runs)) break;
  }
  return history;
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
      if (std::fabs(gap) >= options.load_level_gap)
        slopes.push_back((aggregates[j] - aggregates[i]) / gap);
    }
  }
  if (slopes.size() >= static_cast<size_t>(options.min_baseline_runs)) {
    fit.slope =
        std::clamp(median(slopes), -options.max_load_sensitivity, options.max_load_sensitivity);
  }
  std::vector<double> centers;
  for (size_t k = 0; k < levels.size(); ++k)
    centers.push_back(aggregates[k] - fit.slope * levels[k]);
  fit.center = median(centers);
  return fit;
}

// ---- the aggregate at the run and at its rerun -------------------------------------------------

const SeriesPoint* candidate_of(const GroupMember& member) { return &*member.input->candidate; }

const SeriesPoint* rerun_of(const GroupMember& member) {
  const auto& rerun = member.input->rerun;
  return rerun && rerun->status == ResultStatus::passed && is_timed(*rerun) ? &*rerun : nullptr;
}

// The median change of the members `point_of` finds (at least half of them) against what the fit
// expects at their run's level; an empty trip when too few.
Trip aggregate_trip(const std::vector<GroupMember>& members, const RunLevels& levels_without_group,
                    const LoadFit& fit, double spread,
                    const SeriesPoint* (*point_of)(const GroupMember&),
                    const DetectorOptions& options) {
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
  result.threshold = std::max(options.min_change, options.spreads * spread);
  result.slower = result.change > result.threshold;
  result.faster = -result.change > result.threshold;
  return result;
}

// ---- the verdict -------------------------------------------------------------------------------

// What the run and its rerun were like for the group's members.
struct GroupConditions {
  bool clock_off = false;    // the clock, the run's level or its scatter far from usual
  bool clean_rerun = false;  // a rerun whose own level and scatter are usual
  bool host_timed = false;
  int64_t run_id = 0;
};

GroupConditions group_conditions(const std::vector<GroupMember>& members,
                                 const AggregateHistory& history, GroupAnalysis& group,
                                 const DetectorOptions& options) {
  GroupConditions conditions;
  const SeriesPoint& first = *members.front().input->candidate;
  std::vector<double> clocks;
  size_t on_new_chips = 0;
  const SeriesPoint* any_rerun = nullptr;
  for (const GroupMember& member : members) {
    const SeriesPoint& candidate = *member.input->candidate;
    if (std::isfinite(candidate.clock_mhz)) clocks.push_back(candidate.clock_mhz);
    if (!candidate.chip.empty() && !history.chips.empty() &&
        std::find(history.chips.begin(), history.chips.end(), candidate.chip) ==
            history.chips.end()) {
      ++on_new_chips;
    }
    if (member.input->rerun) any_rerun = &*member.input->rerun;
  }
  group.chip_changed = 2 * on_new_chips > members.size();
  conditions.clock_off =
      (!clocks.empty() && !history.usual_clocks.empty() &&
       std::fabs(median(clocks) / median(history.usual_clocks) - 1) > options.clock_tolerance) ||
      !run_is_clear(first, options);
  // A rerun is clean when the re-measured cases' own level is near 1.
  conditions.clean_rerun = std::isfinite(group.rerun_trip.change) && any_rerun != nullptr &&
                           run_is_clear(*any_rerun, options);
  // A host-timed (CPU) kernel needs both its rerun and the next run, as its series do: a busy
  // host, or a kernel with two speeds, stays slow for longer than a rerun is apart.
  conditions.host_timed = members.front().input->host_timed;
  conditions.run_id = first.run_id;
  return conditions;
}

// A host-timed (CPU) suspicion whose rerun agreed waits for the next nightly (and its rerun).
constexpr const char* kAwaitingNextRun = "its next run (rerun too)";

// The verdict on an aggregate that tripped slower.
void judge_group_trip(const GroupConditions& c, const GroupPrior& prior, GroupAnalysis& group) {
  const bool has_rerun = std::isfinite(group.rerun_trip.change);
  const bool prior_suspicion = is_suspicion(prior.state) && !prior.chip_changed;
  const int64_t prior_run_id = prior.run_id != 0 ? prior.run_id : group.previous_run_id;
  const std::string needs_next = "; a host-timed (CPU) kernel also needs the next run to confirm";
  group.since_run_id = c.run_id;
  if (c.clock_off && c.clean_rerun && !group.chip_changed) {
    // A clean rerun settles the doubt about an unclear run.
    group.reason = std::string("the run was unclear (its clock or level far from usual); ") +
                   (group.rerun_trip.slower ? "its clean rerun is slower too"
                                            : "its clean rerun is back within the baseline");
    if (!group.rerun_trip.slower) {
      group.state = Verdict::outlier;
    } else if (!c.host_timed || prior_suspicion) {
      group.state = Verdict::confirmed;
      if (prior_suspicion) {
        group.since_run_id = prior.since_run_id;
        group.reason += ", and so was run " + std::to_string(prior_run_id);
      }
    } else {
      group.state = Verdict::suspected;
      group.reason += needs_next;
      group.awaiting = kAwaitingNextRun;
    }
  } else if (c.clock_off) {
    group.state = Verdict::ambiguous;
    group.reason =
        "SM clock far from the kernel's usual, or the whole run far from its usual level";
    group.awaiting = "a clean rerun or a clear run";
  } else if (group.chip_changed) {
    group.state = Verdict::suspected;
    group.reason = "on a chip the baseline never ran on: a chip change alone is never confirmed";
    group.awaiting = "more runs on this chip";
  } else if (prior_suspicion && (!c.host_timed || prior.state == Verdict::confirmed ||
                                 (has_rerun && group.rerun_trip.slower))) {
    group.state = Verdict::confirmed;
    group.since_run_id = prior.since_run_id;
    group.reason = "run " + std::to_string(prior_run_id) + " was slower too";
    if (c.host_timed && prior.state != Verdict::confirmed) group.reason += ", and so is the rerun";
  } else if (has_rerun && !group.rerun_trip.slower) {
    group.state = Verdict::outlier;
    group.reason = "the rerun is back within the baseline";
  } else if (has_rerun && !c.host_timed) {
    group.state = Verdict::confirmed;
    group.reason = "the rerun is slower too";
  } else {
    group.state = Verdict::suspected;
    group.awaiting = !c.host_timed ? "a rerun or its next run"
                     : has_rerun   ? kAwaitingNextRun
                                   : "a rerun, then its next run";
    group.reason = has_rerun ? "the rerun is slower too" + needs_next : "awaiting " + group.awaiting;
    // A suspicion carries its start forward (one that began on a new chip too).
    if (is_suspicion(prior.state)) group.since_run_id = prior.since_run_id;
  }
}

// What the kernel as a whole can be confirmed for (detectable.h): its aggregate's deviations
// from the fit over the longer look back of max_history runs, each clear or not.
Detectable group_detectable(const std::vector<GroupMember>& members,
                            const RunLevels& levels_without_group, const GroupPrior& prior,
                            const LoadFit& fit, const GroupAnalysis& group,
                            const GroupConditions& conditions, const DetectorOptions& options) {
  const AggregateHistory looked_back =
      aggregate_history(members, levels_without_group, prior, options, options.max_history,
                        /*as_noise=*/true);
  DetectionNoise noise;
  noise.threshold = std::max(options.min_change, options.spreads * group.spread);
  noise.spread = group.spread;
  noise.host_timed = conditions.host_timed;
  for (size_t k = 0; k < looked_back.aggregates.size(); ++k) {
    noise.deviations.push_back(
        std::exp(looked_back.aggregates[k] - fit.expected(looked_back.levels[k])) - 1);
    noise.clear.push_back(looked_back.clear[k]);
  }
  return detectable_change(noise);
}

}  // namespace

GroupAnalysis judge_group(const std::string& key, const std::vector<GroupMember>& members,
                          const RunLevels& levels_without_group, const GroupPrior& prior,
                          const DetectorOptions& options) {
  GroupAnalysis group;
  group.group = key;
  group.members = members.size();
  const AggregateHistory history =
      aggregate_history(members, levels_without_group, prior, options, options.window);
  group.previous_run_id = history.previous_run_id;
  if (history.aggregates.size() < static_cast<size_t>(options.min_baseline_runs)) {
    group.state = Verdict::insufficient_history;
    return group;
  }
  // The aggregate expected at a run of a given level: a kernel can feel a busy host more or less
  // than the median series does (on the project's shared CPU host, cpu.naive slows 1.8x as much
  // as the run and cpu.flash 0.85x), which no single level can take out.
  const LoadFit fit = fit_load(history.levels, history.aggregates, options);
  group.load_sensitivity = fit.slope;
  std::vector<double> residuals;
  for (size_t k = 0; k < history.aggregates.size(); ++k) {
    residuals.push_back(history.aggregates[k] - fit.expected(history.levels[k]));
  }
  group.spread = std::max(kMadToSigma * median_absolute_deviation(residuals), options.spread_floor);
  group.trip =
      aggregate_trip(members, levels_without_group, fit, group.spread, candidate_of, options);
  group.reference_level = level_at(levels_without_group, members.front().input->candidate->run_id);
  group.rerun_trip =
      aggregate_trip(members, levels_without_group, fit, group.spread, rerun_of, options);
  const GroupConditions conditions = group_conditions(members, history, group, options);
  group.detectable = group_detectable(members, levels_without_group, prior, fit, group, conditions,
                                      options);

  if (group.trip.slower) {
    judge_group_trip(conditions, prior, group);
  } else if (prior.state == Verdict::confirmed &&
             group.trip.change > kHysteresis * group.trip.threshold) {
    group.state = Verdict::confirmed;
    group.since_run_id = prior.since_run_id;
    group.reason = "open: not yet back within half the threshold";
  } else if (group.trip.faster) {
    group.state = Verdict::improved;
    group.since_run_id = conditions.run_id;
  }
  group.previous_reverted = prior.state == Verdict::suspected &&
                            (group.state == Verdict::ok || group.state == Verdict::improved);
  return group;
}

}  // namespace attnbench
