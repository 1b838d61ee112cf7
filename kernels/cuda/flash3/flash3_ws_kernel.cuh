// The warp-specialized FlashAttention-3 forward on Hopper (sm_90a) (Dao et al., FlashAttention-3,
// 2024, section 3): cuda.flash3_ws, cuda.flash3_pingpong and cuda.flash3, one kernel template
// whose consumers follow one of three schedules.
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
//   Schedule::independent (cuda.flash3_ws): each consumer on its own.
//   Schedule::pingpong (cuda.flash3_pingpong): the consumers take turns on the tensor cores.
//   Schedule::overlapped (cuda.flash3): ping-pong, and each consumer's softmax under its own P V;
//   the output through shared memory (over the consumer's rows of Q) and a TMA store.
// Performance: not yet measured on a GPU (see GPU-CLAIMS.md).
// Known limits: fp16/bf16 in and out; head_dim_v == head_dim_qk; d 64, 128, 256 for cuda.flash3,
// d 128 bf16 for the two stages; rows whose strides are multiples of 16 bytes (the TMA's rule).
#pragma once

#include <climits>
#include <cstdint>
#include <cstring>
#include <string>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/convert.cuh"
#include "kernels/cuda/common/row_stats.cuh"
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

// How the two consumer warpgroups share the tensor cores.
enum class Schedule {
  // Each on its own: S, softmax, P V, as flash3_wg1 (cuda.flash3_ws).
  independent,
  // Ping-pong (cuda.flash3_pingpong): turns taken through two named barriers, one warpgroup's
  // wgmma (its P V of the previous tile and S of this one, one batch) while the other computes
  // its softmax.
  pingpong,
  // Ping-pong and, inside each warpgroup, the softmax of S(j) overlapped with its own O +=
  // P(j-1) V(j-1) (cuda.flash3): a turn issues S(j) then P(j-1) V(j-1), waits for S(j) only,
  // computes the softmax while the P V runs, then waits for it and rescales O. P is double
  // buffered: the softmax writes P(j) while the tensor cores still read P(j-1).
  overlapped,
};

// Named barriers 1 and 2 (0 is __syncthreads): consumer c waits on 1 + c for its turn; the other
// consumer arrives there when its turn ends. 256 threads: the waiting and the arriving warpgroup.
constexpr unsigned kTurnBarrier = 1;
constexpr unsigned kTurnThreads = 2 * kWarpgroupThreads;
// Named barriers 3 and 4: consumer c's warpgroup gathers on 3 + c between writing its output tile
// to shared memory and the TMA store (cuda.flash3).
constexpr unsigned kEpilogueBarrier = 3;

// Ping-pong, consumer `consumer` (0 or 1) over the block's key tiles (T = keys.count): turn j
// issues O += P(j-1) V(j-1) and S(j) (T + 1 turns: the first has no P V, the last no S), passes the
// tensor cores on, waits for both, releases stage j-1, and computes the softmax of S(j) while the
// other consumer has its turn. Consumer 1 lets consumer 0 begin; it skips the arrival after its
// last turn, so every barrier phase has 128 waiting and 128 arriving threads. The overlapped
// schedule, consumer `consumer`: turns as consume_pingpong's. A full turn issues S(j), rescales O
// to the running max of tile j-1 (the fence before the next batch makes that visible to the tensor
// cores), issues P(j-1) V(j-1), passes the turn on, and waits for S(j) alone (wait_group 1): the
// exponentials of S(j) then run under the P V, writing only S's registers; P(j) is converted once
// the P V has been waited for, so no register a wgmma in flight reads is written (ptxas serializes
// the pipeline otherwise, and ci/ptxas-guard.sh fails the build). First turn, full turns and last
// turn are written out, with no branch around a wgmma: ptxas serializes wgmma on a divergent path
// too.
template <int HeadDim, typename Element, typename Traits>
__device__ __forceinline__ void consume_overlapped(
    int consumer, const KeyTiles& keys, uint32_t q_rows, const SharedTiles<Traits>& tiles_in,
    const StageRing<Traits::kStages>& stage_of, OnlineSoftmax& softmax, float (&o)[HeadDim / 2]) {
  using T = Traits;
  const unsigned my_turn = kTurnBarrier + static_cast<unsigned>(consumer);
  const unsigned other_turn = kTurnBarrier + static_cast<unsigned>(1 - consumer);
  float s[T::kBlockK / 2];
  uint32_t p_fragments[T::kBlockK / kWgmmaK][4];
  float rescale[kRowsPerThread];  // O's factor for the latest tile's running max
  const auto scores_to_probabilities = [&](int tile) {
    const int first_key = keys.key_of(tile, T::kBlockK);
    if (keys.visible.needs_mask(first_key, T::kBlockK)) softmax.mask(s, first_key);
    softmax.update_scores(s, rescale);
  };

  // The first turn: S(0) alone (O is still zero: its factor changes nothing).
  if (consumer == 1) ptx::named_barrier_arrive(kTurnBarrier, kTurnThreads);
  stage_of.wait_full(0);
  ptx::named_barrier_sync(my_turn, kTurnThreads);
  issue_scores<HeadDim, T::kBlockK, Element>(s, q_rows, T::kBlockQ,
                                             tiles_in.k_stage(stage_of.stage(0)));
  ptx::named_barrier_arrive(other_turn, kTurnThreads);
  ptx::wgmma_wait<0>();
  ptx::wgmma_fence_operand(s);
  scores_to_probabilities(0);
  probabilities_as_a<Element>(s, p_fragments);

  // Full turns: S(j) and P(j-1) V(j-1); the softmax of S(j) under the P V.
  for (int turn = 1; turn < keys.count; ++turn) {
    stage_of.wait_full(turn);
    ptx::named_barrier_sync(my_turn, kTurnThreads);
    issue_scores<HeadDim, T::kBlockK, Element>(s, q_rows, T::kBlockQ,
                                               tiles_in.k_stage(stage_of.stage(turn)));
    softmax.rescale_output(o, rescale);
    issue_output<HeadDim, T::kBlockK, Element>(o, p_fragments,
                                               tiles_in.v_stage(stage_of.stage(turn - 1)));
    ptx::named_barrier_arrive(other_turn, kTurnThreads);
    ptx::wgmma_wait<1>();  // S(j); the P V keeps running
    ptx::wgmma_fence_operand(s);
    scores_to_probabilities(turn);
    ptx::wgmma_wait<0>();
    ptx::wgmma_fence_operand(o);
    stage_of.release(turn - 1);
    probabilities_as_a<Element>(s, p_fragments);
  }

  // The last turn: P(T-1) V(T-1) alone; consumer 1 has no one left to pass the turn to.
  ptx::named_barrier_sync(my_turn, kTurnThreads);
  softmax.rescale_output(o, rescale);
  issue_output<HeadDim, T::kBlockK, Element>(o, p_fragments,
                                             tiles_in.v_stage(stage_of.stage(keys.count - 1)));
  if (consumer == 0) ptx::named_barrier_arrive(other_turn, kTurnThreads);
  ptx::wgmma_wait<0>();
  ptx::wgmma_fence_operand(o);
  stage_of.release(keys.count - 1);
}

template <int HeadDim, typename Element, typename Traits>
__device__ __forceinline__ void consume_pingpong(int consumer, const KeyTiles& keys,
                                                 uint32_t q_rows,
                                                 const SharedTiles<Traits>& tiles_in,
                                                 const StageRing<Traits::kStages>& stage_of,
                                                 OnlineSoftmax& softmax, float (&o)[HeadDim / 2]) {
  using T = Traits;
  const unsigned my_turn = kTurnBarrier + static_cast<unsigned>(consumer);
  const unsigned other_turn = kTurnBarrier + static_cast<unsigned>(1 - consumer);
  if (consumer == 1) ptx::named_barrier_arrive(kTurnBarrier, kTurnThreads);
  float s[T::kBlockK / 2];
  uint32_t p_fragments[T::kBlockK / kWgmmaK][4];
  for (int turn = 0; turn <= keys.count; ++turn) {
    const bool scores = turn < keys.count;
    const bool output = turn > 0;
    if (scores) stage_of.wait_full(turn);
    ptx::named_barrier_sync(my_turn, kTurnThreads);
    if (output) {
      issue_output<HeadDim, T::kBlockK, Element>(o, p_fragments,
                                                 tiles_in.v_stage(stage_of.stage(turn - 1)));
    }
    if (scores) {
      issue_scores<HeadDim, T::kBlockK, Element>(s, q_rows, T::kBlockQ,
                                                 tiles_in.k_stage(stage_of.stage(turn)));
    }
    if (consumer == 0 || turn < keys.count) {
      ptx::named_barrier_arrive(other_turn, kTurnThreads);
    }
    ptx::wgmma_wait<0>();
    ptx::wgmma_fence_operand(o);
    ptx::wgmma_fence_operand(s);
    if (output) stage_of.release(turn - 1);
    if (scores) {
      const int first_key = keys.key_of(turn, T::kBlockK);
      if (keys.visible.needs_mask(first_key, T::kBlockK)) softmax.mask(s, first_key);
      softmax.update(s, o);
      probabilities_as_a<Element>(s, p_fragments);
    }
  }
}

template <int HeadDim, typename Element, Schedule kSchedule>
__global__ void __launch_bounds__(WsTraits<HeadDim>::kThreads, 1)
    flash3_ws_forward(const __grid_constant__ Flash3Params params) {
  using T = WsTraits<HeadDim>;
  const AttentionParams& p = params.attention;
  using Barriers = RingBarriers<T::kStages>;
  ATTNBENCH_SHARED(Barriers, barriers, 8);
  ATTNBENCH_DYNAMIC_SHARED(shared_bytes, 16);
  const SharedTiles<T> tiles_in(shared_bytes);

  const BlockPosition block = block_position(p, T::kBlockQ);
  const KeyTiles keys = key_tiles(p, block, T::kBlockK);
  const int tile_count = keys.count;

  if (threadIdx.x == 0) barriers.init(T::kConsumerThreads);
  __syncthreads();

  const int warpgroup = static_cast<int>(threadIdx.x) / kWarpgroupThreads;
  if (warpgroup == 0) {
    // ---- the producer: one elected thread loads Q, then K and V into the ring
    // --------------------
    ptx::setmaxnreg_dec<T::kProducerRegisters>();
    if (threadIdx.x / 32 != 0 || !ptx::elect_one() || tile_count == 0) return;
    ptx::mbarrier_arrive_expect_tx(barriers.q(), T::kQBytes);
    load_tile<HeadDim>(tiles_in.q, &params.q_map, barriers.q(), T::kBlockQ, block.first_row,
                       block.head, block.batch);
    for (int iteration = 0; iteration < tile_count; ++iteration) {
      const int stage = iteration % T::kStages;
      const int key = keys.key_of(iteration, T::kBlockK);
      barriers.wait_empty(iteration);
      ptx::mbarrier_arrive_expect_tx(barriers.full(stage), 2 * T::kKvBytes);
      load_tile<HeadDim>(tiles_in.k_stage(stage), &params.k_map, barriers.full(stage), T::kBlockK,
                         key, block.head_kv, block.batch);
      load_tile<HeadDim>(tiles_in.v_stage(stage), &params.v_map, barriers.full(stage), T::kBlockK,
                         key, block.head_kv, block.batch);
    }
    return;
  }

  // ---- a consumer: 64 query rows, every key tile ------------------------------------------------
  ptx::setmaxnreg_inc<T::kConsumerRegisters>();
  const int rows_before = (warpgroup - 1) * kWgmmaM;
  const uint32_t q_rows = tiles_in.q + static_cast<uint32_t>(rows_before * kSwizzleBytes);
  OnlineSoftmax softmax(p, block, rows_before);
  float o[HeadDim / 2] = {};
  const StageRing<T::kStages> stage_of = barriers.ring();
  if (tile_count > 0) ptx::mbarrier_wait(barriers.q(), 0);
  if constexpr (kSchedule == Schedule::overlapped) {
    if (tile_count > 0) {
      consume_overlapped<HeadDim, Element, T>(warpgroup - 1, keys, q_rows, tiles_in, stage_of,
                                              softmax, o);
    }
  } else if constexpr (kSchedule == Schedule::pingpong) {
    if (tile_count > 0) {
      consume_pingpong<HeadDim, Element, T>(warpgroup - 1, keys, q_rows, tiles_in, stage_of,
                                            softmax, o);
    }
  } else {
    for (int iteration = 0; iteration < tile_count; ++iteration) {
      const int stage = stage_of.stage(iteration);
      const int first_key = keys.key_of(iteration, T::kBlockK);
      stage_of.wait_full(iteration);
      float s[T::kBlockK / 2];
      compute_scores<HeadDim, T::kBlockK, Element>(s, q_rows, T::kBlockQ, tiles_in.k_stage(stage));
      if (keys.visible.needs_mask(first_key, T::kBlockK)) softmax.mask(s, first_key);
      softmax.update(s, o);
      uint32_t p_fragments[T::kBlockK / kWgmmaK][4];
      probabilities_as_a<Element>(s, p_fragments);
      issue_output<HeadDim, T::kBlockK, Element>(o, p_fragments, tiles_in.v_stage(stage));
      ptx::wgmma_wait<0>();
      ptx::wgmma_fence_operand(o);
      stage_of.release(iteration);
    }
  }
  if constexpr (kSchedule == Schedule::overlapped) {
    store_output_through_shared<HeadDim, Element>(
        params, block, softmax, o, rows_before, q_rows, T::kBlockQ * kSwizzleBytes, shared_bytes,
        ptx::shared_address(shared_bytes), kEpilogueBarrier + static_cast<unsigned>(warpgroup - 1));
  } else {
    store_output<HeadDim, Element>(p, block, softmax, o, rows_before);
  }
}

// ---- launch -------------------------------------------------------------------------------------

template <int HeadDim, DType kDtype, Schedule kSchedule>
Status launch_warp_specialized(const char* name, const Flash3Params& params, cudaStream_t stream) {
  using Element = typename gpu::ElementOf<kDtype>::type;
  return launch_blocks<WsTraits<HeadDim>>(name, flash3_ws_forward<HeadDim, Element, kSchedule>,
                                          params, stream);
}

template <int HeadDim, DType kDtype>
Status launch_flash3_ws(const Flash3Params& params, cudaStream_t stream) {
  return launch_warp_specialized<HeadDim, kDtype, Schedule::independent>("cuda.flash3_ws", params,
                                                                         stream);
}

template <int HeadDim, DType kDtype>
Status launch_flash3_pingpong(const Flash3Params& params, cudaStream_t stream) {
  return launch_warp_specialized<HeadDim, kDtype, Schedule::pingpong>("cuda.flash3_pingpong",
                                                                      params, stream);
}

template <int HeadDim, DType kDtype>
Status launch_flash3(const Flash3Params& params, cudaStream_t stream) {
  return launch_warp_specialized<HeadDim, kDtype, Schedule::overlapped>("cuda.flash3", params,
                                                                        stream);
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
