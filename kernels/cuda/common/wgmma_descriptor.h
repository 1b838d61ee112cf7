// The shared-memory matrix descriptor of wgmma.mma_async (PTX ISA, "Matrix Descriptor Format"):
// one 64-bit word that tells the tensor cores where an operand tile starts in shared memory and
// how its 8x16-byte core matrices are laid out. Encoded by the kernels (on the GPU and under emu)
// and decoded by the emulated wgmma (kernels/emu/wgmma.cpp), so the bit layout lives here once.
//
//   bits  0-13  start address >> 4          bits 32-45  stride byte offset (SBO) >> 4
//   bits 16-29  leading byte offset (LBO) >> 4
//   bits 49-51  base offset (0: the tile's swizzle pattern starts at an aligned address)
//   bits 62-63  swizzle: 0 none (interleaved core matrices), 1 128 bytes, 2 64 bytes, 3 32 bytes
//
// The operand layouts the descriptor describes (bytes; r the row of an M or N extent, k the
// column along K; W the swizzle's width in bytes, 16 without swizzle; every address then has the
// swizzle applied to its absolute bits, as the TMA that wrote the tile did):
//   K-major, swizzled:   start + (r / 8) SBO + (r % 8) W + 2k              (LBO unused)
//   K-major, none:       start + (r / 8) SBO + (k / 8) LBO + (r % 8) 16 + 2 (k % 8)
//   MN-major, swizzled:  start + (r / (W/2)) LBO + 2 (r % (W/2)) + (k / 8) SBO + (k % 8) W
//   MN-major, none:      start + (r / 8) SBO + 2 (r % 8) + (k / 8) LBO + (k % 8) 16
// (16-bit elements; a K-major tile's k16 step advances the start address by 32 bytes.)
#pragma once

#include <cstdint>

#include "reference/mask.h"  // ATTNBENCH_HOST_DEVICE

namespace attnbench::gpu {

struct WgmmaOperand {
  uint32_t start = 0;          // shared-state-space address of the tile
  uint32_t leading_bytes = 0;  // LBO
  uint32_t stride_bytes = 0;   // SBO
  uint32_t swizzle_bytes = 0;  // 0, 32, 64 or 128
  uint32_t base_offset = 0;    // 0..7
};

namespace wgmma_bits {
constexpr uint64_t kField14 = 0x3fff;
constexpr int kLeadingShift = 16;
constexpr int kStrideShift = 32;
constexpr int kBaseOffsetShift = 49;
constexpr int kSwizzleShift = 62;
}  // namespace wgmma_bits

ATTNBENCH_HOST_DEVICE constexpr uint64_t swizzle_code(uint32_t swizzle_bytes) {
  return swizzle_bytes == 128 ? 1 : swizzle_bytes == 64 ? 2 : swizzle_bytes == 32 ? 3 : 0;
}

ATTNBENCH_HOST_DEVICE constexpr uint64_t encode_wgmma_descriptor(const WgmmaOperand& operand) {
  using namespace wgmma_bits;
  return ((uint64_t{operand.start} >> 4) & kField14) |
         (((uint64_t{operand.leading_bytes} >> 4) & kField14) << kLeadingShift) |
         (((uint64_t{operand.stride_bytes} >> 4) & kField14) << kStrideShift) |
         ((uint64_t{operand.base_offset} & 7) << kBaseOffsetShift) |
         (swizzle_code(operand.swizzle_bytes) << kSwizzleShift);
}

ATTNBENCH_HOST_DEVICE constexpr WgmmaOperand decode_wgmma_descriptor(uint64_t descriptor) {
  using namespace wgmma_bits;
  constexpr uint32_t kSwizzleBytes[4] = {0, 128, 64, 32};
  WgmmaOperand operand;
  operand.start = static_cast<uint32_t>((descriptor & kField14) << 4);
  operand.leading_bytes = static_cast<uint32_t>(((descriptor >> kLeadingShift) & kField14) << 4);
  operand.stride_bytes = static_cast<uint32_t>(((descriptor >> kStrideShift) & kField14) << 4);
  operand.base_offset = static_cast<uint32_t>((descriptor >> kBaseOffsetShift) & 7);
  operand.swizzle_bytes = kSwizzleBytes[(descriptor >> kSwizzleShift) & 3];
  return operand;
}

}  // namespace attnbench::gpu
