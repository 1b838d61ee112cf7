// The launch functions of cuda.flash2, one explicit instantiation per (head dim, dtype), each in
// its own translation unit (flash2_hdim<D>_<dtype>.cu) so the heavy instantiations build in
// parallel. Host code (the plan in flash2.cpp) includes this header without any device code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/common/cuda_api.h"
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

// One compiled (head dim, dtype) of the kernel, as the plan dispatches to it.
using LaunchFunction = Status (*)(const AttentionParams&, cudaStream_t);
struct Instantiation {
  int64_t head_dim;
  DType dtype;
  LaunchFunction launch;
  size_t shared_bytes;
};

// The Kernel entry of cuda.flash2 over `instantiations`: cuda_flash2_kernel() passes the six
// above; the planted-bug variants of tests/test_kernels/planted/ (edited copies of flash2_kernel.cuh)
// pass theirs under their own names. The support table keeps the instantiated head dims and
// dtypes only.
Kernel flash2_kernel_entry(std::string name, std::string summary,
                           std::vector<Instantiation> instantiations);

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash2
