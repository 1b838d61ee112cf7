// The gradients' group statistics on BLAS blocks (harness/measure/group_statistics.h) against the
// row-wise reference they replace for the key rows (reference/attention_backward.h): the exact
// LSE, D and D's uncertainty to fp64 rounding, the low-precision ones to fp32 rounding, over GQA,
// a mask that leaves rows without a key, a ragged last block and fresh random 16-bit inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "harness/measure/group_statistics.h"
#include "harness/measure/inputs.h"
#include "tests/support/fresh_seed.h"
#include "tests/support/problems.h"

namespace attnbench {
namespace {

void expect_close(double got, double want, double relative, const char* what, int64_t row) {
  if (std::isinf(want)) {
    EXPECT_EQ(got, want) << what << " row " << row;
    return;
  }
  EXPECT_NEAR(got, want, relative * std::max(1.0, std::fabs(want))) << what << " row " << row;
}

TEST(GroupStatistics, AreTheRowWiseReferencesOnBlasBlocks) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  // 300 query rows: two full blocks of 128 and a ragged one; bottom-right causal with 300 > 200
  // keys leaves the first 100 rows without a key.
  Problem problem =
      parsed_shape("b=2,hq=6,hkv=2,sq=300,sk=200,d=32,dtype=bf16,mask=causal_br,pass=bwd");
  ProblemInputs inputs;
  ASSERT_TRUE(make_inputs(problem, Distribution::outliers, seed, inputs).ok);
  const AttentionInputs view = inputs.view();
  std::vector<RowStatistics<double>> exact;
  std::vector<RowStatistics<float>> lowp;
  group_statistics(problem, view, 1, 1, exact, lowp);
  ASSERT_EQ(exact.size(), 3u * 300);
  for (int64_t g = 0; g < 3; ++g) {
    for (int64_t i = 0; i < problem.seqlen_q; ++i) {
      const size_t at = static_cast<size_t>(g * problem.seqlen_q + i);
      const int64_t h = 1 * 3 + g;
      const RowStatistics<double> want = reference_row_statistics(problem, view, 1, h, i);
      const RowStatistics<float> want_lowp = lowp_row_statistics(problem, view, 1, h, i);
      expect_close(exact[at].lse, want.lse, 1e-12, "lse", i);
      expect_close(exact[at].delta, want.delta, 1e-11, "delta", i);
      if (std::isfinite(want.lse)) {
        expect_close(exact[at].delta_uncertainty, want.delta_uncertainty, 1e-9, "u", i);
      }
      expect_close(lowp[at].lse, want_lowp.lse, 1e-5, "lowp lse", i);
      // O is rounded to bf16 in both: an fp32 sum that lands the other side of a rounding
      // boundary moves D by |dO| ulp(O); allow a few of those.
      expect_close(lowp[at].delta, want_lowp.delta, 5e-2, "lowp delta", i);
    }
  }
}

// dQ rows of one head on BLAS blocks against the row-wise reference_dq_row and lowp_dq_row, their
// envelopes included, on rows with and without visible keys.
TEST(GroupStatistics, DqRowsAreTheRowWiseReferencesOnBlasBlocks) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Problem problem =
      parsed_shape("b=2,hq=4,hkv=2,sq=300,sk=200,d=32,dv=16,dtype=fp16,mask=causal_br,pass=bwd");
  ProblemInputs inputs;
  ASSERT_TRUE(make_inputs(problem, Distribution::large_logits, seed, inputs).ok);
  const AttentionInputs view = inputs.view();
  const std::vector<int64_t> queries = {0, 99, 100, 101, 150, 299};  // 0 and 99 see no key
  const int64_t b = 1, h = 3;
  std::vector<RowStatistics<double>> exact;
  std::vector<RowStatistics<float>> lowp;
  for (int64_t i : queries) {
    exact.push_back(reference_row_statistics(problem, view, b, h, i));
    lowp.push_back(lowp_row_statistics(problem, view, b, h, i));
  }
  const size_t n = queries.size(), dqk = 32;
  std::vector<double> dq(n * dqk);
  std::vector<float> lowp_dq(n * dqk);
  std::vector<RowEnvelope> envelopes(n);
  head_dq_rows(problem, view, b, h, queries, exact, lowp, dq.data(), lowp_dq.data(),
               envelopes.data());
  for (size_t r = 0; r < n; ++r) {
    std::vector<double> want(dqk);
    std::vector<float> want_lowp(dqk);
    RowEnvelope want_envelope;
    reference_dq_row(problem, view, exact[r], b, h, queries[r], want.data(), &want_envelope);
    lowp_dq_row(problem, view, lowp[r], b, h, queries[r], want_lowp.data());
    for (size_t d = 0; d < dqk; ++d) {
      EXPECT_NEAR(dq[r * dqk + d], want[d], 1e-10 * std::max(1.0, std::fabs(want[d]))) << r;
      // fp16 rounding of dS and dQ in both; a sum landing the other side of a boundary moves
      // dQ by an fp16 ulp of a term.
      EXPECT_NEAR(lowp_dq[r * dqk + d], want_lowp[d],
                  2e-2 * std::max(1.0, std::fabs(static_cast<double>(want_lowp[d]))))
          << r;
    }
    EXPECT_NEAR(envelopes[r].o_rounding, want_envelope.o_rounding,
                1e-9 * std::max(1.0, want_envelope.o_rounding));
    EXPECT_NEAR(envelopes[r].magnitude, want_envelope.magnitude,
                1e-9 * std::max(1.0, want_envelope.magnitude));
    EXPECT_NEAR(envelopes[r].max_exponent, want_envelope.max_exponent,
                1e-9 * std::max(1.0, want_envelope.max_exponent));
  }
  EXPECT_EQ(dq[0], 0.0);  // no visible key: no gradient
}

}  // namespace
}  // namespace attnbench
