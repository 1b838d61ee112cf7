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
// element of 32 query rows per head drawn at random (each row is exact where it is checked:
// reference/attention.h). The paper states no sequence length. The gain grows with it (a query
// meets more keys whose outlier channels coincide with its own, the errors incoherent processing
// removes), from 1.25-1.8x at seqlen 512 to 1.9-4.0x at 8192 and 2.1-3.9x at 16384 over 4 to 16
// heads; with 16 heads at 16384 the draws ranged 2.56-3.76x (2026-12-05). The paper's figures
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
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "harness/measure/inputs.h"
#include "reference/attention.h"
#include "reference/fp8_recipe.h"
#include "reference/tensor_core_sum.h"

namespace attnbench {
namespace {

constexpr const char* kStudyShape = "b=1,hq=16,s=16384,d=128,dtype=fp16";
constexpr int64_t kStudyRowsPerHead = 32;

Problem parsed(const char* shape) {
  Problem p;
  EXPECT_TRUE(parse_shape(shape, p).ok) << shape;
  return p;
}

// One query row of the problem: (batch, query head, query index).
struct Row {
  int64_t b, h, i;
};

// rows_per_head distinct query rows of every (batch, head), drawn from `seed`.
std::vector<Row> sample_rows(const Problem& p, int64_t rows_per_head, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> queries(static_cast<size_t>(p.seqlen_q));
  std::vector<Row> rows;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      std::iota(queries.begin(), queries.end(), int64_t{0});
      std::shuffle(queries.begin(), queries.end(), rng);
      for (int64_t n = 0; n < std::min(rows_per_head, p.seqlen_q); ++n) {
        rows.push_back({b, h, queries[static_cast<size_t>(n)]});
      }
    }
  }
  return rows;
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

// RMSE against `exact` over every output element of `rows`, for a recipe (none: fp16's lowp_row).
double rmse(const ProblemInputs& inputs, const Fp8Recipe* recipe, const std::vector<Row>& rows,
            const std::vector<double>& exact) {
  const Problem& p = inputs.problem;
  const AttentionInputs view = inputs.view();
  std::optional<QuantizedInputs> quantized;
  if (recipe) quantized = quantize_inputs(*recipe, p, view);
  const size_t dv = static_cast<size_t>(p.head_dim_v);
  double squares = 0;
#pragma omp parallel for reduction(+ : squares) schedule(dynamic, 4)
  for (size_t n = 0; n < rows.size(); ++n) {
    std::vector<float> got(dv);
    const Row& row = rows[n];
    if (quantized) {
      fp8_recipe_row(*recipe, p, *quantized, row.b, row.h, row.i, got.data(), nullptr);
    } else {
      lowp_row(p, view, 1.0f, row.b, row.h, row.i, got.data(), nullptr);
    }
    for (size_t d = 0; d < dv; ++d) {
      const double e = got[d] - exact[n * dv + d];
      squares += e * e;
    }
  }
  return std::sqrt(squares / static_cast<double>(rows.size() * dv));
}

Fp8Recipe recipe(Fp8Scaling scaling, bool incoherent) {
  Fp8Recipe r;
  r.scaling = scaling;
  r.incoherent = incoherent;
  return r;
}

TEST(Fp8Accuracy, IncoherentProcessingCutsOutlierErrorAndLeavesNormalInputsAlone) {
  const uint64_t seed = std::random_device{}();
  const Problem problem = parsed(kStudyShape);
  const std::vector<Row> rows = sample_rows(problem, kStudyRowsPerHead, seed);
  const Fp8Recipe fp8 = recipe(Fp8Scaling::per_tensor, false);
  const Fp8Recipe block = recipe(Fp8Scaling::per_block, false);
  const Fp8Recipe incoherent = recipe(Fp8Scaling::per_tensor, true);
  const Fp8Recipe both = recipe(Fp8Scaling::per_block, true);
  std::map<std::string, std::map<std::string, double>> table;
  for (const Distribution distribution :
       {Distribution::outliers, Distribution::normal, Distribution::sink}) {
    ProblemInputs inputs;
    ASSERT_TRUE(make_inputs(problem, distribution, seed, inputs).ok);
    const std::vector<double> exact = exact_outputs(inputs, rows);
    auto& row = table[std::string(distribution_name(distribution))];
    row["fp16"] = rmse(inputs, nullptr, rows, exact);
    row["fp8"] = rmse(inputs, &fp8, rows, exact);
    row["fp8_block"] = rmse(inputs, &block, rows, exact);
    row["fp8_incoherent"] = rmse(inputs, &incoherent, rows, exact);
    row["fp8_both"] = rmse(inputs, &both, rows, exact);
  }
  std::printf("RMSE against fp64 (seed %llu), %s, %lld rows a head:\n",
              static_cast<unsigned long long>(seed), kStudyShape,
              static_cast<long long>(kStudyRowsPerHead));
  std::printf("%-9s %10s %10s %10s %15s %10s\n", "inputs", "fp16", "fp8", "fp8_block",
              "fp8_incoherent", "fp8_both");
  for (const auto& [name, row] : table) {
    std::printf("%-9s %10.3e %10.3e %10.3e %15.3e %10.3e\n", name.c_str(), row.at("fp16"),
                row.at("fp8"), row.at("fp8_block"), row.at("fp8_incoherent"), row.at("fp8_both"));
  }
  std::printf("paper (outliers): fp16 1.9e-4, fp8 per-tensor 2.4e-2, both 9.1e-3\n");
  const auto& outliers = table.at("outliers");
  const auto& normal = table.at("normal");
  // Issue 16's 2x; at this shape the cut ranged 2.56x to 3.76x over five draws (2026-12-05).
  EXPECT_GE(outliers.at("fp8") / outliers.at("fp8_incoherent"), 2.0);
  EXPECT_LT(std::fabs(normal.at("fp8_incoherent") / normal.at("fp8") - 1.0), 0.10);
  for (const auto& [name, row] : table) {
    EXPECT_LT(row.at("fp16"), row.at("fp8")) << name << ": fp16 is the more accurate";
  }
}

// The error of each of the recipe's three roundings alone (the other two off), per-tensor scales,
// with and without incoherent processing: "<inputs> <per-tensor|incoherent>" -> source -> RMSE.
using SourceTable = std::map<std::string, std::map<std::string, double>>;

SourceTable error_by_source(const Problem& problem, int64_t rows_per_head,
                            const std::vector<Distribution>& distributions, uint64_t seed) {
  struct Source {
    const char* name;
    bool qk, v, p;
  };
  const Source sources[] = {{"all", true, true, true},
                            {"Q,K only", true, false, false},
                            {"V only", false, true, false},
                            {"P only", false, false, true}};
  const std::vector<Row> rows = sample_rows(problem, rows_per_head, seed);
  SourceTable table;
  for (const Distribution distribution : distributions) {
    ProblemInputs inputs;
    EXPECT_TRUE(make_inputs(problem, distribution, seed, inputs).ok);
    const std::vector<double> exact = exact_outputs(inputs, rows);
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

// The three roundings' errors at seqlen 512 (every row) and at the study's 16384 (4 heads, 32 rows
// a head), on outlier inputs (and normal and sink ones at 512). Asserted, on fresh inputs, at both
// lengths: the Q and K rounding holds most of the error on outliers (above twice P's, and twice
// V's at 512, V's at 16384, where the sampled rows make it vary), and
// incoherent processing cuts that term and leaves V's alone (V is not rotated). e4m3's rounding
// error is relative, so a rotation that keeps the norms leaves most scores' error as it was; it
// removes the large errors where an outlier channel of a query meets an outlier channel of a key,
// a product it spreads over every channel. A longer sequence gives each query more such keys, so
// the Q and K term grows and the rotation's cut with it; what it leaves is mostly V's rounding,
// which FlashAttention-3's incoherent processing does not touch (one draw, 2026-12-05, at 16384
// with 16 heads: Q and K 2.27e-2 falling to 4.85e-3, V 7.57e-3, P 5.2e-4).
TEST(Fp8Accuracy, ErrorBySourceShowsWhereIncoherentProcessingActs) {
  const uint64_t seed = std::random_device{}();
  constexpr const char* kShortShape = "b=1,hq=4,s=512,d=128,dtype=fp16";
  const SourceTable short_table =
      error_by_source(parsed(kShortShape), 512,
                      {Distribution::outliers, Distribution::normal, Distribution::sink}, seed);
  constexpr const char* kLongShape = "b=1,hq=4,s=16384,d=128,dtype=fp16";
  const SourceTable long_table =
      error_by_source(parsed(kLongShape), 32, {Distribution::outliers}, seed);
  print_sources(short_table, kShortShape, seed);
  print_sources(long_table, kLongShape, seed);
  for (const SourceTable* table : {&short_table, &long_table}) {
    const auto& plain = table->at("outliers per-tensor");
    const auto& rotated = table->at("outliers incoherent");
    // At 16384 the 128 sampled rows' Q and K term rests on the few outlier keys each meets: 1.95x
    // to 4.7x V's over seven draws (2026-12-05), where every row at 512 gave 3.1x to 3.3x.
    const double v_factor = table == &short_table ? 2.0 : 1.0;
    EXPECT_GT(plain.at("Q,K only"), v_factor * plain.at("V only"));
    EXPECT_GT(plain.at("Q,K only"), 2.0 * plain.at("P only"));
    EXPECT_GE(plain.at("Q,K only") / rotated.at("Q,K only"), 1.15);
    EXPECT_LT(std::fabs(rotated.at("V only") / plain.at("V only") - 1.0), 0.02);
  }
}

// The study's recipes sum in fp32, as the host does; the paper measured a GPU, whose FP8 tensor
// cores keep about 14 bits of each sum. The same recipes with the emulator's 13-bit model of those
// sums (Fp8Recipe::tensor_core_sum_bits, the checker's rows for the in-house CUDA kernels), at
// the study's seqlen on 4 heads: printed beside the fp32 sums, and asserted to move the RMSE by
// less than 2 % (measured 0.1-0.3 % over two draws: the narrow sums' error, relative to each score
// and to O, is far below e4m3's rounding of the inputs), so the table above stands for the GPU
// kernels' recipe too.
TEST(Fp8Accuracy, TheTensorCoresNarrowSumsLeaveTheRmseAsItWas) {
  const uint64_t seed = std::random_device{}();
  constexpr const char* kShape = "b=1,hq=4,s=16384,d=128,dtype=fp16";
  const Problem problem = parsed(kShape);
  const std::vector<Row> rows = sample_rows(problem, kStudyRowsPerHead, seed);
  std::printf("RMSE against fp64 (seed %llu), %s, %lld rows a head, fp32 sums / 13-bit sums:\n",
              static_cast<unsigned long long>(seed), kShape,
              static_cast<long long>(kStudyRowsPerHead));
  for (const Distribution distribution : {Distribution::outliers, Distribution::normal}) {
    ProblemInputs inputs;
    ASSERT_TRUE(make_inputs(problem, distribution, seed, inputs).ok);
    const std::vector<double> exact = exact_outputs(inputs, rows);
    for (const auto& [name, fp32_sums] :
         {std::pair{"fp8", recipe(Fp8Scaling::per_tensor, false)},
          std::pair{"fp8_both", recipe(Fp8Scaling::per_block, true)}}) {
      Fp8Recipe narrow = fp32_sums;
      narrow.tensor_core_sum_bits = kFp8TensorCoreBits;
      narrow.block_rows = narrow.key_tile;  // one V scale a key tile, as the kernels have it
      Fp8Recipe wide = fp32_sums;
      wide.block_rows = narrow.block_rows;
      const double wide_rmse = rmse(inputs, &wide, rows, exact);
      const double narrow_rmse = rmse(inputs, &narrow, rows, exact);
      std::printf("%-9s %-9s %10.3e %10.3e (%+.1f %%)\n",
                  std::string(distribution_name(distribution)).c_str(), name, wide_rmse,
                  narrow_rmse, 100.0 * (narrow_rmse / wide_rmse - 1.0));
      EXPECT_LT(std::fabs(narrow_rmse / wide_rmse - 1.0), 0.02)
          << name << " on " << distribution_name(distribution);
    }
  }
}

}  // namespace
}  // namespace attnbench
