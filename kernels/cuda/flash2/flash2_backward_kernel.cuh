// cuda.flash2's backward — FlashAttention-2's backward (Dao, 2023, Algorithm 2) on tensor cores
// (mma.sync), as three kernels:
//   1. flash2_backward_prepare: D = rowsum(dO o O) for every query row (fp32), and the fp32 dQ
//      accumulator zeroed;
//   2. flash2_backward_main: one CTA per key block (kBlockK keys of one (batch, kv head)); each of
//      its 4 warps owns 16 keys and keeps their dK and dV in registers while the CTA walks every
//      query tile, of every query head of the GQA group, that sees the block (causal and window
//      masks skip the rest). Per tile, with P recomputed from the forward's LSE instead of stored:
//        S^T  = K Q^T                       (mma, K from shared memory as A, Q as B)
//        P^T  = exp(scale S^T - LSE)        (masked keys 0; a row that sees no key has LSE -inf)
//        dV  += P^T dO                      (P^T rounded to the input dtype, as the forward's P)
//        dP^T = V dO^T
//        dS^T = P^T o (dP^T - D)
//        dK  += dS^T Q
//        dQ  += dS K                        (dS^T through shared memory: each warp then owns 16
//                                            query rows of the tile and adds them to the fp32
//                                            accumulator)
//      and at the end dK = scale dK, dV, summed over the group's heads in registers, are stored;
//   3. flash2_backward_convert: dQ = scale x the accumulator, in the gradient dtype.
// Two ways to add dQ across key blocks (DqAccumulation, flash2_traits.h): cuda.flash2 adds each key block's share into
// one accumulator with atomicAdd (fp32 atomics in whatever order the CTAs run: the backward is
// not bit-for-bit repeatable, and declares so); cuda.flash2_deterministic gives each CTA a run of
// key blocks and an accumulator of its own (plain read-modify-writes in a fixed order), and the
// convert kernel adds the accumulators in split order: bit for bit the same every run, at the
// cost of splits x the accumulator's memory and fewer CTAs.
// Layouts, masks, tails and GQA as the forward (flash2_kernel.cuh): Q and dO rows past seqlen_q
// and K and V rows past seqlen_k are zero-filled and masked; every tile that holds a key some row
// of the tile may not see is masked element by element (reference/mask.h's visible_keys).
// Performance: not measured on a GPU (target: >= 0.85 x torch.sdpa_flash's backward, GPU-CLAIMS).
// Known limits: head dims 64 and 128 (d 256's dK and dV do not fit in registers at 16 keys a
// warp), head_dim_v == head_dim_qk, gradients in the input dtype.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cuda/flash2/flash2_kernel.cuh"

namespace attnbench::flash2 {
inline namespace ATTNBENCH_TARGET {

// What the backward needs beyond the params: the plan's scratch and how dQ is split.
struct BackwardScratch {
  float* delta;            // (batch, heads_q, seqlen_q): D = rowsum(dO o O)
  float* dq_accumulator;   // splits x (batch, heads_q, seqlen_q, head_dim) fp32
  int64_t split_elements;  // elements between two splits' accumulators (0: one shared by all)
  int splits;              // accumulators the convert kernel adds
  int key_blocks_per_cta;  // 1 with atomics; ceil(key blocks / splits) without
};

constexpr int kPrepareWarps = 4;
constexpr float kLog2e = 1.4426950408889634f;

// ---- 1. D = rowsum(dO o O), the accumulator zeroed: one warp per query row -----------------------

template <typename Element>
__global__ void __launch_bounds__(kPrepareWarps* kWarpSize)
    flash2_backward_prepare(const __grid_constant__ AttentionParams p,
                            const BackwardScratch scratch) {
  const int64_t rows = static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q;
  const int64_t row =
      static_cast<int64_t>(blockIdx.x) * kPrepareWarps + static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  if (row >= rows) return;  // a whole warp leaves together
  const int64_t query = row % p.seqlen_q;
  const int64_t head = (row / p.seqlen_q) % p.heads_q;
  const int64_t batch = row / (static_cast<int64_t>(p.seqlen_q) * p.heads_q);
  const Element* dout = static_cast<const Element*>(p.dout) + batch * p.dout_batch_stride +
                        query * p.dout_row_stride + head * p.dout_head_stride;
  const Element* out = static_cast<const Element*>(p.out) + batch * p.out_batch_stride +
                       query * p.out_row_stride + head * p.out_head_stride;
  float sum = 0.0f;
  for (int d = lane; d < p.head_dim_v; d += kWarpSize) {
    sum += gpu::to_float(dout[d]) * gpu::to_float(out[d]);
  }
  sum = gpu::warp_sum(sum);
  if (lane == 0) scratch.delta[row] = sum;
  for (int split = 0; split < scratch.splits; ++split) {
    float* accumulator = scratch.dq_accumulator + split * scratch.split_elements +
                         row * p.head_dim_qk;
    for (int d = lane; d < p.head_dim_qk; d += kWarpSize) accumulator[d] = 0.0f;
  }
}

// ---- 2. the key blocks ---------------------------------------------------------------------------

// The shared memory of a backward CTA (BackwardTraits' budget), as shared addresses and pointers.
template <int HeadDim, typename Element>
struct BackwardShared {
  using T = BackwardTraits<HeadDim>;
  static constexpr uint32_t kTileBytes = T::kTileElements * kElementBytes;
  uint32_t k_tile, v_tile, q_tiles, dout_tiles, ds_tile;  // shared addresses
  Element* ds;      // dS^T: (kBlockK keys, kBlockQ queries) swizzled
  float* stats;     // kStages x (LSE in base 2, then D) of the staged query tiles

  __device__ __forceinline__ explicit BackwardShared(unsigned char* bytes) {
    Element* k = reinterpret_cast<Element*>(bytes);
    Element* v = k + T::kTileElements;
    Element* q = v + T::kTileElements;
    Element* dout = q + T::kStages * T::kTileElements;
    ds = dout + T::kStages * T::kTileElements;
    stats = reinterpret_cast<float*>(ds + T::kDsElements);
    k_tile = ptx::shared_address(k);
    v_tile = ptx::shared_address(v);
    q_tiles = ptx::shared_address(q);
    dout_tiles = ptx::shared_address(dout);
    ds_tile = ptx::shared_address(ds);
  }
  __device__ __forceinline__ float* lse_log2(int stage) const {
    return stats + stage * T::kStatsFloats;
  }
  __device__ __forceinline__ float* delta(int stage) const {
    return lse_log2(stage) + T::kBlockQ;
  }
};

// A lane's ldmatrix row address in a swizzled tile of Width-element rows, as flash2_layout.h's
// LaneOffsets gives it, from two registers (the row's byte offset and the chunk's swizzle flip)
// instead of four offsets: the backward's registers are the tightest of the flash2 kernels.
template <int Width>
struct LaneRow {
  uint32_t row_bytes;  // of row `row`
  int flip;            // lane_chunk ^ row % 8: XOR-ed into the low bits of a chunk pair's chunk

  __device__ __forceinline__ LaneRow(uint32_t tile, int row, int lane_chunk)
      : row_bytes(tile + static_cast<uint32_t>(row * Width * kElementBytes)),
        flip(lane_chunk ^ (row % kSwizzleRows)) {}
  // Byte address of (row + extra_rows, chunk 2 * chunk_pair + lane_chunk); extra_rows % 8 == 0.
  __device__ __forceinline__ uint32_t bytes(int extra_rows, int chunk_pair) const {
    const int chunk = ((2 * chunk_pair) & ~(kSwizzleRows - 1)) + (((2 * chunk_pair) & (kSwizzleRows - 1)) ^ flip);
    return row_bytes + static_cast<uint32_t>(extra_rows * Width * kElementBytes + chunk * kChunkBytes);
  }
};

// One (batch, kv head)'s view of the tensors, and where its key blocks' work lies.
template <int HeadDim, typename Element>
struct KeyBlockWork {
  using T = BackwardTraits<HeadDim>;
  int batch, head_kv, key_length;
  int first_key;        // of the block
  int first_tile;       // the block's query tiles: [first_tile, first_tile + tiles)
  int tiles;
  int items;            // heads_per_kv x tiles: (group head, query tile) pairs, head-major

  __device__ __forceinline__ int head_of(const AttentionParams& p, int item) const {
    return head_kv * p.heads_per_kv + item / tiles;
  }
  __device__ __forceinline__ int first_row_of(int item) const {
    return (first_tile + item % tiles) * T::kBlockQ;
  }
};

// Starts the copies of item `item`'s Q and dO tiles into stage `stage`, and writes its LSE (in
// base 2; +inf where a row sees no key or lies past seqlen_q, so that its P is 0) and D.
template <int HeadDim, typename Element>
__device__ __forceinline__ void stage_query_tile(const AttentionParams& p,
                                                 const BackwardScratch& scratch,
                                                 const KeyBlockWork<HeadDim, Element>& work,
                                                 const BackwardShared<HeadDim, Element>& shared,
                                                 int item, int stage) {
  using T = BackwardTraits<HeadDim>;
  const int head = work.head_of(p, item);
  const int first_row = work.first_row_of(item);
  const Element* q = static_cast<const Element*>(p.q) + work.batch * p.q_batch_stride +
                     head * p.q_head_stride;
  const Element* dout = static_cast<const Element*>(p.dout) + work.batch * p.dout_batch_stride +
                        head * p.dout_head_stride;
  const TileCopy<T::kBlockQ, HeadDim, T::kThreads, Element> q_copy(q, p.q_row_stride);
  const TileCopy<T::kBlockQ, HeadDim, T::kThreads, Element> dout_copy(dout, p.dout_row_stride);
  q_copy.start(shared.q_tiles + stage * shared.kTileBytes, first_row, p.seqlen_q);
  dout_copy.start(shared.dout_tiles + stage * shared.kTileBytes, first_row, p.seqlen_q);
  const int row = static_cast<int>(threadIdx.x);
  if (row < T::kBlockQ) {
    const int query = first_row + row;
    const int64_t index =
        (static_cast<int64_t>(work.batch) * p.heads_q + head) * p.seqlen_q + query;
    const float lse = query < p.seqlen_q ? p.lse[index] : kNegInf;
    shared.lse_log2(stage)[row] = lse == kNegInf ? INFINITY : lse * kLog2e;
    shared.delta(stage)[row] = query < p.seqlen_q ? scratch.delta[index] : 0.0f;
  }
}

template <int HeadDim, typename Element, DqAccumulation kDq>
__global__ void __launch_bounds__(BackwardTraits<HeadDim>::kThreads, 1)
    flash2_backward_main(const __grid_constant__ AttentionParams p,
                         const BackwardScratch scratch) {
  using T = BackwardTraits<HeadDim>;
  ATTNBENCH_DYNAMIC_SHARED(shared_bytes, kChunkBytes);
  const BackwardShared<HeadDim, Element> shared(shared_bytes);

  // Which run of key blocks of which (batch, kv head): splits fastest.
  const int key_blocks = (p.seqlen_k + T::kBlockK - 1) / T::kBlockK;
  const unsigned ctas_per_head = static_cast<unsigned>(
      (key_blocks + scratch.key_blocks_per_cta - 1) / scratch.key_blocks_per_cta);
  const int split = static_cast<int>(blockIdx.x % ctas_per_head);
  const unsigned pair = blockIdx.x / ctas_per_head;
  KeyBlockWork<HeadDim, Element> work{};
  work.head_kv = static_cast<int>(pair % static_cast<unsigned>(p.heads_kv));
  work.batch = static_cast<int>(pair / static_cast<unsigned>(p.heads_kv));
  work.key_length = p.key_lengths != nullptr ? p.key_lengths[work.batch] : p.seqlen_k;

  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int row_group = lane / kLanesPerRow;    // the thread's first key (and query) row of 16
  const int lane_in_row = lane % kLanesPerRow;  // which column pairs of those rows it holds
  const int warp_key = warp * kRowsPerWarp;     // the warp's first key within the block

  // ldmatrix addressing (flash2_layout.h): K and V rows of the warp as A; Q and dO as B, keys'
  // way (non-transposed) for S^T and dP^T; dO, Q and K as B through .trans for dV, dK and dQ;
  // dS^T as A through .trans (its rows are the product's k) for dQ.
  const LaneRow<HeadDim> k_rows_a(shared.k_tile, warp_key + a_lane_row(lane), a_lane_chunk(lane));
  const LaneRow<HeadDim> rows_b(0, b_lane_row(lane), b_lane_chunk(lane));
  const LaneRow<HeadDim> rows_bt(0, bt_lane_row(lane), bt_lane_chunk(lane));
  const LaneRow<T::kBlockQ> ds_at(shared.ds_tile, b_lane_row(lane), b_lane_chunk(lane));

  const int first_block = split * scratch.key_blocks_per_cta;
  const int end_block = first_block + scratch.key_blocks_per_cta < key_blocks
                            ? first_block + scratch.key_blocks_per_cta
                            : key_blocks;
  for (int key_block = first_block; key_block < end_block; ++key_block) {
    work.first_key = key_block * T::kBlockK;
    const int end_key =
        work.first_key + T::kBlockK < p.seqlen_k ? work.first_key + T::kBlockK : p.seqlen_k;
    const gpu::RowRange rows =
        gpu::key_block_rows(p.mask, p.window_left, p.window_right, work.first_key, end_key,
                            p.seqlen_q, p.seqlen_k, work.key_length);
    work.first_tile = static_cast<int>(rows.begin) / T::kBlockQ;
    work.tiles = rows.end > rows.begin
                     ? static_cast<int>(rows.end - 1) / T::kBlockQ - work.first_tile + 1
                     : 0;
    work.items = work.tiles * p.heads_per_kv;

    // The query rows that see each of this thread's two keys (a key's rows are one interval,
    // since both ends of a row's keys never decrease; an empty one past seqlen_k or a padding
    // length): a tile's mask is then two compares an element.
    int key_rows_begin[kRowsPerThread], key_rows_end[kRowsPerThread];
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int key = work.first_key + warp_key + row_group + r * kSecondRowOffset;
      const gpu::RowRange rows_of_key = gpu::key_block_rows(
          p.mask, p.window_left, p.window_right, key, key + 1, p.seqlen_q, p.seqlen_k,
          work.key_length);
      key_rows_begin[r] = static_cast<int>(rows_of_key.begin);
      key_rows_end[r] = static_cast<int>(rows_of_key.end);
    }
    float dk[T::kDimTiles][4] = {};  // the warp's 16 keys x HeadDim, C-fragment layout
    float dv[T::kDimTiles][4] = {};
    // No warp still reads the previous block's tiles.
    __syncthreads();
    {  // set up here, not held across the loop: registers are tight
      const Element* k = static_cast<const Element*>(p.k) + work.batch * p.k_batch_stride +
                         work.head_kv * p.k_head_stride;
      const Element* v = static_cast<const Element*>(p.v) + work.batch * p.v_batch_stride +
                         work.head_kv * p.v_head_stride;
      const TileCopy<T::kBlockK, HeadDim, T::kThreads, Element> k_copy(k, p.k_row_stride);
      const TileCopy<T::kBlockK, HeadDim, T::kThreads, Element> v_copy(v, p.v_row_stride);
      k_copy.start(shared.k_tile, work.first_key, p.seqlen_k);
      v_copy.start(shared.v_tile, work.first_key, p.seqlen_k);
    }
    if (work.items > 0) stage_query_tile(p, scratch, work, shared, 0, 0);
    ptx::commit_copies();

    for (int item = 0; item < work.items; ++item) {
      const int stage = item % T::kStages;
      const int head = work.head_of(p, item);
      const int first_row = work.first_row_of(item);
      // Item `item` has landed and is visible; every warp is done with item - 1, whose stage the
      // next item's copies take over.
      ptx::wait_copies<0>();
      __syncthreads();
      if (item + 1 < work.items) {
        stage_query_tile(p, scratch, work, shared, item + 1, (item + 1) % T::kStages);
      }
      ptx::commit_copies();
      const uint32_t q_tile = shared.q_tiles + stage * shared.kTileBytes;
      const uint32_t dout_tile = shared.dout_tiles + stage * shared.kTileBytes;
      const float* lse_log2 = shared.lse_log2(stage);
      const float* delta = shared.delta(stage);

      // ---- S^T = K Q^T: the warp's 16 keys x the tile's kBlockQ queries ----------------------
      float s[T::kQueryTiles][4] = {};
#pragma unroll
      for (int step = 0; step < T::kDimSteps; ++step) {
        uint32_t a[4];
        ptx::load_matrix_x4(a, k_rows_a.bytes(0, step));
#pragma unroll
        for (int pair_tile = 0; pair_tile < T::kQueryTiles / 2; ++pair_tile) {
          uint32_t b[4];
          ptx::load_matrix_x4(b, q_tile + rows_b.bytes(pair_tile * 2 * kMmaN, step));
          ptx::mma_16x8x16<Element>(s[2 * pair_tile], a, b[0], b[1]);
          ptx::mma_16x8x16<Element>(s[2 * pair_tile + 1], a, b[2], b[3]);
        }
      }

      // ---- mask: only a tile with a key some of its rows may not see -------------------------
      const int last_row =
          (first_row + T::kBlockQ < p.seqlen_q ? first_row + T::kBlockQ : p.seqlen_q) - 1;
      const bool needs_mask =
          gpu::block_key_tiles(p.mask, p.window_left, p.window_right, first_row, last_row,
                               p.seqlen_q, p.seqlen_k, work.key_length, T::kBlockK)
              .needs_mask(work.first_key, T::kBlockK);
      if (needs_mask) {
#pragma unroll
        for (int tile = 0; tile < T::kQueryTiles; ++tile) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int query = first_row + tile * kMmaN + lane_in_row * 2 + e;
#pragma unroll
            for (int r = 0; r < kRowsPerThread; ++r) {
              if (query < key_rows_begin[r] || query >= key_rows_end[r]) {
                s[tile][2 * r + e] = kNegInf;
              }
            }
          }
        }
      }

      // ---- P^T = exp2(scale_log2 S^T - LSE_log2), in place --------------------------------------
#pragma unroll
      for (int tile = 0; tile < T::kQueryTiles; ++tile) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float base = lse_log2[tile * kMmaN + lane_in_row * 2 + e];
#pragma unroll
          for (int r = 0; r < kRowsPerThread; ++r) {
            s[tile][2 * r + e] = ptx::exp2_approx(fmaf(s[tile][2 * r + e], p.scale_log2, -base));
          }
        }
      }

      // ---- dV += P^T dO: P^T's A fragments are S^T's C fragments, rounded ----------------------
#pragma unroll
      for (int step = 0; step < T::kQuerySteps; ++step) {
        uint32_t a[4];
        a_fragment_of<Element>(s, step, a);
#pragma unroll
        for (int pair_tile = 0; pair_tile < T::kDimTiles / 2; ++pair_tile) {
          uint32_t b[4];
          ptx::load_matrix_x4_transposed(b, dout_tile + rows_bt.bytes(step * kMmaK, pair_tile));
          ptx::mma_16x8x16<Element>(dv[2 * pair_tile], a, b[0], b[1]);
          ptx::mma_16x8x16<Element>(dv[2 * pair_tile + 1], a, b[2], b[3]);
        }
      }

      // ---- per part of the tile's queries (half of them at d 64, a quarter at d 128): dP^T =
      // V dO^T, dS^T = P^T o (dP^T - D) over P^T in place, dK += dS^T Q, dS^T to shared memory
      // for dQ. Parts keep dP^T's registers at 16 (8) beside P^T's 32 and dK's and dV's
      // d: a whole tile's dP^T pushed d 128 past 255 registers, into spills.
      constexpr int kParts = HeadDim > 64 ? 4 : 2;
      constexpr int kPartTiles = T::kQueryTiles / kParts;
      constexpr int kPartSteps = T::kQuerySteps / kParts;
      static_assert(kPartSteps >= 1, "a part is at least one k-step of queries");
#pragma unroll
      for (int part = 0; part < kParts; ++part) {
        float dp[kPartTiles][4] = {};
#pragma unroll
        for (int step = 0; step < T::kDimSteps; ++step) {
          uint32_t a[4];
          ptx::load_matrix_x4(a, k_rows_a.bytes(0, step) + shared.kTileBytes);  // V follows K
#pragma unroll
          for (int pair_tile = 0; pair_tile < kPartTiles / 2; ++pair_tile) {
            uint32_t b[4];
            ptx::load_matrix_x4(
                b, dout_tile + rows_b.bytes((part * kPartTiles + 2 * pair_tile) * kMmaN, step));
            ptx::mma_16x8x16<Element>(dp[2 * pair_tile], a, b[0], b[1]);
            ptx::mma_16x8x16<Element>(dp[2 * pair_tile + 1], a, b[2], b[3]);
          }
        }
#pragma unroll
        for (int t = 0; t < kPartTiles; ++t) {
          const int tile = part * kPartTiles + t;
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float d = delta[tile * kMmaN + lane_in_row * 2 + e];
#pragma unroll
            for (int r = 0; r < kRowsPerThread; ++r) {
              s[tile][2 * r + e] = s[tile][2 * r + e] * (dp[t][2 * r + e] - d);
            }
          }
        }
        // dK += dS^T Q over the part's k-steps.
#pragma unroll
        for (int part_step = 0; part_step < kPartSteps; ++part_step) {
          const int step = part * kPartSteps + part_step;
          uint32_t a[4];
          a_fragment_of<Element>(s, step, a);
#pragma unroll
          for (int pair_tile = 0; pair_tile < T::kDimTiles / 2; ++pair_tile) {
            uint32_t b[4];
            ptx::load_matrix_x4_transposed(b, q_tile + rows_bt.bytes(step * kMmaK, pair_tile));
            ptx::mma_16x8x16<Element>(dk[2 * pair_tile], a, b[0], b[1]);
            ptx::mma_16x8x16<Element>(dk[2 * pair_tile + 1], a, b[2], b[3]);
          }
        }
        // dS^T to shared memory: the dQ product needs every warp's keys.
#pragma unroll
        for (int t = 0; t < kPartTiles; ++t) {
          const int tile = part * kPartTiles + t;
#pragma unroll
          for (int r = 0; r < kRowsPerThread; ++r) {
            const int key_row = warp_key + row_group + r * kSecondRowOffset;
            const int column = tile * kMmaN + lane_in_row * 2;
            const int offset = swizzled_offset<T::kBlockQ>(key_row, column / kChunkElements) +
                               column % kChunkElements;
            *reinterpret_cast<uint32_t*>(shared.ds + offset) =
                pack_pair<Element>(s[tile][2 * r], s[tile][2 * r + 1]);
          }
        }
      }
      __syncthreads();

      // ---- dQ += dS K: the warp's 16 query rows of the tile, kBlockK keys deep -----------------
      uint32_t ds_fragments[T::kKeySteps][4];
#pragma unroll
      for (int step = 0; step < T::kKeySteps; ++step) {
        ptx::load_matrix_x4_transposed(ds_fragments[step], ds_at.bytes(step * kMmaK, warp));
      }
      const int query_row = first_row + warp * kRowsPerWarp + row_group;
      float* dq_rows = scratch.dq_accumulator + split * scratch.split_elements +
                       ((static_cast<int64_t>(work.batch) * p.heads_q + head) * p.seqlen_q +
                        query_row) * HeadDim;
      // One pair of dim tiles at a time, not unrolled: unrolled, ptxas hoists every K fragment
      // of the loop (128 registers at d 128) and spills. K's .trans addresses as rows_bt's,
      // computed for a pair tile known only at run time (the swizzle flips the chunk's low bits).
      const uint32_t k_lane_row =
          shared.k_tile + static_cast<uint32_t>(bt_lane_row(lane) * HeadDim * kElementBytes);
#pragma unroll 1
      for (int pair_tile = 0; pair_tile < T::kDimTiles / 2; ++pair_tile) {
        float dq[2][4] = {};
        const int chunk = (2 * pair_tile + bt_lane_chunk(lane)) ^ (bt_lane_row(lane) % kSwizzleRows);
        const uint32_t k_lane = k_lane_row + static_cast<uint32_t>(chunk * kChunkBytes);
#pragma unroll
        for (int step = 0; step < T::kKeySteps; ++step) {
          uint32_t b[4];
          ptx::load_matrix_x4_transposed(
              b, k_lane + static_cast<uint32_t>(step * kMmaK * HeadDim * kElementBytes));
          ptx::mma_16x8x16<Element>(dq[0], ds_fragments[step], b[0], b[1]);
          ptx::mma_16x8x16<Element>(dq[1], ds_fragments[step], b[2], b[3]);
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
#pragma unroll
          for (int r = 0; r < kRowsPerThread; ++r) {
            if (query_row + r * kSecondRowOffset >= p.seqlen_q) continue;
            float* target = dq_rows + r * kSecondRowOffset * HeadDim +
                            (2 * pair_tile + half) * kMmaN + lane_in_row * 2;
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              if constexpr (kDq == DqAccumulation::atomic) {
                atomicAdd(target + e, dq[half][2 * r + e]);
              } else {
                target[e] += dq[half][2 * r + e];
              }
            }
          }
        }
      }
    }

    // ---- dK = scale dK and dV of the warp's keys, straight from the C fragments -----------------
    Element* dk_out = static_cast<Element*>(p.dk) + work.batch * p.dk_batch_stride +
                      work.head_kv * p.dk_head_stride;
    Element* dv_out = static_cast<Element*>(p.dv) + work.batch * p.dv_batch_stride +
                      work.head_kv * p.dv_head_stride;
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int key = work.first_key + warp_key + row_group + r * kSecondRowOffset;
      if (key >= p.seqlen_k) continue;
#pragma unroll
      for (int tile = 0; tile < T::kDimTiles; ++tile) {
        const int column = tile * kMmaN + lane_in_row * 2;  // even: 4-byte aligned pairs
        *reinterpret_cast<uint32_t*>(dk_out + key * p.dk_row_stride + column) = pack_pair<Element>(
            dk[tile][2 * r] * p.scale, dk[tile][2 * r + 1] * p.scale);
        *reinterpret_cast<uint32_t*>(dv_out + key * p.dv_row_stride + column) =
            pack_pair<Element>(dv[tile][2 * r], dv[tile][2 * r + 1]);
      }
    }
  }
  // No copy may still be writing shared memory when the CTA ends.
  ptx::wait_copies<0>();
}

// ---- 3. dQ = scale x the accumulators' sum, in split order: one thread per pair of dims ---------

template <typename Element>
__global__ void __launch_bounds__(256)
    flash2_backward_convert(const __grid_constant__ AttentionParams p,
                            const BackwardScratch scratch) {
  const int64_t pairs_per_row = p.head_dim_qk / 2;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q * pairs_per_row) return;
  const int64_t row = index / pairs_per_row;
  const int64_t dim = 2 * (index % pairs_per_row);
  const int64_t query = row % p.seqlen_q;
  const int64_t head = (row / p.seqlen_q) % p.heads_q;
  const int64_t batch = row / (static_cast<int64_t>(p.seqlen_q) * p.heads_q);
  float sum[2] = {0.0f, 0.0f};
  for (int split = 0; split < scratch.splits; ++split) {
    const float* accumulator =
        scratch.dq_accumulator + split * scratch.split_elements + row * p.head_dim_qk + dim;
    sum[0] += accumulator[0];
    sum[1] += accumulator[1];
  }
  Element* dq = static_cast<Element*>(p.dq) + batch * p.dq_batch_stride +
                query * p.dq_row_stride + head * p.dq_head_stride + dim;
  *reinterpret_cast<uint32_t*>(dq) = pack_pair<Element>(sum[0] * p.scale, sum[1] * p.scale);
}

// ---- launch -------------------------------------------------------------------------------------

template <int HeadDim, DType kDtype, DqAccumulation kDq>
Status launch_flash2_backward(const AttentionParams& params, float* delta, float* dq_accumulator,
                              cudaStream_t stream) {
  using T = BackwardTraits<HeadDim>;
  using Element = typename ElementOf<kDtype>::type;
  const DqSplit split = dq_split(params.seqlen_k, kDq);
  BackwardScratch scratch{};
  scratch.delta = delta;
  scratch.dq_accumulator = dq_accumulator;
  scratch.splits = split.splits;
  scratch.key_blocks_per_cta = split.key_blocks_per_cta;
  scratch.split_elements =
      kDq == DqAccumulation::atomic
          ? 0
          : static_cast<int64_t>(params.batch) * params.heads_q * params.seqlen_q *
                     params.head_dim_qk;
  const int64_t rows = static_cast<int64_t>(params.batch) * params.heads_q * params.seqlen_q;
  const int64_t key_blocks = (params.seqlen_k + T::kBlockK - 1) / T::kBlockK;
  const int64_t ctas_per_head =
      (key_blocks + scratch.key_blocks_per_cta - 1) / scratch.key_blocks_per_cta;
  const int64_t main_ctas = ctas_per_head * params.heads_kv * params.batch;
  const int64_t convert_threads = rows * (params.head_dim_qk / 2);
  constexpr int kConvertThreads = 256;
  const int64_t convert_ctas = (convert_threads + kConvertThreads - 1) / kConvertThreads;
  const int64_t prepare_ctas = (rows + kPrepareWarps - 1) / kPrepareWarps;
  if (main_ctas > INT_MAX || convert_ctas > INT_MAX || prepare_ctas > INT_MAX) {
    return Status::Error("cuda.flash2 backward: the problem exceeds one launch's grid");
  }
  launch_kernel(flash2_backward_prepare<Element>, static_cast<unsigned>(prepare_ctas),
                kPrepareWarps * kWarpSize, 0, stream, params, scratch);
  ATTNBENCH_CUDA_TRY_LAUNCH();
  const auto main = flash2_backward_main<HeadDim, Element, kDq>;
  ATTNBENCH_CUDA_TRY(allow_dynamic_shared(main, static_cast<int>(T::kSharedBytes)));
  launch_kernel(main, static_cast<unsigned>(main_ctas), T::kThreads, T::kSharedBytes, stream,
                params, scratch);
  ATTNBENCH_CUDA_TRY_LAUNCH();
  launch_kernel(flash2_backward_convert<Element>, static_cast<unsigned>(convert_ctas),
                kConvertThreads, 0, stream, params, scratch);
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return Status::Ok();
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash2
