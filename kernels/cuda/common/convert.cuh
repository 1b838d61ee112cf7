// The element types of the in-house CUDA kernels and their conversions to and from fp32, one
// definition for every kernel, forward and backward (issue 37): the element type of a DType, one
// value or a pair widened to float, a float rounded to the element type (round to nearest even),
// and two floats packed as an MMA fragment register.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/kernel.h"

namespace attnbench::gpu {
inline namespace ATTNBENCH_TARGET {

// type: one stored element; pair: two of them, one 32-bit load or store (16-bit types only).
template <DType kDtype>
struct ElementOf;
template <>
struct ElementOf<DType::f16> {
  using type = __half;
  using pair = __half2;
};
template <>
struct ElementOf<DType::bf16> {
  using type = __nv_bfloat16;
  using pair = __nv_bfloat162;
};
template <>
struct ElementOf<DType::e4m3> {
  using type = uint8_t;  // the stored bits (ptx::pack_e4m3x4 writes them)
};

__device__ __forceinline__ float to_float(__half value) { return __half2float(value); }
__device__ __forceinline__ float to_float(__nv_bfloat16 value) { return __bfloat162float(value); }

template <typename Element>
__device__ __forceinline__ Element from_float(float value);
template <>
__device__ __forceinline__ __half from_float<__half>(float value) {
  return __float2half_rn(value);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float value) {
  return __float2bfloat16_rn(value);
}

__device__ __forceinline__ float2 widen(__half2 pair) { return __half22float2(pair); }
__device__ __forceinline__ float2 widen(__nv_bfloat162 pair) { return __bfloat1622float2(pair); }

// Two adjacent elements (4-byte aligned), one 32-bit load, widened.
__device__ __forceinline__ float2 load_pair(const __half* address) {
  return widen(*reinterpret_cast<const __half2*>(address));
}
__device__ __forceinline__ float2 load_pair(const __nv_bfloat16* address) {
  return widen(*reinterpret_cast<const __nv_bfloat162*>(address));
}

// A float2 rounded to a pair of `Element` (the second argument picks the type).
__device__ __forceinline__ __half2 narrow(float2 pair, __half) { return __float22half2_rn(pair); }
__device__ __forceinline__ __nv_bfloat162 narrow(float2 pair, __nv_bfloat16) {
  return __float22bfloat162_rn(pair);
}

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

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::gpu
