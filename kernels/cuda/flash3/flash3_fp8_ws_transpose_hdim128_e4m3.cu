// cuda.flash3_fp8_ws_transpose for head dim 128, e4m3 inputs: one instantiation per translation
// unit.
#include "kernels/cuda/flash3/flash3_fp8_ws_kernel.cuh"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {
template Status launch_flash3_fp8_ws_transpose<128, DType::e4m3>(const Flash3Params&,
                                                                 const Fp8PassArgs&, cudaStream_t);
}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
