// The Mann-Whitney U test (Wilcoxon rank-sum): whether one sample tends to be larger than
// another, without assuming their distribution. The detector tests a rerun's repetitions against
// the baseline run's with it.
#pragma once

#include <cstddef>
#include <vector>

#include "harness/core/records.h"

namespace attnbench {

struct MannWhitneyResult {
  double u = kNotMeasured;          // pairs (x, y) with x > y, ties counting one half
  double z = kNotMeasured;          // normal approximation with tie and continuity corrections
  double p_greater = kNotMeasured;  // one-sided: the first sample tends to be larger
  double p_less = kNotMeasured;     // one-sided: the first sample tends to be smaller
  double p_two_sided = kNotMeasured;
  bool exact = false;  // from the exact null distribution (no ties, both samples small)
};

// Exact for samples of at most kMannWhitneyExactMax values each without ties, the normal
// approximation otherwise. NaN p-values when either sample is empty.
constexpr size_t kMannWhitneyExactMax = 20;
MannWhitneyResult mann_whitney_u(const std::vector<double>& first,
                                 const std::vector<double>& second);

}  // namespace attnbench
