// A probe for the timer, not an attention kernel: one block that spins on the SM's cycle
// counter and touches no global memory, so its time cannot depend on what the L2 holds. The
// L2-flush test (tests/gpu/test_gpu.cpp, GpuTimer.L2FlushDoesNotBillTheNextKernel) times it with
// and without the harness's flush before it: a flush that left dirty lines would bill their
// write-back to it.
#include <memory>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/launch.cuh"
#include "tests/test_kernels/test_kernels.h"

namespace attnbench {
namespace {

__global__ void spin_for_cycles(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

class ClockSpinPlan final : public Plan {
 public:
  ClockSpinPlan(long long cycles, cudaStream_t stream) : cycles_(cycles), stream_(stream) {}
  Status run(const AttentionParams&) override {
    launch_kernel(spin_for_cycles, 1, 1, 0, stream_, cycles_);
    ATTNBENCH_CUDA_TRY_LAUNCH();
    return Status::Ok();
  }

 private:
  long long cycles_;
  cudaStream_t stream_;
};

}  // namespace

std::unique_ptr<Plan> make_clock_spin_plan(long long cycles, const PlanContext& context) {
  return std::make_unique<ClockSpinPlan>(cycles, static_cast<cudaStream_t>(context.stream));
}

}  // namespace attnbench
