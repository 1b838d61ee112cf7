// cuda.flash1 — the FlashAttention-1 algorithm (Dao et al. 2022, Algorithm 1) on CUDA cores.
//
// What it computes: out = softmax(scale * Q K^T, masked) V without materializing the scores.
// FA1's loop order: the OUTER loop runs over K/V blocks j, here one launch per block (flash1.h,
// launch_count); inside a launch, every (batch, query head, query tile i) block loads K_j, V_j
// and Q_i into shared memory, reads the running state of its rows — O_i (unnormalized, fp32),
// l_i (sum) and m_i (max) — from device memory, updates it with the 64 x 64 score tile, and
// writes it back for the next launch. The last launch normalizes (out = O / l, rounded once to
// the output dtype) and writes LSE = ln 2 * (m + log2 l). The state lives in the plan's scratch:
// b * hq * sq * (dv + 2) fp32, flat in seqlen_k.
// Against the previous version (cuda.naive): no score matrix in memory; the price is O's round
// trip through device memory once per K/V block, which FlashAttention-2 removes by swapping the
// loops (cuda.flash2).
// Numerics: scores, P and O in fp32 (P is never rounded), exp2 with scale * log2(e) folded into
// the scores, online rescaling by 2^(m_old - m_new). Masks exactly as reference/mask.h: a key is
// kept iff begin <= key < end of its row's visible_keys, so keys past seqlen_k (the zero-filled
// tail of the last K/V tile) are -inf, never a score of 0. A row whose keys are all masked so far
// uses 0 as its max (FA2's trick), so 2^(-inf - 0) = 0 and no -inf - -inf NaN appears; a row with
// no visible key ends with l = 0 and writes out = 0, LSE = -inf.
// Tile skipping: a block whose rows see no key of the launch's K/V block (visible_tiles.h) does
// nothing, except in the first launch (it writes the initial state) and the last (it finalizes).
// Deterministic: each block owns its rows' state; launches are ordered by the stream.
// Performance: not yet measured on a GPU.
// Limits: head dims 64 and 128 (head_dim_v = head_dim_qk), fp16/bf16; q, k, v, out 16-byte
// aligned (every layout the harness builds is); seqlen_k / 64 launches per forward.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "kernels/cuda/common/convert.cuh"
#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/common/row_stats.cuh"
#include "kernels/cuda/common/shared.cuh"
#include "kernels/cuda/common/visible_tiles.h"
#include "kernels/cuda/flash1.h"
#include "reference/mask.h"

namespace attnbench::gpu::flash1 {
inline namespace ATTNBENCH_TARGET {
namespace detail {

// ---- traits -------------------------------------------------------------------------------------

constexpr float kLn2 = 0.693147180559945309f;
constexpr int64_t kMaxGridBlocks = std::numeric_limits<int32_t>::max();  // gridDim.x
constexpr int kDefaultSharedBytes = 48 * 1024;  // above it, a kernel must opt in

template <int kHeadDim, DType kInput>
struct Traits {
  using Element = typename ElementOf<kInput>::type;
  using ElementPair = typename ElementOf<kInput>::pair;

  // 256 threads as a 16 x 16 grid: thread (ty, tx) owns query rows ty + 16 a (a < 4), keys
  // tx + 16 c (c < 4) of the score tile, and output column pairs 2 tx + 32 c of its rows.
  static constexpr int kThreadsPerSide = 16;
  static constexpr int kThreads = kThreadsPerSide * kThreadsPerSide;
  static constexpr int kRowsPerThread = kBlockQ / kThreadsPerSide;
  static constexpr int kKeysPerThread = kBlockK / kThreadsPerSide;
  static constexpr int kColumnPairsPerThread = kHeadDim / (2 * kThreadsPerSide);
  // At most 128 registers a thread, so two blocks always fit an SM's register file.
  static constexpr int kMinBlocksPerSm = 2;

  // Shared tiles: Q (kBlockQ rows), K and V (kBlockK rows), each row kHeadDim elements plus one
  // pair of padding: a row stride of kHeadDim / 2 + 1 words (odd) puts the 16 threads reading
  // 16 different K rows at one column on 16 different banks.
  static constexpr int kRowStride = kHeadDim + 2;  // elements
  // P tile in fp32, rows padded by 16 floats: the two half-warps of a warp (rows r and r + 1)
  // then write and read disjoint bank halves.
  static constexpr int kProbabilityStride = kBlockK + 16;  // floats
  static constexpr int kTileElements = kBlockQ * kRowStride;
  static constexpr int kSharedBytes =
      static_cast<int>((kBlockQ + 2 * kBlockK) * kRowStride * sizeof(Element) +
                       kBlockQ * kProbabilityStride * sizeof(float));
  // Global loads move 16 bytes (8 elements); shared stores go word by word (rows are padded to
  // an odd number of words, so only 4-byte alignment holds there).
  static constexpr int kVectorElements = 16 / static_cast<int>(sizeof(Element));
  static constexpr int kVectorsPerRow = kHeadDim / kVectorElements;

  static_assert(kHeadDim == 64 || kHeadDim == 128, "cuda.flash1 instantiates head dims 64 and 128");
  static_assert(kBlockQ % kThreadsPerSide == 0 && kBlockK % kThreadsPerSide == 0,
                "each thread owns whole rows and keys of the score tile");
  static_assert(2 * kThreadsPerSide == kWarpSize,
                "a query row's 16 threads must be one half-warp (shuffle reductions, __syncwarp "
                "before reading P)");
  static_assert(kHeadDim % (2 * kThreadsPerSide) == 0, "output column pairs split evenly");
  static_assert((kRowStride / 2) % 2 == 1, "an odd word stride keeps K-row reads conflict-free");
  static_assert(kHeadDim % kVectorElements == 0, "rows load as whole 16-byte vectors");
  static_assert((kBlockQ + 2 * kBlockK) * kRowStride * sizeof(Element) % 16 == 0,
                "the P tile must start 16-byte aligned");
  static_assert(kSharedBytes <= 99 * 1024,
                "two blocks per SM must fit an A100's 164 KiB of shared memory");
};

// ---- device helpers -----------------------------------------------------------------------------

// Copies `rows` rows of kHeadDim elements (row stride `stride` in global memory) into a shared
// tile of kRowStride-element rows; rows at or past `valid_rows` become zeros.
template <typename T>
__device__ void load_tile(typename T::Element* tile, const typename T::Element* source,
                          int64_t stride, int rows, int64_t valid_rows) {
  for (int item = static_cast<int>(threadIdx.x); item < rows * T::kVectorsPerRow;
       item += T::kThreads) {
    const int r = item / T::kVectorsPerRow;
    const int column = (item % T::kVectorsPerRow) * T::kVectorElements;
    uint4 vector = {0u, 0u, 0u, 0u};
    if (r < valid_rows) vector = *reinterpret_cast<const uint4*>(source + r * stride + column);
    uint32_t* destination = reinterpret_cast<uint32_t*>(tile + r * T::kRowStride + column);
    destination[0] = vector.x;
    destination[1] = vector.y;
    destination[2] = vector.z;
    destination[3] = vector.w;
  }
}

// ---- kernel -------------------------------------------------------------------------------------

// One launch = one K/V block; block = (pair, query tile), query tile fastest.
template <int kHeadDim, DType kInput>
__global__ void __launch_bounds__(Traits<kHeadDim, kInput>::kThreads,
                                  Traits<kHeadDim, kInput>::kMinBlocksPerSm)
    flash1_kv_block_kernel(const __grid_constant__ AttentionParams p, const State state,
                           const int kv_block) {
  using T = Traits<kHeadDim, kInput>;
  using Element = typename T::Element;
  using ElementPair = typename T::ElementPair;
  constexpr int kSide = T::kThreadsPerSide;

  ATTNBENCH_DYNAMIC_SHARED(shared_bytes, 16);
  Element* q_tile = reinterpret_cast<Element*>(shared_bytes);  // (kBlockQ, kRowStride)
  Element* k_tile = q_tile + kBlockQ * T::kRowStride;          // (kBlockK, kRowStride)
  Element* v_tile = k_tile + kBlockK * T::kRowStride;          // (kBlockK, kRowStride)
  float* p_tile = reinterpret_cast<float*>(v_tile + kBlockK * T::kRowStride);  // (kBlockQ, 80)

  const int64_t sq = p.seqlen_q;
  const int64_t sk = p.seqlen_k;
  // 32-bit decoding (the launch checks the grid fits an int): a 64-bit division would be a
  // subroutine call.
  const int query_tiles = static_cast<int>(tile_count(sq, kBlockQ));
  const int pair = static_cast<int>(blockIdx.x) / query_tiles;
  const int batch = pair / p.heads_q;
  const int head = pair % p.heads_q;
  const int kv_head = head / p.heads_per_kv;
  const int64_t row0 = static_cast<int64_t>(static_cast<int>(blockIdx.x) % query_tiles) * kBlockQ;
  const int64_t row_end = row0 + kBlockQ < sq ? row0 + kBlockQ : sq;
  const int64_t key0 = static_cast<int64_t>(kv_block) * kBlockK;
  const int64_t key_end = key0 + kBlockK < sk ? key0 + kBlockK : sk;
  const bool first = kv_block == 0;
  const bool last = kv_block == tile_count(sk, kBlockK) - 1;
  const int64_t key_length = p.key_lengths != nullptr ? p.key_lengths[batch] : sk;

  // Block-uniform: the early return comes before every barrier.
  const bool sees_keys = overlaps(visible_keys_of_rows(p.mask, p.window_left, p.window_right, row0,
                                                       row_end, sq, sk, key_length),
                                  key0, key_end);
  if (!sees_keys && !first && !last) return;  // this K/V block leaves the rows' state as it is

  const int tx = static_cast<int>(threadIdx.x) % kSide;
  const int ty = static_cast<int>(threadIdx.x) / kSide;

  // This thread's rows: their visible keys (empty past seqlen_q) and running state.
  // int: seqlens are int in AttentionParams, and 12 64-bit values would cost 12 more registers.
  int rows[T::kRowsPerThread];
  int key_begin[T::kRowsPerThread];
  int key_stop[T::kRowsPerThread];
  float row_max[T::kRowsPerThread];                         // m, log2 units
  float row_sum[T::kRowsPerThread];                         // l
  float2 acc[T::kRowsPerThread][T::kColumnPairsPerThread];  // O, unnormalized
#pragma unroll
  for (int a = 0; a < T::kRowsPerThread; ++a) {
    rows[a] = static_cast<int>(row0) + ty + kSide * a;
    const bool inside = rows[a] < sq;
    const KeyRange keys =
        inside ? visible_keys(p.mask, p.window_left, p.window_right, rows[a], sq, sk, key_length)
               : KeyRange{0, 0};
    key_begin[a] = static_cast<int>(keys.begin);
    key_stop[a] = static_cast<int>(keys.end);
    row_max[a] = kNegInf;
    row_sum[a] = 0.0f;
#pragma unroll
    for (int c = 0; c < T::kColumnPairsPerThread; ++c) acc[a][c] = {0.0f, 0.0f};
    if (!first && inside) {
      const int64_t index = static_cast<int64_t>(pair) * sq + rows[a];
      row_max[a] = state.max[index];
      row_sum[a] = state.sum[index];
      const float2* out_state = reinterpret_cast<const float2*>(state.out + index * kHeadDim);
#pragma unroll
      for (int c = 0; c < T::kColumnPairsPerThread; ++c) acc[a][c] = out_state[tx + kSide * c];
    }
  }

  if (sees_keys) {
    // Q_i, K_j, V_j; rows past seqlen_q / seqlen_k are zeros (the mask drops their keys).
    const Element* q = static_cast<const Element*>(p.q) + batch * p.q_batch_stride +
                       head * p.q_head_stride + row0 * p.q_row_stride;
    const Element* k = static_cast<const Element*>(p.k) + batch * p.k_batch_stride +
                       kv_head * p.k_head_stride + key0 * p.k_row_stride;
    const Element* v = static_cast<const Element*>(p.v) + batch * p.v_batch_stride +
                       kv_head * p.v_head_stride + key0 * p.v_row_stride;
    load_tile<T>(q_tile, q, p.q_row_stride, kBlockQ, row_end - row0);
    load_tile<T>(k_tile, k, p.k_row_stride, kBlockK, key_end - key0);
    load_tile<T>(v_tile, v, p.v_row_stride, kBlockK, key_end - key0);
    __syncthreads();

    // S = Q_i K_j^T, this thread's 4 x 4.
    float scores[T::kRowsPerThread][T::kKeysPerThread] = {};
#pragma unroll 4
    for (int d = 0; d < kHeadDim; d += 2) {
      float2 q_pairs[T::kRowsPerThread];
      float2 k_pairs[T::kKeysPerThread];
#pragma unroll
      for (int a = 0; a < T::kRowsPerThread; ++a) {
        q_pairs[a] = widen(
            *reinterpret_cast<const ElementPair*>(q_tile + (ty + kSide * a) * T::kRowStride + d));
      }
#pragma unroll
      for (int c = 0; c < T::kKeysPerThread; ++c) {
        k_pairs[c] = widen(
            *reinterpret_cast<const ElementPair*>(k_tile + (tx + kSide * c) * T::kRowStride + d));
      }
#pragma unroll
      for (int a = 0; a < T::kRowsPerThread; ++a) {
#pragma unroll
        for (int c = 0; c < T::kKeysPerThread; ++c) {
          scores[a][c] = fmaf(q_pairs[a].x, k_pairs[c].x, scores[a][c]);
          scores[a][c] = fmaf(q_pairs[a].y, k_pairs[c].y, scores[a][c]);
        }
      }
    }

    // Online softmax per row: mask, new max, rescale the state, P = 2^(s - m) into shared.
#pragma unroll
    for (int a = 0; a < T::kRowsPerThread; ++a) {
      float tile_max = kNegInf;
#pragma unroll
      for (int c = 0; c < T::kKeysPerThread; ++c) {
        const int key = static_cast<int>(key0) + tx + kSide * c;
        const bool visible = key >= key_begin[a] && key < key_stop[a];
        scores[a][c] = visible ? scores[a][c] * p.scale_log2 : kNegInf;
        tile_max = fmaxf(tile_max, scores[a][c]);
      }
      const float new_max = fmaxf(row_max[a], half_warp_max(tile_max));
      // Nothing visible yet: subtract 0, so 2^(-inf - 0) = 0 instead of 2^(-inf + inf) = NaN.
      const float subtrahend = exponent_base(new_max);
      const float rescale = exp2f(row_max[a] - subtrahend);
      float tile_sum = 0.0f;
#pragma unroll
      for (int c = 0; c < T::kKeysPerThread; ++c) {
        const float probability = exp2f(scores[a][c] - subtrahend);
        tile_sum += probability;
        p_tile[(ty + kSide * a) * T::kProbabilityStride + tx + kSide * c] = probability;
      }
      row_sum[a] = row_sum[a] * rescale + half_warp_sum(tile_sum);
      row_max[a] = new_max;
#pragma unroll
      for (int c = 0; c < T::kColumnPairsPerThread; ++c) {
        acc[a][c].x *= rescale;
        acc[a][c].y *= rescale;
      }
    }
    // A row of P is written and read by the same half-warp: a warp barrier orders it.
    __syncwarp();

    // O_i += P V_j over the block's keys (P = 0 past seqlen_k, where V is zeros too).
#pragma unroll 4
    for (int j = 0; j < kBlockK; ++j) {
      float probabilities[T::kRowsPerThread];
#pragma unroll
      for (int a = 0; a < T::kRowsPerThread; ++a) {
        probabilities[a] = p_tile[(ty + kSide * a) * T::kProbabilityStride + j];
      }
#pragma unroll
      for (int c = 0; c < T::kColumnPairsPerThread; ++c) {
        const float2 values = widen(*reinterpret_cast<const ElementPair*>(
            v_tile + j * T::kRowStride + 2 * (tx + kSide * c)));
#pragma unroll
        for (int a = 0; a < T::kRowsPerThread; ++a) {
          acc[a][c].x = fmaf(probabilities[a], values.x, acc[a][c].x);
          acc[a][c].y = fmaf(probabilities[a], values.y, acc[a][c].y);
        }
      }
    }
  }

#pragma unroll
  for (int a = 0; a < T::kRowsPerThread; ++a) {
    if (rows[a] >= sq) continue;
    const int64_t index = static_cast<int64_t>(pair) * sq + rows[a];
    if (last) {
      // l = 0: no visible key in the whole row; out = 0 and LSE = -inf, never NaN.
      const float inverse_sum = inverse_row_sum(row_sum[a]);
      Element* out = static_cast<Element*>(p.out) + batch * p.out_batch_stride +
                     rows[a] * p.out_row_stride + head * p.out_head_stride;
#pragma unroll
      for (int c = 0; c < T::kColumnPairsPerThread; ++c) {
        const float2 normalized = {acc[a][c].x * inverse_sum, acc[a][c].y * inverse_sum};
        *reinterpret_cast<ElementPair*>(out + 2 * (tx + kSide * c)) = narrow(normalized, Element{});
      }
      if (p.lse != nullptr && tx == 0) {
        p.lse[index] = row_lse(row_max[a] * kLn2, row_sum[a]);  // row_max is in base 2
      }
    } else {
      if (tx == 0) {
        state.max[index] = row_max[a];
        state.sum[index] = row_sum[a];
      }
      float2* out_state = reinterpret_cast<float2*>(state.out + index * kHeadDim);
#pragma unroll
      for (int c = 0; c < T::kColumnPairsPerThread; ++c) out_state[tx + kSide * c] = acc[a][c];
    }
  }
}

}  // namespace detail

// ---- launch -------------------------------------------------------------------------------------

template <int kHeadDim, DType kInput>
Status Instance<kHeadDim, kInput>::configure() {
  using T = detail::Traits<kHeadDim, kInput>;
  if (T::kSharedBytes > detail::kDefaultSharedBytes) {
    ATTNBENCH_CUDA_TRY(
        allow_dynamic_shared(detail::flash1_kv_block_kernel<kHeadDim, kInput>, T::kSharedBytes));
  }
  return Status::Ok();
}

template <int kHeadDim, DType kInput>
Status Instance<kHeadDim, kInput>::launch(const AttentionParams& params, const State& state,
                                          int64_t kv_block, cudaStream_t stream) {
  using T = detail::Traits<kHeadDim, kInput>;
  const int64_t blocks =
      static_cast<int64_t>(params.batch) * params.heads_q * tile_count(params.seqlen_q, kBlockQ);
  if (blocks > detail::kMaxGridBlocks) {
    return Status::Error("cuda.flash1: " + std::to_string(blocks) +
                         " blocks exceed one launch's grid");
  }
  launch_kernel(detail::flash1_kv_block_kernel<kHeadDim, kInput>, static_cast<unsigned>(blocks),
                T::kThreads, T::kSharedBytes, stream, params, state, static_cast<int>(kv_block));
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return Status::Ok();
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::gpu::flash1
