// Tensor maps for the TMA (cp.async.bulk.tensor): what a Hopper kernel's plan encodes on the
// host and passes to the kernel as a __grid_constant__ CUtensorMap. On a GPU the driver encodes
// it (cuTensorMapEncodeTiled, reached through cudaGetDriverEntryPointByVersion: CUDA 13 drops
// cudaGetDriverEntryPoint); for the emulated device the same spec fills the emulator's map
// (kernels/emu/tma.h) inside the 128 opaque bytes. Either way the spec is checked here first,
// against the ISA's rules, with a one-line message naming the rule.
#pragma once

#include <array>
#include <cstdint>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/kernel.h"

namespace attnbench::gpu {
inline namespace ATTNBENCH_TARGET {

struct TensorMapSpec {
  static constexpr int kMaxRank = 4;
  DType element = DType::bf16;
  int rank = 2;                                  // 2..4 (the kernels' boxes)
  const void* base = nullptr;                    // 16-byte aligned
  std::array<int64_t, kMaxRank> dims{};          // elements, innermost first
  std::array<int64_t, kMaxRank> stride_bytes{};  // [0] = the element's size; others multiples of 16
  std::array<int, kMaxRank> box{};               // elements per dimension, 1..256
  int swizzle_bytes = 0;                         // 0, 32, 64 or 128: the box's inner bytes fit it
  bool fill_nan = false;                         // elements outside the tensor: NaN, else zero
};

// "tensor map: <rule>" when `spec` breaks one, else Ok.
Status check_tensor_map(const TensorMapSpec& spec);
Status encode_tensor_map(const TensorMapSpec& spec, CUtensorMap& map);

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::gpu
