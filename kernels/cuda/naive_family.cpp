// The naive CUDA family's plans, bytes models and Kernel entries: cuda.naive and
// cuda.masked_{outofplace,inplace,fused}. The kernels are in naive.cu (scores, softmax, output)
// and masked.cu (the two mask passes); this file decides which run, in which order, on which
// scratch, and what that costs in device-memory traffic.
//
// One forward, per MaskStep (S and the copy are (batch, heads_q, seqlen_q, seqlen_k) fp32):
//   in_scores     scores(mask) -> softmax(S) -> output                         3 launches
//   out_of_place  scores -> mask_copy(S -> S') -> softmax(S') -> output        4 launches
//   in_place      scores -> mask_fill(S) -> softmax(S) -> output               4 launches
//   fused         scores -> softmax(S, mask inside) -> output                  3 launches
// The softmax writes P over its input, so S (and S') is the whole scratch.
//
// The bytes model counts, for each kernel, every byte it needs from or to device memory once:
// what a kernel re-reads while it runs (Q and K tiles across the blocks of the scores kernel,
// query heads of one GQA group sharing a kv head, P read once per 64-column tile of the output,
// the softmax's second pass over a row it read a moment before) is assumed to come from L2.
// That is the model a roofline of these memory-bound steps uses; measured against it, a gap
// says where that assumption breaks (a 16k-key row is 64 KiB; 8 rows in flight per SM on an
// H200 is 68 MB, more than its L2). The terms, with n = seqlen_q * seqlen_k per (batch, head),
// P = batch * heads_q pairs, V = visible (query, key) pairs over all heads (reference/flops.h):
//   q, k, v       their elements once (k and v per kv head: GQA reads them once per group)
//   scores_write  4 P n: S in full (masked entries too: -inf is written, not skipped)
//   mask_read     out of place: 4 P n (every score read, as masked_fill reads its input)
//   mask_write    out of place: 4 P n (the copy); in place: 4 (P n - V), the masked entries only
//   softmax_read  4 P n, or 4 V for the fused softmax, which reads visible keys only
//   softmax_write 4 P n: P in full, zeros included (P V reads every key)
//   lse           4 P seqlen_q
//   output_read   4 P n
//   out           its elements once, in the output dtype
// No mask tensor is read: DESIGN's masks are predicates of the indices.
#include "kernels/cuda/naive_family.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "kernels/cuda/common/plan_helpers.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/naive_steps.h"
#include "reference/flops.h"

namespace attnbench::gpu {
inline namespace ATTNBENCH_TARGET {
namespace {

constexpr int kMinimumSm = 80;  // bf16 conversions and the archs built
constexpr double kScoreBytes = sizeof(float);
constexpr double kLseBytes = sizeof(float);
// 4-byte element pairs: every load and store of q, k, v and out moves two 16-bit elements.
constexpr size_t kPairAlignment = 4;

std::string kernel_name(MaskStep step) {
  switch (step) {
    case MaskStep::in_scores:
      return "cuda.naive";
    case MaskStep::out_of_place:
      return "cuda.masked_outofplace";
    case MaskStep::in_place:
      return "cuda.masked_inplace";
    case MaskStep::fused:
      return "cuda.masked_fused";
  }
  return "?";
}

std::string kernel_summary(MaskStep step) {
  switch (step) {
    case MaskStep::in_scores:
      return "three plain CUDA kernels (scores masked as written, softmax, P V), no cuBLAS; "
             "fp32 scores in memory";
    case MaskStep::out_of_place:
      return "cuda.naive with unmasked scores and a separate pass writing a masked copy of S "
             "(masked_fill)";
    case MaskStep::in_place:
      return "cuda.naive with unmasked scores and a separate pass writing -inf over the masked "
             "scores (masked_fill_)";
    case MaskStep::fused:
      return "cuda.naive with unmasked scores and the mask applied inside the softmax kernel";
  }
  return "?";
}

double elements(int64_t batch, int64_t seqlen, int64_t heads, int64_t head_dim) {
  return static_cast<double>(batch) * static_cast<double>(seqlen) * static_cast<double>(heads) *
         static_cast<double>(head_dim);
}

bool aligned(const void* pointer, size_t alignment) {
  return reinterpret_cast<uintptr_t>(pointer) % alignment == 0;
}

class NaiveFamilyPlan final : public Plan {
 public:
  NaiveFamilyPlan(const Problem& problem, const PlanContext& context, MaskStep step,
                  NaiveBackwardBug bug)
      : problem_(problem),
        stream_(static_cast<cudaStream_t>(context.stream)),
        device_(context.device),
        step_(step),
        bug_(bug) {}

  Status build(ScratchAllocator& allocator) {
    int sm = 0;
    if (Status status = sm_version(device_, sm); !status) return status;
    if (sm < kMinimumSm) {
      return Status::Error("unsupported: " + kernel_name(step_) +
                           " needs sm_80 or newer; device is sm_" + std::to_string(sm));
    }
    const size_t matrix_bytes = naive_scratch_bytes(problem_, MaskStep::in_scores);
    Status status = allocate_scratch(allocator, matrix_bytes,
                                     kernel_name(step_) + " scores (b*hq*sq*sk fp32)", scores_);
    if (status && step_ == MaskStep::out_of_place) {
      status = allocate_scratch(allocator, matrix_bytes,
                                kernel_name(step_) + " masked copy of the scores (b*hq*sq*sk fp32)",
                                masked_scores_);
    }
    if (status && problem_.has_backward()) {
      status = allocate_scratch(allocator, matrix_bytes,
                                kernel_name(step_) + " dP, then dS (b*hq*sq*sk fp32)", gradients_);
    }
    return status;
  }

  // The textbook backward, step by step, every matrix materialized: P recomputed (S, softmax),
  // dP = dO V^T, dS = P (dP - D) scale, dQ = dS K, dK = dS^T Q, dV = P^T dO. The scores and output
  // steps serve the products with other operands; a GQA group's dK and dV sum its query heads.
  Status run_backward(const AttentionParams& params) override {
    if (Status status = check_call(params); !status) return status;
    float* probabilities = scores_.as<float>();
    float* gradients = gradients_.as<float>();
    AttentionParams recompute = params;
    recompute.lse = nullptr;  // the forward's LSE stays as the forward wrote it
    Status status = naive_steps::launch_scores(recompute, true, probabilities, stream_);
    if (status) status = naive_steps::launch_softmax(recompute, false, probabilities, stream_);
    if (status) status = naive_steps::launch_scores(upstream_products(params), false, gradients, stream_);
    if (status) {
      status = naive_steps::launch_softmax_backward(softmax_backward(params), probabilities,
                                                    gradients, stream_);
    }
    if (status) status = naive_steps::launch_output(query_gradient(params), gradients, stream_);
    if (status) {
      status = naive_steps::launch_transposed_product(
          transposed(params, gradients, params.q, params.q_batch_stride, params.q_row_stride,
                     params.q_head_stride, params.dk, params.dk_batch_stride,
                     params.dk_row_stride, params.dk_head_stride, params.head_dim_qk),
          params.grad_dtype, stream_);
    }
    if (status) {
      status = naive_steps::launch_transposed_product(
          transposed(params, probabilities, params.dout, params.dout_batch_stride,
                     params.dout_row_stride, params.dout_head_stride, params.dv,
                     params.dv_batch_stride, params.dv_row_stride, params.dv_head_stride,
                     params.head_dim_v),
          params.grad_dtype, stream_);
    }
    return status;
  }

  Status run(const AttentionParams& params) override {
    if (Status status = check_call(params); !status) return status;
    float* scores = scores_.as<float>();
    float* softmax_input = scores;
    if (Status status =
            naive_steps::launch_scores(params, step_ == MaskStep::in_scores, scores, stream_);
        !status) {
      return status;
    }
    if (step_ == MaskStep::out_of_place) {
      softmax_input = masked_scores_.as<float>();
      if (Status status = naive_steps::launch_mask_copy(params, scores, softmax_input, stream_);
          !status) {
        return status;
      }
    } else if (step_ == MaskStep::in_place) {
      if (Status status = naive_steps::launch_mask_fill(params, scores, stream_); !status) {
        return status;
      }
    }
    if (Status status =
            naive_steps::launch_softmax(params, step_ == MaskStep::fused, softmax_input, stream_);
        !status) {
      return status;
    }
    return naive_steps::launch_output(params, softmax_input, stream_);
  }

 private:
  // What every step of run and run_backward relies on: the params are the plan's problem, the
  // tensors pair-aligned, and a padding mask comes with its key lengths.
  Status check_call(const AttentionParams& params) const {
    if (Status status = check_params_match(problem_, params); !status) return status;
    if (Status status = check_alignment(params, kPairAlignment, kernel_name(step_)); !status) {
      return status;
    }
    if (params.mask == MaskKind::padding && params.key_lengths == nullptr) {
      return Status::Error(kernel_name(step_) + ": padding mask without key_lengths");
    }
    return Status::Ok();
  }

  Problem problem_;
  cudaStream_t stream_;
  int device_;
  MaskStep step_;
  NaiveBackwardBug bug_;
  ScratchBuffer scores_;         // (batch, heads_q, seqlen_q, seqlen_k) fp32: S, then P
  ScratchBuffer masked_scores_;  // out of place only: the masked copy, then P
  ScratchBuffer gradients_;      // backward only: dP, then dS over it

  // dP = dO V^T as the scores step computes S = scale Q K^T: dO for Q, V for K, unscaled, every
  // key kept (P is 0 where the mask hides a key, so dS is too).
  static AttentionParams upstream_products(const AttentionParams& params) {
    AttentionParams p = params;
    p.q = params.dout;
    p.q_batch_stride = params.dout_batch_stride;
    p.q_row_stride = params.dout_row_stride;
    p.q_head_stride = params.dout_head_stride;
    p.k = params.v;
    p.k_batch_stride = params.v_batch_stride;
    p.k_row_stride = params.v_row_stride;
    p.k_head_stride = params.v_head_stride;
    p.head_dim_qk = params.head_dim_v;
    p.scale = 1.0f;
    return p;
  }
  // dQ = dS K as the output step computes O = P V: K for V, dq for out.
  static AttentionParams query_gradient(const AttentionParams& params) {
    AttentionParams p = params;
    p.v = params.k;
    p.v_batch_stride = params.k_batch_stride;
    p.v_row_stride = params.k_row_stride;
    p.v_head_stride = params.k_head_stride;
    p.head_dim_v = params.head_dim_qk;
    p.out = params.dq;
    p.out_batch_stride = params.dq_batch_stride;
    p.out_row_stride = params.dq_row_stride;
    p.out_head_stride = params.dq_head_stride;
    p.output_dtype = params.grad_dtype;
    return p;
  }
  // The softmax backward's operands: the forward's, but for a planted bug.
  AttentionParams softmax_backward(const AttentionParams& params) const {
    AttentionParams p = params;
    if (bug_ == NaiveBackwardBug::no_softmax_scale) p.scale = 1.0f;
    if (bug_ == NaiveBackwardBug::delta_from_dout) p.out = const_cast<void*>(params.dout);
    return p;
  }
  naive_steps::TransposedProduct transposed(
      const AttentionParams& params, const float* matrix, const void* x, int64_t x_batch,
      int64_t x_row, int64_t x_head, void* out, int64_t out_batch, int64_t out_row,
      int64_t out_head, int dim) const {
    const int heads_per_kv =
        bug_ == NaiveBackwardBug::gqa_not_summed ? 1 : params.heads_q / params.heads_kv;
    return {matrix,   x,       x_batch,        x_row,           x_head,
            out,      out_batch, out_row,      out_head,        params.batch,
            params.heads_q, params.heads_kv, params.seqlen_q, params.seqlen_k, dim,
            heads_per_kv};
  }
};

}  // namespace

SupportTable tier1_support_table(std::string notes) {
  SupportTable table;
  table.input_dtypes = {DType::f16, DType::bf16};
  table.outputs_fp32 = false;
  table.head_dims = {64, 128};
  table.separate_v_dim = false;
  table.masks = {MaskKind::none, MaskKind::causal, MaskKind::causal_br, MaskKind::window,
                 MaskKind::padding};
  table.layouts = {Layout::bshd, Layout::bhsd, Layout::qkv_packed};
  table.gqa = true;
  table.archs = {"sm_80", "sm_90"};
  table.notes = std::move(notes);
  return table;
}

// The naive family's: tier 1's, and any even head dim up to 256, head_dim_v its own (naive.cu).
SupportTable naive_support_table(std::string notes) {
  SupportTable table = tier1_support_table(std::move(notes));
  table.head_dims = {};
  table.max_head_dim = naive_steps::kMaxHeadDim;
  table.head_dim_multiple = naive_steps::kHeadDimMultiple;
  table.separate_v_dim = true;
  return table;
}

NaiveBytes naive_bytes(const Problem& problem, MaskStep step) {
  const Problem& p = problem;
  const double input_size = static_cast<double>(dtype_size(p.input_dtype));
  const double output_size = static_cast<double>(dtype_size(p.output_dtype));
  const double pairs = static_cast<double>(p.batch) * static_cast<double>(p.heads_q);
  const double scores = pairs * static_cast<double>(p.seqlen_q) * static_cast<double>(p.seqlen_k);
  const double visible = static_cast<double>(visible_pairs(p)) * static_cast<double>(p.heads_q);

  NaiveBytes bytes;
  bytes.q = input_size * elements(p.batch, p.seqlen_q, p.heads_q, p.head_dim_qk);
  bytes.k = input_size * elements(p.batch, p.seqlen_k, p.heads_kv, p.head_dim_qk);
  bytes.v = input_size * elements(p.batch, p.seqlen_k, p.heads_kv, p.head_dim_v);
  bytes.scores_write = kScoreBytes * scores;
  switch (step) {
    case MaskStep::in_scores:
      break;
    case MaskStep::out_of_place:
      bytes.mask_read = kScoreBytes * scores;
      bytes.mask_write = kScoreBytes * scores;
      break;
    case MaskStep::in_place:
      bytes.mask_write = kScoreBytes * (scores - visible);
      break;
    case MaskStep::fused:
      break;
  }
  bytes.softmax_read = kScoreBytes * (step == MaskStep::fused ? visible : scores);
  bytes.softmax_write = kScoreBytes * scores;
  bytes.lse = kLseBytes * pairs * static_cast<double>(p.seqlen_q);
  bytes.output_read = kScoreBytes * scores;
  bytes.out = output_size * elements(p.batch, p.seqlen_q, p.heads_q, p.head_dim_v);
  return bytes;
}

size_t naive_scratch_bytes(const Problem& problem, MaskStep step) {
  const size_t matrix = static_cast<size_t>(problem.batch) * static_cast<size_t>(problem.heads_q) *
                        static_cast<size_t>(problem.seqlen_q) *
                        static_cast<size_t>(problem.seqlen_k) * sizeof(float);
  const size_t forward = step == MaskStep::out_of_place ? 2 * matrix : matrix;
  return forward + (problem.has_backward() ? matrix : 0);  // the backward's dP / dS
}

int naive_launch_count(const Problem& problem, MaskStep step) {
  constexpr int kScoresSoftmaxOutput = 3;
  // S, softmax, dP, dS, dQ, dK, dV.
  constexpr int kBackwardLaunches = 7;
  const bool mask_pass = step == MaskStep::out_of_place || step == MaskStep::in_place;
  const int forward = kScoresSoftmaxOutput + (mask_pass ? 1 : 0);
  return (problem.has_forward() ? forward : 0) + (problem.has_backward() ? kBackwardLaunches : 0);
}

Status check_alignment(const AttentionParams& params, size_t alignment, const std::string& kernel) {
  const int64_t input_size = static_cast<int64_t>(dtype_size(params.input_dtype));
  const int64_t output_size = static_cast<int64_t>(dtype_size(params.output_dtype));
  const auto whole_steps = [&](int64_t stride, int64_t element_size) {
    return (stride * element_size) % static_cast<int64_t>(alignment) == 0;
  };
  struct Tensor {
    const char* name;
    const void* pointer;
    int64_t batch, row, head, element_size;
  };
  const Tensor tensors[] = {
      {"q", params.q, params.q_batch_stride, params.q_row_stride, params.q_head_stride, input_size},
      {"k", params.k, params.k_batch_stride, params.k_row_stride, params.k_head_stride, input_size},
      {"v", params.v, params.v_batch_stride, params.v_row_stride, params.v_head_stride, input_size},
      {"out", params.out, params.out_batch_stride, params.out_row_stride, params.out_head_stride,
       output_size},
  };
  for (const Tensor& t : tensors) {
    if (!aligned(t.pointer, alignment) || !whole_steps(t.batch, t.element_size) ||
        !whole_steps(t.row, t.element_size) || !whole_steps(t.head, t.element_size)) {
      return Status::Error(kernel + ": " + t.name + " is not " + std::to_string(alignment) +
                           "-byte aligned (pointer and batch/row/head strides)");
    }
  }
  return Status::Ok();
}

Kernel naive_family_kernel(MaskStep step, NaiveBackwardBug bug) {
  Kernel kernel;
  kernel.name = kernel_name(step);
  kernel.summary = kernel_summary(step);
  kernel.backend = kKernelBackend;
  kernel.deterministic = true;
  kernel.returns_lse = true;
  kernel.support = naive_support_table(
      step == MaskStep::out_of_place
          ? "scratch grows as 2 x batch x heads_q x seqlen_q x seqlen_k fp32 (S and its copy)"
          : "scratch grows as batch x heads_q x seqlen_q x seqlen_k fp32 (S, P written over it)");
  kernel.bytes_moved = [step](const Problem& problem) {
    return naive_bytes(problem, step).total();
  };
  // The plan allocates naive_scratch_bytes and nothing else.
  kernel.expected_resources = [step](const Problem& problem) {
    return ResourceExpectation{static_cast<int64_t>(naive_scratch_bytes(problem, step)),
                               naive_launch_count(problem, step)};
  };
  if (step == MaskStep::in_scores) {  // the textbook backward (issue 37); the masked_* study is forward only
    kernel.support.passes = {Pass::fwd, Pass::bwd, Pass::fwd_bwd};
    kernel.backward_deterministic = true;  // no atomics: every sum in a fixed order
  }
  kernel.make_plan = [step, bug, table = kernel.support](
                         const Problem& problem,
                         const PlanContext& context) -> Result<std::unique_ptr<Plan>> {
    if (std::string reason = unsupported_reason(table, problem); !reason.empty()) {
      return Status::Error("unsupported: " + reason);
    }
    auto plan = std::make_unique<NaiveFamilyPlan>(problem, context, step, bug);
    if (Status status = plan->build(context.scratch); !status) return status;
    return plan;
  };
  return kernel;
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::gpu

namespace attnbench {
inline namespace ATTNBENCH_TARGET {

Kernel cuda_naive_kernel() { return gpu::naive_family_kernel(gpu::MaskStep::in_scores); }
Kernel cuda_masked_outofplace_kernel() {
  return gpu::naive_family_kernel(gpu::MaskStep::out_of_place);
}
Kernel cuda_masked_inplace_kernel() { return gpu::naive_family_kernel(gpu::MaskStep::in_place); }
Kernel cuda_masked_fused_kernel() { return gpu::naive_family_kernel(gpu::MaskStep::fused); }

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench
