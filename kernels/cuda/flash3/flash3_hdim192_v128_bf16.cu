// cuda.flash3 for head dims 192/128 (d_qk/d_v: DeepSeek's MLA prefill), bf16: one instantiation per
// translation unit.
#include "kernels/cuda/flash3/flash3_ws_kernel.cuh"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {
template Status launch_flash3<192, DType::bf16, 128>(const Flash3Params&, cudaStream_t);
}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
