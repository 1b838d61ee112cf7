// The launch functions of cuda.flash2, one explicit instantiation per (head dim, dtype), each in
// its own translation unit (flash2_hdim<D>_<dtype>.cu) so the heavy instantiations build in
// parallel. Host code (the plan in flash2.cpp) includes this header without any device code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/flash2/flash2_traits.h"
#include "kernels/kernel.h"
#include "kernels/params.h"
#include "reference/status.h"

namespace attnbench::flash2 {
inline namespace ATTNBENCH_TARGET {

// One forward on `stream`: grid, dynamic shared memory attribute, launch, launch check. The
// params must describe fp16/bf16 tensors of head dims HeadDim (Q, K) and HeadDimV (V, O) with
// 16-byte aligned rows.
template <int HeadDim, int HeadDimV, DType kDtype>
Status launch_flash2(const AttentionParams& params, cudaStream_t stream);

#define ATTNBENCH_FLASH2_FORWARD(dim, dim_v, dtype)                                      \
  extern template Status launch_flash2<dim, dim_v, DType::dtype>(const AttentionParams&, \
                                                                 cudaStream_t)
ATTNBENCH_FLASH2_FORWARD(64, 64, f16);
ATTNBENCH_FLASH2_FORWARD(64, 64, bf16);
ATTNBENCH_FLASH2_FORWARD(80, 80, f16);
ATTNBENCH_FLASH2_FORWARD(80, 80, bf16);
ATTNBENCH_FLASH2_FORWARD(96, 96, f16);
ATTNBENCH_FLASH2_FORWARD(96, 96, bf16);
ATTNBENCH_FLASH2_FORWARD(128, 128, f16);
ATTNBENCH_FLASH2_FORWARD(128, 128, bf16);
ATTNBENCH_FLASH2_FORWARD(192, 128, f16);
ATTNBENCH_FLASH2_FORWARD(192, 128, bf16);
ATTNBENCH_FLASH2_FORWARD(256, 256, f16);
ATTNBENCH_FLASH2_FORWARD(256, 256, bf16);
#undef ATTNBENCH_FLASH2_FORWARD

// One backward on `stream` (flash2_backward_kernel.cuh: D and the dQ accumulators prepared, the
// key blocks, dQ converted): `delta` holds batch x heads_q x seqlen_q floats, `dq_accumulator`
// dq_split(seqlen_k, kDq).splits x batch x heads_q x seqlen_q x HeadDim (the plan's scratch).
template <int HeadDim, DType kDtype, DqAccumulation kDq>
Status launch_flash2_backward(const AttentionParams& params, float* delta, float* dq_accumulator,
                              cudaStream_t stream);

#define ATTNBENCH_FLASH2_BACKWARD(dim, dtype, dq)                                          \
  extern template Status launch_flash2_backward<dim, DType::dtype, DqAccumulation::dq>( \
      const AttentionParams&, float*, float*, cudaStream_t)
ATTNBENCH_FLASH2_BACKWARD(64, f16, atomic);
ATTNBENCH_FLASH2_BACKWARD(64, bf16, atomic);
ATTNBENCH_FLASH2_BACKWARD(128, f16, atomic);
ATTNBENCH_FLASH2_BACKWARD(128, bf16, atomic);
ATTNBENCH_FLASH2_BACKWARD(64, f16, per_split);
ATTNBENCH_FLASH2_BACKWARD(64, bf16, per_split);
ATTNBENCH_FLASH2_BACKWARD(128, f16, per_split);
ATTNBENCH_FLASH2_BACKWARD(128, bf16, per_split);
#undef ATTNBENCH_FLASH2_BACKWARD

// One compiled (head dims, dtype) of the kernel, as the plan dispatches to it; `backward` is null
// where the backward is not instantiated (d 80, 96, 192/128, 256, the planted forward bugs).
using LaunchFunction = Status (*)(const AttentionParams&, cudaStream_t);
using BackwardFunction = Status (*)(const AttentionParams&, float*, float*, cudaStream_t);
struct Instantiation {
  int64_t head_dim;  // Q's and K's
  int64_t head_dim_v;
  DType dtype;
  LaunchFunction launch;
  size_t shared_bytes;
  BackwardFunction backward = nullptr;
  size_t backward_shared_bytes = 0;
};

// The Kernel entry of cuda.flash2 over `instantiations`: cuda_flash2_kernel() passes the twelve
// above; the planted-bug variants of tests/test_kernels/planted/ (edited copies of
// flash2_kernel.cuh) pass theirs under their own names. The support table keeps the instantiated
// head dims and dtypes only.
Kernel flash2_kernel_entry(std::string name, std::string summary,
                           std::vector<Instantiation> instantiations,
                           DqAccumulation dq_accumulation = DqAccumulation::atomic);

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash2
