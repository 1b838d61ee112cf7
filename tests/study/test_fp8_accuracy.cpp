// The FP8 accuracy study of issue 16, on attnbench's recipe (reference/fp8_recipe.h): the
// experiment of FlashAttention-3's paper (section 4.3), Q, K, V drawn from N(0, 1) +
// N(0, 100) x Bernoulli(0.001) (the `outliers` distribution), with `normal` and `sink` inputs
// beside it. RMSE against the fp64 reference of
//   fp16            FlashAttention-2's recipe at fp16 (lowp_row: P unrounded, fp32 sums)
//   fp8             per-tensor scales
//   fp8_block       a scale per 64 tokens of a head
//   fp8_incoherent  per-tensor, Q and K rotated by a random Hadamard transform first
//   fp8_both        block scales and incoherent processing
// on batch 1, 16 heads of 128, seqlen 16384, fp16 inputs and outputs, no mask, over every output
// element of the problem, estimated from 32 query rows a head holding an outlier entry and 32 not
// (sample_rows; each row is exact where it is checked: reference/attention.h). The paper states
// no sequence length. The gain grows with it (a query meets more keys whose outlier channels
// coincide with its own, the errors incoherent processing removes), from 1.25-1.8x at seqlen 512
// to 1.9-4.0x at 8192 and 2.1-3.9x at 16384 over 4 to 16 heads of 32 random rows; over every row
// of 256 sampled a head, at 16 heads and 16384, it was 2.7x-3.5x for nine inputs (2026-12-05).
// The paper's figures
// (2.4e-2 per-tensor, 9.1e-3 with both, 1.9e-4 fp16) are quoted in the output, not asserted.
// Asserted, on fresh inputs each run: incoherent processing cuts the RMSE on outlier inputs at
// least 2x and changes it by less than 10 % on normal inputs; fp16 beats every FP8 recipe. A
// second test splits the error by rounding (Q and K, V, P) at seqlen 512 and 16384 to show where
// incoherent processing acts; a third sums as the FP8 tensor cores do (the GPU kernels' recipe).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "harness/measure/inputs.h"
#include "reference/attention.h"
#include "reference/fp8_recipe.h"
#include "reference/tensor_core_sum.h"
#include "tests/support/fresh_seed.h"

namespace attnbench {
namespace {

constexpr const char* kStudyShape = "b=1,hq=16,s=16384,d=128,dtype=fp16";
constexpr int64_t kStudyRowsPerStratum = 32;
// A query entry this large is an outlier draw of N(0, 100): N(0, 1) passes it in one of a row's
// 128 channels with probability 7e-5.
constexpr double kOutlierEntry = 5.0;

Problem parsed(const char* shape) {
  Problem p;
  EXPECT_TRUE(parse_shape(shape, p).ok) << shape;
  return p;
}

// One query row of the problem: (batch, query head, query index).
struct Row {
  int64_t b, h, i;
};

// The rows an RMSE is taken over, each weighted by the share of the problem's rows it stands for
// (the weights sum to 1).
struct SampledRows {
  std::vector<Row> rows;
  std::vector<double> weights;
};

bool holds_outlier(const TensorView& q, const Row& row, int64_t dim) {
  for (int64_t d = 0; d < dim; ++d) {
    if (std::fabs(q.at(row.b, row.i, row.h, d)) > kOutlierEntry) return true;
  }
  return false;
}

// Rows drawn from `seed` in two strata of every (batch, head): up to rows_per_stratum of the
// queries holding an outlier entry and as many of the others (every row of a stratum that has no
// more). On outlier inputs a few rows hold most of the squared error: at 16384 keys, 10 rows of
// 4096 sampled held half of it, all of them queries with an outlier entry, 8 % of the rows and
// 82 % of the error. Drawing those rows apart, weighted by their stratum's share, estimates the
// same RMSE over every row with far less spread: the outlier cut of the study's first test, 1.9x
// or less in 1 % of draws of 32 random rows a head, 2.2x or less in 0.1 % of draws of 32 + 32
// (bootstrapped from 256 rows a head of nine inputs, 2026-12-05).
SampledRows sample_rows(const ProblemInputs& inputs, int64_t rows_per_stratum, uint64_t seed) {
  const Problem& p = inputs.problem;
  const AttentionInputs view = inputs.view();
  std::mt19937_64 rng(seed);
  const double heads = static_cast<double>(p.batch * p.heads_q);
  SampledRows sampled;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      std::vector<Row> strata[2];  // plain queries, queries holding an outlier entry
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        const Row row{b, h, i};
        strata[holds_outlier(view.q, row, p.head_dim_qk) ? 1 : 0].push_back(row);
      }
      for (std::vector<Row>& stratum : strata) {
        std::shuffle(stratum.begin(), stratum.end(), rng);
        const auto taken = std::min(static_cast<size_t>(rows_per_stratum), stratum.size());
        const double share = static_cast<double>(stratum.size()) / static_cast<double>(p.seqlen_q);
        for (size_t n = 0; n < taken; ++n) {
          sampled.rows.push_back(stratum[n]);
          sampled.weights.push_back(share / static_cast<double>(taken) / heads);
        }
      }
    }
  }
  return sampled;
}

// The fp64 reference's output rows, row after row.
std::vector<double> exact_outputs(const ProblemInputs& inputs, const std::vector<Row>& rows) {
  const int64_t dv = inputs.problem.head_dim_v;
  const AttentionInputs view = inputs.view();
  std::vector<double> exact(rows.size() * static_cast<size_t>(dv));
#pragma omp parallel for schedule(dynamic, 4)
  for (size_t n = 0; n < rows.size(); ++n) {
    reference_row(inputs.problem, view, rows[n].b, rows[n].h, rows[n].i,
                  exact.data() + n * static_cast<size_t>(dv), nullptr);
  }
  return exact;
}

// The sampled rows' outputs under a recipe (none: fp16's lowp_row), row after row.
std::vector<double> recipe_outputs(const ProblemInputs& inputs, const Fp8Recipe* recipe,
                                   const SampledRows& sampled) {
  const Problem& p = inputs.problem;
  const AttentionInputs view = inputs.view();
  std::optional<QuantizedInputs> quantized;
  if (recipe) quantized = quantize_inputs(*recipe, p, view);
  const size_t dv = static_cast<size_t>(p.head_dim_v);
  std::vector<double> outputs(sampled.rows.size() * dv);
#pragma omp parallel for schedule(dynamic, 4)
  for (size_t n = 0; n < sampled.rows.size(); ++n) {
    std::vector<float> got(dv);
    const Row& row = sampled.rows[n];
    if (quantized) {
      fp8_recipe_row(*recipe, p, *quantized, row.b, row.h, row.i, got.data(), nullptr);
    } else {
      lowp_row(p, view, 1.0f, row.b, row.h, row.i, got.data(), nullptr);
    }
    std::copy(got.begin(), got.end(), outputs.begin() + static_cast<std::ptrdiff_t>(n * dv));
  }
  return outputs;
}

// The RMSE between two of the sampled rows' outputs, over every output element of the problem
// (estimated from the sampled rows by their weights).
double rmse_between(const SampledRows& sampled, const std::vector<double>& got,
                    const std::vector<double>& want) {
  const size_t dv = got.size() / sampled.rows.size();
  double squares = 0;
  for (size_t n = 0; n < sampled.rows.size(); ++n) {
    double row_squares = 0;
    for (size_t d = n * dv; d < (n + 1) * dv; ++d)
      row_squares += (got[d] - want[d]) * (got[d] - want[d]);
    squares += sampled.weights[n] * row_squares;
  }
  return std::sqrt(squares / static_cast<double>(dv));
}

// A recipe's RMSE against `exact` (none: fp16's lowp_row).
double rmse(const ProblemInputs& inputs, const Fp8Recipe* recipe, const SampledRows& sampled,
            const std::vector<double>& exact) {
  return rmse_between(sampled, recipe_outputs(inputs, recipe, sampled), exact);
}

Fp8Recipe recipe(Fp8Scaling scaling, bool incoherent) {
  Fp8Recipe r;
  r.scaling = scaling;
  r.incoherent = incoherent;
  return r;
}

// Slow tier (minutes: 16 heads at seqlen 16384, three inputs, five recipes).
TEST(Fp8Accuracy, IncoherentProcessingCutsOutlierErrorAndLeavesNormalInputsAloneAtSeqlen16k) {
  const uint64_t seed = fresh_seed();
  const Problem problem = parsed(kStudyShape);
  const Fp8Recipe fp8 = recipe(Fp8Scaling::per_tensor, false);
  const Fp8Recipe block = recipe(Fp8Scaling::per_block, false);
  const Fp8Recipe incoherent = recipe(Fp8Scaling::per_tensor, true);
  const Fp8Recipe both = recipe(Fp8Scaling::per_block, true);
  std::map<std::string, std::map<std::string, double>> table;
  for (const Distribution distribution :
       {Distribution::outliers, Distribution::normal, Distribution::sink}) {
    ProblemInputs inputs;
    ASSERT_TRUE(make_inputs(problem, distribution, seed, inputs).ok);
    const SampledRows rows = sample_rows(inputs, kStudyRowsPerStratum, seed);
    const std::vector<double> exact = exact_outputs(inputs, rows.rows);
    auto& row = table[std::string(distribution_name(distribution))];
    row["fp16"] = rmse(inputs, nullptr, rows, exact);
    row["fp8"] = rmse(inputs, &fp8, rows, exact);
    row["fp8_block"] = rmse(inputs, &block, rows, exact);
    row["fp8_incoherent"] = rmse(inputs, &incoherent, rows, exact);
    row["fp8_both"] = rmse(inputs, &both, rows, exact);
  }
  std::printf(
      "RMSE against fp64 (seed %llu), %s, from %lld rows a head with an outlier entry and "
      "%lld without:\n",
      static_cast<unsigned long long>(seed), kStudyShape,
      static_cast<long long>(kStudyRowsPerStratum), static_cast<long long>(kStudyRowsPerStratum));
  std::printf("%-9s %10s %10s %10s %15s %10s\n", "inputs", "fp16", "fp8", "fp8_block",
              "fp8_incoherent", "fp8_both");
  for (const auto& [name, row] : table) {
    std::printf("%-9s %10.3e %10.3e %10.3e %15.3e %10.3e\n", name.c_str(), row.at("fp16"),
                row.at("fp8"), row.at("fp8_block"), row.at("fp8_incoherent"), row.at("fp8_both"));
  }
  std::printf("paper (outliers): fp16 1.9e-4, fp8 per-tensor 2.4e-2, both 9.1e-3\n");
  const auto& outliers = table.at("outliers");
  const auto& normal = table.at("normal");
  // Issue 16's 2x; at this shape the cut is about 2.7x-3.5x (its population, above), its draws
  // 2.2x or less once in a thousand (sample_rows).
  EXPECT_GE(outliers.at("fp8") / outliers.at("fp8_incoherent"), 2.0);
  EXPECT_LT(std::fabs(normal.at("fp8_incoherent") / normal.at("fp8") - 1.0), 0.10);
  for (const auto& [name, row] : table) {
    EXPECT_LT(row.at("fp16"), row.at("fp8")) << name << ": fp16 is the more accurate";
  }
}

// The error of each of the recipe's three roundings alone (the other two off), per-tensor scales,
// with and without incoherent processing: "<inputs> <per-tensor|incoherent>" -> source -> RMSE.
using SourceTable = std::map<std::string, std::map<std::string, double>>;

SourceTable error_by_source(const Problem& problem, int64_t rows_per_stratum,
                            const std::vector<Distribution>& distributions, uint64_t seed) {
  struct Source {
    const char* name;
    bool qk, v, p;
  };
  const Source sources[] = {{"all", true, true, true},
                            {"Q,K only", true, false, false},
                            {"V only", false, true, false},
                            {"P only", false, false, true}};
  SourceTable table;
  for (const Distribution distribution : distributions) {
    ProblemInputs inputs;
    EXPECT_TRUE(make_inputs(problem, distribution, seed, inputs).ok);
    const SampledRows rows = sample_rows(inputs, rows_per_stratum, seed);
    const std::vector<double> exact = exact_outputs(inputs, rows.rows);
    for (const bool incoherent : {false, true}) {
      auto& row = table[std::string(distribution_name(distribution)) +
                        (incoherent ? " incoherent" : " per-tensor")];
      for (const Source& source : sources) {
        Fp8Recipe r = recipe(Fp8Scaling::per_tensor, incoherent);
        r.round_qk = source.qk;
        r.round_v = source.v;
        r.round_p = source.p;
        row[source.name] = rmse(inputs, &r, rows, exact);
      }
    }
  }
  return table;
}

void print_sources(const SourceTable& table, const char* shape, uint64_t seed) {
  std::printf("RMSE against fp64 by rounding (seed %llu), %s:\n",
              static_cast<unsigned long long>(seed), shape);
  std::printf("%-20s %10s %10s %10s %10s\n", "inputs, recipe", "all", "Q,K only", "V only",
              "P only");
  for (const auto& [name, row] : table) {
    std::printf("%-20s %10.3e %10.3e %10.3e %10.3e\n", name.c_str(), row.at("all"),
                row.at("Q,K only"), row.at("V only"), row.at("P only"));
  }
}

// The three roundings' errors at seqlen 512 (every row) and at the study's 16384 (4 heads, 16 rows
// a head of each stratum), on outlier inputs (and normal and sink ones at 512). Asserted, on fresh
// inputs, at both lengths: the Q and K rounding holds most of the error on outliers (above twice
// P's, and twice V's at 512, V's at 16384, where the sampled rows make it vary), and incoherent
// processing cuts that term and leaves V's alone (V is not rotated). e4m3's rounding error is
// relative, so a rotation that keeps the norms leaves most scores' error as it was; it removes the
// large errors where an outlier channel of a query meets an outlier channel of a key, a product it
// spreads over every channel. A longer sequence gives each query more such keys, so the Q and K
// term grows and the rotation's cut with it; what it leaves is mostly V's rounding, which
// FlashAttention-3's incoherent processing does not touch (one draw, 2026-12-05, at 16384 with 16
// heads: Q and K 2.27e-2 falling to 4.85e-3, V 7.57e-3, P 5.2e-4).
void expect_sources_as_the_study_found(const SourceTable& table, double v_factor) {
  const auto& plain = table.at("outliers per-tensor");
  const auto& rotated = table.at("outliers incoherent");
  EXPECT_GT(plain.at("Q,K only"), v_factor * plain.at("V only"));
  EXPECT_GT(plain.at("Q,K only"), 2.0 * plain.at("P only"));
  EXPECT_GE(plain.at("Q,K only") / rotated.at("Q,K only"), 1.15);
  EXPECT_LT(std::fabs(rotated.at("V only") / plain.at("V only") - 1.0), 0.02);
}

// Full tier (seconds): every row at seqlen 512, where the Q and K term was 3.1x to 3.3x V's.
TEST(Fp8Accuracy, ErrorBySourceShowsWhereIncoherentProcessingActsAtSeqlen512) {
  const uint64_t seed = fresh_seed();
  constexpr const char* kShortShape = "b=1,hq=4,s=512,d=128,dtype=fp16";
  const SourceTable table =
      error_by_source(parsed(kShortShape), 512,
                      {Distribution::outliers, Distribution::normal, Distribution::sink}, seed);
  print_sources(table, kShortShape, seed);
  expect_sources_as_the_study_found(table, 2.0);
}

// Slow tier: at 16384 the sampled rows' Q and K term rests on the few outlier keys each meets:
// 2.6x to 7.2x V's over 27 draws of 16 + 16 rows a head (1.95x to 4.7x over seven draws of 32
// random rows), where every row at 512 gave 3.1x to 3.3x (2026-12-05).
TEST(Fp8Accuracy, ErrorBySourceShowsWhereIncoherentProcessingActsAtSeqlen16k) {
  const uint64_t seed = fresh_seed();
  constexpr const char* kLongShape = "b=1,hq=4,s=16384,d=128,dtype=fp16";
  const SourceTable table = error_by_source(parsed(kLongShape), 16, {Distribution::outliers}, seed);
  print_sources(table, kLongShape, seed);
  expect_sources_as_the_study_found(table, 1.0);
}

// The study's recipes sum in fp32, as the host does; the paper measured a GPU, whose FP8 tensor
// cores keep about 14 bits of each sum. The same recipes with the emulator's 13-bit model of those
// sums (Fp8Recipe::tensor_core_sum_bits, the checker's rows for the in-house CUDA kernels), at
// the study's seqlen on 4 heads: printed beside the fp32 sums with how far apart the two recipes'
// outputs are, and asserted to move the RMSE by less than 5 %, so the table above stands for the
// GPU kernels' recipe too. On normal inputs the narrow sums' own error is a steady 10-13 % of the
// recipe's (O, summed over 16384 keys, keeps 13 bits below its own size), which in quadrature
// moves the RMSE by under 1 %. On outliers it is 1-12 %, but it falls on the few rows that hold
// most of the squared error, so the RMSE moves by a cross term that those rows make noisy: -1.2 %
// to +2.3 % over 28 draws of 16 + 16 rows a head (the 2 % this test first asserted failed once),
// -0.7 % to +0.4 % over 20 draws of the 32 + 32 it takes (2026-12-05).
TEST(Fp8Accuracy, TheTensorCoresNarrowSumsLeaveTheRmseAsItWasAtSeqlen16k) {
  const uint64_t seed = fresh_seed();
  constexpr const char* kShape = "b=1,hq=4,s=16384,d=128,dtype=fp16";
  constexpr int64_t kRowsPerStratum = 32;
  const Problem problem = parsed(kShape);
  std::printf(
      "RMSE against fp64 (seed %llu), %s, %lld + %lld rows a head, fp32 sums / 13-bit "
      "sums:\n",
      static_cast<unsigned long long>(seed), kShape, static_cast<long long>(kRowsPerStratum),
      static_cast<long long>(kRowsPerStratum));
  for (const Distribution distribution : {Distribution::outliers, Distribution::normal}) {
    ProblemInputs inputs;
    ASSERT_TRUE(make_inputs(problem, distribution, seed, inputs).ok);
    const SampledRows rows = sample_rows(inputs, kRowsPerStratum, seed);
    const std::vector<double> exact = exact_outputs(inputs, rows.rows);
    for (const auto& [name, fp32_sums] :
         {std::pair{"fp8", recipe(Fp8Scaling::per_tensor, false)},
          std::pair{"fp8_both", recipe(Fp8Scaling::per_block, true)}}) {
      Fp8Recipe narrow = fp32_sums;
      narrow.tensor_core_sum_bits = kFp8TensorCoreBits;
      narrow.block_rows = narrow.key_tile;  // one V scale a key tile, as the kernels have it
      Fp8Recipe wide = fp32_sums;
      wide.block_rows = narrow.block_rows;
      const std::vector<double> wide_out = recipe_outputs(inputs, &wide, rows);
      const std::vector<double> narrow_out = recipe_outputs(inputs, &narrow, rows);
      const double wide_rmse = rmse_between(rows, wide_out, exact);
      const double narrow_rmse = rmse_between(rows, narrow_out, exact);
      const double moved = rmse_between(rows, narrow_out, wide_out);
      std::printf("%-9s %-9s %10.3e %10.3e (%+.1f %%), apart %.3e (%.1f %% of the RMSE)\n",
                  std::string(distribution_name(distribution)).c_str(), name, wide_rmse,
                  narrow_rmse, 100.0 * (narrow_rmse / wide_rmse - 1.0), moved,
                  100.0 * moved / wide_rmse);
      EXPECT_LT(std::fabs(narrow_rmse / wide_rmse - 1.0), 0.05)
          << name << " on " << distribution_name(distribution);
    }
  }
}

}  // namespace
}  // namespace attnbench
