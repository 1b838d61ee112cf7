// test.cuda_oob_write — a kernel with the bug the isolation tests need: it writes far past the end
// of its output. The write faults with an illegal address, a sticky error that poisons the CUDA
// context of the worker process; the harness must record the case as crashed and go on with a
// fresh worker. Test-only: the registry lists it only under ATTNBENCH_TEST_KERNELS=1.
// Limits: fp32/fp16/bf16 (it never reads its inputs), any shape, mask and layout, sm_80 and newer.
#include <cstdint>
#include <memory>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/launch.cuh"
#include "tests/test_kernels/test_kernels.h"

namespace attnbench {
namespace {

// 1 TiB past the output: beyond any allocation a GPU of this generation can hold (an H200 has
// 141 GB), so the address is unmapped and the write faults instead of corrupting a neighbour.
constexpr uint64_t kBytesPastEnd = uint64_t{1} << 40;

__global__ void write_past_end(unsigned char* out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    volatile unsigned char* far = out + kBytesPastEnd;
    *far = 1;
  }
}

class OutOfBoundsPlan final : public Plan {
 public:
  explicit OutOfBoundsPlan(cudaStream_t stream) : stream_(stream) {}
  Status run(const AttentionParams& params) override {
    launch_kernel(write_past_end, 1, 1, 0, stream_, static_cast<unsigned char*>(params.out));
    ATTNBENCH_CUDA_TRY_LAUNCH();
    return Status::Ok();
  }

 private:
  cudaStream_t stream_;
};

}  // namespace

Kernel cuda_oob_write_test_kernel() {
  Kernel kernel;
  kernel.name = "test.cuda_oob_write";
  kernel.summary = "writes 1 TiB past its output: an illegal address (sticky CUDA error)";
  kernel.backend = Backend::cuda;
  kernel.deterministic = false;
  kernel.returns_lse = false;
  kernel.support.input_dtypes = {DType::f32, DType::f16, DType::bf16};
  kernel.support.max_head_dim = 256;
  kernel.support.separate_v_dim = true;
  kernel.support.masks = {MaskKind::none, MaskKind::causal, MaskKind::causal_br, MaskKind::window,
                          MaskKind::padding};
  kernel.support.layouts = {Layout::bshd, Layout::bhsd, Layout::qkv_packed};
  kernel.support.archs = {"sm_80", "sm_90"};
  kernel.support.notes = "test only: faults on purpose";
  kernel.make_plan = [](const Problem&,
                        const PlanContext& context) -> Result<std::unique_ptr<Plan>> {
    return std::make_unique<OutOfBoundsPlan>(static_cast<cudaStream_t>(context.stream));
  };
  return kernel;
}

}  // namespace attnbench
