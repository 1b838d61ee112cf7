// fill_uniform_nonzero: a grid-stride loop, one hash per element (splitmix64 of seed ^ index),
// converted to the dtype with CUDA's own round-to-nearest conversions.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "harness/measure/cuda/device_fill.h"
#include "kernels/cuda/common/cuda_check.h"

namespace attnbench {
namespace {

// Magnitudes in [kMinMagnitude, 1): far above e4m3's smallest normal (2^-6), so no value rounds
// to zero, and products stay well inside every format's range.
constexpr float kMinMagnitude = 0.25f;
constexpr int kThreadsPerBlock = 256;
constexpr int kMaxBlocks = 1 << 16;  // enough to fill an H200; the loop strides over the rest
constexpr float kTwoToMinus24 = 1.0f / 16777216.0f;  // 24 random bits -> [0, 1)

__device__ uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__device__ float random_value(uint64_t seed, size_t index) {
  const uint64_t bits = splitmix64(seed ^ (index * 0xD1B54A32D192ED03ull));
  const float unit = static_cast<float>(bits >> 40) * kTwoToMinus24;
  const float magnitude = kMinMagnitude + (1.0f - kMinMagnitude) * unit;
  return (bits & 1) ? -magnitude : magnitude;
}

template <typename T>
__device__ T convert(float value);
template <>
__device__ float convert<float>(float value) {
  return value;
}
template <>
__device__ __half convert<__half>(float value) {
  return __float2half_rn(value);
}
template <>
__device__ __nv_bfloat16 convert<__nv_bfloat16>(float value) {
  return __float2bfloat16_rn(value);
}
template <>
__device__ __nv_fp8_e4m3 convert<__nv_fp8_e4m3>(float value) {
  return __nv_fp8_e4m3(value);
}
template <>
__device__ __nv_fp8_e5m2 convert<__nv_fp8_e5m2>(float value) {
  return __nv_fp8_e5m2(value);
}

template <typename T>
__global__ void fill_kernel(T* data, size_t count, uint64_t seed) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    data[i] = convert<T>(random_value(seed, i));
  }
}

template <typename T>
Status launch_fill(void* data, size_t count, uint64_t seed, cudaStream_t stream) {
  if (count == 0) return Status::Ok();
  const size_t blocks_needed = (count + kThreadsPerBlock - 1) / kThreadsPerBlock;
  const int blocks = static_cast<int>(blocks_needed < kMaxBlocks ? blocks_needed : kMaxBlocks);
  fill_kernel<T><<<blocks, kThreadsPerBlock, 0, stream>>>(static_cast<T*>(data), count, seed);
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return Status::Ok();
}

}  // namespace

Status fill_uniform_nonzero(void* data, DType dtype, size_t count, uint64_t seed,
                            cudaStream_t stream) {
  switch (dtype) {
    case DType::f32:
      return launch_fill<float>(data, count, seed, stream);
    case DType::f16:
      return launch_fill<__half>(data, count, seed, stream);
    case DType::bf16:
      return launch_fill<__nv_bfloat16>(data, count, seed, stream);
    case DType::e4m3:
      return launch_fill<__nv_fp8_e4m3>(data, count, seed, stream);
    case DType::e5m2:
      return launch_fill<__nv_fp8_e5m2>(data, count, seed, stream);
  }
  return Status::Error("fill_uniform_nonzero: unknown dtype");
}

}  // namespace attnbench
