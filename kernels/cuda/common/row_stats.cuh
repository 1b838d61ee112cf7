// The softmax's row statistics, one definition for every in-house CUDA kernel, forward and
// backward (issue 37): the row's max m and sum l of exp(s - m), and the guards that keep a row
// with no visible key from making NaN (exp(-inf - -inf)) or dividing by zero.
//   - reductions over the lanes that share a row: four (an mma.sync or wgmma accumulator row,
//     lanes 4g .. 4g + 3), sixteen (cuda.flash1's half-warp rows);
//   - RowStats: a materialized row's (m, l) summarized thread by thread and merged across the
//     block (cuda.naive, cuda.naive_cublas);
//   - the online softmax's guards (flash1/2/3): the exponent base of a running max, 1 / l, LSE.
#pragma once

#include <limits>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/shared.cuh"

namespace attnbench::gpu {
inline namespace ATTNBENCH_TARGET {

constexpr int kWarpSize = 32;
constexpr unsigned kFullWarp = 0xffffffffu;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// ---- reductions over the lanes of one row ---------------------------------------------------

__device__ __forceinline__ float quad_max(float value) {
  value = fmaxf(value, __shfl_xor_sync(kFullWarp, value, 1));
  return fmaxf(value, __shfl_xor_sync(kFullWarp, value, 2));
}

__device__ __forceinline__ float quad_sum(float value) {
  value += __shfl_xor_sync(kFullWarp, value, 1);
  return value + __shfl_xor_sync(kFullWarp, value, 2);
}

// Over the 16 lanes of a half-warp (xor offsets below 16 stay inside the half).
__device__ __forceinline__ float half_warp_max(float value) {
  for (int offset = 8; offset > 0; offset /= 2) {
    value = fmaxf(value, __shfl_xor_sync(kFullWarp, value, offset));
  }
  return value;
}
__device__ __forceinline__ float half_warp_sum(float value) {
  for (int offset = 8; offset > 0; offset /= 2) {
    value += __shfl_xor_sync(kFullWarp, value, offset);
  }
  return value;
}
// Over the whole warp, every lane with the total.
__device__ __forceinline__ float warp_sum(float value) {
  value = half_warp_sum(value);
  return value + __shfl_xor_sync(kFullWarp, value, 16);
}

// ---- a materialized row: (max, sum of exp(score - max)) -----------------------------------
// Two summaries merge exactly (up to rounding), so each thread summarizes its strided share of a
// row in one pass and the block merges the shares.
struct RowStats {
  float max;
  float sum;
};

__device__ __forceinline__ RowStats merge(RowStats a, RowStats b) {
  const float max = fmaxf(a.max, b.max);
  if (max == kNegInf) return {kNegInf, 0.0f};  // both empty: exp(-inf - -inf) would be NaN
  return {max, a.sum * expf(a.max - max) + b.sum * expf(b.max - max)};
}

__device__ __forceinline__ RowStats add_score(RowStats stats, float score) {
  if (score == kNegInf) return stats;  // a masked key adds exp(-inf) = 0; -inf - -inf is NaN
  if (score > stats.max) return {score, stats.sum * expf(stats.max - score) + 1.0f};
  return {stats.max, stats.sum + expf(score - stats.max)};
}

// Every thread of a block of kWarps warps gets the row's (max, sum). A fixed shuffle tree and a
// fixed warp order: the same bits every run.
template <int kWarps>
__device__ __forceinline__ RowStats block_row_stats(RowStats local) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const RowStats other{__shfl_xor_sync(kFullWarp, local.max, offset),
                         __shfl_xor_sync(kFullWarp, local.sum, offset)};
    local = merge(local, other);
  }
  using WarpStats = RowStats[kWarps];
  ATTNBENCH_SHARED(WarpStats, warp_stats, alignof(RowStats));
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  if (threadIdx.x % kWarpSize == 0) warp_stats[warp] = local;
  __syncthreads();
  RowStats total = warp_stats[0];
  for (int w = 1; w < kWarps; ++w) total = merge(total, warp_stats[w]);
  return total;
}

// The sum of one float per thread of a block of kWarps warps, which every thread gets. A fixed
// shuffle tree and a fixed warp order: the same bits every run.
template <int kWarps>
__device__ __forceinline__ float block_sum(float local) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    local += __shfl_xor_sync(kFullWarp, local, offset);
  }
  using WarpSums = float[kWarps];
  ATTNBENCH_SHARED(WarpSums, warp_sums, alignof(float));
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  if (threadIdx.x % kWarpSize == 0) warp_sums[warp] = local;
  __syncthreads();
  float total = warp_sums[0];
  for (int w = 1; w < kWarps; ++w) total += warp_sums[w];
  return total;
}

// ---- the online softmax's guards -------------------------------------------------------------

// The base exponents are taken against for a running max (in the exponent's units): 0 while the
// row has seen no visible key (max -inf), so exp2(-inf - 0) = 0 rather than exp2(-inf + inf) = NaN.
__device__ __forceinline__ float exponent_base(float max) { return max == kNegInf ? 0.0f : max; }

// 1 / l, or 0 for a row with no visible key (its O is 0).
__device__ __forceinline__ float inverse_row_sum(float sum) { return sum > 0.0f ? 1.0f / sum : 0.0f; }

// The natural-log LSE of a row from its max in natural-log units and its sum; -inf for a row with
// no visible key.
__device__ __forceinline__ float row_lse(float max_natural, float sum) {
  return sum > 0.0f ? max_natural + logf(sum) : kNegInf;
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::gpu
