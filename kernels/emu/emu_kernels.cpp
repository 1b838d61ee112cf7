// Compiled with ATTNBENCH_EMU: cuda_kernels.h declares the factories of the emulated build.
#include "kernels/emu/emu_kernels.h"

#include <string>
#include <utility>

#include "kernels/cuda/cuda_kernels.h"

namespace attnbench {
namespace {

// A kernel emu knows by name and does not run: its cases are skipped with `reason`.
Kernel outside_emu(std::string name, std::string summary) {
  Kernel kernel;
  kernel.name = std::move(name);
  kernel.summary = std::move(summary);
  kernel.backend = Backend::emu;
  kernel.unavailable_reason =
      "not on the emulated device: built on closed NVIDIA libraries (cuBLAS/cuDNN), whose "
      "source the emulator cannot run";
  return kernel;
}

}  // namespace

std::vector<Kernel> emulated_kernels() {
  std::vector<Kernel> kernels = {
      cuda_naive_kernel(),
      cuda_masked_outofplace_kernel(),
      cuda_masked_inplace_kernel(),
      cuda_masked_fused_kernel(),
      cuda_flash1_kernel(),
      cuda_flash2_kernel(),
      cuda_flash3_wg1_kernel(),
      cuda_flash3_ws_kernel(),
      cuda_flash3_pingpong_kernel(),
      cuda_flash3_kernel(),
      cuda_flash3_fp8_kernel(),
      cuda_flash3_fp8_ws_kernel(),
      cuda_flash3_fp8_ws_transpose_kernel(),
      cuda_flash3_fp8_incoherent_kernel(),
      cuda_flash3_fp8_block_kernel(),
      cuda_flash3_fp8_block_incoherent_kernel(),
      outside_emu("cuda.naive_cublas", "cuBLAS batched GEMMs with a softmax kernel between"),
      outside_emu("cudnn.sdpa", "cuDNN's fused SDPA"),
      outside_emu("cudnn.sdpa_fp8", "cuDNN's fused SDPA in FP8"),
      outside_emu("cudnn.sdpa_fp8_quantized",
                  "cuDNN's fused SDPA in FP8 behind attnbench's passes"),
      outside_emu("cudnn.sdpa_fp8_incoherent",
                  "cuDNN's fused SDPA in FP8 behind attnbench's passes"),
  };
  for (Kernel& kernel : kernels) {
    kernel.support.archs = {"emu"};
    kernel.support.notes += kernel.support.notes.empty() ? "" : "; ";
    kernel.support.notes += "emulated: correctness only, no timing";
  }
  return kernels;
}

}  // namespace attnbench
