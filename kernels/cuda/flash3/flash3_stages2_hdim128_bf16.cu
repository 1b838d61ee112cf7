// cuda.flash3[stages=2] for head dim 128, bf16: cuda.flash3 on K and V rings of 2 stages (3 fit).
#include "kernels/cuda/flash3/flash3_ws_kernel.cuh"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {
template Status launch_flash3_stages<128, DType::bf16, 2>(const Flash3Params&, cudaStream_t);
}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
