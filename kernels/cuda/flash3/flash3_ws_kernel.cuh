// The warp-specialized FlashAttention-3 forward on Hopper (sm_90a) (Dao et al., FlashAttention-3,
// 2024, section 3): cuda.flash3_ws, cuda.flash3_pingpong and cuda.flash3, one kernel template
// whose consumers follow one of three schedules.
//
// What changes against cuda.flash3_wg1: the CTA is three warpgroups. The producer warpgroup
// gives most of its registers away (setmaxnreg.dec) and one elected thread of its first warp
// issues every TMA load: Q once, then K and V tile by tile, each into a ring of its own of
// kStages stages (SplitRingBarriers), K(j) before V(j - 1), waiting on a stage's "empty" mbarrier
// before refilling it. The two consumer warpgroups take the registers (setmaxnreg.inc), own 64
// query rows each (128 per CTA), wait on a stage's "full" mbarrier, compute as flash3_wg1 does
// (S = Q K^T from shared memory, online softmax, O += P V with P in registers), and arrive on a
// K stage's "empty" barrier once their S wgmma has been waited for, on a V stage's once their
// P V wgmma has. No __syncthreads in the loop: loads and math run in different warps, and the
// producer runs kStages tiles ahead. Masks, tails and empty rows as in flash3_wg1.
//   Schedule::independent (cuda.flash3_ws): each consumer on its own.
//   Schedule::pingpong (cuda.flash3_pingpong): the consumers take turns on the tensor cores.
//   Schedule::overlapped (cuda.flash3): ping-pong, and each consumer's softmax under its own P V;
//   the output through shared memory (over the consumer's rows of Q) and a TMA store.
//   Its variants (cuda.flash3[...], `attnbench tune`): fewer stages; key tiles of 176; O rescaled
//   after the P V wait (overlapped_rescale_after_pv); the overlap without the turns
//   (overlapped_without_turns); and its probe build (overlapped_with_clock_probe: its waits timed
//   by clock64, flash3_probe.h).
// Performance: not yet measured on a GPU (see GPU-CLAIMS.md).
// Known limits: fp16/bf16 in and out; d 64, 80, 96, 128, 256 and 192/128 (d_qk/d_v) for
// cuda.flash3 (d 80 and 96 in 128-wide rows, their P V at N = 128: flash3_traits.h's row_width),
// d 128 bf16 for the two stages; rows whose strides are multiples of 16 bytes (the TMA's rule).
#pragma once

#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/cuda/common/convert.cuh"
#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/common/ptx.cuh"
#include "kernels/cuda/common/row_stats.cuh"
#include "kernels/cuda/common/shared.cuh"
#include "kernels/cuda/common/visible_tiles.h"
#include "kernels/cuda/flash3/flash3_epilogue.cuh"
#include "kernels/cuda/flash3/flash3_launch.h"
#include "kernels/cuda/flash3/flash3_mainloop.cuh"
#include "kernels/cuda/flash3/flash3_probe.h"
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
  // cuda.flash3's variants, one choice changed each. O rescaled after the P V wait that opens the
  // next turn, outside the turn, rather than between the S and P V issues inside it
  // (cuda.flash3[rescale=after_pv]; FlashAttention-3's RescaleOBeforeGemm off, as it has d 128).
  overlapped_rescale_after_pv,
  // The overlap without the turns: each consumer issues its wgmma when it is ready
  // (cuda.flash3[pingpong=off]), as cuda.flash3_ws does.
  overlapped_without_turns,
  // cuda.flash3 with the SM's clock read around each wait of its turns (cuda.flash3[probe=clock64],
  // flash3_probe.h): a measuring build, not a schedule of its own.
  overlapped_with_clock_probe,
};
ATTNBENCH_HOST_DEVICE constexpr bool overlaps_softmax(Schedule schedule) {
  return schedule >= Schedule::overlapped;
}

// A consumer warpgroup's clocks in each ProbeEvent, summed over its key tiles, when kEnabled
// (cuda.flash3[probe=clock64]); otherwise every call is the work it wraps and nothing else. Every
// thread reads the clock (a wait is warpgroup-wide: no branch may sit around it); the warpgroup's
// first thread writes the record (a block with no visible key runs no mainloop and writes none:
// the plan zeroed the records when it was built, and the same blocks skip at every launch).
template <bool kEnabled>
struct ClockProbe {
  uint64_t clocks[kProbeEvents] = {};
  template <typename Work>
  __device__ __forceinline__ void time(ProbeEvent event, Work&& work) {
    if constexpr (kEnabled) {
      const uint64_t start = ptx::clock64();
      work();
      clocks[event] += ptx::clock64() - start;
    } else {
      work();
    }
  }
  __device__ __forceinline__ uint64_t start() const {
    if constexpr (kEnabled) return ptx::clock64();
    return 0;
  }
  // The mainloop's whole time since `start`, then the record: consumer `consumer` of this CTA.
  __device__ __forceinline__ void finish(uint64_t start, ProbeRecord* records, int consumer,
                                         int key_tiles) {
    if constexpr (kEnabled) {
      clocks[kProbeMainloop] = ptx::clock64() - start;
      if (threadIdx.x % kWarpgroupThreads != 0) return;
      ProbeRecord& record = records[2 * blockIdx.x + static_cast<unsigned>(consumer)];
      record.key_tiles = static_cast<uint64_t>(key_tiles);
      for (int event = 0; event < kProbeEvents; ++event) record.clocks[event] = clocks[event];
      record.unused = 0;
    }
  }
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
// tensor cores on, waits for both, releases V(j-1) and K(j), and computes the softmax of S(j) while
// the other consumer has its turn. Consumer 1 lets consumer 0 begin; it skips the arrival after its
// last turn, so every barrier phase has 128 waiting and 128 arriving threads. The overlapped
// schedule, consumer `consumer`: turns as consume_pingpong's. A full turn issues S(j), rescales O
// to the running max of tile j-1 (the fence before the next batch makes that visible to the tensor
// cores), issues P(j-1) V(j-1), passes the turn on, and waits for S(j) alone (wait_group 1): the
// exponentials of S(j) then run under the P V, writing only S's registers; P(j) is converted once
// the P V has been waited for, so no register a wgmma in flight reads is written (ptxas serializes
// the pipeline otherwise, and ci/ptxas-guard.sh fails the build). That wait opens the next turn
// rather than closing this one: within one basic block ptxas hoists a wgmma wait up to where its
// latency table says the batch is done, a few dozen instructions after the issue, and the wait
// then landed before the row max, with none of the exponentials under the P V (nvcc 13.0; the
// PTX order was right). A loop's back edge is a block boundary it does not hoist across;
// StaticCuda.Flash3SoftmaxRunsUnderItsOwnOutputProduct holds the overlap. First turn, full turns
// and last turn are written out, with no branch around a wgmma: ptxas serializes wgmma on a
// divergent path too.
// The variants: with kSchedule overlapped_rescale_after_pv, O's rescale moves from inside the turn
// into finish_output, after the P V wait (O then holds P(j-1) V(j-1) against tile j-1's max, and
// tile j's factor brings it to tile j's); with overlapped_without_turns the named barriers go and
// nothing else changes; with overlapped_with_clock_probe each wait is timed (ClockProbe) and the
// record written to `records`.
template <int HeadDim, typename Element, typename Traits, Schedule kSchedule>
__device__ __forceinline__ void consume_overlapped(
    int consumer, const KeyTiles& keys, uint32_t q_rows, const SharedTiles<Traits>& tiles_in,
    const StageRing<Traits::kStages>& k_of, const StageRing<Traits::kStages>& v_of,
    OnlineSoftmax& softmax, float (&o)[Traits::kVWidth / 2], ProbeRecord* records) {
  using T = Traits;
  constexpr bool kTurns = kSchedule != Schedule::overlapped_without_turns;
  constexpr bool kRescaleAfterWait = kSchedule == Schedule::overlapped_rescale_after_pv;
  ClockProbe<kSchedule == Schedule::overlapped_with_clock_probe> probe;
  const uint64_t mainloop_start = probe.start();
  const auto wait_k = [&](int tile) { probe.time(kProbeKFull, [&] { k_of.wait_full(tile); }); };
  const auto wait_v = [&](int tile) { probe.time(kProbeVFull, [&] { v_of.wait_full(tile); }); };
  const unsigned my_turn = kTurnBarrier + static_cast<unsigned>(consumer);
  const unsigned other_turn = kTurnBarrier + static_cast<unsigned>(1 - consumer);
  const auto take_turn = [&] {
    if constexpr (kTurns) {
      probe.time(kProbeTurn, [&] { ptx::named_barrier_sync(my_turn, kTurnThreads); });
    }
  };
  const auto pass_turn = [&] {
    if constexpr (kTurns) ptx::named_barrier_arrive(other_turn, kTurnThreads);
  };
  float s[T::kBlockK / 2];
  uint32_t p_fragments[T::kBlockK / kWgmmaK][4];
  float rescale[kRowsPerThread];  // O's factor for the latest tile's running max
  const auto scores_to_probabilities = [&](int tile) {
    const int first_key = keys.key_of(tile, T::kBlockK);
    if (keys.visible.needs_mask(first_key, T::kBlockK)) softmax.mask(s, first_key);
    softmax.update_scores(s, rescale);
  };

  // The first turn: S(0) alone (O is still zero: its factor changes nothing).
  if (kTurns && consumer == 1) ptx::named_barrier_arrive(kTurnBarrier, kTurnThreads);
  wait_k(0);
  take_turn();
  issue_scores<HeadDim, T::kBlockK, Element>(s, q_rows, T::kBlockQ,
                                             tiles_in.k_stage(k_of.stage(0)));
  pass_turn();
  probe.time(kProbeScores, [] { ptx::wgmma_wait<0>(); });
  ptx::wgmma_fence_operand(s);
  k_of.release(0);
  scores_to_probabilities(0);

  // What opens turn `turn` (and the last turn, turn T): the previous turn's P V waited for (none
  // before turn 2), its V released, and P(turn - 1) converted from S's registers.
  const auto finish_output = [&](int turn) {
    probe.time(kProbeOutput, [] { ptx::wgmma_wait<0>(); });
    ptx::wgmma_fence_operand(o);
    if (turn >= 2) v_of.release(turn - 2);
    if constexpr (kRescaleAfterWait) softmax.rescale_output(o, rescale);
    probabilities_as_a<Element>(s, p_fragments);
  };
  const auto rescale_before_output = [&] {
    if constexpr (!kRescaleAfterWait) softmax.rescale_output(o, rescale);
  };

  // Full turns: S(j) and P(j-1) V(j-1); the softmax of S(j) under the P V.
  for (int turn = 1; turn < keys.count; ++turn) {
    finish_output(turn);
    wait_k(turn);
    take_turn();
    issue_scores<HeadDim, T::kBlockK, Element>(s, q_rows, T::kBlockQ,
                                               tiles_in.k_stage(k_of.stage(turn)));
    rescale_before_output();
    wait_v(turn - 1);
    issue_output<T::kVWidth, T::kBlockK, Element>(o, p_fragments,
                                                  tiles_in.v_stage(v_of.stage(turn - 1)));
    pass_turn();
    probe.time(kProbeScores, [] { ptx::wgmma_wait<1>(); });  // S(j); the P V keeps running
    ptx::wgmma_fence_operand(s);
    k_of.release(turn);
    scores_to_probabilities(turn);
  }

  // The last turn: P(T-1) V(T-1) alone; consumer 1 has no one left to pass the turn to.
  finish_output(keys.count);
  wait_v(keys.count - 1);
  take_turn();
  rescale_before_output();
  issue_output<T::kVWidth, T::kBlockK, Element>(o, p_fragments,
                                                tiles_in.v_stage(v_of.stage(keys.count - 1)));
  if (consumer == 0) pass_turn();
  probe.time(kProbeOutput, [] { ptx::wgmma_wait<0>(); });
  ptx::wgmma_fence_operand(o);
  v_of.release(keys.count - 1);
  probe.finish(mainloop_start, records, consumer, keys.count);
}

template <int HeadDim, typename Element, typename Traits>
__device__ __forceinline__ void consume_pingpong(
    int consumer, const KeyTiles& keys, uint32_t q_rows, const SharedTiles<Traits>& tiles_in,
    const StageRing<Traits::kStages>& k_of, const StageRing<Traits::kStages>& v_of,
    OnlineSoftmax& softmax, float (&o)[Traits::kVWidth / 2]) {
  using T = Traits;
  const unsigned my_turn = kTurnBarrier + static_cast<unsigned>(consumer);
  const unsigned other_turn = kTurnBarrier + static_cast<unsigned>(1 - consumer);
  if (consumer == 1) ptx::named_barrier_arrive(kTurnBarrier, kTurnThreads);
  float s[T::kBlockK / 2];
  uint32_t p_fragments[T::kBlockK / kWgmmaK][4];
  for (int turn = 0; turn <= keys.count; ++turn) {
    const bool scores = turn < keys.count;
    const bool output = turn > 0;
    if (scores) k_of.wait_full(turn);
    if (output) v_of.wait_full(turn - 1);
    ptx::named_barrier_sync(my_turn, kTurnThreads);
    if (output) {
      issue_output<T::kVWidth, T::kBlockK, Element>(o, p_fragments,
                                                    tiles_in.v_stage(v_of.stage(turn - 1)));
    }
    if (scores) {
      issue_scores<HeadDim, T::kBlockK, Element>(s, q_rows, T::kBlockQ,
                                                 tiles_in.k_stage(k_of.stage(turn)));
    }
    if (consumer == 0 || turn < keys.count) {
      ptx::named_barrier_arrive(other_turn, kTurnThreads);
    }
    ptx::wgmma_wait<0>();
    ptx::wgmma_fence_operand(o);
    ptx::wgmma_fence_operand(s);
    if (output) v_of.release(turn - 1);
    if (scores) {
      k_of.release(turn);
      const int first_key = keys.key_of(turn, T::kBlockK);
      if (keys.visible.needs_mask(first_key, T::kBlockK)) softmax.mask(s, first_key);
      softmax.update(s, o);
      probabilities_as_a<Element>(s, p_fragments);
    }
  }
}

// The producer: one elected thread loads each block's K(0), then its Q, then K(j) before V(j - 1).
// The rings' positions run on across a persistent CTA's blocks (tiles_before); it loads Q for a
// block once the consumers' output of its previous block has left Q's tile (q_empty), and K(0)
// before that wait, so the first key tile lands while that output is stored.
template <typename T, Grid kGrid, typename Barriers>
__device__ __forceinline__ void produce(const Flash3Params& params, const Barriers& barriers,
                                        const SharedTiles<T>& tiles_in) {
  const AttentionParams& p = params.attention;
  int tiles_before = 0;  // key tiles of this CTA's earlier blocks: where its rings stand
  int q_loads = 0;       // its earlier blocks with a visible key
  for_each_block<kGrid>(p, T::kBlockQ, [&](const BlockPosition& block) {
    const KeyTiles keys = key_tiles(p, block, T::kBlockK);
    if (keys.count == 0) return;
    // Tile `key_tile` of the block into its stage of `ring`, kWidth columns a row.
    const auto load = [&](const TileRing<T::kStages>& ring, uint32_t ring_tiles,
                          const CUtensorMap* map, int key_tile, auto width) {
      constexpr int kWidth = decltype(width)::value;
      constexpr uint32_t kBytes = tile_bytes(kWidth, T::kBlockK);
      const int tile = tiles_before + key_tile;
      ring.wait_empty(tile);
      const int stage = ring.stage(tile);
      const uint32_t full = ring.full(stage);
      ptx::mbarrier_arrive_expect_tx(full, kBytes);
      load_tile<kWidth>(ring_tiles + static_cast<uint32_t>(stage) * kBytes, map, full, T::kBlockK,
                        keys.key_of(key_tile, T::kBlockK), block.head_kv, block.batch);
    };
    for (int tile = 0; tile <= keys.count; ++tile) {
      if (tile < keys.count) {
        load(barriers.k, tiles_in.k, &params.k_map, tile,
             std::integral_constant<int, T::kQkWidth>{});
      }
      if (tile > 0) {
        load(barriers.v, tiles_in.v, &params.v_map, tile - 1,
             std::integral_constant<int, T::kVWidth>{});
        continue;
      }
      if constexpr (kGrid == Grid::persistent) {
        if (q_loads > 0) {
          ptx::mbarrier_wait(barriers.q_empty(), static_cast<unsigned>(q_loads - 1) % 2);
        }
      }
      ++q_loads;
      ptx::mbarrier_arrive_expect_tx(barriers.q(), T::kQBytes);
      load_tile<T::kQkWidth>(tiles_in.q, &params.q_map, barriers.q(), T::kBlockQ, block.first_row,
                             block.head, block.batch);
    }
    tiles_before += keys.count;
  });
}

// A consumer warpgroup (1 or 2) over one block: its 64 query rows against every key tile of
// `keys`, the rings' tiles counted from `tiles_before`, Q's tile the q_loads-th loaded; then its
// output. A persistent CTA's consumers release Q's tile (q_empty) once their output has left it;
// a block with no visible key stores from registers there, leaving Q's tile to the producer.
template <int HeadDim, typename Element, typename T, Schedule kSchedule, Grid kGrid,
          typename Barriers>
__device__ __forceinline__ void consume_block(const Flash3Params& params,
                                              const BlockPosition& block, const KeyTiles& keys,
                                              int warpgroup, const Barriers& barriers,
                                              const SharedTiles<T>& tiles_in,
                                              unsigned char* shared_bytes, int tiles_before,
                                              int q_loads) {
  const AttentionParams& p = params.attention;
  const int rows_before = (warpgroup - 1) * kWgmmaM;
  const uint32_t q_rows = tiles_in.q + static_cast<uint32_t>(rows_before * kSwizzleBytes);
  OnlineSoftmax softmax(p, block, rows_before);
  float o[T::kVWidth / 2] = {};
  const StageRing<T::kStages> k_of = barriers.k.consumers(tiles_before);
  const StageRing<T::kStages> v_of = barriers.v.consumers(tiles_before);
  const int tile_count = keys.count;
  if (tile_count > 0) ptx::mbarrier_wait(barriers.q(), static_cast<unsigned>(q_loads) % 2);
  if constexpr (overlaps_softmax(kSchedule)) {
    if (tile_count > 0) {
      consume_overlapped<HeadDim, Element, T, kSchedule>(warpgroup - 1, keys, q_rows, tiles_in,
                                                         k_of, v_of, softmax, o, params.probe);
    }
  } else if constexpr (kSchedule == Schedule::pingpong) {
    if (tile_count > 0) {
      consume_pingpong<HeadDim, Element, T>(warpgroup - 1, keys, q_rows, tiles_in, k_of, v_of,
                                            softmax, o);
    }
  } else {
    for (int tile = 0; tile < tile_count; ++tile) {
      const int first_key = keys.key_of(tile, T::kBlockK);
      k_of.wait_full(tile);
      float s[T::kBlockK / 2];
      compute_scores<HeadDim, T::kBlockK, Element>(s, q_rows, T::kBlockQ,
                                                   tiles_in.k_stage(k_of.stage(tile)));
      k_of.release(tile);
      if (keys.visible.needs_mask(first_key, T::kBlockK)) softmax.mask(s, first_key);
      softmax.update(s, o);
      uint32_t p_fragments[T::kBlockK / kWgmmaK][4];
      probabilities_as_a<Element>(s, p_fragments);
      v_of.wait_full(tile);
      issue_output<T::kVWidth, T::kBlockK, Element>(o, p_fragments,
                                                    tiles_in.v_stage(v_of.stage(tile)));
      ptx::wgmma_wait<0>();
      ptx::wgmma_fence_operand(o);
      v_of.release(tile);
    }
  }
  constexpr bool kPersistent = kGrid == Grid::persistent;
  if constexpr (overlaps_softmax(kSchedule)) {
    if (kPersistent && tile_count == 0) {
      store_output<T::kVWidth, T::kHeadDimV, Element>(p, block, softmax, o, rows_before);
      return;
    }
    store_output_through_shared<T::kVWidth, Element>(
        params, block, softmax, o, rows_before, q_rows, T::kBlockQ * kSwizzleBytes, shared_bytes,
        ptx::shared_address(shared_bytes), kEpilogueBarrier + static_cast<unsigned>(warpgroup - 1));
    if constexpr (kPersistent) {
      // The storing thread has waited for the TMA store to read the tile.
      if (threadIdx.x % kWarpgroupThreads == 0) ptx::mbarrier_arrive(barriers.q_empty());
    }
  } else {
    store_output<T::kVWidth, T::kHeadDimV, Element>(p, block, softmax, o, rows_before);
  }
}

template <int HeadDim, int HeadDimV, typename Element, Schedule kSchedule, int kStages, int kBlockK,
          Grid kGrid>
__global__ void __launch_bounds__(WsTraits<HeadDim, HeadDimV>::kThreads, 1)
    flash3_ws_forward(const __grid_constant__ Flash3Params params) {
  using T = WsTraits<HeadDim, HeadDimV, kStages, kBlockK>;
  static_assert(
      kGrid == Grid::one_cta_per_block ||
          (overlaps_softmax(kSchedule) && kSchedule != Schedule::overlapped_with_clock_probe),
      "a persistent grid: cuda.flash3's schedules (their output leaves through Q's "
      "tile, which q_empty guards), not the probe (one record per CTA and consumer)");
  using Barriers = std::conditional_t<kGrid == Grid::persistent, PersistentRingBarriers<kStages>,
                                      SplitRingBarriers<kStages>>;
  ATTNBENCH_SHARED(Barriers, barriers, 8);
  ATTNBENCH_DYNAMIC_SHARED(shared_bytes, 16);
  const SharedTiles<T> tiles_in(shared_bytes);

  if (threadIdx.x == 0) barriers.init(T::kConsumerThreads);
  __syncthreads();

  const int warpgroup = static_cast<int>(threadIdx.x) / kWarpgroupThreads;
  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<T::kProducerRegisters>();
    if (threadIdx.x / 32 != 0 || !ptx::elect_one()) return;
    produce<T, kGrid>(params, barriers, tiles_in);
    return;
  }

  ptx::setmaxnreg_inc<T::kConsumerRegisters>();
  int tiles_before = 0;
  int q_loads = 0;
  for_each_block<kGrid>(params.attention, T::kBlockQ, [&](const BlockPosition& block) {
    const KeyTiles keys = key_tiles(params.attention, block, T::kBlockK);
    consume_block<HeadDim, Element, T, kSchedule, kGrid>(
        params, block, keys, warpgroup, barriers, tiles_in, shared_bytes, tiles_before, q_loads);
    tiles_before += keys.count;
    q_loads += keys.count > 0 ? 1 : 0;
  });
}

// ---- launch -------------------------------------------------------------------------------------

template <int HeadDim, int HeadDimV, DType kDtype, Schedule kSchedule,
          int kStages = WsTraits<HeadDim, HeadDimV>::kStages,
          int kBlockK = WsTraits<HeadDim, HeadDimV>::kBlockK, Grid kGrid = Grid::one_cta_per_block>
Status launch_warp_specialized(const char* name, const Flash3Params& params, cudaStream_t stream) {
  using Element = typename gpu::ElementOf<kDtype>::type;
  return launch_blocks<WsTraits<HeadDim, HeadDimV, kStages, kBlockK>, kGrid>(
      name, flash3_ws_forward<HeadDim, HeadDimV, Element, kSchedule, kStages, kBlockK, kGrid>,
      params, stream);
}

template <int HeadDim, DType kDtype>
Status launch_flash3_ws(const Flash3Params& params, cudaStream_t stream) {
  return launch_warp_specialized<HeadDim, HeadDim, kDtype, Schedule::independent>("cuda.flash3_ws",
                                                                                  params, stream);
}

template <int HeadDim, DType kDtype>
Status launch_flash3_pingpong(const Flash3Params& params, cudaStream_t stream) {
  return launch_warp_specialized<HeadDim, HeadDim, kDtype, Schedule::pingpong>(
      "cuda.flash3_pingpong", params, stream);
}

template <int HeadDim, DType kDtype, int HeadDimV>
Status launch_flash3(const Flash3Params& params, cudaStream_t stream) {
  return launch_warp_specialized<HeadDim, HeadDimV, kDtype, Schedule::overlapped>("cuda.flash3",
                                                                                  params, stream);
}

// cuda.flash3 on K and V rings of kStages stages: its variant cuda.flash3[stages=N].
template <int HeadDim, DType kDtype, int kStages>
Status launch_flash3_stages(const Flash3Params& params, cudaStream_t stream) {
  return launch_warp_specialized<HeadDim, HeadDim, kDtype, Schedule::overlapped, kStages>(
      "cuda.flash3[stages]", params, stream);
}

// cuda.flash3 on key tiles of kBlockK keys, its rings as deep as fit: cuda.flash3[stages=2,
// block_n=176] at d 128.
template <int HeadDim, DType kDtype, int kBlockK>
Status launch_flash3_block_k(const Flash3Params& params, cudaStream_t stream) {
  return launch_warp_specialized<HeadDim, HeadDim, kDtype, Schedule::overlapped,
                                 ws_stages(HeadDim, HeadDim, kBlockK), kBlockK>(
      "cuda.flash3[block_n]", params, stream);
}

// cuda.flash3[probe=clock64]: cuda.flash3 with its waits timed into params.probe.
template <int HeadDim, DType kDtype>
Status launch_flash3_clock_probe(const Flash3Params& params, cudaStream_t stream) {
  return launch_warp_specialized<HeadDim, HeadDim, kDtype, Schedule::overlapped_with_clock_probe>(
      "cuda.flash3[probe=clock64]", params, stream);
}

// cuda.flash3[rescale=after_pv]: O rescaled after the P V wait, outside the turn.
template <int HeadDim, DType kDtype>
Status launch_flash3_rescale_after_pv(const Flash3Params& params, cudaStream_t stream) {
  return launch_warp_specialized<HeadDim, HeadDim, kDtype, Schedule::overlapped_rescale_after_pv>(
      "cuda.flash3[rescale=after_pv]", params, stream);
}

// cuda.flash3[pingpong=off]: the softmax under its own P V, no turns between the consumers.
template <int HeadDim, DType kDtype>
Status launch_flash3_without_turns(const Flash3Params& params, cudaStream_t stream) {
  return launch_warp_specialized<HeadDim, HeadDim, kDtype, Schedule::overlapped_without_turns>(
      "cuda.flash3[pingpong=off]", params, stream);
}

// cuda.flash3[persistent=on]: one CTA per SM, each running its blocks in turn.
template <int HeadDim, DType kDtype>
Status launch_flash3_persistent(const Flash3Params& params, cudaStream_t stream) {
  return launch_warp_specialized<HeadDim, HeadDim, kDtype, Schedule::overlapped,
                                 WsTraits<HeadDim>::kStages, WsTraits<HeadDim>::kBlockK,
                                 Grid::persistent>("cuda.flash3[persistent=on]", params, stream);
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
