// What the gate can see (issue 41): the smallest slowdown a series or a kernel-wide aggregate
// would be confirmed for, within one nightly and within three, at its own thresholds and noise.
//
// A measurement of the series (or aggregate) at a run reads its true change plus the noise its
// own history shows after normalization: the level-free deviations of its recent runs from
// their center (for an aggregate, from its fit to the run levels), each run clear or unclear
// (its level or scatter far from usual). A slowdown d trips a run when d plus a deviation drawn
// from that history exceeds the threshold; with too short a history, a normal deviation of the
// spread stands in. The rule (regression.h) then needs, each nightly being its run and its rerun:
//   device-timed (GPU)  one nightly whose run trips clear and whose rerun trips too;
//   host-timed (CPU)    two such nightlies in a row (suspected by the first, confirmed by the
//                       second): never within one nightly.
// An unclear run counts through a clean rerun (clear at the history's share); with its rerun
// unclear too its trip is ambiguous and holds an open suspicion; any other nightly without both
// trips ends it. The
// detectable change is the smallest whose confirmation has kDetectionPower probability within
// the nightlies; kBlind (+infinity) when no change up to kMaxDetectable reaches it, or when the
// rule never confirms the series on its own. The run's and its rerun's deviations are taken as
// independent.
#pragma once

#include <limits>
#include <vector>

namespace attnbench {

constexpr double kDetectionPower = 0.9;
constexpr double kMaxDetectable = 1.0;  // +100 %: beyond it a series is blind, not "detectable"
// What a blind series or aggregate can detect (stored as such: NULL stays "not analysed so").
constexpr double kBlind = std::numeric_limits<double>::infinity();
// Fewer recent runs than this say too little about the tails: the normal stands in.
constexpr int kMinDetectionRuns = 10;

struct DetectionNoise {
  double threshold = 0.03;  // relative: a trip needs more than this change
  double spread = 0.005;    // relative sd of one measurement's change, where the history is short
  bool host_timed = false;  // a CPU series: its rerun and the next run both needed
  // The recent runs' level-free deviations (relative: +0.02 = 2 % slower than expected) and
  // whether each run was clear; used when there are kMinDetectionRuns of them.
  std::vector<double> deviations;
  std::vector<bool> clear;
};

struct Detectable {
  double within_one = 0;    // relative slowdown; kBlind: not within one nightly
  double within_three = 0;  // relative slowdown; kBlind: not within three
};

// The probability that a slowdown of `change` (relative) is confirmed within `nightlies`.
double confirmation_probability(const DetectionNoise& noise, double change, int nightlies);

// The smallest slowdowns confirmed with kDetectionPower within one and within three nightlies.
Detectable detectable_change(const DetectionNoise& noise);

}  // namespace attnbench
