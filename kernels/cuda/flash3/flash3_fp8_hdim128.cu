// cuda.flash3_fp8 for head dim 128 (e4m3): one instantiation per translation unit.
#include "kernels/cuda/flash3/flash3_fp8_kernel.cuh"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {
template Status launch_flash3_fp8<128>(const Flash3Params&, uint8_t*, int, cudaStream_t);
}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
