// The exact reference (reference/attention.h) against an independent formulation: whole
// (seqlen_q, seqlen_k) score matrices in long double with an explicit 0/1 mask built from the
// masks' textual definitions in mask.h (not from visible_keys), over every mask, GQA and MQA,
// seqlen_q != seqlen_k both ways, head_dim_qk != head_dim_v, all layouts, and every input dtype.
// Then lowp_row: close to the reference within the error its precision allows, and visibly
// rounded (not bit-equal to the reference) where the output dtype is narrow.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "reference/attention.h"
#include "reference/formats.h"
#include "tests/support/masks.h"
#include "tests/support/problems.h"

namespace attnbench {
namespace {

// fp64 against long double on O(1) values: only summation order differs.
constexpr double kFp64Tolerance = 1e-11;
// Float dot products and softmax over at most a few dozen terms, relative to max |v|.
constexpr double kFp32ComputeTolerance = 1e-5;
constexpr long double kNegativeInfinity = -std::numeric_limits<long double>::infinity();

// Real input values, (batch, seq, heads, dim) in C order, as the reference must see them.
struct LogicalTensor {
  int64_t seq = 0, heads = 0, dim = 0;
  std::vector<float> values;
  float& at(int64_t b, int64_t s, int64_t h, int64_t d) {
    return values[static_cast<size_t>(((b * seq + s) * heads + h) * dim + d)];
  }
  float at(int64_t b, int64_t s, int64_t h, int64_t d) const {
    return values[static_cast<size_t>(((b * seq + s) * heads + h) * dim + d)];
  }
};

// One problem with its inputs stored as the harness stores them (dtype, layout, descale).
struct TestCase {
  Problem problem;
  float descale = 1;
  std::vector<unsigned char> q_buffer, k_buffer, v_buffer;  // k, v unused for qkv_packed
  LogicalTensor q, k, v;
  ProblemLayout layout;

  AttentionInputs inputs() const {
    const bool packed = problem.layout == Layout::qkv_packed;
    const void* k_data = packed ? q_buffer.data() : k_buffer.data();
    const void* v_data = packed ? q_buffer.data() : v_buffer.data();
    return {{problem.input_dtype, q_buffer.data(), layout.q, descale},
            {problem.input_dtype, k_data, layout.k, descale},
            {problem.input_dtype, v_data, layout.v, descale},
            {}};
  }
};

void fill_tensor(const Problem& problem, float descale, float value_scale,
                 const TensorPlacement& placement, std::vector<unsigned char>& buffer,
                 LogicalTensor& logical, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, value_scale);
  logical.values.assign(
      static_cast<size_t>(problem.batch * logical.seq * logical.heads * logical.dim), 0);
  for (int64_t b = 0; b < problem.batch; ++b) {
    for (int64_t s = 0; s < logical.seq; ++s) {
      for (int64_t h = 0; h < logical.heads; ++h) {
        for (int64_t d = 0; d < logical.dim; ++d) {
          const float stored = normal(rng) / descale;
          const int64_t index = placement.offset + b * placement.strides.batch +
                                s * placement.strides.seq + h * placement.strides.head + d;
          store_element(problem.input_dtype, buffer.data(), index, stored);
          logical.at(b, s, h, d) = round_to(problem.input_dtype, stored) * descale;
        }
      }
    }
  }
}

// Inputs ~ N(0, value_scale^2), quantized to the input dtype; descale must be a power of two
// so the real values stored * descale are exact in float.
TestCase make_case(const Problem& problem, std::mt19937_64& rng, float value_scale = 1,
                   float descale = 1) {
  TestCase c;
  c.problem = problem;
  c.descale = descale;
  c.layout = describe_layout(problem);
  const size_t element_size = dtype_size(problem.input_dtype);
  c.q_buffer.assign(static_cast<size_t>(c.layout.q_buffer_elements) * element_size, 0);
  c.k_buffer.assign(static_cast<size_t>(c.layout.k_buffer_elements) * element_size, 0);
  c.v_buffer.assign(static_cast<size_t>(c.layout.v_buffer_elements) * element_size, 0);
  const bool packed = problem.layout == Layout::qkv_packed;
  c.q = {problem.seqlen_q, problem.heads_q, problem.head_dim_qk, {}};
  c.k = {problem.seqlen_k, problem.heads_kv, problem.head_dim_qk, {}};
  c.v = {problem.seqlen_k, problem.heads_kv, problem.head_dim_v, {}};
  fill_tensor(problem, descale, value_scale, c.layout.q, c.q_buffer, c.q, rng);
  fill_tensor(problem, descale, value_scale, c.layout.k, packed ? c.q_buffer : c.k_buffer, c.k,
              rng);
  fill_tensor(problem, descale, value_scale, c.layout.v, packed ? c.q_buffer : c.v_buffer, c.v,
              rng);
  return c;
}

// Batch b's valid keys under the padding mask, written from mask.h's comment.
int64_t padded_key_length(const Problem& p, int64_t b) {
  return ((b + 1) * p.seqlen_k) / (p.batch + 1);
}

// Whole-matrix attention in long double. out: (batch, heads_q, seqlen_q, head_dim_v);
// lse: (batch, heads_q, seqlen_q).
struct ExactAttention {
  std::vector<long double> out, lse;
  int64_t fully_masked_rows = 0;
};

ExactAttention independent_attention(const TestCase& c) {
  const Problem& p = c.problem;
  const long double scale =
      p.scale != 0 ? p.scale : 1.0L / std::sqrt(static_cast<long double>(p.head_dim_qk));
  const int64_t group = p.heads_q / p.heads_kv;  // query heads per kv head
  ExactAttention exact;
  exact.out.assign(static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q * p.head_dim_v), 0);
  exact.lse.assign(static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q), 0);
  std::vector<long double> scores(static_cast<size_t>(p.seqlen_q * p.seqlen_k));
  std::vector<char> keep(scores.size());
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      const int64_t kv_head = h / group;
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        for (int64_t j = 0; j < p.seqlen_k; ++j) {
          long double dot = 0;
          for (int64_t d = 0; d < p.head_dim_qk; ++d) {
            dot += static_cast<long double>(c.q.at(b, i, h, d)) * c.k.at(b, j, kv_head, d);
          }
          scores[static_cast<size_t>(i * p.seqlen_k + j)] = scale * dot;
          keep[static_cast<size_t>(i * p.seqlen_k + j)] =
              mask_keeps(p.mask, p.seqlen_q, p.seqlen_k, padded_key_length(p, b), i, j) ? 1 : 0;
        }
      }
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        const size_t row = static_cast<size_t>(i * p.seqlen_k);
        const size_t out_row =
            static_cast<size_t>(((b * p.heads_q + h) * p.seqlen_q + i) * p.head_dim_v);
        const size_t lse_index = static_cast<size_t>((b * p.heads_q + h) * p.seqlen_q + i);
        long double max_score = kNegativeInfinity;
        for (int64_t j = 0; j < p.seqlen_k; ++j) {
          if (keep[row + j]) max_score = std::max(max_score, scores[row + j]);
        }
        if (max_score == kNegativeInfinity) {
          exact.lse[lse_index] = kNegativeInfinity;
          ++exact.fully_masked_rows;
          continue;
        }
        long double sum = 0;
        for (int64_t j = 0; j < p.seqlen_k; ++j) {
          if (!keep[row + j]) continue;
          const long double weight = std::exp(scores[row + j] - max_score);
          sum += weight;
          for (int64_t d = 0; d < p.head_dim_v; ++d) {
            exact.out[out_row + d] += weight * c.v.at(b, j, kv_head, d);
          }
        }
        for (int64_t d = 0; d < p.head_dim_v; ++d) exact.out[out_row + d] /= sum;
        exact.lse[lse_index] = max_score + std::log(sum);
      }
    }
  }
  return exact;
}

float max_abs_value(const LogicalTensor& tensor) {
  float largest = 0;
  for (float value : tensor.values) largest = std::max(largest, std::abs(value));
  return largest;
}

// reference_row on every row against the independent result; returns the fully masked rows.
int64_t expect_reference_matches(const TestCase& c) {
  const Problem& p = c.problem;
  SCOPED_TRACE(shape_string(p));
  const ExactAttention exact = independent_attention(c);
  const AttentionInputs inputs = c.inputs();
  const double tolerance = kFp64Tolerance * std::max(1.0f, max_abs_value(c.v));
  std::vector<double> out(static_cast<size_t>(p.head_dim_v));
  double max_error = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        double lse = 0;
        reference_row(p, inputs, b, h, i, out.data(), &lse);
        const size_t lse_index = static_cast<size_t>((b * p.heads_q + h) * p.seqlen_q + i);
        const long double exact_lse = exact.lse[lse_index];
        if (exact_lse == kNegativeInfinity) {
          EXPECT_EQ(lse, -std::numeric_limits<double>::infinity())
              << "row " << b << "," << h << "," << i;
          for (double value : out)
            EXPECT_EQ(value, 0.0) << "masked row " << b << "," << h << "," << i;
          continue;
        }
        EXPECT_NEAR(lse, static_cast<double>(exact_lse),
                    kFp64Tolerance * std::max(1.0L, std::abs(exact_lse)))
            << "row " << b << "," << h << "," << i;
        for (int64_t d = 0; d < p.head_dim_v; ++d) {
          const long double expected = exact.out[static_cast<size_t>(
              ((b * p.heads_q + h) * p.seqlen_q + i) * p.head_dim_v + d)];
          EXPECT_FALSE(std::isnan(out[static_cast<size_t>(d)]));
          max_error = std::max(
              max_error, static_cast<double>(std::abs(out[static_cast<size_t>(d)] - expected)));
        }
      }
    }
  }
  EXPECT_LE(max_error, tolerance);
  return exact.fully_masked_rows;
}

const std::vector<Mask> kMasks = {
    {MaskKind::none},         {MaskKind::causal},        {MaskKind::causal_br},
    {MaskKind::window, 2, 1}, {MaskKind::window, 0, -1}, {MaskKind::window, -1, 0},
    {MaskKind::window, 3, 3}, {MaskKind::window, 0, 0},  {MaskKind::padding},
};

struct HeadConfig {
  int64_t heads_q, heads_kv;
};

class ReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto seed = std::random_device{}();
    seed_trace_ = "seed " + std::to_string(seed);
    rng_.seed(seed);
  }
  std::string seed_trace_;
  std::mt19937_64 rng_;
};

TEST_F(ReferenceTest, MatchesIndependentFormulationForEveryMaskShapeAndHeadMapping) {
  SCOPED_TRACE(seed_trace_);
  const std::vector<std::pair<int64_t, int64_t>> lengths = {{7, 7}, {5, 12}, {12, 5}, {1, 33}};
  const std::vector<HeadConfig> heads = {{4, 4}, {8, 2} /* GQA 4:1 */, {3, 1} /* MQA */};
  const std::vector<std::pair<int64_t, int64_t>> head_dims = {{16, 16}, {24, 8}};
  int64_t fully_masked_rows = 0;
  for (const Mask& mask : kMasks) {
    for (const auto& [sq, sk] : lengths) {
      for (const HeadConfig& head : heads) {
        for (const auto& [dqk, dv] : head_dims) {
          for (Layout layout : {Layout::bshd, Layout::bhsd}) {
            const Problem problem = make_problem(2, head.heads_q, head.heads_kv, sq, sk, dqk, dv,
                                                 mask, DType::f32, layout);
            ASSERT_TRUE(validate(problem).ok) << validate(problem).message;
            fully_masked_rows += expect_reference_matches(make_case(problem, rng_));
          }
        }
      }
    }
  }
  // The matrix includes rows with nothing visible (causal_br and windows with sq > sk).
  EXPECT_GT(fully_masked_rows, 0);
}

TEST_F(ReferenceTest, PackedLayout) {
  SCOPED_TRACE(seed_trace_);
  for (const Mask& mask : kMasks) {
    const Problem problem =
        make_problem(2, 3, 3, 9, 9, 16, 16, mask, DType::f32, Layout::qkv_packed);
    ASSERT_TRUE(validate(problem).ok);
    expect_reference_matches(make_case(problem, rng_));
  }
}

TEST_F(ReferenceTest, EveryInputDtype) {
  SCOPED_TRACE(seed_trace_);
  // FP8 with a power-of-two descale, so stored * descale is the exact real value.
  constexpr float kFp8Descale = 0.125f;
  for (DType dtype : {DType::f16, DType::bf16, DType::e4m3, DType::e5m2}) {
    for (const Mask& mask : {Mask{MaskKind::none}, Mask{MaskKind::causal_br}}) {
      const Problem problem = make_problem(2, 4, 2, 6, 11, 32, 32, mask, dtype);
      expect_reference_matches(make_case(problem, rng_, 1, is_fp8(dtype) ? kFp8Descale : 1));
    }
  }
}

TEST_F(ReferenceTest, LargeLogitsNeedTheMaxSubtracted) {
  SCOPED_TRACE(seed_trace_);
  // Inputs ~ N(0, 16^2), d = 64: logits have a spread of about 16 * 16 * 8 / 8 = 256 and reach
  // past 709, where exp overflows in double without the max subtracted.
  const Problem problem = make_problem(1, 2, 2, 16, 16, 64, 64, {MaskKind::causal});
  const TestCase c = make_case(problem, rng_, 16);
  expect_reference_matches(c);
  double lse = 0;
  std::vector<double> out(64);
  double largest_lse = 0;
  for (int64_t i = 0; i < problem.seqlen_q; ++i) {
    reference_row(problem, c.inputs(), 0, 0, i, out.data(), &lse);
    largest_lse = std::max(largest_lse, lse);
  }
  EXPECT_GT(largest_lse, 300) << "the case must exercise large logits";
}

TEST_F(ReferenceTest, FullyMaskedRowsGiveZeroAndMinusInfinityNeverNan) {
  SCOPED_TRACE(seed_trace_);
  const std::vector<Problem> problems = {
      // causal_br with sq > sk: rows 0 .. 6 see nothing.
      make_problem(1, 2, 1, 12, 5, 8, 8, {MaskKind::causal_br}),
      // window(0,0) with sq > sk: only the last 5 rows see a key.
      make_problem(1, 1, 1, 12, 5, 8, 8, {MaskKind::window, 0, 0}),
      // padding with sk = 1 and 3 batches: every key length rounds down to 0.
      make_problem(3, 2, 2, 4, 1, 8, 8, {MaskKind::padding}),
  };
  for (const Problem& problem : problems) {
    SCOPED_TRACE(shape_string(problem));
    const TestCase c = make_case(problem, rng_);
    EXPECT_GT(expect_reference_matches(c), 0);
    for (int64_t b = 0; b < problem.batch; ++b) {
      for (int64_t i = 0; i < problem.seqlen_q; ++i) {
        if (problem.visible(b, i).size() != 0) continue;
        std::vector<float> out(static_cast<size_t>(problem.head_dim_v), std::nanf(""));
        float lse = 0;
        lowp_row(problem, c.inputs(), 1, b, 0, i, out.data(), &lse);
        EXPECT_EQ(lse, -std::numeric_limits<float>::infinity());
        for (float value : out) EXPECT_EQ(value, 0.0f);
      }
    }
  }
}

TEST(TensorView, AtReadsThroughPlacementAndDescale) {
  // A bhsd e4m3 tensor, (batch 2, heads 3, seq 4, dim 5), descale 0.5.
  Problem problem = make_problem(2, 3, 3, 4, 4, 5, 5, {MaskKind::none}, DType::e4m3, Layout::bhsd);
  const ProblemLayout layout = describe_layout(problem);
  std::vector<uint8_t> buffer(static_cast<size_t>(layout.q_buffer_elements));
  // Store 1 at (b=1, s=2, h=1, d=3): index ((1 * 3 + 1) * 4 + 2) * 5 + 3 = 93.
  buffer[93] = float_to_e4m3_bits(1.0f);
  const TensorView view{DType::e4m3, buffer.data(), layout.q, 0.5f};
  EXPECT_EQ(view.at(1, 2, 1, 3), 0.5f);
  EXPECT_EQ(view.at(1, 1, 2, 3), 0.0f);
}

// Bounds for lowp_row against the reference, from the formats' precisions.
int mantissa_bits(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 23;
    case DType::f16:
      return 10;
    case DType::bf16:
      return 7;
    case DType::e4m3:
      return 3;
    case DType::e5m2:
      return 2;
  }
  return 0;
}

// Half the smallest subnormal: the absolute rounding error near zero.
double half_min_subnormal(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 0;
    case DType::f16:
      return std::ldexp(1.0, -25);
    case DType::bf16:
      return std::ldexp(1.0, -134);
    case DType::e4m3:
      return std::ldexp(1.0, -10);
    case DType::e5m2:
      return std::ldexp(1.0, -17);
  }
  return 0;
}

struct LowpComparison {
  double max_error = 0;
  double max_bound_ratio = 0;  // max of error / bound; <= 1 passes
  int64_t differs_from_reference = 0;
  int64_t not_representable = 0;
  int64_t values = 0;
};

// lowp_row on every row against reference_row. The bound per value: P's rounding moves each
// weight by at most half an ulp (relative 2^-(m+1), or half a subnormal in absolute terms), which
// moves the output by at most that times max|v| (the weights are divided by a sum >= 1); the
// output rounding adds half an ulp of the output dtype; float arithmetic adds a little more.
LowpComparison compare_lowp(const TestCase& c, float out_scale) {
  const Problem& p = c.problem;
  const AttentionInputs inputs = c.inputs();
  const double max_v = max_abs_value(c.v);
  LowpComparison result;
  std::vector<double> reference(static_cast<size_t>(p.head_dim_v));
  std::vector<float> lowp(static_cast<size_t>(p.head_dim_v));
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        double reference_lse = 0;
        float lowp_lse = 0;
        reference_row(p, inputs, b, h, i, reference.data(), &reference_lse);
        lowp_row(p, inputs, out_scale, b, h, i, lowp.data(), &lowp_lse);
        if (std::isfinite(reference_lse)) {
          EXPECT_NEAR(lowp_lse, reference_lse,
                      kFp32ComputeTolerance * std::max(1.0, std::abs(reference_lse)));
        }
        const double keys = static_cast<double>(p.visible(b, i).size());
        const double p_error = p.p_dtype == DType::f32
                                   ? 0
                                   : (std::ldexp(1.0, -(mantissa_bits(p.p_dtype) + 1)) +
                                      keys * half_min_subnormal(p.p_dtype)) *
                                         max_v;
        const double compute_error = kFp32ComputeTolerance * max_v;
        for (int64_t d = 0; d < p.head_dim_v; ++d) {
          const double ref = reference[static_cast<size_t>(d)];
          const float value = lowp[static_cast<size_t>(d)];
          const double scale = is_fp8(p.output_dtype) ? out_scale : 1.0;
          const double out_error = p.output_dtype == DType::f32
                                       ? 0
                                       : std::ldexp(1.0, -(mantissa_bits(p.output_dtype) + 1)) *
                                                 (std::abs(ref) + p_error + compute_error) +
                                             half_min_subnormal(p.output_dtype) / scale;
          const double bound = p_error + compute_error + out_error;
          const double error = std::abs(value - ref);
          result.max_error = std::max(result.max_error, error);
          result.max_bound_ratio = std::max(result.max_bound_ratio, error / bound);
          result.differs_from_reference += value != static_cast<float>(ref) ? 1 : 0;
          const float stored = static_cast<float>(value * scale);
          result.not_representable += round_to(p.output_dtype, stored) != stored ? 1 : 0;
          ++result.values;
        }
      }
    }
  }
  return result;
}

TEST_F(ReferenceTest, LowpIsCloseToTheReferenceAtEachPrecision) {
  SCOPED_TRACE(seed_trace_);
  struct Precision {
    DType input, output, p;
    float out_scale;
  };
  const std::vector<Precision> precisions = {
      {DType::f32, DType::f32, DType::f32, 1},
      {DType::f16, DType::f16, DType::f32, 1},
      {DType::bf16, DType::bf16, DType::f32, 1},
      {DType::bf16, DType::bf16, DType::bf16, 1},  // P rounded as FlashAttention-2's MMA sees it
      {DType::e4m3, DType::bf16, DType::e4m3, 1},  // FlashAttention-3's FP8 path
      {DType::e4m3, DType::e4m3, DType::e4m3, 8},  // FP8 output, scaled by 8 before rounding
  };
  for (const Precision& precision : precisions) {
    for (const Mask& mask : {Mask{MaskKind::none}, Mask{MaskKind::causal_br}}) {
      Problem problem = make_problem(2, 4, 2, 9, 40, 32, 16, mask, precision.input);
      problem.output_dtype = precision.output;
      problem.p_dtype = precision.p;
      SCOPED_TRACE(shape_string(problem));
      const LowpComparison result = compare_lowp(
          make_case(problem, rng_, 1, is_fp8(precision.input) ? 0.25f : 1), precision.out_scale);
      EXPECT_LE(result.max_bound_ratio, 1.0) << "max error " << result.max_error;
      EXPECT_EQ(result.not_representable, 0) << "outputs must be values of the output dtype";
      if (precision.output != DType::f32) {
        // Rounding happened: most outputs are not the reference rounded to float.
        EXPECT_GT(result.differs_from_reference, result.values / 2);
      }
    }
  }
}

TEST_F(ReferenceTest, LowpBf16OutputIsNotBitEqualToTheReference) {
  SCOPED_TRACE(seed_trace_);
  const Problem problem = make_problem(1, 2, 2, 8, 8, 64, 64, {MaskKind::none}, DType::bf16);
  const TestCase c = make_case(problem, rng_);
  std::vector<double> reference(64);
  std::vector<float> lowp(64);
  int64_t equal = 0, total = 0;
  double max_error = 0;
  for (int64_t i = 0; i < problem.seqlen_q; ++i) {
    reference_row(problem, c.inputs(), 0, 1, i, reference.data(), nullptr);
    lowp_row(problem, c.inputs(), 1, 0, 1, i, lowp.data(), nullptr);
    for (size_t d = 0; d < lowp.size(); ++d) {
      equal += lowp[d] == static_cast<float>(reference[d]) ? 1 : 0;
      ++total;
      EXPECT_EQ(round_to(DType::bf16, lowp[d]), lowp[d]) << "not a bf16 value";
      max_error = std::max(max_error, std::abs(lowp[d] - reference[d]));
    }
  }
  EXPECT_LT(equal, total);
  EXPECT_GT(max_error, 0.0);
  // Outputs are convex combinations of N(0,1) values: half a bf16 ulp (2^-8 relative) of a value
  // below 4, plus the float arithmetic.
  EXPECT_LE(max_error, std::ldexp(4.0, -8) + 1e-4);
}

// FlashAttention-3's FP8 convention, on a row small enough to work by hand: keys 0 and 1 with
// scores 0 and -0.7, so P = (1, e^-0.7 = 0.4966); e4m3 rounds 0.4966 to 0.5 (spacing 2^-5 in
// [0.25, 0.5) -> 15.89 steps -> 16). With v = (0, 1), the output is round(P1) / (1 + P1) when
// the row sum comes from the fp32 P (0.33408); summing the rounded P would give 0.5 / 1.5 =
// 0.33333 and not rounding at all 0.4966 / 1.4966 = 0.33181.
TEST(Lowp, Fp8PathRoundsPButSumsTheFp32Values) {
  Problem problem = make_problem(1, 1, 1, 1, 2, 1, 1, {MaskKind::none});
  problem.scale = 1;
  problem.p_dtype = DType::e4m3;
  const float score = -0.7f;
  const std::vector<float> q = {1.0f}, k = {0.0f, score}, v = {0.0f, 1.0f};
  const ProblemLayout layout = describe_layout(problem);
  const AttentionInputs inputs{{DType::f32, q.data(), layout.q, 1.0f},
                               {DType::f32, k.data(), layout.k, 1.0f},
                               {DType::f32, v.data(), layout.v, 1.0f},
                               {}};
  float out = 0, lse = 0;
  lowp_row(problem, inputs, 1, 0, 0, 0, &out, &lse);
  const float p1 = std::exp(score);
  const float rounded_p1 = round_to(DType::e4m3, p1);
  ASSERT_EQ(rounded_p1, 0.5f);
  EXPECT_NEAR(out, rounded_p1 / (1 + p1), 1e-6);
  EXPECT_GT(std::abs(out - rounded_p1 / (1 + rounded_p1)), 1e-4);
  EXPECT_GT(std::abs(out - p1 / (1 + p1)), 1e-4);
  EXPECT_NEAR(lse, std::log(1 + p1), 1e-6);

  // Kept in fp32, P is not rounded.
  problem.p_dtype = DType::f32;
  lowp_row(problem, inputs, 1, 0, 0, 0, &out, &lse);
  EXPECT_NEAR(out, p1 / (1 + p1), 1e-6);
}

}  // namespace
}  // namespace attnbench
