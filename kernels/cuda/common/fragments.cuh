// Register-level helpers of the tensor-core kernels (cuda.flash2, cuda.flash3), one definition
// for both: the element type of a DType, two floats packed as an MMA fragment register, and the
// reductions over the four lanes that share a row of an mma.sync or wgmma accumulator (lanes
// 4g .. 4g + 3).
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/kernel.h"

namespace attnbench::gpu {
inline namespace ATTNBENCH_TARGET {

constexpr unsigned kFullWarp = 0xffffffffu;

template <DType kDtype>
struct ElementOf;
template <>
struct ElementOf<DType::f16> {
  using type = __half;
};
template <>
struct ElementOf<DType::bf16> {
  using type = __nv_bfloat16;
};
template <>
struct ElementOf<DType::e4m3> {
  using type = uint8_t;  // the stored bits (ptx::pack_e4m3x4 writes them)
};

__device__ __forceinline__ float to_float(__half value) { return __half2float(value); }
__device__ __forceinline__ float to_float(__nv_bfloat16 value) { return __bfloat162float(value); }

// Two floats rounded to the element type, `low` in the low 16 bits: the order of an MMA
// fragment register (its lower column first).
template <typename Element>
__device__ __forceinline__ uint32_t pack_pair(float low, float high);
template <>
__device__ __forceinline__ uint32_t pack_pair<__half>(float low, float high) {
  const __half2 pair = __floats2half2_rn(low, high);
  uint32_t bits;
  memcpy(&bits, &pair, sizeof bits);
  return bits;
}
template <>
__device__ __forceinline__ uint32_t pack_pair<__nv_bfloat16>(float low, float high) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  uint32_t bits;
  memcpy(&bits, &pair, sizeof bits);
  return bits;
}

__device__ __forceinline__ float quad_max(float value) {
  value = fmaxf(value, __shfl_xor_sync(kFullWarp, value, 1));
  return fmaxf(value, __shfl_xor_sync(kFullWarp, value, 2));
}

__device__ __forceinline__ float quad_sum(float value) {
  value += __shfl_xor_sync(kFullWarp, value, 1);
  return value + __shfl_xor_sync(kFullWarp, value, 2);
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::gpu
