// Every kernel attnbench knows, in one explicit list (registry.cpp). No static-initialization
// magic: to add a kernel, add one line there.
#pragma once

#include <string_view>
#include <vector>

#include "kernels/kernel.h"

namespace attnbench {

const std::vector<Kernel>& all_kernels();
const Kernel* find_kernel(std::string_view name);

}  // namespace attnbench
