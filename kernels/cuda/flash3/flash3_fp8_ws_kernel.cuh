// cuda.flash3_fp8_ws — FlashAttention-3's FP8 forward on Hopper (sm_90a), warp-specialized: the
// second FP8 stage (issue 16), cuda.flash3_fp8's recipe and passes with cuda.flash3_ws's pipeline.
//
// What changes against cuda.flash3_fp8 (flash3_fp8_kernel.cuh, one warpgroup): the CTA is three
// warpgroups. The producer warpgroup gives most of its registers away (setmaxnreg.dec) and one
// elected thread of its first warp issues every TMA load: Q (128 rows) once, then K and V^T tile
// by tile into rings of their own (SplitRingBarriers, as cuda.flash3_ws since issue 38: K(j)
// before V^T(j - 1), as many stages as shared memory holds: 6 at d 128), waiting on a stage's
// "empty" mbarrier before refilling it. The two consumer warpgroups take the registers
// (setmaxnreg.inc), own 64 query rows each, wait on K's "full" mbarrier, release K once S is
// waited for (fp8_scores), wait on V^T's, compute the tile as cuda.flash3_fp8 does
// (fp8_tile_output: online softmax, P to e4m3 in registers, O += P V^T) and release V^T once
// their P V wgmma has been waited for; with per-tensor descales the softmax of a tile runs under
// the previous tile's P V (consume_fp8_overlapped). No __syncthreads in the loop. Each consumer
// walks the same 128-key tiles in order, so every row follows the recipe of
// reference/fp8_recipe.h exactly as cuda.flash3_fp8's rows do.
// Performance: not yet measured on a GPU (GPU-CLAIMS.md, flash3-fp8-figure). At bf16 this
// schedule (cuda.flash3_ws) measured 552 TFLOP/s against cuda.flash3_wg1's 375 (docs/hopper.md).
// Known limits: as cuda.flash3_fp8 (d = head_dim_v = 128, its scalings, 16-byte row strides),
// and instantiated for e4m3 inputs only (the template takes 16-bit ones as cuda.flash3_fp8 does).
//
// cuda.flash3_fp8_ws_transpose (Fp8WsTransposeTraits) is the same forward with no pass before
// it: the TMA brings each key tile of V as stored into a ring stage of its own, and the producer
// warpgroup's 128 threads write its V^T (transpose_v_tile) into the stage the tensor cores read,
// as FlashAttention-3 does in its producer. The consumers wait for K's bytes before the scores and
// for V^T before P V. Three more mbarriers a stage order it (TransposeBarriers); V^T's ring has
// no use for its "full" barriers there (V^T written takes their place), only for its "empty" ones.
#pragma once

#include "kernels/cuda/flash3/flash3_fp8_kernel.cuh"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {

// One key tile of V as stored (kBlockK keys x d bytes, the TMA's 128-byte swizzled rows at `v`)
// into V^T as the layout pass writes it (d rows x kBlockK keys, swizzled, each 32 keys in
// v_key_of_column's order, at `vt`), by the 128 threads of a warpgroup (`thread` 0..127). A thread
// reads 4 dims of 4 keys, one word a key, and writes 4 words of 4 keys, one a dim. A warp's lanes
// are 8 column quads x 4 dim quads, so both sides meet each bank at most twice.
template <int HeadDim, int BlockK>
__device__ __forceinline__ void transpose_v_tile(const unsigned char* v, uint32_t v_address,
                                                 unsigned char* vt, uint32_t vt_address,
                                                 int thread) {
  static_assert(HeadDim == kSwizzleBytes && BlockK == kSwizzleBytes,
                "a key of V and a dim of V^T are one 128-byte swizzled row each");
  constexpr int kDimQuads = 4;                  // a warp's lanes: 4 dim quads ...
  constexpr int kColumnQuads = 32 / kDimQuads;  // ... x 8 column quads = 32 columns, one group
  constexpr int kDimsPerItem = 4 * kDimQuads;   // 16 dims x 32 keys: a warp's item
  constexpr int kItems = BlockK / 32 * (HeadDim / kDimsPerItem);
  const int lane = thread % 32;
  const int column_quad = lane % kColumnQuads;
  const int dim_quad = lane / kColumnQuads;
  for (int item = thread / 32; item < kItems; item += kWarpgroupThreads / 32) {
    const int group = item / (HeadDim / kDimsPerItem);  // 32 keys
    const int first_dim = item % (HeadDim / kDimsPerItem) * kDimsPerItem + 4 * dim_quad;
    const int column = 32 * group + 4 * column_quad;
    uint32_t words[4];  // words[i]: dims first_dim.. +3 of the key in column + i
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int key = 32 * group + v_key_of_column(4 * column_quad + i);
      const uint32_t at =
          swizzled_128(v_address + static_cast<uint32_t>(key * kSwizzleBytes + first_dim));
      words[i] = *reinterpret_cast<const uint32_t*>(v + (at - v_address));
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {  // dim first_dim + r of the 4 keys, column order
      const int shift = 8 * r;
      const uint32_t keys = (words[0] >> shift & 0xffu) | (words[1] >> shift & 0xffu) << 8 |
                            (words[2] >> shift & 0xffu) << 16 | (words[3] >> shift & 0xffu) << 24;
      const uint32_t at = swizzled_128(
          vt_address + static_cast<uint32_t>((first_dim + r) * kSwizzleBytes + column));
      *reinterpret_cast<uint32_t*>(vt + (at - vt_address)) = keys;
    }
  }
}

// The mbarriers a transposing producer adds to the ring, per stage: "V landed" (the TMA's bytes of
// V as stored), "V^T written" (every producer thread has stored its part and fenced it for the
// tensor cores) and "V read" (every producer thread is done reading the stage's V, which the next
// load into the stage overwrites).
template <int kStages>
struct TransposeBarriers {
  uint64_t v_landed[kStages];
  uint64_t vt_written[kStages];
  uint64_t v_read[kStages];

  // Thread 0, before the CTA's first __syncthreads.
  __device__ __forceinline__ void init(int producer_threads) {
    for (int stage = 0; stage < kStages; ++stage) {
      ptx::mbarrier_init(landed(stage), 1);
      ptx::mbarrier_init(ptx::shared_address(&vt_written[stage]), producer_threads);
      ptx::mbarrier_init(ptx::shared_address(&v_read[stage]), producer_threads);
    }
    ptx::fence_mbarrier_init();
  }
  __device__ __forceinline__ uint32_t landed(int stage) const {
    return ptx::shared_address(&v_landed[stage]);
  }
  __device__ __forceinline__ static unsigned phase(int tile) {
    return static_cast<unsigned>(tile / kStages) % 2;
  }
  __device__ __forceinline__ void wait_landed(int tile) const {
    ptx::mbarrier_wait(landed(tile % kStages), phase(tile));
  }
  __device__ __forceinline__ void wait_written(int tile) const {
    ptx::mbarrier_wait(ptx::shared_address(&vt_written[tile % kStages]), phase(tile));
  }
  // The loading thread, before V of tile `tile` goes into its stage: the stage's previous V read
  // by every producer thread (nothing to wait for on the ring's first pass).
  __device__ __forceinline__ void wait_read(int tile) const {
    if (tile < kStages) return;
    ptx::mbarrier_wait(ptx::shared_address(&v_read[tile % kStages]), phase(tile - kStages));
  }
  // A producer thread's part of tile `tile` is written (and fenced) and its V read.
  __device__ __forceinline__ void transposed(int tile) const {
    ptx::mbarrier_arrive(ptx::shared_address(&vt_written[tile % kStages]));
    ptx::mbarrier_arrive(ptx::shared_address(&v_read[tile % kStages]));
  }
};

// Issued by one thread: the key tile at `key` into `stage` as a transposing forward loads it: K,
// completing on `k_barrier`, and V as stored (d / 128 boxes of kBlockK keys, as K), on
// `v_barrier`.
template <typename Traits>
__device__ __forceinline__ void load_fp8_k_and_stored_v(const Flash3Params& params,
                                                        const Fp8SharedTiles<Traits>& tiles,
                                                        int stage, uint32_t k_barrier,
                                                        uint32_t v_barrier, int key,
                                                        const BlockPosition& block) {
  load_fp8_k(params, tiles, stage, k_barrier, key, block);
  ptx::mbarrier_arrive_expect_tx(v_barrier, Traits::kVBytes);
#pragma unroll
  for (int box = 0; box < Traits::kBoxes; ++box) {
    ptx::tma_load_4d(
        tiles.v_stage(stage) + static_cast<uint32_t>(box * Traits::kBlockK * kSwizzleBytes),
        &params.v_map, v_barrier, box * kSwizzleBytes, key, block.head_kv, block.batch);
  }
}

// The transposing producer warpgroup: thread 0 loads Q, then K and V tile by tile, one tile ahead
// of the transposition; all 128 threads write each tile's V^T once its stage is free and its V
// has landed.
template <typename Traits>
__device__ __forceinline__ void produce_with_transpose(
    const Flash3Params& params, const Fp8SharedTiles<Traits>& tiles,
    const SplitRingBarriers<Traits::kStages>& rings,
    const TransposeBarriers<Traits::kStages>& stored_v, const KeyTiles& keys,
    const BlockPosition& block, unsigned char* shared_bytes) {
  if (keys.count == 0) return;
  const int thread = static_cast<int>(threadIdx.x);  // the producer is warpgroup 0
  const uint32_t shared_start = ptx::shared_address(shared_bytes);
  const auto load = [&](int tile) {
    const int stage = tile % Traits::kStages;
    rings.k.wait_empty(tile);  // K's stage
    stored_v.wait_read(tile);  // V's stage
    load_fp8_k_and_stored_v(params, tiles, stage, rings.k.full(stage), stored_v.landed(stage),
                            keys.key_of(tile, Traits::kBlockK), block);
  };
  if (thread == 0) {
    load_fp8_q(params, tiles, rings.q(), block);
    load(0);
  }
  for (int tile = 0; tile < keys.count; ++tile) {
    if (thread == 0 && tile + 1 < keys.count) load(tile + 1);
    const int stage = tile % Traits::kStages;
    rings.v.wait_empty(tile);  // V^T's stage: the consumers are done with its previous tile
    stored_v.wait_landed(tile);
    transpose_v_tile<Traits::kHeadDim, Traits::kBlockK>(
        shared_bytes + (tiles.v_stage(stage) - shared_start), tiles.v_stage(stage),
        shared_bytes + (tiles.vt_stage(stage) - shared_start), tiles.vt_stage(stage), thread);
    ptx::fence_proxy_async();  // this thread's stores of V^T, to the tensor cores' proxy
    stored_v.transposed(tile);
  }
}

// Output, descales, groups and kBlockScales as flash3_fp8_forward's.
// kTransposesV: Fp8WsTransposeTraits' forward (V as stored in params' v_map).
// A consumer's key tiles with per-tensor descales, the softmax of S(j) under its own P(j-1) V(j-1)
// (cuda.flash3's overlap, issue 38; the FP8 stages have no turns): a full turn issues S(j),
// rescales O to tile j-1's running max, issues P(j-1) V^T(j-1), waits for S(j) alone
// (wait_group 1), releases K(j) and computes the softmax of S(j) while the P V runs. The P V's
// wait opens the next turn (then V^T(j-1) is released and P(j) packed to e4m3 from S's registers):
// after the loop's back edge, where ptxas does not hoist it above the exponentials
// (flash3_ws_kernel.cuh's consume_overlapped says why; StaticCuda holds the overlap). First and
// last turns are written out, with no branch around a wgmma. `wait_vt(tile)`: V^T(tile) is in its
// stage (the TMA's bytes, or the producer's transpose).
template <int HeadDim, typename Traits, typename WaitVt>
__device__ __forceinline__ void consume_fp8_overlapped(
    const KeyTiles& keys, uint32_t q_rows, const Fp8SharedTiles<Traits>& tiles,
    const StageRing<Traits::kStages>& k_of, const StageRing<Traits::kStages>& v_of,
    const WaitVt& wait_vt, OnlineSoftmax& softmax, float (&o)[HeadDim / 2]) {
  using T = Traits;
  float s[T::kBlockK / 2];
  uint32_t p_fragments[T::kBlockK / kFp8StepElements][4];
  float rescale[kRowsPerThread];  // O's factor for the latest tile's running max
  const auto scores_to_probabilities = [&](int tile) {
    const int first_key = keys.key_of(tile, T::kBlockK);
    if (keys.visible.needs_mask(first_key, T::kBlockK)) softmax.mask(s, first_key);
    softmax.update_scores(s, rescale);
  };
  const auto issue_output = [&](int tile) {
    issue_fp8_output<HeadDim, T::kBlockK>(o, p_fragments, tiles.vt_stage(v_of.stage(tile)));
  };

  // The first turn: S(0) alone.
  k_of.wait_full(0);
  issue_fp8_scores<HeadDim, T::kBlockK>(s, q_rows, T::kBlockQ, tiles.k_stage(k_of.stage(0)));
  ptx::wgmma_wait<0>();
  ptx::wgmma_fence_operand(s);
  k_of.release(0);
  scores_to_probabilities(0);

  // What opens turn `turn` (and the last turn): the previous P V waited for (none before turn 2),
  // its V^T released, and P(turn - 1) packed from S's registers.
  const auto finish_output = [&](int turn) {
    ptx::wgmma_wait<0>();
    ptx::wgmma_fence_operand(o);
    if (turn >= 2) v_of.release(turn - 2);
    probabilities_as_e4m3(s, p_fragments);
  };

  // Full turns: S(j) and P(j-1) V(j-1); the softmax of S(j) under the P V.
  for (int turn = 1; turn < keys.count; ++turn) {
    finish_output(turn);
    k_of.wait_full(turn);
    issue_fp8_scores<HeadDim, T::kBlockK>(s, q_rows, T::kBlockQ, tiles.k_stage(k_of.stage(turn)));
    softmax.rescale_output(o, rescale);
    wait_vt(turn - 1);
    issue_output(turn - 1);
    ptx::wgmma_wait<1>();  // S(j); the P V keeps running
    ptx::wgmma_fence_operand(s);
    k_of.release(turn);
    scores_to_probabilities(turn);
  }

  // The last turn: P(T-1) V(T-1) alone.
  finish_output(keys.count);
  wait_vt(keys.count - 1);
  softmax.rescale_output(o, rescale);
  issue_output(keys.count - 1);
  ptx::wgmma_wait<0>();
  ptx::wgmma_fence_operand(o);
  v_of.release(keys.count - 1);
}

template <int HeadDim, typename Output, bool kBlockScales, bool kTransposesV = false>
__global__ void __launch_bounds__(Fp8WsTraits<HeadDim, kTransposesV>::kThreads, 1)
    flash3_fp8_ws_forward(const __grid_constant__ Flash3Params params, const float* descales,
                          const Fp8ScaleGroups groups) {
  using T = Fp8WsTraits<HeadDim, kTransposesV>;
  static_assert(!kBlockScales || kFp8BlockRows == T::kBlockK, "one K and V descale a key tile");
  static_assert(kFp8BlockRows % T::kBlockQ == 0, "a CTA's query rows share one Q block descale");
  AttentionParams p = params.attention;
  const BlockPosition block = block_position(p, T::kBlockQ);
  // K and V^T in rings of their own; when the producer transposes V, stored_v's barriers order V^T
  // and V^T's ring serves only its "empty" barriers.
  using Barriers = SplitRingBarriers<T::kStages>;
  ATTNBENCH_SHARED(Barriers, barriers, 8);
  using StoredV = TransposeBarriers<T::kStages>;
  ATTNBENCH_SHARED(StoredV, stored_v, 8);
  ATTNBENCH_DYNAMIC_SHARED(shared_bytes, 16);
  const Fp8SharedTiles<T> tiles(shared_bytes);

  const KeyTiles keys = key_tiles(p, block, T::kBlockK);
  const int tile_count = keys.count;

  if (threadIdx.x == 0) {
    barriers.init(T::kConsumerThreads);
    if constexpr (kTransposesV) stored_v.init(kWarpgroupThreads);
  }
  __syncthreads();

  const int warpgroup = static_cast<int>(threadIdx.x) / kWarpgroupThreads;
  if (warpgroup == 0) {
    // ---- the producer: one elected thread loads Q, then K(j) before V^T(j - 1); or, when it
    // transposes V, the whole warpgroup loads K and V as stored and writes V^T (its own routine)
    ptx::setmaxnreg_dec<T::kProducerRegisters>();
    if constexpr (kTransposesV) {
      produce_with_transpose(params, tiles, barriers, stored_v, keys, block, shared_bytes);
      return;
    }
    if (threadIdx.x / 32 != 0 || !ptx::elect_one() || tile_count == 0) return;
    load_fp8_q(params, tiles, barriers.q(), block);
    for (int tile = 0; tile <= tile_count; ++tile) {
      if (tile < tile_count) {
        barriers.k.wait_empty(tile);
        load_fp8_k(params, tiles, barriers.k.stage(tile), barriers.k.full(barriers.k.stage(tile)),
                   keys.key_of(tile, T::kBlockK), block);
      }
      if (tile > 0) {
        barriers.v.wait_empty(tile - 1);
        load_fp8_vt(params, tiles, barriers.v.stage(tile - 1),
                    barriers.v.full(barriers.v.stage(tile - 1)), keys.key_of(tile - 1, T::kBlockK),
                    block);
      }
    }
    return;
  }

  // ---- a consumer: 64 query rows, every key tile ------------------------------------------------
  ptx::setmaxnreg_inc<T::kConsumerRegisters>();
  const float v_descale = apply_fp8_descales<kBlockScales>(p, block, descales, groups);
  const int rows_before = (warpgroup - 1) * kWgmmaM;
  const uint32_t q_rows = tiles.q + static_cast<uint32_t>(rows_before * kSwizzleBytes);
  OnlineSoftmax softmax(p, block, rows_before);
  float o[HeadDim / 2] = {};
  const StageRing<T::kStages> k_of = barriers.k.consumers();
  const StageRing<T::kStages> v_of = barriers.v.consumers();
  if (tile_count > 0) ptx::mbarrier_wait(barriers.q(), 0);
  const auto wait_vt = [&](int tile) {
    if constexpr (kTransposesV) {
      stored_v.wait_written(tile);
    } else {
      v_of.wait_full(tile);
    }
  };
  if constexpr (!kBlockScales) {
    if (tile_count > 0) {
      consume_fp8_overlapped<HeadDim, T>(keys, q_rows, tiles, k_of, v_of, wait_vt, softmax, o);
    }
  } else {
    // Per-block descales (16-bit inputs): each tile's P V into registers of its own, waited for.
    for (int tile = 0; tile < tile_count; ++tile) {
      k_of.wait_full(tile);
      float s[T::kBlockK / 2];
      fp8_scores<HeadDim, T::kBlockK>(s, q_rows, T::kBlockQ, tiles.k_stage(k_of.stage(tile)));
      k_of.release(tile);  // fp8_scores waited for the S wgmma
      wait_vt(tile);
      fp8_tile_output<HeadDim, T::kBlockK, kBlockScales>(
          s, o, softmax, keys, keys.key_of(tile, T::kBlockK), tiles.vt_stage(v_of.stage(tile)),
          block, descales, groups);
      v_of.release(tile);  // fp8_tile_output waited for the P V wgmma
    }
  }
  store_fp8_output<HeadDim, Output>(p, block, softmax, o, fp8_output_factor<Output>(p, v_descale),
                                    rows_before);
}

template <int HeadDim, DType kInput>
Status launch_flash3_fp8_ws(const Flash3Params& params, const Fp8PassArgs& args,
                            cudaStream_t stream) {
  using Element = typename gpu::ElementOf<kInput>::type;
  return launch_fp8_forward<HeadDim, kInput, Fp8WsTraits<HeadDim>>(
      "cuda.flash3_fp8_ws", flash3_fp8_ws_forward<HeadDim, Element, false>,
      flash3_fp8_ws_forward<HeadDim, Element, kInput != DType::e4m3>, params, args, stream);
}

template <int HeadDim, DType kInput>
Status launch_flash3_fp8_ws_transpose(const Flash3Params& params, const Fp8PassArgs& args,
                                      cudaStream_t stream) {
  static_assert(kInput == DType::e4m3, "e4m3 inputs: 16-bit ones need the quantize passes");
  (void)args;  // no pass: V^T is the forward's own
  return launch_blocks<Fp8WsTransposeTraits<HeadDim>>(
      "cuda.flash3_fp8_ws_transpose", flash3_fp8_ws_forward<HeadDim, uint8_t, false, true>, params,
      stream, static_cast<const float*>(nullptr), Fp8ScaleGroups{});
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
