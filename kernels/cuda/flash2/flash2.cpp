// cuda.flash2's plan: the support table, what a launch needs checked on the host (the device's
// architecture and shared memory, 16-byte aligned rows), and the dispatch to the instantiation
// of the problem's head dim and dtype. The kernel itself is flash2_kernel.cuh.
#include <algorithm>
#include <cstdint>
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

// One row per translation unit flash2_hdim<D>[_v<Dv>]_<dtype>.cu, with the backward of
// flash2_backward_hdim<D>_<dtype>.cu where there is one (d 64 and 128), adding dQ as `kDq` does.
template <int HeadDim, int HeadDimV, DType kDtype>
Instantiation forward_only() {
  return {HeadDim, HeadDimV, kDtype, &launch_flash2<HeadDim, HeadDimV, kDtype>,
          Traits<HeadDim, HeadDimV>::kSharedBytes};
}
template <int HeadDim, DType kDtype, DqAccumulation kDq>
Instantiation with_backward() {
  Instantiation instantiation = forward_only<HeadDim, HeadDim, kDtype>();
  instantiation.backward = &launch_flash2_backward<HeadDim, kDtype, kDq>;
  instantiation.backward_shared_bytes = BackwardTraits<HeadDim>::kSharedBytes;
  return instantiation;
}

template <DqAccumulation kDq>
std::vector<Instantiation> instantiations() {
  return {
      with_backward<64, DType::f16, kDq>(),  with_backward<64, DType::bf16, kDq>(),
      forward_only<80, 80, DType::f16>(),    forward_only<80, 80, DType::bf16>(),
      forward_only<96, 96, DType::f16>(),    forward_only<96, 96, DType::bf16>(),
      with_backward<128, DType::f16, kDq>(), with_backward<128, DType::bf16, kDq>(),
      forward_only<192, 128, DType::f16>(),  forward_only<192, 128, DType::bf16>(),
      forward_only<256, 256, DType::f16>(),  forward_only<256, 256, DType::bf16>(),
  };
}

constexpr int kBackwardLaunches = 3;  // prepare (D, accumulators zeroed), key blocks, convert

// The backward's scratch: D (fp32 per query row), then the dQ accumulators (fp32, dq_split's
// count of them).
size_t backward_delta_bytes(const Problem& problem) {
  return static_cast<size_t>(problem.batch * problem.heads_q * problem.seqlen_q) * sizeof(float);
}
size_t backward_scratch_bytes(const Problem& problem, DqAccumulation accumulation) {
  if (!problem.has_backward()) return 0;
  const auto splits = static_cast<size_t>(dq_split(problem.seqlen_k, accumulation).splits);
  return backward_delta_bytes(problem) *
         (1 + splits * static_cast<size_t>(problem.head_dim_qk));
}

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

// The backward's tensors besides: dO through cp.async, dQ, dK and dV stored in pairs.
Status check_backward_alignment(const AttentionParams& p, const std::string& name) {
  const bool pointers = aligned(p.dout) && aligned(p.dq) && aligned(p.dk) && aligned(p.dv);
  const bool strides =
      aligned_strides(p.dout_batch_stride, p.dout_row_stride, p.dout_head_stride) &&
      aligned_strides(p.dq_batch_stride, p.dq_row_stride, p.dq_head_stride) &&
      aligned_strides(p.dk_batch_stride, p.dk_row_stride, p.dk_head_stride) &&
      aligned_strides(p.dv_batch_stride, p.dv_row_stride, p.dv_head_stride);
  if (pointers && strides) return Status::Ok();
  return Status::Error(name +
                       ": dout, dq, dk and dv rows must start on 16-byte boundaries "
                       "(pointers 16-byte aligned, strides multiples of 8 elements)");
}

class Flash2Plan final : public Plan {
 public:
  Flash2Plan(const Problem& problem, const PlanContext& context, const Instantiation& kernel,
             DqAccumulation dq_accumulation, std::string name)
      : problem_(problem),
        stream_(static_cast<cudaStream_t>(context.stream)),
        device_(context.device),
        kernel_(kernel),
        dq_accumulation_(dq_accumulation),
        name_(std::move(name)) {}

  Status build(ScratchAllocator& allocator) {
    int sm = 0;
    if (Status status = gpu::sm_version(device_, sm); !status) return status;
    if (sm < kMinimumSm) {
      return Status::Error("unsupported: " + name_ + " needs sm_80 or newer; device is sm_" +
                           std::to_string(sm));
    }
    const std::string at = name_ + " at head dim " + std::to_string(kernel_.head_dim);
    if (Status status = gpu::check_shared_memory(device_, kernel_.shared_bytes, at); !status) {
      return status;
    }
    if (!problem_.has_backward()) return Status::Ok();
    if (Status status =
            gpu::check_shared_memory(device_, kernel_.backward_shared_bytes, at + " (backward)");
        !status) {
      return status;
    }
    return gpu::allocate_scratch(allocator, backward_scratch_bytes(problem_, dq_accumulation_),
                                 name_ + " backward: D and the fp32 dQ accumulators", scratch_);
  }

  Status run(const AttentionParams& params) override {
    if (Status status = gpu::check_params_match(problem_, params); !status) return status;
    if (Status status = check_alignment(params, name_); !status) return status;
    return kernel_.launch(params, stream_);
  }

  Status run_backward(const AttentionParams& params) override {
    if (Status status = gpu::check_params_match(problem_, params); !status) return status;
    if (Status status = check_alignment(params, name_); !status) return status;
    if (Status status = check_backward_alignment(params, name_); !status) return status;
    if (params.lse == nullptr || params.grad_dtype != params.input_dtype) {
      return Status::Error(name_ + ": the backward needs the forward's LSE and gradients in the "
                                   "input dtype");
    }
    float* delta = scratch_.as<float>();
    float* dq_accumulator = delta + backward_delta_bytes(problem_) / sizeof(float);
    return kernel_.backward(params, delta, dq_accumulator, stream_);
  }

 private:
  Problem problem_;
  cudaStream_t stream_;
  int device_;
  Instantiation kernel_;
  DqAccumulation dq_accumulation_;
  std::string name_;
  ScratchBuffer scratch_;  // backward only: D, then the dQ accumulators
};

// The table of `instantiations`: their dtypes and head dims (the backward's where it has one),
// everything else as the kernel is.
SupportTable flash2_support_table(const std::vector<Instantiation>& instantiations) {
  SupportTable table;
  gpu::add_instantiated(table, instantiations);
  for (const Instantiation& instantiation : instantiations) {
    if (instantiation.backward != nullptr &&
        std::find(table.backward_head_dims.begin(), table.backward_head_dims.end(),
                  instantiation.head_dim) == table.backward_head_dims.end()) {
      table.backward_head_dims.push_back(instantiation.head_dim);
    }
  }
  if (!table.backward_head_dims.empty()) table.passes = {Pass::fwd, Pass::bwd, Pass::fwd_bwd};
  table.separate_v_dim = false;
  table.masks = {MaskKind::none, MaskKind::causal, MaskKind::causal_br, MaskKind::window,
                 MaskKind::padding};
  table.layouts = {Layout::bshd, Layout::bhsd, Layout::qkv_packed};
  table.gqa = true;
  table.archs = {"sm_80", "sm_90"};
  table.notes =
      "128 query rows per CTA; fp32 accumulation, P rounded to the input dtype for P V; "
      "no scratch memory in the forward. Backward: 64 keys per CTA, P and dS rounded to the "
      "input dtype for their products, fp32 D and dQ accumulators as scratch";
  return table;
}

}  // namespace

Kernel flash2_kernel_entry(std::string name, std::string summary,
                           std::vector<Instantiation> instantiations,
                           DqAccumulation dq_accumulation) {
  Kernel kernel;
  kernel.name = std::move(name);
  kernel.summary = std::move(summary);
  kernel.backend = kKernelBackend;
  kernel.deterministic = true;
  // dQ's fp32 atomics add the key blocks' shares in whatever order the CTAs run.
  kernel.backward_deterministic = dq_accumulation == DqAccumulation::per_split;
  kernel.returns_lse = true;
  kernel.support = flash2_support_table(instantiations);
  // The forward keeps everything on chip: no scratch, one launch (the grid covers every query
  // tile of every head). The backward's scratch is D and the dQ accumulators, in 3 launches.
  kernel.expected_resources = [dq_accumulation](const Problem& problem) {
    const int launches = (problem.has_forward() ? 1 : 0) +
                         (problem.has_backward() ? kBackwardLaunches : 0);
    return ResourceExpectation{
        static_cast<int64_t>(backward_scratch_bytes(problem, dq_accumulation)), launches};
  };
  kernel.make_plan =
      [name = kernel.name, instantiations = std::move(instantiations), dq_accumulation](
          const Problem& problem, const PlanContext& context) -> Result<std::unique_ptr<Plan>> {
    const Instantiation* instantiation = gpu::find_instantiation(instantiations, problem);
    if (instantiation == nullptr ||
        (problem.has_backward() && instantiation->backward == nullptr)) {
      return Status::Error(name + ": no instantiation for " + shape_string(problem));
    }
    auto plan =
        std::make_unique<Flash2Plan>(problem, context, *instantiation, dq_accumulation, name);
    if (Status status = plan->build(context.scratch); !status) return status;
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
      "swizzled shared memory, masked tiles skipped; backward with dQ added by fp32 atomics",
      flash2::instantiations<flash2::DqAccumulation::atomic>());
}

// The same backward with dQ added per split in a fixed order; its forward is cuda.flash2's, so
// its table lists the backward passes alone (a forward case would only repeat cuda.flash2's).
Kernel cuda_flash2_deterministic_kernel() {
  std::vector<flash2::Instantiation> with_backward;
  for (const flash2::Instantiation& instantiation :
       flash2::instantiations<flash2::DqAccumulation::per_split>()) {
    if (instantiation.backward != nullptr) with_backward.push_back(instantiation);
  }
  Kernel kernel = flash2::flash2_kernel_entry(
      "cuda.flash2_deterministic",
      "cuda.flash2's backward with dQ added per split of key blocks and summed in order: "
      "bit-for-bit reruns",
      std::move(with_backward), flash2::DqAccumulation::per_split);
  kernel.support.passes = {Pass::bwd, Pass::fwd_bwd};
  return kernel;
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench
