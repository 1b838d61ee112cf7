// The FP8 passes around cuDNN's FP8 forward (cudnn.sdpa_fp8_quantized,
// kernels/cudnn/cudnn_sdpa.cpp) for head dim 128: quantize fp16/bf16 Q, K and V into packed e4m3,
// dequantize the e4m3 output.
#include "kernels/cuda/flash3/flash3_fp8_kernel.cuh"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {
template Status launch_fp8_quantize<128, DType::f16>(const AttentionParams&, const Fp8PassArgs&,
                                                     cudaStream_t);
template Status launch_fp8_quantize<128, DType::bf16>(const AttentionParams&, const Fp8PassArgs&,
                                                      cudaStream_t);
template Status launch_fp8_dequantize_output<128, DType::f16>(const AttentionParams&,
                                                              const uint8_t*, const float*,
                                                              cudaStream_t);
template Status launch_fp8_dequantize_output<128, DType::bf16>(const AttentionParams&,
                                                               const uint8_t*, const float*,
                                                               cudaStream_t);
}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
