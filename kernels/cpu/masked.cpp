// cpu.masked_outofplace, cpu.masked_inplace, cpu.masked_fused — BLAS attention over all keys.
//
// What they compute, per (batch, query head):
//   S = scale * log2(e) * Q K^T over every key, one cblas_sgemm   (seqlen_q x seqlen_k, fp32;
//       log2 units, so the softmax is 2^(s - max) with the fast exp2 of cpu_common.h)
//   the mask, then a row softmax (max subtracted, normalized: P rows sum to 1)
//   O = P V, a second cblas_sgemm                                  (seqlen_q x head_dim_v, fp32)
//   out = O rounded once to the output dtype
// The three differ only in how the mask reaches the softmax:
//   outofplace  writes a masked copy of S (-inf where masked) into a second score buffer and
//               runs the softmax on the copy: the extra pass and buffer of a separate mask op
//   inplace     overwrites the masked entries of S with -inf and runs the softmax on S
//   fused       the softmax loop itself takes each row's visible key range: no -inf written,
//               one pass fewer over S
// Against cpu.naive: BLAS does both matrix products; scores in log2 units; the softmax uses the
// polynomial exp2 instead of std::exp.
// Parallel over (batch, query head) pairs, static schedule; BLAS called inside the parallel
// region runs single-threaded (OpenBLAS's OpenMP build), which is what we want.
// Scratch per thread: the score matrix (two for outofplace), the fp32 output block, and fp32
// copies of Q, K, V for fp16/bf16 inputs (fp32 inputs go to BLAS in place, strides as leading
// dimensions).
// Limits: scratch grows as seqlen_q x seqlen_k; masked scores are computed and thrown away; a
// single (batch, head) pair runs on one core.
#include <cblas.h>
#include <omp.h>

#include <memory>
#include <string>
#include <utility>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/phases.h"

namespace attnbench {

namespace {

using cpu::kNegInf;

// 5e10 FLOP: one (batch, head) pair runs on one core; measured on the CI host, fp32, s=4096,
// one pair: 54-61 GFLOP/s at d=64, 14-16 at d=16 (the softmax passes over S outweigh the GEMMs
// at small head dims), so a case at the limit takes about 1 s at d=64 and 3.5 s at d=16.
constexpr double kMaxFlops = 5e10;

enum class MaskApplication { out_of_place, in_place, fused };

std::string_view kernel_name(MaskApplication application) {
  switch (application) {
    case MaskApplication::out_of_place:
      return "cpu.masked_outofplace";
    case MaskApplication::in_place:
      return "cpu.masked_inplace";
    case MaskApplication::fused:
      return "cpu.masked_fused";
  }
  return "?";
}

// Softmax of one row of S in log2 units, in place, where masked entries are -inf and
// contribute 2^-inf = 0. Returns the natural-log LSE (-inf for a row with no visible key).
float softmax_row_with_infinities(float* s_row, int64_t count) {
  const float max = cpu::row_max(s_row, 0, count);
  if (max == kNegInf) {
    cpu::fill_row(s_row, 0, count, 0.0f);
    return kNegInf;
  }
  const float sum = cpu::exp2_and_sum(s_row, 0, count, max);
  cpu::scale_row(s_row, count, 1.0f / sum);
  return cpu::natural_lse(max, sum);
}

// Softmax of one row of S in log2 units over the visible keys only; the others become 0.
float softmax_row_in_range(float* s_row, int64_t count, KeyRange keys) {
  if (keys.size() == 0) {
    cpu::fill_row(s_row, 0, count, 0.0f);
    return kNegInf;
  }
  cpu::fill_row(s_row, 0, keys.begin, 0.0f);
  cpu::fill_row(s_row, keys.end, count, 0.0f);
  const float max = cpu::row_max(s_row, keys.begin, keys.end);
  const float sum = cpu::exp2_and_sum(s_row, keys.begin, keys.end, max);
  cpu::scale_row(s_row + keys.begin, keys.size(), 1.0f / sum);
  return cpu::natural_lse(max, sum);
}

class MaskedPlan final : public Plan {
 public:
  MaskedPlan(const Problem& problem, MaskApplication application)
      : problem_(problem),
        application_(application),
        threads_(cpu::plan_threads(problem.batch * problem.heads_q)) {}

  Status allocate(ScratchAllocator& allocator) {
    const std::string name(kernel_name(application_));
    const size_t threads = static_cast<size_t>(threads_);
    const size_t score_bytes = threads * problem_.seqlen_q * problem_.seqlen_k * sizeof(float);
    Status status = cpu::allocate_scratch(
        allocator, score_bytes, name + " score matrices (threads x seqlen_q x seqlen_k)", scores_);
    if (status && application_ == MaskApplication::out_of_place) {
      status = cpu::allocate_scratch(allocator, score_bytes,
                                     name + " masked score copies (threads x seqlen_q x seqlen_k)",
                                     masked_scores_);
    }
    if (status) {
      const size_t out_bytes = threads * problem_.seqlen_q * problem_.head_dim_v * sizeof(float);
      status = cpu::allocate_scratch(allocator, out_bytes, name + " output blocks", out_block_);
    }
    if (status && problem_.input_dtype != DType::f32) {
      const size_t staging_elements =
          static_cast<size_t>(problem_.seqlen_q) * problem_.head_dim_qk +
          static_cast<size_t>(problem_.seqlen_k) * (problem_.head_dim_qk + problem_.head_dim_v);
      status = cpu::allocate_scratch(allocator, threads * staging_elements * sizeof(float),
                                     name + " fp32 copies of q, k, v", staging_);
    }
    return status;
  }

  Status run(const AttentionParams& params) override {
    if (Status status = cpu::check_params_match(problem_, params); !status) return status;
    const cpu::SingleThreadedBlas single_threaded_blas;
    const AttentionParams& p = params;
    const int64_t sq = p.seqlen_q, sk = p.seqlen_k, dqk = p.head_dim_qk, dv = p.head_dim_v;
    const int64_t pairs = static_cast<int64_t>(p.batch) * p.heads_q;
    const int64_t staging_elements = sq * dqk + sk * (dqk + dv);

#pragma omp parallel num_threads(threads_)
    {
      const int thread = omp_get_thread_num();
      float* scores = scores_.as<float>() + thread * sq * sk;  // (sq, sk)
      float* masked = masked_scores_ ? masked_scores_.as<float>() + thread * sq * sk : nullptr;
      float* out_block = out_block_.as<float>() + thread * sq * dv;  // (sq, dv)
      float* q_staging = staging_ ? staging_.as<float>() + thread * staging_elements : nullptr;
      float* k_staging = q_staging != nullptr ? q_staging + sq * dqk : nullptr;
      float* v_staging = k_staging != nullptr ? k_staging + sk * dqk : nullptr;

#pragma omp for schedule(static)
      for (int64_t pair = 0; pair < pairs; ++pair) {
        const int64_t b = pair / p.heads_q;
        const int64_t h = pair % p.heads_q;
        const int64_t h_kv = h / p.heads_per_kv;
        PhaseScope phase("convert");  // fp16/bf16 Q, K, V widened to fp32 for BLAS
        const cpu::BlockView q = cpu::view_block(p.input_dtype, p.q, cpu::q_offset(p, b, h, 0),
                                                 p.q_row_stride, sq, dqk, q_staging);
        const cpu::BlockView k = cpu::view_block(p.input_dtype, p.k, cpu::k_offset(p, b, h_kv, 0),
                                                 p.k_row_stride, sk, dqk, k_staging);
        const cpu::BlockView v = cpu::view_block(p.input_dtype, p.v, cpu::v_offset(p, b, h_kv, 0),
                                                 p.v_row_stride, sk, dv, v_staging);

        phase.next("scores");
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, sq, sk, dqk, p.scale_log2, q.data,
                    q.ld, k.data, k.ld, 0.0f, scores, sk);
        // apply_mask_and_softmax moves the phase between mask and softmax, row by row.
        float* probabilities = apply_mask_and_softmax(p, b, h, scores, masked, phase);
        phase.next("output");
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, sq, dv, sk, 1.0f, probabilities, sk,
                    v.data, v.ld, 0.0f, out_block, dv);

        for (int64_t i = 0; i < sq; ++i) {
          cpu::store_row(p.output_dtype, p.out, cpu::out_offset(p, b, h, i), out_block + i * dv,
                         dv);
        }
      }
    }
    return Status::Ok();
  }

 private:
  // Turns the scores of one (batch, head) into probabilities; returns where they are.
  // `phase` is "mask" while the mask is written and "softmax" while the softmax runs (the fused
  // variant writes no mask: its rows are all softmax).
  ATTNBENCH_CPU_CLONES float* apply_mask_and_softmax(const AttentionParams& p, int64_t b, int64_t h,
                                                     float* scores, float* masked,
                                                     PhaseScope& phase) const {
    const int64_t sq = p.seqlen_q, sk = p.seqlen_k;
    float* probabilities = application_ == MaskApplication::out_of_place ? masked : scores;
    for (int64_t i = 0; i < sq; ++i) {
      const KeyRange keys = cpu::row_keys(p, b, i);
      float* s_row = scores + i * sk;
      float* p_row = probabilities + i * sk;
      float lse = kNegInf;
      switch (application_) {
        case MaskApplication::out_of_place:
          phase.next("mask");
          for (int64_t j = 0; j < sk; ++j) {
            p_row[j] = j >= keys.begin && j < keys.end ? s_row[j] : kNegInf;
          }
          phase.next("softmax");
          lse = softmax_row_with_infinities(p_row, sk);
          break;
        case MaskApplication::in_place:
          phase.next("mask");
          cpu::fill_row(s_row, 0, keys.begin, kNegInf);
          cpu::fill_row(s_row, keys.end, sk, kNegInf);
          phase.next("softmax");
          lse = softmax_row_with_infinities(s_row, sk);
          break;
        case MaskApplication::fused:
          phase.next("softmax");
          lse = softmax_row_in_range(s_row, sk, keys);
          break;
      }
      if (p.lse != nullptr) p.lse[cpu::lse_offset(p, b, h, i)] = lse;
    }
    return probabilities;
  }

  Problem problem_;
  MaskApplication application_;
  int threads_;
  ScratchBuffer scores_;         // (threads, sq, sk) fp32
  ScratchBuffer masked_scores_;  // (threads, sq, sk) fp32, outofplace only
  ScratchBuffer out_block_;      // (threads, sq, dv) fp32
  ScratchBuffer staging_;        // per thread: q (sq, dqk), k (sk, dqk), v (sk, dv); fp16/bf16 only
};

Kernel masked_kernel(MaskApplication application, std::string summary) {
  Kernel kernel;
  kernel.name = std::string(kernel_name(application));
  kernel.summary = std::move(summary);
  kernel.backend = Backend::cpu;
  kernel.deterministic = true;
  kernel.returns_lse = true;
  kernel.support = cpu::cpu_support_table(
      kMaxFlops, "BLAS over all keys; scratch grows as threads x seqlen_q x seqlen_k floats");
  kernel.make_plan = [table = kernel.support, application](
                         const Problem& problem,
                         const PlanContext& context) -> Result<std::unique_ptr<Plan>> {
    if (Status status = cpu::check_problem_for_plan(table, problem); !status) return status;
    auto plan = std::make_unique<MaskedPlan>(problem, application);
    if (Status status = plan->allocate(context.scratch); !status) return status;
    return plan;
  };
  return kernel;
}

}  // namespace

Kernel cpu_masked_outofplace_kernel() {
  return masked_kernel(MaskApplication::out_of_place,
                       "BLAS scores, mask written to a second score buffer, softmax on the copy");
}

Kernel cpu_masked_inplace_kernel() {
  return masked_kernel(MaskApplication::in_place,
                       "BLAS scores, masked entries overwritten with -inf, softmax in place");
}

Kernel cpu_masked_fused_kernel() {
  return masked_kernel(MaskApplication::fused,
                       "BLAS scores, mask applied inside the softmax loop (one pass over S)");
}

}  // namespace attnbench
