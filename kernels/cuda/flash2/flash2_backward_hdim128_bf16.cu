// cuda.flash2's backward for head dim 128, bf16: both ways of adding dQ (cuda.flash2's atomics,
// cuda.flash2_deterministic's splits) in one translation unit.
#include "kernels/cuda/flash2/flash2_backward_kernel.cuh"

namespace attnbench::flash2 {
inline namespace ATTNBENCH_TARGET {
template Status launch_flash2_backward<128, DType::bf16, DqAccumulation::atomic>(
    const AttentionParams&, float*, float*, cudaStream_t);
template Status launch_flash2_backward<128, DType::bf16, DqAccumulation::per_split>(
    const AttentionParams&, float*, float*, cudaStream_t);
}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash2
