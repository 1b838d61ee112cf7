// Where cuda.flash2 puts each element: the XOR swizzle of its shared-memory tiles, which lane
// copies which chunk, and which row address each lane hands to ldmatrix. Host and device code:
// the kernel uses these, and tests/kernels/test_flash2_layout.cpp replays one warp's S = Q K^T and
// O += P V on the CPU through them (with ldmatrix and mma.sync emulated as the PTX ISA
// specifies), so an index slip shows up without a GPU.
#pragma once

#include <cstdint>

#include "kernels/cuda/flash2/flash2_traits.h"
#include "reference/mask.h"  // ATTNBENCH_HOST_DEVICE

namespace attnbench::flash2 {

// Element offset of (row, chunk) in a swizzled tile of Width-wide rows (row_width: whole groups
// of 8 chunks): the chunk index is XOR-ed with row % 8 (see kSwizzleRows), which keeps it inside
// its aligned group of 8 chunks.
template <int Width>
ATTNBENCH_HOST_DEVICE constexpr int swizzled_offset(int row, int chunk) {
  static_assert(Width % kSwizzleColumns == 0, "rows of whole swizzle groups");
  return row * Width + ((chunk ^ (row % kSwizzleRows)) * kChunkElements);
}

// ---- copies: which thread copies which 16-byte chunks of a (rows, Columns) matrix -------------

// Thread t copies chunks chunk(t, 0), chunk(t, 1), ... of rows first_row(t), + kRowStep, ...
// A row's threads cover all its chunks where the row's chunks divide the CTA (d 64, 80, 96, 128,
// 256: one round); otherwise 8 threads a row (one swizzle group) copy every 8th chunk (d 192:
// 24 chunks, 256 threads, 3 rounds). Either way kThreadsPerRow is a multiple of 8, so a thread's
// chunks share one swizzle pattern. Chunks past Columns (d 80 and 96 in 128-wide rows) are never
// copied: nothing reads them.
template <int Columns, int Threads>
struct CopyPattern {
  static constexpr int kWidth = row_width(Columns);
  static constexpr int kWidthChunks = kWidth / kChunkElements;
  static constexpr int kChunks = Columns / kChunkElements;  // chunks holding data
  static constexpr int kThreadsPerRow = Threads % kWidthChunks == 0 ? kWidthChunks : kSwizzleRows;
  static constexpr int kRounds = kWidthChunks / kThreadsPerRow;
  static constexpr int kRowStep = Threads / kThreadsPerRow;
  static_assert(Columns % kChunkElements == 0, "rows of whole 16-byte chunks");
  static_assert(Threads % kThreadsPerRow == 0 && kWidthChunks % kThreadsPerRow == 0,
                "every thread copies the same chunks of its rows");

  ATTNBENCH_HOST_DEVICE static constexpr int first_row(int thread) {
    return thread / kThreadsPerRow;
  }
  ATTNBENCH_HOST_DEVICE static constexpr int chunk(int thread, int round) {
    return thread % kThreadsPerRow + round * kThreadsPerRow;
  }
  ATTNBENCH_HOST_DEVICE static constexpr bool copies(int thread, int round) {
    return kChunks == kWidthChunks || chunk(thread, round) < kChunks;
  }
};

// ---- ldmatrix.x4 row addresses: lane l addresses row (l % 8) of matrix l / 8 --------------------

// A operand (16 x 16, row-major source): matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7),
// (rows 0-7, k 8-15), (rows 8-15, k 8-15) = A's registers a0a1, a2a3, a4a5, a6a7.
ATTNBENCH_HOST_DEVICE constexpr int a_lane_row(int lane) { return lane % kMmaM; }
ATTNBENCH_HOST_DEVICE constexpr int a_lane_chunk(int lane) { return lane / kMmaM; }
// B operand from an (n, k) row-major source (K: keys x dims), two 8-wide n tiles: matrices
// (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) = b0b1, b2b3 of n tile 0,
// then of n tile 1.
ATTNBENCH_HOST_DEVICE constexpr int b_lane_row(int lane) {
  return lane % kMmaN + (lane / (2 * kMmaN)) * kMmaN;
}
ATTNBENCH_HOST_DEVICE constexpr int b_lane_chunk(int lane) { return (lane / kMmaN) % 2; }
// B operand from a (k, n) row-major source (V: keys x dims) through ldmatrix.trans: matrices
// (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15) = b0b1, b2b3 of n tile 0,
// then of n tile 1.
ATTNBENCH_HOST_DEVICE constexpr int bt_lane_row(int lane) {
  return lane % kMmaN + ((lane / kMmaN) % 2) * kMmaN;
}
ATTNBENCH_HOST_DEVICE constexpr int bt_lane_chunk(int lane) { return lane / (2 * kMmaN); }

// ldmatrix addressing without a register per address. A lane reads row `row` (+ a multiple of 8
// rows) at chunk 2c + lane_chunk (lane_chunk 0 or 1) for c = 0, 1, 2, ...: the XOR with row % 8
// changes only the low three bits of the chunk, so the swizzled chunk is
// 8 * (c / 4) + ((2 * (c % 4)) ^ lane_chunk ^ row % 8): four per-lane offsets (c % 4) plus
// compile-time constants. Without this, ptxas keeps one live register per (row tile, chunk) pair
// and spills at d 128.
constexpr int kChunkPairsPerSwizzle = kSwizzleRows / 2;

template <int Width>
struct LaneOffsets {
  int element[kChunkPairsPerSwizzle];  // offset of (row, chunk 2c + lane_chunk) for c = 0..3

  ATTNBENCH_HOST_DEVICE constexpr LaneOffsets(int row, int lane_chunk) : element{} {
    const int flip = lane_chunk ^ (row % kSwizzleRows);
    for (int c = 0; c < kChunkPairsPerSwizzle; ++c) {
      element[c] = row * Width + ((2 * c) ^ flip) * kChunkElements;
    }
  }
  // Element offset of (row + extra_rows, chunk 2 * chunk_pair + lane_chunk); extra_rows % 8 == 0
  // and chunk_pair are compile-time constants in every use, so this folds to one add.
  ATTNBENCH_HOST_DEVICE constexpr int elements(int extra_rows, int chunk_pair) const {
    return element[chunk_pair % kChunkPairsPerSwizzle] + extra_rows * Width +
           (chunk_pair / kChunkPairsPerSwizzle) * kSwizzleRows * kChunkElements;
  }
  ATTNBENCH_HOST_DEVICE constexpr uint32_t bytes(int extra_rows, int chunk_pair) const {
    return static_cast<uint32_t>(elements(extra_rows, chunk_pair) * kElementBytes);
  }
};

}  // namespace attnbench::flash2
