// Every kernel attnbench knows, in one list. To add a kernel, add its factory call here.
#include "kernels/registry.h"

#include "kernels/cpu/cpu_kernels.h"

namespace attnbench {

const std::vector<Kernel>& all_kernels() {
  static const std::vector<Kernel> kernels = {
      cpu_naive_kernel(),          cpu_masked_outofplace_kernel(),
      cpu_masked_inplace_kernel(), cpu_masked_fused_kernel(),
      cpu_flash_kernel(),
  };
  return kernels;
}

const Kernel* find_kernel(std::string_view name) {
  for (const Kernel& kernel : all_kernels()) {
    if (kernel.name == name) return &kernel;
  }
  return nullptr;
}

}  // namespace attnbench
