// The Backend an in-house kernel entry declares: cuda in the GPU build, emu in the emulated one
// (its cases then run on the `emu` device). Host code only: it needs kernel.h's C++20.
#pragma once

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/kernel.h"

namespace attnbench {
inline namespace ATTNBENCH_TARGET {

#if defined(ATTNBENCH_EMU)
inline constexpr Backend kKernelBackend = Backend::emu;
#else
inline constexpr Backend kKernelBackend = Backend::cuda;
#endif

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench
