// cuda.flash3_fp8_ws — FlashAttention-3's FP8 forward on Hopper (sm_90a), warp-specialized: the
// second FP8 stage (issue 16), cuda.flash3_fp8's recipe and passes with cuda.flash3_ws's pipeline.
//
// What changes against cuda.flash3_fp8 (flash3_fp8_kernel.cuh, one warpgroup): the CTA is three
// warpgroups. The producer warpgroup gives most of its registers away (setmaxnreg.dec) and one
// elected thread of its first warp issues every TMA load: Q (128 rows) once, then K and V^T tile
// by tile into a ring of kStages stages, waiting on a stage's "empty" mbarrier before refilling
// it. The two consumer warpgroups take the registers (setmaxnreg.inc), own 64 query rows each,
// wait on a stage's "full" mbarrier, compute a tile as cuda.flash3_fp8 does (fp8_scores,
// fp8_tile_output: S by wgmma k32 e4m3, online softmax, P to e4m3 in registers, O += P V^T), and
// arrive on the stage's "empty" barrier once their P V wgmma has been waited for. No
// __syncthreads in the loop. Each consumer walks the same 128-key tiles in order, so every row
// follows the recipe of reference/fp8_recipe.h exactly as cuda.flash3_fp8's rows do.
// Performance: not yet measured on a GPU (GPU-CLAIMS.md, flash3-fp8-figure). At bf16 this schedule
// (cuda.flash3_ws) measured 552 TFLOP/s against cuda.flash3_wg1's 375 (docs/hopper.md).
// Known limits: as cuda.flash3_fp8 (d = head_dim_v = 128, its scalings, 16-byte row strides), and
// instantiated for e4m3 inputs only (the template takes 16-bit ones as cuda.flash3_fp8 does).
#pragma once

#include "kernels/cuda/flash3/flash3_fp8_kernel.cuh"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {

// Output, descales, groups and kBlockScales as flash3_fp8_forward's.
template <int HeadDim, typename Output, bool kBlockScales>
__global__ void __launch_bounds__(Fp8WsTraits<HeadDim>::kThreads, 1)
    flash3_fp8_ws_forward(const __grid_constant__ Flash3Params params, const float* descales,
                          const Fp8ScaleGroups groups) {
  using T = Fp8WsTraits<HeadDim>;
  static_assert(!kBlockScales || kFp8BlockRows == T::kBlockK, "one K and V descale a key tile");
  static_assert(kFp8BlockRows % T::kBlockQ == 0, "a CTA's query rows share one Q block descale");
  AttentionParams p = params.attention;
  const BlockPosition block = block_position(p, T::kBlockQ);
  using Barriers = RingBarriers<T::kStages>;  // a stage holds K and V^T
  ATTNBENCH_SHARED(Barriers, barriers, 8);
  ATTNBENCH_DYNAMIC_SHARED(shared_bytes, 16);
  const Fp8SharedTiles<T> tiles(shared_bytes);

  const KeyTiles keys = key_tiles(p, block, T::kBlockK);
  const int tile_count = keys.count;

  if (threadIdx.x == 0) barriers.init(T::kConsumerThreads);
  __syncthreads();

  const int warpgroup = static_cast<int>(threadIdx.x) / kWarpgroupThreads;
  if (warpgroup == 0) {
    // ---- the producer: one elected thread loads Q, then K and V^T into the ring -----------------
    ptx::setmaxnreg_dec<T::kProducerRegisters>();
    if (threadIdx.x / 32 != 0 || !ptx::elect_one() || tile_count == 0) return;
    load_fp8_q(params, tiles, barriers.q(), block);
    for (int iteration = 0; iteration < tile_count; ++iteration) {
      const int stage = iteration % T::kStages;
      barriers.wait_empty(iteration);
      load_fp8_kv(params, tiles, stage, barriers.full(stage), keys.key_of(iteration, T::kBlockK),
                  block);
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
  const StageRing<T::kStages> stage_of = barriers.ring();
  if (tile_count > 0) ptx::mbarrier_wait(barriers.q(), 0);
  for (int iteration = 0; iteration < tile_count; ++iteration) {
    const int stage = stage_of.stage(iteration);
    stage_of.wait_full(iteration);
    float s[T::kBlockK / 2];
    fp8_scores<HeadDim, T::kBlockK>(s, q_rows, T::kBlockQ, tiles.k_stage(stage));
    fp8_tile_output<HeadDim, T::kBlockK, kBlockScales>(
        s, o, softmax, keys, keys.key_of(iteration, T::kBlockK), tiles.vt_stage(stage), block,
        descales, groups);
    stage_of.release(iteration);  // fp8_tile_output waited for the P V wgmma
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

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
