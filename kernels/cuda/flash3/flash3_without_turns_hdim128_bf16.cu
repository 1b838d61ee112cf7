// cuda.flash3[pingpong=off] for head dim 128, bf16: the softmax under its own P V, no turns.
#include "kernels/cuda/flash3/flash3_ws_kernel.cuh"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {
template Status launch_flash3_without_turns<128, DType::bf16>(const Flash3Params&, cudaStream_t);
}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
