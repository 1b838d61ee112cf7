// cuda.flash3's epilogue: O / l from the warpgroup's accumulators to global memory (rows past
// seqlen_q are computed and never stored), and the LSE of each row. The stages store straight
// from registers; cuda.flash3 through shared memory and a TMA store.
#pragma once

#include <cstdint>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/convert.cuh"
#include "kernels/cuda/common/row_stats.cuh"
#include "kernels/cuda/common/ptx.cuh"
#include "kernels/cuda/flash3/flash3_launch.h"
#include "kernels/cuda/flash3/flash3_scheduler.cuh"
#include "kernels/cuda/flash3/flash3_softmax.cuh"
#include "kernels/params.h"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {

// The LSE of this thread's rows (one lane of each quad writes them).
__device__ __forceinline__ void store_lse(const AttentionParams& p, const BlockPosition& block,
                                          const OnlineSoftmax& softmax, int rows_before) {
  if (p.lse == nullptr || threadIdx.x % 4 != 0) return;
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const int64_t query = block.first_row + rows_before + thread_row(r);
    if (query < p.seqlen_q) {
      p.lse[(static_cast<int64_t>(block.batch) * p.heads_q + block.head) * p.seqlen_q + query] =
          softmax.lse(r, p.scale);
    }
  }
}

// The first column of the 8-wide n-block that accumulator element `index` lies in: O's columns
// past d_v (a padded row's, d_v a multiple of 16) are whole n-blocks, known at compile time.
ATTNBENCH_HOST_DEVICE constexpr int n_block_column(int index) { return 8 * (index / 4); }

// The stages: O / l straight from registers, four bytes (two elements of a row) per store; O holds
// Width columns, the first HeadDimV of them stored.
template <int Width, int HeadDimV, typename Element>
__device__ __forceinline__ void store_output(const AttentionParams& p, const BlockPosition& block,
                                             OnlineSoftmax& softmax, const float (&o)[Width / 2],
                                             int rows_before = 0) {
  softmax.finish();
  Element* out = static_cast<Element*>(p.out) + block.batch * p.out_batch_stride +
                 block.head * p.out_head_stride;
#pragma unroll
  for (int index = 0; index < Width / 2; index += 2) {
    if (n_block_column(index) >= HeadDimV) continue;
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
  store_lse(p, block, softmax, rows_before);
}

// cuda.flash3: O / l through shared memory. The consumer warpgroup writes its 64 x Width tile (V's
// row width: columns past d_v are zeros the TMA store leaves out, past the output map's d) in the
// TMA box layout (Width / 64 boxes of 64 rows x 128 bytes, the 128-byte swizzle from the address
// bits) over its own rows of Q, dead once its last wgmma has been waited for (`rows` is their
// first box, `row_box_stride` the bytes between Q's boxes, `shared` and `shared_address` one
// location as a pointer and as a shared-state address), publishes it to the async proxy, and one
// thread stores the boxes with TMA, which skips the rows past seqlen_q; it waits for the store to
// have read shared memory before the block may end. Named barrier `barrier` (128 threads) gathers
// the warpgroup between its writes and the store.
template <int Width, typename Element>
__device__ __forceinline__ void store_output_through_shared(
    const Flash3Params& params, const BlockPosition& block, OnlineSoftmax& softmax,
    const float (&o)[Width / 2], int rows_before, uint32_t rows, uint32_t row_box_stride,
    unsigned char* shared, uint32_t shared_address, unsigned barrier) {
  softmax.finish();
#pragma unroll
  for (int index = 0; index < Width / 2; index += 2) {
    const int r = accumulator_row(index);
    const int column = accumulator_column(index);
    const float inverse = softmax.inverse_sum(r);
    const uint32_t at =
        rows + static_cast<uint32_t>(column / kBoxColumns) * row_box_stride +
        static_cast<uint32_t>(thread_row(r) * kSwizzleBytes + column % kBoxColumns * kElementBytes);
    *reinterpret_cast<uint32_t*>(shared + (swizzled_128(at) - shared_address)) =
        gpu::pack_pair<Element>(o[index] * inverse, o[index + 1] * inverse);
  }
  ptx::fence_proxy_async();  // this thread's stores, to the TMA's proxy
  ptx::named_barrier_sync(barrier, kWarpgroupThreads);
  if (threadIdx.x % kWarpgroupThreads == 0) {
#pragma unroll
    for (int box = 0; box < Width / kBoxColumns; ++box) {
      ptx::tma_store_4d(&params.out_map, rows + static_cast<uint32_t>(box) * row_box_stride,
                        box * kBoxColumns, block.first_row + rows_before, block.head, block.batch);
    }
    ptx::bulk_commit();
    ptx::bulk_wait_read<0>();
  }
  store_lse(params.attention, block, softmax, rows_before);
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
