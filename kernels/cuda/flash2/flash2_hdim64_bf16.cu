// cuda.flash2 for head dim 64, bf16: one heavy instantiation per translation unit.
#include "kernels/cuda/flash2/flash2_kernel.cuh"

namespace attnbench::flash2 {
inline namespace ATTNBENCH_TARGET {
template Status launch_flash2<64, 64, DType::bf16>(const AttentionParams&, cudaStream_t);
}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash2
