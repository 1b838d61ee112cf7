// cpu.naive's backward — attention's gradients as the textbook writes them, on the host.
//
// What it computes, per (batch, kv head) and each query head h of its group, with every
// intermediate materialized as a (seqlen_q x seqlen_k) fp32 matrix:
//   S  = scale * Q K^T, -inf where masked           cblas_sgemm         "scores"
//   P  = softmax(S) per row (std::exp), recomputed from S, not from the forward's LSE
//                                                                       "softmax"
//   dV += P^T dO                                    cblas_sgemm         "dV"
//   dP  = dO V^T                                    cblas_sgemm         "dP"
//   dS  = P * (dP - rowsum(P * dP))                 the softmax's Jacobian applied row by row
//                                                                       "dS"
//   dK += scale * dS^T Q                            cblas_sgemm         "dK"
//   dQ  = scale * dS K                              cblas_sgemm         "dQ"
// dK and dV sum over the group's query heads (GQA) before they are stored. The row statistic is
// the textbook's rowsum(P * dP), which equals FlashAttention's rowsum(dO * O) in exact
// arithmetic: the two CPU backwards reach D two ways.
// Parallel over (batch, kv head) groups, static schedule, each group computed alone:
// deterministic. Scratch: per thread two score-sized matrices and the group's fp32 tensors, so it
// grows with the square of the sequence length, as the forward's does.
#include "kernels/cpu/naive_backward.h"

#include <cblas.h>
#include <omp.h>

#include <cmath>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/phases.h"

namespace attnbench::cpu {

struct NaiveBackward::Matrices {
  float* p;     // (sq, sk): S, then P
  float* ds;    // (sq, sk): dP, then dS
  float* q;     // (sq, dqk)
  float* dout;  // (sq, dv)
  float* dq;    // (sq, dqk)
  float* k;     // (sk, dqk)
  float* v;     // (sk, dv)
  float* dk;    // (sk, dqk) accumulator over the group
  float* dv;    // (sk, dv) accumulator over the group
};

NaiveBackward::NaiveBackward(const Problem& problem)
    : problem_(problem), threads_(plan_threads(problem.batch * problem.heads_kv)) {}

int64_t NaiveBackward::thread_floats() const {
  const Problem& p = problem_;
  return 2 * p.seqlen_q * p.seqlen_k + p.seqlen_q * (2 * p.head_dim_qk + p.head_dim_v) +
         2 * p.seqlen_k * (p.head_dim_qk + p.head_dim_v);
}

Status NaiveBackward::allocate(ScratchAllocator& allocator) {
  return allocate_scratch(
      allocator, static_cast<size_t>(threads_) * thread_floats() * sizeof(float),
      "cpu.naive backward matrices (threads x 2 x seqlen_q x seqlen_k, ...)", matrices_);
}

NaiveBackward::Matrices NaiveBackward::thread_matrices(int thread) const {
  const Problem& p = problem_;
  Matrices m{};
  m.p = matrices_.as<float>() + thread * thread_floats();
  m.ds = m.p + p.seqlen_q * p.seqlen_k;
  m.q = m.ds + p.seqlen_q * p.seqlen_k;
  m.dout = m.q + p.seqlen_q * p.head_dim_qk;
  m.dq = m.dout + p.seqlen_q * p.head_dim_v;
  m.k = m.dq + p.seqlen_q * p.head_dim_qk;
  m.v = m.k + p.seqlen_k * p.head_dim_qk;
  m.dk = m.v + p.seqlen_k * p.head_dim_v;
  m.dv = m.dk + p.seqlen_k * p.head_dim_qk;
  return m;
}

Status NaiveBackward::run(const AttentionParams& params) {
  if (Status status = check_params_match(problem_, params); !status) return status;
  if (params.dout == nullptr || params.dq == nullptr) {
    return Status::Error("cpu.naive backward: needs dout and the dq/dk/dv buffers");
  }
  const SingleThreadedBlas single_threaded_blas;
  const int64_t groups = static_cast<int64_t>(params.batch) * params.heads_kv;
#pragma omp parallel num_threads(threads_)
  {
    const Matrices m = thread_matrices(omp_get_thread_num());
#pragma omp for schedule(static)
    for (int64_t group = 0; group < groups; ++group) {
      run_group(params, group / params.heads_kv, group % params.heads_kv, m);
    }
  }
  return Status::Ok();
}

void NaiveBackward::run_group(const AttentionParams& p, int64_t b, int64_t kv_head,
                              const Matrices& m) const {
  const int64_t sk = p.seqlen_k, dqk = p.head_dim_qk, dv = p.head_dim_v;
  PhaseScope phase("convert");
  load_block(p.input_dtype, p.k, k_offset(p, b, kv_head, 0), p.k_row_stride, sk, dqk, m.k, dqk);
  load_block(p.input_dtype, p.v, v_offset(p, b, kv_head, 0), p.v_row_stride, sk, dv, m.v, dv);
  fill_row(m.dk, 0, sk * dqk, 0.0f);
  fill_row(m.dv, 0, sk * dv, 0.0f);
  for (int64_t g = 0; g < p.heads_per_kv; ++g) run_head(p, b, kv_head * p.heads_per_kv + g, m);
  phase.next("dK");
  for (int64_t j = 0; j < sk; ++j) {
    store_row(p.grad_dtype, p.dk, dk_offset(p, b, kv_head, j), m.dk + j * dqk, dqk);
    store_row(p.grad_dtype, p.dv, dv_offset(p, b, kv_head, j), m.dv + j * dv, dv);
  }
}

void NaiveBackward::run_head(const AttentionParams& p, int64_t b, int64_t h,
                             const Matrices& m) const {
  const int64_t sq = p.seqlen_q, sk = p.seqlen_k, dqk = p.head_dim_qk, dv = p.head_dim_v;
  PhaseScope phase("convert");
  load_block(p.input_dtype, p.q, q_offset(p, b, h, 0), p.q_row_stride, sq, dqk, m.q, dqk);
  load_block(p.grad_dtype, p.dout, dout_offset(p, b, h, 0), p.dout_row_stride, sq, dv, m.dout, dv);

  phase.next("scores");
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, sq, sk, dqk, p.scale, m.q, dqk, m.k, dqk,
              0.0f, m.p, sk);
  phase.next("softmax");  // masked keys get P = 0; a row with no visible key is all zeros
  for (int64_t i = 0; i < sq; ++i) {
    float* row = m.p + i * sk;
    const KeyRange keys = row_keys(p, b, i);
    fill_row(row, 0, std::min(keys.begin, sk), 0.0f);
    fill_row(row, std::max(keys.end, keys.begin), sk, 0.0f);
    if (keys.size() == 0) continue;
    const float max = row_max(row, keys.begin, keys.end);
    float sum = 0;
    for (int64_t j = keys.begin; j < keys.end; ++j) {
      row[j] = std::exp(row[j] - max);
      sum += row[j];
    }
    scale_row(row + keys.begin, keys.size(), 1.0f / sum);
  }
  phase.next("dV");
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, sk, dv, sq, 1.0f, m.p, sk, m.dout, dv, 1.0f,
              m.dv, dv);
  phase.next("dP");
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, sq, sk, dv, 1.0f, m.dout, dv, m.v, dv, 0.0f,
              m.ds, sk);
  phase.next("dS");
  for (int64_t i = 0; i < sq; ++i) {
    const float* p_row = m.p + i * sk;
    float* ds_row = m.ds + i * sk;
    float rowsum = 0;
    for (int64_t j = 0; j < sk; ++j) rowsum += p_row[j] * ds_row[j];
    for (int64_t j = 0; j < sk; ++j) ds_row[j] = p_row[j] * (ds_row[j] - rowsum);
  }
  phase.next("dK");
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, sk, dqk, sq, p.scale, m.ds, sk, m.q, dqk,
              1.0f, m.dk, dqk);
  phase.next("dQ");
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, sq, dqk, sk, p.scale, m.ds, sk, m.k, dqk,
              0.0f, m.dq, dqk);
  for (int64_t i = 0; i < sq; ++i) {
    store_row(p.grad_dtype, p.dq, dq_offset(p, b, h, i), m.dq + i * dqk, dqk);
  }
}

}  // namespace attnbench::cpu
