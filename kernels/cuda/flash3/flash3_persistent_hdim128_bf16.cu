// cuda.flash3[persistent=on] for head dim 128, bf16: one CTA per SM, each running its blocks in
// turn.
#include "kernels/cuda/flash3/flash3_ws_kernel.cuh"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {
template Status launch_flash3_persistent<128, DType::bf16>(const Flash3Params&, cudaStream_t);
}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
