// The exact backward (reference/attention_backward.h) against the definition of a gradient:
// central differences of L = sum(dO * O), the forward computed by reference_row, for every
// element of q, k and v, over GQA, a separate head_dim_v, rows without a visible key and keys
// no query sees. Then the low-precision twin: close to the truth in fp32, visibly rounded in bf16.
// (tests/reference/test_backward_vs_autograd.py checks the same gradients against torch.autograd.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "reference/attention_backward.h"
#include "reference/flops.h"
#include "reference/formats.h"
#include "tests/support/problems.h"

namespace attnbench {
namespace {

// fp32 inputs in bshd with a fresh random fill; dout placed like out.
struct Case {
  Problem problem;
  ProblemLayout layout;
  std::vector<float> q, k, v, dout;

  explicit Case(const Problem& p) : problem(p), layout(describe_layout(p)) {
    std::mt19937 rng(std::random_device{}());
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const auto fill = [&](std::vector<float>& values, int64_t count) {
      values.resize(static_cast<size_t>(count));
      for (float& x : values) x = round_to(p.input_dtype, normal(rng));
    };
    fill(q, layout.q_buffer_elements);
    fill(k, layout.k_buffer_elements);
    fill(v, layout.v_buffer_elements);
    fill(dout, layout.out_elements);
  }
  AttentionInputs inputs() const {
    return {{DType::f32, q.data(), layout.q, 1.0f},
            {DType::f32, k.data(), layout.k, 1.0f},
            {DType::f32, v.data(), layout.v, 1.0f},
            {DType::f32, dout.data(), layout.out, 1.0f}};
  }
  // L = sum over every output element of dO * O, in fp64.
  double loss() const {
    const Problem& p = problem;
    const AttentionInputs in = inputs();
    std::vector<double> out(static_cast<size_t>(p.head_dim_v));
    double sum = 0;
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t h = 0; h < p.heads_q; ++h)
        for (int64_t i = 0; i < p.seqlen_q; ++i) {
          reference_row(p, in, b, h, i, out.data(), nullptr);
          for (int64_t d = 0; d < p.head_dim_v; ++d) sum += out[d] * in.dout.at(b, i, h, d);
        }
    return sum;
  }
  // dL/dx by central differences over the steps the float tensor really took (x +- step rounds
  // where it crosses a power of two: -0.9995 - 2^-10 loses x's last bit).
  double numeric(std::vector<float>& tensor, size_t index) {
    constexpr float kStep = 0x1p-10f;
    const float saved = tensor[index];
    tensor[index] = saved + kStep;
    const double up_x = tensor[index];
    const double up = loss();
    tensor[index] = saved - kStep;
    const double down_x = tensor[index];
    const double down = loss();
    tensor[index] = saved;
    return (up - down) / (up_x - down_x);
  }
};

// The gradients of every row, as the checker computes them.
struct Gradients {
  std::vector<double> dq, dk, dv;  // bshd, like the inputs
};
Gradients exact_gradients(const Case& c) {
  const Problem& p = c.problem;
  const AttentionInputs in = c.inputs();
  Gradients g;
  g.dq.resize(static_cast<size_t>(c.layout.dq_elements));
  g.dk.resize(static_cast<size_t>(c.layout.dk_elements));
  g.dv.resize(static_cast<size_t>(c.layout.dv_elements));
  const int64_t group = p.heads_q / p.heads_kv;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        const auto stats = reference_row_statistics(p, in, b, h, i);
        reference_dq_row(p, in, stats, b, h, i, &g.dq[c.layout.dq.row_start(b, i, h)]);
      }
    for (int64_t hk = 0; hk < p.heads_kv; ++hk) {
      std::vector<RowStatistics<double>> stats;
      for (int64_t g2 = 0; g2 < group; ++g2)
        for (int64_t i = 0; i < p.seqlen_q; ++i)
          stats.push_back(reference_row_statistics(p, in, b, hk * group + g2, i));
      for (int64_t j = 0; j < p.seqlen_k; ++j)
        reference_dkv_row(p, in, stats.data(), b, hk, j, &g.dk[c.layout.dk.row_start(b, j, hk)],
                          &g.dv[c.layout.dv.row_start(b, j, hk)]);
    }
  }
  return g;
}

void expect_matches_differences(Case& c) {
  const Gradients g = exact_gradients(c);
  const std::pair<std::vector<float>*, const std::vector<double>*> tensors[] = {
      {&c.q, &g.dq}, {&c.k, &g.dk}, {&c.v, &g.dv}};
  const char* names[] = {"dq", "dk", "dv"};
  for (int t = 0; t < 3; ++t) {
    auto& [values, gradient] = tensors[t];
    double largest = 0;
    for (size_t e = 0; e < values->size(); ++e) {
      const double expected = c.numeric(*values, e);
      largest = std::max(largest, std::fabs(expected));
      // The central difference's own error is O(step^2) times a third derivative of order one.
      ASSERT_NEAR((*gradient)[e], expected, 1e-5)
          << names[t] << " element " << e << " of " << shape_string(c.problem);
    }
    EXPECT_GT(largest, 1e-2) << names[t] << ": the gradients must not all vanish";
  }
}

TEST(ReferenceBackward, EqualsCentralDifferencesWithGqaAndASeparateValueDim) {
  Case c(make_problem(2, 4, 2, 5, 7, 4, 3, {MaskKind::causal_br}));
  expect_matches_differences(c);
}

TEST(ReferenceBackward, EqualsCentralDifferencesWithEmptyRowsAndUnseenKeys) {
  // 6 queries, 4 keys, bottom-right causal: rows 0 and 1 see no key (dQ 0); a window that ends
  // left of the last keys leaves them unseen (dK = dV = 0).
  Case empty_rows(make_problem(1, 2, 1, 6, 4, 3, 3, {MaskKind::causal_br}));
  expect_matches_differences(empty_rows);
  const Gradients g = exact_gradients(empty_rows);
  for (int64_t d = 0; d < 3; ++d) EXPECT_EQ(g.dq[empty_rows.layout.dq.row_start(0, 0, 0) + d], 0.0);

  Case unseen(make_problem(1, 1, 1, 3, 8, 3, 3, {MaskKind::window, 1, 0}));
  expect_matches_differences(unseen);
  const Gradients u = exact_gradients(unseen);
  for (int64_t d = 0; d < 3; ++d) EXPECT_EQ(u.dk[unseen.layout.dk.row_start(0, 0, 0) + d], 0.0);
}

// The twin at fp32 is the truth to fp32 rounding; at bf16 its gradients are bf16 values, off by
// about their rounding, never equal throughout.
TEST(LowpBackward, Fp32IsCloseAndBf16IsRounded) {
  for (const DType dtype : {DType::f32, DType::bf16}) {
    Case c(make_problem(1, 2, 1, 9, 13, 8, 8, {MaskKind::causal}, dtype));
    const Problem& p = c.problem;
    const AttentionInputs in = c.inputs();
    double max_error = 0, max_value = 0;
    int rounded = 0, total = 0;
    for (int64_t h = 0; h < p.heads_q; ++h)
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        std::vector<double> exact(8);
        std::vector<float> lowp(8);
        reference_dq_row(p, in, reference_row_statistics(p, in, 0, h, i), 0, h, i, exact.data());
        lowp_dq_row(p, in, lowp_row_statistics(p, in, 0, h, i), 0, h, i, lowp.data());
        for (int d = 0; d < 8; ++d) {
          max_error = std::max(max_error, std::fabs(lowp[d] - exact[d]));
          max_value = std::max(max_value, std::fabs(exact[d]));
          rounded += round_to(DType::bf16, lowp[d]) == lowp[d] ? 1 : 0;
          ++total;
        }
      }
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    EXPECT_GT(max_value, 1e-2);
    if (dtype == DType::f32) {
      EXPECT_LT(max_error, 1e-5 * std::max(1.0, max_value));
    } else {
      EXPECT_EQ(rounded, total) << "bf16 gradients are bf16 values";
      EXPECT_GT(max_error, 0.0);
      EXPECT_LT(max_error, 0x1p-6 * std::max(1.0, max_value));
    }
  }
}

// Backward FLOPs are the five products over the visible pairs: 2.5x the forward at dqk = dv,
// fwd_bwd the sum; bytes add dO, the LSE and the gradients to what the forward moves.
TEST(BackwardCounts, FlopsAreFiveProductsAndBytesCountEveryTensorOnce) {
  Problem p = parsed_shape("b=2,hq=8,hkv=2,s=128,d=64,dtype=bf16,mask=causal");
  const double forward = attention_flops(p), forward_bytes = attention_bytes(p);
  p.pass = Pass::bwd;
  EXPECT_DOUBLE_EQ(attention_flops(p), 2.5 * forward);
  const double q_bytes = 2.0 * 2 * 128 * 8 * 64, kv_bytes = 2.0 * 2 * 128 * 2 * 64;
  const double lse_bytes = 4.0 * 2 * 8 * 128;
  // forward's q, k, v, out + dout + lse + dq, dk, dv
  EXPECT_DOUBLE_EQ(attention_bytes(p),
                   forward_bytes + q_bytes + lse_bytes + q_bytes + 2 * kv_bytes);
  p.pass = Pass::fwd_bwd;
  EXPECT_DOUBLE_EQ(attention_flops(p), 3.5 * forward);
  p.head_dim_v = 32;
  p.pass = Pass::bwd;
  Problem forward_only = p;
  forward_only.pass = Pass::fwd;
  EXPECT_DOUBLE_EQ(attention_flops(p) / attention_flops(forward_only), (3 * 64 + 2 * 32) / 96.0);
}

TEST(BackwardShapes, ThePassRoundTripsAndAForwardReadsAsBefore) {
  const Problem backward = parsed_shape("b=1,hq=2,s=17,d=64,dtype=bf16,mask=causal,pass=bwd");
  EXPECT_EQ(backward.pass, Pass::bwd);
  EXPECT_EQ(shape_string(backward),
            "b=1,hq=2,hkv=2,sq=17,sk=17,d=64,dtype=bf16,mask=causal,pass=bwd");
  EXPECT_EQ(shape_string(parsed_shape(shape_string(backward))), shape_string(backward));
  EXPECT_EQ(shape_string(parsed_shape("b=1,hq=2,s=17,d=64,pass=fwd")).find("pass"),
            std::string::npos);
  Problem problem;
  const Status bad = parse_shape("b=1,pass=backward", problem);
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.message.find("accepted fwd, bwd, fwd_bwd"), std::string::npos) << bad.message;
}

// dO's distribution is part of a backward's shape (named when not normal) and never of a
// forward's: the passes of one shape share q, k and v whatever dO is.
TEST(BackwardShapes, TheUpstreamGradientsDistributionIsPartOfABackwardsShapeOnly) {
  const Problem small = parsed_shape("b=1,hq=2,s=17,d=64,dtype=fp16,pass=bwd,dout=small");
  EXPECT_EQ(small.dout, UpstreamGradient::small);
  EXPECT_EQ(shape_string(small), "b=1,hq=2,hkv=2,sq=17,sk=17,d=64,dtype=fp16,pass=bwd,dout=small");
  EXPECT_EQ(shape_string(parsed_shape(shape_string(small))), shape_string(small));
  EXPECT_EQ(shape_string(parsed_shape("b=1,hq=2,s=17,d=64,pass=bwd,dout=normal")).find("dout"),
            std::string::npos);
  EXPECT_EQ(inputs_shape(small), inputs_shape(parsed_shape("b=1,hq=2,s=17,d=64,dtype=fp16")));
  EXPECT_EQ(in_pass(small, Pass::fwd).dout, UpstreamGradient::normal);
  EXPECT_EQ(in_pass(small, Pass::fwd_bwd).dout, UpstreamGradient::small);

  Problem problem;
  const Status forward = parse_shape("b=1,hq=2,s=17,d=64,dout=small", problem);
  EXPECT_FALSE(forward.ok);
  EXPECT_NE(forward.message.find("accepted only with pass bwd or fwd_bwd"), std::string::npos)
      << forward.message;
  const Status unknown = parse_shape("b=1,pass=bwd,dout=tiny", problem);
  EXPECT_FALSE(unknown.ok);
  EXPECT_NE(unknown.message.find("accepted normal, small, outliers"), std::string::npos)
      << unknown.message;
}

}  // namespace
}  // namespace attnbench
