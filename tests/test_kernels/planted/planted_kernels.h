// The planted-bug variants of cuda.flash2, cuda.flash3_wg1, cuda.flash3_ws and cuda.flash3_fp8
// (planted_bugs.cmake), emulated-device kernels named test.<family>_<bug>, listed by the
// registry only with ATTNBENCH_TEST_KERNELS=1.
#pragma once

#include <vector>

#include "kernels/kernel.h"

namespace attnbench {

std::vector<Kernel> planted_kernels();

}  // namespace attnbench
