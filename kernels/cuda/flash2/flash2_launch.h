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
// params must describe fp16/bf16 tensors of head dim HeadDim with 16-byte aligned rows.
template <int HeadDim, DType kDtype>
Status launch_flash2(const AttentionParams& params, cudaStream_t stream);

extern template Status launch_flash2<64, DType::f16>(const AttentionParams&, cudaStream_t);
extern template Status launch_flash2<64, DType::bf16>(const AttentionParams&, cudaStream_t);
extern template Status launch_flash2<128, DType::f16>(const AttentionParams&, cudaStream_t);
extern template Status launch_flash2<128, DType::bf16>(const AttentionParams&, cudaStream_t);
extern template Status launch_flash2<256, DType::f16>(const AttentionParams&, cudaStream_t);
extern template Status launch_flash2<256, DType::bf16>(const AttentionParams&, cudaStream_t);

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

// One compiled (head dim, dtype) of the kernel, as the plan dispatches to it; `backward` is null
// where the backward is not instantiated (d 256, the planted forward bugs).
using LaunchFunction = Status (*)(const AttentionParams&, cudaStream_t);
using BackwardFunction = Status (*)(const AttentionParams&, float*, float*, cudaStream_t);
struct Instantiation {
  int64_t head_dim;
  DType dtype;
  LaunchFunction launch;
  size_t shared_bytes;
  BackwardFunction backward = nullptr;
  size_t backward_shared_bytes = 0;
};

// The Kernel entry of cuda.flash2 over `instantiations`: cuda_flash2_kernel() passes the six
// above; the planted-bug variants of tests/test_kernels/planted/ (edited copies of flash2_kernel.cuh)
// pass theirs under their own names. The support table keeps the instantiated head dims and
// dtypes only.
Kernel flash2_kernel_entry(std::string name, std::string summary,
                           std::vector<Instantiation> instantiations,
                           DqAccumulation dq_accumulation = DqAccumulation::atomic);

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash2
