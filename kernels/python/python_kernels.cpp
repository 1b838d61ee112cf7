#include "kernels/python/python_kernels.h"

#include <dlfcn.h>

#include <cstdio>
#include <filesystem>
#include <utility>

#include "kernels/plugin/plugin_kernels.h"

namespace attnbench {
namespace {

// The bridge's one entry point (kernels/python/bridge.cpp).
using PythonKernelsFn = int (*)(const char* python_executable, const char* target, const char* name,
                                const char* helper_dir, const attnbench_kernel** kernels,
                                const attnbench_backward** backwards, int* count, char* origin,
                                size_t origin_size, char* error, size_t error_size);

struct Bridge {
  PythonKernelsFn entry = nullptr;
  std::string python_executable;
};

std::filesystem::path executable_dir() {
  std::error_code error;
  return std::filesystem::read_symlink("/proc/self/exe", error).parent_path();
}

// The python3 on PATH: its executable and its shared libpython, as that Python reports them.
Result<std::pair<std::string, std::string>> find_python() {
  FILE* pipe = popen(
      "python3 -c 'import os, sys, sysconfig; print(sys.executable); "
      "print(os.path.join(sysconfig.get_config_var(\"LIBDIR\") or \"\", "
      "sysconfig.get_config_var(\"INSTSONAME\") or \"\"))' 2>/dev/null",
      "r");
  if (pipe == nullptr) return Status::Error("Python kernels unavailable: cannot run python3");
  std::string text;
  char buffer[1024];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) text.append(buffer, n);
  const int status = pclose(pipe);
  const size_t newline = text.find('\n');
  if (status != 0 || newline == std::string::npos) {
    return Status::Error("Python kernels unavailable: no python3 on PATH (Python 3.10 or later)");
  }
  std::string library = text.substr(newline + 1);
  while (!library.empty() && library.back() == '\n') library.pop_back();
  return std::pair{text.substr(0, newline), library};
}

// Where attnbench_bridge.py and the shipped Python kernels are: the source tree this build came
// from, else bin/python/ beside the executable (a GPU bundle unpacked elsewhere).
std::string python_helper_dir() {
  std::error_code error;
  if (std::filesystem::exists(std::filesystem::path(ATTNBENCH_PYTHON_DIR) / "attnbench_bridge.py", error)) {
    return ATTNBENCH_PYTHON_DIR;
  }
  return (executable_dir() / "python").string();
}

// libpython of the python3 on PATH (global, for the modules Python imports), then the bridge
// next to the attnbench executable (the build's bin/ and a bundle alike).
Result<Bridge> open_bridge() {
  static Result<Bridge> opened = []() -> Result<Bridge> {
    const std::filesystem::path path = executable_dir() / "libattnbench_python.so";
    std::error_code error;
    if (!std::filesystem::exists(path, error)) {
      return Status::Error("Python kernels are not built in: no " + path.string() +
                           " (CMake found no Python 3 headers; install python3-dev and rebuild)");
    }
    Result<std::pair<std::string, std::string>> python = find_python();
    if (!python) return python.status();
    const auto& [executable, library] = *python;
    if (dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      return Status::Error("Python kernels unavailable: " + executable + " has no shared libpython (" +
                           library + "): " + dlerror());
    }
    void* bridge = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (bridge == nullptr) {
      return Status::Error(std::string("Python kernels unavailable: cannot load the Python bridge: ") + dlerror());
    }
    auto entry = reinterpret_cast<PythonKernelsFn>(dlsym(bridge, "attnbench_python_kernels"));
    if (entry == nullptr) return Status::Error("Python kernels unavailable: " + path.string() + " has no entry point");
    return Bridge{entry, executable};
  }();
  return opened;
}

}  // namespace

std::string python_kernels_unavailable_reason() {
  const Result<Bridge> bridge = open_bridge();
  return bridge ? std::string() : bridge.status().message;
}

Result<std::vector<Kernel>> load_python_kernels(const std::string& target, const std::string& name) {
  const Result<Bridge> bridge = open_bridge();
  if (!bridge) return bridge.status();
  const attnbench_kernel* described = nullptr;
  const attnbench_backward* backwards = nullptr;
  int count = 0;
  char origin[2048] = "";
  char error[2048] = "";
  const std::string helpers = python_helper_dir();
  if (bridge->entry(bridge->python_executable.c_str(), target.c_str(), name.c_str(),
                    helpers.c_str(), &described, &backwards, &count, origin, sizeof origin, error,
                    sizeof error) != 0) {
    return Status::Error(error[0] != '\0' ? error : "the Python bridge failed and gave no reason");
  }
  std::vector<Kernel> kernels;
  for (int i = 0; i < count; ++i) {
#if !defined(ATTNBENCH_HAVE_CUDA)
    if (described[i].backend == ATTNBENCH_BACKEND_CUDA) continue;  // no GPU device in this build
#endif
    Result<Kernel> kernel = wrap_abi_kernel(described[i], origin, nullptr, &backwards[i]);
    if (!kernel) return kernel.status();
    kernels.push_back(std::move(*kernel));
  }
  if (kernels.empty()) {
    return Status::Error(target + " runs on CUDA GPUs only (its table's devices), and this build has no CUDA backend");
  }
  return kernels;
}

std::vector<Kernel> unavailable_python_kernels(const std::string& name, const std::string& reason) {
  std::vector<Backend> backends = {Backend::cpu};
#if defined(ATTNBENCH_HAVE_CUDA)
  backends.push_back(Backend::cuda);
#endif
  std::vector<Kernel> kernels;
  for (const Backend backend : backends) {
    Kernel kernel;
    kernel.name = name;
    kernel.summary = "shipped Python kernel (kernels/python/)";
    kernel.backend = backend;
    kernel.origin = "python (not loaded)";
    kernel.unavailable_reason = reason;
    kernel.make_plan = [reason](const Problem&, const PlanContext&) -> Result<std::unique_ptr<Plan>> {
      return Status::Error("unsupported: " + reason);
    };
    kernels.push_back(std::move(kernel));
  }
  return kernels;
}

}  // namespace attnbench
