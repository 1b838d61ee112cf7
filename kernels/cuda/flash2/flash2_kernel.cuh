// cuda.flash2 — the FlashAttention-2 forward on tensor cores (mma.sync), for sm_80 and sm_90.
//
// What it computes: O = softmax(scale * Q K^T + mask) V for one (batch, query head) pair and one
// block of kBlockQ query rows per CTA, without materializing the scores. Written from the
// FlashAttention-2 paper (Dao, 2023, Algorithm 1) and the PTX ISA:
//   - the CTA loops over the key/value tiles its rows can see (flash2_traits.h's
//     block_key_tiles: causal and window masks skip every fully masked tile); each warp keeps
//     its 16 query rows' O, running max m and running sum l in registers, so nothing is
//     reduced across warps and O is normalized once, at the end (FA2's change against FA1,
//     which keeps O, l, m in device memory and rescales O at every tile);
//   - S = Q K^T and O += P V are mma.sync.m16n8k16 with fp16/bf16 inputs and fp32 accumulators;
//     their operands come from shared memory through ldmatrix (.trans for V, whose tile is stored
//     key-major as in global memory); P is converted from S's accumulators in registers;
//   - the online softmax works in base 2: p = exp2(s * scale_log2 - m * scale_log2) (one FFMA and
//     one MUFU.EX2 per score), O and l rescaled by exp2(m_old - m_new) when the max grows;
//   - K and V tiles arrive through a cp.async pipeline of kStages tiles; shared memory is XOR-
//     swizzled in 16-byte chunks, so ldmatrix and the copies are free of bank conflicts.
// Masks follow reference/mask.h exactly (its visible_keys gives each row's key range): every
// score outside the range — past seqlen_k, beyond a padding length, above a causal diagonal,
// outside a window — is set to -inf before the max. A key past seqlen_k is zero-filled by the
// copy (cp.async with 0 source bytes) and is still masked: a zero key scores 0, not nothing, and a
// zero-filled V row keeps 0 * garbage from turning P V into NaN. A row that sees no key keeps
// m = -inf; the exponent base is then 0 (never -inf - -inf = NaN), l stays 0, and the row writes
// O = 0 and LSE = -inf.
// Layouts: any strides with the head dim contiguous (bshd, bhsd, packed QKV); GQA/MQA read kv head
// h / heads_per_kv. Tails: Q rows past seqlen_q are zero-filled, computed and never stored.
// Deterministic: a fixed order of fp32 accumulation per row, no atomics, no split over keys.
// Against the previous version (cuda.flash1): O, m and l never leave registers, the matmuls run
// on tensor cores, the loads are asynchronous and overlap the math, masked tiles are skipped.
// Performance: not yet measured on a GPU (target: >= 300 TFLOP/s at bf16, d 128, non-causal,
// seqlen 8k on an H200; see GPU-CLAIMS.md).
// Head dims: 64, 80, 96, 128, 256, and 192 with head_dim_v 128 (DeepSeek's MLA prefill); a
// shared row holds whole 64-element swizzle groups, so 80 and 96 sit in 128-wide rows whose last
// chunks are neither copied nor read (no wasted math: the products step through d itself).
// Known limits: those head dims; fp16/bf16 in and the same dtype out; 16-byte aligned rows (every
// layout the harness builds). mma.sync is Ampere's instruction: on Hopper it runs at a fraction of
// wgmma's rate (FlashAttention-3's territory).
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
#include "kernels/cuda/flash2/flash2_launch.h"
#include "kernels/cuda/flash2/flash2_layout.h"
#include "kernels/cuda/flash2/flash2_traits.h"
#include "kernels/params.h"
#include "reference/mask.h"

namespace attnbench::flash2 {
inline namespace ATTNBENCH_TARGET {

// Lanes of one MMA row group (lane / 4) share a row of S and O: a row reduction is two shuffles.
constexpr int kLanesPerRow = 4;
// A thread holds two rows of its warp's 16: lane / 4 and lane / 4 + 8 (the C fragment's layout).
constexpr int kRowsPerThread = 2;
constexpr int kSecondRowOffset = kMmaM / 2;

using gpu::ElementOf;
using gpu::exponent_base;
using gpu::inverse_row_sum;
using gpu::kFullWarp;
using gpu::kNegInf;
using gpu::pack_pair;
using gpu::quad_max;
using gpu::quad_sum;
using gpu::row_lse;

// ---- device helpers: fragments -------------------------------------------------------------------

// The A fragment of k-step `step` of a product whose A is a C-fragment result held in registers
// (16 rows x 8-column tiles, two tiles a k-step), rounded to the input type: P for O += P V, and in
// the backward P^T for dV += P^T dO and dS^T for dK += dS^T Q.
template <typename Element, int Tiles>
__device__ __forceinline__ void a_fragment_of(const float (&c)[Tiles][4], int step,
                                              uint32_t (&a)[4]) {
  a[0] = pack_pair<Element>(c[2 * step][0], c[2 * step][1]);
  a[1] = pack_pair<Element>(c[2 * step][2], c[2 * step][3]);
  a[2] = pack_pair<Element>(c[2 * step + 1][0], c[2 * step + 1][1]);
  a[3] = pack_pair<Element>(c[2 * step + 1][2], c[2 * step + 1][3]);
}

// ---- device helpers: tiles in shared memory -----------------------------------------------------

// How the CTA's threads share the copies of a (rows, Columns) matrix's tiles of Rows rows
// (flash2_layout.h's CopyPattern): a thread always copies the same chunks of rows thread_row,
// thread_row + kRowStep, ... Since kRowStep is a multiple of 8, all of a thread's rows have the
// same row % 8, hence the same swizzle: one shared offset and one global pointer per thread, both
// set up once per CTA, and a tile's copies are a pointer advanced by fixed strides. Only a tile
// that reaches past the matrix's last row pays for per-row predicates.
template <int Rows, int Columns, int Threads, typename Element>
struct TileCopy {
  using Pattern = CopyPattern<Columns, Threads>;
  static constexpr int kWidth = Pattern::kWidth;      // the shared tile's row width
  static constexpr int kRowStep = Pattern::kRowStep;  // rows one pass covers
  static constexpr int kPasses = Rows / kRowStep;
  static constexpr int kRounds = Pattern::kRounds;  // chunks a thread copies of one row
  static constexpr int kRoundElements = Pattern::kThreadsPerRow * kChunkElements;
  static_assert(kRowStep % kSwizzleRows == 0, "a thread's rows share one swizzle pattern");
  static_assert(Rows % kRowStep == 0, "a tile is a whole number of passes");

  const Element* matrix;       // (row_limit, Columns), row stride row_stride: always readable
  const Element* thread_base;  // this thread's first chunk of row thread_row (may lie past the end)
  int64_t row_stride;          // elements between rows
  int64_t pass_stride;         // kRowStep rows
  int thread_row;              // the thread's first row in a tile
  uint32_t shared_offset;      // byte offset of (thread_row, its first chunk) in a swizzled tile

  __device__ __forceinline__ TileCopy(const Element* matrix_, int64_t row_stride_)
      : matrix(matrix_),
        thread_base(matrix_ + Pattern::first_row(static_cast<int>(threadIdx.x)) * row_stride_ +
                    Pattern::chunk(static_cast<int>(threadIdx.x), 0) * kChunkElements),
        row_stride(row_stride_),
        pass_stride(kRowStep * row_stride_),
        thread_row(Pattern::first_row(static_cast<int>(threadIdx.x))),
        shared_offset(static_cast<uint32_t>(
            swizzled_offset<kWidth>(thread_row, Pattern::chunk(static_cast<int>(threadIdx.x), 0)) *
            kElementBytes)) {}

  // Starts copying rows [first_row, first_row + Rows) into the swizzled tile at shared address
  // `tile`; rows at or past `row_limit` are zero-filled (and their source never read).
  __device__ __forceinline__ void start(uint32_t tile, int first_row, int row_limit) const {
    const Element* source = thread_base + first_row * row_stride;
    const uint32_t destination = tile + shared_offset;
    constexpr uint32_t kPassBytes = kRowStep * kWidth * kElementBytes;
    constexpr uint32_t kRoundBytes = kRoundElements * kElementBytes;
    if (first_row + Rows <= row_limit) {
#pragma unroll
      for (int pass = 0; pass < kPasses; ++pass) {
#pragma unroll
        for (int round = 0; round < kRounds; ++round) {
          if (!Pattern::copies(static_cast<int>(threadIdx.x), round)) continue;
          ptx::copy_async_16(destination + pass * kPassBytes + round * kRoundBytes,
                             source + pass * pass_stride + round * kRoundElements, true);
        }
      }
    } else {
      const int row = first_row + thread_row;
#pragma unroll
      for (int pass = 0; pass < kPasses; ++pass) {
        const bool valid = row + pass * kRowStep < row_limit;
#pragma unroll
        for (int round = 0; round < kRounds; ++round) {
          if (!Pattern::copies(static_cast<int>(threadIdx.x), round)) continue;
          // An invalid chunk reads nothing, but its address must still be a readable one.
          ptx::copy_async_16(destination + pass * kPassBytes + round * kRoundBytes,
                             valid ? source + pass * pass_stride + round * kRoundElements : matrix,
                             valid);
        }
      }
    }
  }
};

// ---- the kernel ---------------------------------------------------------------------------------

// Grid: one CTA per (query block, query head, batch), query blocks fastest and in reverse order:
// the blocks of one head run side by side and share its K/V in L2, and under a causal mask the
// longest blocks (the last rows) start first so the short ones fill the tail.
//
// Pipeline: kStages K/V tiles in shared memory, one cp.async group per tile (its K and V), Q a
// group of its own. Before the loop: Q, then tiles 0 .. kStages - 2; Q's fragments move to
// registers as soon as Q has landed. Iteration t, one barrier:
//   wait until tile t has landed (kPendingWhenTileReady younger groups may remain in flight);
//   barrier: tile t is visible to every warp, and every warp is done with iteration t - 1, so its
//     stage can be refilled;
//   start tile t + kStages - 1 into that stage (an empty group past the last tile keeps the
//     group count uniform), so kStages - 1 tiles load while tile t computes;
//   S = Q K_t^T, mask, online softmax, O += P V_t.
// Indices are 32-bit where they are bounded by a sequence length or the grid (both < 2^31; a key
// tile's end stays below 2^31 too, since no device holds 2^31 keys of 64 dims); element offsets
// into the tensors are 64-bit.
template <int HeadDim, int HeadDimV, typename Element>
__global__ void __launch_bounds__(Traits<HeadDim, HeadDimV>::kThreads,
                                  Traits<HeadDim, HeadDimV>::kMinBlocksPerSm)
    flash2_forward(const __grid_constant__ AttentionParams p) {
  using T = Traits<HeadDim, HeadDimV>;
  ATTNBENCH_DYNAMIC_SHARED(shared_bytes, kChunkBytes);
  Element* q_tile = reinterpret_cast<Element*>(shared_bytes);  // (kBlockQ, kQkWidth) swizzled
  Element* k_tiles = q_tile + T::kQTileElements;  // (kStages, kBlockK, kQkWidth) swizzled
  Element* v_tiles = k_tiles + T::kStages * T::kKTileElements;  // (kStages, kBlockK, kVWidth)
  const uint32_t q_tile_address = ptx::shared_address(q_tile);
  const uint32_t k_tiles_address = ptx::shared_address(k_tiles);
  const uint32_t v_tiles_address = ptx::shared_address(v_tiles);
  constexpr uint32_t kKTileBytes = T::kKTileElements * kElementBytes;
  constexpr uint32_t kVTileBytes = T::kVTileElements * kElementBytes;

  // Which block of which (batch, head) pair.
  const unsigned m_blocks = (static_cast<unsigned>(p.seqlen_q) + T::kBlockQ - 1) / T::kBlockQ;
  const unsigned m_block = m_blocks - 1 - blockIdx.x % m_blocks;
  const unsigned pair = blockIdx.x / m_blocks;
  const int head = static_cast<int>(pair % static_cast<unsigned>(p.heads_q));
  const int batch = static_cast<int>(pair / static_cast<unsigned>(p.heads_q));
  const int head_kv = head / p.heads_per_kv;
  const int first_row = static_cast<int>(m_block) * T::kBlockQ;
  const int last_row =
      p.seqlen_q - first_row > T::kBlockQ ? first_row + T::kBlockQ - 1 : p.seqlen_q - 1;

  // (seqlen_q, HeadDim) of this pair, row stride q_row_stride; likewise K, V (seqlen_k rows, V's
  // HeadDimV wide), O (HeadDimV wide).
  const Element* q =
      static_cast<const Element*>(p.q) + batch * p.q_batch_stride + head * p.q_head_stride;
  const Element* k =
      static_cast<const Element*>(p.k) + batch * p.k_batch_stride + head_kv * p.k_head_stride;
  const Element* v =
      static_cast<const Element*>(p.v) + batch * p.v_batch_stride + head_kv * p.v_head_stride;

  const int key_length = p.key_lengths != nullptr ? p.key_lengths[batch] : p.seqlen_k;
  const BlockKeyTiles tiles =
      block_key_tiles(p.mask, p.window_left, p.window_right, first_row, last_row, p.seqlen_q,
                      p.seqlen_k, key_length, T::kBlockK);
  const int tile_count = static_cast<int>(tiles.tiles());
  const int first_tile_key = static_cast<int>(tiles.first_tile) * T::kBlockK;
  const int full_begin = static_cast<int>(tiles.full_begin);
  const int full_end = static_cast<int>(tiles.full_end);

  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int row_group = lane / kLanesPerRow;    // the thread's first row within the warp's 16
  const int lane_in_row = lane % kLanesPerRow;  // which column pairs of that row it holds
  const int warp_row = warp * kRowsPerWarp;     // the warp's first row within the block
  // A warp whose rows all lie past seqlen_q (a short last block) only helps with the copies.
  const bool warp_has_rows = first_row + warp_row < p.seqlen_q;

  // The two query rows this thread holds and their visible keys (reference/mask.h).
  int key_begin[kRowsPerThread];
  int key_end[kRowsPerThread];
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    const int query = first_row + warp_row + row_group + r * kSecondRowOffset;
    const KeyRange keys = visible_keys(p.mask, p.window_left, p.window_right, query, p.seqlen_q,
                                       p.seqlen_k, key_length);
    key_begin[r] = static_cast<int>(keys.begin);
    key_end[r] = static_cast<int>(keys.end);
  }

  // ---- prologue: Q, then the first kStages - 1 K/V tiles ---------------------------------------
  const TileCopy<T::kBlockQ, HeadDim, T::kThreads, Element> q_copy(q, p.q_row_stride);
  const TileCopy<T::kBlockK, HeadDim, T::kThreads, Element> k_copy(k, p.k_row_stride);
  const TileCopy<T::kBlockK, HeadDimV, T::kThreads, Element> v_copy(v, p.v_row_stride);
  q_copy.start(q_tile_address, first_row, p.seqlen_q);
  ptx::commit_copies();
#pragma unroll
  for (int stage = 0; stage < T::kStages - 1; ++stage) {
    const int first_key = first_tile_key + stage * T::kBlockK;
    if (stage < tile_count) {
      k_copy.start(k_tiles_address + stage * kKTileBytes, first_key, p.seqlen_k);
      v_copy.start(v_tiles_address + stage * kVTileBytes, first_key, p.seqlen_k);
    }
    ptx::commit_copies();
  }

  // ---- per-lane ldmatrix addressing ------------------------------------------------------------
  // Q as the A operand: matrices (rows 0-7 | 8-15) x (k 0-7 | 8-15) in A's register order.
  const LaneOffsets<T::kQkWidth> q_lane(warp_row + a_lane_row(lane), a_lane_chunk(lane));
  // K as the B operand (K's rows are B's columns): matrices (keys 0-7, k 0-7), (keys 0-7,
  // k 8-15), (keys 8-15, k 0-7), (keys 8-15, k 8-15) = b0, b1 of key tile 2i, b0, b1 of 2i + 1.
  const LaneOffsets<T::kQkWidth> k_lane(b_lane_row(lane), b_lane_chunk(lane));
  // V as the B operand, transposed out of its key-major tile: matrices (keys 0-7, dims 0-7),
  // (keys 8-15, dims 0-7), (keys 0-7, dims 8-15), (keys 8-15, dims 8-15) = b0, b1 of dim tile
  // 2i, b0, b1 of dim tile 2i + 1.
  const LaneOffsets<T::kVWidth> v_lane(bt_lane_row(lane), bt_lane_chunk(lane));

  // Q's A fragments: all of them in registers (d <= 128), or one k-step at a time (d 256).
  constexpr int kQFragmentSteps = T::kQInRegisters ? T::kDimSteps : 1;
  uint32_t q_fragments[kQFragmentSteps][4];
  if constexpr (T::kQInRegisters) {
    if (tile_count > 0) {
      ptx::wait_copies<T::kPendingWhenQReady>();
      __syncthreads();
      if (warp_has_rows) {
#pragma unroll
        for (int step = 0; step < T::kDimSteps; ++step) {
          ptx::load_matrix_x4(q_fragments[step], q_tile_address + q_lane.bytes(0, step));
        }
      }
    }
  }

  float o[T::kDimTiles][4] = {};  // O: 16 rows x HeadDimV per warp, C-fragment layout
  float row_max[kRowsPerThread] = {kNegInf, kNegInf};  // raw scores (before the scale)
  // This lane's share of each row's sum; the quad's shares are added once, at the end.
  float row_sum[kRowsPerThread] = {0.0f, 0.0f};

  for (int iteration = 0; iteration < tile_count; ++iteration) {
    const int stage = iteration % T::kStages;
    const int first_key = first_tile_key + iteration * T::kBlockK;
    const uint32_t k_address = k_tiles_address + stage * kKTileBytes;
    const uint32_t v_address = v_tiles_address + stage * kVTileBytes;

    ptx::wait_copies<T::kPendingWhenTileReady>();
    __syncthreads();
    {
      const int refill = iteration + T::kStages - 1;
      const int refill_stage = refill % T::kStages;
      const int refill_key = first_tile_key + refill * T::kBlockK;
      if (refill < tile_count) {
        k_copy.start(k_tiles_address + refill_stage * kKTileBytes, refill_key, p.seqlen_k);
        v_copy.start(v_tiles_address + refill_stage * kVTileBytes, refill_key, p.seqlen_k);
      }
      ptx::commit_copies();
    }

    if (warp_has_rows) {
      float s[T::kKeyTiles][4] = {};  // S: 16 rows x kBlockK keys per warp, C-fragment layout
      // ---- S = Q K^T -------------------------------------------------------------------------
#pragma unroll
      for (int step = 0; step < T::kDimSteps; ++step) {
        const int q_step = T::kQInRegisters ? step : 0;
        if constexpr (!T::kQInRegisters) {
          ptx::load_matrix_x4(q_fragments[0], q_tile_address + q_lane.bytes(0, step));
        }
#pragma unroll
        for (int pair_tile = 0; pair_tile < T::kKeyTiles / 2; ++pair_tile) {
          uint32_t b[4];
          ptx::load_matrix_x4(b, k_address + k_lane.bytes(pair_tile * 2 * kMmaN, step));
          ptx::mma_16x8x16<Element>(s[2 * pair_tile], q_fragments[q_step], b[0], b[1]);
          ptx::mma_16x8x16<Element>(s[2 * pair_tile + 1], q_fragments[q_step], b[2], b[3]);
        }
      }

      // ---- mask: only tiles that hold a key some row of the block must not see -------------
      if (first_key < full_begin || first_key + T::kBlockK > full_end) {
#pragma unroll
        for (int tile = 0; tile < T::kKeyTiles; ++tile) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int key = first_key + tile * kMmaN + lane_in_row * 2 + e;
#pragma unroll
            for (int r = 0; r < kRowsPerThread; ++r) {
              if (key < key_begin[r] || key >= key_end[r]) s[tile][2 * r + e] = kNegInf;
            }
          }
        }
      }

      // ---- online softmax in base 2 ----------------------------------------------------------
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) {
        float new_max = row_max[r];
#pragma unroll
        for (int tile = 0; tile < T::kKeyTiles; ++tile) {
          new_max = fmaxf(new_max, fmaxf(s[tile][2 * r], s[tile][2 * r + 1]));
        }
        new_max = quad_max(new_max);
        // A row that has seen no key yet keeps max -inf: exponents are taken against 0 instead,
        // so exp2(-inf - 0) = 0 rather than exp2(-inf + inf) = NaN.
        const float base = exponent_base(new_max * p.scale_log2);
        const float rescale = ptx::exp2_approx(row_max[r] * p.scale_log2 - base);
        row_max[r] = new_max;
        float sum = 0.0f;
#pragma unroll
        for (int tile = 0; tile < T::kKeyTiles; ++tile) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float probability =
                ptx::exp2_approx(fmaf(s[tile][2 * r + e], p.scale_log2, -base));
            s[tile][2 * r + e] = probability;
            sum += probability;
          }
        }
        row_sum[r] = row_sum[r] * rescale + sum;
#pragma unroll
        for (int tile = 0; tile < T::kDimTiles; ++tile) {
          o[tile][2 * r] *= rescale;
          o[tile][2 * r + 1] *= rescale;
        }
      }

      // ---- O += P V: P's A fragments are S's C fragments, rounded to the input type -----------
#pragma unroll
      for (int step = 0; step < T::kKeySteps; ++step) {
        uint32_t a[4];
        a_fragment_of<Element>(s, step, a);
#pragma unroll
        for (int pair_tile = 0; pair_tile < T::kDimTiles / 2; ++pair_tile) {
          uint32_t b[4];
          ptx::load_matrix_x4_transposed(b, v_address + v_lane.bytes(step * kMmaK, pair_tile));
          ptx::mma_16x8x16<Element>(o[2 * pair_tile], a, b[0], b[1]);
          ptx::mma_16x8x16<Element>(o[2 * pair_tile + 1], a, b[2], b[3]);
        }
      }
    }
  }

  // ---- epilogue: O / l through this warp's rows of the Q tile, 16-byte stores ------------------
  // No copy may still be writing shared memory (a block with no visible tile never waited for Q).
  ptx::wait_copies<0>();
  __syncthreads();
  float inverse_sum[kRowsPerThread];
#pragma unroll
  for (int r = 0; r < kRowsPerThread; ++r) {
    row_sum[r] = quad_sum(row_sum[r]);
    inverse_sum[r] = inverse_row_sum(row_sum[r]);  // no visible key: O = 0
  }
  // Each warp writes and reads back only its own 16 rows: no barrier beyond the warp's.
#pragma unroll
  for (int tile = 0; tile < T::kDimTiles; ++tile) {
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int row = warp_row + row_group + r * kSecondRowOffset;
      const int column = tile * kMmaN + lane_in_row * 2;
      const int offset =
          swizzled_offset<T::kQkWidth>(row, column / kChunkElements) + column % kChunkElements;
      const uint32_t bits =
          pack_pair<Element>(o[tile][2 * r] * inverse_sum[r], o[tile][2 * r + 1] * inverse_sum[r]);
      *reinterpret_cast<uint32_t*>(q_tile + offset) = bits;  // column is even: 4-byte aligned
    }
  }
  __syncwarp();
  // (seqlen_q, HeadDimV) of this pair, row stride out_row_stride.
  Element* out =
      static_cast<Element*>(p.out) + batch * p.out_batch_stride + head * p.out_head_stride;
  constexpr int kOutChunksPerLane = kRowsPerWarp * T::kOutChunksPerRow / kWarpSize;
#pragma unroll
  for (int i = 0; i < kOutChunksPerLane; ++i) {
    const int chunk_index = lane + i * kWarpSize;
    const int row = warp_row + chunk_index / T::kOutChunksPerRow;
    const int chunk = chunk_index % T::kOutChunksPerRow;
    const int64_t query = first_row + row;
    if (query < p.seqlen_q) {
      const uint4 value =
          *reinterpret_cast<const uint4*>(q_tile + swizzled_offset<T::kQkWidth>(row, chunk));
      *reinterpret_cast<uint4*>(out + query * p.out_row_stride + chunk * kChunkElements) = value;
    }
  }
  if (p.lse != nullptr && lane_in_row == 0) {
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int64_t query = first_row + warp_row + row_group + r * kSecondRowOffset;
      if (query < p.seqlen_q) {
        // Natural-log LSE of the scaled scores: scale * m + ln(sum of exp(scale * (s - m))).
        const float lse = row_lse(row_max[r] * p.scale, row_sum[r]);
        p.lse[(static_cast<int64_t>(batch) * p.heads_q + head) * p.seqlen_q + query] = lse;
      }
    }
  }
}

// ---- launch -------------------------------------------------------------------------------------

template <int HeadDim, int HeadDimV, DType kDtype>
Status launch_flash2(const AttentionParams& params, cudaStream_t stream) {
  using T = Traits<HeadDim, HeadDimV>;
  using Element = typename ElementOf<kDtype>::type;
  const int64_t m_blocks = (static_cast<int64_t>(params.seqlen_q) + T::kBlockQ - 1) / T::kBlockQ;
  const int64_t ctas = m_blocks * params.heads_q * params.batch;
  if (ctas > INT_MAX) {
    return Status::Error("cuda.flash2: " + std::to_string(ctas) +
                         " query blocks exceed one launch's grid");
  }
  const auto kernel = flash2_forward<HeadDim, HeadDimV, Element>;
  ATTNBENCH_CUDA_TRY(allow_dynamic_shared(kernel, static_cast<int>(T::kSharedBytes)));
  launch_kernel(kernel, static_cast<unsigned>(ctas), T::kThreads, T::kSharedBytes, stream, params);
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return Status::Ok();
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash2
