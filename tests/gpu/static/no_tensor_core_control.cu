// The negative control of the tensor-core check in tests/gpu/test_static_cuda.cpp: a
// 16 x 16 x 16 fp16 tile product written the plain way (shared memory through ordinary loads,
// fp32 FMAs), built for sm_80 and sm_90a like the kernel library. Its SASS holds no HMMA and no
// LDSM, so the check that flash2's kernels carry both must report this kernel on both
// architectures. Never launched.
#include <cuda_fp16.h>

namespace attnbench::static_control {

constexpr int kTile = 16;  // one mma.m16n8k16's worth of work, done without tensor cores

// c (16 x 16, fp32) = a (16 x 16, fp16, row-major) times b (16 x 16, fp16, row-major);
// one thread per output element.
__global__ void plain_tile_product(const __half* __restrict__ a, const __half* __restrict__ b,
                                   float* __restrict__ c) {
  __shared__ __half a_tile[kTile][kTile];
  __shared__ __half b_tile[kTile][kTile];
  const int row = static_cast<int>(threadIdx.x) / kTile;
  const int column = static_cast<int>(threadIdx.x) % kTile;
  a_tile[row][column] = a[threadIdx.x];
  b_tile[row][column] = b[threadIdx.x];
  __syncthreads();
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kTile; ++k) {
    sum = fmaf(__half2float(a_tile[row][k]), __half2float(b_tile[k][column]), sum);
  }
  c[threadIdx.x] = sum;
}

}  // namespace attnbench::static_control
