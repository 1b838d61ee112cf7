// The kernels of the emulated device `emu`: the in-house CUDA kernels built from their own
// source for the emulator (backend emu, the same names as on the GPU: cuda_kernels.h's one
// list), and the GPU kernels it cannot run, listed with the reason so a user asking for them
// learns why.
#pragma once

#include <vector>

#include "kernels/kernel.h"

namespace attnbench {

// The in-house CUDA kernels, emulated.
std::vector<Kernel> emulated_kernels();

// `gpu_kernel` (built on cuBLAS or cuDNN) as the emulated device lists it: by name, its cases
// skipped with the reason.
Kernel outside_emu(const Kernel& gpu_kernel);

}  // namespace attnbench
