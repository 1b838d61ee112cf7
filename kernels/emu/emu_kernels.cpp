// Compiled with ATTNBENCH_EMU: cuda_kernels.h declares the factories of the emulated build.
#include "kernels/emu/emu_kernels.h"

#include "kernels/cuda/cuda_kernels.h"

namespace attnbench {

Kernel outside_emu(const Kernel& gpu_kernel) {
  Kernel kernel;
  kernel.name = gpu_kernel.name;
  kernel.summary = gpu_kernel.summary;
  kernel.backend = Backend::emu;
  kernel.support.archs = {"emu"};
  kernel.unavailable_reason =
      "not on the emulated device: built on closed NVIDIA libraries (cuBLAS/cuDNN), whose "
      "source the emulator cannot run";
  return kernel;
}

std::vector<Kernel> emulated_kernels() {
  std::vector<Kernel> kernels = in_house_cuda_kernels();
  for (Kernel& kernel : kernels) {
    kernel.support.archs = {"emu"};
    kernel.support.notes += kernel.support.notes.empty() ? "" : "; ";
    kernel.support.notes += "emulated: correctness only, no timing";
  }
  return kernels;
}

}  // namespace attnbench
