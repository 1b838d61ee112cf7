// Row-wise exact attention. reference_row is the truth (fp64 everywhere); lowp_row is the same
// computation at a kernel's precision, which sets how much error a correct kernel may show.
#include "reference/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "reference/formats.h"

namespace attnbench {

int64_t kv_head_of(const Problem& problem, int64_t h) {
  return h / (problem.heads_q / problem.heads_kv);
}

// The head_dim stride is 1, so a row is contiguous: one dtype dispatch per row instead of one
// per element (the reference spends its time here on long key sequences).
void load_row(const TensorView& view, int64_t b, int64_t s, int64_t h, int64_t dim, float* row) {
  const int64_t first = view.placement.row_start(b, s, h);
  switch (view.dtype) {
    case DType::f32: {
      const float* data = static_cast<const float*>(view.data) + first;
      for (int64_t d = 0; d < dim; ++d) row[d] = data[d];
      break;
    }
    case DType::f16: {
      const uint16_t* data = static_cast<const uint16_t*>(view.data) + first;
      for (int64_t d = 0; d < dim; ++d) row[d] = fp16_bits_to_float(data[d]);
      break;
    }
    case DType::bf16: {
      const uint16_t* data = static_cast<const uint16_t*>(view.data) + first;
      for (int64_t d = 0; d < dim; ++d) row[d] = bf16_bits_to_float(data[d]);
      break;
    }
    case DType::e4m3: {
      const uint8_t* data = static_cast<const uint8_t*>(view.data) + first;
      for (int64_t d = 0; d < dim; ++d) row[d] = e4m3_bits_to_float(data[d]);
      break;
    }
    case DType::e5m2: {
      const uint8_t* data = static_cast<const uint8_t*>(view.data) + first;
      for (int64_t d = 0; d < dim; ++d) row[d] = e5m2_bits_to_float(data[d]);
      break;
    }
  }
  if (const float descale = view.descale_of(b, h); descale != 1.0f) {
    for (int64_t d = 0; d < dim; ++d) row[d] *= descale;
  }
}


float TensorView::at(int64_t b, int64_t s, int64_t h, int64_t d) const {
  return load_element(dtype, data, placement.row_start(b, s, h) + d) * descale_of(b, h);
}

void reference_row(const Problem& problem, const AttentionInputs& inputs, int64_t b, int64_t h,
                   int64_t query, double* out_row, double* lse) {
  const KeyRange keys = problem.visible(b, query);
  std::fill(out_row, out_row + problem.head_dim_v, 0.0);
  if (keys.size() == 0) {
    if (lse != nullptr) *lse = -std::numeric_limits<double>::infinity();
    return;
  }
  const int64_t kv_head = kv_head_of(problem, h);
  const double scale = problem.softmax_scale();
  std::vector<float> q(static_cast<size_t>(problem.head_dim_qk));
  std::vector<float> k(static_cast<size_t>(problem.head_dim_qk));
  std::vector<float> v(static_cast<size_t>(problem.head_dim_v));
  load_row(inputs.q, b, query, h, problem.head_dim_qk, q.data());

  // Scaled scores over the visible keys; the product of two floats is exact in double.
  std::vector<double> scores(static_cast<size_t>(keys.size()));
  for (int64_t j = keys.begin; j < keys.end; ++j) {
    load_row(inputs.k, b, j, kv_head, problem.head_dim_qk, k.data());
    double dot = 0;
    for (size_t d = 0; d < q.size(); ++d) dot += static_cast<double>(q[d]) * k[d];
    scores[static_cast<size_t>(j - keys.begin)] = scale * dot;
  }
  const double max_score = *std::max_element(scores.begin(), scores.end());

  // Softmax with the max subtracted, so exp never overflows and the largest term is exactly 1.
  double sum = 0;
  for (int64_t j = keys.begin; j < keys.end; ++j) {
    const double weight = std::exp(scores[static_cast<size_t>(j - keys.begin)] - max_score);
    sum += weight;
    load_row(inputs.v, b, j, kv_head, problem.head_dim_v, v.data());
    for (int64_t d = 0; d < problem.head_dim_v; ++d)
      out_row[d] += weight * v[static_cast<size_t>(d)];
  }
  for (int64_t d = 0; d < problem.head_dim_v; ++d) out_row[d] /= sum;
  if (lse != nullptr) *lse = max_score + std::log(sum);
}

void lowp_row(const Problem& problem, const AttentionInputs& inputs, float out_scale, int64_t b,
              int64_t h, int64_t query, float* out_row, float* lse) {
  const KeyRange keys = problem.visible(b, query);
  std::fill(out_row, out_row + problem.head_dim_v, 0.0f);
  if (keys.size() == 0) {
    if (lse != nullptr) *lse = -std::numeric_limits<float>::infinity();
    return;
  }
  const int64_t kv_head = kv_head_of(problem, h);
  const float scale = static_cast<float>(problem.softmax_scale());
  std::vector<float> q(static_cast<size_t>(problem.head_dim_qk));
  std::vector<float> k(static_cast<size_t>(problem.head_dim_qk));
  std::vector<float> v(static_cast<size_t>(problem.head_dim_v));
  load_row(inputs.q, b, query, h, problem.head_dim_qk, q.data());

  std::vector<float> scores(static_cast<size_t>(keys.size()));
  for (int64_t j = keys.begin; j < keys.end; ++j) {
    load_row(inputs.k, b, j, kv_head, problem.head_dim_qk, k.data());
    float dot = 0;
    for (size_t d = 0; d < q.size(); ++d) dot += q[d] * k[d];
    scores[static_cast<size_t>(j - keys.begin)] = dot * scale;
  }
  const float max_score = *std::max_element(scores.begin(), scores.end());

  // As FlashAttention does: the unnormalized P = exp(s - max), in [0, 1], is rounded to the
  // MMA's input type (e4m3 on the FP8 path) before P @ V, while the row sum is taken from the
  // fp32 values; the division by the sum comes last.
  float sum = 0;
  for (int64_t j = keys.begin; j < keys.end; ++j) {
    const float weight = std::exp(scores[static_cast<size_t>(j - keys.begin)] - max_score);
    sum += weight;
    const float rounded_weight = round_to(problem.p_dtype, weight);
    load_row(inputs.v, b, j, kv_head, problem.head_dim_v, v.data());
    for (int64_t d = 0; d < problem.head_dim_v; ++d) {
      out_row[d] += rounded_weight * v[static_cast<size_t>(d)];
    }
  }
  for (int64_t d = 0; d < problem.head_dim_v; ++d) {
    const float value = out_row[d] / sum;
    out_row[d] = is_fp8(problem.output_dtype)
                     ? round_to(problem.output_dtype, value * out_scale) / out_scale
                     : round_to(problem.output_dtype, value);
  }
  if (lse != nullptr) *lse = max_score + std::log(sum);
}

}  // namespace attnbench
