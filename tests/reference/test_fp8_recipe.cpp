// reference/fp8_recipe: the incoherent rotation keeps Q K^T and spreads an outlier; every scale
// group's largest value lands on e4m3's 448; the recipe's row is the kernels' truth, so a row
// computed with its tiles visited in reverse differs only by P's rounding; a score summed on the
// FP8 tensor cores is four chained steps of their model. Fresh random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "harness/measure/inputs.h"
#include "reference/formats.h"
#include "reference/fp8_recipe.h"
#include "reference/fp8_scale.h"
#include "reference/tensor_core_sum.h"

namespace attnbench {
namespace {

TEST(Fp8Recipe, TheRotationKeepsDotProductsAndSpreadsAnOutlier) {
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<double> normal;
  const uint64_t seed = rng();
  for (const size_t d : {64u, 128u, 256u}) {
    std::vector<double> q(d), k(d);
    for (size_t i = 0; i < d; ++i) q[i] = normal(rng), k[i] = normal(rng);
    double before = 0, after = 0;
    for (size_t i = 0; i < d; ++i) before += q[i] * k[i];
    incoherent_rotation(q, seed);
    incoherent_rotation(k, seed);
    for (size_t i = 0; i < d; ++i) after += q[i] * k[i];
    EXPECT_NEAR(after, before, 1e-12 * d) << "d " << d;
    std::vector<double> outlier(d, 0.0);
    outlier[rng() % d] = 100.0;
    incoherent_rotation(outlier, seed);
    for (double x : outlier) EXPECT_NEAR(std::fabs(x), 100.0 / std::sqrt(double(d)), 1e-9);
  }
}

TEST(Fp8Recipe, EveryScaleGroupsLargestValueLandsOnTheLargestE4m3) {
  Problem p;
  ASSERT_TRUE(parse_shape("b=2,hq=4,hkv=2,sq=200,sk=136,d=64,dtype=bf16", p).ok);
  ProblemInputs inputs;
  ASSERT_TRUE(make_inputs(p, Distribution::outliers, std::random_device{}(), inputs).ok);
  for (const Fp8Scaling scaling :
       {Fp8Scaling::per_tensor, Fp8Scaling::per_head, Fp8Scaling::per_block}) {
    Fp8Recipe recipe;
    recipe.scaling = scaling;
    const QuantizedInputs q = quantize_inputs(recipe, p, inputs.view());
    std::vector<float> group_max(q.k.descales.size(), 0.0f);
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t s = 0; s < p.seqlen_k; ++s)
        for (int64_t h = 0; h < p.heads_kv; ++h)
          for (int64_t d = 0; d < p.head_dim_qk; ++d) {
            const int64_t at = q.layout.k.row_start(b, s, h) + d;
            float& m = group_max[static_cast<size_t>(q.k.group_of(b, s, h))];
            m = std::max(m, std::fabs(q.k.values[static_cast<size_t>(at)]));
          }
    const size_t expected_groups = scaling == Fp8Scaling::per_tensor ? 1
                                   : scaling == Fp8Scaling::per_head ? 4
                                                                     : 4 * 3;  // 136 = 2 blocks + 8
    EXPECT_EQ(group_max.size(), expected_groups) << fp8_scaling_name(scaling);
    for (float m : group_max) EXPECT_EQ(m, 448.0f) << fp8_scaling_name(scaling);
  }
}

// The descale rule the host and the device share (reference/fp8_scale.h) keeps e4m3's largest
// value as formats.h knows it, and gives an all-zero group the descale 1.
TEST(Fp8Recipe, TheSharedDescaleRuleMapsAmaxOntoE4m3sLargest) {
  EXPECT_EQ(kE4m3Largest, max_finite(DType::e4m3));
  EXPECT_EQ(fp8_descale(0.0f), 1.0f);
  std::mt19937 rng(std::random_device{}());
  const float amax = std::uniform_real_distribution<float>(1e-3f, 1e3f)(rng);
  EXPECT_EQ(fp8_descale(amax), amax / 448.0f) << "amax " << amax;
}

// Step 3 on the FP8 tensor cores: 32 products a step, each step's sum the next step's C, as the
// kernels chain their wgmma; an outlier product makes the narrow sum lose the small ones' bits,
// where fp32 keeps them. A recipe that cannot give one V descale a tile is refused.
TEST(Fp8Recipe, ScoresOnTheTensorCoresChainTheirModelsSteps) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> byte(0, 0x7e);  // positive finite e4m3
  std::vector<float> q(128), k(128);
  for (size_t d = 0; d < q.size(); ++d) {
    q[d] = e4m3_bits_to_float(static_cast<uint8_t>(byte(rng) | (rng() % 2 ? 0x80 : 0)));
    k[d] = e4m3_bits_to_float(static_cast<uint8_t>(byte(rng)));
  }
  q[rng() % 128] = 448.0f;
  k[0] = 448.0f;
  float chained = 0;
  for (size_t first = 0; first < 128; first += kFp8MmaDepth)
    chained = tensor_core_sum(chained, &q[first], &k[first], kFp8MmaDepth, 1, kFp8TensorCoreBits);
  EXPECT_EQ(fp8_score_sum(q.data(), k.data(), 128, kFp8TensorCoreBits), chained);
  float fp32 = 0;
  for (size_t d = 0; d < q.size(); ++d) fp32 += q[d] * k[d];
  EXPECT_EQ(fp8_score_sum(q.data(), k.data(), 128, 0), fp32);
  EXPECT_NE(chained, fp32) << "the narrow sum kept every bit of 128 random products";

  Problem p;
  ASSERT_TRUE(parse_shape("b=1,hq=1,s=256,d=64,dtype=bf16", p).ok);
  Fp8Recipe recipe;
  recipe.scaling = Fp8Scaling::per_block;
  recipe.tensor_core_sum_bits = kFp8TensorCoreBits;
  recipe.block_rows = recipe.key_tile = 128;
  EXPECT_EQ(fp8_recipe_limits(recipe, p), "");
  recipe.block_rows = 64;
  EXPECT_NE(fp8_recipe_limits(recipe, p).find("one V scale a key tile"), std::string::npos);
}

TEST(Fp8Recipe, VisitingTheTilesInReverseChangesOnlyPsRounding) {
  Problem p;
  ASSERT_TRUE(parse_shape("b=1,hq=2,s=300,d=64,dtype=fp16", p).ok);
  ProblemInputs inputs;
  ASSERT_TRUE(make_inputs(p, Distribution::normal, std::random_device{}(), inputs).ok);
  Fp8Recipe forward;
  forward.key_tile = 64;
  Fp8Recipe reverse = forward;
  reverse.reverse_keys = true;
  const QuantizedInputs q = quantize_inputs(forward, p, inputs.view());
  double largest = 0;
  bool any_differs = false;
  for (int64_t i = 0; i < p.seqlen_q; ++i) {
    std::vector<float> a(64), b(64);
    float lse_a, lse_b;
    fp8_recipe_row(forward, p, q, 0, 1, i, a.data(), &lse_a, false);
    fp8_recipe_row(reverse, p, q, 0, 1, i, b.data(), &lse_b, false);
    EXPECT_NEAR(lse_a, lse_b, 1e-4) << "row " << i;
    for (size_t d = 0; d < a.size(); ++d) {
      largest = std::max(largest, std::fabs(double(a[d]) - b[d]));
      any_differs = any_differs || a[d] != b[d];
    }
  }
  EXPECT_TRUE(any_differs) << "P is rounded against the running max, which the order moves";
  EXPECT_LT(largest, 0.05) << "beyond e4m3's rounding of P";
}

}  // namespace
}  // namespace attnbench
