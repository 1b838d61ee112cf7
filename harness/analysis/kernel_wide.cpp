// Kernels as wholes: which moved together in a run, the run's level without a kernel's own
// series, and the kernel-wide aggregate judged against its history (the rule: regression.h).
#include "harness/analysis/kernel_wide.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "harness/analysis/detector.h"
#include "harness/core/series_key.h"
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

void set_group_levels(int64_t run_id, const std::vector<RunDeviation>& deviations,
                      const DetectorOptions& options, std::map<std::string, RunLevels>& levels) {
  std::map<std::string, std::vector<double>> by_group;
  for (const RunDeviation& d : deviations) by_group[*d.group].push_back(d.deviation);
  for (auto& [group, values] : by_group) {
    if (values.size() >= static_cast<size_t>(options.min_series_for_group))
      levels[group][run_id] = selected_median(std::move(values));
  }
}

std::map<std::string, RunLevels> group_levels(const std::map<int64_t, RunSeries>& by_run,
                                              const DetectorOptions& options) {
  std::map<std::string, RunLevels> levels;
  for (const auto& [id, run] : by_run) set_group_levels(id, run.deviations, options, levels);
  return levels;
}

bool can_be_peer(const std::string& group, const std::string& other) {
  const std::optional<SeriesKey> a = parse_series_key(group);
  const std::optional<SeriesKey> b = parse_series_key(other);
  return a && b && a->kernel != b->kernel && a->device == b->device && a->build == b->build;
}

namespace {

// ---- the aggregate's history and its fit to a reference level ----------------------------------

// Passed, timed, and not set aside as a regression (suspected or confirmed; a chip-change
// suspicion does count).
bool counts_for_group_history(const SeriesPoint& point) {
  return point.status == ResultStatus::passed && is_timed(point) &&
         (!is_suspicion(point.state) || (point.state == Verdict::suspected && point.chip_changed));
}

std::optional<double> level_at(const RunLevels& levels, int64_t run_id) {
  const auto found = levels.find(run_id);
  if (found == levels.end()) return std::nullopt;
  return found->second;
}

// A member's change at one run against its own center (log), before any level is taken out.
double member_deviation(const GroupMember& member, const SeriesPoint& point) {
  return std::log(point.median_s) - std::log(member.baseline->center);
}

// The aggregate's own history: for each earlier run, the median deviation over its members (at
// least half of them) that were not then suspected of a regression of their own, at the runs
// where the kernel as a whole did not trip, newest first, at most K runs. Unlike a series'
// baseline it keeps the runs a busy host made unclear: they show how the kernel feels one, and a
// median over many shapes is not thrown by a few strays.
// The aggregates are kept without a level: the median of the members' deviations less a level is
// the median less the level, so one history serves every reference it is measured against.
struct AggregateHistory {
  std::vector<double> aggregates;  // newest first, no level taken out
  std::vector<int64_t> run_ids;    // same order
  std::vector<bool> clear;         // whether each run was clear (run_is_clear), same order
  std::vector<std::string> chips;  // every member baseline's
  std::vector<double> usual_clocks;
  int64_t previous_run_id = 0;
};

// At most `runs` runs. The baseline's K runs leave out what was set aside as a regression; the
// noise of what the gate can detect (`as_noise`) keeps every passed, timed point, since the runs
// a noisy host made a kernel's shapes suspects of are its noise too.
AggregateHistory aggregate_history(const std::vector<GroupMember>& members, const GroupPrior& prior,
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
      by_run[point.run_id].push_back(member_deviation(member, point));
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
    history.run_ids.push_back(run->first);
    history.clear.push_back(clear_runs[run->first]);
    if (history.aggregates.size() == static_cast<size_t>(runs)) break;
  }
  return history;
}

// The newest `runs` runs of a history (what aggregate_history with `runs` gives).
AggregateHistory newest(const AggregateHistory& history, int runs) {
  AggregateHistory kept = history;
  const size_t size = std::min(kept.aggregates.size(), static_cast<size_t>(runs));
  kept.aggregates.resize(size);
  kept.run_ids.resize(size);
  kept.clear.resize(size);
  return kept;
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

// The history against one reference: each run's aggregate less the reference's level there, at
// the runs where the reference has one.
struct LevelledHistory {
  std::vector<double> aggregates;
  std::vector<double> levels;
  std::vector<bool> clear;
};

LevelledHistory against(const AggregateHistory& history, const RunLevels& levels) {
  LevelledHistory levelled;
  for (size_t k = 0; k < history.aggregates.size(); ++k) {
    const std::optional<double> level = level_at(levels, history.run_ids[k]);
    if (!level) continue;
    levelled.aggregates.push_back(history.aggregates[k] - *level);
    levelled.levels.push_back(*level);
    levelled.clear.push_back(history.clear[k]);
  }
  return levelled;
}

// Each run's aggregate less what the fit expects at its level.
std::vector<double> residuals_of(const LevelledHistory& history, const LoadFit& fit) {
  std::vector<double> residuals;
  for (size_t k = 0; k < history.aggregates.size(); ++k) {
    residuals.push_back(history.aggregates[k] - fit.expected(history.levels[k]));
  }
  return residuals;
}

// The residuals of a history around its fit, as a relative sigma (no floor).
double residual_spread(const LevelledHistory& history, const LoadFit& fit) {
  const std::vector<double> residuals = residuals_of(history, fit);
  return residuals.empty() ? kNotMeasured : kMadToSigma * median_absolute_deviation(residuals);
}

// The level an aggregate is measured against: the run's without the kernel, or one peer's.
struct Reference {
  std::string peer;  // empty: the run's level without the kernel's own series
  const RunLevels* levels = nullptr;
  LoadFit fit;                   // of the looked-back history to these levels
  double spread = kNotMeasured;  // of that history around the fit
};

// A peer must fit the kernel better than the run's level to replace it (a quiet host, both at
// the floor, keeps its one level), and must move like the kernel beyond what the run's level
// says of both: the rank correlation of their residuals around their own fits to the run's level
// at least kMinPeerCorrelation. Kernels that feel the host alike (one kind) correlate far above
// it; on a host whose kernels each feel it their own way, a peer whose spread is merely the
// luckiest of several does not pass it (the detector evaluation's noisy host raised false alerts
// in 0.8 % of nightlies with a spread rule alone, the peer's under 0.9x the run level's). It is
// the correlation that protects: demanding a clearly smaller spread as well (0.9x) left more of
// the kernels of a kind that is most of the run (the run's level nearly theirs) without a peer
// (86-88 % of the evaluation's injections caught over two seeds, against 88-90 % without).
constexpr double kMinPeerCorrelation = 0.5;
// Runs a peer's level and the kernel's aggregate must share before the peer can be chosen: a
// spread and a correlation from fewer say too little.
constexpr size_t kMinPeerRuns = 20;

Reference fitted(std::string peer, const RunLevels& levels, const LevelledHistory& history,
                 const DetectorOptions& options) {
  Reference reference{std::move(peer), &levels, {}, kNotMeasured};
  reference.fit = fit_load(history.levels, history.aggregates, options);
  reference.spread = residual_spread(history, reference.fit);
  return reference;
}

// How the kernel and a peer move beyond the run's level, at the runs where both and the run's
// level are known: the rank correlation of their residuals around their own fits to that level.
double peer_correlation(const AggregateHistory& looked_back, const RunLevels& run_levels,
                        const RunLevels& peer_levels, const DetectorOptions& options) {
  LevelledHistory kernel, peer;
  for (size_t k = 0; k < looked_back.aggregates.size(); ++k) {
    const std::optional<double> run = level_at(run_levels, looked_back.run_ids[k]);
    const std::optional<double> other = level_at(peer_levels, looked_back.run_ids[k]);
    if (!run || !other) continue;
    kernel.aggregates.push_back(looked_back.aggregates[k] - *run);
    peer.aggregates.push_back(*other - *run);
    kernel.levels.push_back(*run);
    peer.levels.push_back(*run);
  }
  auto residuals = [&](const LevelledHistory& history) {
    return residuals_of(history, fit_load(history.levels, history.aggregates, options));
  };
  return rank_correlation(residuals(kernel), residuals(peer));
}

// Where one level does not fit the kernel: the peer whose own level its aggregate follows most
// closely over the looked-back history (the smallest spread around the fit), when the peer passes
// the rules above and was measured at `run_id`. A kernel and its peer feel the host alike (on a
// noisy host, cpu.naive and the masked kernels that also hold the score matrix), so what the host
// did to both cancels and the kernel's own change remains.
Reference choose_reference(const AggregateHistory& looked_back, const GroupReferences& references,
                           int64_t run_id, const DetectorOptions& options) {
  const LevelledHistory by_run_level = against(looked_back, references.run);
  Reference run_level = fitted("", references.run, by_run_level, options);
  if (!options.peer_levels || by_run_level.aggregates.size() < kMinPeerRuns ||
      !(run_level.spread > options.spread_floor)) {
    return run_level;
  }
  Reference best = run_level;
  for (const auto& [peer, levels] : references.peers) {
    if (!level_at(*levels, run_id)) continue;
    const LevelledHistory by_peer = against(looked_back, *levels);
    if (by_peer.aggregates.size() < kMinPeerRuns) continue;
    // Better than the best so far, which is at least as good as the run's level.
    Reference candidate = fitted(peer, *levels, by_peer, options);
    if (!(candidate.spread < best.spread)) continue;
    if (peer_correlation(looked_back, references.run, *levels, options) >= kMinPeerCorrelation)
      best = std::move(candidate);
  }
  return best;
}

// ---- the aggregate at the run and at its rerun -------------------------------------------------

const SeriesPoint* candidate_of(const GroupMember& member) { return &*member.input->candidate; }

const SeriesPoint* rerun_of(const GroupMember& member) {
  const auto& rerun = member.input->rerun;
  return rerun && rerun->status == ResultStatus::passed && is_timed(*rerun) ? &*rerun : nullptr;
}

// The median change of the members `point_of` finds (at least half of them) against what the fit
// expects at the reference's level at their run; an empty trip when too few, or when the
// reference has no level there (a peer not re-measured).
Trip aggregate_trip(const std::vector<GroupMember>& members, const RunLevels& levels,
                    const LoadFit& fit, double spread,
                    const SeriesPoint* (*point_of)(const GroupMember&),
                    const DetectorOptions& options) {
  std::vector<double> deviations;
  int64_t at_run = 0;
  for (const GroupMember& member : members) {
    if (const SeriesPoint* point = point_of(member)) {
      at_run = point->run_id;
      deviations.push_back(member_deviation(member, *point));
    }
  }
  Trip result;
  const std::optional<double> level = level_at(levels, at_run);
  if (2 * deviations.size() < members.size() || deviations.empty() || !level) return result;
  result.change = std::exp(median(deviations) - *level - fit.expected(*level)) - 1;
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
  // A run far from its usual level, or scattered, is unclear for an aggregate measured against
  // the other kernels: a busy host moves kernels apart. Measured against its peer, what the
  // host did reached both (the peer's fit, over busy runs too, says how well).
  const bool by_peer = !group.peer.empty();
  conditions.clock_off =
      (!clocks.empty() && !history.usual_clocks.empty() &&
       std::fabs(median(clocks) / median(history.usual_clocks) - 1) > options.clock_tolerance) ||
      (!by_peer && !run_is_clear(first, options));
  // A rerun is clean when the re-measured cases' own level is near 1 (or a peer re-measured with
  // it).
  conditions.clean_rerun = std::isfinite(group.rerun_trip.change) && any_rerun != nullptr &&
                           (by_peer || run_is_clear(*any_rerun, options));
  // A host-timed (CPU) kernel needs both its rerun and the next run, as its series do: a busy
  // host, or a kernel with two speeds, stays slow for longer than a rerun is apart (measured
  // against a peer too: the detector evaluation's noisy host raised a false alert in 1.9 % of
  // nightlies when a peer's rerun alone confirmed).
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
Detectable group_detectable(const LevelledHistory& looked_back, const LoadFit& fit,
                            const GroupAnalysis& group, const GroupConditions& conditions,
                            const DetectorOptions& options) {
  DetectionNoise noise;
  noise.threshold = std::max(options.min_change, options.spreads * group.spread);
  noise.spread = group.spread;
  noise.host_timed = conditions.host_timed;
  for (size_t k = 0; k < looked_back.aggregates.size(); ++k) {
    noise.deviations.push_back(std::exp(looked_back.aggregates[k] -
                                        fit.expected(looked_back.levels[k])) - 1);
    noise.clear.push_back(looked_back.clear[k] || !group.peer.empty());
  }
  return detectable_change(noise);
}

}  // namespace

GroupAnalysis judge_group(const std::string& key, const std::vector<GroupMember>& members,
                          const GroupReferences& references, const GroupPrior& prior,
                          const DetectorOptions& options) {
  GroupAnalysis group;
  group.group = key;
  group.members = members.size();
  // Which level fits the kernel is read over the longer look back, less the runs set aside as
  // a regression (a step of its own is no part of how it feels the host); the baseline is its
  // newest K runs; the noise of what the gate can detect keeps every passed, timed point
  // (aggregate_history's `as_noise`).
  // One pass over the members' histories serves both (`--window` may exceed max_history).
  const AggregateHistory longest = aggregate_history(
      members, prior, options, std::max(options.window, options.max_history));
  const AggregateHistory history = newest(longest, options.window);
  group.previous_run_id = history.previous_run_id;
  const int64_t run_id = members.front().input->candidate->run_id;
  const Reference reference =
      choose_reference(newest(longest, options.max_history), references, run_id, options);
  const AggregateHistory looked_back =
      aggregate_history(members, prior, options, options.max_history, /*as_noise=*/true);
  group.peer = reference.peer;
  // Against the run's level, the fit is the baseline's: the last K runs. A peer's relation to
  // the kernel is read over the longer look back, where it was chosen: the residuals are the
  // kernel's own noise, and K runs give too rough a spread to set a threshold with.
  LoadFit fit = reference.fit;
  double spread = reference.spread;
  if (reference.peer.empty()) {
    const LevelledHistory window = against(history, references.run);
    if (window.aggregates.size() < static_cast<size_t>(options.min_baseline_runs)) {
      group.state = Verdict::insufficient_history;
      return group;
    }
    // The aggregate expected at a run of a given level: a kernel can feel a busy host more or
    // less than the median series does (on the project's shared CPU host, cpu.naive slows 1.8x
    // as much as the run and cpu.flash 0.85x), which no single level can take out.
    fit = fit_load(window.levels, window.aggregates, options);
    spread = residual_spread(window, fit);
  }
  group.load_sensitivity = fit.slope;
  group.spread = std::max(spread, options.spread_floor);
  const RunLevels& levels = *reference.levels;
  group.trip = aggregate_trip(members, levels, fit, group.spread, candidate_of, options);
  group.reference_level = level_at(levels, run_id).value_or(0);
  group.rerun_trip = aggregate_trip(members, levels, fit, group.spread, rerun_of, options);
  const GroupConditions conditions = group_conditions(members, history, group, options);
  group.detectable =
      group_detectable(against(looked_back, levels), fit, group, conditions, options);

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
