// The negative control of tests/gpu/test_static_cuda.cpp: built for sm_80 alone (SASS and PTX, no
// sm_90a), and with one kernel whose run-time-indexed array lives in local memory, so the
// static checks must report a missing sm_90a build and a stack frame. Never launched.
#include <cuda_runtime.h>

namespace attnbench::static_control {

// Enough elements that the compiler cannot keep the array in registers once it is indexed at
// run time.
constexpr int kLocalElements = 64;

__global__ void copy_kernel(const float* __restrict__ in, float* __restrict__ out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}

// A running sum indexed by a value read from memory: the array cannot live in registers, so it
// gets a stack frame.
__global__ void local_array_kernel(const float* __restrict__ in, const int* __restrict__ index,
                                   float* __restrict__ out) {
  float running_sum[kLocalElements];
  float sum = 0;
  for (int i = 0; i < kLocalElements; ++i) {
    sum += in[i * blockDim.x + threadIdx.x];
    running_sum[i] = sum;
  }
  out[threadIdx.x] = running_sum[index[threadIdx.x] % kLocalElements];
}

}  // namespace attnbench::static_control
