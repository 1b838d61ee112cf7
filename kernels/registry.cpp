// Every kernel attnbench knows, in one list. To add a kernel, add its factory call here.
#include "kernels/registry.h"

#include <fnmatch.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/emu/emu_kernels.h"
#include "kernels/plugin/plugin_kernels.h"
#include "kernels/python/python_kernels.h"
#include "tests/test_kernels/planted/planted_kernels.h"
#include "tests/test_kernels/test_kernels.h"
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
      cpu_flash_fp8_kernel(),
      cpu_flash_fp8_block_kernel(),
      cpu_flash_fp8_incoherent_kernel(),
      cpu_flash_fp8_block_incoherent_kernel(),
  };
  for (Kernel& variant : cpu_flash_variant_kernels()) kernels.push_back(std::move(variant));
#if defined(ATTNBENCH_HAVE_CUDA)
  // ---- CUDA and cuDNN: cuBLAS's eager attention, the in-house kernels (cuda_kernels.h's one
  // list, which the emulated device builds too), cuDNN ----------------------------------------
  kernels.push_back(cuda_naive_cublas_kernel());
  for (Kernel& kernel : in_house_cuda_kernels()) kernels.push_back(std::move(kernel));
  kernels.push_back(cudnn_sdpa_kernel());
  kernels.push_back(cudnn_sdpa_deterministic_kernel());
  kernels.push_back(cudnn_sdpa_fp8_kernel());
  kernels.push_back(cudnn_sdpa_fp8_quantized_kernel());
  kernels.push_back(cudnn_sdpa_fp8_incoherent_kernel());
#endif
  // ---- the emulated device: the in-house CUDA kernels' own source on the CPU, then every GPU
  // kernel without an emulated build, by name with the reason ----------------------------------
  const std::vector<Kernel> emulated = emulated_kernels();
  std::vector<Kernel> not_emulated;
  for (const Kernel& kernel : kernels) {
    const bool has_twin = std::any_of(emulated.begin(), emulated.end(),
                                      [&](const Kernel& twin) { return twin.name == kernel.name; });
    if (kernel.backend == Backend::cuda && !has_twin) not_emulated.push_back(outside_emu(kernel));
  }
  kernels.insert(kernels.end(), emulated.begin(), emulated.end());
  kernels.insert(kernels.end(), not_emulated.begin(), not_emulated.end());
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
    for (Kernel& kernel : planted_kernels()) kernels.push_back(std::move(kernel));
    for (Kernel& kernel : planted_cpu_backward_kernels()) kernels.push_back(std::move(kernel));
  }
  return kernels;
}

// Python kernels that ship with attnbench (kernels/python/), under fixed names. They are loaded
// only when a glob names their namespace ("torch.*", "torch.sdpa_flash"; "*" alone does not),
// so a host without Python or PyTorch runs everything else untouched.
struct ShippedPythonKernel {
  const char* name;
  const char* target;  // module:function under kernels/python/
};
constexpr ShippedPythonKernel kShippedPythonKernels[] = {
    {"torch.sdpa_flash", "attnbench_torch_peers:sdpa_flash"},
    {"torch.sdpa_cudnn", "attnbench_torch_peers:sdpa_cudnn"},
    {"torch.sdpa_efficient", "attnbench_torch_peers:sdpa_efficient"},
    {"torch.sdpa_math", "attnbench_torch_peers:sdpa_math"},
    {"torch.naive_outofplace", "attnbench_torch_peers:naive_outofplace"},
    {"torch.naive_inplace", "attnbench_torch_peers:naive_inplace"},
};

bool asks_for_shipped(const std::string& glob, const std::string& name) {
  const std::string name_space = name.substr(0, name.find('.') + 1);
  return glob.rfind(name_space, 0) == 0 && glob_match(glob, name);
}

std::vector<Kernel>& registry() {
  static std::vector<Kernel> kernels = registered_kernels();
  return kernels;
}

ExternalKernelSources& sources() {
  static ExternalKernelSources added;
  return added;
}

bool contains(const std::vector<std::string>& items, const std::string& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

Status add_kernels(std::vector<Kernel> kernels) {
  for (Kernel& kernel : kernels) {
    if (find_kernel(kernel.name, kernel.backend) != nullptr) {
      return Status::Error("kernel '" + kernel.name + "' (" + kernel.origin +
                           ") has the name of a kernel attnbench already has");
    }
    registry().push_back(std::move(kernel));
  }
  return Status::Ok();
}

}  // namespace

const std::vector<Kernel>& all_kernels() { return registry(); }

const Kernel* find_kernel(std::string_view name, std::optional<Backend> backend) {
  for (const Kernel& kernel : all_kernels()) {
    if (kernel.name == name && (!backend || kernel.backend == *backend)) return &kernel;
  }
  return nullptr;
}

bool glob_match(const std::string& pattern, const std::string& text) {
  return fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

bool kernel_selected(const std::string& glob, const Kernel& kernel) {
  if (glob == kernel.name) return true;
  if (kernel.variant_of.empty()) return glob_match(glob, kernel.name);
  constexpr std::string_view kEveryVariant = "[*]";
  return glob.size() > kEveryVariant.size() && glob.ends_with(kEveryVariant) &&
         glob_match(glob.substr(0, glob.size() - kEveryVariant.size()), kernel.variant_of);
}

std::vector<const Kernel*> variants_of(const std::string& family) {
  std::vector<const Kernel*> variants;
  for (const Kernel& kernel : all_kernels()) {
    if (kernel.variant_of == family) variants.push_back(&kernel);
  }
  return variants;
}

bool is_python_kernel_spec(std::string_view name) { return name.rfind("py:", 0) == 0; }

Status add_requested_kernels(const std::vector<std::string>& plugins,
                             const std::vector<std::string>& kernel_globs) {
  ExternalKernelSources& added = sources();
  for (const std::string& path : plugins) {
    if (contains(added.plugins, path)) continue;
    Result<std::vector<Kernel>> kernels = load_plugin_kernels(path);
    if (!kernels) return kernels.status();
    if (Status s = add_kernels(std::move(*kernels)); !s.ok)
      return Status::Error("--plugin " + path + ": " + s.message);
    added.plugins.push_back(path);
  }
  for (const std::string& glob : kernel_globs) {
    if (contains(added.kernel_globs, glob)) continue;
    if (is_python_kernel_spec(glob)) {
      Result<std::vector<Kernel>> kernels = load_python_kernels(glob.substr(3), glob);
      if (!kernels) return Status::Error("kernel '" + glob + "': " + kernels.status().message);
      if (Status s = add_kernels(std::move(*kernels)); !s.ok) return s;
      added.kernel_globs.push_back(glob);
      continue;
    }
    bool asked = false;
    for (const ShippedPythonKernel& shipped : kShippedPythonKernels) {
      if (!asks_for_shipped(glob, shipped.name) || find_kernel(shipped.name) != nullptr) continue;
      asked = true;
      Result<std::vector<Kernel>> kernels = load_python_kernels(shipped.target, shipped.name);
      if (!kernels) {
        kernels = unavailable_python_kernels(shipped.name, kernels.status().message);
      }
      if (Status s = add_kernels(std::move(*kernels)); !s.ok) return s;
    }
    if (asked) added.kernel_globs.push_back(glob);
  }
  return Status::Ok();
}

const ExternalKernelSources& external_kernel_sources() { return sources(); }

}  // namespace attnbench
