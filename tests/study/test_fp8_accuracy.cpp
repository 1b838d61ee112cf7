// The FP8 accuracy study of issue 16, on attnbench's recipe (reference/fp8_recipe.h): the
// experiment of FlashAttention-3's paper (section 4.3), Q, K, V drawn from N(0, 1) +
// N(0, 100) x Bernoulli(0.001) (the `outliers` distribution), with `normal` and `sink` inputs
// beside it. RMSE against the fp64 reference over every output element of
//   fp16            FlashAttention-2's recipe at fp16 (lowp_row: P unrounded, fp32 sums)
//   fp8             per-tensor scales
//   fp8_block       a scale per 64 tokens of a head
//   fp8_incoherent  per-tensor, Q and K rotated by a random Hadamard transform first
//   fp8_both        block scales and incoherent processing
// on batch 1, 8 heads of 128, seqlen 512, fp16 inputs and outputs, no mask. The paper's figures
// (2.4e-2 per-tensor, 9.1e-3 with both, 1.9e-4 fp16) are quoted in the output, not asserted.
// Asserted, on fresh inputs each run: incoherent processing cuts the RMSE on outlier inputs (by
// at least 1.15x: see below) and changes it by less than 10 % on normal inputs; fp16 beats every
// FP8 recipe. A second test splits the error by rounding (Q and K, V, P) to show where incoherent
// processing acts and why its gain stops short of 2x.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "harness/measure/inputs.h"
#include "reference/attention.h"
#include "reference/fp8_recipe.h"

namespace attnbench {
namespace {

Problem study_problem() {
  Problem p;
  EXPECT_TRUE(parse_shape("b=1,hq=8,s=512,d=128,dtype=fp16", p).ok);
  return p;
}

// RMSE over every output element of a recipe (none: fp16's lowp_row) against fp64.
double rmse(const ProblemInputs& inputs, const Fp8Recipe* recipe) {
  const Problem& p = inputs.problem;
  const AttentionInputs view = inputs.view();
  std::optional<QuantizedInputs> quantized;
  if (recipe) quantized = quantize_inputs(*recipe, p, view);
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q, dv = p.head_dim_v;
  double squares = 0;
#pragma omp parallel for reduction(+ : squares) schedule(dynamic, 8)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / (p.heads_q * p.seqlen_q), h = r / p.seqlen_q % p.heads_q,
                  i = r % p.seqlen_q;
    std::vector<double> exact(static_cast<size_t>(dv));
    std::vector<float> got(static_cast<size_t>(dv));
    reference_row(p, view, b, h, i, exact.data(), nullptr);
    if (quantized) {
      fp8_recipe_row(*recipe, p, *quantized, b, h, i, got.data(), nullptr);
    } else {
      lowp_row(p, view, 1.0f, b, h, i, got.data(), nullptr);
    }
    for (int64_t d = 0; d < dv; ++d) {
      const double e = got[static_cast<size_t>(d)] - exact[static_cast<size_t>(d)];
      squares += e * e;
    }
  }
  return std::sqrt(squares / static_cast<double>(rows * dv));
}

Fp8Recipe recipe(Fp8Scaling scaling, bool incoherent) {
  Fp8Recipe r;
  r.scaling = scaling;
  r.incoherent = incoherent;
  return r;
}

TEST(Fp8Accuracy, IncoherentProcessingCutsOutlierErrorAndLeavesNormalInputsAlone) {
  const uint64_t seed = std::random_device{}();
  const Fp8Recipe fp8 = recipe(Fp8Scaling::per_tensor, false);
  const Fp8Recipe block = recipe(Fp8Scaling::per_block, false);
  const Fp8Recipe incoherent = recipe(Fp8Scaling::per_tensor, true);
  const Fp8Recipe both = recipe(Fp8Scaling::per_block, true);
  std::map<std::string, std::map<std::string, double>> table;
  for (const Distribution distribution :
       {Distribution::outliers, Distribution::normal, Distribution::sink}) {
    ProblemInputs inputs;
    ASSERT_TRUE(make_inputs(study_problem(), distribution, seed, inputs).ok);
    auto& row = table[std::string(distribution_name(distribution))];
    row["fp16"] = rmse(inputs, nullptr);
    row["fp8"] = rmse(inputs, &fp8);
    row["fp8_block"] = rmse(inputs, &block);
    row["fp8_incoherent"] = rmse(inputs, &incoherent);
    row["fp8_both"] = rmse(inputs, &both);
  }
  std::printf("RMSE against fp64 (seed %llu), b=1,hq=8,s=512,d=128,fp16:\n",
              static_cast<unsigned long long>(seed));
  std::printf("%-9s %10s %10s %10s %15s %10s\n", "inputs", "fp16", "fp8", "fp8_block",
              "fp8_incoherent", "fp8_both");
  for (const auto& [name, row] : table) {
    std::printf("%-9s %10.3e %10.3e %10.3e %15.3e %10.3e\n", name.c_str(), row.at("fp16"),
                row.at("fp8"), row.at("fp8_block"), row.at("fp8_incoherent"), row.at("fp8_both"));
  }
  std::printf("paper (outliers): fp16 1.9e-4, fp8 per-tensor 2.4e-2, both 9.1e-3\n");
  const auto& outliers = table.at("outliers");
  const auto& normal = table.at("normal");
  // Issue 16 asks for 2x; this recipe gave 1.25x, 1.49x, 1.53x and 1.64x on four draws of 4 heads
  // at seqlen 512 (1.64x to 1.82x on three at seqlen 1024): the 2x is not reached here. Asserted
  // is that it helps at all, over 8 heads so that a draw's few outliers weigh less. Why it stops
  // there is measured by ErrorBySourceShowsWhereIncoherentProcessingActs below.
  EXPECT_GE(outliers.at("fp8") / outliers.at("fp8_incoherent"), 1.15);
  EXPECT_LT(std::fabs(normal.at("fp8_incoherent") / normal.at("fp8") - 1.0), 0.10);
  for (const auto& [name, row] : table) {
    EXPECT_LT(row.at("fp16"), row.at("fp8")) << name << ": fp16 is the more accurate";
  }
}

// The error of each of the recipe's three roundings alone (the other two off): Q and K to e4m3
// (step 2), V to e4m3 (step 2), P to e4m3 (step 4), per-tensor scales, with and without
// incoherent processing, on outlier and normal inputs (4 heads, the study's shape otherwise).
// Asserted, on fresh inputs: on outliers the Q and K rounding holds most of the error (more than
// twice V's and P's each); incoherent processing cuts that term and leaves V's alone (V is not
// rotated). e4m3's rounding error is relative, so a rotation that keeps the norms leaves most
// scores' error as it was; it removes the large errors where an outlier channel of a query meets
// an outlier channel of a key, a product it spreads over every channel. On six draws
// (2026-12-05) the Q and K term fell 1.7-2.1x while V's (3.6-4.8e-3) and P's (1.9e-3) stayed, so
// the whole error fell 1.5-1.8x: the rest of the paper's 2x would have to come from V, which
// FlashAttention-3's incoherent processing does not rotate.
TEST(Fp8Accuracy, ErrorBySourceShowsWhereIncoherentProcessingActs) {
  const uint64_t seed = std::random_device{}();
  Problem problem;
  ASSERT_TRUE(parse_shape("b=1,hq=4,s=512,d=128,dtype=fp16", problem).ok);
  struct Source {
    const char* name;
    bool qk, v, p;
  };
  const Source sources[] = {{"all", true, true, true},
                            {"Q,K only", true, false, false},
                            {"V only", false, true, false},
                            {"P only", false, false, true}};
  std::map<std::string, std::map<std::string, double>> table;  // "<inputs> <rotated>" -> source
  for (const Distribution distribution : {Distribution::outliers, Distribution::normal}) {
    ProblemInputs inputs;
    ASSERT_TRUE(make_inputs(problem, distribution, seed, inputs).ok);
    for (const bool incoherent : {false, true}) {
      auto& row = table[std::string(distribution_name(distribution)) +
                        (incoherent ? " incoherent" : " per-tensor")];
      for (const Source& source : sources) {
        Fp8Recipe r = recipe(Fp8Scaling::per_tensor, incoherent);
        r.round_qk = source.qk;
        r.round_v = source.v;
        r.round_p = source.p;
        row[source.name] = rmse(inputs, &r);
      }
    }
  }
  std::printf("RMSE against fp64 by rounding (seed %llu), b=1,hq=4,s=512,d=128,fp16:\n",
              static_cast<unsigned long long>(seed));
  std::printf("%-20s %10s %10s %10s %10s\n", "inputs, recipe", "all", "Q,K only", "V only",
              "P only");
  for (const auto& [name, row] : table) {
    std::printf("%-20s %10.3e %10.3e %10.3e %10.3e\n", name.c_str(), row.at("all"),
                row.at("Q,K only"), row.at("V only"), row.at("P only"));
  }
  const auto& plain = table.at("outliers per-tensor");
  const auto& rotated = table.at("outliers incoherent");
  EXPECT_GT(plain.at("Q,K only"), 2.0 * plain.at("V only"));
  EXPECT_GT(plain.at("Q,K only"), 2.0 * plain.at("P only"));
  EXPECT_GE(plain.at("Q,K only") / rotated.at("Q,K only"), 1.15);
  EXPECT_LT(std::fabs(rotated.at("V only") / plain.at("V only") - 1.0), 0.02);
}

}  // namespace
}  // namespace attnbench
