// cuda.flash3_fp8 and cuda.flash3_fp8_incoherent — FlashAttention-3's FP8 forward on Hopper
// (sm_90a), its first stage: one warpgroup of 64 query rows per CTA, as cuda.flash3_wg1 (issue 16).
//
// What it computes: the FP8 recipe of reference/fp8_recipe.h (each kernel declares its recipe, so
// the checker judges it by the recipe's own rows). Steps 1 and 2 are either done already (e4m3
// inputs with per-tensor descales) or done here by the passes before the forward (fp16/bf16
// inputs): an amax pass, a pass rotating (incoherent) and quantizing Q and K into packed e4m3
// copies, and the V^T layout pass quantizing V; they give the recipe's bits exactly. Then:
//   S = Q_e4m3 K_e4m3^T                  wgmma m64n128k32 e4m3, fp32 accumulators
//   s = S * descale_q * descale_k * softmax scale (folded into the online softmax's scale)
//   P = 2^((s - m) log2 e) * 256         rounded to e4m3 (P's largest value 2^8, inside 448)
//   O += P V                             wgmma m64n<d>k32 e4m3, P from registers
//   out = O * descale_v / (256 l)        e4m3 (with out_scale) or the 16-bit input type; LSE
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
// Known limits: d = head_dim_v = 128; per-tensor scales (e4m3 inputs: fp8_scaling none or
// per_tensor); e4m3 rows whose strides are multiples of 16 bytes (the TMA's rule).
#pragma once

#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/common/convert.cuh"
#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/common/ptx.cuh"
#include "kernels/cuda/common/row_stats.cuh"
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
#include "reference/fp8_scale.h"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {

// ---- the passes before the forward -------------------------------------------------------------

// One input tensor as rows of d elements, row r = (batch, token, head) in that order: the order
// of the packed e4m3 copies the quantize pass writes (Fp8PassArgs::q, ::k).
struct InputRows {
  const void* base;
  int64_t batch_stride, row_stride, head_stride;  // elements
  int64_t tokens, heads, count;

  __device__ __forceinline__ int64_t offset(int64_t row) const {
    const int64_t head = row % heads;
    const int64_t token = row / heads % tokens;
    return row / heads / tokens * batch_stride + token * row_stride + head * head_stride;
  }
};

__device__ __forceinline__ InputRows input_rows(const AttentionParams& p, int tensor) {
  if (tensor == kTensorQ) {
    return {p.q,
            p.q_batch_stride,
            p.q_row_stride,
            p.q_head_stride,
            p.seqlen_q,
            p.heads_q,
            static_cast<int64_t>(p.batch) * p.seqlen_q * p.heads_q};
  }
  const bool k = tensor == kTensorK;
  return {k ? p.k : p.v,
          k ? p.k_batch_stride : p.v_batch_stride,
          k ? p.k_row_stride : p.v_row_stride,
          k ? p.k_head_stride : p.v_head_stride,
          p.seqlen_k,
          p.heads_kv,
          static_cast<int64_t>(p.batch) * p.seqlen_k * p.heads_kv};
}

// The largest `value` of the block's threads, to every thread; the passes' blocks are
// kPassThreads. Once per kernel: a second call would need a __syncthreads before its writes.
__device__ __forceinline__ float block_max(float value) {
  static_assert(kPassThreads % 32 == 0, "whole warps");
  struct Warps {
    float value[kPassThreads / 32];
  };
  ATTNBENCH_SHARED(Warps, warps, 4);
#pragma unroll
  for (int lanes = 16; lanes > 0; lanes /= 2) {
    value = fmaxf(value, __shfl_xor_sync(gpu::kFullWarp, value, lanes));
  }
  if (threadIdx.x % 32 == 0) warps.value[threadIdx.x / 32] = value;
  __syncthreads();
  float result = warps.value[0];
#pragma unroll
  for (int w = 1; w < kPassThreads / 32; ++w) result = fmaxf(result, warps.value[w]);
  return result;
}

// The recipe's step 2 on one tensor: its amax, from the amax pass's partials, and its descale by
// the rule the recipe uses (fp8_descale, reference/fp8_scale.h).
__device__ __forceinline__ float tensor_descale(const Fp8PassArgs& args, int tensor) {
  static_assert(kAmaxBlocks <= kPassThreads, "one thread reads each partial");
  const float partial =
      threadIdx.x < kAmaxBlocks ? args.amax_partials[tensor * kAmaxBlocks + threadIdx.x] : 0.0f;
  return fp8_descale(block_max(partial));
}

// args.sign_bits[index] by selects: a parameter array indexed at run time would copy the
// whole parameter struct to local memory.
__device__ __forceinline__ uint32_t sign_word(const Fp8PassArgs& args, int index) {
  uint32_t word = args.sign_bits[0];
#pragma unroll
  for (int i = 1; i < 4; ++i) word = index == i ? args.sign_bits[i] : word;
  return word;
}

// One row of a 16-bit input after the recipe's step 1, rounded to float as the recipe keeps it:
// lane l holds channels l * d / 32 ... Rotated (Q and K when incoherent): the signs, then the
// Hadamard butterflies of reference/fp8_recipe.cpp in its order and in double (stages 1 and 2
// inside a lane, the rest across lanes), then 1 / sqrt(d); the same bits as the recipe's.
template <int HeadDim, typename Element>
__device__ __forceinline__ void prepared_row(const Element* row, bool rotate,
                                             const Fp8PassArgs& args,
                                             float (&values)[HeadDim / 32]) {
  constexpr int kPerLane = HeadDim / 32;
  static_assert(HeadDim <= 32 * 4, "sign_bits holds 128 channels");
  const int lane = static_cast<int>(threadIdx.x % 32);
  double x[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) x[j] = gpu::to_float(row[lane * kPerLane + j]);
  if (rotate) {
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int channel = lane * kPerLane + j;
      if ((sign_word(args, channel / 32) >> (channel % 32)) & 1u) x[j] = -x[j];
    }
#pragma unroll
    for (int half = 1; half < kPerLane; half *= 2) {
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        if ((j & half) == 0) {
          const double a = x[j], b = x[j + half];
          x[j] = a + b;
          x[j + half] = a - b;
        }
      }
    }
#pragma unroll
    for (int lanes = 1; lanes < 32; lanes *= 2) {
      const bool upper = (lane & lanes) != 0;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const double other = __shfl_xor_sync(gpu::kFullWarp, x[j], lanes);
        x[j] = upper ? other - x[j] : x[j] + other;
      }
    }
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) x[j] *= args.rotation_norm;
  }
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) values[j] = static_cast<float>(x[j]);
}

// A lane's values of a row times `inverse`, rounded to e4m3 (saturating), four to a word.
template <int kPerLane>
__device__ __forceinline__ void store_e4m3_row(uint8_t* out, const float (&values)[kPerLane],
                                               float inverse) {
  static_assert(kPerLane % 4 == 0, "a lane stores its e4m3 values four to a word");
  auto* words = reinterpret_cast<uint32_t*>(out);
#pragma unroll
  for (int j = 0; j < kPerLane; j += 4) {
    words[j / 4] = ptx::pack_e4m3x4(values[j] * inverse, values[j + 1] * inverse,
                                    values[j + 2] * inverse, values[j + 3] * inverse);
  }
}

// The amax pass (16-bit inputs): blockIdx.y's tensor (Q, K, V) after step 1, one warp a row;
// each block writes its largest |value| to its partial.
template <int HeadDim, typename Element>
__global__ void __launch_bounds__(kPassThreads)
    fp8_amax(const AttentionParams p, const Fp8PassArgs args) {
  const int tensor = static_cast<int>(blockIdx.y);
  const InputRows rows = input_rows(p, tensor);
  const bool rotate = args.incoherent && tensor != kTensorV;
  constexpr int kWarps = kPassThreads / 32;
  float amax = 0.0f;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; row < rows.count;
       row += static_cast<int64_t>(gridDim.x) * kWarps) {
    float values[HeadDim / 32];
    prepared_row<HeadDim>(static_cast<const Element*>(rows.base) + rows.offset(row), rotate, args,
                          values);
#pragma unroll
    for (int j = 0; j < HeadDim / 32; ++j) amax = fmaxf(amax, fabsf(values[j]));
  }
  amax = block_max(amax);
  if (threadIdx.x == 0) args.amax_partials[tensor * kAmaxBlocks + blockIdx.x] = amax;
}

// The quantize pass (16-bit inputs; blockIdx.y 0 Q, 1 K, and 2 V where V is wanted packed, as
// cuDNN takes it): step 1 again, then each value times 1 / descale rounded to e4m3 (saturating),
// into the packed copy; block 0 stores the descale (and, for V, the output scale of an e4m3
// output at V's scale).
template <int HeadDim, typename Element>
__global__ void __launch_bounds__(kPassThreads)
    fp8_quantize_rows(const AttentionParams p, const Fp8PassArgs args) {
  constexpr int kPerLane = HeadDim / 32;
  const int tensor = static_cast<int>(blockIdx.y);
  const InputRows rows = input_rows(p, tensor);
  const float descale = tensor_descale(args, tensor);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    args.descales[tensor] = descale;
    if (tensor == kTensorV) *args.output_scale = fp8_output_scale(descale);
  }
  const float inverse = 1.0f / descale;
  uint8_t* out = tensor == kTensorQ ? args.q : tensor == kTensorK ? args.k : args.v;
  const bool rotate = args.incoherent && tensor != kTensorV;
  constexpr int kWarps = kPassThreads / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; row < rows.count;
       row += static_cast<int64_t>(gridDim.x) * kWarps) {
    float values[kPerLane];
    prepared_row<HeadDim>(static_cast<const Element*>(rows.base) + rows.offset(row), rotate, args,
                          values);
    store_e4m3_row<kPerLane>(out + row * HeadDim + lane * kPerLane, values, inverse);
  }
}

// The quantize pass of per-block scales (16-bit inputs): one block per scale group of blockIdx.y's
// tensor (kFp8BlockRows tokens of one head), its rows after step 1 held in registers while the
// block finds their amax; it stores the group's descale, then rounds Q's and K's rows to e4m3
// into their packed copies (V's rows are rounded by the layout pass).
template <int HeadDim, typename Element>
__global__ void __launch_bounds__(kPassThreads)
    fp8_quantize_blocks(const AttentionParams p, const Fp8PassArgs args) {
  constexpr int kPerLane = HeadDim / 32;
  constexpr int kWarps = kPassThreads / 32;
  constexpr int kRowsPerWarp = kFp8BlockRows / kWarps;
  const int tensor = static_cast<int>(blockIdx.y);
  const InputRows rows = input_rows(p, tensor);
  const int64_t group = blockIdx.x;
  if (group >= args.groups.count(tensor)) return;  // the whole block: Q and K differ in groups
  const int64_t blocks = args.groups.blocks(rows.tokens);
  const int64_t head = group / blocks % rows.heads;
  const int64_t batch = group / blocks / rows.heads;
  const int64_t first_token = group % blocks * kFp8BlockRows;
  const int warp = static_cast<int>(threadIdx.x / 32);
  const bool rotate = args.incoherent && tensor != kTensorV;

  float values[kRowsPerWarp][kPerLane];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int64_t token = first_token + warp + kWarps * i;
    if (token >= rows.tokens) continue;  // the same for the warp's lanes
    const int64_t row = (batch * rows.tokens + token) * rows.heads + head;
    prepared_row<HeadDim>(static_cast<const Element*>(rows.base) + rows.offset(row), rotate, args,
                          values[i]);
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) amax = fmaxf(amax, fabsf(values[i][j]));
  }
  const float descale = fp8_descale(block_max(amax));
  if (threadIdx.x == 0) {
    args.descales[args.groups.index(tensor, batch, first_token, head)] = descale;
  }
  const float inverse = 1.0f / descale;
  if (tensor == kTensorV) {  // the layout pass reads it (a division there would spill)
    if (threadIdx.x == 0) args.v_inverses[group] = inverse;
    return;
  }
  uint8_t* out = tensor == kTensorQ ? args.q : args.k;
  const int lane = static_cast<int>(threadIdx.x % 32);
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int64_t token = first_token + warp + kWarps * i;
    if (token >= rows.tokens) continue;
    const int64_t row = (batch * rows.tokens + token) * rows.heads + head;
    store_e4m3_row<kPerLane>(out + row * HeadDim + lane * kPerLane, values[i], inverse);
  }
}

// The layout pass: V (batch, key, head_kv, d) into V^T (batch, head_kv, d, keys_padded) in e4m3,
// each 32 keys in v_key_of_column's order, zeros past seqlen_k; e4m3 V copied, 16-bit V
// quantized with its descale: per tensor found here from the amax partials (and stored by block
// 0), per block the inverse fp8_quantize_blocks stored (32 keys lie in one group). A tiled
// transpose through shared memory: block (x, y, z) takes keys 32 x .. 32 x + 31 of head_kv y of
// batch z, reads their rows of V whole (consecutive threads, consecutive elements of a row),
// quantizes each value once into the tile, then writes V^T's HeadDim rows of 32 bytes a 4-byte
// word per thread (consecutive threads, consecutive words). Each thread used to gather its 32
// bytes of a V^T row one element at a time from 32 rows of V, a whole row stride apart (issue 38).
constexpr int kLayoutKeys = 32;
template <int HeadDim>
constexpr int kLayoutRowBytes = HeadDim + 4;  // a key's row, padded: the write phase's column
                                              // reads (4 keys a word) spread over the banks

template <int HeadDim, typename Element>
__global__ void __launch_bounds__(kPassThreads)
    fp8_v_layout(const AttentionParams p, const Fp8PassArgs args) {
  constexpr bool kQuantizes = !std::is_same_v<Element, uint8_t>;
  constexpr int kRowBytes = kLayoutRowBytes<HeadDim>;
  using Tile = uint8_t[kLayoutKeys * kRowBytes];
  ATTNBENCH_SHARED(Tile, tile, 16);
  // A copy in registers: a member function's `this` into the parameter would put it on the stack.
  const Fp8ScaleGroups groups = args.groups;
  const bool per_block = groups.block_rows > 0;
  float tensor_inverse = 1.0f;
  if (kQuantizes && !per_block) {
    const float descale = tensor_descale(args, kTensorV);
    if (blockIdx.x == 0 && threadIdx.x == 0) args.descales[kTensorV] = descale;
    tensor_inverse = 1.0f / descale;
  }
  const int64_t first_key = static_cast<int64_t>(blockIdx.x) * kLayoutKeys;
  const int64_t head = blockIdx.y;
  const int64_t batch = blockIdx.z;
  const auto* v = static_cast<const Element*>(p.v);
  // A tile of padding (first_key >= seqlen_k) has no group: only zeros are written.
  const float inverse =
      kQuantizes && per_block && first_key < p.seqlen_k
          ? args.v_inverses[groups.index(kTensorV, batch, first_key, head) - groups.first(kTensorV)]
          : tensor_inverse;
  for (int i = static_cast<int>(threadIdx.x); i < kLayoutKeys * HeadDim; i += kPassThreads) {
    const int key_in_tile = i / HeadDim;
    const int d = i % HeadDim;
    const int64_t key = first_key + key_in_tile;
    uint8_t byte = 0;
    if (key < p.seqlen_k) {
      const Element value =
          v[batch * p.v_batch_stride + key * p.v_row_stride + head * p.v_head_stride + d];
      if constexpr (kQuantizes) {
        byte = static_cast<uint8_t>(
            ptx::pack_e4m3x4(gpu::to_float(value) * inverse, 0.0f, 0.0f, 0.0f) & 0xffu);
      } else {
        byte = value;
      }
    }
    tile[key_in_tile * kRowBytes + d] = byte;
  }
  __syncthreads();
  constexpr int kWordsPerRow = kLayoutKeys / 4;
  uint8_t* vt = args.vt + (batch * p.heads_kv + head) * HeadDim * args.keys_padded + first_key;
  for (int w = static_cast<int>(threadIdx.x); w < HeadDim * kWordsPerRow; w += kPassThreads) {
    const int d = w / kWordsPerRow;
    const int word = w % kWordsPerRow;
    uint32_t packed = 0;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      packed |= static_cast<uint32_t>(tile[v_key_of_column(4 * word + b) * kRowBytes + d])
                << (8 * b);
    }
    *reinterpret_cast<uint32_t*>(vt + d * args.keys_padded + 4 * word) = packed;
  }
}

// An e4m3 value from its bits (sign, 4 exponent bits biased by 7, 3 mantissa bits; 0x7f and 0xff
// NaN), exactly.
__device__ __forceinline__ float e4m3_value(uint8_t bits) {
  const int exponent = (bits >> 3) & 15;
  const int mantissa = bits & 7;
  const float magnitude = exponent == 15 && mantissa == 7 ? NAN
                          : exponent == 0                 ? ldexpf(static_cast<float>(mantissa), -9)
                                          : ldexpf(static_cast<float>(8 + mantissa), exponent - 10);
  return (bits & 0x80) != 0 ? -magnitude : magnitude;
}

// The dequantize pass after a forward that writes e4m3 alone (cudnn.sdpa_fp8_quantized): its
// output, packed (batch, seqlen_q, heads_q, d) and stored times *output_scale, divided back and
// rounded into params' output in its 16-bit dtype. One thread per two values of a row.
template <int HeadDim, typename Output>
__global__ void __launch_bounds__(kPassThreads)
    fp8_dequantize_output(const AttentionParams p, const uint8_t* stored,
                          const float* output_scale) {
  const float scale = *output_scale;
  const int64_t pairs = static_cast<int64_t>(p.batch) * p.seqlen_q * p.heads_q * HeadDim / 2;
  for (int64_t pair = static_cast<int64_t>(blockIdx.x) * kPassThreads + threadIdx.x; pair < pairs;
       pair += static_cast<int64_t>(gridDim.x) * kPassThreads) {
    const int64_t row = pair / (HeadDim / 2);  // (batch, token, head)
    const int64_t column = pair % (HeadDim / 2) * 2;
    const int64_t head = row % p.heads_q;
    const int64_t token = row / p.heads_q % p.seqlen_q;
    const int64_t batch = row / p.heads_q / p.seqlen_q;
    const uint8_t* in = stored + row * HeadDim + column;
    Output* out = static_cast<Output*>(p.out) + batch * p.out_batch_stride +
                  token * p.out_row_stride + head * p.out_head_stride + column;
    // The column is even: a 4-byte aligned pair.
    *reinterpret_cast<uint32_t*>(out) =
        gpu::pack_pair<Output>(e4m3_value(in[0]) / scale, e4m3_value(in[1]) / scale);
  }
}

// ---- the forward --------------------------------------------------------------------------------

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

// O * factor / l in the output's type (e4m3: two bytes, 16-bit: four, one column pair a
// store), then the LSE.
// `rows_before`: the warpgroup's first row within the block (0 for one warpgroup).
template <int HeadDim, typename Output>
__device__ __forceinline__ void store_fp8_output(const AttentionParams& p,
                                                 const BlockPosition& block, OnlineSoftmax& softmax,
                                                 const float (&o)[HeadDim / 2], float factor,
                                                 int rows_before) {
  softmax.finish();
  Output* out = static_cast<Output*>(p.out) + block.batch * p.out_batch_stride +
                block.head * p.out_head_stride;
#pragma unroll
  for (int index = 0; index < HeadDim / 2; index += 2) {
    const int r = accumulator_row(index);
    const int64_t query = block.first_row + rows_before + thread_row(r);
    if (query < p.seqlen_q) {
      const float scale = softmax.inverse_sum(r) * factor;
      Output* pair = out + query * p.out_row_stride + accumulator_column(index);
      // The column is even: an aligned pair.
      if constexpr (std::is_same_v<Output, uint8_t>) {
        const uint32_t bits = ptx::pack_e4m3x4(o[index] * scale, o[index + 1] * scale, 0.0f, 0.0f);
        *reinterpret_cast<uint16_t*>(pair) = static_cast<uint16_t>(bits);
      } else {
        *reinterpret_cast<uint32_t*>(pair) =
            gpu::pack_pair<Output>(o[index] * scale, o[index + 1] * scale);
      }
    }
  }
  store_lse(p, block, softmax, rows_before);
}

// The descale of an e4m3 input as stored: its (batch, head)'s under fp8_scaling per_head (the
// params' array), else the tensor's.
__device__ __forceinline__ float stored_descale(const float* head_descales, float tensor_descale,
                                                int batch, int head, int heads) {
  return head_descales != nullptr ? head_descales[head_descale_index(batch, head, heads)]
                                  : tensor_descale;
}

// Where a CTA's FP8 tiles lie in shared memory (Fp8Traits' and Fp8WsTraits' layout): Q, then K's
// kStages stages, then V^T's (then V's, where the forward transposes it), from the dynamic shared
// memory's start aligned up to kTileAlignment.
template <typename Traits>
struct Fp8SharedTiles {
  uint32_t q;
  __device__ __forceinline__ explicit Fp8SharedTiles(const unsigned char* dynamic_shared)
      : q(static_cast<uint32_t>((ptx::shared_address(dynamic_shared) + kTileAlignment - 1) /
                                kTileAlignment * kTileAlignment)) {}
  __device__ __forceinline__ uint32_t k_stage(int stage) const {
    return q + Traits::kQBytes + static_cast<uint32_t>(stage) * Traits::kKBytes;
  }
  __device__ __forceinline__ uint32_t vt_stage(int stage) const {
    return q + Traits::kQBytes + Traits::kStages * Traits::kKBytes +
           static_cast<uint32_t>(stage) * Traits::kVtBytes;
  }
  // V as stored, for a forward that transposes it itself (Traits::kVBytes a stage), after V^T's.
  __device__ __forceinline__ uint32_t v_stage(int stage) const {
    return q + Traits::kQBytes + Traits::kStages * (Traits::kKBytes + Traits::kVtBytes) +
           static_cast<uint32_t>(stage) * Traits::kVBytes;
  }
};

// Issued by one thread: the block's Q tile, d / 128 boxes of kBlockQ rows, completing on
// `barrier`.
template <typename Traits>
__device__ __forceinline__ void load_fp8_q(const Flash3Params& params,
                                           const Fp8SharedTiles<Traits>& tiles, uint32_t barrier,
                                           const BlockPosition& block) {
  ptx::mbarrier_arrive_expect_tx(barrier, Traits::kQBytes);
#pragma unroll
  for (int box = 0; box < Traits::kBoxes; ++box) {
    ptx::tma_load_4d(tiles.q + static_cast<uint32_t>(box * Traits::kBlockQ * kSwizzleBytes),
                     &params.q_map, barrier, box * kSwizzleBytes, block.first_row, block.head,
                     block.batch);
  }
}

// Issued by one thread, the key tile at `key` into `stage`, completing on `barrier` (whose
// expected bytes the caller has set): K's d / 128 boxes of kBlockK rows, V^T's one box of d rows
// x kBlockK keys.
template <typename Traits>
__device__ __forceinline__ void issue_fp8_k(const Flash3Params& params,
                                            const Fp8SharedTiles<Traits>& tiles, int stage,
                                            uint32_t barrier, int key, const BlockPosition& block) {
#pragma unroll
  for (int box = 0; box < Traits::kBoxes; ++box) {
    ptx::tma_load_4d(
        tiles.k_stage(stage) + static_cast<uint32_t>(box * Traits::kBlockK * kSwizzleBytes),
        &params.k_map, barrier, box * kSwizzleBytes, key, block.head_kv, block.batch);
  }
}
template <typename Traits>
__device__ __forceinline__ void issue_fp8_vt(const Flash3Params& params,
                                             const Fp8SharedTiles<Traits>& tiles, int stage,
                                             uint32_t barrier, int key,
                                             const BlockPosition& block) {
  ptx::tma_load_4d(tiles.vt_stage(stage), &params.v_map, barrier, key, 0, block.head_kv,
                   block.batch);
}

// Issued by one thread: the key tile's K and V^T into `stage`, both completing on `barrier`
// (cuda.flash3_fp8's ring); or one of them on a barrier of its own (cuda.flash3_fp8_ws's rings).
template <typename Traits>
__device__ __forceinline__ void load_fp8_kv(const Flash3Params& params,
                                            const Fp8SharedTiles<Traits>& tiles, int stage,
                                            uint32_t barrier, int key, const BlockPosition& block) {
  ptx::mbarrier_arrive_expect_tx(barrier, Traits::kKBytes + Traits::kVtBytes);
  issue_fp8_k(params, tiles, stage, barrier, key, block);
  issue_fp8_vt(params, tiles, stage, barrier, key, block);
}
template <typename Traits>
__device__ __forceinline__ void load_fp8_k(const Flash3Params& params,
                                           const Fp8SharedTiles<Traits>& tiles, int stage,
                                           uint32_t barrier, int key, const BlockPosition& block) {
  ptx::mbarrier_arrive_expect_tx(barrier, Traits::kKBytes);
  issue_fp8_k(params, tiles, stage, barrier, key, block);
}
template <typename Traits>
__device__ __forceinline__ void load_fp8_vt(const Flash3Params& params,
                                            const Fp8SharedTiles<Traits>& tiles, int stage,
                                            uint32_t barrier, int key, const BlockPosition& block) {
  ptx::mbarrier_arrive_expect_tx(barrier, Traits::kVtBytes);
  issue_fp8_vt(params, tiles, stage, barrier, key, block);
}

// The descales a CTA applies once. The scores are products of e4m3 values: Q's descale, and K's
// when it is per tensor, join the softmax's scale (p.scale, p.scale_log2); per-block K and V
// descales are applied per key tile (fp8_tile_output). Returns V's descale, which the output
// takes (1 for per-block scales). `descales`, `groups`: as flash3_fp8_forward's.
template <bool kBlockScales>
__device__ __forceinline__ float apply_fp8_descales(AttentionParams& p, const BlockPosition& block,
                                                    const float* descales,
                                                    const Fp8ScaleGroups& groups) {
  const float q_descale =
      kBlockScales ? descales[groups.index(kTensorQ, block.batch, block.first_row, block.head)]
      : descales != nullptr
          ? descales[kTensorQ]
          : stored_descale(p.q_head_descales, p.q_descale, block.batch, block.head, p.heads_q);
  const float k_descale =
      kBlockScales ? 1.0f
      : descales != nullptr
          ? descales[kTensorK]
          : stored_descale(p.k_head_descales, p.k_descale, block.batch, block.head_kv, p.heads_kv);
  const float v_descale =
      kBlockScales ? 1.0f
      : descales != nullptr
          ? descales[kTensorV]
          : stored_descale(p.v_head_descales, p.v_descale, block.batch, block.head_kv, p.heads_kv);
  const float qk_descale = q_descale * k_descale;
  p.scale *= qk_descale;
  p.scale_log2 *= qk_descale;
  return v_descale;
}

// S = Q K^T for a warpgroup's 64 query rows (`q_rows`, inside boxes of `q_box_rows` rows) and one
// key tile of BlockK keys: one wgmma m64n<BlockK>k32 per 32 of d, both operands in shared memory,
// issued and committed; fp8_scores also waits for it.
template <int HeadDim, int BlockK>
__device__ __forceinline__ void issue_fp8_scores(float (&s)[BlockK / 2], uint32_t q_rows,
                                                 int q_box_rows, uint32_t k_tile) {
  ptx::wgmma_fence();
#pragma unroll
  for (int step = 0; step < HeadDim / kFp8StepElements; ++step) {
    ptx::wgmma_ss<BlockK, ptx::E4m3, false>(s, fp8_k_major_step(q_rows, q_box_rows, step),
                                            fp8_k_major_step(k_tile, BlockK, step), step > 0);
  }
  ptx::wgmma_commit();
}
template <int HeadDim, int BlockK>
__device__ __forceinline__ void fp8_scores(float (&s)[BlockK / 2], uint32_t q_rows, int q_box_rows,
                                           uint32_t k_tile) {
  issue_fp8_scores<HeadDim, BlockK>(s, q_rows, q_box_rows, k_tile);
  ptx::wgmma_wait<0>();
  ptx::wgmma_fence_operand(s);
}

// O += P V for one key tile, committed and not waited for: one wgmma m64n<d>k32 per 32 keys, P
// from registers (e4m3 A fragments), V^T K-major at `vt_tile`.
template <int HeadDim, int BlockK>
__device__ __forceinline__ void issue_fp8_output(float (&o)[HeadDim / 2],
                                                 const uint32_t (&p)[BlockK / kFp8StepElements][4],
                                                 uint32_t vt_tile) {
  ptx::wgmma_fence();
  ptx::wgmma_fence_operand(o);
#pragma unroll
  for (int step = 0; step < BlockK / kFp8StepElements; ++step) {
    ptx::wgmma_rs<HeadDim, ptx::E4m3, false>(o, p[step], fp8_k_major_step(vt_tile, HeadDim, step),
                                             true);
  }
  ptx::wgmma_commit();
}

// One key tile after its scores: per-block K descale, mask, online softmax (O rescaled), P to
// e4m3, then O += P V, one wgmma m64n<d>k32 per 32 keys (V^T K-major at `vt_tile`), waited for.
// Per-block scales: the tile's P V into registers of its own, then into O times the tile's V
// descale.
template <int HeadDim, int BlockK, bool kBlockScales>
__device__ __forceinline__ void fp8_tile_output(float (&s)[BlockK / 2], float (&o)[HeadDim / 2],
                                                OnlineSoftmax& softmax, const KeyTiles& keys,
                                                int first_key, uint32_t vt_tile,
                                                const BlockPosition& block, const float* descales,
                                                const Fp8ScaleGroups& groups) {
  if constexpr (kBlockScales) {
    const float k_tile_descale =
        descales[groups.index(kTensorK, block.batch, first_key, block.head_kv)];
#pragma unroll
    for (int i = 0; i < BlockK / 2; ++i) s[i] *= k_tile_descale;
  }
  if (keys.visible.needs_mask(first_key, BlockK)) softmax.mask(s, first_key);
  softmax.update(s, o);
  uint32_t p_fragments[BlockK / kFp8StepElements][4];
  probabilities_as_e4m3(s, p_fragments);
  if constexpr (kBlockScales) {
    float o_tile[HeadDim / 2];
    ptx::wgmma_fence();
#pragma unroll
    for (int step = 0; step < BlockK / kFp8StepElements; ++step) {
      ptx::wgmma_rs<HeadDim, ptx::E4m3, false>(o_tile, p_fragments[step],
                                               fp8_k_major_step(vt_tile, HeadDim, step), step > 0);
    }
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
    ptx::wgmma_fence_operand(o_tile);
    const float v_tile_descale =
        descales[groups.index(kTensorV, block.batch, first_key, block.head_kv)];
#pragma unroll
    for (int i = 0; i < HeadDim / 2; ++i) o[i] += v_tile_descale * o_tile[i];
  } else {
    issue_fp8_output<HeadDim, BlockK>(o, p_fragments, vt_tile);
    ptx::wgmma_wait<0>();
    ptx::wgmma_fence_operand(o);
  }
}

// O holds sum P * 256 * v_e4m3: out = O * descale_v / (256 l), and an e4m3 output times its
// out_scale (as the recipe rounds it).
template <typename Output>
__device__ __forceinline__ float fp8_output_factor(const AttentionParams& p, float v_descale) {
  const float out_scale = std::is_same_v<Output, uint8_t> ? p.out_scale : 1.0f;
  return v_descale / kFp8PScale * out_scale;
}

// Output: e4m3's bits (uint8_t) for e4m3 inputs, else the 16-bit input type. `descales`: those
// the passes stored for 16-bit inputs, found through `groups`; null for e4m3 inputs, whose
// descales are the params' (per tensor, or per (batch, head)). kBlockScales: per-block descales
// (kFp8BlockRows tokens, one key tile): Q's is the CTA's, K's and V's change with each key tile.
template <int HeadDim, typename Output, bool kBlockScales>
__global__ void __launch_bounds__(kWarpgroupThreads, 1)
    flash3_fp8_forward(const __grid_constant__ Flash3Params params, const float* descales,
                       const Fp8ScaleGroups groups) {
  using T = Fp8Traits<HeadDim>;
  static_assert(!kBlockScales || kFp8BlockRows == T::kBlockK, "one K and V descale a key tile");
  AttentionParams p = params.attention;
  const BlockPosition block = block_position(p, T::kBlockQ);
  const float v_descale = apply_fp8_descales<kBlockScales>(p, block, descales, groups);
  struct Barriers {
    uint64_t q_full;
    uint64_t kv_full[T::kStages];
  };
  ATTNBENCH_SHARED(Barriers, barriers, 8);
  ATTNBENCH_DYNAMIC_SHARED(shared_bytes, 16);
  const Fp8SharedTiles<T> tiles(shared_bytes);
  const uint32_t q_full = ptx::shared_address(&barriers.q_full);
  const auto kv_full = [&](int stage) { return ptx::shared_address(&barriers.kv_full[stage]); };

  const KeyTiles keys = key_tiles(p, block, T::kBlockK);
  const int tile_count = keys.count;
  const auto load_kv = [&](int stage, int tile) {
    load_fp8_kv(params, tiles, stage, kv_full(stage), keys.key_of(tile, T::kBlockK), block);
  };

  if (threadIdx.x == 0) {
    ptx::mbarrier_init(q_full, 1);
    for (int stage = 0; stage < T::kStages; ++stage) ptx::mbarrier_init(kv_full(stage), 1);
    ptx::fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x == 0 && tile_count > 0) {
    load_fp8_q(params, tiles, q_full, block);
    for (int stage = 0; stage < T::kStages && stage < tile_count; ++stage) load_kv(stage, stage);
  }

  OnlineSoftmax softmax(p, block);
  float o[HeadDim / 2] = {};
  if (tile_count > 0) ptx::mbarrier_wait(q_full, 0);

  for (int iteration = 0; iteration < tile_count; ++iteration) {
    const int stage = iteration % T::kStages;
    const int first_key = keys.key_of(iteration, T::kBlockK);
    ptx::mbarrier_wait(kv_full(stage), static_cast<unsigned>(iteration / T::kStages) % 2);
    float s[T::kBlockK / 2];
    fp8_scores<HeadDim, T::kBlockK>(s, tiles.q, T::kBlockQ, tiles.k_stage(stage));
    fp8_tile_output<HeadDim, T::kBlockK, kBlockScales>(
        s, o, softmax, keys, first_key, tiles.vt_stage(stage), block, descales, groups);

    // Every warp has waited for its wgmma on this stage: thread 0 may refill it.
    __syncthreads();
    if (threadIdx.x == 0 && iteration + T::kStages < tile_count) {
      load_kv(stage, iteration + T::kStages);
    }
  }
  store_fp8_output<HeadDim, Output>(p, block, softmax, o, fp8_output_factor<Output>(p, v_descale),
                                    0);
}

// ---- launch -------------------------------------------------------------------------------------

// A pass's grid: blocks of kPassThreads for `items` threads' work, at most 65535 (the passes loop).
inline unsigned blocks_for(int64_t items) {
  const int64_t blocks = (items + kPassThreads - 1) / kPassThreads;
  return static_cast<unsigned>(blocks < 65535 ? blocks : 65535);
}

// The per-tensor passes on 16-bit inputs: the amax pass over Q, K and V, then the quantize pass
// over the first `tensors` of them (2: Q and K, V going to the layout pass; 3: V packed too).
template <int HeadDim, typename Element>
Status launch_amax_and_quantize(const AttentionParams& p, const Fp8PassArgs& args, unsigned tensors,
                                cudaStream_t stream) {
  launch_kernel(fp8_amax<HeadDim, Element>, dim3(kAmaxBlocks, 3), kPassThreads, 0, stream, p, args);
  ATTNBENCH_CUDA_TRY_LAUNCH();
  // One warp a row of Q, K or V.
  const int64_t q_rows = static_cast<int64_t>(p.batch) * p.seqlen_q * p.heads_q;
  const int64_t k_rows = static_cast<int64_t>(p.batch) * p.seqlen_k * p.heads_kv;
  const int64_t rows = q_rows > k_rows ? q_rows : k_rows;
  launch_kernel(fp8_quantize_rows<HeadDim, Element>, dim3(blocks_for(rows * 32), tensors),
                kPassThreads, 0, stream, p, args);
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return Status::Ok();
}

// The passes before the forward: on 16-bit inputs those finding the descales and quantizing Q and
// K (per tensor: the amax pass, then the quantize pass; per block: one pass), then, on every
// input, the V^T layout pass.
template <int HeadDim, DType kInput>
Status launch_fp8_passes(const AttentionParams& p, const Fp8PassArgs& args, cudaStream_t stream) {
  using Element = typename gpu::ElementOf<kInput>::type;
  if constexpr (kInput != DType::e4m3) {
    if (args.groups.block_rows > 0) {
      const int64_t groups = args.groups.count(kTensorQ) > args.groups.count(kTensorK)
                                 ? args.groups.count(kTensorQ)
                                 : args.groups.count(kTensorK);
      launch_kernel(fp8_quantize_blocks<HeadDim, Element>, dim3(static_cast<unsigned>(groups), 3),
                    kPassThreads, 0, stream, p, args);
      ATTNBENCH_CUDA_TRY_LAUNCH();
    } else if (Status status = launch_amax_and_quantize<HeadDim, Element>(p, args, 2, stream);
               !status) {
      return status;
    }
  }
  if (p.heads_kv > 65535 || p.batch > 65535) {  // the layout pass's grid: y and z
    return Status::Error(
        "cuda.flash3_fp8: the V^T layout pass takes at most 65535 batches and "
        "key/value heads");
  }
  const dim3 tiles(static_cast<unsigned>(args.keys_padded / kLayoutKeys),
                   static_cast<unsigned>(p.heads_kv), static_cast<unsigned>(p.batch));
  launch_kernel(fp8_v_layout<HeadDim, Element>, tiles, kPassThreads, 0, stream, p, args);
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return Status::Ok();
}

template <int HeadDim, DType kInput>
Status launch_fp8_quantize(const AttentionParams& p, const Fp8PassArgs& args, cudaStream_t stream) {
  static_assert(kInput != DType::e4m3, "16-bit inputs: e4m3 ones are quantized already");
  using Element = typename gpu::ElementOf<kInput>::type;
  return launch_amax_and_quantize<HeadDim, Element>(p, args, 3, stream);
}

template <int HeadDim, DType kOutput>
Status launch_fp8_dequantize_output(const AttentionParams& p, const uint8_t* stored,
                                    const float* output_scale, cudaStream_t stream) {
  using Output = typename gpu::ElementOf<kOutput>::type;
  const int64_t pairs = static_cast<int64_t>(p.batch) * p.seqlen_q * p.heads_q * HeadDim / 2;
  launch_kernel(fp8_dequantize_output<HeadDim, Output>, blocks_for(pairs), kPassThreads, 0, stream,
                p, stored, output_scale);
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return Status::Ok();
}

// The passes, then `Forward<kBlockScales>` (a forward kernel template of Traits' shape) with the
// descales it reads: the passes' for 16-bit inputs, the params' (null here) for e4m3 inputs.
template <int HeadDim, DType kInput, typename Traits, typename PerTensorKernel,
          typename PerBlockKernel>
Status launch_fp8_forward(const char* name, PerTensorKernel per_tensor, PerBlockKernel per_block,
                          const Flash3Params& params, const Fp8PassArgs& args,
                          cudaStream_t stream) {
  if (Status status = launch_fp8_passes<HeadDim, kInput>(params.attention, args, stream); !status) {
    return status;
  }
  if constexpr (kInput == DType::e4m3) {
    (void)per_block;
    return launch_blocks<Traits>(name, per_tensor, params, stream,
                                 static_cast<const float*>(nullptr), args.groups);
  } else {
    const auto* descales = static_cast<const float*>(args.descales);
    if (args.groups.block_rows > 0) {
      return launch_blocks<Traits>(name, per_block, params, stream, descales, args.groups);
    }
    return launch_blocks<Traits>(name, per_tensor, params, stream, descales, args.groups);
  }
}

template <int HeadDim, DType kInput>
Status launch_flash3_fp8(const Flash3Params& params, const Fp8PassArgs& args, cudaStream_t stream) {
  using Element = typename gpu::ElementOf<kInput>::type;
  return launch_fp8_forward<HeadDim, kInput, Fp8Traits<HeadDim>>(
      "cuda.flash3_fp8", flash3_fp8_forward<HeadDim, Element, false>,
      flash3_fp8_forward<HeadDim, Element, kInput != DType::e4m3>, params, args, stream);
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
