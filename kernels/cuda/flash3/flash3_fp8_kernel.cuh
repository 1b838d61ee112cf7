// cuda.flash3_fp8 — FlashAttention-3's FP8 forward on Hopper (sm_90a), its first stage: one
// warpgroup of 64 query rows per CTA, as cuda.flash3_wg1, on e4m3 Q, K, V (issue 16).
//
// What it computes: the FP8 recipe of reference/fp8_recipe.h on inputs already stored in e4m3
// with per-tensor descales (the recipe's steps 3-5; this kernel declares that recipe, so the
// checker judges it by the recipe's own rows):
//   S = Q_e4m3 K_e4m3^T                  wgmma m64n128k32 e4m3, fp32 accumulators
//   s = S * descale_q * descale_k * softmax scale (folded into the online softmax's scale)
//   P = 2^((s - m) log2 e) * 256         rounded to e4m3 (P's largest value 2^8, inside 448)
//   O += P V                             wgmma m64n<d>k32 e4m3, P from registers
//   out = O * descale_v / (256 l)        rounded to e4m3 with out_scale; LSE natural-log
// What FP8 changes against the 16-bit stages (PTX ISA, wgmma for .e4m3):
//   - a k-step is 32 elements (32 bytes, as a 16-bit k16 step), and a 128-byte swizzled row holds
//     128 elements: Q and K tiles are d / 128 boxes of rows x 128 bytes;
//   - B must be K-major: V is read as V^T, [d][key], which a layout pass (fp8_v_layout, below)
//     writes into the plan's scratch before every forward, inside the timed region;
//   - P's registers: an e4m3 A fragment holds, in register 0, row g's columns 4t..4t+3 of a
//     32-key step, where S's accumulators hold columns 2t, 2t+1, 8+2t, 9+2t. Rather than move
//     bytes between lanes, the layout pass stores V^T's keys in the accumulators' order: A column
//     a of each 32 keys is key sigma(a) (v_key_of_column), so P goes to the tensor cores as it
//     lies in the registers, packed four values a register (pack_e4m3x4).
// Performance: not yet measured on a GPU (GPU-CLAIMS.md, flash3-fp8-*). One warpgroup waits for
// each wgmma batch, as cuda.flash3_wg1 does: the warp-specialized, ping-pong stages are next.
// Known limits: d = head_dim_v = 128; e4m3 in and out; per-tensor descales (fp8_scaling none or
// per_tensor); rows whose strides are multiples of 16 bytes (the TMA's rule).
#pragma once

#include <climits>
#include <cstdint>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/common/ptx.cuh"
#include "kernels/cuda/common/shared.cuh"
#include "kernels/cuda/common/visible_tiles.h"
#include "kernels/cuda/common/wgmma_descriptor.h"
#include "kernels/cuda/flash3/flash3_epilogue.cuh"
#include "kernels/cuda/flash3/flash3_fp8_launch.h"
#include "kernels/cuda/flash3/flash3_mainloop.cuh"
#include "kernels/cuda/flash3/flash3_scheduler.cuh"
#include "kernels/cuda/flash3/flash3_softmax.cuh"
#include "kernels/cuda/flash3/flash3_traits.h"
#include "kernels/params.h"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {

// The layout pass: V (batch, key, head_kv, d) e4m3 into V^T (batch, head_kv, d, keys_padded),
// each 32 keys in v_key_of_column's order, zeros past seqlen_k. One thread per 32 bytes of a row.
template <int HeadDim>
__global__ void fp8_v_layout(const AttentionParams p, uint8_t* vt, int keys_padded) {
  const int64_t chunks = static_cast<int64_t>(keys_padded) / 32;
  const int64_t rows = static_cast<int64_t>(p.batch) * p.heads_kv * HeadDim;
  const auto* v = static_cast<const uint8_t*>(p.v);
  for (int64_t item = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       item < rows * chunks; item += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = item / chunks;  // (batch, head_kv, d)
    const int64_t first_key = item % chunks * 32;
    const int64_t d = row % HeadDim;
    const int64_t head = row / HeadDim % p.heads_kv;
    const int64_t batch = row / HeadDim / p.heads_kv;
    uint8_t* out = vt + row * keys_padded + first_key;
    for (int a = 0; a < 32; ++a) {
      const int64_t key = first_key + v_key_of_column(a);
      out[a] = key < p.seqlen_k
                   ? v[batch * p.v_batch_stride + key * p.v_row_stride + head * p.v_head_stride + d]
                   : uint8_t{0};
    }
  }
}

// The descriptor of k-step `step` (32 e4m3 along K) of a K-major tile whose boxes hold `box_rows`
// rows of 128 bytes (Q, K, and V^T, whose rows are d).
__device__ __forceinline__ uint64_t fp8_k_major_step(uint32_t tile, int box_rows, int step) {
  return k_major_at(tile, box_rows, step * kFp8StepBytes);
}

// P (S's accumulators after the softmax, in [0, 1]) times 2^8, rounded to e4m3, as the A
// fragments of the P V wgmma, one per 32 keys: columns 2t, 2t+1, 8+2t, 9+2t of row g in register
// 0 (accumulators 0, 1, 4, 5 of the step), row g + 8 in register 1, and the same 16 keys on in
// registers 2 and 3; V^T's keys are in that order (v_key_of_column).
template <int kCount>
__device__ __forceinline__ void probabilities_as_e4m3(const float (&s)[kCount],
                                                      uint32_t (&fragments)[kCount / 16][4]) {
  constexpr float k = kFp8PScale;
#pragma unroll
  for (int step = 0; step < kCount / 16; ++step) {
    const float* x = s + 16 * step;
    fragments[step][0] = ptx::pack_e4m3x4(x[0] * k, x[1] * k, x[4] * k, x[5] * k);
    fragments[step][1] = ptx::pack_e4m3x4(x[2] * k, x[3] * k, x[6] * k, x[7] * k);
    fragments[step][2] = ptx::pack_e4m3x4(x[8] * k, x[9] * k, x[12] * k, x[13] * k);
    fragments[step][3] = ptx::pack_e4m3x4(x[10] * k, x[11] * k, x[14] * k, x[15] * k);
  }
}

// O * factor / l rounded to e4m3 (two bytes, one column pair, per store), then the LSE.
template <int HeadDim>
__device__ __forceinline__ void store_output_e4m3(const AttentionParams& p,
                                                  const BlockPosition& block,
                                                  OnlineSoftmax& softmax,
                                                  const float (&o)[HeadDim / 2], float factor) {
  softmax.finish();
  uint8_t* out = static_cast<uint8_t*>(p.out) + block.batch * p.out_batch_stride +
                 block.head * p.out_head_stride;
#pragma unroll
  for (int index = 0; index < HeadDim / 2; index += 2) {
    const int r = accumulator_row(index);
    const int64_t query = block.first_row + thread_row(r);
    if (query < p.seqlen_q) {
      const float scale = softmax.inverse_sum(r) * factor;
      const uint32_t bits = ptx::pack_e4m3x4(o[index] * scale, o[index + 1] * scale, 0.0f, 0.0f);
      // The column is even: a 2-byte aligned pair.
      *reinterpret_cast<uint16_t*>(out + query * p.out_row_stride + accumulator_column(index)) =
          static_cast<uint16_t>(bits);
    }
  }
  store_lse(p, block, softmax, 0);
}

template <int HeadDim>
__global__ void __launch_bounds__(kWarpgroupThreads, 1)
    flash3_fp8_forward(const __grid_constant__ Flash3Params params) {
  using T = Fp8Traits<HeadDim>;
  // The scores are products of stored e4m3 values: their descales join the softmax's scale.
  AttentionParams p = params.attention;
  const float qk_descale = p.q_descale * p.k_descale;
  p.scale *= qk_descale;
  p.scale_log2 *= qk_descale;
  struct Barriers {
    uint64_t q_full;
    uint64_t kv_full[T::kStages];
  };
  ATTNBENCH_SHARED(Barriers, barriers, 8);
  ATTNBENCH_DYNAMIC_SHARED(shared_bytes, 16);
  const uint32_t q_tile = static_cast<uint32_t>(
      (ptx::shared_address(shared_bytes) + kTileAlignment - 1) / kTileAlignment * kTileAlignment);
  const auto k_stage = [&](int stage) {
    return q_tile + T::kQBytes + static_cast<uint32_t>(stage) * T::kKBytes;
  };
  const auto vt_stage = [&](int stage) {
    return q_tile + T::kQBytes + T::kStages * T::kKBytes +
           static_cast<uint32_t>(stage) * T::kVtBytes;
  };
  const uint32_t q_full = ptx::shared_address(&barriers.q_full);
  const auto kv_full = [&](int stage) { return ptx::shared_address(&barriers.kv_full[stage]); };

  const BlockPosition block = block_position(p, T::kBlockQ);
  const KeyTiles keys = key_tiles(p, block, T::kBlockK);
  const int tile_count = keys.count;

  // K: d / 128 boxes of kBlockK rows; V^T: one box of d rows x 128 keys.
  const auto load_kv = [&](int stage, int tile) {
    const uint32_t barrier = kv_full(stage);
    const int key = keys.key_of(tile, T::kBlockK);
    ptx::mbarrier_arrive_expect_tx(barrier, T::kKBytes + T::kVtBytes);
#pragma unroll
    for (int box = 0; box < T::kBoxes; ++box) {
      ptx::tma_load_4d(k_stage(stage) + static_cast<uint32_t>(box * T::kBlockK * kSwizzleBytes),
                       &params.k_map, barrier, box * kSwizzleBytes, key, block.head_kv,
                       block.batch);
    }
    ptx::tma_load_4d(vt_stage(stage), &params.v_map, barrier, key, 0, block.head_kv, block.batch);
  };

  if (threadIdx.x == 0) {
    ptx::mbarrier_init(q_full, 1);
    for (int stage = 0; stage < T::kStages; ++stage) ptx::mbarrier_init(kv_full(stage), 1);
    ptx::fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0 && tile_count > 0) {
    ptx::mbarrier_arrive_expect_tx(q_full, T::kQBytes);
#pragma unroll
    for (int box = 0; box < T::kBoxes; ++box) {
      ptx::tma_load_4d(q_tile + static_cast<uint32_t>(box * T::kBlockQ * kSwizzleBytes),
                       &params.q_map, q_full, box * kSwizzleBytes, block.first_row, block.head,
                       block.batch);
    }
    for (int stage = 0; stage < T::kStages && stage < tile_count; ++stage) load_kv(stage, stage);
  }

  OnlineSoftmax softmax(p, block);
  float o[HeadDim / 2] = {};
  if (tile_count > 0) ptx::mbarrier_wait(q_full, 0);

  for (int iteration = 0; iteration < tile_count; ++iteration) {
    const int stage = iteration % T::kStages;
    const int first_key = keys.key_of(iteration, T::kBlockK);
    ptx::mbarrier_wait(kv_full(stage), static_cast<unsigned>(iteration / T::kStages) % 2);

    // ---- S = Q K^T, one wgmma m64n128k32 per 32 of d --------------------------------------------
    float s[T::kBlockK / 2];
    ptx::wgmma_fence();
#pragma unroll
    for (int step = 0; step < HeadDim / kFp8StepElements; ++step) {
      ptx::wgmma_ss<T::kBlockK, ptx::E4m3, false>(
          s, fp8_k_major_step(q_tile, T::kBlockQ, step),
          fp8_k_major_step(k_stage(stage), T::kBlockK, step), step > 0);
    }
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
    ptx::wgmma_fence_operand(s);

    // ---- mask, online softmax (O rescaled), P to e4m3; O += P V, one wgmma per 32 keys --------
    if (keys.visible.needs_mask(first_key, T::kBlockK)) softmax.mask(s, first_key);
    softmax.update(s, o);
    uint32_t p_fragments[T::kBlockK / kFp8StepElements][4];
    probabilities_as_e4m3(s, p_fragments);
    ptx::wgmma_fence();
    ptx::wgmma_fence_operand(o);
#pragma unroll
    for (int step = 0; step < T::kBlockK / kFp8StepElements; ++step) {
      ptx::wgmma_rs<HeadDim, ptx::E4m3, false>(
          o, p_fragments[step], fp8_k_major_step(vt_stage(stage), HeadDim, step), true);
    }
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
    ptx::wgmma_fence_operand(o);

    // Every warp has waited for its wgmma on this stage: thread 0 may refill it.
    __syncthreads();
    if (threadIdx.x == 0 && iteration + T::kStages < tile_count) {
      load_kv(stage, iteration + T::kStages);
    }
  }

  // O holds sum P * 256 * v_stored: out = O * descale_v / (256 l), then out_scale for e4m3.
  store_output_e4m3<HeadDim>(p, block, softmax, o, p.v_descale / kFp8PScale * p.out_scale);
}

// ---- launch -------------------------------------------------------------------------------------

template <int HeadDim>
Status launch_flash3_fp8(const Flash3Params& params, uint8_t* vt, int keys_padded,
                         cudaStream_t stream) {
  using T = Fp8Traits<HeadDim>;
  const AttentionParams& p = params.attention;
  constexpr int kLayoutThreads = 256;
  const int64_t items = static_cast<int64_t>(p.batch) * p.heads_kv * HeadDim * (keys_padded / 32);
  const int64_t blocks = (items + kLayoutThreads - 1) / kLayoutThreads;
  launch_kernel(fp8_v_layout<HeadDim>, static_cast<unsigned>(blocks < 65535 ? blocks : 65535),
                kLayoutThreads, 0, stream, p, vt, keys_padded);
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return launch_blocks<T>("cuda.flash3_fp8", flash3_fp8_forward<HeadDim>, params, stream);
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
