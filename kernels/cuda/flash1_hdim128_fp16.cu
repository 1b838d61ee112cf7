// cuda.flash1 at head dim 128, fp16 in and out: one translation unit per instantiation, so the
// four build in parallel (flash1.cuh holds the kernel).
#include "kernels/cuda/flash1.cuh"

namespace attnbench::gpu::flash1 {
inline namespace ATTNBENCH_TARGET {

template struct Instance<128, DType::f16>;

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::gpu::flash1
