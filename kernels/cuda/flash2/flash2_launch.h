// The launch functions of cuda.flash2, one explicit instantiation per (head dim, dtype), each in
// its own translation unit (flash2_hdim<D>_<dtype>.cu) so the heavy instantiations build in
// parallel. Host code (the plan in flash2.cpp) includes this header without any device code.
#pragma once

#include <cuda_runtime_api.h>

#include "kernels/params.h"
#include "reference/status.h"

namespace attnbench::flash2 {

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

}  // namespace attnbench::flash2
