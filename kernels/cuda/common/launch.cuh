// Kernel launches, one way for both builds: launch_kernel() is <<<grid, block, shared, stream>>> on
// the GPU and an emulated grid run (kernels/emu/launch.h) under emu; either way the launch error is
// then read with ATTNBENCH_CUDA_TRY_LAUNCH(). allow_dynamic_shared() opts a kernel into dynamic
// shared memory above 48 KiB (cudaFuncSetAttribute on both).
#pragma once

#include <cstddef>
#include <utility>

#include "kernels/cuda/common/cuda_api.h"

namespace attnbench {
inline namespace ATTNBENCH_TARGET {

template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                   cudaStream_t stream, Args&&... args) {
#if defined(ATTNBENCH_EMU)
  // Every emulated thread calls the kernel with its own copies of the arguments, as each CUDA
  // thread reads its own parameters.
  ::attnbench::emu::launch_kernel(stream, reinterpret_cast<const void*>(kernel),
                                  {grid.x, grid.y, grid.z}, {block.x, block.y, block.z},
                                  shared_bytes, [&] { kernel(Params(args)...); });
#else
  // clang-format off (it reads .cuh as C++ and splits the launch's closing brackets)
  kernel<<<grid, block, shared_bytes, stream>>>(std::forward<Args>(args)...);
  // clang-format on
#endif
}

template <typename... Params>
cudaError_t allow_dynamic_shared(void (*kernel)(Params...), int bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench
