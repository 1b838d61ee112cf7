// cuda.flash1's plan and Kernel entry: picks the instantiation (head dim x dtype) at plan time,
// takes FA1's state (O, l, m) from the harness's scratch, and runs one launch per K/V block
// (flash1.h, launch_count). The kernel and its description are in flash1.cuh.
#include <cstdint>
#include <memory>
#include <string>

#include "kernels/cuda/common/plan_helpers.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/flash1.h"
#include "kernels/cuda/naive_family.h"

namespace attnbench::gpu::flash1 {
inline namespace ATTNBENCH_TARGET {
namespace {

constexpr int kMinimumSm = 80;
// The kernel loads rows of q, k, v as 16-byte vectors.
constexpr size_t kVectorAlignment = 16;
constexpr const char* kName = "cuda.flash1";

using ConfigureFunction = Status (*)();
using LaunchFunction = Status (*)(const AttentionParams&, const State&, int64_t, cudaStream_t);

struct Entry {
  ConfigureFunction configure = nullptr;
  LaunchFunction launch = nullptr;
};

template <int kHeadDim, DType kInput>
Entry entry() {
  return {&Instance<kHeadDim, kInput>::configure, &Instance<kHeadDim, kInput>::launch};
}

// The instantiation for a problem inside the table; none outside it.
Entry find_entry(const Problem& problem) {
  const bool bf16 = problem.input_dtype == DType::bf16;
  if (problem.head_dim_qk == 64) return bf16 ? entry<64, DType::bf16>() : entry<64, DType::f16>();
  if (problem.head_dim_qk == 128) {
    return bf16 ? entry<128, DType::bf16>() : entry<128, DType::f16>();
  }
  return {};
}

class Flash1Plan final : public Plan {
 public:
  Flash1Plan(const Problem& problem, const PlanContext& context)
      : problem_(problem),
        stream_(static_cast<cudaStream_t>(context.stream)),
        device_(context.device),
        entry_(find_entry(problem)),
        launches_(launch_count(problem)) {}

  Status build(ScratchAllocator& allocator) {
    if (entry_.launch == nullptr) {
      return Status::Error(std::string("unsupported: ") + kName + ": no instantiation for " +
                           shape_string(problem_));
    }
    int sm = 0;
    if (Status status = sm_version(device_, sm); !status) return status;
    if (sm < kMinimumSm) {
      return Status::Error(std::string("unsupported: ") + kName +
                           " needs sm_80 or newer; device is sm_" + std::to_string(sm));
    }
    if (Status status = entry_.configure(); !status) return status;
    Status status =
        allocate_scratch(allocator, scratch_bytes(problem_),
                         std::string(kName) + " state O, l, m (b*hq*sq*(dv+2) fp32)", scratch_);
    if (!status) return status;
    // O first: its rows are dv floats (256 or 512 bytes), so m and l start aligned too.
    const size_t rows = state_elements(problem_) / static_cast<size_t>(problem_.head_dim_v + 2);
    state_.out = scratch_.as<float>();
    state_.max = state_.out + rows * static_cast<size_t>(problem_.head_dim_v);
    state_.sum = state_.max + rows;
    return Status::Ok();
  }

  Status run(const AttentionParams& params) override {
    if (Status status = check_params_match(problem_, params); !status) return status;
    if (Status status = check_alignment(params, kVectorAlignment, kName); !status) return status;
    if (params.mask == MaskKind::padding && params.key_lengths == nullptr) {
      return Status::Error(std::string(kName) + ": padding mask without key_lengths");
    }
    // FA1's outer loop: K/V blocks in order, each launch reading the state the previous wrote.
    for (int64_t kv_block = 0; kv_block < launches_; ++kv_block) {
      if (Status status = entry_.launch(params, state_, kv_block, stream_); !status) return status;
    }
    return Status::Ok();
  }

 private:
  Problem problem_;
  cudaStream_t stream_;
  int device_;
  Entry entry_;
  int64_t launches_;
  ScratchBuffer scratch_;  // O (b, hq, sq, dv), then m and l (b, hq, sq), fp32
  State state_;
};

}  // namespace
}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::gpu::flash1

namespace attnbench {
inline namespace ATTNBENCH_TARGET {

Kernel cuda_flash1_kernel() {
  Kernel kernel;
  kernel.name = "cuda.flash1";
  kernel.summary =
      "FlashAttention-1 on CUDA cores: one launch per K/V block, O, l and m kept in device "
      "memory between blocks";
  kernel.backend = kKernelBackend;
  kernel.deterministic = true;
  kernel.returns_lse = true;
  kernel.support = gpu::tier1_support_table(
      "scratch b x hq x sq x (dv + 2) fp32 (O, l, m), flat in seqlen_k; seqlen_k / 64 launches "
      "per forward");
  // The state the plan allocates, and its one launch per K/V block.
  kernel.expected_resources = [](const Problem& problem) {
    return ResourceExpectation{static_cast<int64_t>(gpu::flash1::scratch_bytes(problem)),
                               static_cast<int>(gpu::flash1::launch_count(problem))};
  };
  kernel.make_plan = [table = kernel.support](
                         const Problem& problem,
                         const PlanContext& context) -> Result<std::unique_ptr<Plan>> {
    if (std::string reason = unsupported_reason(table, problem); !reason.empty()) {
      return Status::Error("unsupported: " + reason);
    }
    auto plan = std::make_unique<gpu::flash1::Flash1Plan>(problem, context);
    if (Status status = plan->build(context.scratch); !status) return status;
    return plan;
  };
  return kernel;
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench
