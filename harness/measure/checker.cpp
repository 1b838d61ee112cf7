#include "harness/measure/checker.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <sstream>

#include "reference/formats.h"
#include "reference/fp8_recipe.h"
#include "reference/metrics.h"
#include "reference/random.h"

namespace attnbench {
namespace {

// Row counts where kernels switch tiles (16-row MMA fragments up to 256-row blocks): an
// off-by-one at a tile edge shows at these rows.
constexpr int64_t kTileBoundaries[] = {15, 16, 31, 32, 63, 64, 127, 128, 255, 256};
constexpr int kRandomRowsPerHead = 3;
// LSE is computed in fp32 by every kernel: allow a few fp32 ulps of its magnitude beyond twice
// the low-precision reference's own error.
constexpr double kLseRelativeSlack = 8 * std::numeric_limits<float>::epsilon();
constexpr double kFp32Epsilon = std::numeric_limits<float>::epsilon();

std::string format_double(double value) {
  std::ostringstream out;
  out.precision(3);
  out << value;
  return out.str();
}

double row_norm(const TensorView& t, int64_t dim, int64_t b, int64_t s, int64_t h) {
  double sum = 0;
  for (int64_t d = 0; d < dim; ++d) {
    const double x = t.at(b, s, h, d);
    sum += x * x;
  }
  return std::sqrt(sum);
}

// What bounds a checked row's scores and values: per (batch, kv head) the largest |k| (L2 norm of
// a key row) and the largest |v| element; per checked row the largest |s| by Cauchy-Schwarz,
// scale * |q_row| * max|k_row|. One pass over K and V.
struct ScoreBounds {
  std::vector<double> max_score;  // per checked row
  std::vector<double> max_value;  // per checked row: the largest |v| element it reads
};
ScoreBounds score_bounds(const Problem& p, const AttentionInputs& view,
                         const std::vector<RowIndex>& rows) {
  const int64_t groups = p.batch * p.heads_kv;
  std::vector<double> max_key_norm(static_cast<size_t>(groups), 0.0);
  std::vector<double> max_value(static_cast<size_t>(groups), 0.0);
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t b = g / p.heads_kv, hk = g % p.heads_kv;
    double& key_norm = max_key_norm[static_cast<size_t>(g)];
    double& value = max_value[static_cast<size_t>(g)];
    for (int64_t s = 0; s < view.k.placement.rows(b, p.seqlen_k); ++s) {
      key_norm = std::max(key_norm, row_norm(view.k, p.head_dim_qk, b, s, hk));
      for (int64_t d = 0; d < p.head_dim_v; ++d)
        value = std::max(value, std::fabs(static_cast<double>(view.v.at(b, s, hk, d))));
    }
  }
  ScoreBounds bounds;
  const int64_t group_size = p.heads_q / p.heads_kv;
  for (const RowIndex& row : rows) {
    const size_t g = static_cast<size_t>(row.b * p.heads_kv + row.h / group_size);
    bounds.max_score.push_back(p.softmax_scale() *
                               row_norm(view.q, p.head_dim_qk, row.b, row.query, row.h) *
                               max_key_norm[g]);
    bounds.max_value.push_back(max_value[g]);
  }
  return bounds;
}

// FlashAttention's atol is the output dtype's rounding granularity, which dominates every error
// of a 16-bit output (then kernel and lowp errors agree to the bit). An fp32 output has no such
// floor: kernel and lowp errors are both fp32 rounding noise, and the maximum of one noisy
// computation is not always within 2x the maximum of another (measured on the ctest suite: up to
// 3x for correct kernels). The noise has two sources, so its scale, in units of fp32 epsilon, is
//  - the P @ V accumulation over the keys: sqrt(keys) * max|out|;
//  - the rounding of each score s, which exp() turns into a relative error of P of eps * |s|:
//    max|s| * max|v|. Large-logit inputs make |s| reach the hundreds, so this term dominates
//    there (a correct fp32 kernel measured 1.6e-4 against a 1.3e-4 bound without it).
// Both terms stay orders of magnitude below any real defect or a 16-bit accumulation.
double fp32_noise_scale(const Problem& p, const ReferenceRows& reference,
                        const ScoreBounds& bounds) {
  double max_ref = 0;
  for (double value : reference.ref) max_ref = std::max(max_ref, std::fabs(value));
  double score_term = 0;
  for (size_t r = 0; r < reference.rows.size(); ++r)
    score_term = std::max(score_term, bounds.max_score[r] * bounds.max_value[r]);
  const double keys = static_cast<double>(std::max<int64_t>(1, p.seqlen_k));
  return std::sqrt(keys) * max_ref + score_term;
}

// FP8 tensor cores do not accumulate in full fp32: Hopper's keep about 14 bits of a sum
// (DeepSeek-V3's report, section 3.3.2, "around 14 bits"). A kernel's recipe that runs on them
// says so (Fp8Recipe::tensor_core_sum_bits: the 13-bit model of reference/tensor_core_sum.h, which
// the emulator takes too), so the lowp rows carry that model's score errors. This term covers an
// accumulator the model does not match: a GPU's, until PtxConformance fits the model to one; an
// opaque kernel's; a host kernel summing in fp32. The first H200 run (2026-12-04) measured
// cudnn.sdpa_fp8's LSE 1e-4 to 5e-4 off at d 64/128 on normal inputs, about 2^-14 of
// sum|q_d k_d|. The bound takes twice 2^-13 of scale * |q| * max|k| (Cauchy-Schwarz,
// >= sum|q_d k_d|): its score error, which moves the LSE by at most as much and the output by at
// most 2 * max|v| times as much. The LSE allows twice that, the factor the bound gives every
// modeled error (2 * the lowp error): the term is an estimate, not a worst case. Before the
// recipes modeled the sums, this term alone stood for the emulator's 13 bits and fell short twice
// on outlier inputs, where one product sets the exponent the row's other 127 lose their bits
// against (hopper-fp8, seeds 14593423715333062444 and 4814989704792686942: LSE 0.0159 against
// 0.0148 allowed, 0.0417 against 0.0374).
constexpr double kFp8ScoreRelativeError = 0x1p-12;

// Where a checked row lies, as a failure names it: "b=1,h=3,row=17"; in a varlen batch the
// sequence and its lengths, "sequence 1 (37 queries, 120 keys),h=3,row=17".
std::string row_name(const Problem& p, const RowIndex& row) {
  const std::string at = ",h=" + std::to_string(row.h) + ",row=" + std::to_string(row.query);
  if (!p.is_varlen()) return "b=" + std::to_string(row.b) + at;
  return "sequence " + std::to_string(row.b) + " (" + std::to_string(p.query_length(row.b)) +
         " queries, " + std::to_string(p.key_length(row.b)) + " keys)" + at;
}

}  // namespace

std::vector<RowIndex> select_rows(const Problem& problem, uint64_t seed, bool& all_rows) {
  const double work = static_cast<double>(problem.batch) * problem.heads_q * problem.seqlen_q *
                      problem.seqlen_k * (problem.head_dim_qk + problem.head_dim_v);
  std::vector<RowIndex> rows;
  all_rows = work <= kFullCheckWork;
  Xoshiro256 rng(seed);
  for (int64_t b = 0; b < problem.batch; ++b) {
    const int64_t queries = problem.query_length(b);  // a varlen sequence may have none
    for (int64_t h = 0; h < problem.heads_q && queries > 0; ++h) {
      if (all_rows) {
        for (int64_t i = 0; i < queries; ++i) rows.push_back({b, h, i});
        continue;
      }
      std::set<int64_t> chosen = {0, queries - 1};
      for (int64_t boundary : kTileBoundaries) {
        if (boundary < queries) chosen.insert(boundary);
      }
      std::uniform_int_distribution<int64_t> pick(0, queries - 1);
      for (int r = 0; r < kRandomRowsPerHead; ++r) chosen.insert(pick(rng));
      for (int64_t i : chosen) rows.push_back({b, h, i});
    }
  }
  return rows;
}

namespace {

// The low-precision rows: the plain lowp_row, or the FP8 recipe of the kernel being judged on
// `quantized`, the inputs after the recipe's steps 1 and 2.
void compute_lowp_rows(const ProblemInputs& inputs, float out_scale, const Fp8Recipe* recipe,
                       const QuantizedInputs* quantized, ReferenceRows& reference) {
  const Problem& p = inputs.problem;
  const int64_t n = static_cast<int64_t>(reference.rows.size());
  const int64_t dv = p.head_dim_v;
  reference.lowp.assign(static_cast<size_t>(n * dv), 0.0f);
  reference.lowp_lse.assign(static_cast<size_t>(n), 0.0f);
  const AttentionInputs view = inputs.view();
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t r = 0; r < n; ++r) {
    const RowIndex& row = reference.rows[static_cast<size_t>(r)];
    float* out = &reference.lowp[static_cast<size_t>(r * dv)];
    float* lse = &reference.lowp_lse[static_cast<size_t>(r)];
    if (recipe != nullptr) {
      fp8_recipe_row(*recipe, p, *quantized, row.b, row.h, row.query, out, lse, true, out_scale);
    } else {
      lowp_row(p, view, out_scale, row.b, row.h, row.query, out, lse);
    }
  }
}

// The bound's parts from the rows: the lowp error, atol, the LSE error and the noise terms.
void compute_bound(const ProblemInputs& inputs, ReferenceRows& reference) {
  const Problem& p = inputs.problem;
  const int64_t n = static_cast<int64_t>(reference.rows.size());
  const int64_t dv = p.head_dim_v;
  const AttentionInputs view = inputs.view();
  double lowp_error = 0;
  double max_rounding = 0;
  double lse_error = 0;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t d = 0; d < dv; ++d) {
      const double ref = reference.ref[static_cast<size_t>(r * dv + d)];
      const double lowp = reference.lowp[static_cast<size_t>(r * dv + d)];
      lowp_error = std::max(lowp_error, std::fabs(lowp - ref));
      max_rounding = std::max(max_rounding, rounding_error_term(p.output_dtype, ref));
    }
    const double ref_lse = reference.ref_lse[static_cast<size_t>(r)];
    if (std::isfinite(ref_lse)) {
      lse_error =
          std::max(lse_error, std::fabs(reference.lowp_lse[static_cast<size_t>(r)] - ref_lse));
    }
  }
  reference.lowp_error = lowp_error;
  reference.atol = 2 * max_rounding;
  reference.lowp_lse_error = lse_error;
  const bool fp8_inputs = is_fp8(p.input_dtype);
  if (p.output_dtype != DType::f32 && !fp8_inputs) return;
  const ScoreBounds bounds = score_bounds(p, view, reference.rows);
  if (p.output_dtype == DType::f32) {
    reference.atol += 2 * kFp32Epsilon * fp32_noise_scale(p, reference, bounds);
  }
  if (fp8_inputs) {
    double output_term = 0;
    for (size_t r = 0; r < reference.rows.size(); ++r) {
      const double score_error = kFp8ScoreRelativeError * bounds.max_score[r];
      reference.fp8_score_error = std::max(reference.fp8_score_error, score_error);
      output_term = std::max(output_term, 2 * score_error * bounds.max_value[r]);
    }
    reference.atol += output_term;
  }
}

}  // namespace

ReferenceRows compute_reference(const ProblemInputs& inputs, uint64_t seed, float out_scale) {
  const Problem& p = inputs.problem;
  ReferenceRows reference;
  reference.rows = select_rows(p, seed, reference.all_rows);
  const int64_t n = static_cast<int64_t>(reference.rows.size());
  const int64_t dv = p.head_dim_v;
  reference.ref.resize(static_cast<size_t>(n * dv));
  reference.ref_lse.resize(static_cast<size_t>(n));
  const AttentionInputs view = inputs.view();
#pragma omp parallel for schedule(dynamic, 16)
  for (int64_t r = 0; r < n; ++r) {
    const RowIndex& row = reference.rows[static_cast<size_t>(r)];
    reference_row(p, view, row.b, row.h, row.query, &reference.ref[static_cast<size_t>(r * dv)],
                  &reference.ref_lse[static_cast<size_t>(r)]);
  }
  compute_lowp_rows(inputs, out_scale, nullptr, nullptr, reference);
  compute_bound(inputs, reference);
  return reference;
}

namespace {

// with_recipe on inputs quantized already (by `recipe`'s steps 1 and 2).
ReferenceRows with_recipe_on(const ReferenceRows& reference, const ProblemInputs& inputs,
                             const Fp8Recipe& recipe, const QuantizedInputs& quantized) {
  ReferenceRows judged;
  judged.rows = reference.rows;
  judged.all_rows = reference.all_rows;
  judged.ref = reference.ref;
  judged.ref_lse = reference.ref_lse;
  compute_lowp_rows(inputs, 1.0f, &recipe, &quantized, judged);
  compute_bound(inputs, judged);
  return judged;
}

}  // namespace

ReferenceRows with_recipe(const ReferenceRows& reference, const ProblemInputs& inputs,
                          const Fp8Recipe& recipe) {
  const QuantizedInputs quantized = quantize_inputs(recipe, inputs.problem, inputs.view());
  return with_recipe_on(reference, inputs, recipe, quantized);
}

LowpModel lowp_model_for(const Kernel& kernel, const Problem& problem) {
  if (kernel.fp8_recipe) return LowpModel::own_recipe;
  if (kernel.fp8_envelope_base) return LowpModel::envelope;
  return problem.input_dtype == DType::e4m3 ? LowpModel::envelope : LowpModel::plain;
}

Fp8Recipe envelope_base_for(const Kernel& kernel) {
  return kernel.fp8_envelope_base.value_or(Fp8Recipe{});
}

ReferenceRows with_envelope(const ReferenceRows& reference, const ProblemInputs& inputs,
                            const Fp8Recipe& base) {
  ReferenceRows envelope = reference;
  // The recipes differ in step 4 alone (tiles, key order): one quantization serves them all.
  const QuantizedInputs quantized = quantize_inputs(base, inputs.problem, inputs.view());
  for (const Fp8Recipe& recipe : opaque_fp8_recipes(base)) {
    const ReferenceRows modeled = with_recipe_on(reference, inputs, recipe, quantized);
    envelope.lowp_error = std::max(envelope.lowp_error, modeled.lowp_error);
    envelope.lowp_lse_error = std::max(envelope.lowp_lse_error, modeled.lowp_lse_error);
  }
  return envelope;
}

KernelOutputs make_outputs(const ProblemInputs& inputs, bool with_lse) {
  KernelOutputs outputs;
  outputs.out = GuardedBuffer(static_cast<size_t>(inputs.layout.out_elements) *
                              dtype_size(inputs.problem.output_dtype));
  outputs.has_lse = with_lse;
  if (with_lse)
    outputs.lse = GuardedBuffer(static_cast<size_t>(inputs.layout.lse_elements) * sizeof(float));
  outputs.has_gradients = inputs.problem.has_backward();
  if (outputs.has_gradients) {
    const size_t element = dtype_size(inputs.problem.grad_dtype());
    outputs.dq = GuardedBuffer(static_cast<size_t>(inputs.layout.dq_elements) * element);
    outputs.dk = GuardedBuffer(static_cast<size_t>(inputs.layout.dk_elements) * element);
    outputs.dv = GuardedBuffer(static_cast<size_t>(inputs.layout.dv_elements) * element);
  }
  return outputs;
}

void poison_outputs(const Problem& problem, Pass pass, KernelOutputs& outputs) {
  if (pass != Pass::bwd) {
    outputs.out.poison(problem.output_dtype);
    if (outputs.has_lse) outputs.lse.poison(DType::f32);
  }
  if (pass != Pass::fwd) {
    outputs.dq.poison(problem.grad_dtype());
    outputs.dk.poison(problem.grad_dtype());
    outputs.dv.poison(problem.grad_dtype());
  }
}

AttentionParams host_params(const ProblemInputs& inputs, KernelOutputs& outputs) {
  const GradientPointers gradients =
      outputs.has_gradients
          ? GradientPointers{outputs.dq.data(), outputs.dk.data(), outputs.dv.data()}
          : GradientPointers{};
  return make_params(inputs, host_pointers(inputs), outputs.out.data(),
                     outputs.has_lse ? static_cast<float*>(outputs.lse.data()) : nullptr, 1.0f,
                     gradients);
}

CheckSummary compare_output(const ProblemInputs& inputs, const ReferenceRows& reference,
                            const KernelOutputs& outputs, std::string& failure) {
  const Problem& p = inputs.problem;
  const TensorPlacement& out_place = inputs.layout.out;
  const int64_t dv = p.head_dim_v;
  CheckSummary summary;
  summary.checked = true;
  summary.rows_checked = static_cast<int64_t>(reference.rows.size());
  summary.rows_total = 0;
  for (int64_t b = 0; b < p.batch; ++b) summary.rows_total += p.heads_q * p.query_length(b);
  summary.lowp_error = reference.lowp_error;
  summary.atol = reference.atol;
  summary.bound = 2 * reference.lowp_error + reference.atol;
  failure.clear();

  // Every element: poison left behind (unwritten) or computed NaN/Inf.
  for (int64_t e = 0; e < inputs.layout.out_elements; ++e) {
    const float value = load_element(p.output_dtype, outputs.out.data(), e);
    if (std::isnan(value))
      ++summary.nan_count;
    else if (std::isinf(value))
      ++summary.inf_count;
  }

  ErrorAccumulator errors;
  double worst = -1;
  RowIndex worst_row;
  int64_t worst_d = 0;
  for (size_t r = 0; r < reference.rows.size(); ++r) {
    const RowIndex& row = reference.rows[r];
    const int64_t base = out_place.row_start(row.b, row.query, row.h);
    for (int64_t d = 0; d < dv; ++d) {
      const double value = load_element(p.output_dtype, outputs.out.data(), base + d);
      const double ref = reference.ref[r * static_cast<size_t>(dv) + static_cast<size_t>(d)];
      errors.add(value, ref);
      const double error =
          std::isfinite(value) ? std::fabs(value - ref) : std::numeric_limits<double>::infinity();
      if (error > worst) {
        worst = error;
        worst_row = row;
        worst_d = d;
      }
    }
  }
  summary.max_abs_error = errors.max_abs();
  summary.rel_l2 = errors.rel_l2();
  summary.rmse = errors.rmse();

  if (outputs.has_lse) {
    double lse_error = 0;
    double lse_allowed = 0;
    bool lse_ok = true;
    const float* lse = static_cast<const float*>(outputs.lse.data());
    for (size_t r = 0; r < reference.rows.size(); ++r) {
      const RowIndex& row = reference.rows[r];
      const double got = lse[(row.b * p.heads_q + row.h) * p.seqlen_q + row.query];
      const double ref = reference.ref_lse[r];
      if (!std::isfinite(ref)) {
        if (!(std::isinf(got) && got < 0))
          lse_ok = false, lse_error = std::numeric_limits<double>::infinity();
        continue;
      }
      const double error =
          std::isfinite(got) ? std::fabs(got - ref) : std::numeric_limits<double>::infinity();
      const double allowed = 2 * reference.lowp_lse_error + 2 * reference.fp8_score_error +
                             kLseRelativeSlack * std::max(1.0, std::fabs(ref));
      lse_error = std::max(lse_error, error);
      if (error > allowed) lse_ok = false, lse_allowed = allowed;
    }
    summary.lse_max_error = lse_error;
    if (!lse_ok && failure.empty()) {
      failure = "LSE error " + format_double(lse_error) +
                (lse_allowed > 0 ? " > allowed " + format_double(lse_allowed)
                                 : std::string(" (expected -inf for a row with no visible key)"));
    }
  }
  summary.canaries_ok = outputs.guards_ok && outputs.out.canaries_intact() &&
                        (!outputs.has_lse || outputs.lse.canaries_intact());

  std::string reason;
  if (!summary.canaries_ok) {
    reason = "canary overwritten: the kernel wrote outside its output buffer";
  } else if (summary.nan_count > 0 || summary.inf_count > 0) {
    reason = std::to_string(summary.nan_count) + " NaN and " + std::to_string(summary.inf_count) +
             " Inf in the output (NaN = unwritten poison or computed NaN)";
  } else if (!(summary.max_abs_error <= summary.bound)) {
    reason = "max|out-ref| " + format_double(summary.max_abs_error) + " > bound " +
             format_double(summary.bound) + " at " + row_name(p, worst_row) +
             ",d=" + std::to_string(worst_d);
  }
  if (!reason.empty()) failure = reason;
  return summary;
}

}  // namespace attnbench
