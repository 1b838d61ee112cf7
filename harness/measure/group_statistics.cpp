#include "harness/measure/group_statistics.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "reference/formats.h"

namespace attnbench {
namespace {

// Query rows per block: the scores of one block are block x seqlen_k doubles (8 MiB at 8192 keys).
constexpr int64_t kBlockRows = 128;

// Every row of one head's tensor in double and in float: (rows, dim), row-major.
struct Rows {
  std::vector<double> exact;
  std::vector<float> lowp;
};
Rows load_rows(const TensorView& view, int64_t b, int64_t h, int64_t count, int64_t dim) {
  Rows rows;
  rows.lowp.resize(static_cast<size_t>(count * dim));
  for (int64_t s = 0; s < count; ++s) load_row(view, b, s, h, dim, &rows.lowp[s * dim]);
  rows.exact.assign(rows.lowp.begin(), rows.lowp.end());
  return rows;
}

// One block of query rows [first, first + rows) of head h: both statistics of each row.
void block_statistics(const Problem& p, const AttentionInputs& in, int64_t b, int64_t h,
                      int64_t first, int64_t rows, const Rows& k, const Rows& v,
                      RowStatistics<double>* exact, RowStatistics<float>* lowp) {
  const int64_t sk = p.seqlen_k, dqk = p.head_dim_qk, dv = p.head_dim_v;
  const Rows q = [&] {
    Rows block;
    block.lowp.resize(static_cast<size_t>(rows * dqk));
    for (int64_t r = 0; r < rows; ++r) load_row(in.q, b, first + r, h, dqk, &block.lowp[r * dqk]);
    block.exact.assign(block.lowp.begin(), block.lowp.end());
    return block;
  }();
  std::vector<double> s(static_cast<size_t>(rows * sk));
  std::vector<float> s_lowp(s.size());
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, sk, dqk, p.softmax_scale(),
              q.exact.data(), dqk, k.exact.data(), dqk, 0.0, s.data(), sk);
  // lowp_row: the fp32 dot product, then times the fp32 scale.
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, sk, dqk, 1.0f, q.lowp.data(), dqk,
              k.lowp.data(), dqk, 0.0f, s_lowp.data(), sk);
  const float scale = static_cast<float>(p.softmax_scale());
  std::vector<double> sums(static_cast<size_t>(rows));
  std::vector<float> lowp_sums(sums.size());
  for (int64_t r = 0; r < rows; ++r) {
    double* row = &s[r * sk];
    float* lowp_row_scores = &s_lowp[r * sk];
    const KeyRange keys = p.visible(b, first + r);
    if (keys.size() == 0) {
      std::fill(row, row + sk, 0.0);
      std::fill(lowp_row_scores, lowp_row_scores + sk, 0.0f);
      exact[r].lse = -std::numeric_limits<double>::infinity();
      lowp[r].lse = -std::numeric_limits<float>::infinity();
      continue;
    }
    for (int64_t j = keys.begin; j < keys.end; ++j) lowp_row_scores[j] *= scale;
    const double max = *std::max_element(row + keys.begin, row + keys.end);
    const float lowp_max =
        *std::max_element(lowp_row_scores + keys.begin, lowp_row_scores + keys.end);
    double sum = 0;
    float lowp_sum = 0;
    for (int64_t j = 0; j < sk; ++j) {
      const bool visible = j >= keys.begin && j < keys.end;
      row[j] = visible ? std::exp(row[j] - max) : 0.0;
      sum += row[j];
      const float weight = visible ? std::exp(lowp_row_scores[j] - lowp_max) : 0.0f;
      lowp_sum += weight;
      lowp_row_scores[j] = round_to(p.p_dtype, weight);  // as lowp_row rounds P before P V
    }
    sums[static_cast<size_t>(r)] = sum;
    lowp_sums[static_cast<size_t>(r)] = lowp_sum;
    exact[r].lse = max + std::log(sum);
    lowp[r].lse = lowp_max + std::log(lowp_sum);
  }
  std::vector<double> out(static_cast<size_t>(rows * dv));
  std::vector<float> lowp_out(out.size());
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, dv, sk, 1.0, s.data(), sk,
              v.exact.data(), dv, 0.0, out.data(), dv);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, dv, sk, 1.0f, s_lowp.data(), sk,
              v.lowp.data(), dv, 0.0f, lowp_out.data(), dv);
  std::vector<float> dout(static_cast<size_t>(dv));
  for (int64_t r = 0; r < rows; ++r) {
    double* o = &out[r * dv];
    float* lowp_o = &lowp_out[r * dv];
    const double sum = sums[static_cast<size_t>(r)];
    const float lowp_sum = lowp_sums[static_cast<size_t>(r)];
    load_row(in.dout, b, first + r, h, dv, dout.data());
    exact[r].delta = 0;
    lowp[r].delta = 0;
    for (int64_t d = 0; d < dv; ++d) {
      o[d] = sum > 0 ? o[d] / sum : 0.0;
      lowp_o[d] = lowp_sum > 0 ? round_to(p.output_dtype, lowp_o[d] / lowp_sum) : 0.0f;
      exact[r].delta += static_cast<double>(dout[static_cast<size_t>(d)]) * o[d];
      lowp[r].delta += dout[static_cast<size_t>(d)] * lowp_o[d];
    }
    exact[r].delta_uncertainty = delta_uncertainty(p.output_dtype, dout.data(), o, dv);
  }
}

// The rows `rows` of a view, as Rows.
Rows gather_rows(const TensorView& view, int64_t b, int64_t h, const std::vector<int64_t>& rows,
                 int64_t dim) {
  Rows gathered;
  gathered.lowp.resize(rows.size() * static_cast<size_t>(dim));
  for (size_t r = 0; r < rows.size(); ++r)
    load_row(view, b, rows[r], h, dim, &gathered.lowp[r * dim]);
  gathered.exact.assign(gathered.lowp.begin(), gathered.lowp.end());
  return gathered;
}

}  // namespace

void head_dq_rows(const Problem& problem, const AttentionInputs& inputs, int64_t b, int64_t h,
                  const std::vector<int64_t>& queries,
                  const std::vector<RowStatistics<double>>& exact,
                  const std::vector<RowStatistics<float>>& lowp, double* dq, float* lowp_dq,
                  RowEnvelope* envelopes) {
  const Problem& p = problem;
  const int64_t n = static_cast<int64_t>(queries.size());
  const int64_t sk = p.seqlen_k, dqk = p.head_dim_qk, dv = p.head_dim_v;
  const int64_t kv_head = kv_head_of(p, h);
  const Rows q = gather_rows(inputs.q, b, h, queries, dqk);
  const Rows dout = gather_rows(inputs.dout, b, h, queries, dv);
  const Rows k = load_rows(inputs.k, b, kv_head, sk, dqk);
  const Rows v = load_rows(inputs.v, b, kv_head, sk, dv);
  const double scale = p.softmax_scale();
  const float lowp_scale = static_cast<float>(scale);

  // Scores and dP = dO V^T, exact and at the kernel's precision.
  std::vector<double> s(static_cast<size_t>(n * sk)), dp(s.size());
  std::vector<float> s_lowp(s.size()), dp_lowp(s.size());
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, sk, dqk, scale, q.exact.data(), dqk,
              k.exact.data(), dqk, 0.0, s.data(), sk);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, sk, dqk, 1.0f, q.lowp.data(), dqk,
              k.lowp.data(), dqk, 0.0f, s_lowp.data(), sk);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, sk, dv, 1.0, dout.exact.data(), dv,
              v.exact.data(), dv, 0.0, dp.data(), sk);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, sk, dv, 1.0f, dout.lowp.data(), dv,
              v.lowp.data(), dv, 0.0f, dp_lowp.data(), sk);

  // P and dS in place of the scores and dP; the envelopes' weights beside them.
  std::vector<double> p_weights(s.size()), ds_magnitude(s.size());
  std::vector<double> max_exponent(static_cast<size_t>(n), 0.0);
  for (int64_t r = 0; r < n; ++r) {
    const KeyRange keys = p.visible(b, queries[static_cast<size_t>(r)]);
    const RowStatistics<double>& stats = exact[static_cast<size_t>(r)];
    const RowStatistics<float>& lowp_stats = lowp[static_cast<size_t>(r)];
    for (int64_t j = 0; j < sk; ++j) {
      const size_t at = static_cast<size_t>(r * sk + j);
      if (j < keys.begin || j >= keys.end) {
        s[at] = dp[at] = 0.0;
        s_lowp[at] = dp_lowp[at] = 0.0f;
        continue;
      }
      const double probability = std::exp(s[at] - stats.lse);
      max_exponent[static_cast<size_t>(r)] =
          std::max(max_exponent[static_cast<size_t>(r)], std::fabs(s[at]) + std::fabs(stats.lse));
      const double ds = probability * (dp[at] - stats.delta);
      p_weights[at] = probability * stats.delta_uncertainty;
      ds_magnitude[at] = std::fabs(ds);
      s[at] = ds;  // dS
      const float lowp_probability = std::exp(lowp_scale * s_lowp[at] - lowp_stats.lse);
      s_lowp[at] = round_to(operand_dtype(p),
                            lowp_probability * (dp_lowp[at] - lowp_stats.delta));  // dS
    }
  }
  // dQ = scale dS K; the envelopes: scale u_i sum_j P_ij |k_j| and scale sum_j |dS_ij| |k_j|.
  std::vector<double> abs_k(k.exact.size());
  for (size_t e = 0; e < abs_k.size(); ++e) abs_k[e] = std::fabs(k.exact[e]);
  std::vector<double> o_rounding(static_cast<size_t>(n * dqk)), magnitude(o_rounding.size());
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dqk, sk, scale, s.data(), sk,
              k.exact.data(), dqk, 0.0, dq, dqk);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dqk, sk, scale, p_weights.data(), sk,
              abs_k.data(), dqk, 0.0, o_rounding.data(), dqk);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dqk, sk, scale, ds_magnitude.data(), sk,
              abs_k.data(), dqk, 0.0, magnitude.data(), dqk);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dqk, sk, 1.0f, s_lowp.data(), sk,
              k.lowp.data(), dqk, 0.0f, lowp_dq, dqk);
  for (int64_t r = 0; r < n; ++r) {
    RowEnvelope& envelope = envelopes[r];
    envelope = RowEnvelope{};
    envelope.max_exponent = max_exponent[static_cast<size_t>(r)];
    for (int64_t d = 0; d < dqk; ++d) {
      const size_t at = static_cast<size_t>(r * dqk + d);
      lowp_dq[at] = round_to(p.grad_dtype(), lowp_dq[at] * lowp_scale);
      envelope.o_rounding = std::max(envelope.o_rounding, o_rounding[at]);
      envelope.magnitude = std::max(envelope.magnitude, magnitude[at]);
    }
  }
}

void group_statistics(const Problem& problem, const AttentionInputs& inputs, int64_t b,
                      int64_t kv_head, std::vector<RowStatistics<double>>& exact,
                      std::vector<RowStatistics<float>>& lowp) {
  const Problem& p = problem;
  const int64_t group = p.heads_q / p.heads_kv;
  exact.assign(static_cast<size_t>(group * p.seqlen_q), {});
  lowp.assign(exact.size(), {});
  const Rows k = load_rows(inputs.k, b, kv_head, p.seqlen_k, p.head_dim_qk);
  const Rows v = load_rows(inputs.v, b, kv_head, p.seqlen_k, p.head_dim_v);
  const int64_t blocks = (p.seqlen_q + kBlockRows - 1) / kBlockRows;
  // BLAS runs single-threaded inside the team (OpenBLAS's OpenMP build); the blocks share it.
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t item = 0; item < group * blocks; ++item) {
    const int64_t g = item / blocks, first = (item % blocks) * kBlockRows;
    const int64_t rows = std::min(kBlockRows, p.seqlen_q - first);
    const size_t at = static_cast<size_t>(g * p.seqlen_q + first);
    block_statistics(p, inputs, b, kv_head * group + g, first, rows, k, v, &exact[at], &lowp[at]);
  }
}

}  // namespace attnbench
