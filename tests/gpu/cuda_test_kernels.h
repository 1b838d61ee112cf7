// Test-only kernels for tests/gpu/test_cuda_executor.cpp: small enough to reason about, so the
// executor (guards, poison, launch counts, health) is what the tests judge. Plain types only:
// this header is shared by a C++20 test and a .cu compiled as C++17 (CMake 3.25 has no C++20
// dialect for nvcc).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace attnbench::test_kernels {

// Copies a (batch, seq, heads, dim) tensor of 16-bit elements from `source` to `target`, each
// with its own element strides (the dim stride is 1).
struct CopyRows {
  const uint16_t* source = nullptr;
  uint16_t* target = nullptr;
  int64_t batch = 0, seqlen = 0, heads = 0, dim = 0;
  int64_t source_batch_stride = 0, source_row_stride = 0, source_head_stride = 0;
  int64_t target_batch_stride = 0, target_row_stride = 0, target_head_stride = 0;
  // Also write one element at target[target_elements]: just past the end of the output.
  bool write_one_past_end = false;
  int64_t target_elements = 0;
};

cudaError_t launch_copy_rows(const CopyRows& copy, cudaStream_t stream);

// One kernel that writes nothing: the output must stay poisoned.
cudaError_t launch_write_nothing(cudaStream_t stream);

// One kernel that writes `byte_offset` bytes past `target`, far outside any allocation: an
// illegal address, which leaves the CUDA context unusable (a sticky error).
cudaError_t launch_write_far_away(void* target, int64_t byte_offset, cudaStream_t stream);

}  // namespace attnbench::test_kernels
