// The planted-bug variants of cuda.flash2 and cuda.flash3_wg1 (planted_bugs.cmake),
// emulated-device kernels named test.flash2_<bug> and test.flash3_wg1_<bug>, listed by the
// registry only with ATTNBENCH_TEST_KERNELS=1.
#pragma once

#include <vector>

#include "kernels/kernel.h"

namespace attnbench {

std::vector<Kernel> planted_kernels();

}  // namespace attnbench
