// cuda.flash3's epilogue: O / l from the warpgroup's accumulators to global memory (rows past
// seqlen_q are computed and never stored), and the LSE of each row. The stages here store
// straight from registers, four bytes (two elements of a row) per store.
#pragma once

#include <cstdint>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/fragments.cuh"
#include "kernels/cuda/flash3/flash3_scheduler.cuh"
#include "kernels/cuda/flash3/flash3_softmax.cuh"
#include "kernels/params.h"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {

template <int HeadDim, typename Element>
__device__ __forceinline__ void store_output(const AttentionParams& p, const BlockPosition& block,
                                             OnlineSoftmax& softmax, const float (&o)[HeadDim / 2],
                                             int rows_before = 0) {
  softmax.finish();
  Element* out = static_cast<Element*>(p.out) + block.batch * p.out_batch_stride +
                 block.head * p.out_head_stride;
#pragma unroll
  for (int index = 0; index < HeadDim / 2; index += 2) {
    const int r = accumulator_row(index);
    const int64_t query = block.first_row + rows_before + thread_row(r);
    if (query < p.seqlen_q) {
      const float inverse = softmax.inverse_sum(r);
      const uint32_t bits = gpu::pack_pair<Element>(o[index] * inverse, o[index + 1] * inverse);
      // The column is even: a 4-byte aligned pair.
      *reinterpret_cast<uint32_t*>(out + query * p.out_row_stride + accumulator_column(index)) =
          bits;
    }
  }
  if (p.lse != nullptr && threadIdx.x % 4 == 0) {
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int64_t query = block.first_row + rows_before + thread_row(r);
      if (query < p.seqlen_q) {
        p.lse[(static_cast<int64_t>(block.batch) * p.heads_q + block.head) * p.seqlen_q + query] =
            softmax.lse(r, p.scale);
      }
    }
  }
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
