// Robust summaries of timing samples.
#pragma once

#include <vector>

namespace attnbench {

double median(std::vector<double> values);  // NaN for an empty input
double mean(const std::vector<double>& values);
double sample_stddev(const std::vector<double>& values);  // n - 1 in the denominator; 0 for n < 2
// Median absolute deviation (unscaled); multiply by kMadToSigma for a normal-consistent spread.
double median_absolute_deviation(const std::vector<double>& values);
constexpr double kMadToSigma = 1.4826;
// Linear-interpolated quantile, q in [0, 1].
double quantile(std::vector<double> values, double q);
// Spearman's rank correlation of two equally long samples (ties get their mean rank); NaN for
// fewer than 3 pairs or a constant sample.
double rank_correlation(const std::vector<double>& x, const std::vector<double>& y);

}  // namespace attnbench
