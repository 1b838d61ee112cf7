// Kernel names as the parameters of tests that run once per kernel (test_name_part makes one a
// part of the test's name).
#pragma once

#include <string>
#include <vector>

#include "kernels/registry.h"
#include "tests/support/test_names.h"

namespace attnbench {

// The registry's CPU kernels, in its order; variants (cpu.flash[...]) are their family's
// configurations, checked where `attnbench tune` runs them (tests/e2e/test_tune.cpp).
inline std::vector<std::string> cpu_kernel_names() {
  std::vector<std::string> names;
  for (const Kernel& kernel : all_kernels()) {
    if (kernel.backend == Backend::cpu && kernel.variant_of.empty()) names.push_back(kernel.name);
  }
  return names;
}

// The CPU kernels that compute attention as written, to fp32 (not an FP8 recipe's): these agree
// with an fp64 loop to the output dtype's rounding.
inline std::vector<std::string> exact_cpu_kernel_names() {
  std::vector<std::string> names;
  for (const Kernel& kernel : all_kernels()) {
    if (kernel.backend == Backend::cpu && !kernel.fp8_recipe && kernel.variant_of.empty()) {
      names.push_back(kernel.name);
    }
  }
  return names;
}

// The CPU kernels that run an FP8 recipe (cpu.flash_fp8 and its variants).
inline std::vector<std::string> fp8_recipe_cpu_kernel_names() {
  std::vector<std::string> names;
  for (const Kernel& kernel : all_kernels()) {
    if (kernel.backend == Backend::cpu && kernel.fp8_recipe) names.push_back(kernel.name);
  }
  return names;
}

// The in-house CUDA kernels the emulated device runs (backend emu, not listed as unavailable);
// their variants (cuda.flash3[stages=2]) are checked where `attnbench tune` runs them.
inline std::vector<std::string> emulated_kernel_names() {
  std::vector<std::string> names;
  for (const Kernel& kernel : all_kernels()) {
    if (kernel.backend == Backend::emu && kernel.unavailable_reason.empty() &&
        kernel.variant_of.empty()) {
      names.push_back(kernel.name);
    }
  }
  return names;
}

// The suite a kernel's correctness matrix runs (the emulated matrix, the GPU ctest test): the
// kernel's own correctness_suite (kernels/kernel.h), as the registry has it on `backend`.
inline std::string correctness_suite_of(const std::string& kernel, Backend backend) {
  const Kernel* found = find_kernel(kernel, backend);
  return found != nullptr ? found->correctness_suite : "ctest";
}

}  // namespace attnbench
