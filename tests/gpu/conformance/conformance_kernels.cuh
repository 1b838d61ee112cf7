// The conformance kernels: each runs one wrapper of kernels/cuda/common/ptx.cuh over many test
// vectors. One source for both sides: nvcc compiles it with the wrappers' device bodies
// (conformance_device.cu), the host compiler with their emulated bodies (conformance_emu.cpp,
// ATTNBENCH_EMU), so the test compares the instruction and nothing else.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/common/ptx.cuh"
#include "kernels/cuda/common/shared.cuh"

namespace attnbench::conformance {
inline namespace ATTNBENCH_TARGET {

constexpr int kLanes = 32;
constexpr int kTileRows = 32;  // ldmatrix: 4 matrices x 8 rows of 16 bytes

// One warp per block, looping over cases: case k, lane l reads a[(32 k + l) * 4 + i], b[.. * 2 +
// i], c[.. * 4 + i] and writes D where C was read from.
template <typename Element>
__global__ void mma_kernel(const uint32_t* a, const uint32_t* b, const float* c, float* d,
                           int cases) {
  const int lane = static_cast<int>(threadIdx.x);
  for (int k = static_cast<int>(blockIdx.x); k < cases; k += static_cast<int>(gridDim.x)) {
    const int at = k * kLanes + lane;
    const uint32_t fragment[4] = {a[4 * at], a[4 * at + 1], a[4 * at + 2], a[4 * at + 3]};
    float acc[4] = {c[4 * at], c[4 * at + 1], c[4 * at + 2], c[4 * at + 3]};
    ptx::mma_16x8x16<Element>(acc, fragment, b[2 * at], b[2 * at + 1]);
    for (int i = 0; i < 4; ++i) d[4 * at + i] = acc[i];
  }
}

__global__ void ex2_kernel(const float* x, float* y, int n) {
  const int stride = static_cast<int>(blockDim.x * gridDim.x);
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += stride) {
    y[i] = ptx::exp2_approx(x[i]);
  }
}

// __floats2half2_rn / __floats2bfloat162_rn of (x[2i], x[2i + 1]), as the packed 32 bits.
template <bool kBf16>
__global__ void pack_kernel(const float* x, uint32_t* packed, int pairs) {
  const int stride = static_cast<int>(blockDim.x * gridDim.x);
  for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < pairs; i += stride) {
    uint32_t bits;
    if constexpr (kBf16) {
      const __nv_bfloat162 pair = __floats2bfloat162_rn(x[2 * i], x[2 * i + 1]);
      memcpy(&bits, &pair, sizeof bits);
    } else {
      const __half2 pair = __floats2half2_rn(x[2 * i], x[2 * i + 1]);
      memcpy(&bits, &pair, sizeof bits);
    }
    packed[i] = bits;
  }
}

// Case k: a 512-byte tile (tiles + 256 k, b16), lane l gives the address of row rows[32 k + l];
// the fragments land in out[(32 k + l) * 4 + i]. `form`: 0-2 x1/x2/x4, 3-5 the same .trans.
__global__ void ldmatrix_kernel(const uint16_t* tiles, const uint32_t* rows, uint32_t* out,
                                int form, int cases) {
  ATTNBENCH_DYNAMIC_SHARED(shared, 16);
  auto* tile = reinterpret_cast<uint16_t*>(shared);
  const int lane = static_cast<int>(threadIdx.x);
  for (int k = static_cast<int>(blockIdx.x); k < cases; k += static_cast<int>(gridDim.x)) {
    for (int i = lane; i < kTileRows * 8; i += kLanes) tile[i] = tiles[k * kTileRows * 8 + i];
    __syncwarp();
    const uint32_t address = ptx::shared_address(tile + rows[k * kLanes + lane] * 8);
    uint32_t fragment[4] = {0, 0, 0, 0};
    switch (form) {
      case 0:
        ptx::load_matrix_x1(reinterpret_cast<uint32_t(&)[1]>(fragment), address);
        break;
      case 1:
        ptx::load_matrix_x2(reinterpret_cast<uint32_t(&)[2]>(fragment), address);
        break;
      case 2:
        ptx::load_matrix_x4(fragment, address);
        break;
      case 3:
        ptx::load_matrix_x1_transposed(reinterpret_cast<uint32_t(&)[1]>(fragment), address);
        break;
      case 4:
        ptx::load_matrix_x2_transposed(reinterpret_cast<uint32_t(&)[2]>(fragment), address);
        break;
      default:
        ptx::load_matrix_x4_transposed(fragment, address);
        break;
    }
    for (int i = 0; i < 4; ++i) out[(k * kLanes + lane) * 4 + i] = fragment[i];
    __syncwarp();
  }
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::conformance
