// cuda.flash_decode's plan and Kernel entry: picks the instantiation (head dim x dtype), the
// number of splits (default_splits from the device's SMs and the cache's length, or the
// variant's fixed count) and the fp32 workspace of the splits' partial rows, from the harness's
// scratch. The kernels and their description are in flash_decode_kernel.cuh.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/common/plan_helpers.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/flash_decode/flash_decode_launch.h"
#include "reference/flops.h"

namespace attnbench::flash_decode {
inline namespace ATTNBENCH_TARGET {
namespace {

constexpr int kMinimumSm = 80;
constexpr int kLaunches = 2;  // split, combine
// The SMs the bytes model splits for: the H100's and the H200's, the cards the cost model knows.
constexpr int kModeledSms = 132;

class FlashDecodePlan final : public Plan {
 public:
  FlashDecodePlan(const Problem& problem, const PlanContext& context, std::string name,
                  const Instantiation& instantiation, int64_t fixed_splits)
      : problem_(problem),
        stream_(static_cast<cudaStream_t>(context.stream)),
        device_(context.device),
        name_(std::move(name)),
        instantiation_(instantiation),
        fixed_splits_(fixed_splits) {}

  Status build(ScratchAllocator& allocator) {
    int sm = 0;
    if (Status status = gpu::sm_version(device_, sm); !status) return status;
    if (sm < kMinimumSm) {
      return Status::Error("unsupported: " + name_ + " needs sm_80 or newer; device is sm_" +
                           std::to_string(sm));
    }
    int sms = 0;
    if (Status status = gpu::sm_count(device_, sms); !status) return status;
    splits_ = fixed_splits_ > 0 ? fixed_splits_ : default_splits(problem_, sms);
    const size_t bytes = workspace_bytes(problem_, splits_);
    Status status = gpu::allocate_scratch(
        allocator, bytes, name_ + " workspace (splits x b x hq x sq x (dv + 1) fp32)", scratch_);
    if (!status) return status;
    const int64_t rows = splits_ * problem_.batch * problem_.heads_q * problem_.seqlen_q;
    workspace_.out = scratch_.as<float>();
    workspace_.lse = workspace_.out + rows * problem_.head_dim_v;
    return Status::Ok();
  }

  Status run(const AttentionParams& params) override {
    if (Status status = gpu::check_params_match(problem_, params); !status) return status;
    return instantiation_.launch(params, workspace_, static_cast<int>(splits_), stream_);
  }

  // The splits this plan cut the keys into, stored with the result.
  std::string details() const override { return nlohmann::json{{"splits", splits_}}.dump(); }

 private:
  Problem problem_;
  cudaStream_t stream_;
  int device_;
  std::string name_;
  Instantiation instantiation_;
  int64_t fixed_splits_;
  int64_t splits_ = 1;
  ScratchBuffer scratch_;
  Workspace workspace_;
};

}  // namespace

Kernel flash_decode_kernel_entry(std::string name, std::string summary,
                                 std::vector<Instantiation> instantiations, int64_t fixed_splits) {
  Kernel kernel;
  kernel.name = std::move(name);
  kernel.summary = std::move(summary);
  kernel.backend = kKernelBackend;
  kernel.deterministic = true;
  kernel.returns_lse = true;
  SupportTable& table = kernel.support;
  gpu::add_instantiated(table, instantiations);  // dtypes and head dims, as instantiated
  table.masks = {MaskKind::none, MaskKind::causal, MaskKind::causal_br, MaskKind::window,
                 MaskKind::padding};
  table.layouts = {Layout::bshd, Layout::bhsd, Layout::qkv_packed, Layout::thd};
  table.paged_kv = true;
  table.max_seqlen_q = kMaxQueryRows;
  table.archs = {"sm_80", "sm_90"};
  table.notes =
      "decode: up to 16 query rows per sequence; varlen batches and paged caches; workspace "
      "splits x b x hq x sq x (dv + 1) fp32";
  // The cache, q and out once (attention_bytes), and the splits' partial rows written by the split
  // kernel and read back by the combine.
  kernel.bytes_moved = [fixed_splits](const Problem& problem) {
    const int64_t splits = fixed_splits > 0 ? fixed_splits : default_splits(problem, kModeledSms);
    return attention_bytes(problem) + 2.0 * static_cast<double>(workspace_bytes(problem, splits));
  };
  kernel.expected_resources = [fixed_splits](const Problem& problem) {
    // The splits depend on the device's SMs unless fixed: the workspace is declared only then.
    ResourceExpectation expected;
    expected.launches = kLaunches;
    if (fixed_splits > 0) {
      expected.extra_memory_bytes = static_cast<int64_t>(workspace_bytes(problem, fixed_splits));
    }
    return expected;
  };
  kernel.make_plan = [table, kernel_name = kernel.name, instantiations, fixed_splits](
                         const Problem& problem,
                         const PlanContext& context) -> Result<std::unique_ptr<Plan>> {
    if (std::string reason = unsupported_reason(table, problem); !reason.empty()) {
      return Status::Error("unsupported: " + reason);
    }
    const Instantiation* instantiation = gpu::find_instantiation(instantiations, problem);
    if (instantiation == nullptr) {
      return Status::Error("unsupported: " + kernel_name + ": no instantiation for " +
                           shape_string(problem));
    }
    auto plan = std::make_unique<FlashDecodePlan>(problem, context, kernel_name, *instantiation,
                                                  fixed_splits);
    if (Status status = plan->build(context.scratch); !status) return status;
    return plan;
  };
  return kernel;
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash_decode

namespace attnbench {
inline namespace ATTNBENCH_TARGET {

namespace {
std::vector<flash_decode::Instantiation> flash_decode_instantiations() {
  using flash_decode::launch_flash_decode;
  return {{64, DType::f16, &launch_flash_decode<64, DType::f16>},
          {64, DType::bf16, &launch_flash_decode<64, DType::bf16>},
          {128, DType::f16, &launch_flash_decode<128, DType::f16>},
          {128, DType::bf16, &launch_flash_decode<128, DType::bf16>}};
}
constexpr const char* kSummary =
    "split-KV decode (FlashDecoding): the cache's keys split across blocks, GQA groups packed, "
    "an LSE per split and a combine; varlen and paged";
}  // namespace

Kernel cuda_flash_decode_kernel() {
  return flash_decode::flash_decode_kernel_entry("cuda.flash_decode", kSummary,
                                                 flash_decode_instantiations());
}

Kernel cuda_flash_decode_unsplit_kernel() {
  Kernel kernel = flash_decode::flash_decode_kernel_entry(
      variant_name("cuda.flash_decode", "splits=1"),
      "cuda.flash_decode with the keys in one split: one block per (batch, KV group)",
      flash_decode_instantiations(), 1);
  kernel.variant_of = "cuda.flash_decode";
  return kernel;
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench
