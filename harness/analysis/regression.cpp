// Judging one run: its level, then each series against its own history (detector.cpp), then each
// kernel as a whole (kernel_wide.cpp). The rule is written out in regression.h.
#include "harness/analysis/regression.h"

#include <cmath>
#include <optional>

#include "harness/analysis/detector.h"
#include "harness/analysis/kernel_wide.h"
#include "harness/core/series_key.h"

namespace attnbench {

// ---- groups of series --------------------------------------------------------------------------

std::string group_key(const std::string& series_key) {
  const std::optional<SeriesKey> key = parse_series_key(series_key);
  return key ? key->kernel_wide().text() : series_key;
}

std::string kernel_of_series_key(const std::string& series_key) {
  const std::optional<SeriesKey> key = parse_series_key(series_key);
  return key ? key->kernel : series_key.substr(0, series_key.find('|'));
}

std::string kernel_label_of_group(const std::string& group) {
  const std::optional<SeriesKey> key = parse_series_key(group);
  if (!key) return kernel_of_series_key(group);
  return key->pass() == Pass::fwd ? key->kernel
                                  : key->kernel + " (" + std::string(pass_name(key->pass())) + ")";
}

std::string shape_of_series_key(const std::string& series_key) {
  const std::optional<SeriesKey> key = parse_series_key(series_key);
  return key ? key->case_label() : series_key;
}

// ---- judging one run ---------------------------------------------------------------------------

namespace {

// Passed, timed, and with a usable baseline.
bool judgeable(const std::optional<SeriesPoint>& point, const Baseline& baseline) {
  return point && point->status == ResultStatus::passed && is_timed(*point) && baseline.usable;
}

RunDeviation deviation_of(const SeriesInput& input, const SeriesPoint& point,
                          const Baseline& baseline) {
  return {&input.group, std::log(point.median_s) - std::log(baseline.center),
          baseline.spread / baseline.center};
}

// The run's level: what moved every series together. Series with an open regression are left
// out: their own slowdown is known, and many of them would drag the median along. So are, in a
// second pass, the series of a kernel that moved as a whole by more than min_change against that
// first level: one slowed kernel of five is a fifth of the series and would carry the level, and
// so hide part of its own slowdown, with it. Returns every judgeable candidate's deviation (the
// run as the kernel-wide aggregates see it) and the kernels that moved.
std::vector<RunDeviation> measure_run_level(std::vector<SeriesInput>& inputs, RunAnalysis& analysis,
                                            std::set<std::string>& moved,
                                            const DetectorOptions& options) {
  std::vector<RunDeviation> candidates;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Baseline& baseline = analysis.series[i].baseline;
    if (!judgeable(inputs[i].candidate, baseline) || has_open_regression(inputs[i].history))
      continue;
    candidates.push_back(deviation_of(inputs[i], *inputs[i].candidate, baseline));
  }
  moved = moved_groups(candidates, options);
  std::vector<RunDeviation> level_series;
  for (const RunDeviation& d : candidates) {
    if (!moved.count(*d.group)) level_series.push_back(d);
  }
  const size_t enough = static_cast<size_t>(options.min_series_for_run_level);
  if (level_series.size() < enough) level_series = candidates;
  if (level_series.size() >= enough) {
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
  return candidates;
}

// The rerun's level, from the series it re-measured as controls: not the suspects, which cannot
// tell a slow moment of the host from their own slowdown, so neither the series that tripped nor
// those of a kernel that moved as a whole. Returns the controls' deviations.
std::vector<RunDeviation> measure_rerun_level(std::vector<SeriesInput>& inputs,
                                              RunAnalysis& analysis,
                                              const std::set<std::string>& moved,
                                              const DetectorOptions& options) {
  std::vector<RunDeviation> controls;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Baseline& baseline = analysis.series[i].baseline;
    if (!judgeable(inputs[i].candidate, baseline) || !judgeable(inputs[i].rerun, baseline))
      continue;
    if (moved.count(inputs[i].group)) continue;
    if (trip(baseline, level_free_log(*inputs[i].candidate), options).slower) continue;
    controls.push_back(deviation_of(inputs[i], *inputs[i].rerun, baseline));
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
  return controls;
}

// Each series against its own history and, a lone one, against the run's excursions; returns the
// judgeable ones by group.
std::map<std::string, std::vector<GroupMember>> judge_series(std::vector<SeriesInput>& inputs,
                                                             const Excursions& excursions,
                                                             RunAnalysis& analysis,
                                                             const DetectorOptions& options) {
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
    result.performance =
        judge_performance(input, result.baseline, excursions.family, excursions.own[i], options);
    result.accuracy = judge_accuracy(input, result.baseline, options);
    if (previous != nullptr && previous->status == ResultStatus::passed &&
        input.candidate->status != ResultStatus::passed) {
      result.status_change =
          "passed -> " + std::string(result_status_name(input.candidate->status));
    }
    if (judgeable(input.candidate, result.baseline))
      groups[input.group].push_back({&input, &result.baseline});
  }
  return groups;
}

// The rerun's run id, when the inputs have one.
std::optional<int64_t> rerun_run_id(const std::vector<SeriesInput>& inputs) {
  for (const SeriesInput& input : inputs) {
    if (input.rerun) return input.rerun->run_id;
  }
  return std::nullopt;
}

// Every run a kernel-wide aggregate compares, as deviations of each series against today's
// centers (so the aggregate's history does not depend on what an earlier analysis could see):
// its earlier runs from the histories of every series, the run (`candidates`) and its rerun
// (`controls`); with the kernels that moved as a whole at each.
std::map<int64_t, RunSeries> runs_seen(const std::vector<SeriesInput>& inputs,
                                       const RunAnalysis& analysis,
                                       std::vector<RunDeviation> candidates,
                                       std::vector<RunDeviation> controls,
                                       const DetectorOptions& options) {
  std::map<int64_t, RunSeries> by_run;
  std::optional<int64_t> run_id;
  const std::optional<int64_t> rerun_id = rerun_run_id(inputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].candidate && !run_id) run_id = inputs[i].candidate->run_id;
    const Baseline& baseline = analysis.series[i].baseline;
    if (!baseline.usable) continue;
    for (const SeriesPoint& point : inputs[i].history) {
      if (point.status != ResultStatus::passed || !is_timed(point)) continue;
      by_run[point.run_id].deviations.push_back(deviation_of(inputs[i], point, baseline));
    }
  }
  if (run_id) by_run[*run_id].deviations = std::move(candidates);
  if (rerun_id) by_run[*rerun_id].deviations = std::move(controls);
  for (auto& [id, run] : by_run) run.moved = moved_groups(run.deviations, options);
  return by_run;
}

// Each earlier run's level as measured today: the median of its series' deviations from today's
// centers, less the kernels that moved as a whole (absent when too few series), so that an
// excursion does not depend on what an earlier analysis could see (a device's first runs had
// no level at all).
RunLevels levels_today(const std::map<int64_t, RunSeries>& by_run, const DetectorOptions& options) {
  RunLevels levels;
  for (const auto& [id, run] : by_run) {
    std::vector<RunDeviation> kept;
    for (const RunDeviation& d : run.deviations) {
      if (!run.moved.count(*d.group)) kept.push_back(d);
    }
    if (kept.size() >= static_cast<size_t>(options.min_series_for_run_level)) {
      levels[id] = median_deviation(kept);
    }
  }
  return levels;
}


// Every judgeable series the rerun re-measured, against today's centers.
std::vector<RunDeviation> rerun_deviations(const std::vector<SeriesInput>& inputs,
                                           const RunAnalysis& analysis) {
  std::vector<RunDeviation> deviations;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Baseline& baseline = analysis.series[i].baseline;
    if (judgeable(inputs[i].rerun, baseline))
      deviations.push_back(deviation_of(inputs[i], *inputs[i].rerun, baseline));
  }
  return deviations;
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
  std::set<std::string> moved;
  std::vector<RunDeviation> candidates = measure_run_level(inputs, analysis, moved, options);
  std::vector<RunDeviation> controls = measure_rerun_level(inputs, analysis, moved, options);
  const std::map<int64_t, RunSeries> by_run =
      runs_seen(inputs, analysis, std::move(candidates), std::move(controls), options);
  const Excursions excursions =
      measure_excursions(inputs, analysis.series, levels_today(by_run, options), options);
  analysis.family = excursions.family;
  const std::map<std::string, std::vector<GroupMember>> groups =
      judge_series(inputs, excursions, analysis, options);

  // A kernel-wide aggregate is judged against levels measured without its own series, at every
  // run it compares, or against a peer's own level.
  // A peer's level at the rerun is from every shape of it the rerun re-measured (it was rerun
  // because it is a suspect's peer), not only from the controls that set the rerun's own level.
  std::map<std::string, RunLevels> own_levels = group_levels(by_run, options);
  if (const std::optional<int64_t> rerun_id = rerun_run_id(inputs)) {
    set_group_levels(*rerun_id, rerun_deviations(inputs, analysis), options, own_levels);
  }
  for (const auto& [key, members] : groups) {
    if (members.size() < static_cast<size_t>(options.min_series_for_group)) continue;
    GroupReferences references;
    for (const auto& [id, run] : by_run) references.run[id] = level_without(run, key, options);
    for (const auto& [other, levels] : own_levels) {
      if (can_be_peer(key, other)) references.peers[other] = &levels;
    }
    const auto prior = group_priors.find(key);
    analysis.groups.push_back(
        judge_group(key, members, references,
                    prior == group_priors.end() ? GroupPrior{} : prior->second, options));
  }
  return analysis;
}

}  // namespace attnbench
