// cuda.flash2's compile-time shape decisions and the key-tile arithmetic of one query block.
// Host and device code alike include this header (no CUDA types in it), so the CPU tests check
// the tile shapes, the shared-memory budget and the visible-tile ranges without a GPU.
//
// Vocabulary: a CTA owns one query block of kBlockQ rows (FlashAttention's Br) of one
// (batch, query head) pair; it walks the key/value tiles of kBlockK keys (Bc) that any of its rows
// can see. Each warp owns 16 consecutive query rows — one mma.sync m16n8k16 row tile — so a row's
// max and sum never leave its warp (four lanes share a row).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/common/visible_tiles.h"
#include "reference/mask.h"

namespace attnbench::flash2 {

// ---- the hardware's fixed shapes ----------------------------------------------------------------

constexpr int kWarpSize = 32;
constexpr int kMmaM = 16;  // mma.sync.m16n8k16: A is 16 x 16, B 16 x 8, C/D 16 x 8
constexpr int kMmaN = 8;
constexpr int kMmaK = 16;
constexpr int kRowsPerWarp = kMmaM;  // a warp owns one MMA row tile of queries
constexpr int kElementBytes = 2;     // fp16 and bf16
// cp.async.cg moves 16 bytes, and an ldmatrix row is 16 bytes: the unit of every copy and of the
// swizzle (a "chunk").
constexpr int kChunkBytes = 16;
constexpr int kChunkElements = kChunkBytes / kElementBytes;
// ldmatrix reads 8 rows of one 16-byte chunk column at a time. Shared memory has 32 banks of 4
// bytes, 128 bytes a row of banks: XOR-ing the chunk index with (row % 8) puts those 8 chunks
// in 8 different 16-byte bank groups, so neither ldmatrix nor the cp.async stores conflict.
constexpr int kSwizzleRows = 8;
// A shared-memory row holds whole swizzle groups of 8 chunks (64 elements): head dims 80 and 96
// sit in 128-wide rows whose last chunks are never copied nor read (row_width).
constexpr int kSwizzleColumns = kSwizzleRows * kChunkElements;
constexpr int row_width(int columns) {
  return (columns + kSwizzleColumns - 1) / kSwizzleColumns * kSwizzleColumns;
}
// The largest dynamic shared memory one CTA may opt into: sm_80 163 KiB (A100), sm_90 227 KiB.
// The tiles are sized to fit the smaller, so one build serves both.
constexpr size_t kSm80MaxSharedBytes = 163 * 1024;

// ---- tile sizes ---------------------------------------------------------------------------------

struct TileShape {
  int block_q;            // query rows per CTA (Br)
  int block_k;            // keys per K/V tile (Bc)
  int warps;              // block_q / 16: each warp owns 16 query rows
  int stages;             // K/V tiles resident in shared memory (the cp.async pipeline depth)
  bool q_in_registers;    // Q's A fragments held in registers for the whole key loop
  int min_blocks_per_sm;  // __launch_bounds__'s second argument: the register budget
};

// One place for every head dim's tiling. The reasons for the numbers:
//  - Br = 128 query rows with 8 warps (FlashAttention-2's Br for these head dims; its A100/H100
//    kernels split 128 rows over 4 warps of 32, we give each warp one 16-row MMA tile: no warp
//    reduction, and the accumulators stay under 255 registers, so no spills). 128 rows per CTA
//    halve the K/V traffic from L2 against 64 rows, at the cost of the decode shapes
//    (seqlen_q <= 16), which leave most of the block idle.
//  - Bc = 64 keys for d up to 128 (64, 80, 96, 128): S is 16 x 64 per warp = 32 fp32 registers a
//    thread, O 16 x d, Q's fragments d / 4 more. ptxas settles at ~175 (d 64) and ~225 (d 128)
//    registers, so one 256-thread CTA per SM (two would need <= 128; d 64 spilled at that cap).
//  - d 192 with d_v 128 (DeepSeek's MLA prefill): Q's fragments (48 registers) and O (64) are
//    d 128's plus 16, so Bc drops to 32 (S = 16 registers) to stay near d 128's budget; the
//    32-key tiles also keep Q + 3 stages at 108 KiB, where 64-key ones would need 168.
//  - d 256: O alone is 128 registers a thread, so Q is read from shared memory at every key tile
//    instead of living in registers, and Bc drops to 32 (S = 16 registers): ~250 registers.
//  - 3 stages everywhere: with one 8-warp CTA per SM there are too few warps to hide an L2 miss
//    behind the others' math, so two tiles load while one computes; registers, not shared
//    memory, bound the occupancy anyway. Shared memory = Q + 3 x (K + V), rows row_width wide:
//    d 64: 16 + 3 x 16 = 64 KiB; d 80, 96, 128: 32 + 3 x 32 = 128 KiB; d 192/128:
//    48 + 3 x (12 + 8) = 108 KiB; d 256: 64 + 3 x 32 = 160 KiB, within the A100's 163 KiB.
constexpr TileShape tile_shape(int head_dim_qk, int head_dim_v) {
  if (head_dim_qk <= 128 && head_dim_v <= 128) return {128, 64, 8, 3, true, 1};
  if (head_dim_v <= 128) return {128, 32, 8, 3, true, 1};
  return {128, 32, 8, 3, false, 1};
}

// HeadDim is Q's and K's, HeadDimV V's and O's (DeepSeek's 192/128; the same elsewhere).
template <int HeadDim, int HeadDimV = HeadDim>
struct Traits {
  static constexpr TileShape kShape = tile_shape(HeadDim, HeadDimV);
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kHeadDimV = HeadDimV;
  static constexpr int kBlockQ = kShape.block_q;
  static constexpr int kBlockK = kShape.block_k;
  static constexpr int kWarps = kShape.warps;
  static constexpr int kThreads = kWarps * kWarpSize;
  static constexpr int kStages = kShape.stages;
  static constexpr bool kQInRegisters = kShape.q_in_registers;
  static constexpr int kMinBlocksPerSm = kShape.min_blocks_per_sm;

  // Shared-memory row widths: Q's and K's rows, V's rows. O passes through Q's tile on its way out.
  static constexpr int kQkWidth = row_width(HeadDim);
  static constexpr int kVWidth = row_width(HeadDimV);
  static constexpr int kOutChunksPerRow = HeadDimV / kChunkElements;  // O's 16-byte chunks a row
  static constexpr int kKeyTiles = kBlockK / kMmaN;   // S's 8-key MMA column tiles per warp
  static constexpr int kDimTiles = HeadDimV / kMmaN;  // O's 8-wide MMA column tiles per warp
  static constexpr int kDimSteps = HeadDim / kMmaK;   // k-steps of S = Q K^T
  static constexpr int kKeySteps = kBlockK / kMmaK;   // k-steps of O += P V

  static constexpr size_t kQTileElements = static_cast<size_t>(kBlockQ) * kQkWidth;
  static constexpr size_t kKTileElements = static_cast<size_t>(kBlockK) * kQkWidth;
  static constexpr size_t kVTileElements = static_cast<size_t>(kBlockK) * kVWidth;
  // Q, then kStages K tiles, then kStages V tiles.
  static constexpr size_t kSharedBytes =
      (kQTileElements + kStages * (kKTileElements + kVTileElements)) * kElementBytes;
  // cp.async.wait_group arguments (see the kernel's pipeline comment): how many younger groups
  // may still be in flight when Q (the oldest group, followed by kStages - 1 tiles), then tile t
  // (followed by tiles t + 1 .. t + kStages - 2), must have landed.
  static constexpr int kPendingWhenQReady = kStages - 1;
  static constexpr int kPendingWhenTileReady = kStages - 2;

  static_assert(HeadDim % kMmaK == 0, "S = Q K^T steps through the head dim 16 at a time");
  static_assert(HeadDimV % kMmaK == 0,
                "V fragments are loaded two 8-wide tiles at a time, and a warp's 16 rows of O "
                "leave as the same number of 16-byte chunks per lane");
  static_assert(kVWidth <= kQkWidth, "O is staged through Q's tile on its way out");
  static_assert(kBlockQ == kWarps * kRowsPerWarp, "each warp owns exactly one 16-row MMA tile");
  static_assert(kBlockK % (2 * kMmaN) == 0,
                "K fragments are loaded two 8-key tiles at a time (ldmatrix.x4)");
  static_assert(kBlockK % kMmaK == 0, "P V steps through the keys 16 at a time");
  static_assert(kStages >= 2, "at least double buffering: tile t + 1 loads while t computes");
  static_assert(kSharedBytes <= kSm80MaxSharedBytes,
                "the tiles must fit an A100's shared memory (163 KiB per CTA)");
};

// ---- the backward's tiles (flash2_backward_kernel.cuh) -------------------------------------------

// A backward CTA owns one key block of kBlockK keys of one (batch, kv head): each of its 4 warps
// owns 16 keys (one MMA row tile of S^T = K Q^T) and keeps their dK and dV in registers while
// the CTA walks the query tiles (kBlockQ rows, double-buffered through cp.async) of every query
// head of the group that can see the block. Registers bound the head dim: dK and dV take
// 2 x d / 2 fp32 a thread, S^T and dP^T 32 each, so d 128 fits in ~200 and d 256 does not
// (FlashAttention-2 splits d 256 across more warps; this kernel instantiates 64 and 128).
// Shared memory: K and V of the block, kStages x (Q, dO) tiles, the block's dS^T (the dQ product
// reads it across warps), and LSE and D of each staged query tile:
//   d 64: 8 + 8 + 2 x 16 + 8 + 1 = 57 KiB; d 128: 16 + 16 + 2 x 32 + 8 + 1 = 105 KiB.
constexpr int kBackwardBlockK = 64;  // keys per backward CTA: 4 warps x 16

template <int HeadDim>
struct BackwardTraits {
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kBlockK = kBackwardBlockK;
  static constexpr int kBlockQ = 64;  // query rows per tile of the inner loop
  static constexpr int kWarps = kBlockK / kRowsPerWarp;
  static constexpr int kThreads = kWarps * kWarpSize;
  static constexpr int kStages = 2;
  static constexpr int kQueryTiles = kBlockQ / kMmaN;  // S^T's 8-query MMA column tiles
  static constexpr int kDimTiles = HeadDim / kMmaN;    // dK's and dV's 8-wide column tiles
  static constexpr int kDimSteps = HeadDim / kMmaK;    // k-steps of S^T and dP^T
  static constexpr int kQuerySteps = kBlockQ / kMmaK;  // k-steps of dV, dK (over queries)
  static constexpr int kKeySteps = kBlockK / kMmaK;    // k-steps of dQ (over keys)
  static constexpr int kChunksPerRow = HeadDim / kChunkElements;

  static constexpr size_t kTileElements = static_cast<size_t>(kBlockK) * HeadDim;  // K, V, Q, dO
  static constexpr size_t kDsElements = static_cast<size_t>(kBlockK) * kBlockQ;
  static constexpr size_t kStatsFloats = 2 * kBlockQ;  // LSE (in base 2), then D
  static constexpr size_t kSharedBytes =
      (2 + 2 * kStages) * kTileElements * kElementBytes + kDsElements * kElementBytes +
      kStages * kStatsFloats * sizeof(float);

  static_assert(HeadDim == 64 || HeadDim == 128, "the backward is instantiated for d 64 and 128");
  static_assert(kBlockQ == kBlockK, "K, V, Q and dO tiles share one shape and one copy pattern");
  static_assert(kBlockQ / kChunkElements == kSwizzleRows,
                "dS^T's rows are kBlockQ wide: 8 chunks, one swizzle group");
  static_assert((kBlockK * kChunksPerRow) % kThreads == 0, "every thread copies as many chunks");
  static_assert(kSharedBytes <= kSm80MaxSharedBytes, "the tiles must fit an A100's shared memory");
};

// How the backward adds dQ over the key blocks: cuda.flash2 with fp32 atomics into one
// accumulator (one key block a CTA), cuda.flash2_deterministic with plain adds into one
// accumulator per split (a run of key blocks a CTA), summed in split order afterwards.
enum class DqAccumulation { atomic, per_split };
constexpr int kMaxDqSplits = 8;  // the per-split accumulators' memory: 8 x dQ in fp32 at most

struct DqSplit {
  int splits;              // accumulators
  int key_blocks_per_cta;  // key blocks one CTA walks
};

constexpr DqSplit dq_split(int64_t seqlen_k, DqAccumulation accumulation) {
  const auto key_blocks = static_cast<int>((seqlen_k + kBackwardBlockK - 1) / kBackwardBlockK);
  if (accumulation == DqAccumulation::atomic || key_blocks <= 1) return {1, 1};
  const int splits = key_blocks < kMaxDqSplits ? key_blocks : kMaxDqSplits;
  const int per_cta = (key_blocks + splits - 1) / splits;
  return {(key_blocks + per_cta - 1) / per_cta, per_cta};
}

// ---- key tiles of one query block: kernels/cuda/common/visible_tiles.h, shared with flash3 ----
using gpu::block_key_tiles;
using gpu::BlockKeyTiles;

}  // namespace attnbench::flash2
