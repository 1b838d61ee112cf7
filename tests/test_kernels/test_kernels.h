// Test-only kernels: ones that fail on purpose, to prove the harness survives them (a segfault,
// a hang, a sticky CUDA error from an out-of-bounds write), and one whose time is a fixed sleep. The registry lists them only when
// ATTNBENCH_TEST_KERNELS=1.
#pragma once

#include <memory>
#include <vector>

#include "kernels/kernel.h"

namespace attnbench {

// test.cpu_segfault, test.cpu_hang, test.cpu_abort, test.cpu_flash_sleeps; and
// test.cuda_oob_write with the CUDA backend.
std::vector<Kernel> isolation_test_kernels();

// cpu.flash with each planted backward bug the gradient checker must catch:
// test.cpu_flash_bwd_no_delta, _no_softmax_scale, _gqa_not_summed, _last_key_block_skipped.
std::vector<Kernel> planted_cpu_backward_kernels();

// The same kernel, made slower by `fraction` (0.10: 10 %) with a busy-wait after each forward
// proportional to the forward's own time. For test builds that prove the regression gate
// catches a slowdown (CMake's ATTNBENCH_INJECT_SLOWDOWN); no normal build uses it.
Kernel with_injected_slowdown(Kernel kernel, double fraction);

#if defined(ATTNBENCH_HAVE_CUDA)
// tests/test_kernels/cuda_oob_write.cu: writes far past the end of its output: an illegal address.
Kernel cuda_oob_write_test_kernel();
// tests/test_kernels/cuda_clock_spin.cu: a timer probe, not a kernel of the registry: one thread that
// spins `cycles` SM clock cycles and touches no global memory.
std::unique_ptr<Plan> make_clock_spin_plan(long long cycles, const PlanContext& context);
#endif

}  // namespace attnbench
