// cuda.flash3's softmax: the online softmax of one warpgroup's 64 query rows over wgmma
// accumulators, in base 2 as cuda.flash2's (p = exp2(s * scale_log2 - m * scale_log2), O and l
// rescaled when the max grows), and P handed to the next wgmma as register A fragments.
//
// wgmma's accumulator layout (m64nN, f32): thread lane l of warp w (g = l / 4, t = l % 4) holds
// element 4j + 2i + e at row 16w + g + 8i, column 8j + 2t + e. So a thread holds two rows, and a
// row is shared by the four lanes of its group g: a row reduction is two shuffles.
#pragma once

#include <cstdint>
#include <limits>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/convert.cuh"
#include "kernels/cuda/common/row_stats.cuh"
#include "kernels/cuda/common/ptx.cuh"
#include "kernels/cuda/flash3/flash3_scheduler.cuh"
#include "kernels/cuda/flash3/flash3_traits.h"
#include "kernels/params.h"
#include "reference/mask.h"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {

using gpu::kNegInf;

// The accumulator element `index`'s row among the thread's two, and its column.
__device__ __forceinline__ int accumulator_row(int index) { return (index / 2) % 2; }
__device__ __forceinline__ int accumulator_column(int index) {
  return 8 * (index / 4) + 2 * (static_cast<int>(threadIdx.x) % 4) + index % 2;
}
// The thread's row `r` (0, 1) within its warpgroup's 64.
__device__ __forceinline__ int thread_row(int r) {
  const int warp = static_cast<int>(threadIdx.x / 32) % 4;
  return 16 * warp + static_cast<int>(threadIdx.x % 32) / 4 + 8 * r;
}

struct OnlineSoftmax {
  float scale_log2;
  float row_max[kRowsPerThread];  // raw scores (before the scale); -inf: no key seen yet
  float row_sum[kRowsPerThread];  // this lane's share; the quad's shares are added at the end
  int key_begin[kRowsPerThread];  // the row's visible keys (reference/mask.h)
  int key_end[kRowsPerThread];

  // `rows_before`: the warpgroup's first row within the block (0 for one consumer warpgroup).
  __device__ __forceinline__ OnlineSoftmax(const AttentionParams& p, const BlockPosition& block,
                                           int rows_before = 0)
      : scale_log2(p.scale_log2) {
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      row_max[r] = kNegInf;
      row_sum[r] = 0.0f;
      const int query = block.first_row + rows_before + thread_row(r);
      const KeyRange keys = visible_keys(p.mask, p.window_left, p.window_right, query, p.seqlen_q,
                                         p.seqlen_k, block.key_length);
      key_begin[r] = static_cast<int>(keys.begin);
      key_end[r] = static_cast<int>(keys.end);
    }
  }

  // Scores of keys a row must not see (past seqlen_k or its key length, masked) become -inf.
  template <int kCount>
  __device__ __forceinline__ void mask(float (&s)[kCount], int first_key) const {
#pragma unroll
    for (int index = 0; index < kCount; ++index) {
      const int key = first_key + accumulator_column(index);
      const int r = accumulator_row(index);
      if (key < key_begin[r] || key >= key_end[r]) s[index] = kNegInf;
    }
  }

  // S becomes P (unnormalized, against the new running max); O is rescaled to that max.
  template <int kCount, int kOutCount>
  __device__ __forceinline__ void update(float (&s)[kCount], float (&o)[kOutCount]) {
    float rescale[kRowsPerThread];
    update_scores(s, rescale);
    rescale_output(o, rescale);
  }

  // The same in two steps, for a kernel whose O is still being written by a wgmma when the
  // softmax runs: S becomes P and the factors O must be scaled by are returned ...
  template <int kCount>
  __device__ __forceinline__ void update_scores(float (&s)[kCount],
                                                float (&rescale)[kRowsPerThread]) {
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      float new_max = row_max[r];
#pragma unroll
      for (int index = 0; index < kCount; ++index) {
        if (accumulator_row(index) == r) new_max = fmaxf(new_max, s[index]);
      }
      new_max = gpu::quad_max(new_max);
      // A row that has seen no key yet keeps max -inf: exponents are taken against 0 instead, so
      // exp2(-inf - 0) = 0 rather than exp2(-inf + inf) = NaN.
      const float base = gpu::exponent_base(new_max * scale_log2);
      rescale[r] = ptx::exp2_approx(row_max[r] * scale_log2 - base);
      row_max[r] = new_max;
      float sum = 0.0f;
#pragma unroll
      for (int index = 0; index < kCount; ++index) {
        if (accumulator_row(index) != r) continue;
        s[index] = ptx::exp2_approx(fmaf(s[index], scale_log2, -base));
        sum += s[index];
      }
      row_sum[r] = row_sum[r] * rescale[r] + sum;
    }
  }
  // ... and applied once that wgmma has been waited for.
  template <int kOutCount>
  __device__ __forceinline__ void rescale_output(float (&o)[kOutCount],
                                                 const float (&rescale)[kRowsPerThread]) const {
#pragma unroll
    for (int index = 0; index < kOutCount; ++index) o[index] *= rescale[accumulator_row(index)];
  }

  // The rows' full sums (the quad's shares added): call once, before the epilogue.
  __device__ __forceinline__ void finish() {
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) row_sum[r] = gpu::quad_sum(row_sum[r]);
  }
  __device__ __forceinline__ float inverse_sum(int r) const {
    return gpu::inverse_row_sum(row_sum[r]);  // no visible key: O = 0
  }
  // Natural-log LSE of the scaled scores: scale * m + ln(sum of exp(scale * (s - m))).
  __device__ __forceinline__ float lse(int r, float scale) const {
    return gpu::row_lse(row_max[r] * scale, row_sum[r]);
  }
};

// P (S's accumulators after update) rounded to the input type, as the A fragments of the P V
// wgmma, one per 16 keys: the accumulator layout of columns 16 step .. 16 step + 15 is already
// the A fragment's (register 0: row g, k 2t + e; 1: row g + 8; 2 and 3: the same, k + 8).
template <typename Element, int kCount>
__device__ __forceinline__ void probabilities_as_a(const float (&s)[kCount],
                                                   uint32_t (&fragments)[kCount / 8][4]) {
#pragma unroll
  for (int step = 0; step < kCount / 8; ++step) {
#pragma unroll
    for (int reg = 0; reg < 4; ++reg) {
      fragments[step][reg] =
          gpu::pack_pair<Element>(s[8 * step + 2 * reg], s[8 * step + 2 * reg + 1]);
    }
  }
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
