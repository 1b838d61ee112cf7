// Inside the analysis room: kernels as wholes. Which kernels moved together in a run, the run's
// level as one kernel sees it (without its own series), and the kernel-wide aggregate judged
// against its history and fitted to how the kernel feels a busy host (the rule: regression.h).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "harness/analysis/detector.h"
#include "harness/analysis/regression.h"

namespace attnbench {

// One series at one run: log(median) - log(its baseline's center), before any level is taken out.
struct RunDeviation {
  const std::string* group;
  double deviation;
  double relative_spread;  // of its baseline
};

double median_deviation(const std::vector<RunDeviation>& deviations);

// The groups (kernels) whose series moved together by more than min_change against the level of
// the whole run: a kernel that changed, or one a busy host slows more than the others. Largest
// move first, and only while the others keep at least half the series: when most kernels moved
// apart, the run as a whole is the best level there is.
std::set<std::string> moved_groups(const std::vector<RunDeviation>& deviations,
                                   const DetectorOptions& options);

// How widely deviations scatter around the level, in units of each series' own relative spread:
// a robust sigma of (deviation - level) / spread, about 1 when every series behaves as usual.
// Only the series faster than the level count: a busy host scatters series both ways, while a
// real regression, however many series it takes, only adds slower ones and must not make its
// own run look busy.
double scatter_around(const std::vector<RunDeviation>& deviations, double level);

// One run's series as the kernel-wide aggregates see them, with the kernels that moved as a whole.
struct RunSeries {
  std::vector<RunDeviation> deviations;
  std::set<std::string> moved;
};

// The run's level as a kernel-wide aggregate sees it: from the other kernels' series, less those
// of kernels that moved as a whole (0 when too few are left, as for any run without enough
// series).
double level_without(const RunSeries& run, const std::string& group,
                     const DetectorOptions& options);

// Each kernel's own level at each run: the median deviation of its series (at least
// min_series_for_group of them), whatever the other kernels did. What a peer offers (below).
std::map<std::string, RunLevels> group_levels(const std::map<int64_t, RunSeries>& by_run,
                                              const DetectorOptions& options);
// The same from one run's deviations, into `levels` (a rerun's: from every series it re-measured,
// where its level takes only the controls).
void set_group_levels(int64_t run_id, const std::vector<RunDeviation>& deviations,
                      const DetectorOptions& options, std::map<std::string, RunLevels>& levels);

// Whether `other` may be the peer of `group`: another kernel on the same device with the same
// build. Never the same kernel in another pass: a change to a kernel slows its passes together,
// and one would hide the other.
bool can_be_peer(const std::string& group, const std::string& other);

// What a kernel-wide aggregate can be measured against: the run's level without the kernel's own
// series (level_without, at every run), and each possible peer's own level (group_levels).
struct GroupReferences {
  RunLevels run;
  std::map<std::string, const RunLevels*> peers;  // by group key
};

// A member of a kernel-wide group: a judgeable series and its baseline.
struct GroupMember {
  const SeriesInput* input;
  const Baseline* baseline;
};

// The kernel-wide aggregate of `members` (every candidate of one run) against its history, with
// the level of each run measured without the group's own series (so a kernel that slowed as a
// whole cannot carry the level with it and hide part of its own slowdown), or, where one level
// does not fit the kernel, by the peer that moves most like it (the rule: regression.h).
GroupAnalysis judge_group(const std::string& key, const std::vector<GroupMember>& members,
                          const GroupReferences& references, const GroupPrior& prior,
                          const DetectorOptions& options);

}  // namespace attnbench
