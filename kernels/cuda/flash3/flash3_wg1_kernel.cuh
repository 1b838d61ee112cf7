// cuda.flash3_wg1 — the first stage of the FlashAttention-3 forward on Hopper (sm_90a): one
// warpgroup, TMA and wgmma, nothing overlapped yet but the loads.
//
// What it computes: O = softmax(scale * Q K^T + mask) V for one (batch, query head) pair and 64
// query rows per CTA, as cuda.flash2 does (the same online softmax in base 2, the same masks and
// tile skipping through gpu::block_key_tiles, the same treatment of rows that see no key: O = 0,
// LSE = -inf). What changes against flash2 (Dao et al., FlashAttention-3, 2024, section 3):
//   - Q, K and V arrive by TMA (cp.async.bulk.tensor) as 64-column boxes with the 128-byte
//     swizzle, one thread issuing them, completion counted in bytes on an mbarrier per stage; a
//     tile past seqlen_k is zero-filled by the TMA itself, so tails need no predicated copies;
//   - S = Q K^T is one wgmma.m64n128k16 per 16 of d, both operands read from shared memory
//     through descriptors (no ldmatrix); O += P V is wgmma.m64n<d>k16 with P from registers (S's
//     accumulators rounded to the input type are already A's fragment layout) and V read N-major
//     from its [key][d] tile;
//   - the refill of a stage is the mbarrier ring's business, not a cp.async group count.
// The later stages add what FA3 is about: a producer warp and two consumer warpgroups
// (flash3_ws), ping-pong scheduling (flash3_pingpong), softmax overlapped with the next
// product (flash3). Here every wgmma batch is waited for at once.
// Performance: not yet measured on a GPU (see GPU-CLAIMS.md).
// Known limits: d = head_dim_v = 64, 128 or 256 (instantiated: 128, bf16); fp16/bf16 in and
// out; rows whose strides are multiples of 16 bytes (the TMA's rule; the plan checks it).
#pragma once

#include <climits>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/convert.cuh"
#include "kernels/cuda/common/row_stats.cuh"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/common/ptx.cuh"
#include "kernels/cuda/common/shared.cuh"
#include "kernels/cuda/common/visible_tiles.h"
#include "kernels/cuda/common/wgmma_descriptor.h"
#include "kernels/cuda/flash3/flash3_epilogue.cuh"
#include "kernels/cuda/flash3/flash3_launch.h"
#include "kernels/cuda/flash3/flash3_mainloop.cuh"
#include "kernels/cuda/flash3/flash3_scheduler.cuh"
#include "kernels/cuda/flash3/flash3_softmax.cuh"
#include "kernels/cuda/flash3/flash3_traits.h"
#include "kernels/params.h"
#include "reference/mask.h"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {

template <int HeadDim, typename Element>
__global__ void __launch_bounds__(kWarpgroupThreads, 1)
    flash3_wg1_forward(const __grid_constant__ Flash3Params params) {
  using T = Wg1Traits<HeadDim>;
  const AttentionParams& p = params.attention;
  struct Barriers {
    uint64_t q_full;
    uint64_t kv_full[T::kStages];
  };
  ATTNBENCH_SHARED(Barriers, barriers, 8);
  ATTNBENCH_DYNAMIC_SHARED(shared_bytes, 16);
  const SharedTiles<T> tiles_in(shared_bytes);
  const uint32_t q_full = ptx::shared_address(&barriers.q_full);

  // Which block of which (batch, head) pair: as cuda.flash2 (the longest causal blocks first).
  const BlockPosition block = block_position(p, T::kBlockQ);
  const KeyTiles keys = key_tiles(p, block, T::kBlockK);
  const int tile_count = keys.count;

  auto kv_full = [&](int stage) { return ptx::shared_address(&barriers.kv_full[stage]); };
  auto load_kv = [&](int stage, int tile) {
    const uint32_t barrier = kv_full(stage);
    const int key = keys.key_of(tile, T::kBlockK);
    ptx::mbarrier_arrive_expect_tx(barrier, T::kKBytes + T::kVBytes);
    load_tile<HeadDim>(tiles_in.k_stage(stage), &params.k_map, barrier, T::kBlockK, key,
                       block.head_kv, block.batch);
    load_tile<HeadDim>(tiles_in.v_stage(stage), &params.v_map, barrier, T::kBlockK, key,
                       block.head_kv, block.batch);
  };

  // ---- prologue: the barriers, then Q and the first kStages K/V tiles, by thread 0 ------------
  if (threadIdx.x == 0) {
    ptx::mbarrier_init(q_full, 1);
    for (int stage = 0; stage < T::kStages; ++stage) ptx::mbarrier_init(kv_full(stage), 1);
    ptx::fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0 && tile_count > 0) {
    ptx::mbarrier_arrive_expect_tx(q_full, T::kQBytes);
    load_tile<HeadDim>(tiles_in.q, &params.q_map, q_full, T::kBlockQ, block.first_row, block.head,
                       block.batch);
    for (int stage = 0; stage < T::kStages && stage < tile_count; ++stage) load_kv(stage, stage);
  }

  OnlineSoftmax softmax(p, block);
  float o[HeadDim / 2] = {};  // O: the warpgroup's 64 x HeadDim, wgmma's accumulator layout
  if (tile_count > 0) ptx::mbarrier_wait(q_full, 0);

  for (int iteration = 0; iteration < tile_count; ++iteration) {
    const int stage = iteration % T::kStages;
    const int first_key = keys.key_of(iteration, T::kBlockK);
    ptx::mbarrier_wait(kv_full(stage), static_cast<unsigned>(iteration / T::kStages) % 2);

    // ---- S = Q K^T; mask, online softmax, O rescaled; O += P V ----------------------------------
    float s[T::kBlockK / 2];
    compute_scores<HeadDim, T::kBlockK, Element>(s, tiles_in.q, T::kBlockQ,
                                                 tiles_in.k_stage(stage));
    if (keys.visible.needs_mask(first_key, T::kBlockK)) softmax.mask(s, first_key);
    softmax.update(s, o);
    uint32_t p_fragments[T::kBlockK / kWgmmaK][4];
    probabilities_as_a<Element>(s, p_fragments);
    issue_output<HeadDim, T::kBlockK, Element>(o, p_fragments, tiles_in.v_stage(stage));
    ptx::wgmma_wait<0>();
    ptx::wgmma_fence_operand(o);

    // Every warp has waited for its wgmma on this stage: thread 0 may refill it.
    __syncthreads();
    if (threadIdx.x == 0 && iteration + T::kStages < tile_count) {
      load_kv(stage, iteration + T::kStages);
    }
  }

  store_output<HeadDim, HeadDim, Element>(p, block, softmax, o);
}

// ---- launch -------------------------------------------------------------------------------------

template <int HeadDim, DType kDtype>
Status launch_flash3_wg1(const Flash3Params& params, cudaStream_t stream) {
  using Element = typename gpu::ElementOf<kDtype>::type;
  return launch_blocks<Wg1Traits<HeadDim>>("cuda.flash3_wg1", flash3_wg1_forward<HeadDim, Element>,
                                           params, stream);
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
