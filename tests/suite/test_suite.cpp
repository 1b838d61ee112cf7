// Suite files (harness/suite.h): expansion of [[matrix]] blocks, every error message, lookup by
// name and by path, and the shipped suites in suites/.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "harness/suite/suite.h"
#include "reference/flops.h"
#include "tests/support/problems.h"
#include "tests/support/result_support.h"
#include "tests/support/scratch_directory.h"

namespace attnbench {
namespace {

constexpr const char* kSource = "suites/x.toml";
constexpr const char* kSuitesVariable = "ATTNBENCH_SUITES_DIR";

Suite parse_ok(const std::string& text) {
  Result<Suite> suite = parse_suite(text, kSource);
  EXPECT_TRUE(suite.ok()) << suite.status().message;
  return suite ? std::move(*suite) : Suite{};
}

// The error message; fails the test when the text parses.
std::string parse_error(const std::string& text) {
  const Result<Suite> suite = parse_suite(text, kSource);
  EXPECT_FALSE(suite.ok()) << "parsed without error:\n" << text;
  const std::string& message = suite.status().message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
  return message;
}

// Each text's error message, exactly: {text, message} pairs.
void expect_errors(const std::vector<std::pair<std::string, std::string>>& cases) {
  for (const auto& [text, message] : cases) EXPECT_EQ(parse_error(text), message) << text;
}

// Sets (or unsets) an environment variable for one scope.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnvironment() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// ---- expansion --------------------------------------------------------------------------------

TEST(SuiteParse, SmallMatrixExpandsToExactProblemsInDocumentedOrder) {
  const Suite suite = parse_ok(R"toml(name = "tiny"
description = "a small matrix"
repetitions = 3
max_case_seconds = 1.5

[[matrix]]
mask = "causal"
dtype = ["fp32", "bf16"]
seqlen = [17, 64]
heads_kv = [4, 2]
kernels = ["cpu.*", "cpu.naive"]
batch = 2
heads_q = 4
head_dim = 96
)toml");
  EXPECT_EQ(suite.name, "tiny");
  EXPECT_EQ(suite.description, "a small matrix");
  EXPECT_EQ(suite.path, kSource);
  EXPECT_EQ(suite.repetitions, 3);
  EXPECT_EQ(suite.max_case_seconds, 1.5);
  // Keys are listed out of order on purpose: the product follows the documented axis order
  // (heads_kv, then seqlen, then dtype), not the file's.
  const Mask causal{MaskKind::causal};
  const std::vector<Problem> expected = {
      make_problem(2, 4, 4, 17, 17, 96, 96, causal, DType::f32),
      make_problem(2, 4, 4, 17, 17, 96, 96, causal, DType::bf16),
      make_problem(2, 4, 4, 64, 64, 96, 96, causal, DType::f32),
      make_problem(2, 4, 4, 64, 64, 96, 96, causal, DType::bf16),
      make_problem(2, 4, 2, 17, 17, 96, 96, causal, DType::f32),
      make_problem(2, 4, 2, 17, 17, 96, 96, causal, DType::bf16),
      make_problem(2, 4, 2, 64, 64, 96, 96, causal, DType::f32),
      make_problem(2, 4, 2, 64, 64, 96, 96, causal, DType::bf16),
  };
  ASSERT_EQ(suite.entries.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE("entry " + std::to_string(i));
    EXPECT_EQ(shape_string(suite.entries[i].problem), shape_string(expected[i]));
    EXPECT_EQ(suite.entries[i].problem, expected[i]);
    EXPECT_EQ(suite.entries[i].kernel_globs, (std::vector<std::string>{"cpu.*", "cpu.naive"}));
    EXPECT_EQ(suite.entries[i].distribution, "normal");
    EXPECT_EQ(suite.entries[i].line, 6);
  }
}

TEST(SuiteParse, DefaultsFillEverythingButKernelsAndSeqlen) {
  const Suite suite = parse_ok("[[matrix]]\nkernels = \"cpu.naive\"\nseqlen = 33\n");
  ASSERT_EQ(suite.entries.size(), 1u);
  const SuiteEntry& entry = suite.entries[0];
  EXPECT_EQ(suite.name, "x");  // the file's stem when the file does not say
  EXPECT_EQ(suite.repetitions, 0);
  EXPECT_EQ(suite.max_case_seconds, 0);
  EXPECT_EQ(entry.kernel_globs, std::vector<std::string>{"cpu.naive"});
  EXPECT_EQ(entry.problem, make_problem(1, 1, 1, 33, 33, 64, 64, Mask{}, DType::f32));
  EXPECT_EQ(entry.problem.layout, Layout::bshd);
  EXPECT_EQ(entry.problem.fp8_scaling, Fp8Scaling::none);
  EXPECT_EQ(entry.problem.scale, 0);
  EXPECT_EQ(entry.distribution, "normal");
}

TEST(SuiteParse, OptionalFieldsReachTheProblem) {
  const Suite suite = parse_ok(R"toml([[matrix]]
kernels = "*"
seqlen_q = 16
seqlen_k = 48
head_dim_qk = 192
head_dim_v = 128
dtype = "e4m3"
out_dtype = "fp16"
p_dtype = "bf16"
fp8_scaling = "per_head"
layout = "bhsd"
scale = 0.25
distribution = "outliers"
)toml");
  ASSERT_EQ(suite.entries.size(), 1u);
  const Problem& problem = suite.entries[0].problem;
  EXPECT_EQ(problem.seqlen_q, 16);
  EXPECT_EQ(problem.seqlen_k, 48);
  EXPECT_EQ(problem.head_dim_qk, 192);
  EXPECT_EQ(problem.head_dim_v, 128);
  EXPECT_EQ(problem.input_dtype, DType::e4m3);
  EXPECT_EQ(problem.output_dtype, DType::f16);
  EXPECT_EQ(problem.p_dtype, DType::bf16);
  EXPECT_EQ(problem.fp8_scaling, Fp8Scaling::per_head);
  EXPECT_EQ(problem.layout, Layout::bhsd);
  EXPECT_EQ(problem.scale, 0.25);
  EXPECT_EQ(suite.entries[0].distribution, "outliers");
}

// A suite asks for its kernels to be timed round-robin on GPUs too (gpu-figures does); by default
// only the CPU interleaves.
TEST(SuiteParse, InterleaveGpusIsOffUnlessTheSuiteAsks) {
  const std::string matrix = "[[matrix]]\nkernels = \"*\"\nseqlen = 8\n";
  EXPECT_FALSE(parse_ok(matrix).interleave_gpus);
  EXPECT_TRUE(parse_ok("interleave_gpus = true\n" + matrix).interleave_gpus);
  EXPECT_FALSE(parse_ok("interleave_gpus = false\n" + matrix).interleave_gpus);
}

// dout applies to the backward cases only: a block's forward keeps dO normal, so its dout axis
// makes one forward and a backward per value.
TEST(SuiteParse, TheUpstreamGradientAxisMultipliesTheBackwardsOnly) {
  const Suite suite = parse_ok(R"toml([[matrix]]
kernels = "*"
seqlen = 16
passes = ["fwd", "bwd"]
dout = ["normal", "small"]
)toml");
  std::vector<std::string> shapes;
  for (const SuiteEntry& entry : suite.entries) shapes.push_back(shape_string(entry.problem));
  EXPECT_EQ(shapes, (std::vector<std::string>{
                        "b=1,hq=1,hkv=1,sq=16,sk=16,d=64,dtype=fp32",
                        "b=1,hq=1,hkv=1,sq=16,sk=16,d=64,dtype=fp32,pass=bwd",
                        "b=1,hq=1,hkv=1,sq=16,sk=16,d=64,dtype=fp32,pass=bwd,dout=small"}));
}

TEST(SuiteParse, Fp8InputsGetTheirDefaultOutputAndPDtypes) {
  const Suite suite = parse_ok("[[matrix]]\nkernels = \"*\"\nseqlen = 8\ndtype = \"e4m3\"\n");
  ASSERT_EQ(suite.entries.size(), 1u);
  EXPECT_EQ(suite.entries[0].problem.output_dtype, default_output_dtype(DType::e4m3));
  EXPECT_EQ(suite.entries[0].problem.p_dtype, default_p_dtype(DType::e4m3));
  EXPECT_NE(suite.entries[0].problem.output_dtype, DType::e4m3);
}

TEST(SuiteParse, TokensSetBatchFromSeqlenKAtLeastOne) {
  const Suite suite = parse_ok(R"toml([[matrix]]
kernels = "*"
tokens = 1024
seqlen = [256, 300, 2048]
)toml");
  ASSERT_EQ(suite.entries.size(), 3u);
  EXPECT_EQ(suite.entries[0].problem.batch, 4);
  EXPECT_EQ(suite.entries[1].problem.batch, 3);  // 1024 / 300, rounded down
  EXPECT_EQ(suite.entries[2].problem.batch, 1);  // never 0

  const Suite decode = parse_ok(R"toml([[matrix]]
kernels = "*"
tokens = 4096
seqlen_q = 1
seqlen_k = [512, 1024]
)toml");
  ASSERT_EQ(decode.entries.size(), 2u);
  EXPECT_EQ(decode.entries[0].problem.batch, 8);  // from seqlen_k, not seqlen_q
  EXPECT_EQ(decode.entries[1].problem.batch, 4);
}

TEST(SuiteParse, GqaAxisDividesHeadsQ) {
  const Suite suite = parse_ok(R"toml([[matrix]]
kernels = "*"
heads_q = [8, 16]
gqa = [1, 4, 8]
seqlen = 32
)toml");
  std::vector<std::pair<int64_t, int64_t>> heads;
  for (const SuiteEntry& entry : suite.entries) {
    heads.emplace_back(entry.problem.heads_q, entry.problem.heads_kv);
  }
  const std::vector<std::pair<int64_t, int64_t>> expected = {{8, 8},   {8, 2},  {8, 1},
                                                             {16, 16}, {16, 4}, {16, 2}};
  EXPECT_EQ(heads, expected);
}

TEST(SuiteParse, WindowsKeepBothBounds) {
  const Suite suite = parse_ok(R"toml([[matrix]]
kernels = "*"
seqlen = 64
mask = ["window(64,0)", "window(-1,16)", "window(3,-1)", "window(0,0)"]
)toml");
  const std::vector<Mask> expected = {{MaskKind::window, 64, 0},
                                      {MaskKind::window, -1, 16},
                                      {MaskKind::window, 3, -1},
                                      {MaskKind::window, 0, 0}};
  ASSERT_EQ(suite.entries.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(suite.entries[i].problem.mask, expected[i]) << mask_name(expected[i]);
  }
}

TEST(SuiteParse, BlocksKeepFileOrderAndDuplicatesKeepTheFirst) {
  const Suite suite = parse_ok(R"toml(name = "dups"

[[matrix]]
kernels = "cpu.*"
heads_q = 2
heads_kv = [2, 2]
seqlen = [16, 32]

# 32 repeats the first block; 48 is new; another glob or distribution is a new case.
[[matrix]]
kernels = "cpu.*"
heads_q = 2
seqlen = [32, 48]

[[matrix]]
kernels = "cpu.naive"
heads_q = 2
seqlen = 16
distribution = ["normal", "outliers"]

[[matrix]]
kernels = "cpu.*"
heads_q = 2
seqlen = 16
distribution = "outliers"
)toml");
  struct Expected {
    int64_t seqlen;
    std::string glob;
    std::string distribution;
    int line;
  };
  const std::vector<Expected> expected = {
      {16, "cpu.*", "normal", 3},        {32, "cpu.*", "normal", 3},
      {48, "cpu.*", "normal", 10},       {16, "cpu.naive", "normal", 15},
      {16, "cpu.naive", "outliers", 15}, {16, "cpu.*", "outliers", 21}};
  ASSERT_EQ(suite.entries.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE("entry " + std::to_string(i));
    EXPECT_EQ(suite.entries[i].problem.seqlen_q, expected[i].seqlen);
    EXPECT_EQ(suite.entries[i].kernel_globs, std::vector<std::string>{expected[i].glob});
    EXPECT_EQ(suite.entries[i].distribution, expected[i].distribution);
    EXPECT_EQ(suite.entries[i].line, expected[i].line);
  }
}

// Random axes written in a random key order: the expansion is always the product, in the
// documented axis order.
TEST(SuiteParse, RandomMatrixExpandsToTheProductInAxisOrder) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 random(seed);
  const auto pick = [&random](std::vector<std::string> pool) {
    std::shuffle(pool.begin(), pool.end(), random);
    pool.resize(std::uniform_int_distribution<size_t>(1, pool.size())(random));
    return pool;
  };
  const auto as_toml_array = [](const std::vector<std::string>& values, bool quoted) {
    std::string text = "[";
    for (const std::string& value : values) {
      if (text.size() > 1) text += ", ";
      text += quoted ? "\"" + value + "\"" : value;
    }
    return text + "]";
  };
  std::uniform_int_distribution<int> seqlen_draw(1, 300);
  std::set<std::string> seqlen_pool;
  while (seqlen_pool.size() < 4) seqlen_pool.insert(std::to_string(seqlen_draw(random)));
  std::uniform_int_distribution<int> bound_draw(-1, 64);
  const std::string window = "window(" + std::to_string(bound_draw(random)) + "," +
                             std::to_string(bound_draw(random)) + ")";

  const auto batches = pick({"1", "2", "3"});
  const auto heads = pick({"8", "16"});
  const auto gqas = pick({"1", "2", "4", "8"});
  const auto seqlens = pick(std::vector<std::string>(seqlen_pool.begin(), seqlen_pool.end()));
  const auto dtypes = pick({"fp32", "fp16", "bf16"});
  const auto masks = pick({"none", "causal", "causal_br", "padding", window});
  const auto distributions = pick(distribution_names());

  std::vector<std::string> lines = {
      "batch = " + as_toml_array(batches, false),
      "heads_q = " + as_toml_array(heads, false),
      "gqa = " + as_toml_array(gqas, false),
      "seqlen = " + as_toml_array(seqlens, false),
      "dtype = " + as_toml_array(dtypes, true),
      "mask = " + as_toml_array(masks, true),
      "distribution = " + as_toml_array(distributions, true),
      "kernels = [\"*\"]",
  };
  std::shuffle(lines.begin(), lines.end(), random);
  std::string text = "[[matrix]]\n";
  for (const std::string& line : lines) text += line + "\n";
  SCOPED_TRACE(text);
  const Suite suite = parse_ok(text);

  std::vector<std::pair<Problem, std::string>> expected;
  for (const auto& batch : batches) {
    for (const auto& heads_q : heads) {
      for (const auto& gqa : gqas) {
        for (const auto& seqlen : seqlens) {
          for (const auto& dtype : dtypes) {
            for (const auto& mask : masks) {
              for (const auto& distribution : distributions) {
                const int64_t hq = std::stoll(heads_q);
                const int64_t s = std::stoll(seqlen);
                const Problem problem =
                    make_problem(std::stoll(batch), hq, hq / std::stoll(gqa), s, s, 64, 64,
                                 *parse_mask(mask), *parse_dtype(dtype));
                expected.emplace_back(problem, distribution);
              }
            }
          }
        }
      }
    }
  }
  ASSERT_EQ(suite.entries.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(suite.entries[i].problem, expected[i].first)
        << "entry " << i << ": " << shape_string(suite.entries[i].problem) << " expected "
        << shape_string(expected[i].first);
    ASSERT_EQ(suite.entries[i].distribution, expected[i].second) << "entry " << i;
  }
}

// ---- errors: one line each, naming file:line and the field ------------------------------------

TEST(SuiteErrors, TomlSyntaxNamesTheLine) {
  const std::string message = parse_error("name = \"x\"\n\ndescription = \n");
  EXPECT_EQ(message.rfind("suites/x.toml:3: TOML syntax error: ", 0), 0u) << message;
}

TEST(SuiteErrors, UnknownMaskListsTheAcceptedMasks) {
  EXPECT_EQ(
      parse_error("[[matrix]]\nkernels = \"*\"\nseqlen = 8\nmask = [\"none\", \"causual\"]\n"),
      "suites/x.toml:4: field 'mask': unknown mask 'causual'; accepted: " + accepted_mask_names());
}

TEST(SuiteErrors, UnknownChoicesListTheAcceptedValues) {
  const std::string head = "[[matrix]]\nkernels = \"*\"\nseqlen = 8\n";
  expect_errors({
      {head + "dtype = \"fp64\"\n",
       "suites/x.toml:4: field 'dtype': unknown dtype 'fp64'; accepted: " + accepted_dtype_names()},
      {head + "out_dtype = \"half\"\n",
       "suites/x.toml:4: field 'out_dtype': unknown dtype 'half'; accepted: " +
           accepted_dtype_names()},
      {head + "layout = \"bsdh\"\n",
       "suites/x.toml:4: field 'layout': unknown layout 'bsdh'; accepted: bshd, bhsd, "
       "qkv_packed, thd"},
      {head + "dtype = \"e4m3\"\nfp8_scaling = \"per_row\"\n",
       "suites/x.toml:5: field 'fp8_scaling': unknown fp8 scaling 'per_row'; accepted: none, "
       "per_tensor, per_head, per_block"},
      {head + "distribution = [\"normal\",\n  \"uniform\"]\n",
       "suites/x.toml:5: field 'distribution': unknown distribution 'uniform'; accepted: "
       "normal, large_logits, outliers, sink"},
  });
}

TEST(SuiteErrors, UnknownKeysListTheAcceptedKeys) {
  expect_errors({
      {"name = \"x\"\nrepetition = 3\n[[matrix]]\nkernels = \"*\"\nseqlen = 8\n",
       "suites/x.toml:2: unknown field 'repetition'; accepted: name, description, "
       "repetitions, max_case_seconds, energy, detect_target, interleave_gpus, matrix"},
      {"detect_target = 0\n[[matrix]]\nkernels = \"*\"\nseqlen = 8\n",
       "suites/x.toml:1: field 'detect_target': expected a percentage > 0 and <= 100, got integer "
       "0"},
      {"[[matrix]]\nkernels = \"*\"\nseqlens = 8\n",
       "suites/x.toml:3: unknown field 'seqlens' in [[matrix]]; accepted: kernels, batch, "
       "tokens, heads_q, heads_kv, gqa, seqlen, seqlen_q, seqlen_k, head_dim, head_dim_qk, "
       "head_dim_v, dtype, out_dtype, p_dtype, fp8_scaling, mask, layout, varlen, page_size, "
       "scale, "
       "distribution, passes, dout"},
  });
}

TEST(SuiteErrors, WrongTypesNameTheFieldAndTheValue) {
  const std::string head = "[[matrix]]\nkernels = \"*\"\n";
  expect_errors({
      {head + "seqlen = \"big\"\n",
       "suites/x.toml:3: field 'seqlen': expected an integer or an array of integers, got "
       "string 'big'"},
      {head + "seqlen = [128,\n  2.5]\n",
       "suites/x.toml:4: field 'seqlen': expected an integer or an array of integers, got "
       "floating-point 2.5"},
      {head + "seqlen = 8\nmask = 1\n",
       "suites/x.toml:4: field 'mask': expected a string or an array of strings, got integer "
       "1"},
      {head + "seqlen = 8\nscale = \"auto\"\n",
       "suites/x.toml:4: field 'scale': expected a number or an array of numbers, got string "
       "'auto'"},
      {"[[matrix]]\nkernels = [\"cpu.*\", 3]\nseqlen = 8\n",
       "suites/x.toml:2: field 'kernels': expected a glob or an array of globs (non-empty "
       "strings), got integer 3"},
      {"name = 5\n[[matrix]]\nkernels = \"*\"\nseqlen = 8\n",
       "suites/x.toml:1: field 'name': expected a string, got integer 5"},
      {"interleave_gpus = \"yes\"\n[[matrix]]\nkernels = \"*\"\nseqlen = 8\n",
       "suites/x.toml:1: field 'interleave_gpus': expected true or false, got string 'yes'"},
      {"[matrix]\nkernels = \"*\"\nseqlen = 8\n",
       "suites/x.toml:1: field 'matrix': expected [[matrix]] blocks (an array of tables), got "
       "table"},
  });
}

TEST(SuiteErrors, OutOfRangeValues) {
  const std::string head = "[[matrix]]\nkernels = \"*\"\n";
  expect_errors({
      {head + "seqlen = [8, 0]\n",
       "suites/x.toml:3: field 'seqlen': 0 is out of range; must be at least 1"},
      {head + "seqlen = 8\nheads_q = -2\n",
       "suites/x.toml:4: field 'heads_q': -2 is out of range; must be at least 1"},
      {head + "seqlen = 8\nscale = 0.0\n",
       "suites/x.toml:4: field 'scale': floating-point 0.0 is out of range; must be a "
       "finite number > 0"},
      {"repetitions = 0\n[[matrix]]\nkernels = \"*\"\nseqlen = 8\n",
       "suites/x.toml:1: field 'repetitions': expected an integer of at least 1, got integer "
       "0"},
      {"max_case_seconds = -1\n[[matrix]]\nkernels = \"*\"\nseqlen = 8\n",
       "suites/x.toml:1: field 'max_case_seconds': expected a number > 0, got integer -1"},
  });
}

TEST(SuiteErrors, EmptyMatrices) {
  expect_errors({
      {"name = \"x\"\n", "suites/x.toml:1: no [[matrix]] blocks; a suite needs at least one"},
      {"[[matrix]]\nseqlen = 8\n",
       "suites/x.toml:1: [[matrix]] needs field 'kernels' (globs over kernel names)"},
      {"[[matrix]]\nkernels = []\nseqlen = 8\n",
       "suites/x.toml:2: field 'kernels': empty array; an empty axis makes an empty matrix"},
      {"[[matrix]]\nkernels = [\"\"]\nseqlen = 8\n",
       "suites/x.toml:2: field 'kernels': expected a glob or an array of globs (non-empty "
       "strings), got string ''"},
      {"[[matrix]]\nkernels = \"*\"\nseqlen = 8\ndtype = []\n",
       "suites/x.toml:4: field 'dtype': empty array; an empty axis makes an empty matrix"},
      {"[[matrix]]\nkernels = \"*\"\nseqlen_q = 8\n",
       "suites/x.toml:1: [[matrix]] needs field 'seqlen' (or both 'seqlen_q' and "
       "'seqlen_k')"},
  });
}

TEST(SuiteErrors, ContradictionsNameBothFields) {
  const std::string head = "[[matrix]]\nkernels = \"*\"\n";
  expect_errors({
      {head + "batch = 2\nseqlen = 8\ntokens = 64\n",
       "suites/x.toml:5: field 'tokens': conflicts with 'batch'; give one of them"},
      {head + "tokens = 64\nseqlen = 8\nbatch = 2\n",
       "suites/x.toml:5: field 'batch': conflicts with 'tokens'; give one of them"},
      {head + "seqlen = 8\nseqlen_q = 4\n",
       "suites/x.toml:4: field 'seqlen_q': conflicts with 'seqlen'; give one of them"},
      {head + "seqlen = 8\nseqlen_k = 4\n",
       "suites/x.toml:4: field 'seqlen_k': conflicts with 'seqlen'; give one of them"},
      {head + "seqlen = 8\nhead_dim = 64\nhead_dim_qk = 128\n",
       "suites/x.toml:5: field 'head_dim_qk': conflicts with 'head_dim'; give one of them"},
      {head + "seqlen = 8\nhead_dim_v = 32\nhead_dim = 64\n",
       "suites/x.toml:5: field 'head_dim': conflicts with 'head_dim_v'; give one of them"},
      {head + "seqlen = 8\nheads_q = 8\ngqa = 2\nheads_kv = 4\n",
       "suites/x.toml:6: field 'heads_kv': conflicts with 'gqa'; give one of them"},
      {head + "seqlen = 8\nheads_q = [8, 12]\ngqa = [4,\n 3]\n",
       "suites/x.toml:5: field 'gqa': 3 does not divide heads_q 8"},
  });
}

TEST(SuiteErrors, InvalidProblemsNameTheBlockLineAndTheCase) {
  const std::string text = R"toml(name = "x"

[[matrix]]
kernels = "*"
seqlen = 8

[[matrix]]
kernels = "*"
heads_q = 8
heads_kv = [4, 3]
seqlen = 8
)toml";
  Problem bad = make_problem(1, 8, 3, 8, 8, 64, 64, Mask{}, DType::f32);
  const Status expected = validate(bad);
  ASSERT_FALSE(expected.ok);
  EXPECT_EQ(parse_error(text),
            "suites/x.toml:7: [[matrix]] case " + shape_string(bad) + ": " + expected.message);

  // Packed QKV needs seqlen_q == seqlen_k; fp8_scaling needs an FP8 dtype.
  const std::string packed = parse_error(
      "[[matrix]]\nkernels = \"*\"\nseqlen_q = 8\nseqlen_k = 16\nlayout = \"qkv_packed\"\n");
  EXPECT_EQ(packed.rfind("suites/x.toml:1: [[matrix]] case b=1,hq=1,hkv=1,sq=8,sk=16,", 0), 0u)
      << packed;
  const std::string scaling = parse_error(
      "\n[[matrix]]\nkernels = \"*\"\nseqlen = 8\ndtype = \"bf16\"\nfp8_scaling = "
      "\"per_tensor\"\n");
  EXPECT_EQ(scaling.rfind("suites/x.toml:2: [[matrix]] case ", 0), 0u) << scaling;
  EXPECT_NE(scaling.find("fp8_scaling"), std::string::npos) << scaling;
}

TEST(SuiteErrors, TooLargeAMatrixIsRefused) {
  std::string seqlens;
  for (int i = 1; i <= 400; ++i) seqlens += (i > 1 ? ", " : "") + std::to_string(i);
  EXPECT_EQ(parse_error("[[matrix]]\nkernels = \"*\"\nseqlen = [" + seqlens + "]\nbatch = [" +
                        seqlens + "]\nheads_q = [1, 2]\n"),
            "suites/x.toml:1: [[matrix]] expands to more than 100000 cases");
}

TEST(SuiteErrors, ErrorsLeaveTheSuiteUntouched) {
  // An error is a status and no suite: a suite parsed before stays as it was.
  Suite suite = parse_ok("name = \"kept\"\n[[matrix]]\nkernels = \"*\"\nseqlen = 8\n");
  const Result<Suite> refused = parse_suite("[[matrix]]\nkernels = \"*\"\nseqlen = 0\n", kSource);
  EXPECT_FALSE(refused.ok());
  EXPECT_FALSE(refused.status().message.empty());
  EXPECT_EQ(suite.name, "kept");
  EXPECT_EQ(suite.entries.size(), 1u);
}

// ---- lookup ----------------------------------------------------------------------------------

TEST(SuiteLookup, DefaultDirectoryIsTheSourceTree) {
  const ScopedEnvironment unset(kSuitesVariable, std::nullopt);
  EXPECT_EQ(suites_directory(), std::string(ATTNBENCH_SOURCE_DIR) + "/suites");
  const ScopedEnvironment set(kSuitesVariable, "/elsewhere/suites");
  EXPECT_EQ(suites_directory(), "/elsewhere/suites");
}

TEST(SuiteLookup, ByNameByPathAndUnknownNames) {
  const ScopedEnvironment unset(kSuitesVariable, std::nullopt);
  const Suite by_name = value_of(load_suite("smoke"));
  EXPECT_EQ(by_name.name, "smoke");
  EXPECT_EQ(by_name.path, suites_directory() + "/smoke.toml");

  const Suite by_path = value_of(load_suite(suites_directory() + "/smoke.toml"));
  ASSERT_EQ(by_path.entries.size(), by_name.entries.size());
  for (size_t i = 0; i < by_path.entries.size(); ++i) {
    EXPECT_EQ(by_path.entries[i].problem, by_name.entries[i].problem);
  }

  EXPECT_EQ(
      load_suite("smok").status().message,
      "unknown suite 'smok'; available: cpu, ctest, decode, fp8-accuracy, gpu-figures, "
      "gpu-flash3-experiment, gpu-smoke, hopper-fp8, hopper-stages, llm, long_context, masking, "
      "memory, nightly, quick, serving, smoke, training (or a path to a .toml file)");
  // A name ending in .toml is a path (relative to the working directory), not a suite name.
  EXPECT_EQ(load_suite("no_such_suite_here.toml").status().message,
            "cannot read suite file 'no_such_suite_here.toml': no such file");
  EXPECT_EQ(load_suite("/no/such/dir/s.toml").status().message,
            "cannot read suite file '/no/such/dir/s.toml': no such file");
}

TEST(SuiteLookup, ErrorsInAFileNameThatFile) {
  const ScratchDirectory directory("attnbench_test_suite");
  const std::string path = directory.write(
      "broken.toml", "name = \"broken\"\n[[matrix]]\nkernels = \"*\"\nseqlen = 0\n");
  EXPECT_EQ(load_suite(path).status().message,
            path + ":4: field 'seqlen': 0 is out of range; must be at least 1");
}

TEST(SuiteLookup, EnvironmentDirectoryIsListedAndSearched) {
  const ScratchDirectory directory("attnbench_test_suite");
  directory.write("beta.toml",
                  "description = \"second\"\n[[matrix]]\nkernels = \"*\"\nseqlen = [4, 8]\n");
  directory.write("alpha.toml",
                  "description = \"first\"\n[[matrix]]\nkernels = \"*\"\nseqlen = 4\n");
  directory.write("gamma.toml", "description = \n");
  directory.write("notes.txt", "not a suite");
  const ScopedEnvironment set(kSuitesVariable, directory.path().string());

  const auto suites = list_suites();
  ASSERT_EQ(suites.size(), 3u);
  EXPECT_EQ(suites[0], (std::pair<std::string, std::string>{"alpha", "first"}));
  EXPECT_EQ(suites[1], (std::pair<std::string, std::string>{"beta", "second"}));
  EXPECT_EQ(suites[2].first, "gamma");
  EXPECT_EQ(suites[2].second.rfind("(unreadable: TOML syntax error on line 1", 0), 0u)
      << suites[2].second;

  const Suite beta = value_of(load_suite("beta"));
  EXPECT_EQ(beta.name, "beta");
  EXPECT_EQ(beta.entries.size(), 2u);
  EXPECT_EQ(load_suite("smoke").status().message,
            "unknown suite 'smoke'; available: alpha, beta, gamma (or a path to a .toml file)");
}

// ---- the shipped suites -----------------------------------------------------------------------

Suite load_shipped(const std::string& name) {
  const ScopedEnvironment unset(kSuitesVariable, std::nullopt);
  Result<Suite> suite = load_suite(name);
  EXPECT_TRUE(suite.ok()) << suite.status().message;
  return suite ? std::move(*suite) : Suite{};
}

TEST(ShippedSuites, AllParseAndValidate) {
  const ScopedEnvironment unset(kSuitesVariable, std::nullopt);
  const auto suites = list_suites();
  std::vector<std::string> names;
  for (const auto& [name, description] : suites) {
    SCOPED_TRACE(name);
    names.push_back(name);
    EXPECT_FALSE(description.empty());
    const Suite suite = load_shipped(name);
    EXPECT_EQ(suite.name, name) << "the name inside the file must match its file name";
    EXPECT_EQ(suite.description, description);
    EXPECT_FALSE(suite.entries.empty());
    for (const SuiteEntry& entry : suite.entries) {
      const Status status = validate(entry.problem);
      EXPECT_TRUE(status.ok) << shape_string(entry.problem) << ": " << status.message;
      EXPECT_FALSE(entry.kernel_globs.empty());
      EXPECT_NE(
          std::find(distribution_names().begin(), distribution_names().end(), entry.distribution),
          distribution_names().end());
    }
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"cpu", "ctest", "decode", "fp8-accuracy", "gpu-figures",
                                      "gpu-flash3-experiment", "gpu-smoke", "hopper-fp8",
                                      "hopper-stages", "llm", "long_context", "masking", "memory",
                                      "nightly", "quick", "serving", "smoke", "training"}));
}

// The suites that compare kernels within a few percent on a GPU time them round-robin there.
TEST(ShippedSuites, TheGpuComparisonsInterleaveAndNothingElseAsksTo) {
  const ScopedEnvironment unset(kSuitesVariable, std::nullopt);
  for (const auto& [name, description] : list_suites()) {
    const bool asked = name == "gpu-figures" || name == "gpu-flash3-experiment";
    EXPECT_EQ(load_shipped(name).interleave_gpus, asked) << name;
  }
}

TEST(ShippedSuites, SmokeCoversEveryMaskKindAndCpuDtypeOnSmallShapes) {
  const Suite suite = load_shipped("smoke");
  EXPECT_EQ(suite.repetitions, 5);
  EXPECT_EQ(suite.max_case_seconds, 0.5);
  EXPECT_DOUBLE_EQ(suite.detect_target, 0.05);
  std::set<std::pair<MaskKind, DType>> covered;
  bool window_with_both_bounds = false;
  bool gqa = false;
  bool unequal_lengths = false;
  bool large_logits = false;
  // 2 x 4 x 256 x 256 x 64 multiply-adds per matmul: a few milliseconds for a plain loop.
  constexpr int64_t kMaxMultiplyAdds = int64_t{2} * 4 * 256 * 256 * 64;
  for (const SuiteEntry& entry : suite.entries) {
    const Problem& p = entry.problem;
    SCOPED_TRACE(shape_string(p));
    EXPECT_EQ(entry.kernel_globs, std::vector<std::string>{"cpu.*"});
    EXPECT_LE(p.batch * p.heads_q * p.seqlen_q * p.seqlen_k * p.head_dim_qk, kMaxMultiplyAdds);
    covered.insert({p.mask.kind, p.input_dtype});
    window_with_both_bounds |=
        p.mask.kind == MaskKind::window && p.mask.window_left >= 0 && p.mask.window_right >= 0;
    gqa |= p.heads_kv < p.heads_q;
    unequal_lengths |= p.seqlen_q != p.seqlen_k;
    large_logits |= entry.distribution == "large_logits";
  }
  for (const MaskKind kind : {MaskKind::none, MaskKind::causal, MaskKind::causal_br,
                              MaskKind::window, MaskKind::padding}) {
    for (const DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      EXPECT_TRUE(covered.count({kind, dtype}))
          << mask_name(Mask{kind}) << " x " << dtype_name(dtype) << " missing";
    }
  }
  EXPECT_TRUE(window_with_both_bounds);
  EXPECT_TRUE(gqa);
  EXPECT_TRUE(unequal_lengths);
  EXPECT_TRUE(large_logits);
  // 29 forward problems and 16 backward ones (the two CPU kernels with a backward run them):
  // small enough to check and time in a minute.
  EXPECT_GE(suite.entries.size(), 20u);
  EXPECT_LE(suite.entries.size(), 48u);
}

// True when some query row of the problem sees no key at all.
bool has_fully_masked_row(const Problem& p) {
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t i = 0; i < p.seqlen_q; ++i) {
      const KeyRange keys =
          visible_keys(p.mask.kind, p.mask.window_left, p.mask.window_right, i, p.seqlen_q,
                       p.seqlen_k, padding_key_length(b, p.batch, p.seqlen_k));
      if (keys.size() == 0) return true;
    }
  }
  return false;
}

TEST(ShippedSuites, CtestCoversTheAwkwardShapesCheaply) {
  const Suite suite = load_shipped("ctest");
  std::set<int64_t> seqlens, head_dims;
  std::set<DType> dtypes;
  std::set<Layout> layouts;
  std::set<std::string> distributions;
  bool q_shorter = false, q_longer = false, fully_masked_causal_br = false;
  bool fully_masked_window = false, gqa_8_to_1 = false, mqa = false;
  double dense_flops = 0, dense_backward_flops = 0;
  bool backward = false, varlen_with_empty_sequence = false, paged_partial_page = false;
  for (const SuiteEntry& entry : suite.entries) {
    const Problem& p = entry.problem;
    EXPECT_EQ(entry.kernel_globs, std::vector<std::string>{"*"});
    if (p.seqlen_q == p.seqlen_k) seqlens.insert(p.seqlen_q);
    head_dims.insert(p.head_dim_qk);
    dtypes.insert(p.input_dtype);
    layouts.insert(p.layout);
    distributions.insert(entry.distribution);
    q_shorter |= p.seqlen_q < p.seqlen_k && p.seqlen_q > 16;
    q_longer |= p.seqlen_q > p.seqlen_k;
    const bool empty_row = has_fully_masked_row(p) && p.seqlen_q > p.seqlen_k;
    fully_masked_causal_br |= empty_row && p.mask.kind == MaskKind::causal_br;
    fully_masked_window |= empty_row && p.mask.kind == MaskKind::window;
    gqa_8_to_1 |= p.heads_kv > 1 && p.heads_q == 8 * p.heads_kv;
    mqa |= p.heads_kv == 1 && p.heads_q > 1;
    backward |= p.has_backward();
    // Every (query, key) pair of each sequence, masked or not: what a plain loop computes.
    double pairs = 0;
    for (int64_t b = 0; b < p.batch; ++b) {
      pairs += static_cast<double>(p.query_length(b)) * static_cast<double>(p.key_length(b));
    }
    if (p.mask.kind == MaskKind::padding)
      pairs = static_cast<double>(p.batch * p.seqlen_q * p.seqlen_k);
    varlen_with_empty_sequence |=
        p.is_varlen() && p.varlen.kind == VarlenKind::list &&
        std::count(p.varlen.query_lengths.begin(), p.varlen.query_lengths.end(), 0) > 0;
    paged_partial_page |= p.is_paged() && p.key_rows(0) % p.page_size != 0;
    if (!is_fp8(p.input_dtype)) {
      (p.has_backward() ? dense_backward_flops : dense_flops) +=
          flops_per_pair(p) * static_cast<double>(p.heads_q) * pairs;
    }
  }
  for (const int64_t seqlen : {1, 17, 113, 1023}) EXPECT_TRUE(seqlens.count(seqlen)) << seqlen;
  for (const int64_t d : {64, 80, 96, 128, 256}) EXPECT_TRUE(head_dims.count(d)) << d;
  EXPECT_EQ(dtypes, (std::set<DType>{DType::f32, DType::f16, DType::bf16, DType::e4m3}));
  EXPECT_EQ(layouts,
            (std::set<Layout>{Layout::bshd, Layout::bhsd, Layout::qkv_packed, Layout::thd}));
  EXPECT_TRUE(varlen_with_empty_sequence);
  EXPECT_TRUE(paged_partial_page);
  EXPECT_EQ(distributions, (std::set<std::string>{"normal", "large_logits", "outliers"}));
  EXPECT_TRUE(q_shorter);
  EXPECT_TRUE(q_longer);
  EXPECT_TRUE(fully_masked_causal_br);
  EXPECT_TRUE(fully_masked_window);
  EXPECT_TRUE(gqa_8_to_1);
  EXPECT_TRUE(mqa);
  EXPECT_TRUE(backward);
  // Every CPU kernel runs all of it in one ctest test; a plain loop does ~5 GFLOP/s and the
  // reference, the low-precision reference and the determinism rerun come on top. The backward
  // cases run on the CPU backwards' BLAS products (cpu.naive's too), with the forward before
  // them, two backwards and the gradients' reference: their own budget.
  constexpr double kMaxDenseFlops = 5e9;
  constexpr double kMaxDenseBackwardFlops = 6e9;  // 5.7e9: cpu.flash and cpu.naive take ~2 s of it
  EXPECT_LE(dense_flops, kMaxDenseFlops);
  EXPECT_LE(dense_backward_flops, kMaxDenseBackwardFlops);
}

TEST(ShippedSuites, NightlyFollowsFlashAttentionsConvention) {
  const Suite suite = load_shipped("nightly");
  constexpr int64_t kTokens = 16384;
  constexpr int64_t kModelDim = 2048;
  std::set<int64_t> seqlens, head_dims, gqas;
  std::set<DType> dtypes;
  std::set<MaskKind> masks;
  int backward = 0;
  for (const SuiteEntry& entry : suite.entries) {
    const Problem& p = entry.problem;
    SCOPED_TRACE(shape_string(p));
    EXPECT_EQ(entry.kernel_globs, (std::vector<std::string>{"cuda.*", "cudnn.*"}));
    EXPECT_TRUE(p.pass == Pass::fwd || p.pass == Pass::bwd);
    if (p.pass == Pass::bwd) {
      ++backward;
      EXPECT_FALSE(is_fp8(p.input_dtype));
      EXPECT_LE(p.head_dim_qk, 128);
    }
    EXPECT_EQ(p.batch * p.seqlen_k, kTokens);
    EXPECT_EQ(p.heads_q * p.head_dim_qk, kModelDim);
    EXPECT_EQ(p.seqlen_q, p.seqlen_k);
    seqlens.insert(p.seqlen_q);
    head_dims.insert(p.head_dim_qk);
    gqas.insert(p.heads_q / p.heads_kv);
    dtypes.insert(p.input_dtype);
    masks.insert(p.mask.kind);
  }
  EXPECT_EQ(seqlens, (std::set<int64_t>{512, 1024, 2048, 4096, 8192, 16384}));
  EXPECT_EQ(head_dims, (std::set<int64_t>{64, 128, 256}));
  EXPECT_EQ(gqas, (std::set<int64_t>{1, 4, 8}));
  EXPECT_EQ(dtypes, (std::set<DType>{DType::f16, DType::bf16, DType::e4m3}));
  EXPECT_EQ(masks, (std::set<MaskKind>{MaskKind::none, MaskKind::causal_br}));
  // The full product, nothing dropped: 6 seqlens x 3 head dims x 3 dtypes x 2 masks x 3 gqa, and
  // the backward of the 16-bit ones at head dims 64 and 128.
  EXPECT_EQ(backward, 6 * 2 * 2 * 2 * 3);
  EXPECT_EQ(suite.entries.size(), 6u * 3 * 3 * 2 * 3 + 6 * 2 * 2 * 2 * 3);
}

TEST(ShippedSuites, LlmIsBf16CausalWithPrefillAndDecode) {
  const Suite suite = load_shipped("llm");
  bool prefill = false;
  std::set<int64_t> decode_rows, decode_keys;
  const Mask sliding_window{MaskKind::window, 4095, 0};
  for (const SuiteEntry& entry : suite.entries) {
    const Problem& p = entry.problem;
    SCOPED_TRACE(shape_string(p));
    EXPECT_EQ(p.input_dtype, DType::bf16);
    EXPECT_TRUE(p.mask.kind == MaskKind::causal_br || p.mask == sliding_window);
    EXPECT_GE(p.batch, 1);
    EXPECT_LE(p.batch, 8);
    prefill |= p.seqlen_q == p.seqlen_k && p.seqlen_q >= 512;
    if (p.seqlen_q < p.seqlen_k) {
      decode_rows.insert(p.seqlen_q);
      decode_keys.insert(p.seqlen_k);
    }
  }
  EXPECT_TRUE(prefill);
  EXPECT_EQ(decode_rows, (std::set<int64_t>{1, 4, 16}));
  EXPECT_EQ(decode_keys, (std::set<int64_t>{1024, 4096, 8192, 32768}));
}

// Issue 17's study suites: each loads, holds cases, and writes its expected finding beside them.
TEST(StudySuites, EachLoadsAndStatesItsExpectedFinding) {
  for (const char* name : {"masking", "memory", "long_context", "decode"}) {
    SCOPED_TRACE(name);
    const Suite suite = value_of(load_suite(name));
    EXPECT_FALSE(suite.entries.empty());
    std::ifstream file(suites_directory() + "/" + name + ".toml");
    const std::string text((std::istreambuf_iterator<char>(file)),
                           std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("expected finding"), std::string::npos);
  }
}

}  // namespace
}  // namespace attnbench
