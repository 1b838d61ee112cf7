// The input distributions (harness/measure/inputs.cpp) do what their names promise: here the
// attention-sink distribution, whose few sink keys must dominate every query's softmax and set
// K's largest magnitude, on fresh seeds each run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "harness/measure/checker.h"
#include "harness/measure/inputs.h"
#include "reference/formats.h"
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

// fp8_scaling per_head: each (batch, head) of Q, K and V gets the descale that puts its own amax on
// e4m3's largest value, 448; the stored values times their head's descale are the drawn values
// to e4m3's rounding (the same seed drawn at fp32 gives the drawn values).
TEST(Inputs, PerHeadDescalesPutEachHeadsAmaxOnE4m3sLargestValue) {
  const std::string shape = "b=2,hq=4,hkv=2,sq=48,sk=96,d=64";
  const Problem fp8 = parsed_shape(shape + ",dtype=e4m3,out=e4m3,fp8_scaling=per_head");
  const Problem exact = parsed_shape(shape + ",dtype=fp32");
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  ProblemInputs quantized, drawn;
  ASSERT_TRUE(make_inputs(fp8, Distribution::outliers, seed, quantized).ok);
  ASSERT_TRUE(make_inputs(exact, Distribution::outliers, seed, drawn).ok);
  EXPECT_EQ(quantized.q_descale, 1.0f);
  ASSERT_EQ(quantized.q_head_descales.size(), 2u * 4u);
  ASSERT_EQ(quantized.k_head_descales.size(), 2u * 2u);
  ASSERT_EQ(quantized.v_head_descales.size(), 2u * 2u);
  const AttentionInputs q8 = quantized.view(), q32 = drawn.view();
  struct Tensor {
    const TensorView& fp8;
    const TensorView& exact;
    int64_t seqlen, heads;
  };
  for (const Tensor& t :
       {Tensor{q8.q, q32.q, 48, 4}, Tensor{q8.k, q32.k, 96, 2}, Tensor{q8.v, q32.v, 96, 2}}) {
    TensorView stored = t.fp8;  // the e4m3 values as stored, before any descale
    stored.head_descales = nullptr;
    stored.descale = 1.0f;
    std::vector<float> descales;
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t h = 0; h < t.heads; ++h) {
        const float descale = t.fp8.descale_of(b, h);
        descales.push_back(descale);
        double stored_max = 0, drawn_max = 0;
        for (int64_t s = 0; s < t.seqlen; ++s) {
          for (int64_t d = 0; d < 64; ++d) {
            const double real = t.fp8.at(b, s, h, d), x = t.exact.at(b, s, h, d);
            stored_max =
                std::max(stored_max, std::fabs(static_cast<double>(stored.at(b, s, h, d))));
            drawn_max = std::max(drawn_max, std::fabs(x));
            // e4m3: 3 mantissa bits (half an ulp relative), subnormals below 2^-6 (ulp 2^-9).
            EXPECT_LE(std::fabs(real - x), std::fabs(x) / 16 + descale * 0x1p-10) << x;
          }
        }
        EXPECT_EQ(stored_max, 448.0) << "head " << h << " of batch " << b;
        EXPECT_NEAR(descale, drawn_max / 448, drawn_max / 448 * 1e-6);
      }
    }
    std::sort(descales.begin(), descales.end());
    EXPECT_LT(descales.front(), descales.back()) << "the heads' amaxes differ under outliers";
  }
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

// dO's own distribution (Problem::dout): q, k and v do not move with it; small is normal scaled by
// 2^-12; outliers puts rare large entries where normal has none; and a shared set of inputs that
// changes pass to another dout redraws dO as make_inputs would.
std::vector<float> dout_values(const ProblemInputs& inputs) {
  const AttentionInputs view = inputs.view();
  std::vector<float> values(static_cast<size_t>(inputs.layout.out_elements));
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<const float*>(view.dout.data)[i];  // fp32: the drawn values
  }
  return values;
}

TEST(Inputs, TheUpstreamGradientIsDrawnFromItsOwnDistribution) {
  const std::string shape = "b=1,hq=4,s=256,d=64,dtype=fp32,pass=bwd";
  const uint64_t seed = std::random_device{}();
  std::vector<std::vector<float>> douts;
  std::vector<unsigned char> first_q;
  for (const char* dout : {"normal", "small", "outliers"}) {
    SCOPED_TRACE(dout);
    ProblemInputs inputs;
    ASSERT_TRUE(make_inputs(parsed_shape(shape + ",dout=" + dout), Distribution::normal, seed,
                            inputs).ok);
    const auto* q = static_cast<const unsigned char*>(inputs.q_buffer.data());
    const std::vector<unsigned char> q_bytes(q, q + inputs.q_buffer.bytes());
    if (first_q.empty()) first_q = q_bytes;
    EXPECT_EQ(q_bytes, first_q) << "q moved with dO's distribution";
    douts.push_back(dout_values(inputs));
  }
  const auto largest = [](const std::vector<float>& values) {
    float most = 0;
    for (float value : values) most = std::max(most, std::abs(value));
    return most;
  };
  for (size_t i = 0; i < douts[0].size(); ++i) {
    ASSERT_EQ(douts[1][i], douts[0][i] / 4096.0f) << "small is normal * 2^-12, element " << i;
  }
  EXPECT_GT(largest(douts[0]), 2.0f);  // never zeros
  EXPECT_LT(largest(douts[0]), 7.0f);  // N(0, 1): P(|x| > 7) ~ 1e-11 per element
  EXPECT_GT(largest(douts[2]), 7.0f);  // ~65 outliers of sigma 10 among 65536

  // A forward's inputs reused for a backward of each dout: dO drawn as make_inputs draws it.
  ProblemInputs shared;
  ASSERT_TRUE(make_inputs(parsed_shape("b=1,hq=4,s=256,d=64,dtype=fp32"), Distribution::normal,
                          seed, shared).ok);
  for (size_t which : {1, 0, 2}) {
    const char* names[] = {"normal", "small", "outliers"};
    set_pass(parsed_shape(shape + ",dout=" + names[which]), seed, shared);
    EXPECT_EQ(dout_values(shared), douts[which]) << names[which];
  }
}

// Serving shapes store the same values: a paged cache holds the rows of its contiguous twin (so
// their references agree to the last bit), and a varlen sequence's rows are those of the same
// sequence of a dense batch; the pages' unused rows hold stale, finite values.
TEST(Inputs, APagedCacheAndItsContiguousTwinGiveTheSameReferenceToTheLastBit) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const char* shape : {"b=3,hq=8,hkv=2,sq=4,sk=300,d=32,dtype=bf16,mask=causal_br",
                            "hq=4,hkv=1,d=16,dtype=fp16,varlen=list(1:300,16:17,3:0,5:64)"}) {
    SCOPED_TRACE(shape);
    const Problem contiguous = parsed_shape(shape);
    Problem paged = contiguous;
    paged.page_size = 16;
    ProblemInputs dense_inputs, paged_inputs;
    ASSERT_TRUE(make_inputs(contiguous, Distribution::outliers, seed, dense_inputs).ok);
    ASSERT_TRUE(make_inputs(paged, Distribution::outliers, seed, paged_inputs).ok);
    const ReferenceRows a = compute_reference(dense_inputs, seed, 1.0f);
    const ReferenceRows b = compute_reference(paged_inputs, seed, 1.0f);
    ASSERT_EQ(a.rows.size(), b.rows.size());
    EXPECT_EQ(a.ref, b.ref);
    EXPECT_EQ(a.ref_lse, b.ref_lse);
    EXPECT_EQ(a.lowp, b.lowp);

    // Rows past a sequence's keys on its last page: stale values, finite and not all zero.
    const TensorView k = paged_inputs.view().k;
    std::set<int64_t> held;
    for (int64_t s = 0; s < paged.batch; ++s) {
      for (int64_t row = 0; row < paged.key_rows(s); ++row)
        held.insert(k.placement.row_start(s, row, 0));
    }
    const int64_t row_elements = paged.heads_kv * paged.head_dim_qk;
    int64_t stale_rows = 0, nonzero = 0;
    for (int64_t start = 0; start < paged_inputs.layout.k_buffer_elements; start += row_elements) {
      if (held.count(start) > 0) continue;
      ++stale_rows;
      for (int64_t e = start; e < start + row_elements; ++e) {
        const float value = load_element(paged.input_dtype, paged_inputs.k_buffer.data(), e);
        ASSERT_TRUE(std::isfinite(value));
        nonzero += value != 0.0f;
      }
    }
    EXPECT_GT(stale_rows, 0) << "some last page should be partial";
    EXPECT_GT(nonzero, stale_rows);
  }
}

TEST(Inputs, AVarlenSequenceHoldsTheRowsOfTheDenseBatchsSameSequence) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const Problem varlen = parsed_shape("hq=2,d=8,dtype=bf16,varlen=list(7:40,0:3,31:12)");
  Problem dense = varlen;
  dense.varlen = {};
  dense.layout = Layout::bshd;
  ProblemInputs ragged_inputs, dense_inputs;
  ASSERT_TRUE(make_inputs(varlen, Distribution::normal, seed, ragged_inputs).ok);
  ASSERT_TRUE(make_inputs(dense, Distribution::normal, seed, dense_inputs).ok);
  const AttentionInputs ragged = ragged_inputs.view(), full = dense_inputs.view();
  for (int64_t b = 0; b < varlen.batch; ++b) {
    for (int64_t h = 0; h < varlen.heads_q; ++h) {
      for (int64_t s = 0; s < varlen.query_length(b); ++s) {
        for (int64_t d = 0; d < varlen.head_dim_qk; ++d) {
          ASSERT_EQ(ragged.q.at(b, s, h, d), full.q.at(b, s, h, d));
        }
      }
      for (int64_t s = 0; s < varlen.key_length(b); ++s) {
        for (int64_t d = 0; d < varlen.head_dim_qk; ++d) {
          ASSERT_EQ(ragged.k.at(b, s, h, d), full.k.at(b, s, h, d));
          ASSERT_EQ(ragged.v.at(b, s, h, d), full.v.at(b, s, h, d));
        }
      }
    }
  }
}

}  // namespace
}  // namespace attnbench
