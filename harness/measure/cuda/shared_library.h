// Vendor libraries opened at run time (NVML, CUPTI): the harness links neither, so a host without
// one still runs, and the one who asked says what it tried.
#pragma once

#include <dlfcn.h>

#include <string>
#include <vector>

namespace attnbench {

// The first of `candidates` (names or paths, in order) that dlopen loads, or null; `tried` then
// holds each candidate's dlopen error, "; " between them.
inline void* open_first_library(const std::vector<std::string>& candidates, std::string& tried) {
  tried.clear();
  for (const std::string& name : candidates) {
    if (void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL); library != nullptr) {
      return library;
    }
    const char* error = dlerror();
    tried += (tried.empty() ? "" : "; ") + std::string(error != nullptr ? error : name);
  }
  return nullptr;
}

// `name` in `library` as the function pointer type it is declared with; null when absent.
template <typename Function>
Function lookup_symbol(void* library, const char* name) {
  return reinterpret_cast<Function>(dlsym(library, name));
}

}  // namespace attnbench
