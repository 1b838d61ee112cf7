#include "harness/analysis/mann_whitney.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace attnbench {
namespace {

double normal_upper_tail(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

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
  const double variance = size1 * size2 / 12 * ((total + 1) - tie_term / (total * (total - 1)));
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

}  // namespace attnbench
