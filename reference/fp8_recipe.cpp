#include "reference/fp8_recipe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "reference/formats.h"
#include "reference/fp8_scale.h"
#include "reference/tensor_core_sum.h"

namespace attnbench {
namespace {

constexpr double kLog2e = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool power_of_two(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace

double incoherent_rotation_norm(int64_t d) { return 1.0 / std::sqrt(static_cast<double>(d)); }

bool incoherent_sign_negative(uint64_t sign_seed, int64_t channel) {
  return (splitmix64(sign_seed + static_cast<uint64_t>(channel)) & 1) != 0;
}

// The Walsh-Hadamard butterflies in double: sums of +-x, exact for fp16 inputs at d <= 256 (bf16's
// wider exponent range can round where values far apart in magnitude meet).
void incoherent_rotation(std::vector<double>& x, uint64_t sign_seed) {
  const size_t d = x.size();
  if (!power_of_two(static_cast<int64_t>(d))) {
    throw std::invalid_argument("incoherent rotation of a row of " + std::to_string(d) +
                                " values: the Hadamard transform needs a power of two");
  }
  for (size_t i = 0; i < d; ++i) {
    if (incoherent_sign_negative(sign_seed, static_cast<int64_t>(i))) x[i] = -x[i];
  }
  for (size_t half = 1; half < d; half *= 2) {
    for (size_t i = 0; i < d; i += 2 * half) {
      for (size_t j = i; j < i + half; ++j) {
        const double a = x[j], b = x[j + half];
        x[j] = a + b;
        x[j + half] = a - b;
      }
    }
  }
  const double norm = incoherent_rotation_norm(static_cast<int64_t>(d));
  for (double& value : x) value *= norm;
}

namespace {

int64_t group_count(Fp8Scaling scaling, int64_t batch, int64_t seqlen, int64_t heads,
                    int64_t block_rows) {
  switch (scaling) {
    case Fp8Scaling::per_head:
      return batch * heads;
    case Fp8Scaling::per_block:
      return batch * heads * ((seqlen + block_rows - 1) / block_rows);
    default:
      return 1;
  }
}

// An e4m3 tensor as stored, steps 1 and 2 done by whoever stored it: its bits and values, and
// the view's descales: one per tensor, or one per (batch, head) (fp8_scaling per_head).
QuantizedTensor stored_tensor(const TensorView& view, const TensorPlacement& placement,
                              int64_t buffer_elements, int64_t batch, int64_t seqlen, int64_t heads,
                              int64_t dim) {
  QuantizedTensor out;
  out.heads = heads;
  out.seqlen = seqlen;
  if (view.head_descales != nullptr) {
    out.scaling = Fp8Scaling::per_head;
    out.descales.assign(view.head_descales, view.head_descales + batch * heads);
  } else {
    out.descales = {view.descale};
  }
  out.bits.assign(static_cast<size_t>(buffer_elements), 0);
  out.values.assign(static_cast<size_t>(buffer_elements), 0.0f);
  const auto* stored = static_cast<const uint8_t*>(view.data);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < seqlen; ++s) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t first = placement.row_start(b, s, h);
        for (int64_t d = 0; d < dim; ++d) {
          const size_t at = static_cast<size_t>(first + d);
          out.bits[at] = stored[at];
          out.values[at] = e4m3_bits_to_float(stored[at]);
        }
      }
    }
  }
  return out;
}

// Steps 1 and 2 for one tensor of (batch, seqlen, heads, dim) at `placement` of `view`.
QuantizedTensor quantize_tensor(const Fp8Recipe& recipe, const TensorView& view,
                                const TensorPlacement& placement, int64_t buffer_elements,
                                int64_t batch, int64_t seqlen, int64_t heads, int64_t dim,
                                bool rotate, bool round) {
  QuantizedTensor out;
  out.scaling = recipe.scaling;
  out.block_rows = recipe.block_rows;
  out.heads = heads;
  out.seqlen = seqlen;
  std::vector<float> values(static_cast<size_t>(buffer_elements), 0.0f);
  std::vector<float> amax(
      static_cast<size_t>(group_count(recipe.scaling, batch, seqlen, heads, recipe.block_rows)),
      0.0f);
  std::vector<double> row(static_cast<size_t>(dim));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < seqlen; ++s) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t d = 0; d < dim; ++d) row[static_cast<size_t>(d)] = view.at(b, s, h, d);
        if (rotate) incoherent_rotation(row, recipe.sign_seed);
        float& group_amax = amax[static_cast<size_t>(out.group_of(b, s, h))];
        const int64_t first = placement.row_start(b, s, h);
        for (int64_t d = 0; d < dim; ++d) {
          const float value = static_cast<float>(row[static_cast<size_t>(d)]);
          values[static_cast<size_t>(first + d)] = value;
          group_amax = std::max(group_amax, std::fabs(value));
        }
      }
    }
  }
  out.descales.resize(amax.size());
  for (size_t g = 0; g < amax.size(); ++g) out.descales[g] = fp8_descale(amax[g]);
  out.bits.assign(static_cast<size_t>(buffer_elements), 0);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < seqlen; ++s) {
      for (int64_t h = 0; h < heads; ++h) {
        const float inverse = 1.0f / out.descales[static_cast<size_t>(out.group_of(b, s, h))];
        const int64_t first = placement.row_start(b, s, h);
        for (int64_t d = 0; d < dim; ++d) {
          const size_t at = static_cast<size_t>(first + d);
          out.bits[at] = float_to_e4m3_bits(values[at] * inverse);
          values[at] = round ? e4m3_bits_to_float(out.bits[at]) : values[at] * inverse;
        }
      }
    }
  }
  out.values = std::move(values);
  return out;
}

}  // namespace

std::vector<Fp8Recipe> opaque_fp8_recipes(const Fp8Recipe& base) {
  std::vector<Fp8Recipe> recipes;
  for (const int64_t tile : {64, 128}) {
    for (const bool reverse : {false, true}) {
      Fp8Recipe recipe = base;
      recipe.key_tile = tile;
      recipe.reverse_keys = reverse;
      recipe.p_max_offset = 8;  // cuDNN's scale_s = 256
      recipe.tensor_core_sum_bits = kFp8TensorCoreBits;  // its sums on the FP8 tensor cores
      recipes.push_back(recipe);
    }
  }
  return recipes;
}

std::string describe(const Fp8Recipe& recipe) {
  std::string text = recipe.scaling == Fp8Scaling::per_block
                         ? "per-block " + std::to_string(recipe.block_rows) + "-token scales"
                         : std::string(fp8_scaling_name(recipe.scaling)) + " scales";
  if (recipe.incoherent) text += ", incoherent (Hadamard)";
  text += ", " + std::to_string(recipe.key_tile) + "-key tiles";
  if (recipe.reverse_keys) text += " last first";
  text += ", P offset 2^" + std::to_string(recipe.p_max_offset);
  if (recipe.tensor_core_sum_bits > 0)
    text += ", tensor-core sums of " + std::to_string(recipe.tensor_core_sum_bits) + " bits";
  if (recipe.e4m3_output) text += ", e4m3 output at V's scale";
  const std::pair<bool, const char*> roundings[] = {
      {recipe.round_qk, "Q, K"}, {recipe.round_v, "V"}, {recipe.round_p, "P"}};
  std::string unrounded;
  for (const auto& [rounded, what] : roundings) {
    if (!rounded) unrounded += (unrounded.empty() ? "" : ", ") + std::string(what);
  }
  return unrounded.empty() ? text : text + " (" + unrounded + " not rounded to e4m3)";
}

std::string fp8_recipe_limits(const Fp8Recipe& recipe, const Problem& problem) {
  if (problem.input_dtype == DType::e4m3) {
    if (recipe.scaling != Fp8Scaling::per_tensor || recipe.incoherent || !recipe.round_qk ||
        !recipe.round_v) {
      return "inputs stored in e4m3 carry their descales (per tensor or per head), are rounded "
             "already and cannot be rotated: the recipe must be per-tensor, not incoherent, and "
             "round Q, K and V";
    }
    return "";
  }
  if (problem.input_dtype != DType::f16 && problem.input_dtype != DType::bf16) {
    return "the FP8 recipe quantizes fp16 or bf16 inputs itself, or takes e4m3 inputs as stored "
           "(given " +
           std::string(dtype_name(problem.input_dtype)) + ")";
  }
  if (recipe.incoherent && (!power_of_two(problem.head_dim_qk) || problem.head_dim_qk > 256)) {
    return "incoherent processing needs a power-of-two head_dim_qk up to 256 (given " +
           std::to_string(problem.head_dim_qk) + ")";
  }
  if (recipe.scaling == Fp8Scaling::none) return "the FP8 recipe needs a scaling (not none)";
  if (recipe.tensor_core_sum_bits > 0 && recipe.scaling == Fp8Scaling::per_block &&
      recipe.block_rows != recipe.key_tile) {
    return "per-block scales summed on the tensor cores need one V scale a key tile (block_rows " +
           std::to_string(recipe.block_rows) + ", key_tile " + std::to_string(recipe.key_tile) +
           ")";
  }
  if (recipe.e4m3_output && recipe.scaling != Fp8Scaling::per_tensor) {
    return "an e4m3 output at V's scale needs per-tensor scales (V's one descale)";
  }
  return "";
}

int64_t QuantizedTensor::group_of(int64_t b, int64_t s, int64_t h) const {
  switch (scaling) {
    case Fp8Scaling::per_head:
      return head_descale_index(b, h, heads);
    case Fp8Scaling::per_block: {
      const int64_t blocks = (seqlen + block_rows - 1) / block_rows;
      return (b * heads + h) * blocks + s / block_rows;
    }
    default:
      return 0;
  }
}

QuantizedInputs quantize_inputs(const Fp8Recipe& recipe, const Problem& problem,
                                const AttentionInputs& inputs) {
  QuantizedInputs out;
  out.layout = describe_layout(problem);
  const ProblemLayout& l = out.layout;
  // Packed QKV shares one buffer: each tensor's bits are indexed as that buffer.
  const int64_t k_elements = l.k_buffer_elements > 0 ? l.k_buffer_elements : l.q_buffer_elements;
  const int64_t v_elements = l.v_buffer_elements > 0 ? l.v_buffer_elements : l.q_buffer_elements;
  if (problem.input_dtype == DType::e4m3) {
    out.q = stored_tensor(inputs.q, l.q, l.q_buffer_elements, problem.batch, problem.seqlen_q,
                          problem.heads_q, problem.head_dim_qk);
    out.k = stored_tensor(inputs.k, l.k, k_elements, problem.batch, problem.seqlen_k,
                          problem.heads_kv, problem.head_dim_qk);
    out.v = stored_tensor(inputs.v, l.v, v_elements, problem.batch, problem.seqlen_k,
                          problem.heads_kv, problem.head_dim_v);
    return out;
  }
  out.q =
      quantize_tensor(recipe, inputs.q, l.q, l.q_buffer_elements, problem.batch, problem.seqlen_q,
                      problem.heads_q, problem.head_dim_qk, recipe.incoherent, recipe.round_qk);
  out.k =
      quantize_tensor(recipe, inputs.k, l.k, k_elements, problem.batch, problem.seqlen_k,
                      problem.heads_kv, problem.head_dim_qk, recipe.incoherent, recipe.round_qk);
  out.v = quantize_tensor(recipe, inputs.v, l.v, v_elements, problem.batch, problem.seqlen_k,
                          problem.heads_kv, problem.head_dim_v, false, recipe.round_v);
  return out;
}

float fp8_score_sum(const float* q, const float* k, int64_t dim, int tensor_core_sum_bits) {
  float sum = 0;
  if (tensor_core_sum_bits == 0) {
    for (int64_t d = 0; d < dim; ++d) sum += q[d] * k[d];
    return sum;
  }
  // One m64nNk32 wgmma a step, its C the steps before (a kernel's first step starts from 0).
  for (int64_t first = 0; first < dim; first += kFp8MmaDepth) {
    const auto count = static_cast<unsigned>(std::min<int64_t>(kFp8MmaDepth, dim - first));
    sum = tensor_core_sum(sum, q + first, k + first, count, 1, tensor_core_sum_bits);
  }
  return sum;
}

float fp8_p_exponent(float score, float row_max, int p_max_offset) {
  return static_cast<float>((score - row_max) * kLog2e) + static_cast<float>(p_max_offset);
}

float fp8_rescale(float old_max, float new_max) {
  return std::exp2(static_cast<float>((old_max - new_max) * kLog2e));
}

float fp8_p(float x) { return round_to(DType::e4m3, std::exp2(x)); }

float fp8_lse(float row_max, float row_sum, int p_max_offset) {
  return static_cast<float>(row_max + std::log(static_cast<double>(row_sum)) - p_max_offset * kLn2);
}

bool fp8_output_through_e4m3(const Fp8Recipe& recipe, DType output_dtype) {
  return recipe.e4m3_output && !is_fp8(output_dtype);
}

float fp8_e4m3_output(float value, float output_scale) {
  return round_to(DType::e4m3, value * output_scale) / output_scale;
}

namespace {

// Step 4's O += P V for the visible keys [begin, begin + p.size()) of the tile that starts at key
// `tile_begin`, p the keys' P. In fp32: P times V's descaled values, key by key. On the FP8
// tensor cores (tensor_core_sum_bits): 32 keys a step from the tile's start (a masked key's P is
// 0, a product the sum skips), P times V's e4m3 values, O the accumulator every step adds to;
// per-block scales promote each tile instead (its sums from zero, added to O in fp32 times the
// tile's V descale), as the kernels do.
void add_tile_output(const Fp8Recipe& recipe, const QuantizedInputs& inputs, int64_t b,
                     int64_t kv_head, int64_t tile_begin, int64_t begin,
                     const std::vector<float>& p, std::vector<float>& out) {
  const int64_t dv = static_cast<int64_t>(out.size());
  const int64_t end = begin + static_cast<int64_t>(p.size());
  const auto v_row = [&](int64_t key) {
    return inputs.v.values.data() + inputs.layout.v.row_start(b, key, kv_head);
  };
  const auto v_descale = [&](int64_t key) {
    return inputs.v.descales[static_cast<size_t>(inputs.v.group_of(b, key, kv_head))];
  };
  if (recipe.tensor_core_sum_bits == 0) {
    for (int64_t j = begin; j < end; ++j) {
      const float weight = p[static_cast<size_t>(j - begin)];
      if (weight == 0.0f) continue;
      const float* v = v_row(j);
      const float descale = v_descale(j);
      for (int64_t d = 0; d < dv; ++d) out[static_cast<size_t>(d)] += weight * (v[d] * descale);
    }
    return;
  }
  const bool promoted = recipe.scaling == Fp8Scaling::per_block;
  std::vector<float> tile_out(promoted ? static_cast<size_t>(dv) : 0, 0.0f);
  std::vector<float>& sums = promoted ? tile_out : out;
  std::vector<float> step_p, step_v;
  for (int64_t first = tile_begin; first < end; first += kFp8MmaDepth) {
    step_p.clear();
    step_v.clear();
    for (int64_t j = std::max(first, begin); j < std::min(end, first + kFp8MmaDepth); ++j) {
      step_p.push_back(p[static_cast<size_t>(j - begin)]);
      step_v.insert(step_v.end(), v_row(j), v_row(j) + dv);
    }
    if (step_p.empty()) continue;
    const auto count = static_cast<unsigned>(step_p.size());
    const TensorCoreOperand step_p_operand = tensor_core_operand(step_p.data(), count);
    for (int64_t d = 0; d < dv; ++d) {
      float& sum = sums[static_cast<size_t>(d)];
      sum = tensor_core_sum(
          sum, step_p_operand,
          tensor_core_operand(step_v.data() + d, count, static_cast<unsigned>(dv)),
          recipe.tensor_core_sum_bits);
    }
  }
  if (promoted) {
    const float descale = v_descale(begin);  // one V descale a tile (fp8_recipe_limits)
    for (int64_t d = 0; d < dv; ++d)
      out[static_cast<size_t>(d)] += descale * tile_out[static_cast<size_t>(d)];
  }
}

}  // namespace

void fp8_recipe_row(const Fp8Recipe& recipe, const Problem& problem, const QuantizedInputs& inputs,
                    int64_t b, int64_t h, int64_t query, float* out_row, float* lse,
                    bool round_output, float out_scale) {
  const int64_t dv = problem.head_dim_v, dqk = problem.head_dim_qk;
  std::fill(out_row, out_row + dv, 0.0f);
  const KeyRange keys = problem.visible(b, query);
  if (keys.size() == 0) {
    if (lse != nullptr) *lse = -std::numeric_limits<float>::infinity();
    return;
  }
  const int64_t kv_head = h / (problem.heads_q / problem.heads_kv);
  const ProblemLayout& layout = inputs.layout;
  const float scale = static_cast<float>(problem.softmax_scale());
  const float* q = inputs.q.values.data() + layout.q.row_start(b, query, h);
  const float q_descale = inputs.q.descales[static_cast<size_t>(inputs.q.group_of(b, query, h))];
  // Tiles at multiples of key_tile, as a kernel walks them, clipped to the visible keys.
  const int64_t first_tile = keys.begin / recipe.key_tile;
  const int64_t last_tile = (keys.end - 1) / recipe.key_tile;
  std::vector<float> out(static_cast<size_t>(dv), 0.0f), scores;
  float row_max = -std::numeric_limits<float>::infinity(), row_sum = 0;
  for (int64_t step = 0; step <= last_tile - first_tile; ++step) {
    const int64_t tile = recipe.reverse_keys ? last_tile - step : first_tile + step;
    const int64_t begin = std::max(keys.begin, tile * recipe.key_tile);
    const int64_t end = std::min(keys.end, (tile + 1) * recipe.key_tile);
    scores.assign(static_cast<size_t>(end - begin), 0.0f);
    float tile_max = -std::numeric_limits<float>::infinity();
    for (int64_t j = begin; j < end; ++j) {
      const float* k = inputs.k.values.data() + layout.k.row_start(b, j, kv_head);
      const float dot = fp8_score_sum(q, k, dqk, recipe.tensor_core_sum_bits);
      const float k_descale =
          inputs.k.descales[static_cast<size_t>(inputs.k.group_of(b, j, kv_head))];
      const float s = dot * q_descale * k_descale * scale;
      scores[static_cast<size_t>(j - begin)] = s;
      tile_max = std::max(tile_max, s);
    }
    if (tile_max > row_max) {
      const float correction = fp8_rescale(row_max, tile_max);  // 0 for the first tile
      for (float& o : out) o *= correction;
      row_sum *= correction;
      row_max = tile_max;
    }
    for (int64_t j = begin; j < end; ++j) {
      float& s = scores[static_cast<size_t>(j - begin)];
      const float x = fp8_p_exponent(s, row_max, recipe.p_max_offset);
      row_sum += std::exp2(x);
      s = recipe.round_p ? fp8_p(x) : std::exp2(x);  // the score's P from here on
    }
    add_tile_output(recipe, inputs, b, kv_head, tile * recipe.key_tile, begin, scores, out);
  }
  // O's sums on the tensor cores hold V's e4m3 values: its descale (the row's, per tensor or per
  // head) comes last. Per-block scales took theirs tile by tile.
  const float out_descale =
      recipe.tensor_core_sum_bits > 0 && recipe.scaling != Fp8Scaling::per_block
          ? inputs.v.descales[static_cast<size_t>(inputs.v.group_of(b, keys.begin, kv_head))]
          : 1.0f;
  const bool through_e4m3 = fp8_output_through_e4m3(recipe, problem.output_dtype);
  const float output_scale = fp8_output_scale(inputs.v.descales.front());
  for (int64_t d = 0; d < dv; ++d) {
    float value = out[static_cast<size_t>(d)] * out_descale / row_sum;
    if (through_e4m3) value = fp8_e4m3_output(value, output_scale);
    out_row[d] = !round_output ? value
                 : is_fp8(problem.output_dtype)
                     ? round_to(problem.output_dtype, value * out_scale) / out_scale
                     : round_to(problem.output_dtype, value);
  }
  if (lse != nullptr) *lse = fp8_lse(row_max, row_sum, recipe.p_max_offset);
}

}  // namespace attnbench
