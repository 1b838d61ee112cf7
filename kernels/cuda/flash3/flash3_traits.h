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

namespace attnbench::flash3 {

constexpr int kWarpgroupThreads = 128;
constexpr int kWgmmaM = 64;         // rows of one wgmma
constexpr int kWgmmaK = 16;         // depth of one 16-bit wgmma
constexpr int kElementBytes = 2;    // fp16 / bf16
constexpr int kSwizzleBytes = 128;  // every tile: TMA's and wgmma's 128-byte swizzle
constexpr int kBoxColumns = kSwizzleBytes / kElementBytes;  // 64 elements per swizzled row
constexpr int kSwizzleAtomBytes = 8 * kSwizzleBytes;        // 8 rows: one swizzle pattern
constexpr size_t kTileAlignment = 1024;  // a 128-byte swizzle pattern starts 1024-aligned

// cuda.flash3_wg1: one warpgroup, 64 query rows; Q, K and V arrive by TMA (K and V through a ring
// of kStages stages), S = Q K^T and O += P V are wgmma (Q and K from shared memory, P from
// registers, V N-major from shared memory); each wgmma batch is waited for at once.
template <int HeadDim>
struct Wg1Traits {
  static constexpr int kThreads = kWarpgroupThreads;
  static constexpr int kBlockQ = kWgmmaM;
  static constexpr int kBlockK = 128;
  static constexpr int kStages = 2;
  static constexpr int kBoxes = HeadDim / kBoxColumns;  // TMA boxes across a row of d
  static constexpr uint32_t kQBoxBytes = kBlockQ * kSwizzleBytes;
  static constexpr uint32_t kKvBoxBytes = kBlockK * kSwizzleBytes;
  static constexpr uint32_t kQBytes = kBoxes * kQBoxBytes;
  static constexpr uint32_t kKvBytes = kBoxes * kKvBoxBytes;  // one K or one V tile
  // Q, then K's stages, then V's, from a 1024-aligned start inside the dynamic shared memory.
  static constexpr size_t kSharedBytes = kTileAlignment + kQBytes + 2 * kStages * size_t{kKvBytes};

  static_assert(HeadDim % kBoxColumns == 0, "d is a whole number of 128-byte swizzled rows");
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "wgmma N = 64, 128 or 256");
  static_assert(kBlockK == 128, "S = Q K^T is one wgmma of N = 128 per k16 step");
};

// cuda.flash3_ws: warp specialization. A producer warpgroup (one elected thread of its first warp
// issues every TMA load; its registers given up with setmaxnreg) and two consumer warpgroups of
// 64 query rows each (registers taken); K and V through a ring of kStages stages, each with a
// "full" mbarrier (the TMA's bytes) and an "empty" one (every consumer thread's arrival once its
// P V wgmma on the stage has been waited for).
// cuda.flash3 (every head dim) shares the shape: 128 keys per tile up to d = 128, 64 at d = 256
// (its O takes 128 registers per thread; the tiles 192 KiB of shared memory).
template <int HeadDim>
struct WsTraits {
  static constexpr int kConsumers = 2;
  static constexpr int kConsumerThreads = kConsumers * kWarpgroupThreads;
  static constexpr int kThreads = kWarpgroupThreads + kConsumerThreads;
  static constexpr int kBlockQ = kConsumers * kWgmmaM;
  static constexpr int kBlockK = HeadDim <= 128 ? 128 : 64;
  static constexpr int kStages = 2;
  // 65536 registers: 128 x 24 + 256 x 240 = 64512 (FlashAttention-3's split for two consumers).
  static constexpr int kProducerRegisters = 24;
  static constexpr int kConsumerRegisters = 240;
  static constexpr int kBoxes = HeadDim / kBoxColumns;
  static constexpr uint32_t kQBytes = kBoxes * kBlockQ * kSwizzleBytes;
  static constexpr uint32_t kKvBytes = kBoxes * kBlockK * kSwizzleBytes;
  static constexpr size_t kSharedBytes = kTileAlignment + kQBytes + 2 * kStages * size_t{kKvBytes};

  static_assert(HeadDim % kBoxColumns == 0, "d is a whole number of 128-byte swizzled rows");
  static_assert(HeadDim == 64 || HeadDim == 128 || HeadDim == 256, "wgmma N = 64, 128 or 256");
  static_assert(kWarpgroupThreads * kProducerRegisters + kConsumerThreads * kConsumerRegisters <=
                    65536,
                "the register file holds the rebalanced warpgroups");
  static_assert(kSharedBytes <= 227 * 1024, "the tiles fit an H100/H200's 227 KiB per block");
};

}  // namespace attnbench::flash3
