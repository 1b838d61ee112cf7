// Test-only kernels that fail on purpose, to prove the harness survives them: a segfault, a
// hang, a sticky CUDA error from an out-of-bounds write. The registry lists them only when
// ATTNBENCH_TEST_KERNELS=1.
#pragma once

#include <vector>

#include "kernels/kernel.h"

namespace attnbench {

// test.cpu_segfault, test.cpu_hang, test.cpu_abort; and test.cuda_oob_write with the CUDA backend.
std::vector<Kernel> isolation_test_kernels();

#if defined(ATTNBENCH_HAVE_CUDA)
// kernels/cuda/test_oob_write.cu: writes far past the end of its output: an illegal address.
Kernel cuda_oob_write_test_kernel();
#endif

}  // namespace attnbench
