#include "harness/measure/inputs.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "kernels/kernel.h"
#include "reference/formats.h"
#include "reference/random.h"

namespace attnbench {
namespace {

// Scaled logits = scale * q.k with scale = 1/sqrt(d): q, k ~ N(0, s^2) gives logits of standard
// deviation s^2, so s = 10 puts typical logits near 100 and the largest in the hundreds.
constexpr float kLargeLogitsScale = 10.0f;
constexpr double kOutlierProbability = 0.001;
constexpr float kOutlierSigma = 10.0f;
// UpstreamGradient::small: 2^-12, about a loss averaged over four thousand tokens.
constexpr float kSmallGradientScale = 1.0f / 4096.0f;
// sink: every query has kSinkQueryShare along its kv head's unit direction u, a sink key
// kSinkLogit * sqrt(d) / kSinkQueryShare along it, so a sink's scaled logit is about kSinkLogit
// above the others' (each about N(0, 1)). Sinks sit at keys 0, seqlen / 3 and 2 seqlen / 3 (one key
// when the sequence is that short), so tiles visited first, in the middle and last hold one.
constexpr float kSinkQueryShare = 2.0f;
constexpr float kSinkLogit = 20.0f;

bool is_sink_key(int64_t position, int64_t seqlen) {
  return position == 0 || position == seqlen / 3 || position == 2 * seqlen / 3;
}

// The sink distribution's direction for each kv head (unit vectors of `dim` elements).
struct SinkDirections {
  int64_t heads_per_kv = 1;
  std::vector<std::vector<float>> unit;  // [kv head][dim]
};

SinkDirections sink_directions(uint64_t seed, int64_t heads_kv, int64_t heads_per_kv, int64_t dim) {
  SinkDirections directions;
  directions.heads_per_kv = heads_per_kv;
  for (int64_t g = 0; g < heads_kv; ++g) {
    Xoshiro256 rng(mix_seed(seed, static_cast<uint64_t>(g)));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> u(static_cast<size_t>(dim));
    double norm = 0;
    for (float& x : u) {
      x = normal(rng);
      norm += static_cast<double>(x) * x;
    }
    for (float& x : u) x = static_cast<float>(x / std::sqrt(norm));
    directions.unit.push_back(std::move(u));
  }
  return directions;
}

void fill_pattern(void* data, size_t bytes, const void* pattern, size_t pattern_bytes) {
  auto* out = static_cast<unsigned char*>(data);
  for (size_t i = 0; i < bytes; i += pattern_bytes) std::memcpy(out + i, pattern, pattern_bytes);
}

// dout: the backward's upstream gradient, drawn from its own UpstreamGradient distribution.
enum class Role { q, k, v, dout };

// The sink distribution in one (position, head) row of `dim` values: a query's own component
// along its kv head's direction u is replaced by kSinkQueryShare u (so no query's noise along u
// is multiplied by a sink key's length); a sink key gets kSinkLogit sqrt(dim) / kSinkQueryShare
// along u; values and other keys are left as drawn.
void add_sink_share(const SinkDirections& sinks, Role role, int64_t position, int64_t seqlen,
                    int64_t head, float* row, int64_t dim) {
  if (role == Role::q) {
    const std::vector<float>& u = sinks.unit[static_cast<size_t>(head / sinks.heads_per_kv)];
    double along = 0;
    for (int64_t i = 0; i < dim; ++i)
      along += static_cast<double>(row[i]) * u[static_cast<size_t>(i)];
    for (int64_t i = 0; i < dim; ++i) {
      row[i] += static_cast<float>(kSinkQueryShare - along) * u[static_cast<size_t>(i)];
    }
  } else if (role == Role::k && is_sink_key(position, seqlen)) {
    const std::vector<float>& u = sinks.unit[static_cast<size_t>(head)];
    const float length = kSinkLogit * std::sqrt(static_cast<float>(dim)) / kSinkQueryShare;
    for (int64_t i = 0; i < dim; ++i) row[i] += length * u[static_cast<size_t>(i)];
  }
}

// Draws one logical tensor (batch, seq, heads, dim) into `values` (dense, in that order), each
// (b, s) row of heads from its own seeded stream; only the rows `placement` holds (a varlen
// sequence's first rows), so a ragged batch costs its own rows, whose values are the dense
// batch's.
void draw_tensor(Distribution distribution, Role role, uint64_t seed,
                 const TensorPlacement& placement, int64_t batch, int64_t seqlen, int64_t heads,
                 int64_t dim, const SinkDirections& sinks, std::vector<float>& values) {
  const int64_t row_elements = heads * dim;
  values.resize(static_cast<size_t>(batch * seqlen * row_elements));
  const float factor =
      (distribution == Distribution::large_logits && (role == Role::q || role == Role::k))
          ? kLargeLogitsScale
          : 1.0f;
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < batch * seqlen; ++row) {
    if (row % seqlen >= placement.rows(row / seqlen, seqlen)) continue;
    Xoshiro256 rng(mix_seed(seed, static_cast<uint64_t>(row)));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    float* out = values.data() + row * row_elements;
    for (int64_t i = 0; i < row_elements; ++i) {
      float x = normal(rng) * factor;
      if (distribution == Distribution::outliers && uniform(rng) < kOutlierProbability) {
        x += kOutlierSigma * normal(rng);
      }
      out[i] = x;
    }
    if (distribution == Distribution::sink) {
      for (int64_t head = 0; head < heads; ++head) {
        add_sink_share(sinks, role, row % seqlen, seqlen, head, out + head * dim, dim);
      }
    }
  }
}

// A tensor's FP8 descales: one for the tensor, or with per_head one per (batch, head), the
// tensor's then 1.
struct Descales {
  float tensor = 1.0f;
  std::vector<float> heads;
  float of(int64_t b, int64_t h, int64_t head_count) const {
    return heads.empty() ? tensor
                         : heads[static_cast<size_t>(head_descale_index(b, h, head_count))];
  }
};

// The descale that puts `amax` on the format's largest finite number.
float descale_for(float amax, DType dtype) { return amax > 0 ? amax / max_finite(dtype) : 1.0f; }

// The descales of `values` (batch, seqlen, heads, dim) under `scaling`, over the rows `placement`
// keeps (a varlen sequence's first rows): none but for FP8.
Descales descales_of(const std::vector<float>& values, DType dtype, Fp8Scaling scaling,
                     const TensorPlacement& placement, int64_t batch, int64_t seqlen, int64_t heads,
                     int64_t dim) {
  Descales descales;
  if (!is_fp8(dtype) || scaling == Fp8Scaling::none) return descales;
  const bool per_tensor = scaling == Fp8Scaling::per_tensor;
  std::vector<float> amax(static_cast<size_t>(per_tensor ? 1 : batch * heads), 0.0f);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < placement.rows(b, seqlen); ++s) {
      for (int64_t h = 0; h < heads; ++h) {
        const float* row = values.data() + ((b * seqlen + s) * heads + h) * dim;
        float& max = amax[per_tensor ? 0 : static_cast<size_t>(head_descale_index(b, h, heads))];
        for (int64_t d = 0; d < dim; ++d) max = std::max(max, std::fabs(row[d]));
      }
    }
  }
  if (per_tensor) {
    descales.tensor = descale_for(amax[0], dtype);
    return descales;
  }
  for (float head_max : amax) descales.heads.push_back(descale_for(head_max, dtype));
  return descales;
}

// Quantizes `values` into the buffer at `placement`; returns the descales (FP8: amax / max_finite
// so the largest value of the tensor, or of each head, lands on the format's largest finite
// number).
Descales quantize_into(const std::vector<float>& values, DType dtype, Fp8Scaling scaling,
                       const TensorPlacement& placement, int64_t batch, int64_t seqlen,
                       int64_t heads, int64_t dim, void* buffer) {
  const Descales descales =
      descales_of(values, dtype, scaling, placement, batch, seqlen, heads, dim);
  // Values are drawn for every (b, s) of the dense shape; a varlen sequence keeps its first rows,
  // so its inputs are those of the same sequence in a dense batch.
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < seqlen; ++s) {
      if (s >= placement.rows(b, seqlen)) continue;  // collapse(2) needs a rectangular nest
      for (int64_t h = 0; h < heads; ++h) {
        const float* source = values.data() + ((b * seqlen + s) * heads + h) * dim;
        const float inverse = 1.0f / descales.of(b, h, heads);
        const int64_t base = placement.row_start(b, s, h);
        for (int64_t d = 0; d < dim; ++d)
          store_element(dtype, buffer, base + d, source[d] * inverse);
      }
    }
  }
  return descales;
}

// A paged cache's pools before the sequences' rows are stored: every element a fresh finite value,
// as a serving engine's pages hold whatever a finished request left, so a kernel that reads past
// a sequence's last key (the partial last page read whole) reads numbers that change its output.
void fill_stale_pages(DType dtype, uint64_t seed, void* pool, int64_t elements) {
  Xoshiro256 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t e = 0; e < elements; ++e) store_element(dtype, pool, e, normal(rng));
}

// dO, placed like out, in the gradient dtype, from its own seeded stream (so q, k and v are the
// same whether or not it is drawn) and its own distribution (Problem::dout).
void draw_upstream_gradient(uint64_t seed, ProblemInputs& inputs) {
  const Problem& p = inputs.problem;
  std::vector<float> values;
  inputs.dout_buffer =
      GuardedBuffer(static_cast<size_t>(inputs.layout.out_elements) * dtype_size(p.grad_dtype()));
  const Distribution drawn_as =
      p.dout == UpstreamGradient::outliers ? Distribution::outliers : Distribution::normal;
  // Role::dout reads no sink directions.
  draw_tensor(drawn_as, Role::dout, mix_seed(seed, 5), inputs.layout.out, p.batch, p.seqlen_q,
              p.heads_q, p.head_dim_v, SinkDirections{}, values);
  if (p.dout == UpstreamGradient::small) {
    for (float& value : values) value *= kSmallGradientScale;
  }
  quantize_into(values, p.grad_dtype(), Fp8Scaling::none, inputs.layout.out, p.batch, p.seqlen_q,
                p.heads_q, p.head_dim_v, inputs.dout_buffer.data());
  inputs.dout_drawn = p.dout;
}

}  // namespace

void set_pass(const Problem& problem, uint64_t seed, ProblemInputs& inputs) {
  inputs.problem.pass = problem.pass;
  inputs.problem.dout = problem.dout;
  const bool drawn = inputs.dout_buffer.bytes() > 0 && inputs.dout_drawn == problem.dout;
  if (problem.has_backward() && !drawn) draw_upstream_gradient(seed, inputs);
}

GuardedBuffer::GuardedBuffer(size_t bytes)
    : storage_(bytes + 2 * kCanaryBytes, kCanaryByte), bytes_(bytes) {}

bool GuardedBuffer::canaries_intact() const {
  const unsigned char* begin = storage_.data();
  const unsigned char* after = storage_.data() + kCanaryBytes + bytes_;
  for (size_t i = 0; i < kCanaryBytes; ++i) {
    if (begin[i] != kCanaryByte || after[i] != kCanaryByte) return false;
  }
  return true;
}

void GuardedBuffer::poison(DType dtype) {
  switch (dtype) {
    case DType::f32: {
      const uint32_t nan = 0x7FC00000u;
      fill_pattern(data(), bytes_, &nan, sizeof nan);
      break;
    }
    case DType::f16: {
      const uint16_t nan = 0x7E00u;
      fill_pattern(data(), bytes_, &nan, sizeof nan);
      break;
    }
    case DType::bf16: {
      const uint16_t nan = 0x7FC0u;
      fill_pattern(data(), bytes_, &nan, sizeof nan);
      break;
    }
    case DType::e4m3:
    case DType::e5m2: {
      const uint8_t nan = 0x7Fu;
      fill_pattern(data(), bytes_, &nan, sizeof nan);
      break;
    }
  }
}

uint64_t hash_string(const std::string& text) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a 64
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

Status make_inputs(const Problem& problem, Distribution distribution, uint64_t seed,
                   ProblemInputs& inputs) {
  if (problem.fp8_scaling == Fp8Scaling::per_block) {
    return Status::Error(
        "fp8_scaling per_block is not stored by the harness (the _block kernels quantize 16-bit "
        "inputs into their blocks themselves); accepted: none, per_tensor, per_head");
  }
  inputs.problem = problem;
  inputs.layout = describe_layout(problem);
  const ProblemLayout& layout = inputs.layout;
  const size_t element = dtype_size(problem.input_dtype);
  inputs.q_buffer = GuardedBuffer(static_cast<size_t>(layout.q_buffer_elements) * element);
  if (layout.k_buffer_elements > 0) {
    inputs.k_buffer = GuardedBuffer(static_cast<size_t>(layout.k_buffer_elements) * element);
    inputs.v_buffer = GuardedBuffer(static_cast<size_t>(layout.v_buffer_elements) * element);
  }
  void* k_data = layout.k_buffer_elements > 0 ? inputs.k_buffer.data() : inputs.q_buffer.data();
  void* v_data = layout.k_buffer_elements > 0 ? inputs.v_buffer.data() : inputs.q_buffer.data();

  if (problem.is_paged()) {
    fill_stale_pages(problem.input_dtype, mix_seed(seed, 6), k_data, layout.k_buffer_elements);
    fill_stale_pages(problem.input_dtype, mix_seed(seed, 7), v_data, layout.v_buffer_elements);
  }
  const SinkDirections sinks =
      distribution == Distribution::sink
          ? sink_directions(mix_seed(seed, 4), problem.heads_kv, problem.heads_q / problem.heads_kv,
                            problem.head_dim_qk)
          : SinkDirections{};
  std::vector<float> values;
  draw_tensor(distribution, Role::q, mix_seed(seed, 1), layout.q, problem.batch, problem.seqlen_q,
              problem.heads_q, problem.head_dim_qk, sinks, values);
  Descales q =
      quantize_into(values, problem.input_dtype, problem.fp8_scaling, layout.q, problem.batch,
                    problem.seqlen_q, problem.heads_q, problem.head_dim_qk, inputs.q_buffer.data());
  inputs.q_descale = q.tensor;
  inputs.q_head_descales = std::move(q.heads);
  draw_tensor(distribution, Role::k, mix_seed(seed, 2), layout.k, problem.batch, problem.seqlen_k,
              problem.heads_kv, problem.head_dim_qk, sinks, values);
  Descales k =
      quantize_into(values, problem.input_dtype, problem.fp8_scaling, layout.k, problem.batch,
                    problem.seqlen_k, problem.heads_kv, problem.head_dim_qk, k_data);
  inputs.k_descale = k.tensor;
  inputs.k_head_descales = std::move(k.heads);
  draw_tensor(distribution, Role::v, mix_seed(seed, 3), layout.v, problem.batch, problem.seqlen_k,
              problem.heads_kv, problem.head_dim_v, sinks, values);
  Descales v =
      quantize_into(values, problem.input_dtype, problem.fp8_scaling, layout.v, problem.batch,
                    problem.seqlen_k, problem.heads_kv, problem.head_dim_v, v_data);
  inputs.v_descale = v.tensor;
  inputs.v_head_descales = std::move(v.heads);

  if (problem.has_backward()) draw_upstream_gradient(seed, inputs);

  inputs.key_lengths.resize(static_cast<size_t>(problem.batch));
  for (int64_t b = 0; b < problem.batch; ++b) {
    inputs.key_lengths[static_cast<size_t>(b)] = static_cast<int>(problem.key_length(b));
  }
  inputs.page_table.assign(layout.k.page_table.begin(), layout.k.page_table.end());
  inputs.cu_seqlens.clear();
  for (const auto* starts : {&layout.q.sequence_starts, &layout.k.sequence_starts}) {
    for (int64_t start : *starts) inputs.cu_seqlens.push_back(static_cast<int>(start));
  }
  return Status::Ok();
}

AttentionInputs ProblemInputs::view() const {
  const bool packed = layout.k_buffer_elements == 0;
  const void* k_data = packed ? q_buffer.data() : k_buffer.data();
  const void* v_data = packed ? q_buffer.data() : v_buffer.data();
  const auto heads = [](const std::vector<float>& descales) {
    return descales.empty() ? nullptr : descales.data();
  };
  return {TensorView{problem.input_dtype, q_buffer.data(), layout.q, q_descale,
                     heads(q_head_descales), problem.heads_q},
          TensorView{problem.input_dtype, k_data, layout.k, k_descale, heads(k_head_descales),
                     problem.heads_kv},
          TensorView{problem.input_dtype, v_data, layout.v, v_descale, heads(v_head_descales),
                     problem.heads_kv},
          TensorView{problem.grad_dtype(), problem.has_backward() ? dout_buffer.data() : nullptr,
                     layout.out, 1.0f, nullptr, problem.heads_q}};
}

InputPointers host_pointers(const ProblemInputs& inputs) {
  const AttentionInputs view = inputs.view();
  return {view.q.data,
          view.k.data,
          view.v.data,
          inputs.key_lengths.data(),
          inputs.cu_seqlens.empty() ? nullptr : inputs.cu_seqlens.data(),
          inputs.page_table.empty() ? nullptr : inputs.page_table.data(),
          view.q.head_descales,
          view.k.head_descales,
          view.v.head_descales,
          view.dout.data};
}

AttentionParams make_params(const ProblemInputs& inputs, const InputPointers& pointers, void* out,
                            float* lse, float out_scale, const GradientPointers& gradients) {
  const Problem& p = inputs.problem;
  const ProblemLayout& layout = inputs.layout;
  const size_t element = dtype_size(p.input_dtype);
  auto at_offset = [element](const void* base, int64_t offset) {
    return static_cast<const void*>(static_cast<const unsigned char*>(base) +
                                    static_cast<size_t>(offset) * element);
  };
  AttentionParams params = shape_params(p);
  params.q = at_offset(pointers.q_buffer, layout.q.offset);
  params.k = at_offset(pointers.k_buffer, layout.k.offset);
  params.v = at_offset(pointers.v_buffer, layout.v.offset);
  params.out = out;
  params.lse = lse;
  params.key_lengths = p.mask.kind == MaskKind::padding ? pointers.key_lengths : nullptr;
  params.page_table = pointers.page_table;
  if (pointers.cu_seqlens != nullptr) {
    params.cu_seqlens_q = pointers.cu_seqlens;
    params.cu_seqlens_k = pointers.cu_seqlens + p.batch + 1;
  }
  params.q_descale = inputs.q_descale;
  params.k_descale = inputs.k_descale;
  params.v_descale = inputs.v_descale;
  params.q_head_descales = pointers.q_head_descales;
  params.k_head_descales = pointers.k_head_descales;
  params.v_head_descales = pointers.v_head_descales;
  params.out_scale = out_scale;
  if (inputs.problem.has_backward()) {
    params.dout = pointers.dout;
    params.dq = gradients.dq;
    params.dk = gradients.dk;
    params.dv = gradients.dv;
  }
  return params;
}

}  // namespace attnbench
