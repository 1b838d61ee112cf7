// Kernels from outside the build, through the C ABI of kernels/plugin/attnbench_plugin.h: a
// plugin library (`--plugin path/lib.so`) lists them, and the Python bridge
// (kernels/python/) hands each Python kernel over in the same form, so both are wrapped here,
// one way, into attnbench's Kernel.
#pragma once

#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/plugin/attnbench_plugin.h"

namespace attnbench {

// The kernel a C ABI description stands for. `origin` is stored with each result; `keep_alive`
// is anything the description's strings and callbacks live in (the library handle); `backward`
// its backward (ABI 3), or null: forward only.
Result<Kernel> wrap_abi_kernel(const attnbench_kernel& described, std::string origin,
                               std::shared_ptr<void> keep_alive,
                               const attnbench_backward* backward = nullptr);

// Opens the library at `path`, checks its ABI version and wraps every kernel it lists. Errors
// are one line naming the path: not found, no entry symbol, a different ABI version, a bad
// support table.
Result<std::vector<Kernel>> load_plugin_kernels(const std::string& path);

}  // namespace attnbench
