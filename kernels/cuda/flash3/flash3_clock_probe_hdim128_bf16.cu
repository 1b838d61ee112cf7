// cuda.flash3[probe=clock64] for head dim 128, bf16: cuda.flash3 with its waits timed by clock64.
#include "kernels/cuda/flash3/flash3_ws_kernel.cuh"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {
template Status launch_flash3_clock_probe<128, DType::bf16>(const Flash3Params&, cudaStream_t);
}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
