// cuda.flash3's mainloop pieces: where a tile's wgmma operands lie (descriptors into the TMA's
// swizzled boxes), the TMA loads of a tile, and the two products of one key tile for one
// consumer warpgroup. The stages' kernels only coordinate them (which warps load, which wait on
// which barrier, when a stage is released).
//
// Tiles in shared memory: a (rows x d) tile of Q, K or V is row_width(d) / 64 boxes of rows x 128
// bytes, box b at b * rows * 128 bytes, each with the 128-byte swizzle (TMA writes it, wgmma reads
// it).
#pragma once

#include <cstdint>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/ptx.cuh"
#include "kernels/cuda/common/wgmma_descriptor.h"
#include "kernels/cuda/flash3/flash3_traits.h"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {

// Where a CTA's tiles lie in shared memory (TileShape's layout), from the dynamic shared memory's
// start aligned up to kTileAlignment.
template <typename Shape>
struct SharedTiles {
  uint32_t q;
  uint32_t k;
  uint32_t v;
  __device__ __forceinline__ explicit SharedTiles(const unsigned char* dynamic_shared)
      : q(static_cast<uint32_t>((ptx::shared_address(dynamic_shared) + kTileAlignment - 1) /
                                kTileAlignment * kTileAlignment)),
        k(q + Shape::kQBytes),
        v(k + Shape::kStages * Shape::kKBytes) {}
  __device__ __forceinline__ uint32_t k_stage(int stage) const {
    return k + static_cast<uint32_t>(stage) * Shape::kKBytes;
  }
  __device__ __forceinline__ uint32_t v_stage(int stage) const {
    return v + static_cast<uint32_t>(stage) * Shape::kVBytes;
  }
};

// The descriptor of a K-major tile whose boxes hold `box_rows` rows of kSwizzleBytes, starting
// `byte` bytes along K (a k-step is 32 bytes at every element size: k16 of 16-bit, k32 of e4m3);
// `tile` may point inside a box (a consumer's 64 rows of a larger Q tile), at a multiple of 8
// rows.
__device__ __forceinline__ uint64_t k_major_at(uint32_t tile, int box_rows, int byte) {
  const uint32_t start = tile +
                         static_cast<uint32_t>(byte / kSwizzleBytes * box_rows * kSwizzleBytes) +
                         static_cast<uint32_t>(byte % kSwizzleBytes);
  return gpu::encode_wgmma_descriptor({start, 0, kSwizzleAtomBytes, kSwizzleBytes, 0});
}
// The k16 step `step` of a 16-bit tile (Q and K).
__device__ __forceinline__ uint64_t k_major_step(uint32_t tile, int box_rows, int step) {
  return k_major_at(tile, box_rows, step * kWgmmaK * kElementBytes);
}

// The descriptor of the k16 step `step` (keys 16 step ..) of V's [key][d] tile, read N-major: the
// next 64 columns of d are the next box, the next 8 keys the next swizzle pattern.
__device__ __forceinline__ uint64_t n_major_step(uint32_t tile, int box_rows, int step) {
  const uint32_t start = tile + static_cast<uint32_t>(step * kWgmmaK * kSwizzleBytes);
  return gpu::encode_wgmma_descriptor({start, static_cast<uint32_t>(box_rows * kSwizzleBytes),
                                       kSwizzleAtomBytes, kSwizzleBytes, 0});
}

// Issued by one thread: the (rows x Width) tile of `map` at sequence position `row` of (head,
// batch), box by box, completing on `barrier` (tile_bytes(Width, rows) bytes; a box's columns past
// the map's d arrive as zeros).
template <int Width>
__device__ __forceinline__ void load_tile(uint32_t tile, const CUtensorMap* map, uint32_t barrier,
                                          int rows, int row, int head, int batch) {
#pragma unroll
  for (int box = 0; box < Width / kBoxColumns; ++box) {
    ptx::tma_load_4d(tile + static_cast<uint32_t>(box * rows * kSwizzleBytes), map, barrier,
                     box * kBoxColumns, row, head, batch);
  }
}

// S = Q K^T for the warpgroup's 64 query rows (`q_rows`, in boxes of `q_box_rows` rows) and one
// key tile, issued and committed: one wgmma.m64n<BlockK>k16 per 16 of d (HeadDim: d_qk itself,
// not its row width), both operands in shared memory. compute_scores also waits for it.
template <int HeadDim, int BlockK, typename Element>
__device__ __forceinline__ void issue_scores(float (&s)[BlockK / 2], uint32_t q_rows,
                                             int q_box_rows, uint32_t k_tile) {
  ptx::wgmma_fence();
#pragma unroll
  for (int step = 0; step < HeadDim / kWgmmaK; ++step) {
    ptx::wgmma_ss<BlockK, Element, false>(s, k_major_step(q_rows, q_box_rows, step),
                                          k_major_step(k_tile, BlockK, step), step > 0);
  }
  ptx::wgmma_commit();
}
template <int HeadDim, int BlockK, typename Element>
__device__ __forceinline__ void compute_scores(float (&s)[BlockK / 2], uint32_t q_rows,
                                               int q_box_rows, uint32_t k_tile) {
  issue_scores<HeadDim, BlockK, Element>(s, q_rows, q_box_rows, k_tile);
  ptx::wgmma_wait<0>();
  ptx::wgmma_fence_operand(s);
}

// O += P V for one key tile, committed and not waited for (the caller waits, then releases the
// stage): one wgmma.m64n<Width>k16 per 16 keys (Width: V's row width), P from registers, V
// N-major.
template <int Width, int BlockK, typename Element>
__device__ __forceinline__ void issue_output(float (&o)[Width / 2],
                                             const uint32_t (&p)[BlockK / kWgmmaK][4],
                                             uint32_t v_tile) {
  ptx::wgmma_fence();
  ptx::wgmma_fence_operand(o);
#pragma unroll
  for (int step = 0; step < BlockK / kWgmmaK; ++step) {
    ptx::wgmma_rs<Width, Element, true>(o, p[step], n_major_step(v_tile, BlockK, step), true);
  }
  ptx::wgmma_commit();
}

// A ring of the warp-specialized kernels (cuda.flash3_ws and its schedules, cuda.flash3_fp8_ws) as
// the consumers see it: tile i's stage and phase, and its release.
// Tiles are counted from `first`, the ring's tiles before this block's (a persistent CTA's earlier
// blocks; 0 where a CTA runs one block).
template <int kStages>
struct StageRing {
  const uint64_t* full;   // [kStages]: the stage's tile has landed
  const uint64_t* empty;  // [kStages]: every consumer thread is done with the stage
  int first = 0;
  __device__ __forceinline__ int stage(int tile) const { return (first + tile) % kStages; }
  __device__ __forceinline__ void wait_full(int tile) const {
    ptx::mbarrier_wait(ptx::shared_address(&full[stage(tile)]),
                       static_cast<unsigned>((first + tile) / kStages) % 2);
  }
  // This thread's wgmma on the tile's stage are done: the producer may refill it once every
  // consumer thread has said so.
  __device__ __forceinline__ void release(int tile) const {
    ptx::mbarrier_arrive(ptx::shared_address(&empty[stage(tile)]));
  }
};

// The mbarriers of one ring of kStages stages, the producer's side: per stage "full" (the TMA's
// bytes have landed: the producer's one expect_tx arrival) and "empty" (every consumer thread is
// done with the stage). The consumers see it through consumers().
template <int kStages>
struct TileRing {
  uint64_t full_barrier[kStages];
  uint64_t empty_barrier[kStages];

  // Thread 0, before the barriers' init fence.
  __device__ __forceinline__ void init(int consumer_threads) {
    for (int stage = 0; stage < kStages; ++stage) {
      ptx::mbarrier_init(ptx::shared_address(&full_barrier[stage]), 1);
      ptx::mbarrier_init(ptx::shared_address(&empty_barrier[stage]), consumer_threads);
    }
  }
  __device__ __forceinline__ int stage(int tile) const { return tile % kStages; }
  __device__ __forceinline__ uint32_t full(int stage) const {
    return ptx::shared_address(&full_barrier[stage]);
  }
  // Before loading tile `tile` into its stage: the stage's previous tile released by every
  // consumer thread (nothing to wait for on the ring's first pass).
  __device__ __forceinline__ void wait_empty(int tile) const {
    if (tile < kStages) return;
    ptx::mbarrier_wait(ptx::shared_address(&empty_barrier[stage(tile)]),
                       static_cast<unsigned>(tile / kStages - 1) % 2);
  }
  __device__ __forceinline__ StageRing<kStages> consumers(int first = 0) const {
    return {full_barrier, empty_barrier, first};
  }
};

// K and V in rings of their own (FlashAttention-3's two pipelines; cuda.flash3_ws and its
// schedules, cuda.flash3_fp8_ws and its transposing stage, where V's ring holds V^T): a consumer releases K(j) once S(j) is waited for and V(j) once P(j) V(j) is, and the
// producer loads K(j + 1) before V(j), so a schedule that needs K(j) beside V(j - 1) (ping-pong)
// finds the next K in flight while it still holds the previous V.
template <int kStages>
struct SplitRingBarriers {
  uint64_t q_full;
  TileRing<kStages> k;
  TileRing<kStages> v;

  __device__ __forceinline__ void init(int consumer_threads) {
    ptx::mbarrier_init(q(), 1);
    k.init(consumer_threads);
    v.init(consumer_threads);
    ptx::fence_mbarrier_init();
  }
  __device__ __forceinline__ uint32_t q() const { return ptx::shared_address(&q_full); }
};

// A persistent CTA (cuda.flash3[persistent=on]) loads Q once per block it runs, into the tile
// whose rows the previous block's output passed through: Q's "empty" barrier, on which each
// consumer warpgroup's storing thread arrives once its output has left shared memory (2 arrivals
// a phase, one phase per block with a visible key).
template <int kStages>
struct PersistentRingBarriers : SplitRingBarriers<kStages> {
  static constexpr int kQReleases = 2;  // the consumer warpgroups
  uint64_t q_empty_barrier;

  __device__ __forceinline__ void init(int consumer_threads) {
    ptx::mbarrier_init(q_empty(), kQReleases);
    SplitRingBarriers<kStages>::init(consumer_threads);  // its fence covers q_empty too
  }
  __device__ __forceinline__ uint32_t q_empty() const {
    return ptx::shared_address(&q_empty_barrier);
  }
};

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
