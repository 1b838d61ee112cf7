// FLOP and byte counts (reference/flops.h) pinned to hand-computed values for every mask, and
// the error metrics (reference/metrics.h). FLOPs = 2 * (dqk + dv) * heads_q * visible pairs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "reference/flops.h"
#include "reference/metrics.h"
#include "tests/support/problems.h"

namespace attnbench {
namespace {

Problem one_head(int64_t seqlen_q, int64_t seqlen_k, Mask mask) {
  return make_problem(1, 1, 1, seqlen_q, seqlen_k, 64, 64, mask);
}

TEST(Flops, NoMaskCountsEveryPair) {
  // b=2, sq=4, sk=5: 2 * 4 * 5 = 40 pairs; FLOPs = 2 * (8 + 8) * 3 heads * 40 = 3840.
  const Problem problem = make_problem(2, 3, 3, 4, 5, 8, 8, {MaskKind::none});
  EXPECT_EQ(visible_pairs(problem), 40);
  EXPECT_EQ(attention_flops(problem), 3840.0);
}

TEST(Flops, CausalTopLeft) {
  // sq = sk = 4, keep j <= i: rows see 1, 2, 3, 4 keys = 10 pairs; 2 * 128 * 10 = 2560 FLOPs.
  EXPECT_EQ(visible_pairs(one_head(4, 4, {MaskKind::causal})), 10);
  EXPECT_EQ(attention_flops(one_head(4, 4, {MaskKind::causal})), 2560.0);
  // sq = 5, sk = 3: rows see 1, 2, 3, then 3, 3 (clamped at sk) = 12.
  EXPECT_EQ(visible_pairs(one_head(5, 3, {MaskKind::causal})), 12);
  // sq = 3, sk = 5: top-left ignores the extra keys: 1 + 2 + 3 = 6.
  EXPECT_EQ(visible_pairs(one_head(3, 5, {MaskKind::causal})), 6);
  // sq = sk = 1024: 1024 * 1025 / 2 = 524800, about half of 1024^2; four batches 2099200.
  EXPECT_EQ(visible_pairs(make_problem(4, 2, 1, 1024, 1024, 64, 64, {MaskKind::causal})), 2099200);
}

TEST(Flops, CausalBottomRight) {
  // sq = 5, sk = 3, offset -2, keep j <= i - 2: rows 0 and 1 see nothing, then 1 + 2 + 3 = 6;
  // FLOPs 2 * 128 * 6 = 1536.
  EXPECT_EQ(visible_pairs(one_head(5, 3, {MaskKind::causal_br})), 6);
  EXPECT_EQ(attention_flops(one_head(5, 3, {MaskKind::causal_br})), 1536.0);
  // sq = 3, sk = 5, offset 2, keep j <= i + 2: 3 + 4 + 5 = 12.
  EXPECT_EQ(visible_pairs(one_head(3, 5, {MaskKind::causal_br})), 12);
  // Square: the same as top-left, 10.
  EXPECT_EQ(visible_pairs(one_head(4, 4, {MaskKind::causal_br})), 10);
  // Decode: one query against 1000 keys sees them all.
  EXPECT_EQ(visible_pairs(one_head(1, 1000, {MaskKind::causal_br})), 1000);
}

TEST(Flops, SlidingWindow) {
  // window(1,0), sq = sk = 4, keep i - 1 <= j <= i: 1 + 2 + 2 + 2 = 7.
  EXPECT_EQ(visible_pairs(one_head(4, 4, {MaskKind::window, 1, 0})), 7);
  // window(2,1), sq = sk = 6, keep i - 2 <= j <= i + 1: rows see [0,1] [0,2] [0,3] [1,4] [2,5]
  // [3,5] = 2 + 3 + 4 + 4 + 4 + 3 = 20.
  EXPECT_EQ(visible_pairs(one_head(6, 6, {MaskKind::window, 2, 1})), 20);
  // window(1,-1), sq = sk = 4, keep j >= i - 1: 4 + 4 + 3 + 2 = 13.
  EXPECT_EQ(visible_pairs(one_head(4, 4, {MaskKind::window, 1, -1})), 13);
  // window(-1,-1) is no mask: 16.
  EXPECT_EQ(visible_pairs(one_head(4, 4, {MaskKind::window, -1, -1})), 16);
  // window(0,0), sq = 2, sk = 5, offset 3: row 0 sees key 3, row 1 key 4 = 2.
  EXPECT_EQ(visible_pairs(one_head(2, 5, {MaskKind::window, 0, 0})), 2);
  // window(0,0), sq = 5, sk = 2, offset -3: rows 3 and 4 see keys 0 and 1; rows 0..2 none = 2.
  EXPECT_EQ(visible_pairs(one_head(5, 2, {MaskKind::window, 0, 0})), 2);
}

TEST(Flops, Padding) {
  // b = 2, sk = 6: key lengths (b + 1) * 6 / 3 = 2 and 4; sq = 3: 3 * 2 + 3 * 4 = 18 pairs.
  // hq = 2, d = 16: FLOPs = 2 * 32 * 2 * 18 = 2304.
  const Problem problem = make_problem(2, 2, 2, 3, 6, 16, 16, {MaskKind::padding});
  EXPECT_EQ(visible_pairs(problem), 18);
  EXPECT_EQ(attention_flops(problem), 2304.0);
  // b = 3, sk = 1: lengths 1/4, 2/4, 3/4 all round down to 0: nothing visible, no FLOPs.
  EXPECT_EQ(visible_pairs(make_problem(3, 1, 1, 4, 1, 64, 64, {MaskKind::padding})), 0);
  EXPECT_EQ(attention_flops(make_problem(3, 1, 1, 4, 1, 64, 64, {MaskKind::padding})), 0.0);
}

TEST(Flops, GqaCountsQueryHeadsForFlopsAndKvHeadsForBytes) {
  // b=1, hq=8, hkv=2, s=16, d=64, fp16: FLOPs = 2 * 128 * 8 * 256 = 524288.
  // Elements: q 16*8*64 = 8192, k 16*2*64 = 2048, v 2048, out 8192.
  // Bytes: 2 * (8192 + 2048 + 2048) + 2 * 8192 = 40960.
  Problem problem = make_problem(1, 8, 2, 16, 16, 64, 64, {MaskKind::none});
  problem.input_dtype = problem.output_dtype = DType::f16;
  EXPECT_EQ(attention_flops(problem), 524288.0);
  EXPECT_EQ(attention_bytes(problem), 40960.0);
  // MQA (hkv = 1): k and v shrink to 1024 elements each: 2 * (8192 + 2048) + 2 * 8192 = 36864.
  problem.heads_kv = 1;
  EXPECT_EQ(attention_flops(problem), 524288.0);
  EXPECT_EQ(attention_bytes(problem), 36864.0);
}

TEST(Flops, DifferentQkAndVHeadDims) {
  // dqk = 128, dv = 64, hq = 2, s = 3: 9 pairs; FLOPs = 2 * (128 + 64) * 2 * 9 = 6912.
  // fp32 elements: q 3*2*128 = 768, k 768, v 3*2*64 = 384, out 384; bytes 2304 * 4 = 9216.
  Problem problem = make_problem(1, 2, 2, 3, 3, 128, 128, {MaskKind::none});
  problem.head_dim_v = 64;
  EXPECT_EQ(attention_flops(problem), 6912.0);
  EXPECT_EQ(attention_bytes(problem), 9216.0);
}

TEST(Flops, Fp8BytesUseOneByteInputsAndTheOutputDtype) {
  // e4m3 in, bf16 out, s = 128, d = 128: q, k, v 16384 bytes each = 49152; out 16384 * 2 = 32768.
  Problem problem = make_problem(1, 1, 1, 128, 128, 128, 128, {MaskKind::none});
  problem.input_dtype = DType::e4m3;
  problem.output_dtype = DType::bf16;
  EXPECT_EQ(attention_bytes(problem), 81920.0);
  // The packed layout moves the same bytes.
  problem.layout = Layout::qkv_packed;
  EXPECT_EQ(attention_bytes(problem), 81920.0);
}

// visible_pairs against a brute-force count from the masks' textual definitions (mask.h), on
// random shapes, including the padding rule (b + 1) * sk / (batch + 1).
TEST(Flops, VisiblePairsMatchesBruteForceOnRandomShapes) {
  const auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> length(1, 40);
  std::uniform_int_distribution<int64_t> bound(-1, 10);
  std::uniform_int_distribution<int> kind(0, 4);
  for (int trial = 0; trial < 500; ++trial) {
    const Mask mask{static_cast<MaskKind>(kind(rng)), -1, -1};
    Problem problem = make_problem(length(rng) % 4 + 1, 1, 1, length(rng), length(rng), 8, 8, mask);
    if (mask.kind == MaskKind::window) {
      problem.mask.window_left = bound(rng);
      problem.mask.window_right = bound(rng);
    }
    const int64_t sq = problem.seqlen_q, sk = problem.seqlen_k, offset = sk - sq;
    const int64_t left = problem.mask.window_left, right = problem.mask.window_right;
    int64_t expected = 0;
    for (int64_t b = 0; b < problem.batch; ++b) {
      for (int64_t i = 0; i < sq; ++i) {
        for (int64_t j = 0; j < sk; ++j) {
          bool keep = true;
          switch (mask.kind) {
            case MaskKind::none:
              break;
            case MaskKind::causal:
              keep = j <= i;
              break;
            case MaskKind::causal_br:
              keep = j <= i + offset;
              break;
            case MaskKind::window:
              keep = (left == -1 || i + offset - left <= j) &&
                     (right == -1 || j <= i + offset + right);
              break;
            case MaskKind::padding:
              keep = j < (b + 1) * sk / (problem.batch + 1);
              break;
          }
          expected += keep ? 1 : 0;
        }
      }
    }
    ASSERT_EQ(visible_pairs(problem), expected) << shape_string(problem);
  }
}

TEST(Metrics, AccumulatesMaxRelL2AndRmse) {
  ErrorAccumulator errors;
  EXPECT_EQ(errors.max_abs(), 0);
  EXPECT_EQ(errors.rel_l2(), 0);
  EXPECT_EQ(errors.rmse(), 0);
  errors.add(1.0, 1.5);    // error 0.5
  errors.add(2.0, 1.0);    // error 1
  errors.add(-3.0, -3.0);  // error 0
  EXPECT_EQ(errors.count(), 3);
  EXPECT_EQ(errors.max_abs(), 1.0);
  // sqrt((0.25 + 1 + 0) / 3) and sqrt(1.25 / (2.25 + 1 + 9)).
  EXPECT_DOUBLE_EQ(errors.rmse(), std::sqrt(1.25 / 3));
  EXPECT_DOUBLE_EQ(errors.rel_l2(), std::sqrt(1.25 / 12.25));
  EXPECT_EQ(errors.nan_count(), 0);
  EXPECT_EQ(errors.inf_count(), 0);
}

TEST(Metrics, NanAndInfAreCountedAndMakeMaxInfinite) {
  ErrorAccumulator errors;
  errors.add(0.5, 0.25);
  errors.add(std::numeric_limits<double>::quiet_NaN(), 1.0);
  EXPECT_EQ(errors.nan_count(), 1);
  EXPECT_EQ(errors.max_abs(), std::numeric_limits<double>::infinity());
  errors.add(-std::numeric_limits<double>::infinity(), 1.0);
  EXPECT_EQ(errors.inf_count(), 1);
  EXPECT_EQ(errors.count(), 3);
  // The finite values still describe themselves: one value, error 0.25.
  EXPECT_DOUBLE_EQ(errors.rmse(), 0.25);
  EXPECT_FALSE(std::isnan(errors.rel_l2()));
  // A non-finite reference is never a pass.
  ErrorAccumulator broken_reference;
  broken_reference.add(1.0, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(broken_reference.max_abs(), std::numeric_limits<double>::infinity());
}

TEST(Metrics, ZeroReference) {
  ErrorAccumulator exact;
  exact.add(0.0, 0.0);
  EXPECT_EQ(exact.rel_l2(), 0);
  ErrorAccumulator off;
  off.add(1e-3, 0.0);
  EXPECT_EQ(off.rel_l2(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(off.max_abs(), 1e-3);
}

TEST(Metrics, MaxIsTheMaximumOnRandomData) {
  const auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  ErrorAccumulator errors;
  double max_error = 0, sum_sq_error = 0, sum_sq_ref = 0;
  constexpr int kValues = 1000;
  for (int i = 0; i < kValues; ++i) {
    const double reference = normal(rng);
    const double value = reference + 1e-3 * normal(rng);
    errors.add(value, reference);
    max_error = std::max(max_error, std::abs(value - reference));
    sum_sq_error += (value - reference) * (value - reference);
    sum_sq_ref += reference * reference;
  }
  EXPECT_EQ(errors.max_abs(), max_error);
  EXPECT_DOUBLE_EQ(errors.rmse(), std::sqrt(sum_sq_error / kValues));
  EXPECT_DOUBLE_EQ(errors.rel_l2(), std::sqrt(sum_sq_error / sum_sq_ref));
}

TEST(Metrics, RoundingErrorTermPerDtype) {
  // bf16 at 1: 1.3 -> 1.296875 (166/128); - 0.3 = 0.996875 -> 0.99609375 (255/256): 2^-8.
  EXPECT_EQ(rounding_error_term(DType::bf16, 1.0), std::ldexp(1.0, -8));
  // fp16 at 0.5: 0.8 -> 0.7998046875 (1638/2048); - 0.3 -> 0.499755859375 (2047/4096): 2^-12.
  EXPECT_EQ(rounding_error_term(DType::f16, 0.5), std::ldexp(1.0, -12));
  // fp16 at 1: 1.3 -> 1331/1024; - 0.3 = 0.99980... -> 1 exactly: no error.
  EXPECT_EQ(rounding_error_term(DType::f16, 1.0), 0.0);
  // e4m3 at 1: 1.3 -> 1.25; - 0.3 = 0.95 -> 0.9375: 2^-4.
  EXPECT_EQ(rounding_error_term(DType::e4m3, 1.0), 0.0625);
  // fp32 at 1: float(1.3) - 0.3 = 0.99999995... -> 1 - 2^-24.
  EXPECT_EQ(rounding_error_term(DType::f32, 1.0), std::ldexp(1.0, -24));
}

}  // namespace
}  // namespace attnbench
