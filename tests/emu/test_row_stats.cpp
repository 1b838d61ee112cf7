// The softmax's shared row statistics (kernels/cuda/common/row_stats.cuh), compiled as a kernel is
// for `emu` and run by an emulated block: a row summarized thread by thread (add_score) and merged
// across four warps (block_row_stats) gives the fp64 max and sum of exp(s - max) of its visible
// scores, on fresh random rows with masked (-inf) keys among them; a row with no visible key
// gives max -inf and sum 0, never NaN, and the online softmax's guards turn that into exponent
// base 0, 1 / l = 0 and LSE -inf; the lane reductions reduce over exactly their lanes.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cuda/common/row_stats.cuh"
#include "kernels/cuda/common/shared.cuh"

namespace attnbench {
namespace {

using gpu::kNegInf;
constexpr int kWarps = 4;
constexpr unsigned kThreads = kWarps * 32;

emu::Launch one_block(uint64_t seed) {
  emu::Launch launch;
  launch.block_dim = {kThreads, 1, 1};
  launch.seed = seed;
  launch.workers = 1;
  return launch;
}

// Every thread's view of block_row_stats over `scores`, each thread taking a strided share.
std::vector<gpu::RowStats> block_stats(const std::vector<float>& scores, uint64_t seed) {
  std::vector<gpu::RowStats> seen(kThreads);
  emu::launch_grid(one_block(seed), [&] {
    gpu::RowStats local{kNegInf, 0.0f};
    for (size_t j = threadIdx.x; j < scores.size(); j += kThreads) {
      local = gpu::add_score(local, scores[j]);
    }
    seen[threadIdx.x] = gpu::block_row_stats<kWarps>(local);
  });
  return seen;
}

TEST(RowStats, ABlockMergesItsThreadsSharesIntoTheRowsMaxAndSum) {
  std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (const size_t length : {1u, 37u, 1000u}) {
    std::vector<float> scores(length);
    for (float& s : scores) s = std::bernoulli_distribution(0.3)(rng) ? kNegInf : normal(rng);
    scores[length / 2] = normal(rng);  // at least one visible key
    double max = -INFINITY, sum = 0;
    for (float s : scores) max = std::max(max, static_cast<double>(s));
    for (float s : scores) sum += std::exp(static_cast<double>(s) - max);
    const std::vector<gpu::RowStats> seen = block_stats(scores, rng());
    for (const gpu::RowStats& stats : seen) {  // every thread gets the same (max, sum)
      EXPECT_EQ(stats.max, static_cast<float>(max)) << length;
      EXPECT_NEAR(stats.sum, sum, 1e-5 * sum) << length;
      EXPECT_EQ(stats.sum, seen[0].sum) << "threads disagree";
    }
    EXPECT_NEAR(gpu::row_lse(seen[0].max, seen[0].sum), max + std::log(sum), 1e-5);
    EXPECT_FLOAT_EQ(gpu::inverse_row_sum(seen[0].sum), static_cast<float>(1.0 / sum));
  }
}

TEST(RowStats, ARowWithNoVisibleKeyGivesZeroWeightAndMinusInfinityNeverNaN) {
  const std::vector<float> masked(50, kNegInf);
  for (const gpu::RowStats& stats : block_stats(masked, std::random_device{}())) {
    EXPECT_EQ(stats.max, kNegInf);
    EXPECT_EQ(stats.sum, 0.0f);
  }
  EXPECT_EQ(gpu::exponent_base(kNegInf), 0.0f);  // exp2(-inf - 0) = 0, not exp2(-inf + inf)
  EXPECT_EQ(std::exp2(kNegInf - gpu::exponent_base(kNegInf)), 0.0f);
  EXPECT_EQ(gpu::exponent_base(3.5f), 3.5f);
  EXPECT_EQ(gpu::inverse_row_sum(0.0f), 0.0f);
  EXPECT_EQ(gpu::row_lse(kNegInf, 0.0f), kNegInf);
  const gpu::RowStats empty = gpu::merge({kNegInf, 0.0f}, {kNegInf, 0.0f});
  EXPECT_EQ(empty.max, kNegInf);
  EXPECT_EQ(empty.sum, 0.0f);
}

TEST(RowStats, LaneReductionsReduceOverExactlyTheirLanes) {
  std::array<float, 32> values{}, quad_max{}, quad_sum{}, half_max{}, half_sum{};
  std::mt19937 rng(std::random_device{}());
  for (float& v : values) v = static_cast<float>(std::uniform_int_distribution<int>(-99, 99)(rng));
  emu::Launch launch = one_block(rng());
  launch.block_dim = {32, 1, 1};
  emu::launch_grid(launch, [&] {
    const unsigned lane = threadIdx.x;
    quad_max[lane] = gpu::quad_max(values[lane]);
    quad_sum[lane] = gpu::quad_sum(values[lane]);
    half_max[lane] = gpu::half_warp_max(values[lane]);
    half_sum[lane] = gpu::half_warp_sum(values[lane]);
  });
  for (unsigned lane = 0; lane < 32; ++lane) {
    const auto quad = values.begin() + lane / 4 * 4, half = values.begin() + lane / 16 * 16;
    EXPECT_EQ(quad_max[lane], *std::max_element(quad, quad + 4)) << lane;
    EXPECT_EQ(quad_sum[lane], quad[0] + quad[1] + quad[2] + quad[3]) << lane;  // small integers
    EXPECT_EQ(half_max[lane], *std::max_element(half, half + 16)) << lane;
    float sum = 0;
    for (int i = 0; i < 16; ++i) sum += half[i];
    EXPECT_EQ(half_sum[lane], sum) << lane;
  }
}

}  // namespace
}  // namespace attnbench
