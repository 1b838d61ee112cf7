#include "tests/gpu/cuda_test_kernels.h"

namespace attnbench::test_kernels {
namespace {

constexpr int kThreadsPerBlock = 128;

// One block per (batch, seq, head) row; threads stride over the head dim.
__global__ void copy_rows_kernel(const CopyRows copy) {
  const int64_t row = blockIdx.x;
  const int64_t h = row % copy.heads;
  const int64_t s = row / copy.heads % copy.seqlen;
  const int64_t b = row / copy.heads / copy.seqlen;
  const uint16_t* source = copy.source + b * copy.source_batch_stride + s * copy.source_row_stride +
                           h * copy.source_head_stride;
  uint16_t* target = copy.target + b * copy.target_batch_stride + s * copy.target_row_stride +
                     h * copy.target_head_stride;
  for (int64_t d = threadIdx.x; d < copy.dim; d += blockDim.x) target[d] = source[d];
  if (copy.write_one_past_end && row == 0 && threadIdx.x == 0) {
    copy.target[copy.target_elements] = source[0];
  }
}

__global__ void write_nothing_kernel() {}

__global__ void write_far_away_kernel(unsigned char* target, int64_t byte_offset) {
  target[byte_offset] = 1;
}

}  // namespace

cudaError_t launch_copy_rows(const CopyRows& copy, cudaStream_t stream) {
  const int64_t rows = copy.batch * copy.seqlen * copy.heads;
  copy_rows_kernel<<<static_cast<unsigned>(rows), kThreadsPerBlock, 0, stream>>>(copy);
  return cudaGetLastError();
}

cudaError_t launch_write_nothing(cudaStream_t stream) {
  write_nothing_kernel<<<1, 1, 0, stream>>>();
  return cudaGetLastError();
}

cudaError_t launch_write_far_away(void* target, int64_t byte_offset, cudaStream_t stream) {
  write_far_away_kernel<<<1, 1, 0, stream>>>(static_cast<unsigned char*>(target), byte_offset);
  return cudaGetLastError();
}

}  // namespace attnbench::test_kernels
