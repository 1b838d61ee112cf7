// cuda.flash3_fp8's passes before the forward (issue 16), run on the emulated device and read
// back from the plan's scratch: on fp16/bf16 inputs the amax and quantize passes must produce
// the recipe's steps 1 and 2 bit for bit (reference/fp8_recipe.h, quantize_inputs): the e4m3 Q
// and K, with Q and K rotated in double as the recipe rotates them for the incoherent kernel, and
// the three descales; and the layout pass must write V^T, e4m3 and in v_key_of_column's key order,
// zeros past seqlen_k. Over fp16 and bf16, the normal and outlier inputs, every layout (so the
// passes' packed copies are compared through the input's placement), tails off the tiles, more
// rows than the amax pass's grid covers at once, and an all-zero V (descale 1); per-tensor and
// per-block scales (each group's descale compared).
#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "harness/measure/inputs.h"
#include "kernels/cuda/flash3/flash3_fp8_launch.h"
#include "kernels/emu/emu_kernels.h"
#include "kernels/emu/launch.h"
#include "reference/fp8_recipe.h"
#include "tests/support/fresh_seed.h"
#include "tests/support/problems.h"

namespace attnbench {
namespace {

// Remembers every allocation, in order, so the test can read the plan's scratch.
class RecordingAllocator final : public ScratchAllocator {
 public:
  void* allocate(size_t bytes) override {
    buffers_.push_back({::operator new(bytes), bytes});
    return buffers_.back().first;
  }
  void deallocate(void* pointer) override { ::operator delete(pointer); }
  // Allocation `index` (in the plan's order: V^T, Q, K, the amax partials, the descales), which
  // must hold `bytes`.
  const uint8_t* at(size_t index, size_t bytes) const {
    EXPECT_LT(index, buffers_.size());
    if (index >= buffers_.size()) return nullptr;
    EXPECT_EQ(buffers_[index].second, bytes) << "scratch buffer " << index;
    return static_cast<const uint8_t*>(buffers_[index].first);
  }
  size_t count() const { return buffers_.size(); }

 private:
  std::vector<std::pair<void*, size_t>> buffers_;
};

Kernel emulated(const std::string& name) {
  for (Kernel& kernel : emulated_kernels()) {
    if (kernel.name == name) return kernel;
  }
  ADD_FAILURE() << name << " is not an emulated kernel";
  return {};
}

uint64_t printed_fresh_seed() {
  const uint64_t seed = fresh_seed();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

// Elements of a (batch, seqlen, heads, d) tensor whose e4m3 copy (packed in that order at
// `copy`) differs from the recipe's bits (at `placement` of its input buffer).
int64_t differing(const uint8_t* copy, const QuantizedTensor& recipe,
                  const TensorPlacement& placement, int64_t batch, int64_t seqlen, int64_t heads,
                  int64_t d) {
  int64_t count = 0;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < seqlen; ++s) {
      for (int64_t h = 0; h < heads; ++h) {
        const uint8_t* row = copy + ((b * seqlen + s) * heads + h) * d;
        const int64_t first = placement.row_start(b, s, h);
        for (int64_t c = 0; c < d; ++c) {
          count += row[c] != recipe.bits[static_cast<size_t>(first + c)];
        }
      }
    }
  }
  return count;
}

// V^T's bytes that differ from the recipe's V at their key (zeros past seqlen_k).
int64_t differing_transposed(const uint8_t* vt, int64_t keys_padded, const QuantizedTensor& v,
                             const TensorPlacement& placement, const Problem& problem) {
  int64_t count = 0;
  const int64_t d = problem.head_dim_v;
  for (int64_t b = 0; b < problem.batch; ++b) {
    for (int64_t h = 0; h < problem.heads_kv; ++h) {
      for (int64_t c = 0; c < d; ++c) {
        const uint8_t* row = vt + ((b * problem.heads_kv + h) * d + c) * keys_padded;
        for (int64_t column = 0; column < keys_padded; ++column) {
          const int64_t key =
              column / 32 * 32 + flash3::v_key_of_column(static_cast<int>(column % 32));
          const uint8_t expected =
              key < problem.seqlen_k
                  ? v.bits[static_cast<size_t>(placement.row_start(b, key, h) + c)]
                  : uint8_t{0};
          count += row[column] != expected;
        }
      }
    }
  }
  return count;
}

struct PassCase {
  const char* kernel;
  const char* shape;
  Distribution distribution;
  bool zero_v = false;  // V all zeros: its descale is 1, its bytes 0
};

void PrintTo(const PassCase& c, std::ostream* out) { *out << c.kernel << " " << c.shape; }

class Fp8Passes : public ::testing::TestWithParam<PassCase> {};

TEST_P(Fp8Passes, WriteTheRecipesE4m3BitsAndDescales) {
  const PassCase c = GetParam();
  const Kernel kernel = emulated(c.kernel);
  ASSERT_TRUE(kernel.fp8_recipe.has_value());
  const Problem problem = parsed_shape(c.shape);
  ProblemInputs inputs;
  ASSERT_TRUE(make_inputs(problem, c.distribution, printed_fresh_seed(), inputs).ok);
  if (c.zero_v) std::memset(inputs.v_buffer.data(), 0, inputs.v_buffer.bytes());

  RecordingAllocator scratch;
  emu::Stream stream;
  Result<std::unique_ptr<Plan>> plan = kernel.make_plan(problem, PlanContext{scratch, &stream, 0});
  ASSERT_TRUE(plan) << plan.status().message;
  const ProblemLayout layout = describe_layout(problem);
  std::vector<unsigned char> out(static_cast<size_t>(layout.out_elements) *
                                 dtype_size(problem.output_dtype));
  std::vector<float> lse(static_cast<size_t>(layout.lse_elements));
  const Status ran =
      (*plan)->run(make_params(inputs, host_pointers(inputs), out.data(), lse.data(), 1.0f));
  ASSERT_TRUE(ran) << ran.message;

  const QuantizedInputs recipe = quantize_inputs(*kernel.fp8_recipe, problem, inputs.view());
  const int64_t d = problem.head_dim_qk;
  const size_t q_bytes =
      static_cast<size_t>(problem.batch * problem.seqlen_q * problem.heads_q * d);
  const size_t k_bytes =
      static_cast<size_t>(problem.batch * problem.seqlen_k * problem.heads_kv * d);
  const int64_t keys_padded = flash3::fp8_keys_padded(problem.seqlen_k);
  const size_t vt_bytes = static_cast<size_t>(problem.batch * problem.heads_kv * d * keys_padded);

  // V^T, Q, K, then the amax partials and the descales (per-tensor scales) or the descales and V's
  // inverse descales (per-block).
  const bool per_block = kernel.fp8_recipe->scaling == Fp8Scaling::per_block;
  ASSERT_EQ(scratch.count(), 5u);
  EXPECT_EQ(differing(scratch.at(1, q_bytes), recipe.q, recipe.layout.q, problem.batch,
                      problem.seqlen_q, problem.heads_q, d),
            0)
      << "e4m3 Q";
  EXPECT_EQ(differing(scratch.at(2, k_bytes), recipe.k, recipe.layout.k, problem.batch,
                      problem.seqlen_k, problem.heads_kv, d),
            0)
      << "e4m3 K";
  EXPECT_EQ(differing_transposed(scratch.at(0, vt_bytes), keys_padded, recipe.v, recipe.layout.v,
                                 problem),
            0)
      << "e4m3 V^T";
  // Q's groups, then K's, then V's, each in the recipe's group order.
  std::vector<float> expected = recipe.q.descales;
  expected.insert(expected.end(), recipe.k.descales.begin(), recipe.k.descales.end());
  expected.insert(expected.end(), recipe.v.descales.begin(), recipe.v.descales.end());
  std::vector<float> descales(expected.size());
  std::memcpy(descales.data(), scratch.at(per_block ? 3 : 4, descales.size() * sizeof(float)),
              descales.size() * sizeof(float));
  EXPECT_EQ(descales, expected);
}

// Tails off every tile; bhsd and packed; a Q of 1600 rows, past the amax pass's 128 blocks of 8
// warps (its rows loop); an all-zero V.
INSTANTIATE_TEST_SUITE_P(
    Emu, Fp8Passes,
    ::testing::Values(
        PassCase{"cuda.flash3_fp8_incoherent", "b=2,hq=4,hkv=2,sq=70,sk=203,d=128,dtype=bf16",
                 Distribution::outliers},
        PassCase{"cuda.flash3_fp8_incoherent",
                 "b=2,hq=2,hkv=1,sq=129,sk=33,d=128,dtype=fp16,layout=bhsd", Distribution::normal},
        PassCase{"cuda.flash3_fp8_incoherent", "b=2,hq=2,s=65,d=128,dtype=bf16,layout=qkv_packed",
                 Distribution::outliers},
        PassCase{"cuda.flash3_fp8_incoherent", "b=2,hq=8,hkv=2,sq=100,sk=40,d=128,dtype=fp16",
                 Distribution::outliers, /*zero_v=*/true},
        PassCase{"cuda.flash3_fp8", "b=2,hq=4,hkv=2,sq=70,sk=203,d=128,dtype=fp16",
                 Distribution::outliers},
        PassCase{"cuda.flash3_fp8", "b=2,hq=8,hkv=1,sq=17,sk=300,d=128,dtype=bf16,layout=bhsd",
                 Distribution::normal},
        PassCase{"cuda.flash3_fp8_block", "b=2,hq=4,hkv=2,sq=300,sk=203,d=128,dtype=bf16",
                 Distribution::outliers},
        PassCase{"cuda.flash3_fp8_block", "b=1,hq=2,s=129,d=128,dtype=fp16,layout=qkv_packed",
                 Distribution::sink},
        PassCase{"cuda.flash3_fp8_block_incoherent",
                 "b=2,hq=2,hkv=1,sq=70,sk=257,d=128,dtype=fp16,layout=bhsd", Distribution::outliers,
                 /*zero_v=*/true}),
    [](const ::testing::TestParamInfo<PassCase>& param_info) {
      // cuda.flash3_fp8_block_incoherent -> Block_incoherent3 (cuda.flash3_fp8 -> Plain0).
      const std::string kernel = param_info.param.kernel;
      const std::string base = "cuda.flash3_fp8";
      std::string variant = kernel == base ? "plain" : kernel.substr(base.size() + 1);
      variant[0] = static_cast<char>(std::toupper(variant[0]));
      return variant + std::to_string(param_info.index);
    });

}  // namespace
}  // namespace attnbench
