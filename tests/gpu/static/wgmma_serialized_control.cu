// The negative control of ci/ptxas-guard.sh (tests/gpu/test_static_cuda.cpp, PtxasGuard.*): an
// ordinary write to an accumulator between two wgmma.mma_async of one batch, which ptxas answers
// by serializing the pipeline (an "info" line it prints, and the guard turns into an error).
// Compiled by the test only, never linked.
#include "kernels/cuda/common/ptx.cuh"

namespace attnbench::static_control {

__global__ void serialized_wgmma(float* out, uint64_t a, uint64_t b) {
  float d[32];
  for (int i = 0; i < 32; ++i) d[i] = 0.0f;
  ptx::wgmma_fence();
  ptx::wgmma_ss<64, __nv_bfloat16, false>(d, a, b, true);
  d[3] += out[threadIdx.x];  // the accumulator, written while the tensor cores own it
  ptx::wgmma_ss<64, __nv_bfloat16, false>(d, a, b, true);
  ptx::wgmma_commit();
  ptx::wgmma_wait<0>();
  for (int i = 0; i < 32; ++i) out[threadIdx.x * 32 + i] = d[i];
}

}  // namespace attnbench::static_control
