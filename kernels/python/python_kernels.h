// Python kernels: a Python callable measured like any kernel. The interpreter lives in
// libattnbench_python.so (kernels/python/bridge.cpp), the one part of attnbench that links
// libpython; it is opened only when a Python kernel is asked for, so attnbench itself needs no
// Python, and a host without it runs everything else and says why Python kernels are absent.
// The bridge hands each kernel over through the plugin C ABI (kernels/plugin/), wrapped there.
#pragma once

#include <string>
#include <vector>

#include "kernels/kernel.h"

namespace attnbench {

// The kernels of `target` ("package.module:function"), named `name`: one per device the
// function declares (cpu, cuda). Errors are one line: no bridge (Python not found when built),
// the module does not import (its exception's last line), no such function, a bad support dict.
Result<std::vector<Kernel>> load_python_kernels(const std::string& target, const std::string& name);

// Empty when Python kernels can be loaded here; otherwise why not (no bridge built, libpython
// missing).
std::string python_kernels_unavailable_reason();

// A kernel that is known by name but cannot run here, with the reason: one per backend this
// build has, so every device's cases are skipped with it.
std::vector<Kernel> unavailable_python_kernels(const std::string& name, const std::string& reason);

}  // namespace attnbench
