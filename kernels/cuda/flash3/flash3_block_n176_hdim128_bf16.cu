// cuda.flash3[stages=2,block_n=176] for head dim 128, bf16: key tiles of 176 (FlashAttention-3's at
// d 128), K and V rings of the 2 stages that fit.
#include "kernels/cuda/flash3/flash3_ws_kernel.cuh"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {
template Status launch_flash3_block_k<128, DType::bf16, 176>(const Flash3Params&, cudaStream_t);
}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
