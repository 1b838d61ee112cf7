// Problems (reference/problem.h) and masks (reference/mask.h): the --shape text round-trips,
// every error names the key or field, the value and what is accepted, and describe_layout's
// strides address the elements of each layout where its definition puts them.
#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "reference/problem.h"
#include "tests/support/problems.h"

namespace attnbench {
namespace {

constexpr int kRandomProblems = 2000;

// Random problems from tests/support/problems.h: valid, every field random.
TEST(Problem, ShapeStringRoundTripsRandomProblems) {
  const auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < kRandomProblems; ++i) {
    const Problem problem = random_problem(rng);
    ASSERT_TRUE(validate(problem).ok) << validate(problem).message;
    const std::string text = shape_string(problem);
    // Parsing starts from the defaults, whatever the target held before.
    Problem parsed = random_problem(rng);
    const Status status = parse_shape(text, parsed);
    ASSERT_TRUE(status.ok) << text << ": " << status.message;
    ASSERT_EQ(parsed, problem) << text << " came back as " << shape_string(parsed);
    ASSERT_EQ(shape_string(parsed), text);
  }
}

TEST(Problem, ShapeStringIsCanonicalAndOmitsDefaults) {
  Problem problem = make_problem(2, 8, 2, 113, 203, 64, 64, {MaskKind::causal_br}, DType::bf16);
  EXPECT_EQ(shape_string(problem), "b=2,hq=8,hkv=2,sq=113,sk=203,d=64,dtype=bf16,mask=causal_br");

  problem.head_dim_v = 32;
  problem.output_dtype = DType::f32;
  problem.p_dtype = DType::bf16;
  problem.mask = {MaskKind::window, 16, -1};
  problem.layout = Layout::bhsd;
  problem.scale = 0.1;
  EXPECT_EQ(shape_string(problem),
            "b=2,hq=8,hkv=2,sq=113,sk=203,d=64,dv=32,dtype=bf16,out=fp32,p=bf16,"
            "mask=window(16,-1),layout=bhsd,scale=0.1");

  Problem fp8;
  fp8.input_dtype = DType::e4m3;
  fp8.output_dtype = DType::bf16;
  fp8.p_dtype = DType::e4m3;
  fp8.fp8_scaling = Fp8Scaling::per_head;
  EXPECT_EQ(shape_string(fp8), "b=1,hq=1,hkv=1,sq=1,sk=1,d=64,dtype=e4m3,fp8_scaling=per_head");
}

TEST(Problem, ParseShapeShorthandsAndDefaults) {
  Problem problem;
  ASSERT_TRUE(parse_shape("b=3, hq=8, s=17, d=96, dtype=fp8", problem).ok);
  EXPECT_EQ(problem.batch, 3);
  EXPECT_EQ(problem.heads_kv, 8);  // hkv defaults to hq
  EXPECT_EQ(problem.seqlen_q, 17);
  EXPECT_EQ(problem.seqlen_k, 17);
  EXPECT_EQ(problem.head_dim_qk, 96);
  EXPECT_EQ(problem.head_dim_v, 96);
  EXPECT_EQ(problem.input_dtype, DType::e4m3);
  EXPECT_EQ(problem.output_dtype, DType::bf16);  // FP8 inputs default to a bf16 output
  EXPECT_EQ(problem.p_dtype, DType::e4m3);

  // Explicit keys win over shorthands in any order; the comma inside window(L,R) is no separator.
  ASSERT_TRUE(parse_shape("sk=40,s=8,dv=32,d=128,mask=window(4,0),hkv=1,hq=4", problem).ok);
  EXPECT_EQ(problem.seqlen_q, 8);
  EXPECT_EQ(problem.seqlen_k, 40);
  EXPECT_EQ(problem.head_dim_qk, 128);
  EXPECT_EQ(problem.head_dim_v, 32);
  EXPECT_EQ(problem.mask, (Mask{MaskKind::window, 4, 0}));
  EXPECT_EQ(problem.heads_q, 4);
  EXPECT_EQ(problem.heads_kv, 1);
  EXPECT_EQ(problem.input_dtype, DType::f32);  // not carried over from the previous parse
  EXPECT_EQ(problem.p_dtype, DType::f32);
}

struct BadShape {
  const char* text;
  const char* message;
};

TEST(Problem, ParseShapeErrorsNameTheKeyTheValueAndWhatIsAccepted) {
  const std::vector<BadShape> cases = {
      {"b=2,hdim=64",
       "unknown key 'hdim' in --shape; accepted: b, hq, hkv, sq, sk, s, d, dqk, dv, dtype, out, "
       "p, fp8_scaling, mask, layout, scale, pass, dout, varlen, page"},
      {"dtype=fp9", "dtype 'fp9': accepted fp32, fp16, bf16, e4m3, e5m2"},
      {"out=half", "out 'half': accepted fp32, fp16, bf16, e4m3, e5m2"},
      {"p=int8", "p 'int8': accepted fp32, fp16, bf16, e4m3, e5m2"},
      {"mask=sliding",
       "mask 'sliding': accepted none, causal, causal_br, window(L,R) with L, R >= -1 "
       "(-1 = unbounded), padding"},
      {"mask=window(-2,0)",
       "mask 'window(-2,0)': accepted none, causal, causal_br, window(L,R) with L, R >= -1 "
       "(-1 = unbounded), padding"},
      {"layout=sbhd", "layout 'sbhd': accepted bshd, bhsd, qkv_packed, thd"},
      {"dtype=e4m3,fp8_scaling=per_row",
       "fp8_scaling 'per_row': accepted none, per_tensor, per_head, per_block"},
      {"b=two", "b 'two': accepted an integer in 1 .. 2147483647"},
      {"sq=12x", "sq '12x': accepted an integer in 1 .. 2147483647"},
      {"scale=fast",
       "scale 'fast': accepted 0 (the default 1/sqrt(dqk)) or a finite positive number"},
      {"b=2,b=3", "key 'b' given twice in --shape"},
      {"b=2,causal",
       "'causal' in --shape is not key=value; accepted keys: b, hq, hkv, sq, sk, s, d, dqk, dv, "
       "dtype, out, p, fp8_scaling, mask, layout, scale, pass, dout, varlen, page"},
      {"b=2,",
       "'' in --shape is not key=value; accepted keys: b, hq, hkv, sq, sk, s, d, dqk, dv, "
       "dtype, out, p, fp8_scaling, mask, layout, scale, pass, dout, varlen, page"},
      {"  ",
       "empty --shape; expected key=value pairs such as b=1,hq=1,hkv=1,sq=1,sk=1,d=64,"
       "dtype=fp32"},
      // Parsed fine, then validated: the message names the field, its key, the value, the range.
      {"b=0", "batch (b) = 0: accepted 1 .. 2147483647"},
      {"hq=6,hkv=4",
       "heads_q (hq) = 6 is not a multiple of heads_kv (hkv) = 4: GQA/MQA needs hq % hkv == 0"},
      {"s=2147483648", "seqlen_q (sq) = 2147483648: accepted 1 .. 2147483647"},
      {"dv=-1", "head_dim_v (dv) = -1: accepted 1 .. 2147483647"},
      {"scale=-0.5",
       "scale = -0.5: accepted 0 (the default 1/sqrt(head_dim_qk)) or a finite positive number"},
      {"scale=inf",
       "scale = inf: accepted 0 (the default 1/sqrt(head_dim_qk)) or a finite positive number"},
      {"dtype=bf16,fp8_scaling=per_tensor",
       "fp8_scaling = per_tensor with dtype = bf16: accepted only with an FP8 input dtype (e4m3, "
       "e5m2)"},
      {"sq=3,sk=5,layout=qkv_packed",
       "layout qkv_packed needs equal sequence lengths for q, k and v (sq = 3, sk = 5)"},
      {"hq=4,hkv=2,layout=qkv_packed",
       "layout qkv_packed needs equal head counts for q, k and v (hq = 4, hkv = 2)"},
      {"dqk=64,dv=32,layout=qkv_packed",
       "layout qkv_packed needs equal head dims for q, k and v (dqk = 64, dv = 32)"},
  };
  for (const BadShape& bad : cases) {
    Problem problem;
    problem.batch = 7;
    const Status status = parse_shape(bad.text, problem);
    EXPECT_FALSE(status.ok) << bad.text;
    EXPECT_EQ(status.message, bad.message) << bad.text;
    EXPECT_EQ(problem.batch, 7) << "a failed parse must leave the problem alone: " << bad.text;
  }
}

TEST(Problem, ValidateChecksWhatParsingCannotProduce) {
  Problem problem;
  problem.mask = {MaskKind::causal, 3, -1};
  EXPECT_EQ(validate(problem).message,
            "mask causal has window bounds (3, -1): accepted only on window(L,R)");
  problem.mask = {MaskKind::window, 0, -5};
  EXPECT_EQ(validate(problem).message,
            "mask window right = -5: accepted -1 (unbounded) .. 2147483647");
  problem.mask = {MaskKind::window, -1, -1};
  EXPECT_TRUE(validate(problem).ok);

  Problem huge;
  huge.batch = huge.heads_q = huge.heads_kv = huge.seqlen_q = huge.seqlen_k = 2147483647;
  const Status status = validate(huge);
  EXPECT_FALSE(status.ok);
  EXPECT_NE(status.message.find("more elements in one tensor than an int64 index can address"),
            std::string::npos)
      << status.message;
}

TEST(Problem, SoftmaxScaleKeyLengthAndVisibility) {
  Problem problem;
  problem.head_dim_qk = 64;
  EXPECT_DOUBLE_EQ(problem.softmax_scale(), 0.125);
  problem.scale = 0.3;
  EXPECT_EQ(problem.softmax_scale(), 0.3);

  problem.batch = 2;
  problem.seqlen_q = 3;
  problem.seqlen_k = 6;
  EXPECT_EQ(problem.key_length(1), 6);
  problem.mask = {MaskKind::padding};
  EXPECT_EQ(problem.key_length(0), 2);  // (0 + 1) * 6 / 3
  EXPECT_EQ(problem.key_length(1), 4);  // (1 + 1) * 6 / 3
  EXPECT_EQ(problem.visible(1, 2).begin, 0);
  EXPECT_EQ(problem.visible(1, 2).end, 4);

  problem.mask = {MaskKind::causal_br};  // offset 3: query 1 sees keys 0 .. 4
  EXPECT_EQ(problem.visible(0, 1).begin, 0);
  EXPECT_EQ(problem.visible(0, 1).end, 5);
  problem.mask = {MaskKind::window, 1, 0};  // query 1 sees keys 3 .. 4
  EXPECT_EQ(problem.visible(0, 1).begin, 3);
  EXPECT_EQ(problem.visible(0, 1).end, 5);
}

TEST(Problem, DefaultDtypesAndNames) {
  EXPECT_EQ(default_output_dtype(DType::bf16), DType::bf16);
  EXPECT_EQ(default_output_dtype(DType::f32), DType::f32);
  EXPECT_EQ(default_output_dtype(DType::e4m3), DType::bf16);
  EXPECT_EQ(default_output_dtype(DType::e5m2), DType::bf16);
  EXPECT_EQ(default_p_dtype(DType::f16), DType::f32);
  EXPECT_EQ(default_p_dtype(DType::e4m3), DType::e4m3);
  EXPECT_EQ(default_p_dtype(DType::e5m2), DType::e4m3);
  for (Layout layout : {Layout::bshd, Layout::bhsd, Layout::qkv_packed, Layout::thd})
    EXPECT_EQ(parse_layout(layout_name(layout)), layout);
  for (Fp8Scaling scaling : kAllFp8Scalings) {
    EXPECT_EQ(parse_fp8_scaling(fp8_scaling_name(scaling)), scaling);
  }
  EXPECT_EQ(parse_layout("BSHD"), std::nullopt);
  EXPECT_EQ(parse_fp8_scaling("tensor"), std::nullopt);
}

TEST(Mask, NamesParseBack) {
  for (const Mask& mask : {Mask{MaskKind::none}, Mask{MaskKind::causal}, Mask{MaskKind::causal_br},
                           Mask{MaskKind::padding}, Mask{MaskKind::window, -1, -1},
                           Mask{MaskKind::window, 0, 0}, Mask{MaskKind::window, 128, -1}}) {
    EXPECT_EQ(parse_mask(mask_name(mask)), mask) << mask_name(mask);
  }
  EXPECT_EQ(mask_name({MaskKind::window, 3, 0}), "window(3,0)");
  EXPECT_EQ(parse_mask("window( 3 , 0 )"), (Mask{MaskKind::window, 3, 0}));
  for (const char* bad : {"", "window", "window()", "window(1)", "window(1,2,3)", "window(-2,0)",
                          "window(a,0)", "window(1,0", "Causal", "causal_tl", "window(1.5,0)"}) {
    EXPECT_EQ(parse_mask(bad), std::nullopt) << bad;
  }
}

// The layouts by definition: the element (b, s, h, d) of a tensor sits at this index of its
// buffer when the buffer is laid out in C order over the named dimensions.
int64_t bshd_index(int64_t b, int64_t s, int64_t h, int64_t d, int64_t seqlen, int64_t heads,
                   int64_t dim) {
  return ((b * seqlen + s) * heads + h) * dim + d;
}
int64_t bhsd_index(int64_t b, int64_t s, int64_t h, int64_t d, int64_t seqlen, int64_t heads,
                   int64_t dim) {
  return ((b * heads + h) * seqlen + s) * dim + d;
}
// (batch, seq, 3, heads, dim), which = 0 for q, 1 for k, 2 for v.
int64_t bs3hd_index(int64_t b, int64_t s, int64_t which, int64_t h, int64_t d, int64_t seqlen,
                    int64_t heads, int64_t dim) {
  return (((b * seqlen + s) * 3 + which) * heads + h) * dim + d;
}

int64_t placed_index(const TensorPlacement& placement, int64_t b, int64_t s, int64_t h, int64_t d) {
  return placement.offset + b * placement.strides.batch + s * placement.strides.seq +
         h * placement.strides.head + d;
}

using IndexFunction = std::function<int64_t(int64_t, int64_t, int64_t, int64_t)>;

// Every element of one tensor lands where `expected` says, inside the buffer, exactly once.
void expect_placement(const char* tensor, const TensorPlacement& placement, int64_t batch,
                      int64_t seqlen, int64_t heads, int64_t dim, int64_t buffer_elements,
                      const IndexFunction& expected, std::set<int64_t>& used) {
  SCOPED_TRACE(tensor);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < seqlen; ++s) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t d = 0; d < dim; ++d) {
          const int64_t index = placed_index(placement, b, s, h, d);
          ASSERT_EQ(index, expected(b, s, h, d)) << b << "," << s << "," << h << "," << d;
          ASSERT_GE(index, 0);
          ASSERT_LT(index, buffer_elements);
          ASSERT_TRUE(used.insert(index).second) << "element written twice: " << index;
        }
      }
    }
  }
}

TEST(Problem, DescribeLayoutStridesAddressEveryElementOnce) {
  // Small, all dimensions distinct, so a swapped stride cannot go unnoticed.
  const int64_t b = 2, hq = 6, hkv = 3, sq = 5, sk = 7, dqk = 4, dv = 3;
  Problem problem = make_problem(b, hq, hkv, sq, sk, dqk, dv, {});

  for (Layout layout_kind : {Layout::bshd, Layout::bhsd}) {
    problem.layout = layout_kind;
    SCOPED_TRACE(std::string(layout_name(layout_kind)));
    ASSERT_TRUE(validate(problem).ok);
    const ProblemLayout layout = describe_layout(problem);
    const auto index = layout_kind == Layout::bshd ? bshd_index : bhsd_index;
    EXPECT_EQ(layout.q_buffer_elements, b * sq * hq * dqk);
    EXPECT_EQ(layout.k_buffer_elements, b * sk * hkv * dqk);
    EXPECT_EQ(layout.v_buffer_elements, b * sk * hkv * dv);
    EXPECT_EQ(layout.out_elements, b * sq * hq * dv);
    EXPECT_EQ(layout.lse_elements, b * hq * sq);
    struct Tensor {
      const char* name;
      TensorPlacement placement;
      int64_t seqlen, heads, dim, elements;
    };
    for (const Tensor& t : {Tensor{"q", layout.q, sq, hq, dqk, layout.q_buffer_elements},
                            Tensor{"k", layout.k, sk, hkv, dqk, layout.k_buffer_elements},
                            Tensor{"v", layout.v, sk, hkv, dv, layout.v_buffer_elements},
                            Tensor{"out", layout.out, sq, hq, dv, layout.out_elements}}) {
      std::set<int64_t> used;
      expect_placement(
          t.name, t.placement, b, t.seqlen, t.heads, t.dim, t.elements,
          [&](int64_t bi, int64_t s, int64_t h, int64_t d) {
            return index(bi, s, h, d, t.seqlen, t.heads, t.dim);
          },
          used);
      EXPECT_EQ(static_cast<int64_t>(used.size()), t.elements) << t.name << " has holes";
    }
  }

  // Packed: one (b, s, 3, h, d) buffer; q, k and v interleave and together fill it.
  problem.layout = Layout::qkv_packed;
  problem.seqlen_k = sq;
  problem.heads_q = problem.heads_kv = hkv;
  problem.head_dim_v = dqk;
  ASSERT_TRUE(validate(problem).ok);
  const ProblemLayout layout = describe_layout(problem);
  EXPECT_EQ(layout.q_buffer_elements, b * sq * 3 * hkv * dqk);
  EXPECT_EQ(layout.k_buffer_elements, 0);
  EXPECT_EQ(layout.v_buffer_elements, 0);
  EXPECT_EQ(layout.out_elements, b * sq * hkv * dqk);
  std::set<int64_t> used;
  const std::array<const TensorPlacement*, 3> packed = {&layout.q, &layout.k, &layout.v};
  for (int64_t which = 0; which < 3; ++which) {
    expect_placement(
        "packed", *packed[static_cast<size_t>(which)], b, sq, hkv, dqk, layout.q_buffer_elements,
        [&](int64_t bi, int64_t s, int64_t h, int64_t d) {
          return bs3hd_index(bi, s, which, h, d, sq, hkv, dqk);
        },
        used);
  }
  EXPECT_EQ(static_cast<int64_t>(used.size()), layout.q_buffer_elements);
  std::set<int64_t> out_used;
  expect_placement(
      "packed out (bshd)", layout.out, b, sq, hkv, dqk, layout.out_elements,
      [&](int64_t bi, int64_t s, int64_t h, int64_t d) {
        return bshd_index(bi, s, h, d, sq, hkv, dqk);
      },
      out_used);
}

}  // namespace
}  // namespace attnbench
