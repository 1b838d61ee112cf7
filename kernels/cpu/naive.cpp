// cpu.naive — attention as the textbook writes it, on the host.
//
// What it computes: out = softmax(scale * Q K^T, masked) V for every (batch, query head), in
// three passes over a materialized score matrix S (seqlen_q x seqlen_k, fp32):
//   1. scores:  S[i][j] = scale * q_i . k_j for visible keys, -inf for masked ones
//   2. softmax: per row, max, exp (std::exp: this is the accurate baseline), sum, normalize
//   3. output:  out_i = sum_j P[i][j] v_j, accumulated in fp32, rounded once to the output dtype
// Against the previous version: it is the first; the other CPU kernels are measured against it.
// Parallel over (batch, query head) pairs, static schedule; one score matrix per thread in
// flight, so its scratch is threads x seqlen_q x seqlen_k floats and grows with the square of
// the sequence length. Inputs are widened element by element inside the loops.
// The backward: the textbook with BLAS products (kernels/cpu/naive_backward.cpp).
// Limits: plain loops with OpenMP simd reductions on the baseline ISA, no BLAS: about a tenth
// of cpu.flash's speed, hence the lowest size limit of the CPU kernels.
#include <omp.h>

#include <cmath>
#include <memory>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/naive_backward.h"
#include "kernels/cpu/phases.h"

namespace attnbench {

namespace {

using cpu::kNegInf;

// 1e10 FLOP: measured on the CI host, fp32/bf16: 15-20 GFLOP/s on both cores at d=64..128,
// 7.6 GFLOP/s for a single (batch, head) pair at d=16 (one core, short dot products), so a case
// at the limit takes under 1 s at d=128 and 1.3 s at worst.
constexpr double kMaxFlops = 1e10;

// How each input dtype is stored and widened to fp32.
template <DType kDType>
struct Storage;
template <>
struct Storage<DType::f32> {
  using Type = float;
  static float widen(float value) { return value; }
};
template <>
struct Storage<DType::f16> {
  using Type = uint16_t;
  static float widen(uint16_t bits) { return cpu::widen_fp16(bits); }
};
template <>
struct Storage<DType::bf16> {
  using Type = uint16_t;
  static float widen(uint16_t bits) { return cpu::widen_bf16(bits); }
};

class NaivePlan final : public Plan {
 public:
  explicit NaivePlan(const Problem& problem)
      : problem_(problem), backward_(problem), threads_(cpu::plan_threads(problem.batch * problem.heads_q)) {}

  Status allocate(ScratchAllocator& allocator) {
    const size_t score_bytes =
        static_cast<size_t>(threads_) * problem_.seqlen_q * problem_.seqlen_k * sizeof(float);
    Status status =
        cpu::allocate_scratch(allocator, score_bytes,
                              "cpu.naive score matrices (threads x seqlen_q x seqlen_k)", scores_);
    if (!status) return status;
    const size_t row_bytes = static_cast<size_t>(threads_) * problem_.head_dim_v * sizeof(float);
    status = cpu::allocate_scratch(allocator, row_bytes, "cpu.naive output rows", out_rows_);
    if (status && problem_.has_backward()) status = backward_.allocate(allocator);
    return status;
  }

  Status run_backward(const AttentionParams& params) override { return backward_.run(params); }

  Status run(const AttentionParams& params) override {
    if (Status status = cpu::check_params_match(problem_, params); !status) return status;
    switch (params.input_dtype) {
      case DType::f32:
        run_typed<DType::f32>(params);
        return Status::Ok();
      case DType::f16:
        run_typed<DType::f16>(params);
        return Status::Ok();
      case DType::bf16:
        run_typed<DType::bf16>(params);
        return Status::Ok();
      case DType::e4m3:
      case DType::e5m2:
        break;
    }
    return Status::Error("cpu.naive: input dtype not supported");
  }

 private:
  template <DType kDType>
  void run_typed(const AttentionParams& p) const {
    using Element = typename Storage<kDType>::Type;
    const auto* q = static_cast<const Element*>(p.q);  // (b, sq, hq, dqk) via strides
    const auto* k = static_cast<const Element*>(p.k);  // (b, sk, hkv, dqk) via strides
    const auto* v = static_cast<const Element*>(p.v);  // (b, sk, hkv, dv) via strides
    const int64_t sq = p.seqlen_q, sk = p.seqlen_k, dqk = p.head_dim_qk, dv = p.head_dim_v;
    const int64_t pairs = static_cast<int64_t>(p.batch) * p.heads_q;

#pragma omp parallel num_threads(threads_)
    {
      const int thread = omp_get_thread_num();
      float* scores = scores_.as<float>() + thread * sq * sk;  // (sq, sk)
      float* out_row = out_rows_.as<float>() + thread * dv;    // (dv,)

#pragma omp for schedule(static)
      for (int64_t pair = 0; pair < pairs; ++pair) {
        const int64_t b = pair / p.heads_q;
        const int64_t h = pair % p.heads_q;
        const int64_t h_kv = h / p.heads_per_kv;

        // Pass 1: scores, masked keys at -inf.
        PhaseScope phase("scores");
        for (int64_t i = 0; i < sq; ++i) {
          const Element* q_row = q + cpu::q_offset(p, b, h, i);
          const KeyRange keys = cpu::row_keys(p, b, i);
          float* s_row = scores + i * sk;
          for (int64_t j = 0; j < sk; ++j) {
            if (j < keys.begin || j >= keys.end) {
              s_row[j] = kNegInf;
              continue;
            }
            const Element* k_row = k + cpu::k_offset(p, b, h_kv, j);
            float dot = 0;
#pragma omp simd reduction(+ : dot)
            for (int64_t c = 0; c < dqk; ++c) {
              dot += Storage<kDType>::widen(q_row[c]) * Storage<kDType>::widen(k_row[c]);
            }
            s_row[j] = p.scale * dot;
          }
        }

        // Pass 2: softmax per row. A row with no visible key stays all zeros (LSE -inf).
        phase.next("softmax");
        for (int64_t i = 0; i < sq; ++i) {
          float* s_row = scores + i * sk;
          float max = kNegInf;
#pragma omp simd reduction(max : max)
          for (int64_t j = 0; j < sk; ++j) max = s_row[j] > max ? s_row[j] : max;
          float sum = 0;
          if (max == kNegInf) {
            cpu::fill_row(s_row, 0, sk, 0.0f);
          } else {
            for (int64_t j = 0; j < sk; ++j) {
              s_row[j] = std::exp(s_row[j] - max);
              sum += s_row[j];
            }
            cpu::scale_row(s_row, sk, 1.0f / sum);
          }
          if (p.lse != nullptr) {
            p.lse[cpu::lse_offset(p, b, h, i)] =
                max == kNegInf ? kNegInf : static_cast<float>(max + std::log(double{sum}));
          }
        }

        // Pass 3: out_i = P[i] V.
        phase.next("output");
        for (int64_t i = 0; i < sq; ++i) {
          const float* p_row = scores + i * sk;
          cpu::fill_row(out_row, 0, dv, 0.0f);
          for (int64_t j = 0; j < sk; ++j) {
            const Element* v_row = v + cpu::v_offset(p, b, h_kv, j);
            const float weight = p_row[j];
#pragma omp simd
            for (int64_t c = 0; c < dv; ++c)
              out_row[c] += weight * Storage<kDType>::widen(v_row[c]);
          }
          cpu::store_row(p.output_dtype, p.out, cpu::out_offset(p, b, h, i), out_row, dv);
        }
      }
    }
  }

  Problem problem_;
  cpu::NaiveBackward backward_;  // allocated for problems with a backward only
  int threads_;
  ScratchBuffer scores_;    // (threads, sq, sk) fp32
  ScratchBuffer out_rows_;  // (threads, dv) fp32
};

}  // namespace

Kernel cpu_naive_kernel() {
  Kernel kernel;
  kernel.name = "cpu.naive";
  kernel.summary = "plain loops, whole score matrix per (batch, head), std::exp softmax";
  kernel.backend = Backend::cpu;
  kernel.deterministic = true;
  kernel.returns_lse = true;
  kernel.backward_deterministic = true;
  kernel.support = cpu::cpu_support_table(
      kMaxFlops, "scratch grows as threads x seqlen_q x seqlen_k floats (the backward's twice)");
  kernel.support.passes = {Pass::fwd, Pass::bwd, Pass::fwd_bwd};
  kernel.make_plan = [table = kernel.support](
                         const Problem& problem,
                         const PlanContext& context) -> Result<std::unique_ptr<Plan>> {
    if (Status status = cpu::check_problem_for_plan(table, problem); !status) return status;
    auto plan = std::make_unique<NaivePlan>(problem);
    if (Status status = plan->allocate(context.scratch); !status) return status;
    return plan;
  };
  return kernel;
}

}  // namespace attnbench
