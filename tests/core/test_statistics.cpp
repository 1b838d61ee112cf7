#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "harness/core/statistics.h"

namespace attnbench {
namespace {

TEST(Statistics, HandComputedValues) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(mean({1, 2, 3, 4}), 2.5);
  // Sample stddev of 2,4,4,4,5,5,7,9: mean 5, squared deviations sum 32, / 7.
  EXPECT_DOUBLE_EQ(sample_stddev({2, 4, 4, 4, 5, 5, 7, 9}), std::sqrt(32.0 / 7.0));
  // MAD of 1,1,2,2,4,6,9: median 2, deviations 1,1,0,0,2,4,7 -> median 1.
  EXPECT_DOUBLE_EQ(median_absolute_deviation({1, 1, 2, 2, 4, 6, 9}), 1);
  EXPECT_DOUBLE_EQ(quantile({10, 20, 30, 40, 50}, 0.25), 20);
  EXPECT_DOUBLE_EQ(quantile({10, 20}, 0.5), 15);
  EXPECT_TRUE(std::isnan(median({})));
  EXPECT_EQ(sample_stddev({5}), 0);
}

TEST(Statistics, RobustSpreadMatchesNormalSigma) {
  std::random_device device;
  const unsigned seed = device();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(100.0, 2.0);
  std::vector<double> values(20000);
  for (double& v : values) v = normal(rng);
  EXPECT_NEAR(median(values), 100.0, 0.1);
  EXPECT_NEAR(kMadToSigma * median_absolute_deviation(values), 2.0, 0.1);
  EXPECT_NEAR(sample_stddev(values), 2.0, 0.1);
  // One wild outlier moves the mean but barely the median.
  values.push_back(1e9);
  EXPECT_GT(mean(values), 1000.0);
  EXPECT_NEAR(median(values), 100.0, 0.1);
}

// Spearman's rho: ranks, ties at their mean rank; monotone transforms do not change it.
TEST(Statistics, RankCorrelationByHand) {
  EXPECT_DOUBLE_EQ(rank_correlation({1, 2, 3, 4}, {10, 20, 30, 40}), 1);
  EXPECT_DOUBLE_EQ(rank_correlation({1, 2, 3, 4}, {1, 8, 27, 1000}), 1);
  EXPECT_DOUBLE_EQ(rank_correlation({1, 2, 3, 4}, {4, 3, 2, 1}), -1);
  // Ranks 1,2,3,4,5 against 2,1,4,3,5: d^2 sums to 4, rho = 1 - 6 * 4 / (5 * 24) = 0.8.
  EXPECT_NEAR(rank_correlation({1, 2, 3, 4, 5}, {2, 1, 4, 3, 5}), 0.8, 1e-12);
  // Ties: x ranks 1.5,1.5,3,4 against 1,2,3,4: Pearson of the ranks.
  const double sxy = (-1) * (-1.5) + (-1) * (-0.5) + 0.5 * 0.5 + 1.5 * 1.5;
  const double sxx = 1 + 1 + 0.25 + 2.25, syy = 2.25 + 0.25 + 0.25 + 2.25;
  EXPECT_NEAR(rank_correlation({5, 5, 6, 7}, {1, 2, 3, 4}), sxy / std::sqrt(sxx * syy), 1e-12);
  EXPECT_TRUE(std::isnan(rank_correlation({1, 2}, {1, 2})));
  EXPECT_TRUE(std::isnan(rank_correlation({3, 3, 3}, {1, 2, 3})));
  EXPECT_TRUE(std::isnan(rank_correlation({1, 2, 3}, {1, 2})));
}

}  // namespace
}  // namespace attnbench
