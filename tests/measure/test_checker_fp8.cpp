// How the checker judges FP8 kernels whose recipe it cannot see (cuDNN's): the envelope of the
// modeled recipes (lowp_model_for, with_envelope in harness/measure/checker.h) and the term for
// the FP8 tensor cores' narrow sums (kFp8ScoreRelativeError). The kernels here are host models of
// an opaque FP8 kernel on e4m3 inputs: the recipe of reference/fp8_recipe.h written out again,
// with its key tile, key order and accumulator width as knobs, and one defect to catch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "harness/measure/case_runner.h"
#include "harness/measure/checker.h"
#include "harness/measure/executor.h"
#include "harness/measure/inputs.h"
#include "kernels/cpu/cpu_kernels.h"
#include "reference/formats.h"
#include "reference/mask.h"
#include "tests/support/problems.h"

namespace attnbench {
namespace {

struct OpaqueFp8 {
  int64_t key_tile = 128;
  bool reverse_keys = false;
  int accumulator_bits = 0;  // bits a score's 32-product steps keep (tensor_core_sum); 0: fp32
  bool no_rescale = false;   // the defect: O and l not rescaled when the running max grows
};

class OpaqueFp8Plan final : public Plan {
 public:
  OpaqueFp8Plan(const Problem& problem, OpaqueFp8 model) : problem_(problem), model_(model) {}

  Status run(const AttentionParams& p) override {
    for (int64_t b = 0; b < p.batch; ++b) {
      for (int64_t h = 0; h < p.heads_q; ++h) {
        for (int64_t i = 0; i < p.seqlen_q; ++i) run_row(p, b, h, i);
      }
    }
    return Status::Ok();
  }

 private:
  std::vector<float> load(const void* data, int64_t at, int64_t dim) const {
    std::vector<float> row(static_cast<size_t>(dim));
    for (int64_t d = 0; d < dim; ++d)
      row[static_cast<size_t>(d)] = load_element(DType::e4m3, data, at + d);
    return row;
  }

  void run_row(const AttentionParams& p, int64_t b, int64_t h, int64_t i) const {
    const int64_t dqk = p.head_dim_qk, dv = p.head_dim_v, h_kv = h / p.heads_per_kv;
    const KeyRange keys = problem_.visible(b, i);
    const std::vector<float> q =
        load(p.q, b * p.q_batch_stride + i * p.q_row_stride + h * p.q_head_stride, dqk);
    std::vector<float> out(static_cast<size_t>(dv), 0.0f);
    float row_max = -std::numeric_limits<float>::infinity(), row_sum = 0;
    const int64_t first_tile = keys.size() > 0 ? keys.begin / model_.key_tile : 0;
    const int64_t last_tile = keys.size() > 0 ? (keys.end - 1) / model_.key_tile : -1;
    for (int64_t step = 0; step <= last_tile - first_tile; ++step) {
      const int64_t tile = model_.reverse_keys ? last_tile - step : first_tile + step;
      const int64_t begin = std::max(keys.begin, tile * model_.key_tile);
      const int64_t end = std::min(keys.end, (tile + 1) * model_.key_tile);
      std::vector<float> scores;
      float tile_max = -std::numeric_limits<float>::infinity();
      for (int64_t j = begin; j < end; ++j) {
        const std::vector<float> k =
            load(p.k, b * p.k_batch_stride + j * p.k_row_stride + h_kv * p.k_head_stride, dqk);
        const float dot = fp8_score_sum(q.data(), k.data(), dqk, model_.accumulator_bits);
        scores.push_back(dot * p.q_descale * p.k_descale * p.scale);
        tile_max = std::max(tile_max, scores.back());
      }
      if (tile_max > row_max) {
        const float correction =
            model_.no_rescale && step > 0 ? 1.0f : fp8_rescale(row_max, tile_max);
        for (float& o : out) o *= correction;
        row_sum *= correction;
        row_max = tile_max;
      }
      for (int64_t j = begin; j < end; ++j) {
        const float x = fp8_p_exponent(scores[static_cast<size_t>(j - begin)], row_max, 8);
        row_sum += std::exp2(x);
        const float weight = fp8_p(x);
        const std::vector<float> v =
            load(p.v, b * p.v_batch_stride + j * p.v_row_stride + h_kv * p.v_head_stride, dv);
        for (int64_t d = 0; d < dv; ++d)
          out[static_cast<size_t>(d)] += weight * v[static_cast<size_t>(d)] * p.v_descale;
      }
    }
    const int64_t at = b * p.out_batch_stride + i * p.out_row_stride + h * p.out_head_stride;
    for (int64_t d = 0; d < dv; ++d) {
      store_element(p.output_dtype, p.out, at + d,
                    row_sum > 0 ? out[static_cast<size_t>(d)] / row_sum : 0.0f);
    }
    if (p.lse != nullptr) {
      p.lse[(b * p.heads_q + h) * p.seqlen_q + i] =
          row_sum > 0 ? fp8_lse(row_max, row_sum, 8) : -std::numeric_limits<float>::infinity();
    }
  }

  Problem problem_;
  OpaqueFp8 model_;
};

Kernel opaque_kernel(OpaqueFp8 model) {
  Kernel kernel;
  kernel.name = "test.opaque_fp8";
  kernel.backend = Backend::cpu;
  kernel.deterministic = true;
  kernel.returns_lse = true;
  kernel.make_plan = [model](const Problem& problem,
                             const PlanContext&) -> Result<std::unique_ptr<Plan>> {
    return std::make_unique<OpaqueFp8Plan>(problem, model);
  };
  return kernel;
}

struct Judged {
  CheckSummary summary;
  std::string failure;
  ReferenceRows plain, envelope;
};

Judged judge(const Kernel& kernel, const std::string& shape, Distribution distribution) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(shape + " seed " + std::to_string(seed));
  const Problem problem = parsed_shape(shape);
  ProblemInputs inputs;
  EXPECT_TRUE(make_inputs(problem, distribution, seed, inputs).ok);
  Judged judged;
  judged.plain = compute_reference(inputs, seed, 1.0f);
  EXPECT_EQ(lowp_model_for(kernel, problem), LowpModel::envelope);
  judged.envelope = with_envelope(judged.plain, inputs, envelope_base_for(kernel));
  std::unique_ptr<DeviceExecutor> executor = make_cpu_executor(size_t{1} << 30);
  EXPECT_TRUE(executor->load_inputs(inputs).ok);
  Result<std::unique_ptr<Plan>> plan = kernel.make_plan(problem, executor->plan_context());
  EXPECT_TRUE(plan) << plan.status().message;
  if (!plan) return judged;
  KernelOutputs outputs;
  Status run_status;
  judged.summary = check_kernel(kernel, **plan, *executor, inputs, judged.envelope, outputs,
                                judged.failure, run_status);
  EXPECT_TRUE(run_status.ok) << run_status.message;
  return judged;
}

constexpr const char* kShape =
    "b=1,hq=2,sq=96,sk=700,d=64,dtype=e4m3,out=bf16,fp8_scaling=per_tensor,mask=causal_br";

TEST(CheckerFp8, OpaqueKernelsAreJudgedByTheEnvelope) {
  EXPECT_EQ(lowp_model_for(opaque_kernel({}), parsed_shape(kShape)), LowpModel::envelope);
  EXPECT_EQ(lowp_model_for(opaque_kernel({}), parsed_shape("b=1,hq=1,s=8,d=64,dtype=bf16")),
            LowpModel::plain);
  Kernel declared = opaque_kernel({});
  declared.fp8_recipe = Fp8Recipe{};
  EXPECT_EQ(lowp_model_for(declared, parsed_shape(kShape)), LowpModel::own_recipe);
}

// A kernel following any modeled recipe but summing its scores in fp32, where the envelope's
// recipes take the FP8 tensor cores' narrow sums, passes the envelope on normal inputs and on sink
// inputs, where the key order matters most; printed beside it, the plain bound it would have had.
TEST(CheckerFp8, EveryModeledRecipePassesTheEnvelope) {
  for (const Distribution distribution : {Distribution::normal, Distribution::sink}) {
    for (const Fp8Recipe& recipe : opaque_fp8_recipes()) {
      SCOPED_TRACE(describe(recipe) + " on " + std::string(distribution_name(distribution)));
      const Judged judged = judge(opaque_kernel({recipe.key_tile, recipe.reverse_keys, 0, false}),
                                  kShape, distribution);
      EXPECT_EQ(judged.failure, "");
      const double plain_bound = 2 * judged.plain.lowp_error + judged.plain.atol;
      std::printf("%-8s %-55s max|out-ref| %.3e, plain bound %.3e, envelope %.3e\n",
                  std::string(distribution_name(distribution)).c_str(), describe(recipe).c_str(),
                  judged.summary.max_abs_error, plain_bound, judged.summary.bound);
    }
  }
}

TEST(CheckerFp8, AMissingRescaleFailsTheEnvelope) {
  const Judged judged = judge(opaque_kernel({128, false, 0, true}), kShape, Distribution::normal);
  EXPECT_NE(judged.failure, "");
}

// cuDNN's FP8 forward behind attnbench's quantize pass (cudnn.sdpa_fp8_quantized and
// cudnn.sdpa_fp8_incoherent): fp16/bf16 inputs, a recipe closed but for its published parts, and
// an e4m3 output at V's scale dequantized to the input dtype. Host kernels following each recipe
// of the envelope around such a base pass it; the plain bf16 bound, which knows nothing of FP8,
// fails them; and a dequantize that leaves out the output scale's 2^-1 fails the envelope.
class DequantizedBy final : public Plan {
 public:
  DequantizedBy(std::unique_ptr<Plan> inner, float factor)
      : inner_(std::move(inner)), factor_(factor) {}
  Status run(const AttentionParams& p) override {
    if (Status status = inner_->run(p); !status) return status;
    const int64_t elements = p.batch * p.seqlen_q * p.heads_q * p.head_dim_v;  // bshd, packed
    for (int64_t i = 0; i < elements; ++i) {
      store_element(p.output_dtype, p.out, i, load_element(p.output_dtype, p.out, i) * factor_);
    }
    return Status::Ok();
  }

 private:
  std::unique_ptr<Plan> inner_;
  float factor_;
};

// A host kernel summing in fp32 where `recipe` (one of the envelope's) sums on the tensor cores.
Kernel closed_recipe_kernel(Fp8Recipe recipe, const Fp8Recipe& base, float factor = 1) {
  recipe.tensor_core_sum_bits = 0;
  Kernel kernel = cpu_flash_fp8_recipe_kernel("test.closed_fp8", "", recipe);
  kernel.fp8_recipe.reset();
  kernel.fp8_envelope_base = base;
  kernel.make_plan = [inner = kernel.make_plan, factor](
                         const Problem& problem,
                         const PlanContext& context) -> Result<std::unique_ptr<Plan>> {
    Result<std::unique_ptr<Plan>> plan = inner(problem, context);
    if (!plan || factor == 1) return plan;
    return std::unique_ptr<Plan>(std::make_unique<DequantizedBy>(std::move(*plan), factor));
  };
  return kernel;
}

TEST(CheckerFp8, QuantizedClosedRecipesAreJudgedByTheEnvelopeAroundTheirBase) {
  constexpr const char* kQuantized = "b=1,hq=2,sq=96,sk=700,d=64,dtype=bf16,mask=causal_br";
  for (const bool incoherent : {false, true}) {
    Fp8Recipe base;
    base.incoherent = incoherent;
    base.e4m3_output = true;
    EXPECT_EQ(lowp_model_for(closed_recipe_kernel(base, base), parsed_shape(kQuantized)),
              LowpModel::envelope);
    for (const Fp8Recipe& recipe : opaque_fp8_recipes(base)) {
      SCOPED_TRACE(describe(recipe));
      const Judged judged =
          judge(closed_recipe_kernel(recipe, base), kQuantized, Distribution::outliers);
      EXPECT_EQ(judged.failure, "");
      const double plain_bound = 2 * judged.plain.lowp_error + judged.plain.atol;
      EXPECT_GT(judged.summary.max_abs_error, plain_bound)
          << "the e4m3 output is not in the plain rows";
      std::printf("%-70s max|out-ref| %.3e, plain bound %.3e, envelope %.3e\n",
                  describe(recipe).c_str(), judged.summary.max_abs_error, plain_bound,
                  judged.summary.bound);
    }
    const Judged unscaled =
        judge(closed_recipe_kernel(base, base, 2.0f), kQuantized, Distribution::outliers);
    EXPECT_NE(unscaled.failure, "") << "dequantized without the output scale's 2^-1";
  }
}

// Issue 16: the FP8 tensor cores' narrow sums in the scores (d = 128: four 32-product steps a
// score), at 16k keys, where the most scores meet in one row's softmax. The envelope's recipes sum
// as the emulator's 13-bit model does; a kernel keeping 14 bits of each step (Hopper keeps "about
// 14", DeepSeek-V3's report) must pass, and one keeping 6 (each product cut to 2^-6 of its step's
// largest) is more than the term allows: its LSE fails by about 3x (7 bits: 1.2-1.6x, too near to
// assert). P V's sum runs in fp32 in these host models; tests/emu/test_emu_fp8_sums.cpp shows the
// emulated kernels' P V on the tensor cores at 16k keys is their recipe's.
TEST(CheckerFp8, NarrowAccumulationAtSeqlen16kStaysInsideTheBound) {
  constexpr const char* kLong =
      "b=1,hq=2,sq=16,sk=16384,d=128,dtype=e4m3,out=bf16,fp8_scaling=per_tensor";
  const Judged fourteen =
      judge(opaque_kernel({128, false, 14, false}), kLong, Distribution::normal);
  EXPECT_EQ(fourteen.failure, "");
  std::printf("14-bit sums at 16k keys: max|out-ref| %.3e of bound %.3e, LSE error %.3e\n",
              fourteen.summary.max_abs_error, fourteen.summary.bound,
              fourteen.summary.lse_max_error);
  const Judged six = judge(opaque_kernel({128, false, 6, false}), kLong, Distribution::normal);
  EXPECT_NE(six.failure, "");
  std::printf("6-bit sums: %s\n", six.failure.c_str());
}

}  // namespace
}  // namespace attnbench
