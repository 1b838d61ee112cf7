// Every kernel attnbench knows, in one list. To add a kernel, add its factory call here.
#include "kernels/registry.h"

#include <cstdlib>
#include <string>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/test_kernels.h"
#if defined(ATTNBENCH_HAVE_CUDA)
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cudnn/cudnn_kernels.h"
#endif

namespace attnbench {
namespace {

std::vector<Kernel> registered_kernels() {
  std::vector<Kernel> kernels = {
      // ---- CPU ----------------------------------------------------------------------------------
      cpu_naive_kernel(),
      cpu_masked_outofplace_kernel(),
      cpu_masked_inplace_kernel(),
      cpu_masked_fused_kernel(),
      cpu_flash_kernel(),
#if defined(ATTNBENCH_HAVE_CUDA)
      // ---- CUDA and cuDNN -----------------------------------------------------------------------
      cuda_naive_cublas_kernel(),
      cuda_naive_kernel(),
      cuda_masked_outofplace_kernel(),
      cuda_masked_inplace_kernel(),
      cuda_masked_fused_kernel(),
      cuda_flash1_kernel(),
      cuda_flash2_kernel(),
      cudnn_sdpa_kernel(),
      cudnn_sdpa_fp8_kernel(),
#endif
  };
#if defined(ATTNBENCH_INJECT_SLOWDOWN)
  // Test builds only (CMake -DATTNBENCH_INJECT_SLOWDOWN=kernel:percent): that kernel runs
  // slower by the given percent, so the regression gate can be shown to catch it.
  {
    const std::string injection = ATTNBENCH_INJECT_SLOWDOWN;
    const size_t colon = injection.rfind(':');
    const std::string slowed = injection.substr(0, colon);
    const double percent = std::stod(injection.substr(colon + 1));
    for (Kernel& kernel : kernels) {
      if (kernel.name == slowed) kernel = with_injected_slowdown(std::move(kernel), percent / 100);
    }
  }
#endif
  // Test-only kernels that crash or hang on purpose, for the isolation tests; listed only when
  // ATTNBENCH_TEST_KERNELS=1 so no user suite ever runs them by accident.
  const char* test_kernels = std::getenv("ATTNBENCH_TEST_KERNELS");
  if (test_kernels != nullptr && std::string(test_kernels) == "1") {
    for (Kernel& kernel : isolation_test_kernels()) kernels.push_back(std::move(kernel));
  }
  return kernels;
}

}  // namespace

const std::vector<Kernel>& all_kernels() {
  static const std::vector<Kernel> kernels = registered_kernels();
  return kernels;
}

const Kernel* find_kernel(std::string_view name) {
  for (const Kernel& kernel : all_kernels()) {
    if (kernel.name == name) return &kernel;
  }
  return nullptr;
}

}  // namespace attnbench
