// cuda.flash2's plan: the support table, what a launch needs checked on the host (the device's
// architecture and shared memory, 16-byte aligned rows), and the dispatch to the instantiation
// of the problem's head dim and dtype. The kernel itself is flash2_kernel.cuh.
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/plan_helpers.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/flash2/flash2_launch.h"
#include "kernels/cuda/flash2/flash2_traits.h"

namespace attnbench::flash2 {
inline namespace ATTNBENCH_TARGET {
namespace {

constexpr int kMinimumSm = 80;  // mma.sync with bf16, ldmatrix, cp.async
// cp.async and the output stores move 16 bytes: every row must start on a 16-byte boundary.
constexpr uintptr_t kRowAlignmentBytes = kChunkBytes;
constexpr int64_t kRowAlignmentElements = kChunkElements;

// One row per translation unit flash2_hdim<D>_<dtype>.cu.
constexpr Instantiation kInstantiations[] = {
    {64, DType::f16, &launch_flash2<64, DType::f16>, Traits<64>::kSharedBytes},
    {64, DType::bf16, &launch_flash2<64, DType::bf16>, Traits<64>::kSharedBytes},
    {128, DType::f16, &launch_flash2<128, DType::f16>, Traits<128>::kSharedBytes},
    {128, DType::bf16, &launch_flash2<128, DType::bf16>, Traits<128>::kSharedBytes},
    {256, DType::f16, &launch_flash2<256, DType::f16>, Traits<256>::kSharedBytes},
    {256, DType::bf16, &launch_flash2<256, DType::bf16>, Traits<256>::kSharedBytes},
};

bool aligned(const void* pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % kRowAlignmentBytes == 0;
}

bool aligned_strides(int64_t batch, int64_t row, int64_t head) {
  return batch % kRowAlignmentElements == 0 && row % kRowAlignmentElements == 0 &&
         head % kRowAlignmentElements == 0;
}

// Every layout the harness builds (bshd, bhsd, packed QKV of head dims 64/128/256 in buffers from
// cudaMalloc) passes; a caller handing over offset views would not.
Status check_alignment(const AttentionParams& p, const std::string& name) {
  const bool pointers = aligned(p.q) && aligned(p.k) && aligned(p.v) && aligned(p.out);
  const bool strides = aligned_strides(p.q_batch_stride, p.q_row_stride, p.q_head_stride) &&
                       aligned_strides(p.k_batch_stride, p.k_row_stride, p.k_head_stride) &&
                       aligned_strides(p.v_batch_stride, p.v_row_stride, p.v_head_stride) &&
                       aligned_strides(p.out_batch_stride, p.out_row_stride, p.out_head_stride);
  if (pointers && strides) return Status::Ok();
  return Status::Error(name +
                       ": q, k, v and out rows must start on 16-byte boundaries "
                       "(pointers 16-byte aligned, strides multiples of 8 elements)");
}

class Flash2Plan final : public Plan {
 public:
  Flash2Plan(const Problem& problem, const PlanContext& context, const Instantiation& kernel,
             std::string name)
      : problem_(problem),
        stream_(static_cast<cudaStream_t>(context.stream)),
        device_(context.device),
        kernel_(kernel),
        name_(std::move(name)) {}

  Status build() {
    int sm = 0;
    if (Status status = gpu::sm_version(device_, sm); !status) return status;
    if (sm < kMinimumSm) {
      return Status::Error("unsupported: " + name_ + " needs sm_80 or newer; device is sm_" +
                           std::to_string(sm));
    }
    return gpu::check_shared_memory(device_, kernel_.shared_bytes,
                                    name_ + " at head dim " + std::to_string(kernel_.head_dim));
  }

  Status run(const AttentionParams& params) override {
    if (Status status = gpu::check_params_match(problem_, params); !status) return status;
    if (Status status = check_alignment(params, name_); !status) return status;
    return kernel_.launch(params, stream_);
  }

 private:
  Problem problem_;
  cudaStream_t stream_;
  int device_;
  Instantiation kernel_;
  std::string name_;
};

// The table of `instantiations`: their dtypes and head dims, everything else as the kernel is.
SupportTable flash2_support_table(const std::vector<Instantiation>& instantiations) {
  SupportTable table;
  gpu::add_instantiated(table, instantiations);
  table.separate_v_dim = false;
  table.masks = {MaskKind::none, MaskKind::causal, MaskKind::causal_br, MaskKind::window,
                 MaskKind::padding};
  table.layouts = {Layout::bshd, Layout::bhsd, Layout::qkv_packed};
  table.gqa = true;
  table.archs = {"sm_80", "sm_90"};
  table.notes =
      "128 query rows per CTA; fp32 accumulation, P rounded to the input dtype for P V; "
      "no scratch memory";
  return table;
}

}  // namespace

Kernel flash2_kernel_entry(std::string name, std::string summary,
                           std::vector<Instantiation> instantiations) {
  Kernel kernel;
  kernel.name = std::move(name);
  kernel.summary = std::move(summary);
  kernel.backend = kKernelBackend;
  kernel.deterministic = true;
  kernel.returns_lse = true;
  kernel.support = flash2_support_table(instantiations);
  // Everything on chip: no scratch, one launch (the grid covers every query tile of every head).
  kernel.expected_resources = [](const Problem&) { return ResourceExpectation{0, 1}; };
  kernel.make_plan = [name = kernel.name, instantiations = std::move(instantiations)](
                         const Problem& problem,
                         const PlanContext& context) -> Result<std::unique_ptr<Plan>> {
    const Instantiation* instantiation =
        gpu::find_instantiation(instantiations, problem.head_dim_qk, problem.input_dtype);
    if (instantiation == nullptr || problem.head_dim_v != problem.head_dim_qk) {
      return Status::Error(name + ": no instantiation for " + shape_string(problem));
    }
    auto plan = std::make_unique<Flash2Plan>(problem, context, *instantiation, name);
    if (Status status = plan->build(); !status) return status;
    return plan;
  };
  return kernel;
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash2

namespace attnbench {
inline namespace ATTNBENCH_TARGET {

Kernel cuda_flash2_kernel() {
  return flash2::flash2_kernel_entry(
      "cuda.flash2",
      "FlashAttention-2 on tensor cores: mma.sync m16n8k16, ldmatrix, cp.async pipeline, "
      "swizzled shared memory, masked tiles skipped",
      std::vector<flash2::Instantiation>(std::begin(flash2::kInstantiations),
                                         std::end(flash2::kInstantiations)));
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench
