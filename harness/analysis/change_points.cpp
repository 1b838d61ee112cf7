#include "harness/analysis/change_points.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "harness/core/statistics.h"

namespace attnbench {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

}  // namespace

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

}  // namespace attnbench
