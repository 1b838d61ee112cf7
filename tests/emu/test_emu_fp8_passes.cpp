// cuda.flash3_fp8's passes before the forward (issue 16), run on the emulated device and read
// back from the plan's scratch: on fp16/bf16 inputs the amax and quantize passes must produce
// the recipe's steps 1 and 2 bit for bit (reference/fp8_recipe.h, quantize_inputs): the e4m3 Q
// and K, with Q and K rotated in double as the recipe rotates them for the incoherent kernel, and
// the three descales; and the layout pass must write V^T, e4m3 and in v_key_of_column's key order,
// zeros past seqlen_k. Over fp16 and bf16, the normal and outlier inputs, every layout (so the
// passes' packed copies are compared through the input's placement), tails off the tiles, more
// rows than the amax pass's grid covers at once, and an all-zero V (descale 1); per-tensor and
// per-block scales (each group's descale compared). Then the passes around cuDNN's FP8 forward
// (cudnn.sdpa_fp8_quantized and _incoherent, whose cuDNN part runs on a GPU only), called through
// their launch functions: the quantize pass must write the recipe's e4m3 Q, K and V, packed, their
// descales and the output scale; the dequantize pass must read an e4m3 output stored at that scale
// back as the recipe's step 5 does (Fp8Recipe::e4m3_output).
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
#include "reference/formats.h"
#include "reference/fp8_recipe.h"
#include "reference/fp8_scale.h"
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

// ---- the passes around cuDNN's FP8 forward ----------------------------------------------------

struct QuantizeCase {
  const char* shape;
  Distribution distribution;
  bool incoherent;
};

void PrintTo(const QuantizeCase& c, std::ostream* out) {
  *out << c.shape << (c.incoherent ? " incoherent" : "");
}

class CudnnFp8Quantize : public ::testing::TestWithParam<QuantizeCase> {};

TEST_P(CudnnFp8Quantize, WritesTheRecipesE4m3QKVDescalesAndOutputScale) {
  const QuantizeCase c = GetParam();
  const Problem problem = parsed_shape(c.shape);
  ProblemInputs inputs;
  ASSERT_TRUE(make_inputs(problem, c.distribution, printed_fresh_seed(), inputs).ok);
  const int64_t d = problem.head_dim_qk;
  std::vector<uint8_t> q(
      static_cast<size_t>(problem.batch * problem.seqlen_q * problem.heads_q * d));
  std::vector<uint8_t> k(
      static_cast<size_t>(problem.batch * problem.seqlen_k * problem.heads_kv * d));
  std::vector<uint8_t> v(k.size());
  std::vector<float> partials(3 * flash3::kAmaxBlocks), descales(3, -1.0f);
  float output_scale = -1.0f;
  flash3::Fp8PassArgs args;
  args.q = q.data();
  args.k = k.data();
  args.v = v.data();
  args.amax_partials = partials.data();
  args.descales = descales.data();
  args.output_scale = &output_scale;
  Fp8Recipe recipe;
  recipe.incoherent = c.incoherent;
  if (c.incoherent) flash3::set_incoherent_rotation(args, recipe.sign_seed, d);

  const ProblemLayout layout = describe_layout(problem);
  std::vector<unsigned char> out(static_cast<size_t>(layout.out_elements) *
                                 dtype_size(problem.output_dtype));
  const AttentionParams params =
      make_params(inputs, host_pointers(inputs), out.data(), nullptr, 1.0f);
  emu::Stream stream;
  const Status ran = problem.input_dtype == DType::f16
                         ? flash3::launch_fp8_quantize<128, DType::f16>(params, args, &stream)
                         : flash3::launch_fp8_quantize<128, DType::bf16>(params, args, &stream);
  ASSERT_TRUE(ran) << ran.message;

  const QuantizedInputs expected = quantize_inputs(recipe, problem, inputs.view());
  EXPECT_EQ(differing(q.data(), expected.q, expected.layout.q, problem.batch, problem.seqlen_q,
                      problem.heads_q, d),
            0)
      << "e4m3 Q";
  EXPECT_EQ(differing(k.data(), expected.k, expected.layout.k, problem.batch, problem.seqlen_k,
                      problem.heads_kv, d),
            0)
      << "e4m3 K";
  EXPECT_EQ(differing(v.data(), expected.v, expected.layout.v, problem.batch, problem.seqlen_k,
                      problem.heads_kv, d),
            0)
      << "e4m3 V, not rotated";
  EXPECT_EQ(descales, (std::vector<float>{expected.q.descales[0], expected.k.descales[0],
                                          expected.v.descales[0]}));
  EXPECT_EQ(output_scale, fp8_output_scale(expected.v.descales[0]));
}

INSTANTIATE_TEST_SUITE_P(
    Emu, CudnnFp8Quantize,
    ::testing::Values(
        QuantizeCase{"b=2,hq=4,hkv=2,sq=70,sk=203,d=128,dtype=bf16", Distribution::outliers, false},
        QuantizeCase{"b=2,hq=2,hkv=1,sq=129,sk=33,d=128,dtype=fp16,layout=bhsd",
                     Distribution::normal, false},
        QuantizeCase{"b=2,hq=4,hkv=2,sq=70,sk=203,d=128,dtype=fp16", Distribution::outliers, true},
        QuantizeCase{"b=2,hq=2,s=65,d=128,dtype=bf16,layout=qkv_packed", Distribution::sink,
                     true}));

// An e4m3 output stored at the output scale (every finite byte, in random order), read into a
// 16-bit output of bhsd strides: each value is the byte's e4m3 value divided by the scale, rounded
// to the output dtype, as fp8_recipe_row's step 5 has it.
TEST(CudnnFp8Dequantize, ReadsTheE4m3OutputBackAsTheRecipesStep5) {
  for (const char* shape : {"b=2,hq=3,sq=37,sk=5,d=128,dtype=bf16,layout=bhsd",
                            "b=1,hq=2,sq=70,sk=5,d=128,dtype=fp16"}) {
    SCOPED_TRACE(shape);
    const Problem problem = parsed_shape(shape);
    std::mt19937_64 rng(printed_fresh_seed());
    const int64_t rows = problem.batch * problem.seqlen_q * problem.heads_q;
    std::vector<uint8_t> stored(static_cast<size_t>(rows * problem.head_dim_v));
    for (uint8_t& byte : stored) {
      do {
        byte = static_cast<uint8_t>(rng());
      } while ((byte & 0x7f) == 0x7f);  // e4m3's NaN
    }
    const float scale = fp8_output_scale(std::uniform_real_distribution<float>(1e-3f, 1.0f)(rng));
    const ProblemLayout layout = describe_layout(problem);
    std::vector<unsigned char> out(static_cast<size_t>(layout.out_elements) * 2);
    AttentionParams params = shape_params(problem);
    params.out = out.data();
    emu::Stream stream;
    const Status ran = problem.output_dtype == DType::f16
                           ? flash3::launch_fp8_dequantize_output<128, DType::f16>(
                                 params, stored.data(), &scale, &stream)
                           : flash3::launch_fp8_dequantize_output<128, DType::bf16>(
                                 params, stored.data(), &scale, &stream);
    ASSERT_TRUE(ran) << ran.message;
    int64_t wrong = 0;
    for (int64_t b = 0; b < problem.batch; ++b) {
      for (int64_t s = 0; s < problem.seqlen_q; ++s) {
        for (int64_t h = 0; h < problem.heads_q; ++h) {
          const uint8_t* row = stored.data() + ((b * problem.seqlen_q + s) * problem.heads_q + h) *
                                                   problem.head_dim_v;
          const int64_t first = layout.out.row_start(b, s, h);
          for (int64_t c = 0; c < problem.head_dim_v; ++c) {
            const float expected =
                round_to(problem.output_dtype, e4m3_bits_to_float(row[c]) / scale);
            const float got = load_element(problem.output_dtype, out.data(), first + c);
            wrong += std::memcmp(&expected, &got, sizeof got) != 0;
          }
        }
      }
    }
    EXPECT_EQ(wrong, 0);
  }
}

}  // namespace
}  // namespace attnbench
