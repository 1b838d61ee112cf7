// The tile shapes and shared-memory budget of cuda.flash3's stages. Host and device code include
// this header (no CUDA types in it): the plan reads the shared-memory size, the CPU tests the
// shapes.
//
// Vocabulary as in cuda.flash2: a CTA owns kBlockQ query rows of one (batch, query head) and
// visits kBlockK keys per tile. On Hopper a warpgroup (4 warps, 128 threads) issues wgmma
// m64nNk16: 64 query rows per warpgroup, warp w owning rows 16w..16w+15 of them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "reference/mask.h"  // ATTNBENCH_HOST_DEVICE

namespace attnbench::flash3 {

constexpr int kWarpgroupThreads = 128;
constexpr int kWgmmaM = 64;         // rows of one wgmma
constexpr int kWgmmaK = 16;         // depth of one 16-bit wgmma
constexpr int kElementBytes = 2;    // fp16 / bf16
constexpr int kRowsPerThread = 2;   // a thread's rows of a wgmma m64 accumulator (8 apart)
constexpr int kSwizzleBytes = 128;  // every tile: TMA's and wgmma's 128-byte swizzle
constexpr int kBoxColumns = kSwizzleBytes / kElementBytes;  // 64 elements per swizzled row
constexpr int kSwizzleAtomBytes = 8 * kSwizzleBytes;        // 8 rows: one swizzle pattern
constexpr size_t kTileAlignment = 1024;  // a 128-byte swizzle pattern starts 1024-aligned
constexpr size_t kSharedBytesPerBlock = 227 * 1024;  // an H100's or H200's most for one block

// A shared-memory address as the 128-byte swizzle places it (TMA's and wgmma's): its 16-byte chunk
// within a 128-byte row XORed with the row's index within its 8-row pattern.
ATTNBENCH_HOST_DEVICE constexpr uint32_t swizzled_128(uint32_t address) {
  return address ^ (((address >> 7) & 7u) << 4);
}

// A tile row's width in shared memory: d rounded up to whole TMA boxes of 64 elements. At d 80 and
// 96 a row is 128 wide: the TMA fills the columns past the tensor's d with zeros (the box reads
// past the map's innermost dimension), S = Q K^T steps through d itself (5 or 6 k16 steps, not 8)
// and O += P V runs at N = 128, its columns past d_v products of V's zeros that the output's TMA
// store leaves out (past the output map's d). wgmma takes N = 80 or 96 too, but an N-major
// operand in 128-byte swizzle covers whole 64-column patterns, so V's tile is 128 wide either way.
ATTNBENCH_HOST_DEVICE constexpr int row_width(int head_dim) {
  return (head_dim + kBoxColumns - 1) / kBoxColumns * kBoxColumns;
}
ATTNBENCH_HOST_DEVICE constexpr uint32_t tile_bytes(int width, int rows) {
  return static_cast<uint32_t>(width / kBoxColumns * rows * kSwizzleBytes);
}

// The head dims the warp-specialized tiles take: d_qk in whole k16 steps up to 256 (S = Q K^T);
// d_v in whole 16-column n-blocks, its row width one wgmma N (64, 128 or 256: O += P V) and no
// wider than d_qk's (the output tile is staged over the consumer's rows of Q). The time model
// prices the same set.
constexpr bool takes_head_dims(int head_dim, int head_dim_v) {
  const int v_width = row_width(head_dim_v);
  return head_dim % kWgmmaK == 0 && head_dim <= 256 && head_dim_v % kWgmmaK == 0 &&
         (v_width == 64 || v_width == 128 || v_width == 256) && v_width <= row_width(head_dim);
}

// The tiles of a stage in shared memory: Q (kBlockQ x d_qk), then K's kStages stages (kBlockK x
// d_qk), then V's (kBlockK x d_v), every tile row_width / 64 TMA boxes of 128-byte swizzled rows,
// from a 1024-aligned start inside the dynamic shared memory (kTileAlignment bytes of slack for
// it). HeadDimV differs from HeadDim at DeepSeek's 192/128 only.
template <int HeadDim_, int BlockQ, int BlockK, int Stages, int HeadDimV_ = HeadDim_>
struct TileShape {
  static constexpr int kHeadDim = HeadDim_;
  static constexpr int kHeadDimV = HeadDimV_;
  static constexpr int kQkWidth = row_width(kHeadDim);
  static constexpr int kVWidth = row_width(kHeadDimV);  // also O's accumulator columns
  static constexpr int kBlockQ = BlockQ;
  static constexpr int kBlockK = BlockK;
  static constexpr int kStages = Stages;
  static constexpr uint32_t kQBytes = tile_bytes(kQkWidth, kBlockQ);
  static constexpr uint32_t kKBytes = tile_bytes(kQkWidth, kBlockK);
  static constexpr uint32_t kVBytes = tile_bytes(kVWidth, kBlockK);
  static constexpr size_t kSharedBytes =
      kTileAlignment + kQBytes + kStages * (size_t{kKBytes} + kVBytes);

  static_assert(takes_head_dims(kHeadDim, kHeadDimV),
                "d_qk in k16 steps up to 256; d_v in 16-column n-blocks of one wgmma N, no wider");
  static_assert(kBlockK == 64 || kBlockK == 128 || kBlockK == 176,
                "S = Q K^T is one wgmma of N = kBlockK (ptx.cuh wraps 64, 128, 176)");
  static_assert(kSharedBytes <= kSharedBytesPerBlock, "the tiles fit an H100/H200's 227 KiB");
};

// The most stages of (one K and one V tile of block_k keys) that fit beside Q's tile.
constexpr int stages_that_fit(int head_dim, int head_dim_v, int block_q, int block_k) {
  const size_t stage_bytes =
      size_t{tile_bytes(row_width(head_dim), block_k)} + tile_bytes(row_width(head_dim_v), block_k);
  return static_cast<int>(
      (kSharedBytesPerBlock - kTileAlignment - tile_bytes(row_width(head_dim), block_q)) /
      stage_bytes);
}

// cuda.flash3_wg1: one warpgroup, 64 query rows; Q, K and V arrive by TMA (K and V through a ring
// of 2 stages), S = Q K^T and O += P V are wgmma (Q and K from shared memory, P from registers,
// V N-major from shared memory); each wgmma batch is waited for at once.
template <int HeadDim>
struct Wg1Traits : TileShape<HeadDim, kWgmmaM, 128, 2> {
  static constexpr int kThreads = kWarpgroupThreads;
};

// cuda.flash3_ws: warp specialization. A producer warpgroup (one elected thread of its first warp
// issues every TMA load; its registers given up with setmaxnreg) and two consumer warpgroups of
// 64 query rows each (registers taken); K and V each through a ring of as many stages as shared
// memory holds (3 at d 128, 6 at d 64, 2 at d 256), each stage with a "full" mbarrier (the TMA's
// bytes) and an "empty" one (every consumer thread's arrival once its wgmma reading the stage
// has been waited for).
// cuda.flash3 (every head dim) shares the shape: 128 keys per tile up to d_v = 128, 64 at d_v =
// 256 (its O takes 128 registers per thread); d_qk sets only the k-steps of S and the bytes of Q
// and K (192/128: 2 stages of 128 keys fit).
// Stages: the ring's depth, as many as fit unless a variant fixes fewer (cuda.flash3[stages=2]).
// BlockK: a variant may take FlashAttention-3's 176 keys at d 128 (cuda.flash3[block_n=176,...]:
// 2 stages fit).
constexpr int ws_block_k(int head_dim_v) { return row_width(head_dim_v) <= 128 ? 128 : 64; }
constexpr int ws_stages(int head_dim, int head_dim_v, int block_k) {
  return stages_that_fit(head_dim, head_dim_v, 2 * kWgmmaM, block_k);
}
constexpr int ws_stages(int head_dim, int head_dim_v) {
  return ws_stages(head_dim, head_dim_v, ws_block_k(head_dim_v));
}
template <int HeadDim, int HeadDimV = HeadDim, int Stages = ws_stages(HeadDim, HeadDimV),
          int BlockK = ws_block_k(HeadDimV)>
struct WsTraits : TileShape<HeadDim, 2 * kWgmmaM, BlockK, Stages, HeadDimV> {
  static constexpr int kConsumers = 2;
  static constexpr int kConsumerThreads = kConsumers * kWarpgroupThreads;
  static constexpr int kThreads = kWarpgroupThreads + kConsumerThreads;
  // 65536 registers: 128 x 24 + 256 x 240 = 64512 (FlashAttention-3's split for two consumers).
  static constexpr int kProducerRegisters = 24;
  static constexpr int kConsumerRegisters = 240;
  // What each thread holds at launch, before setmaxnreg (65536 / 384, rounded down to a multiple
  // of 8): ptxas's count, pinned by StaticCuda; it leaves room for one CTA per SM.
  static constexpr int kLaunchRegisters = 168;

  static_assert(kConsumers * kWgmmaM == WsTraits::kBlockQ, "each consumer owns 64 query rows");
  static_assert(kWarpgroupThreads * kProducerRegisters + kConsumerThreads * kConsumerRegisters <=
                    65536,
                "the register file holds the rebalanced warpgroups");
};

}  // namespace attnbench::flash3
