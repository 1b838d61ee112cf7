// The planted-bug variants of cuda.flash2 (planted_bugs.cmake), emulated-device kernels named
// test.flash2_<bug>, listed by the registry only with ATTNBENCH_TEST_KERNELS=1.
#pragma once

#include <vector>

#include "kernels/kernel.h"

namespace attnbench {

std::vector<Kernel> planted_flash2_kernels();

}  // namespace attnbench
