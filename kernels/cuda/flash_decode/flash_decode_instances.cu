// cuda.flash_decode's instantiations: head dims 64 and 128, fp16 and bf16. Small CUDA-core
// kernels, so one translation unit holds all four.
#include "kernels/cuda/flash_decode/flash_decode_kernel.cuh"

namespace attnbench::flash_decode {
inline namespace ATTNBENCH_TARGET {
template Status launch_flash_decode<64, DType::f16>(const AttentionParams&, const Workspace&, int,
                                                    cudaStream_t);
template Status launch_flash_decode<64, DType::bf16>(const AttentionParams&, const Workspace&, int,
                                                     cudaStream_t);
template Status launch_flash_decode<128, DType::f16>(const AttentionParams&, const Workspace&, int,
                                                     cudaStream_t);
template Status launch_flash_decode<128, DType::bf16>(const AttentionParams&, const Workspace&, int,
                                                      cudaStream_t);
}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash_decode
