// Row-wise attention backward: the exact truth (fp64) and its twin at a kernel's precision,
// written once over a precision policy so that the two can only differ where the policy says.
#include "reference/attention_backward.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "reference/formats.h"

namespace attnbench {
namespace {

// fp64 everywhere; nothing rounded. Products of two floats are exact in double.
struct Exact {
  using T = double;
  static T scale(const Problem& p) { return p.softmax_scale(); }
  static T exp(T x) { return std::exp(x); }
  static T round_operand(const Problem&, T x) { return x; }
  static T round_gradient(const Problem&, T x) { return x; }
};

// fp32 arithmetic; P and dS rounded to the inputs' dtype before the products that read them
// (the tensor cores' operand type: fp16/bf16, or fp32 for fp32 inputs), gradients to theirs.
struct LowPrecision {
  using T = float;
  static T scale(const Problem& p) { return static_cast<float>(p.softmax_scale()); }
  static T exp(T x) { return std::exp(x); }
  static T round_operand(const Problem& p, T x) { return round_to(operand_dtype(p), x); }
  static T round_gradient(const Problem& p, T x) { return round_to(p.grad_dtype(), x); }
};

}  // namespace

DType operand_dtype(const Problem& problem) {
  return is_fp8(problem.input_dtype) ? problem.grad_dtype() : problem.input_dtype;
}

double dtype_spacing(DType dtype, double x) {
  int exponent = 0;
  std::frexp(x, &exponent);  // x = m 2^exponent, m in [0.5, 1)
  int bits = 24, min_exponent = -125;
  switch (dtype) {
    case DType::f16:
      bits = 11, min_exponent = -13;
      break;
    case DType::bf16:
      bits = 8;
      break;
    case DType::e4m3:
      bits = 4, min_exponent = -5;
      break;
    case DType::e5m2:
      bits = 3, min_exponent = -13;
      break;
    case DType::f32:
      break;
  }
  return std::ldexp(1.0, std::max(exponent, min_exponent) - bits);
}

double delta_uncertainty(DType output_dtype, const float* dout, const double* out, int64_t dim) {
  double squares = 0;
  for (int64_t d = 0; d < dim; ++d) {
    const double moved = static_cast<double>(dout[d]) * dtype_spacing(output_dtype, out[d]);
    squares += moved * moved;
  }
  return 2 * std::sqrt(squares);
}

namespace {

template <typename T>
T dot(const float* a, const float* b, int64_t n) {
  T sum = 0;
  for (int64_t d = 0; d < n; ++d) sum += static_cast<T>(a[d]) * static_cast<T>(b[d]);
  return sum;
}

// Elementwise sums behind one gradient row's RowEnvelope (exact rows only).
class EnvelopeSums {
 public:
  explicit EnvelopeSums(int64_t dim)
      : o_rounding_(static_cast<size_t>(dim)), magnitude_(o_rounding_.size()) {}
  // One term: coefficient * row[d] enters the gradient, which D's uncertainty moves by
  // probability * u * |row[d]|; its P was taken from exponent s - lse.
  void add(double coefficient, double probability, double uncertainty, double exponent,
           const float* row) {
    for (size_t d = 0; d < magnitude_.size(); ++d) {
      const double element = std::fabs(static_cast<double>(row[d]));
      magnitude_[d] += std::fabs(coefficient) * element;
      o_rounding_[d] += probability * uncertainty * element;
    }
    max_exponent_ = std::max(max_exponent_, exponent);
  }
  RowEnvelope finish(double scale) const {
    RowEnvelope envelope;
    for (size_t d = 0; d < magnitude_.size(); ++d) {
      envelope.o_rounding = std::max(envelope.o_rounding, scale * o_rounding_[d]);
      envelope.magnitude = std::max(envelope.magnitude, scale * magnitude_[d]);
    }
    envelope.max_exponent = max_exponent_;
    return envelope;
  }

 private:
  std::vector<double> o_rounding_, magnitude_;
  double max_exponent_ = 0;
};

// One query row's dQ (see the header for the formulas); the envelope when asked (Exact).
template <typename Policy, typename T = typename Policy::T>
void compute_dq_row(const Problem& p, const AttentionInputs& in, const RowStatistics<T>& stats,
                    int64_t b, int64_t h, int64_t query, T* dq, RowEnvelope* envelope) {
  std::fill(dq, dq + p.head_dim_qk, T{0});
  EnvelopeSums sums(p.head_dim_qk);
  const KeyRange keys = p.visible(b, query);
  const int64_t kv_head = kv_head_of(p, h);
  const T scale = Policy::scale(p);
  std::vector<float> q(static_cast<size_t>(p.head_dim_qk)), k(q.size());
  std::vector<float> dout(static_cast<size_t>(p.head_dim_v)), v(dout.size());
  load_row(in.q, b, query, h, p.head_dim_qk, q.data());
  load_row(in.dout, b, query, h, p.head_dim_v, dout.data());
  // No visible key: nothing flows back through this row (the loop does not run).
  for (int64_t j = keys.begin; j < keys.end; ++j) {
    load_row(in.k, b, j, kv_head, p.head_dim_qk, k.data());
    load_row(in.v, b, j, kv_head, p.head_dim_v, v.data());
    const T score = scale * dot<T>(q.data(), k.data(), p.head_dim_qk);
    const T probability = Policy::exp(score - stats.lse);
    const T dp = dot<T>(dout.data(), v.data(), p.head_dim_v);
    const T ds = Policy::round_operand(p, probability * (dp - stats.delta));
    for (int64_t d = 0; d < p.head_dim_qk; ++d)
      dq[d] += ds * static_cast<T>(k[static_cast<size_t>(d)]);
    if (envelope != nullptr) {
      sums.add(ds, probability, stats.delta_uncertainty, std::fabs(score) + std::fabs(stats.lse),
               k.data());
    }
  }
  for (int64_t d = 0; d < p.head_dim_qk; ++d) dq[d] = Policy::round_gradient(p, dq[d] * scale);
  if (envelope != nullptr) *envelope = sums.finish(scale);
}

// One key row's dK and dV, summed over the query heads of its kv head's group; their envelopes
// when asked (Exact).
template <typename Policy, typename T = typename Policy::T>
void compute_dkv_row(const Problem& p, const AttentionInputs& in,
                     const RowStatistics<T>* group_stats, int64_t b, int64_t kv_head, int64_t key,
                     T* dk, T* dv, RowEnvelope* dk_envelope, RowEnvelope* dv_envelope) {
  std::fill(dk, dk + p.head_dim_qk, T{0});
  std::fill(dv, dv + p.head_dim_v, T{0});
  EnvelopeSums dk_sums(p.head_dim_qk), dv_sums(p.head_dim_v);
  const bool with_envelopes = dk_envelope != nullptr && dv_envelope != nullptr;
  const int64_t group = p.heads_q / p.heads_kv;
  const T scale = Policy::scale(p);
  std::vector<float> k(static_cast<size_t>(p.head_dim_qk)), q(k.size());
  std::vector<float> v(static_cast<size_t>(p.head_dim_v)), dout(v.size());
  load_row(in.k, b, key, kv_head, p.head_dim_qk, k.data());
  load_row(in.v, b, key, kv_head, p.head_dim_v, v.data());
  std::vector<T> head_dk(k.size()), head_dv(v.size());
  for (int64_t g = 0; g < group; ++g) {
    const int64_t h = kv_head * group + g;
    std::fill(head_dk.begin(), head_dk.end(), T{0});
    std::fill(head_dv.begin(), head_dv.end(), T{0});
    for (int64_t i = 0; i < p.seqlen_q; ++i) {
      const KeyRange keys = p.visible(b, i);
      if (key < keys.begin || key >= keys.end) continue;
      const RowStatistics<T>& stats = group_stats[g * p.seqlen_q + i];
      load_row(in.q, b, i, h, p.head_dim_qk, q.data());
      load_row(in.dout, b, i, h, p.head_dim_v, dout.data());
      const T score = scale * dot<T>(q.data(), k.data(), p.head_dim_qk);
      const T probability = Policy::exp(score - stats.lse);
      const T p_operand = Policy::round_operand(p, probability);
      for (size_t d = 0; d < head_dv.size(); ++d) head_dv[d] += p_operand * static_cast<T>(dout[d]);
      const T dp = dot<T>(dout.data(), v.data(), p.head_dim_v);
      const T ds = Policy::round_operand(p, probability * (dp - stats.delta));
      for (size_t d = 0; d < head_dk.size(); ++d) head_dk[d] += ds * static_cast<T>(q[d]);
      if (with_envelopes) {
        const double exponent = std::fabs(score) + std::fabs(stats.lse);
        dk_sums.add(ds, probability, stats.delta_uncertainty, exponent, q.data());
        dv_sums.add(probability, 0.0, 0.0, exponent, dout.data());  // dV does not read D
      }
    }
    // Each query head's share in the gradient dtype, then the group's sum (see the header).
    for (int64_t d = 0; d < p.head_dim_qk; ++d)
      dk[d] += Policy::round_gradient(p, head_dk[static_cast<size_t>(d)] * scale);
    for (int64_t d = 0; d < p.head_dim_v; ++d)
      dv[d] += Policy::round_gradient(p, head_dv[static_cast<size_t>(d)]);
  }
  for (int64_t d = 0; d < p.head_dim_qk; ++d) dk[d] = Policy::round_gradient(p, dk[d]);
  for (int64_t d = 0; d < p.head_dim_v; ++d) dv[d] = Policy::round_gradient(p, dv[d]);
  if (with_envelopes) {
    *dk_envelope = dk_sums.finish(scale);
    *dv_envelope = dv_sums.finish(1.0);
  }
}

}  // namespace

RowStatistics<double> reference_row_statistics(const Problem& problem,
                                               const AttentionInputs& inputs, int64_t b, int64_t h,
                                               int64_t query) {
  std::vector<double> out(static_cast<size_t>(problem.head_dim_v));
  std::vector<float> dout(out.size());
  RowStatistics<double> stats;
  reference_row(problem, inputs, b, h, query, out.data(), &stats.lse);
  load_row(inputs.dout, b, query, h, problem.head_dim_v, dout.data());
  for (size_t d = 0; d < out.size(); ++d) stats.delta += static_cast<double>(dout[d]) * out[d];
  stats.delta_uncertainty =
      delta_uncertainty(problem.output_dtype, dout.data(), out.data(), problem.head_dim_v);
  return stats;
}

void reference_dq_row(const Problem& problem, const AttentionInputs& inputs,
                      const RowStatistics<double>& stats, int64_t b, int64_t h, int64_t query,
                      double* dq_row, RowEnvelope* dq_envelope) {
  compute_dq_row<Exact>(problem, inputs, stats, b, h, query, dq_row, dq_envelope);
}

void reference_dkv_row(const Problem& problem, const AttentionInputs& inputs,
                       const RowStatistics<double>* group_stats, int64_t b, int64_t kv_head,
                       int64_t key, double* dk_row, double* dv_row, RowEnvelope* dk_envelope,
                       RowEnvelope* dv_envelope) {
  compute_dkv_row<Exact>(problem, inputs, group_stats, b, kv_head, key, dk_row, dv_row, dk_envelope,
                         dv_envelope);
}

// The forward at lowp_row's precision: O rounded to the output dtype, as the kernel's backward
// reads its own stored O; D summed in fp32.
RowStatistics<float> lowp_row_statistics(const Problem& problem, const AttentionInputs& inputs,
                                         int64_t b, int64_t h, int64_t query) {
  std::vector<float> out(static_cast<size_t>(problem.head_dim_v)), dout(out.size());
  RowStatistics<float> stats;
  lowp_row(problem, inputs, 1.0f, b, h, query, out.data(), &stats.lse);
  load_row(inputs.dout, b, query, h, problem.head_dim_v, dout.data());
  for (size_t d = 0; d < out.size(); ++d) stats.delta += dout[d] * out[d];
  return stats;
}

void lowp_dq_row(const Problem& problem, const AttentionInputs& inputs,
                 const RowStatistics<float>& stats, int64_t b, int64_t h, int64_t query,
                 float* dq_row) {
  compute_dq_row<LowPrecision>(problem, inputs, stats, b, h, query, dq_row, nullptr);
}

void lowp_dkv_row(const Problem& problem, const AttentionInputs& inputs,
                  const RowStatistics<float>* group_stats, int64_t b, int64_t kv_head, int64_t key,
                  float* dk_row, float* dv_row) {
  compute_dkv_row<LowPrecision>(problem, inputs, group_stats, b, kv_head, key, dk_row, dv_row,
                                nullptr, nullptr);
}

}  // namespace attnbench
