// The kernels of the emulated device `emu`: the in-house CUDA kernels built from their own
// source for the emulator (backend emu, the same names as on the GPU), and the CUDA-side
// kernels it cannot run, listed with the reason so a user asking for them learns why.
#pragma once

#include <vector>

#include "kernels/kernel.h"

namespace attnbench {

std::vector<Kernel> emulated_kernels();

}  // namespace attnbench
