// cuda.flash3_ws — the second stage of the FlashAttention-3 forward on Hopper (sm_90a): warp
// specialization (Dao et al., FlashAttention-3, 2024, section 3.1).
//
// What changes against cuda.flash3_wg1: the CTA is three warpgroups. The producer warpgroup
// gives most of its registers away (setmaxnreg.dec) and one elected thread of its first warp
// issues every TMA load: Q once, then K and V tile by tile into a ring of kStages stages, waiting
// on a stage's "empty" mbarrier before refilling it. The two consumer warpgroups take the
// registers (setmaxnreg.inc), own 64 query rows each (128 per CTA), wait on a stage's "full"
// mbarrier, compute as flash3_wg1 does (S = Q K^T from shared memory, online softmax, O += P V
// with P in registers), and arrive on the stage's "empty" barrier once their P V wgmma has been
// waited for. No __syncthreads in the loop: loads and math run in different warps, and the
// producer runs kStages tiles ahead. Masks, tails and empty rows as in flash3_wg1.
// Performance: not yet measured on a GPU (see GPU-CLAIMS.md).
// Known limits: as flash3_wg1 (instantiated: d 128, bf16).
#pragma once

#include <climits>
#include <cstdint>
#include <string>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/fragments.cuh"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/common/ptx.cuh"
#include "kernels/cuda/common/shared.cuh"
#include "kernels/cuda/common/visible_tiles.h"
#include "kernels/cuda/flash3/flash3_epilogue.cuh"
#include "kernels/cuda/flash3/flash3_launch.h"
#include "kernels/cuda/flash3/flash3_mainloop.cuh"
#include "kernels/cuda/flash3/flash3_scheduler.cuh"
#include "kernels/cuda/flash3/flash3_softmax.cuh"
#include "kernels/cuda/flash3/flash3_traits.h"
#include "kernels/params.h"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {

template <int HeadDim, typename Element>
__global__ void __launch_bounds__(WsTraits<HeadDim>::kThreads, 1)
    flash3_ws_forward(const __grid_constant__ Flash3Params params) {
  using T = WsTraits<HeadDim>;
  const AttentionParams& p = params.attention;
  struct Barriers {
    uint64_t q_full;
    uint64_t kv_full[T::kStages];   // the stage's K and V have landed (the TMA's bytes)
    uint64_t kv_empty[T::kStages];  // every consumer thread is done with the stage
  };
  ATTNBENCH_SHARED(Barriers, barriers, 8);
  ATTNBENCH_DYNAMIC_SHARED(shared_bytes, 16);
  const uint32_t tiles_start = static_cast<uint32_t>(
      (ptx::shared_address(shared_bytes) + kTileAlignment - 1) / kTileAlignment * kTileAlignment);
  const uint32_t q_tile = tiles_start;
  const uint32_t k_tiles = q_tile + T::kQBytes;
  const uint32_t v_tiles = k_tiles + T::kStages * T::kKvBytes;
  const uint32_t q_full = ptx::shared_address(&barriers.q_full);
  auto kv_full = [&](int stage) { return ptx::shared_address(&barriers.kv_full[stage]); };
  auto kv_empty = [&](int stage) { return ptx::shared_address(&barriers.kv_empty[stage]); };

  const BlockPosition block = block_position(p, T::kBlockQ);
  const gpu::BlockKeyTiles tiles =
      gpu::block_key_tiles(p.mask, p.window_left, p.window_right, block.first_row, block.last_row,
                           p.seqlen_q, p.seqlen_k, block.key_length, T::kBlockK);
  const int tile_count = static_cast<int>(tiles.tiles());
  const int first_tile_key = static_cast<int>(tiles.first_tile) * T::kBlockK;

  if (threadIdx.x == 0) {
    ptx::mbarrier_init(q_full, 1);
    for (int stage = 0; stage < T::kStages; ++stage) {
      ptx::mbarrier_init(kv_full(stage), 1);
      ptx::mbarrier_init(kv_empty(stage), T::kConsumerThreads);
    }
    ptx::fence_mbarrier_init();
  }
  __syncthreads();

  const int warpgroup = static_cast<int>(threadIdx.x) / kWarpgroupThreads;
  if (warpgroup == 0) {
    // ---- the producer: one elected thread loads Q, then K and V into the ring
    // --------------------
    ptx::setmaxnreg_dec<T::kProducerRegisters>();
    if (threadIdx.x / 32 != 0 || !ptx::elect_one() || tile_count == 0) return;
    ptx::mbarrier_arrive_expect_tx(q_full, T::kQBytes);
    load_tile<HeadDim>(q_tile, &params.q_map, q_full, T::kBlockQ, block.first_row, block.head,
                       block.batch);
    for (int iteration = 0; iteration < tile_count; ++iteration) {
      const int stage = iteration % T::kStages;
      const int key = first_tile_key + iteration * T::kBlockK;
      if (iteration >= T::kStages) {  // the stage's previous tile: released by every consumer
        ptx::mbarrier_wait(kv_empty(stage), static_cast<unsigned>(iteration / T::kStages - 1) % 2);
      }
      ptx::mbarrier_arrive_expect_tx(kv_full(stage), 2 * T::kKvBytes);
      load_tile<HeadDim>(k_tiles + stage * T::kKvBytes, &params.k_map, kv_full(stage), T::kBlockK,
                         key, block.head_kv, block.batch);
      load_tile<HeadDim>(v_tiles + stage * T::kKvBytes, &params.v_map, kv_full(stage), T::kBlockK,
                         key, block.head_kv, block.batch);
    }
    return;
  }

  // ---- a consumer: 64 query rows, every key tile ------------------------------------------------
  ptx::setmaxnreg_inc<T::kConsumerRegisters>();
  const int rows_before = (warpgroup - 1) * kWgmmaM;
  const uint32_t q_rows = q_tile + static_cast<uint32_t>(rows_before * kSwizzleBytes);
  OnlineSoftmax softmax(p, block, rows_before);
  float o[HeadDim / 2] = {};
  if (tile_count > 0) ptx::mbarrier_wait(q_full, 0);
  for (int iteration = 0; iteration < tile_count; ++iteration) {
    const int stage = iteration % T::kStages;
    const int first_key = first_tile_key + iteration * T::kBlockK;
    ptx::mbarrier_wait(kv_full(stage), static_cast<unsigned>(iteration / T::kStages) % 2);
    float s[T::kBlockK / 2];
    compute_scores<HeadDim, T::kBlockK, Element>(s, q_rows, T::kBlockQ,
                                                 k_tiles + stage * T::kKvBytes);
    if (tiles.needs_mask(first_key, T::kBlockK)) softmax.mask(s, first_key);
    softmax.update(s, o);
    uint32_t p_fragments[T::kBlockK / kWgmmaK][4];
    probabilities_as_a<Element>(s, p_fragments);
    issue_output<HeadDim, T::kBlockK, Element>(o, p_fragments, v_tiles + stage * T::kKvBytes);
    ptx::wgmma_wait<0>();
    ptx::wgmma_fence_operand(o);
    // This thread's wgmma on the stage are done: the producer may refill it once all have said so.
    ptx::mbarrier_arrive(kv_empty(stage));
  }
  store_output<HeadDim, Element>(p, block, softmax, o, rows_before);
}

// ---- launch -------------------------------------------------------------------------------------

template <int HeadDim, DType kDtype>
Status launch_flash3_ws(const Flash3Params& params, cudaStream_t stream) {
  using T = WsTraits<HeadDim>;
  using Element = typename gpu::ElementOf<kDtype>::type;
  const AttentionParams& p = params.attention;
  const int64_t m_blocks = (static_cast<int64_t>(p.seqlen_q) + T::kBlockQ - 1) / T::kBlockQ;
  const int64_t ctas = m_blocks * p.heads_q * p.batch;
  if (ctas > INT_MAX) {
    return Status::Error("cuda.flash3_ws: " + std::to_string(ctas) +
                         " query blocks exceed one launch's grid");
  }
  const auto kernel = flash3_ws_forward<HeadDim, Element>;
  ATTNBENCH_CUDA_TRY(allow_dynamic_shared(kernel, static_cast<int>(T::kSharedBytes)));
  launch_kernel(kernel, static_cast<unsigned>(ctas), T::kThreads, T::kSharedBytes, stream, params);
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return Status::Ok();
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
