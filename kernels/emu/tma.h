// The emulated Tensor Memory Accelerator (issue 15, item 1): a tensor map (what
// cuTensorMapEncodeTiled encodes on a GPU) and the box copy cp.async.bulk.tensor makes from it.
// A box of up to four dimensions is read from global memory at a coordinate, elements outside
// the tensor filled (zeros, or NaN with the map's NaN fill), and written to shared memory with
// the map's swizzle applied to the absolute shared-address bits (so a destination that is not
// aligned as the swizzle needs lands where the hardware would put it, not where the kernel
// hoped). The copy completes on an mbarrier: its bytes count down the phase's transactions. A
// store takes the box from shared memory (unswizzling it) back to global memory.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace attnbench::emu {

enum class Swizzle : uint8_t { none = 0, bytes32 = 32, bytes64 = 64, bytes128 = 128 };

struct TensorMap {
  static constexpr unsigned kMaxRank = 4;
  unsigned rank = 0;
  unsigned element_bytes = 0;
  Swizzle swizzle = Swizzle::none;
  bool fill_nan = false;
  const void* base = nullptr;
  std::array<uint64_t, kMaxRank> dims{};          // elements, innermost first
  std::array<uint64_t, kMaxRank> stride_bytes{};  // [0] = element_bytes
  std::array<uint32_t, kMaxRank> box{};           // elements, innermost first
  uint64_t box_bytes() const;
};

// The shared-memory address the byte at `address` goes to under `swizzle`: address bits [4, 4+b)
// XORed with bits [7, 7+b), b = 1, 2, 3 for 32, 64, 128 bytes (the 16-byte chunks of each
// 128-byte row permuted by the row's index within a 256, 512 or 1024-byte pattern).
uint32_t swizzled_address(uint32_t address, Swizzle swizzle);

// The box at `coordinates` (innermost first) as the TMA reads it: bytes in box order, elements
// outside the tensor filled; `check_read` is shown every element read from global memory.
std::vector<unsigned char> gather_box(
    const TensorMap& map, const std::array<int32_t, TensorMap::kMaxRank>& coordinates,
    const std::function<void(const void* element, size_t bytes)>& check_read);

// The reverse, cp.async.bulk.tensor's store: `bytes` (in box order) written to the box at
// `coordinates`, elements outside the tensor skipped; `write` does each element's write (its
// global address, the box's bytes).
void scatter_box(
    const TensorMap& map, const std::array<int32_t, TensorMap::kMaxRank>& coordinates,
    const std::vector<unsigned char>& bytes,
    const std::function<void(void* element, const unsigned char* from, size_t bytes)>& write);

}  // namespace attnbench::emu
