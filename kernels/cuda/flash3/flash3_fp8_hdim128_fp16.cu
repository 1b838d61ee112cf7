// cuda.flash3_fp8 for head dim 128, fp16 inputs: one instantiation per translation unit.
#include "kernels/cuda/flash3/flash3_fp8_kernel.cuh"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {
template Status launch_flash3_fp8<128, DType::f16>(const Flash3Params&, const Fp8PassArgs&,
                                                   cudaStream_t);
}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
