// Variable-length batches (reference/varlen.h) through the reference: the shape text, the errors,
// the packed thd placement (every element of every tensor once, sequence after sequence), the
// masks per sequence, FLOPs and bytes over each sequence's own lengths, and the reference of a
// sequence equal to the last bit to that of a dense problem of its lengths over the same rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "reference/attention.h"
#include "reference/flops.h"
#include "reference/formats.h"
#include "reference/problem.h"
#include "tests/support/problems.h"

namespace attnbench {
namespace {

std::string parse_error(const std::string& text) {
  Problem problem;
  const Status status = parse_shape(text, problem);
  EXPECT_FALSE(status.ok) << text << " parsed";
  return status.message;
}

TEST(Varlen, ShapeTextSpellsTheLengthsAndImpliesLayoutThd) {
  const Problem listed = parsed_shape("hq=4,hkv=2,d=64,dtype=bf16,varlen=list(120,0,37:512)");
  EXPECT_EQ(listed.layout, Layout::thd);
  EXPECT_EQ(listed.batch, 3);       // one sequence per length
  EXPECT_EQ(listed.seqlen_q, 120);  // the longest
  EXPECT_EQ(listed.seqlen_k, 512);
  EXPECT_EQ(listed.query_length(2), 37);
  EXPECT_EQ(listed.key_length(2), 512);
  EXPECT_EQ(listed.key_length(1), 0);
  EXPECT_EQ(shape_string(listed),
            "b=3,hq=4,hkv=2,sq=120,sk=512,d=64,dtype=bf16,varlen=list(120,0,37:512)");

  const Problem uniform = parsed_shape("b=64,s=1000,varlen=uniform");
  EXPECT_EQ(shape_string(uniform),
            "b=64,hq=1,hkv=1,sq=1000,sk=1000,d=64,dtype=fp32,varlen=uniform");
  std::set<int64_t> lengths;
  for (int64_t b = 0; b < uniform.batch; ++b) {
    EXPECT_EQ(uniform.query_length(b), uniform.key_length(b));  // sq == sk: one draw each
    EXPECT_GE(uniform.query_length(b), 1);
    EXPECT_LE(uniform.query_length(b), 1000);
    lengths.insert(uniform.query_length(b));
  }
  EXPECT_GT(lengths.size(), 50u) << "uniform should give ragged lengths";
}

TEST(Varlen, ErrorsNameWhatWasWrongAndWhatIsAccepted) {
  EXPECT_NE(parse_error("varlen=ragged").find("accepted none, uniform, list("), std::string::npos);
  EXPECT_NE(parse_error("varlen=list(3,x)").find("varlen 'list(3,x)'"), std::string::npos);
  EXPECT_NE(parse_error("varlen=list(3,-1)").find("0 or more"), std::string::npos);
  EXPECT_NE(parse_error("b=2,varlen=list(3,4,5)").find("lists 3 sequences with b = 2"),
            std::string::npos);
  EXPECT_NE(parse_error("sq=4,varlen=list(3,5)").find("sequence 1 (5:5) is longer than sq = 4"),
            std::string::npos);
  EXPECT_NE(parse_error("s=9,varlen=uniform,layout=bshd").find("accepted layout thd"),
            std::string::npos);
  EXPECT_NE(parse_error("s=9,layout=thd").find("layout thd without varlen"), std::string::npos);
  EXPECT_NE(parse_error("s=9,varlen=uniform,mask=padding").find("accepted masks none, causal"),
            std::string::npos);
  EXPECT_NE(parse_error("s=9,varlen=uniform,pass=bwd").find("accepted pass fwd"),
            std::string::npos);
}

TEST(Varlen, ThdPlacesEverySequenceRowAfterRowAndEachElementOnce) {
  const Problem p = parsed_shape("hq=4,hkv=2,dqk=8,dv=4,varlen=list(5:7,0:3,2:0,6)");
  const ProblemLayout layout = describe_layout(p);
  const int64_t total_q = 5 + 0 + 2 + 6, total_k = 7 + 3 + 0 + 6;
  EXPECT_EQ(layout.q.sequence_starts, (std::vector<int64_t>{0, 5, 5, 7, 13}));
  EXPECT_EQ(layout.k.sequence_starts, (std::vector<int64_t>{0, 7, 10, 10, 16}));
  EXPECT_EQ(layout.q_buffer_elements, total_q * 4 * 8);
  EXPECT_EQ(layout.k_buffer_elements, total_k * 2 * 8);
  EXPECT_EQ(layout.v_buffer_elements, total_k * 2 * 4);
  EXPECT_EQ(layout.out_elements, total_q * 4 * 4);
  struct Tensor {
    const TensorPlacement& placement;
    int64_t dense_rows, heads, dim, elements;
  };
  for (const Tensor& t : {Tensor{layout.q, p.seqlen_q, 4, 8, layout.q_buffer_elements},
                          Tensor{layout.k, p.seqlen_k, 2, 8, layout.k_buffer_elements},
                          Tensor{layout.v, p.seqlen_k, 2, 4, layout.v_buffer_elements},
                          Tensor{layout.out, p.seqlen_q, 4, 4, layout.out_elements}}) {
    std::set<int64_t> used;
    int64_t next = 0;  // sequence after sequence, row after row, head after head
    for (int64_t b = 0; b < p.batch; ++b) {
      for (int64_t s = 0; s < t.placement.rows(b, t.dense_rows); ++s) {
        for (int64_t h = 0; h < t.heads; ++h) {
          EXPECT_EQ(t.placement.row_start(b, s, h), next);
          for (int64_t d = 0; d < t.dim; ++d) used.insert(t.placement.row_start(b, s, h) + d);
          next += t.dim;
        }
      }
    }
    EXPECT_EQ(static_cast<int64_t>(used.size()), t.elements);
    EXPECT_EQ(next, t.elements);
  }
}

TEST(Varlen, MasksApplyPerSequenceWithItsOwnLengths) {
  // Sequence 0: 3 queries over 8 keys; causal_br's offset is 8 - 3 = 5 for it alone.
  Problem p = parsed_shape("varlen=list(3:8,8:3),mask=causal_br");
  EXPECT_EQ(p.visible(0, 0).begin, 0);
  EXPECT_EQ(p.visible(0, 0).end, 6);
  EXPECT_EQ(p.visible(0, 2).end, 8);
  // Sequence 1: 8 queries over 3 keys, offset -5: rows 0 .. 4 see nothing.
  EXPECT_EQ(p.visible(1, 4).size(), 0);
  EXPECT_EQ(p.visible(1, 5).end, 1);
  EXPECT_EQ(p.visible(1, 7).end, 3);
  // Pairs: sequence 0 sees 6 + 7 + 8, sequence 1 sees 1 + 2 + 3.
  EXPECT_EQ(visible_pairs(p), 27);
  p.mask = {MaskKind::none};
  EXPECT_EQ(visible_pairs(p), 3 * 8 + 8 * 3);
}

TEST(Varlen, FlopsAndBytesCountEachSequenceOnce) {
  const Problem p = parsed_shape("hq=4,hkv=1,d=16,dtype=bf16,varlen=list(1:1000,4:200,0:7)");
  // Every query sees every key of its own sequence: 1000 + 4 * 200 = 1800 pairs per head.
  EXPECT_EQ(visible_pairs(p), 1800);
  EXPECT_EQ(attention_flops(p), 2.0 * (16 + 16) * 4 * 1800);
  // q and out over 5 query rows, k and v over 1207 key rows, 2 bytes each.
  EXPECT_EQ(attention_bytes(p), 2.0 * (5 * 4 * 16 + 2 * 1207 * 1 * 16 + 5 * 4 * 16));
}

// A buffer of fresh random values.
std::vector<unsigned char> random_tensor(int64_t elements, DType dtype, std::mt19937_64& rng) {
  std::vector<unsigned char> buffer(static_cast<size_t>(elements) * dtype_size(dtype));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t e = 0; e < elements; ++e) store_element(dtype, buffer.data(), e, normal(rng));
  return buffer;
}

TEST(Varlen, ASequenceHasTheReferenceOfADenseProblemOfItsLengthsToTheLastBit) {
  const auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const char* shape : {"hq=4,hkv=2,d=16,dtype=bf16,varlen=list(9:40,17,1:33),mask=causal_br",
                            "b=6,hq=2,hkv=1,s=50,d=8,varlen=uniform,mask=window(4,2)"}) {
    SCOPED_TRACE(shape);
    const Problem p = parsed_shape(shape);
    const ProblemLayout layout = describe_layout(p);
    const auto q = random_tensor(layout.q_buffer_elements, p.input_dtype, rng);
    const auto k = random_tensor(layout.k_buffer_elements, p.input_dtype, rng);
    const auto v = random_tensor(layout.v_buffer_elements, p.input_dtype, rng);
    const AttentionInputs packed{{p.input_dtype, q.data(), layout.q},
                                 {p.input_dtype, k.data(), layout.k},
                                 {p.input_dtype, v.data(), layout.v},
                                 {}};
    for (int64_t b = 0; b < p.batch; ++b) {
      // The dense twin: one sequence of b's lengths, bshd, starting where b's rows start.
      Problem dense = p;
      dense.varlen = {};
      dense.layout = Layout::bshd;
      dense.batch = 1;
      dense.seqlen_q = std::max<int64_t>(1, p.query_length(b));
      dense.seqlen_k = std::max<int64_t>(1, p.key_length(b));
      const ProblemLayout twin = describe_layout(dense);
      auto at_sequence = [b](TensorPlacement placement, const TensorPlacement& packed_place) {
        placement.offset = packed_place.row_start(b, 0, 0);
        return placement;
      };
      const AttentionInputs alone{{p.input_dtype, q.data(), at_sequence(twin.q, layout.q)},
                                  {p.input_dtype, k.data(), at_sequence(twin.k, layout.k)},
                                  {p.input_dtype, v.data(), at_sequence(twin.v, layout.v)},
                                  {}};
      if (p.key_length(b) == 0) continue;  // no dense problem has no keys (checked elsewhere)
      std::vector<double> got(static_cast<size_t>(p.head_dim_v));
      std::vector<double> want(got.size());
      for (int64_t h = 0; h < p.heads_q; ++h) {
        for (int64_t i = 0; i < p.query_length(b); ++i) {
          double got_lse = 0, want_lse = 0;
          reference_row(p, packed, b, h, i, got.data(), &got_lse);
          reference_row(dense, alone, 0, h, i, want.data(), &want_lse);
          ASSERT_EQ(got, want) << "sequence " << b << " head " << h << " row " << i;
          ASSERT_EQ(got_lse, want_lse);
        }
      }
    }
  }
}

}  // namespace
}  // namespace attnbench
