// What the in-house kernels and their plans use of the CUDA toolkit, for the host compiler: the
// runtime calls (streams, errors, device attributes, the shared-memory opt-in), the vector and
// 16-bit float types with CUDA's conversions (bit-exact: reference/formats.h is tested against
// cuda_fp16.h / cuda_bf16.h), and the built-ins (cuda_builtins.h). Reached only through
// kernels/cuda/common/cuda_api.h when a kernel is compiled for `emu`.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/emu/cuda_builtins.h"
#include "kernels/emu/launch.h"
#include "reference/formats.h"

#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict

// ---- types
// ---------------------------------------------------------------------------------------
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(2) __half {
  uint16_t bits;
};
struct alignas(4) __half2 {
  __half x, y;
};
struct alignas(2) __nv_bfloat16 {
  uint16_t bits;
};
struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};

// ---- conversions (round to nearest even, as the _rn intrinsics)
// ----------------------------------
inline float __half2float(__half h) { return ::attnbench::fp16_bits_to_float(h.bits); }
inline float __bfloat162float(__nv_bfloat16 h) { return ::attnbench::bf16_bits_to_float(h.bits); }
inline __half __float2half_rn(float f) { return {::attnbench::float_to_fp16_bits(f)}; }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return {::attnbench::float_to_bf16_bits(f)}; }
inline float2 __half22float2(__half2 h) { return {__half2float(h.x), __half2float(h.y)}; }
inline float2 __bfloat1622float2(__nv_bfloat162 h) {
  return {__bfloat162float(h.x), __bfloat162float(h.y)};
}
inline __half2 __floats2half2_rn(float low, float high) {
  return {__float2half_rn(low), __float2half_rn(high)};
}
inline __nv_bfloat162 __floats2bfloat162_rn(float low, float high) {
  return {__float2bfloat16_rn(low), __float2bfloat16_rn(high)};
}
inline __half2 __float22half2_rn(float2 f) { return __floats2half2_rn(f.x, f.y); }
inline __nv_bfloat162 __float22bfloat162_rn(float2 f) { return __floats2bfloat162_rn(f.x, f.y); }

// A TMA tensor map: 128 opaque bytes, which the emulated device fills with its own map
// (kernels/emu/tma.h; kernels/cuda/common/tma_map.cpp encodes it).
struct alignas(64) CUtensorMap {
  unsigned long long opaque[16];
};

// ---- the runtime
// ---------------------------------------------------------------------------------
using cudaStream_t = ::attnbench::emu::Stream*;
using cudaError_t = ::attnbench::emu::ErrorCode;
inline constexpr cudaError_t cudaSuccess = ::attnbench::emu::ErrorCode::none;
enum cudaDeviceAttr : int {
  cudaDevAttrComputeCapabilityMajor,
  cudaDevAttrComputeCapabilityMinor,
  cudaDevAttrMaxSharedMemoryPerBlockOptin,
  cudaDevAttrMultiProcessorCount,
};
enum cudaFuncAttribute : int { cudaFuncAttributeMaxDynamicSharedMemorySize };

inline cudaError_t cudaGetLastError() { return ::attnbench::emu::take_last_error(); }
inline const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case ::attnbench::emu::ErrorCode::none:
      return "cudaSuccess";
    case ::attnbench::emu::ErrorCode::invalid_value:
      return "cudaErrorInvalidValue";
    case ::attnbench::emu::ErrorCode::launch_failure:
      return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}
inline const char* cudaGetErrorString(cudaError_t error) {
  return error == cudaSuccess ? "no error" : ::attnbench::emu::last_error_message().c_str();
}
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attribute, int /*device*/) {
  switch (attribute) {
    case cudaDevAttrComputeCapabilityMajor:
      *value = ::attnbench::emu::kComputeMajor;
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *value = ::attnbench::emu::kComputeMinor;
      break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
      *value = ::attnbench::emu::kMaxDynamicSharedBytesOptin;
      break;
    case cudaDevAttrMultiProcessorCount:
      *value = ::attnbench::emu::kMultiProcessors;
      break;
  }
  return cudaSuccess;
}
// The emulated device's memory is the host's, and a launch runs to completion before it returns:
// a copy is a memcpy and a stream is always done.
enum cudaMemcpyKind : int { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost };
inline cudaError_t cudaMemcpy(void* to, const void* from, size_t bytes, cudaMemcpyKind /*kind*/) {
  std::memcpy(to, from, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t /*stream*/) { return cudaSuccess; }
template <typename Kernel>
cudaError_t cudaFuncSetAttribute(Kernel* kernel, cudaFuncAttribute /*attribute*/, int value) {
  if (::attnbench::emu::set_max_dynamic_shared(reinterpret_cast<const void*>(kernel), value)) {
    return cudaSuccess;
  }
  ::attnbench::emu::set_last_error(::attnbench::emu::ErrorCode::invalid_value,
                                   "emu: dynamic shared memory above the device's opt-in limit");
  return ::attnbench::emu::ErrorCode::invalid_value;
}
