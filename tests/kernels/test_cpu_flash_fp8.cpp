// cpu.flash_fp8 and its recipes against the recipe's own rows (reference/fp8_recipe.h,
// fp8_recipe_row), case by case: the kernel tiles with BLAS, the rows sum one key at a time, and
// nothing else may differ. So the LSE agrees to fp32 rounding, and an output element differs by
// more than one unit of the output dtype only where the two fp32 sums put a P on either side of
// an e4m3 rounding point (rare: asserted below 0.5 % of the elements, and never by more than one
// e4m3 step of the largest P, 2^(offset - 3), times max|v| / l). Over every mask (rows that see
// no key included), seqlen_q > seqlen_k and < 128 keys, tails off the 64-row and 128-key tiles,
// GQA, the three layouts, fp16 and bf16, and recipes in reverse key order and 64-key tiles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "harness/measure/inputs.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/registry.h"
#include "reference/formats.h"
#include "tests/support/kernel_names.h"
#include "tests/support/problems.h"
#include "tests/support/test_names.h"

namespace attnbench {
namespace {

class CountingAllocator final : public ScratchAllocator {
 public:
  void* allocate(size_t bytes) override {
    live_bytes_ += bytes;
    return ::operator new(bytes);
  }
  void deallocate(void* pointer) override { ::operator delete(pointer); }
  size_t live_bytes() const { return live_bytes_; }

 private:
  size_t live_bytes_ = 0;
};

const std::vector<std::string>& shapes() {
  static const std::vector<std::string> kShapes = {
      "b=2,hq=4,s=150,d=64,dtype=fp16",
      "b=1,hq=2,sq=200,sk=300,d=128,dtype=bf16,mask=causal",
      // seqlen_q > seqlen_k: the first rows see no key under causal_br; fewer than 128 keys.
      "b=2,hq=4,hkv=2,sq=140,sk=77,d=64,dtype=fp16,mask=causal_br",
      "b=1,hq=3,sq=70,sk=333,d=32,dtype=bf16,mask=window(40,9)",
      // padding: some batches see few keys (a key length of 0 leaves whole rows empty).
      "b=3,hq=2,sq=65,sk=260,d=64,dtype=fp16,mask=padding",
      // GQA 8:1 and the two other layouts.
      "b=1,hq=8,hkv=1,sq=33,sk=513,d=128,dtype=bf16,mask=causal_br",
      "b=2,hq=2,sq=129,sk=257,d=64,dtype=fp16,mask=causal,layout=bhsd",
      "b=1,hq=2,s=131,d=64,dtype=bf16,layout=qkv_packed",
  };
  return kShapes;
}

struct Agreement {
  int64_t elements = 0;
  int64_t beyond_one_unit = 0;
  double worst_error_over_bound = 0;  // the largest error in units of the flip bound
  double worst_lse_error = 0;         // relative to max(1, |lse|)
  int64_t empty_rows_wrong = 0;       // rows with no visible key: out 0, LSE -inf
};

// The kernel's output and LSE for `problem` against fp8_recipe_row on the same inputs.
Agreement compare(const Kernel& kernel, const Problem& problem, uint64_t seed) {
  ProblemInputs inputs;
  EXPECT_TRUE(make_inputs(problem, Distribution::normal, seed, inputs).ok);
  const int64_t rows = problem.batch * problem.heads_q * problem.seqlen_q, dv = problem.head_dim_v;
  std::vector<unsigned char> out(static_cast<size_t>(rows * dv) * dtype_size(problem.output_dtype));
  std::vector<float> lse(static_cast<size_t>(rows), std::numeric_limits<float>::quiet_NaN());
  CountingAllocator scratch;
  Result<std::unique_ptr<Plan>> plan = kernel.make_plan(problem, PlanContext{scratch});
  EXPECT_TRUE(plan) << plan.status().message;
  if (!plan) return {};
  const AttentionParams params =
      make_params(inputs, host_pointers(inputs), out.data(), lse.data(), 1.0f);
  const Status ran = (*plan)->run(params);
  EXPECT_TRUE(ran.ok) << ran.message;

  const Fp8Recipe& recipe = *kernel.fp8_recipe;
  const QuantizedInputs quantized = quantize_inputs(recipe, problem, inputs.view());
  double max_v = 0;
  for (float value : quantized.v.values) max_v = std::max(max_v, std::fabs(double{value}));
  max_v *= *std::max_element(quantized.v.descales.begin(), quantized.v.descales.end());
  const double flip_bound = std::ldexp(1.0, recipe.p_max_offset - 3) * max_v /
                            std::ldexp(1.0, recipe.p_max_offset);  // l >= 2^offset
  Agreement a;
  std::vector<float> expected(static_cast<size_t>(dv));
  for (int64_t b = 0; b < problem.batch; ++b) {
    for (int64_t h = 0; h < problem.heads_q; ++h) {
      for (int64_t i = 0; i < problem.seqlen_q; ++i) {
        float expected_lse = 0;
        fp8_recipe_row(recipe, problem, quantized, b, h, i, expected.data(), &expected_lse);
        const int64_t row = (b * problem.heads_q + h) * problem.seqlen_q + i;  // LSE's index
        const int64_t first = inputs.layout.out.row_start(b, i, h);
        const float got_lse = lse[static_cast<size_t>(row)];
        if (std::isinf(expected_lse)) {
          bool zeros = got_lse == expected_lse;
          for (int64_t d = 0; d < dv; ++d)
            zeros = zeros && load_element(problem.output_dtype, out.data(), first + d) == 0.0f;
          a.empty_rows_wrong += zeros ? 0 : 1;
          continue;
        }
        const double lse_error = std::fabs(double{got_lse} - expected_lse) /
                                 std::max(1.0, std::fabs(double{expected_lse}));
        a.worst_lse_error = std::isnan(lse_error) ? 1e9 : std::max(a.worst_lse_error, lse_error);
        for (int64_t d = 0; d < dv; ++d) {
          const double want = expected[static_cast<size_t>(d)];
          const double error =
              std::fabs(load_element(problem.output_dtype, out.data(), first + d) - want);
          const double unit = std::ldexp(1.0, problem.output_dtype == DType::f16 ? -10 : -7) *
                              std::max(1.0, std::fabs(want));
          ++a.elements;
          if (!(error <= unit)) ++a.beyond_one_unit;
          a.worst_error_over_bound =
              std::isnan(error) ? 1e9 : std::max(a.worst_error_over_bound, error / flip_bound);
        }
      }
    }
  }
  return a;
}

void expect_agreement(const Kernel& kernel, uint64_t seed) {
  for (const std::string& shape : shapes()) {
    SCOPED_TRACE(kernel.name + " " + shape + " seed " + std::to_string(seed));
    const Problem problem = parsed_shape(shape);
    if (!fp8_recipe_limits(*kernel.fp8_recipe, problem).empty()) continue;
    const Agreement a = compare(kernel, problem, seed);
    EXPECT_EQ(a.empty_rows_wrong, 0);
    EXPECT_LE(a.worst_lse_error, 1e-6);
    EXPECT_LE(a.beyond_one_unit, a.elements / 200) << "of " << a.elements << " elements";
    EXPECT_LE(a.worst_error_over_bound, 1.0);
  }
}

class CpuFlashFp8 : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuFlashFp8, AgreesWithItsRecipeRowsOnEveryCase) {
  expect_agreement(*find_kernel(GetParam()), std::random_device{}());
}

TEST_P(CpuFlashFp8, RefusesWhatItsRecipeCannotRun) {
  const Kernel& kernel = *find_kernel(GetParam());
  CountingAllocator scratch;
  const Result<std::unique_ptr<Plan>> fp32 =
      kernel.make_plan(parsed_shape("b=1,hq=1,s=16,d=64,dtype=fp32"), PlanContext{scratch});
  ASSERT_FALSE(fp32.ok());
  EXPECT_NE(fp32.status().message.find("dtype fp32 not supported"), std::string::npos)
      << fp32.status().message;
  const Result<std::unique_ptr<Plan>> d96 =
      kernel.make_plan(parsed_shape("b=1,hq=1,s=16,d=96,dtype=bf16"), PlanContext{scratch});
  EXPECT_EQ(d96.ok(), !kernel.fp8_recipe->incoherent) << d96.status().message;
  if (!d96.ok()) {
    EXPECT_EQ(d96.status().message,
              "unsupported: incoherent processing needs a power-of-two head_dim_qk up to 256 "
              "(given 96)");
  }
  Fp8Recipe on_tensor_cores = *kernel.fp8_recipe;
  on_tensor_cores.tensor_core_sum_bits = 13;
  on_tensor_cores.block_rows = on_tensor_cores.key_tile;  // inside the recipe's own limits
  const Result<std::unique_ptr<Plan>> narrow =
      cpu_flash_fp8_recipe_kernel("test.narrow", "", on_tensor_cores)
          .make_plan(parsed_shape("b=1,hq=1,s=16,d=64,dtype=bf16"), PlanContext{scratch});
  ASSERT_FALSE(narrow.ok()) << "a host kernel summing with BLAS took the tensor cores' recipe";
  EXPECT_NE(narrow.status().message.find("sums in fp32"), std::string::npos)
      << narrow.status().message;
}

TEST_P(CpuFlashFp8, ReportsItsQuantizedCopiesAsExtraMemory) {
  const Kernel& kernel = *find_kernel(GetParam());
  const Problem problem = parsed_shape("b=1,hq=2,s=256,d=64,dtype=fp16");
  ProblemInputs inputs;
  ASSERT_TRUE(make_inputs(problem, Distribution::normal, std::random_device{}(), inputs).ok);
  std::vector<uint16_t> out(static_cast<size_t>(2 * 256 * 64));
  CountingAllocator scratch;
  Result<std::unique_ptr<Plan>> plan = kernel.make_plan(problem, PlanContext{scratch});
  ASSERT_TRUE(plan) << plan.status().message;
  ASSERT_TRUE(
      (*plan)->run(make_params(inputs, host_pointers(inputs), out.data(), nullptr, 1.0f)).ok);
  // Q, K and V of 2 * 256 * 64 elements: a byte and a float each at least, beside the tiles.
  const std::optional<int64_t> extra = (*plan)->own_extra_memory_bytes();
  ASSERT_TRUE(extra.has_value());
  EXPECT_GE(*extra, static_cast<int64_t>(scratch.live_bytes() + 3 * 2 * 256 * 64 * 5));
}

INSTANTIATE_TEST_SUITE_P(Registry, CpuFlashFp8, ::testing::ValuesIn(fp8_recipe_cpu_kernel_names()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return test_name_part(param.param);
                         });

// The recipe's other knobs, which no registered kernel uses, through the same kernel code.
TEST(CpuFlashFp8Recipes, ReverseKeyOrderAndSmallerTilesAgreeWithTheirRows) {
  Fp8Recipe reverse;
  reverse.reverse_keys = true;
  reverse.scaling = Fp8Scaling::per_head;
  expect_agreement(cpu_flash_fp8_recipe_kernel("test.fp8_reverse", "reverse", reverse),
                   std::random_device{}());
  Fp8Recipe small_tiles;
  small_tiles.key_tile = 64;
  small_tiles.p_max_offset = 4;
  small_tiles.incoherent = true;
  expect_agreement(cpu_flash_fp8_recipe_kernel("test.fp8_tile64", "64-key tiles", small_tiles),
                   std::random_device{}());
}

}  // namespace
}  // namespace attnbench
