// The input distributions (harness/measure/inputs.cpp) do what their names promise: here the
// attention-sink distribution, whose few sink keys must dominate every query's softmax and set
// K's largest magnitude, on fresh seeds each run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "harness/measure/inputs.h"
#include "reference/problem.h"
#include "tests/support/problems.h"

namespace attnbench {
namespace {

bool is_sink(int64_t key, int64_t seqlen) {
  return key == 0 || key == seqlen / 3 || key == 2 * seqlen / 3;
}

TEST(Inputs, SinkKeysTakeMostOfEveryQuerysWeightAndSetKsAmax) {
  // GQA 2:1, fp32 so the values are the drawn ones.
  const Problem problem = parsed_shape("b=2,hq=4,hkv=2,sq=48,sk=96,d=64,dtype=fp32");
  ProblemInputs inputs;
  const uint64_t seed = std::random_device{}();
  ASSERT_TRUE(make_inputs(problem, Distribution::sink, seed, inputs).ok);
  const AttentionInputs view = inputs.view();
  const double scale = problem.softmax_scale();
  int rows = 0, dominated = 0;
  double smallest_gap = 1e9;
  for (int64_t b = 0; b < problem.batch; ++b) {
    for (int64_t h = 0; h < problem.heads_q; ++h) {
      const int64_t g = h / (problem.heads_q / problem.heads_kv);
      for (int64_t i = 0; i < problem.seqlen_q; ++i) {
        std::vector<double> logits(static_cast<size_t>(problem.seqlen_k));
        for (int64_t j = 0; j < problem.seqlen_k; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < problem.head_dim_qk; ++d)
            dot += static_cast<double>(view.q.at(b, i, h, d)) * view.k.at(b, j, g, d);
          logits[static_cast<size_t>(j)] = scale * dot;
        }
        double sink_min = 1e300, other_max = -1e300, total = 0, sink_weight = 0;
        const double top = *std::max_element(logits.begin(), logits.end());
        for (int64_t j = 0; j < problem.seqlen_k; ++j) {
          const double logit = logits[static_cast<size_t>(j)];
          const double weight = std::exp(logit - top);
          total += weight;
          if (is_sink(j, problem.seqlen_k)) {
            sink_min = std::min(sink_min, logit);
            sink_weight += weight;
          } else {
            other_max = std::max(other_max, logit);
          }
        }
        ++rows;
        dominated += sink_weight / total > 0.99;
        smallest_gap = std::min(smallest_gap, sink_min - other_max);
      }
    }
  }
  // Sink logits stand about 20 above the rest (less the noise of q . k).
  EXPECT_GT(smallest_gap, 8.0) << "seed " << seed;
  EXPECT_EQ(dominated, rows) << "seed " << seed;
  // K's largest magnitude is a sink key's: what an FP8 per-tensor scale is set by.
  double sink_amax = 0, other_amax = 0;
  for (int64_t b = 0; b < problem.batch; ++b)
    for (int64_t j = 0; j < problem.seqlen_k; ++j)
      for (int64_t g = 0; g < problem.heads_kv; ++g)
        for (int64_t d = 0; d < problem.head_dim_qk; ++d) {
          double& amax = is_sink(j, problem.seqlen_k) ? sink_amax : other_amax;
          amax = std::max(amax, static_cast<double>(std::fabs(view.k.at(b, j, g, d))));
        }
  EXPECT_GT(sink_amax, 2 * other_amax) << "seed " << seed;
}

TEST(Inputs, EveryDistributionHasANameTheSuitesAndTheCliAccept) {
  for (const Distribution distribution : kDistributions) {
    Distribution parsed = Distribution::normal;
    ASSERT_TRUE(parse_distribution(std::string(distribution_name(distribution)), parsed));
    EXPECT_EQ(parsed, distribution);
    EXPECT_NE(accepted_distribution_names().find(distribution_name(distribution)),
              std::string::npos);
  }
  Distribution unchanged = Distribution::outliers;
  EXPECT_FALSE(parse_distribution("sinks", unchanged));
  EXPECT_EQ(unchanged, Distribution::outliers);
}

}  // namespace
}  // namespace attnbench
