// cuda.flash3[rescale=after_pv] for head dim 128, bf16: O rescaled after the P V wait, outside the
// turn.
#include "kernels/cuda/flash3/flash3_ws_kernel.cuh"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {
template Status launch_flash3_rescale_after_pv<128, DType::bf16>(const Flash3Params&, cudaStream_t);
}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
