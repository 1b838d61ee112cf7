#include "harness/measure/gradient_checker.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <sstream>

#include "harness/measure/group_statistics.h"
#include "reference/formats.h"
#include "reference/metrics.h"
#include "reference/random.h"

namespace attnbench {
namespace {

// Key counts where kernels switch tiles; an off-by-one at a key-block edge shows here.
constexpr int64_t kKeyTileBoundaries[] = {15, 16, 31, 32, 63, 64, 127, 128, 255, 256, 511, 512};
constexpr int kRandomKeysPerGroup = 3;
constexpr double kFp32Epsilon = std::numeric_limits<float>::epsilon();

std::string format_double(double value) {
  std::ostringstream out;
  out.precision(4);
  out << value;
  return out.str();
}

// fp64 multiply-adds of one full forward row (scores and P @ V): what a row statistic costs.
double row_work(const Problem& p) {
  return static_cast<double>(p.seqlen_k) * static_cast<double>(p.head_dim_qk + p.head_dim_v);
}
double group_statistics_work(const Problem& p) {
  return static_cast<double>(p.heads_q / p.heads_kv) * static_cast<double>(p.seqlen_q) *
         row_work(p);
}

std::vector<int64_t> chosen_keys(const Problem& p, Xoshiro256& rng) {
  std::set<int64_t> keys = {0, p.seqlen_k - 1};
  for (int64_t boundary : kKeyTileBoundaries) {
    if (boundary < p.seqlen_k) keys.insert(boundary);
  }
  std::uniform_int_distribution<int64_t> pick(0, p.seqlen_k - 1);
  for (int r = 0; r < kRandomKeysPerGroup; ++r) keys.insert(pick(rng));
  return {keys.begin(), keys.end()};
}

// The groups whose key rows are checked on a large problem: the last, the first, a random one,
// as many as kKeyRowCheckWork allows (at least one).
std::vector<std::pair<int64_t, int64_t>> chosen_groups(const Problem& p, Xoshiro256& rng) {
  const int64_t count = p.batch * p.heads_kv;
  std::uniform_int_distribution<int64_t> pick(0, count - 1);
  const int64_t candidates[] = {count - 1, 0, pick(rng)};
  std::vector<std::pair<int64_t, int64_t>> groups;
  double work = 0;
  for (int64_t g : candidates) {
    const std::pair<int64_t, int64_t> group{g / p.heads_kv, g % p.heads_kv};
    if (std::find(groups.begin(), groups.end(), group) != groups.end()) continue;
    if (!groups.empty() && work + group_statistics_work(p) > kKeyRowCheckWork) break;
    work += group_statistics_work(p);
    groups.push_back(group);
  }
  return groups;
}

// The gradient element at row `r` of a checked set, as stored by the kernel.
double stored(DType dtype, const GuardedBuffer& buffer, const TensorPlacement& placement, int64_t b,
              int64_t s, int64_t h, int64_t d) {
  return load_element(dtype, buffer.data(), placement.row_start(b, s, h) + d);
}

// The bound of one gradient from its exact and low-precision values.
// The envelope of a gradient: the largest of each part over its rows.
RowEnvelope widest(const std::vector<RowEnvelope>& rows) {
  RowEnvelope widest;
  for (const RowEnvelope& row : rows) {
    widest.o_rounding = std::max(widest.o_rounding, row.o_rounding);
    widest.magnitude = std::max(widest.magnitude, row.magnitude);
    widest.max_exponent = std::max(widest.max_exponent, row.max_exponent);
  }
  return widest;
}

// The root mean square of dO: the unit FlashAttention's atol probe is in. Its tests draw dO from
// N(0, 1), so their probe of 0.3 is 0.3 of dO's scale; a gradient scales with dO, and a probe
// that did not (dO of 2^-12, UpstreamGradient::small) would make the bound thousands of times
// wider than the errors it must tell apart.
double upstream_rms(const Problem& p, const AttentionInputs& view) {
  double sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (int64_t row = 0; row < p.batch * p.seqlen_q; ++row) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t d = 0; d < p.head_dim_v; ++d) {
        const double x = view.dout.at(row / p.seqlen_q, row % p.seqlen_q, h, d);
        sum += x * x;
      }
    }
  }
  return std::sqrt(sum / static_cast<double>(p.batch * p.seqlen_q * p.heads_q * p.head_dim_v));
}

GradientBound bound_of(const Problem& p, const std::vector<double>& ref,
                       const std::vector<float>& lowp, double terms, double probe,
                       const std::vector<RowEnvelope>& envelopes) {
  GradientBound bound;
  const RowEnvelope envelope = widest(envelopes);
  double max_rounding = 0, max_ref = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    bound.lowp_error = std::max(bound.lowp_error, std::fabs(static_cast<double>(lowp[i]) - ref[i]));
    max_rounding = std::max(max_rounding, rounding_error_term(p.grad_dtype(), ref[i], probe));
    max_ref = std::max(max_ref, std::fabs(ref[i]));
  }
  bound.atol = 2 * max_rounding + envelope.o_rounding;
  // Two fp32 sums of `terms` products in different orders differ by rounding noise of about
  // sqrt(terms) ulps of the result's scale; the maximum of one noisy computation is not always
  // within 2x of the other's (the forward's checker measured up to 3x). P's exponent rounds to
  // fp32 in either computation: large logits (|s| in the hundreds) make that the larger term.
  if (p.grad_dtype() == DType::f32) {
    bound.atol += 2 * kFp32Epsilon *
                  (std::sqrt(terms) * max_ref + envelope.max_exponent * envelope.magnitude);
  }
  return bound;
}

// Compares one gradient over its checked rows; `at` gives (b, s, h) of checked row r.
template <typename RowAt>
void compare_one(const char* name, DType dtype, const GuardedBuffer& buffer,
                 const TensorPlacement& placement, int64_t elements, int64_t dim,
                 const std::vector<double>& ref, const GradientBound& bound, size_t rows, RowAt at,
                 GradientCheck& check, std::string& failure) {
  check.name = name;
  check.bound = bound.bound();
  for (int64_t e = 0; e < elements; ++e) {
    const float value = load_element(dtype, buffer.data(), e);
    if (std::isnan(value))
      ++check.nan_count;
    else if (std::isinf(value))
      ++check.inf_count;
  }
  ErrorAccumulator errors;
  double worst = -1, worst_value = 0, worst_ref = 0;
  int64_t worst_row = 0, worst_d = 0;
  for (size_t r = 0; r < rows; ++r) {
    const auto [b, s, h] = at(r);
    for (int64_t d = 0; d < dim; ++d) {
      const double value = stored(dtype, buffer, placement, b, s, h, d);
      const double expected = ref[r * static_cast<size_t>(dim) + static_cast<size_t>(d)];
      errors.add(value, expected);
      const double error = std::isfinite(value) ? std::fabs(value - expected)
                                                : std::numeric_limits<double>::infinity();
      if (error > worst) {
        worst = error, worst_value = value, worst_ref = expected;
        worst_row = static_cast<int64_t>(r), worst_d = d;
      }
    }
  }
  check.max_abs_error = errors.max_abs();
  check.rel_l2 = errors.rel_l2();
  if (!failure.empty()) return;
  if (check.nan_count > 0 || check.inf_count > 0) {
    failure = std::string(name) + ": " + std::to_string(check.nan_count) + " NaN and " +
              std::to_string(check.inf_count) + " Inf (NaN = unwritten poison or computed NaN)";
  } else if (!(check.max_abs_error <= check.bound)) {
    const auto [b, s, h] = at(static_cast<size_t>(worst_row));
    failure = std::string(name) + ": max|" + name + "-ref| " + format_double(check.max_abs_error) +
              " > bound " + format_double(check.bound) + " at b=" + std::to_string(b) +
              ",h=" + std::to_string(h) + ",row=" + std::to_string(s) +
              ",d=" + std::to_string(worst_d) + " (got " + format_double(worst_value) +
              ", expected " + format_double(worst_ref) + ")";
  }
}

// Row r's statistics from the forward's reference rows (the same rows, select_rows): LSE and O
// exact and at the kernel's precision, D from each.
std::pair<RowStatistics<double>, RowStatistics<float>> statistics_from(const Problem& p,
                                                                       const AttentionInputs& view,
                                                                       const ReferenceRows& forward,
                                                                       int64_t r) {
  const RowIndex& row = forward.rows[static_cast<size_t>(r)];
  const int64_t dv = p.head_dim_v;
  std::vector<float> dout(static_cast<size_t>(dv));
  load_row(view.dout, row.b, row.query, row.h, dv, dout.data());
  const double* out = &forward.ref[static_cast<size_t>(r * dv)];
  const float* lowp_out = &forward.lowp[static_cast<size_t>(r * dv)];
  RowStatistics<double> exact;
  RowStatistics<float> lowp;
  exact.lse = forward.ref_lse[static_cast<size_t>(r)];
  lowp.lse = forward.lowp_lse[static_cast<size_t>(r)];
  for (int64_t d = 0; d < dv; ++d) {
    exact.delta += static_cast<double>(dout[static_cast<size_t>(d)]) * out[d];
    lowp.delta += dout[static_cast<size_t>(d)] * lowp_out[d];
  }
  exact.delta_uncertainty = delta_uncertainty(p.output_dtype, dout.data(), out, dv);
  return {exact, lowp};
}

}  // namespace

GradientRows select_gradient_rows(const Problem& problem, uint64_t seed) {
  GradientRows rows;
  rows.query_rows = select_rows(problem, seed, rows.all_rows);
  Xoshiro256 rng(mix_seed(seed, 0x6b6579));  // "key": its own stream, the query rows unchanged
  if (rows.all_rows) {
    for (int64_t b = 0; b < problem.batch; ++b)
      for (int64_t hk = 0; hk < problem.heads_kv; ++hk) rows.groups.emplace_back(b, hk);
  } else {
    rows.groups = chosen_groups(problem, rng);
  }
  for (const auto& [b, hk] : rows.groups) {
    if (rows.all_rows) {
      for (int64_t j = 0; j < problem.seqlen_k; ++j) rows.key_rows.push_back({b, hk, j});
    } else {
      for (int64_t j : chosen_keys(problem, rng)) rows.key_rows.push_back({b, hk, j});
    }
  }
  return rows;
}

GradientReferenceWork gradient_reference_work(const Problem& problem, uint64_t seed) {
  const GradientRows rows = select_gradient_rows(problem, seed);
  const double group = static_cast<double>(problem.heads_q / problem.heads_kv);
  const double per_key_row = group * static_cast<double>(problem.seqlen_q) *
                             static_cast<double>(2 * problem.head_dim_qk + 2 * problem.head_dim_v);
  // dQ rows on BLAS blocks (head_dq_rows): scores, dP, dQ and the two envelope products per key
  // (their statistics come from the forward's reference).
  const double dq = static_cast<double>(rows.query_rows.size()) *
                    static_cast<double>(problem.seqlen_k) *
                    static_cast<double>(4 * problem.head_dim_qk + problem.head_dim_v);
  GradientReferenceWork work;
  work.row_wise = static_cast<double>(rows.key_rows.size()) * per_key_row;
  work.blocked = dq + static_cast<double>(rows.groups.size()) * group_statistics_work(problem);
  return work;
}

GradientReference compute_gradient_reference(const ProblemInputs& inputs, uint64_t seed,
                                             const ReferenceRows& forward) {
  const Problem& p = inputs.problem;
  const AttentionInputs view = inputs.view();
  const GradientRows rows = select_gradient_rows(p, seed);
  GradientReference reference;
  reference.query_rows = rows.query_rows;
  reference.key_rows = rows.key_rows;
  reference.all_rows = rows.all_rows;
  const int64_t dqk = p.head_dim_qk, dv = p.head_dim_v;
  const int64_t n_query = static_cast<int64_t>(rows.query_rows.size());
  const int64_t n_key = static_cast<int64_t>(rows.key_rows.size());
  reference.dq.resize(static_cast<size_t>(n_query * dqk));
  reference.lowp_dq.resize(reference.dq.size());
  reference.dk.resize(static_cast<size_t>(n_key * dqk));
  reference.lowp_dk.resize(reference.dk.size());
  reference.dv.resize(static_cast<size_t>(n_key * dv));
  reference.lowp_dv.resize(reference.dv.size());

  std::vector<RowEnvelope> dq_envelopes(static_cast<size_t>(n_query));
  std::vector<RowEnvelope> dk_envelopes(static_cast<size_t>(n_key)),
      dv_envelopes(dk_envelopes.size());
  // The dQ rows are the forward's checked rows: their statistics come from its reference rows
  // (exact O and LSE, and the low-precision ones), computed once for every pass of the shape;
  // the rows themselves on BLAS blocks, one (batch, head) at a time.
  const bool forward_rows =
      forward.rows.size() == rows.query_rows.size() && forward.lowp.size() == forward.ref.size();
  std::vector<std::pair<size_t, size_t>> heads;  // [first, end) of each (b, h)'s rows, in order
  for (size_t r = 0; r < rows.query_rows.size(); ++r) {
    const RowIndex& row = rows.query_rows[r];
    const RowIndex* first = heads.empty() ? nullptr : &rows.query_rows[heads.back().first];
    if (first == nullptr || first->b != row.b || first->h != row.h) heads.push_back({r, r});
    heads.back().second = r + 1;
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t i = 0; i < heads.size(); ++i) {
    const auto [begin, end] = heads[i];
    std::vector<int64_t> queries;
    std::vector<RowStatistics<double>> exact_stats;
    std::vector<RowStatistics<float>> lowp_stats;
    for (size_t r = begin; r < end; ++r) {
      const RowIndex& row = rows.query_rows[r];
      queries.push_back(row.query);
      const auto [exact, lowp] =
          forward_rows ? statistics_from(p, view, forward, static_cast<int64_t>(r))
                       : std::pair{reference_row_statistics(p, view, row.b, row.h, row.query),
                                   lowp_row_statistics(p, view, row.b, row.h, row.query)};
      exact_stats.push_back(exact);
      lowp_stats.push_back(lowp);
    }
    const RowIndex& row = rows.query_rows[begin];
    head_dq_rows(p, view, row.b, row.h, queries, exact_stats, lowp_stats,
                 &reference.dq[begin * static_cast<size_t>(dqk)],
                 &reference.lowp_dq[begin * static_cast<size_t>(dqk)], &dq_envelopes[begin]);
  }

  // Per checked group: the statistics of every query row of its heads (on BLAS blocks), then its
  // key rows.
  const int64_t group = p.heads_q / p.heads_kv;
  std::vector<RowStatistics<double>> exact;
  std::vector<RowStatistics<float>> lowp;
  for (const auto& [b, kv_head] : rows.groups) {
    group_statistics(p, view, b, kv_head, exact, lowp);
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t r = 0; r < n_key; ++r) {
      const KeyRowIndex& row = rows.key_rows[static_cast<size_t>(r)];
      if (row.b != b || row.kv_head != kv_head) continue;
      reference_dkv_row(p, view, exact.data(), b, kv_head, row.key, &reference.dk[r * dqk],
                        &reference.dv[r * dv], &dk_envelopes[static_cast<size_t>(r)],
                        &dv_envelopes[static_cast<size_t>(r)]);
      lowp_dkv_row(p, view, lowp.data(), b, kv_head, row.key, &reference.lowp_dk[r * dqk],
                   &reference.lowp_dv[r * dv]);
    }
  }
  const double keys = static_cast<double>(p.seqlen_k);
  const double queries = static_cast<double>(group * p.seqlen_q);
  const double probe = kAtolProbe * upstream_rms(p, view);
  reference.dq_bound = bound_of(p, reference.dq, reference.lowp_dq, keys, probe, dq_envelopes);
  reference.dk_bound = bound_of(p, reference.dk, reference.lowp_dk, queries, probe, dk_envelopes);
  reference.dv_bound = bound_of(p, reference.dv, reference.lowp_dv, queries, probe, dv_envelopes);
  return reference;
}

CheckSummary compare_gradients(const ProblemInputs& inputs, const GradientReference& reference,
                               const KernelOutputs& outputs, std::vector<GradientCheck>& checks,
                               std::string& failure) {
  const Problem& p = inputs.problem;
  const ProblemLayout& layout = inputs.layout;
  const DType dtype = p.grad_dtype();
  failure.clear();
  checks.assign(3, GradientCheck{});
  using Row = std::tuple<int64_t, int64_t, int64_t>;  // (b, s, h)
  const auto query_at = [&](size_t r) {
    const RowIndex& row = reference.query_rows[r];
    return Row{row.b, row.query, row.h};
  };
  const auto key_at = [&](size_t r) {
    const KeyRowIndex& row = reference.key_rows[r];
    return Row{row.b, row.key, row.kv_head};
  };
  compare_one("dq", dtype, outputs.dq, layout.dq, layout.dq_elements, p.head_dim_qk, reference.dq,
              reference.dq_bound, reference.query_rows.size(), query_at, checks[0], failure);
  compare_one("dk", dtype, outputs.dk, layout.dk, layout.dk_elements, p.head_dim_qk, reference.dk,
              reference.dk_bound, reference.key_rows.size(), key_at, checks[1], failure);
  compare_one("dv", dtype, outputs.dv, layout.dv, layout.dv_elements, p.head_dim_v, reference.dv,
              reference.dv_bound, reference.key_rows.size(), key_at, checks[2], failure);

  // The summary shows the gradient nearest its bound (the failing one when one fails).
  const GradientBound* bounds[] = {&reference.dq_bound, &reference.dk_bound, &reference.dv_bound};
  size_t nearest = 0;
  double nearest_ratio = -1;
  CheckSummary summary;
  summary.checked = true;
  for (size_t g = 0; g < checks.size(); ++g) {
    const double ratio = checks[g].bound > 0 ? checks[g].max_abs_error / checks[g].bound
                                             : std::numeric_limits<double>::infinity();
    if (!(ratio <= nearest_ratio)) nearest = g, nearest_ratio = ratio;
    summary.nan_count += checks[g].nan_count;
    summary.inf_count += checks[g].inf_count;
  }
  summary.max_abs_error = checks[nearest].max_abs_error;
  summary.lowp_error = bounds[nearest]->lowp_error;
  summary.atol = bounds[nearest]->atol;
  summary.bound = bounds[nearest]->bound();
  summary.rel_l2 = checks[nearest].rel_l2;
  summary.rows_checked =
      static_cast<int64_t>(reference.query_rows.size() + reference.key_rows.size());
  summary.rows_total = p.batch * (p.heads_q * p.seqlen_q + p.heads_kv * p.seqlen_k);
  summary.canaries_ok = outputs.guards_ok && outputs.dq.canaries_intact() &&
                        outputs.dk.canaries_intact() && outputs.dv.canaries_intact();
  if (!summary.canaries_ok) {
    failure = "canary overwritten: the kernel wrote outside its dq, dk or dv buffer";
  }
  return summary;
}

}  // namespace attnbench
