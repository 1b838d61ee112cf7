// The CPU kernels against a plain fp64 loop written here (independent of reference/attention),
// over every mask, GQA/MQA, seqlen_q != seqlen_k, head_dim_v != head_dim_qk, the three layouts,
// fp16/bf16, fully masked rows and tile boundaries; plus determinism, the scratch each kernel
// takes, the support-table messages and the registry.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/kernel.h"
#include "kernels/registry.h"
#include "reference/formats.h"
#include "tests/support/kernel_names.h"
#include "tests/support/masks.h"
#include "tests/support/problems.h"

namespace attnbench {
namespace {

constexpr double kLog2e = 1.4426950408889634;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// ---- a scratch allocator that counts -----------------------------------------------------------

class CountingAllocator final : public ScratchAllocator {
 public:
  explicit CountingAllocator(size_t limit_bytes = std::numeric_limits<size_t>::max())
      : limit_bytes_(limit_bytes) {}
  void* allocate(size_t bytes) override {
    if (bytes > limit_bytes_ - live_bytes_) return nullptr;
    constexpr size_t kAlignment = 64;
    void* pointer =
        std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
    if (pointer == nullptr) return nullptr;
    sizes_.push_back({pointer, bytes});
    live_bytes_ += bytes;
    peak_bytes_ = std::max(peak_bytes_, live_bytes_);
    return pointer;
  }
  void deallocate(void* pointer) override {
    for (auto it = sizes_.begin(); it != sizes_.end(); ++it) {
      if (it->first != pointer) continue;
      live_bytes_ -= it->second;
      sizes_.erase(it);
      std::free(pointer);
      return;
    }
    ADD_FAILURE() << "deallocate of a pointer this allocator did not hand out";
  }
  size_t peak_bytes() const { return peak_bytes_; }
  size_t live_bytes() const { return live_bytes_; }

 private:
  size_t limit_bytes_;
  std::vector<std::pair<void*, size_t>> sizes_;
  size_t live_bytes_ = 0;
  size_t peak_bytes_ = 0;
};

// ---- a test case and its buffers ---------------------------------------------------------------

struct Case {
  int batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim_qk, head_dim_v;
  DType dtype;
  Mask mask;
  Layout layout;
};

std::string describe(const Case& c) {
  return "b=" + std::to_string(c.batch) + " hq=" + std::to_string(c.heads_q) +
         " hkv=" + std::to_string(c.heads_kv) + " sq=" + std::to_string(c.seqlen_q) +
         " sk=" + std::to_string(c.seqlen_k) + " dqk=" + std::to_string(c.head_dim_qk) +
         " dv=" + std::to_string(c.head_dim_v) + " dtype=" + std::string(dtype_name(c.dtype)) +
         " mask=" + std::to_string(static_cast<int>(c.mask.kind)) + "(" +
         std::to_string(c.mask.window_left) + "," + std::to_string(c.mask.window_right) +
         ") layout=" + std::to_string(static_cast<int>(c.layout));
}

// The CPU kernels write their input dtype and keep P in fp32, whatever the input.
Problem to_problem(const Case& c) {
  Problem problem = make_problem(c.batch, c.heads_q, c.heads_kv, c.seqlen_q, c.seqlen_k,
                                 c.head_dim_qk, c.head_dim_v, c.mask, c.dtype, c.layout);
  problem.output_dtype = c.dtype;
  problem.p_dtype = DType::f32;
  return problem;
}

struct TensorStrides {
  int64_t batch, row, head, offset;
};

// Element strides of one tensor of `heads` heads, `seqlen` rows, `dim` columns, written here
// from the layout definitions (bshd, bhsd, BS3HD) rather than taken from reference/.
TensorStrides strides_for(Layout layout, int64_t seqlen, int64_t heads, int64_t dim,
                          int which_packed) {
  switch (layout) {
    case Layout::bshd:
      return {seqlen * heads * dim, heads * dim, dim, 0};
    case Layout::bhsd:
      return {heads * seqlen * dim, dim, seqlen * dim, 0};
    case Layout::qkv_packed:
      return {seqlen * 3 * heads * dim, 3 * heads * dim, dim, which_packed * heads * dim};
    case Layout::thd:  // varlen batches: test_checker's and the ctest suite's cases
      break;
  }
  return {};
}

struct Tensors {
  Case c;
  std::vector<unsigned char> q, k, v, out;  // k, v empty for qkv_packed
  std::vector<float> lse;
  std::vector<int> key_lengths;
  TensorStrides q_strides, k_strides, v_strides, out_strides;

  int64_t q_index(int64_t b, int64_t h, int64_t i, int64_t col) const {
    return q_strides.offset + b * q_strides.batch + i * q_strides.row + h * q_strides.head + col;
  }
  int64_t k_index(int64_t b, int64_t h, int64_t j, int64_t col) const {
    return k_strides.offset + b * k_strides.batch + j * k_strides.row + h * k_strides.head + col;
  }
  int64_t v_index(int64_t b, int64_t h, int64_t j, int64_t col) const {
    return v_strides.offset + b * v_strides.batch + j * v_strides.row + h * v_strides.head + col;
  }
  int64_t out_index(int64_t b, int64_t h, int64_t i, int64_t col) const {
    return b * out_strides.batch + i * out_strides.row + h * out_strides.head + col;
  }
  const void* k_data() const { return c.layout == Layout::qkv_packed ? q.data() : k.data(); }
  const void* v_data() const { return c.layout == Layout::qkv_packed ? q.data() : v.data(); }
};

void fill_normal(std::vector<unsigned char>& buffer, DType dtype, int64_t elements,
                 std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  buffer.assign(static_cast<size_t>(elements) * dtype_size(dtype), 0);
  for (int64_t i = 0; i < elements; ++i) store_element(dtype, buffer.data(), i, normal(rng));
}

void poison(std::vector<unsigned char>& buffer, DType dtype, int64_t elements) {
  for (int64_t i = 0; i < elements; ++i) {
    store_element(dtype, buffer.data(), i, std::numeric_limits<float>::quiet_NaN());
  }
}

Tensors make_tensors(const Case& c, std::mt19937_64& rng) {
  Tensors t;
  t.c = c;
  const bool packed = c.layout == Layout::qkv_packed;
  t.q_strides = strides_for(c.layout, c.seqlen_q, c.heads_q, c.head_dim_qk, 0);
  t.k_strides = strides_for(c.layout, c.seqlen_k, c.heads_kv, c.head_dim_qk, 1);
  t.v_strides = strides_for(c.layout, c.seqlen_k, c.heads_kv, c.head_dim_v, 2);
  // The output is bshd, except for bhsd inputs.
  t.out_strides = strides_for(c.layout == Layout::bhsd ? Layout::bhsd : Layout::bshd, c.seqlen_q,
                              c.heads_q, c.head_dim_v, 0);
  const int64_t q_elements = c.batch * t.q_strides.batch;
  fill_normal(t.q, c.dtype, q_elements, rng);
  if (!packed) {
    fill_normal(t.k, c.dtype, c.batch * t.k_strides.batch, rng);
    fill_normal(t.v, c.dtype, c.batch * t.v_strides.batch, rng);
  }
  const int64_t out_elements = c.batch * t.out_strides.batch;
  t.out.assign(static_cast<size_t>(out_elements) * dtype_size(c.dtype), 0);
  poison(t.out, c.dtype, out_elements);
  t.lse.assign(static_cast<size_t>(c.batch) * c.heads_q * c.seqlen_q,
               std::numeric_limits<float>::quiet_NaN());
  // Padding lengths: random, with batch 0 fully padded (its rows see no key) when padding.
  std::uniform_int_distribution<int> length(1, c.seqlen_k);
  for (int b = 0; b < c.batch; ++b) {
    const bool empty = c.mask.kind == MaskKind::padding && b == 0;
    t.key_lengths.push_back(c.mask.kind != MaskKind::padding ? c.seqlen_k
                            : empty                          ? 0
                                                             : length(rng));
  }
  return t;
}

AttentionParams make_params(Tensors& t) {
  const Case& c = t.c;
  AttentionParams p{};
  p.q = t.q.data();
  p.k = t.k_data();
  p.v = t.v_data();
  p.out = t.out.data();
  p.lse = t.lse.data();
  const size_t element = dtype_size(c.dtype);
  // The packed layout's k and v start inside the q buffer.
  p.q = static_cast<const unsigned char*>(p.q) + t.q_strides.offset * element;
  p.k = static_cast<const unsigned char*>(p.k) + t.k_strides.offset * element;
  p.v = static_cast<const unsigned char*>(p.v) + t.v_strides.offset * element;
  p.q_batch_stride = t.q_strides.batch;
  p.q_row_stride = t.q_strides.row;
  p.q_head_stride = t.q_strides.head;
  p.k_batch_stride = t.k_strides.batch;
  p.k_row_stride = t.k_strides.row;
  p.k_head_stride = t.k_strides.head;
  p.v_batch_stride = t.v_strides.batch;
  p.v_row_stride = t.v_strides.row;
  p.v_head_stride = t.v_strides.head;
  p.out_batch_stride = t.out_strides.batch;
  p.out_row_stride = t.out_strides.row;
  p.out_head_stride = t.out_strides.head;
  p.batch = c.batch;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.seqlen_q = c.seqlen_q;
  p.seqlen_k = c.seqlen_k;
  p.head_dim_qk = c.head_dim_qk;
  p.head_dim_v = c.head_dim_v;
  p.heads_per_kv = c.heads_q / c.heads_kv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim_qk));
  p.scale = static_cast<float>(scale);
  p.scale_log2 = static_cast<float>(scale * kLog2e);
  p.mask = c.mask.kind;
  p.window_left = static_cast<int>(c.mask.window_left);
  p.window_right = static_cast<int>(c.mask.window_right);
  p.key_lengths = t.key_lengths.data();
  p.input_dtype = c.dtype;
  p.output_dtype = c.dtype;
  p.p_dtype = DType::f32;
  p.q_descale = p.k_descale = p.v_descale = p.out_scale = 1;
  return p;
}

// ---- the fp64 reference, the masks from their definitions (tests/support/masks.h) ---------------

struct Reference {
  std::vector<double> out;  // indexed like the kernel's output
  std::vector<double> lse;
};

Reference reference_attention(const Tensors& t) {
  const Case& c = t.c;
  Reference ref;
  ref.out.assign(static_cast<size_t>(c.batch) * t.out_strides.batch, 0.0);
  ref.lse.assign(t.lse.size(), -std::numeric_limits<double>::infinity());
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim_qk));
  std::vector<double> scores(static_cast<size_t>(c.seqlen_k));
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t h = 0; h < c.heads_q; ++h) {
      const int64_t h_kv = h / (c.heads_q / c.heads_kv);
      for (int64_t i = 0; i < c.seqlen_q; ++i) {
        double max = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < c.seqlen_k; ++j) {
          if (!mask_keeps(c.mask, c.seqlen_q, c.seqlen_k, t.key_lengths[b], i, j)) continue;
          double dot = 0;
          for (int64_t d = 0; d < c.head_dim_qk; ++d) {
            dot += double{load_element(c.dtype, t.q.data(), t.q_index(b, h, i, d))} *
                   double{load_element(c.dtype, t.k_data(), t.k_index(b, h_kv, j, d))};
          }
          scores[j] = scale * dot;
          max = std::max(max, scores[j]);
        }
        if (std::isinf(max)) continue;  // no visible key: output 0, LSE -inf
        double sum = 0;
        std::vector<double> row(static_cast<size_t>(c.head_dim_v), 0.0);
        for (int64_t j = 0; j < c.seqlen_k; ++j) {
          if (!mask_keeps(c.mask, c.seqlen_q, c.seqlen_k, t.key_lengths[b], i, j)) continue;
          const double weight = std::exp(scores[j] - max);
          sum += weight;
          for (int64_t d = 0; d < c.head_dim_v; ++d) {
            row[d] += weight * load_element(c.dtype, t.v_data(), t.v_index(b, h_kv, j, d));
          }
        }
        for (int64_t d = 0; d < c.head_dim_v; ++d) ref.out[t.out_index(b, h, i, d)] = row[d] / sum;
        ref.lse[(b * c.heads_q + h) * c.seqlen_q + i] = max + std::log(sum);
      }
    }
  }
  return ref;
}

// Loose bounds: one unit in the last place of the output dtype at the largest output (twice the
// rounding), plus fp32 arithmetic slack. A wrong mask or a lost tile errs by ~0.1 or more.
double output_tolerance(DType dtype, double max_abs_output) {
  constexpr double kFp32Slack = 1e-5;
  const double unit = dtype == DType::f16    ? std::ldexp(1.0, -10)
                      : dtype == DType::bf16 ? std::ldexp(1.0, -7)
                                             : std::ldexp(1.0, -23);
  return unit * std::max(1.0, max_abs_output) + kFp32Slack;
}
constexpr double kLseTolerance = 1e-5;  // relative to max(1, |lse|); fp32 scores

// ---- the correctness matrix --------------------------------------------------------------------

std::vector<Case> correctness_cases() {
  const Mask none{}, causal{MaskKind::causal}, causal_br{MaskKind::causal_br},
      padding{MaskKind::padding};
  const Mask window{MaskKind::window, 5, 3}, window_left_only{MaskKind::window, 7, -1},
      window_right_zero{MaskKind::window, -1, 0};
  return {
      {2, 4, 4, 17, 33, 64, 64, DType::f32, none, Layout::bshd},
      {1, 2, 2, 33, 17, 64, 64, DType::f32, causal, Layout::bhsd},
      // seqlen_q > seqlen_k: the first rows see no key under causal_br.
      {2, 6, 2, 40, 23, 32, 32, DType::f32, causal_br, Layout::bshd},
      {1, 3, 3, 20, 45, 48, 48, DType::bf16, window, Layout::bshd},
      {1, 2, 1, 31, 26, 16, 16, DType::f32, window_left_only, Layout::bhsd},
      {1, 2, 2, 26, 31, 16, 16, DType::f16, window_right_zero, Layout::bshd},
      // Batch 0 fully padded: every row of it sees no key.
      {3, 2, 2, 9, 31, 64, 64, DType::f16, padding, Layout::bshd},
      // MQA with head_dim_v != head_dim_qk.
      {2, 4, 1, 12, 21, 32, 48, DType::f32, causal, Layout::bshd},
      {2, 3, 3, 19, 19, 40, 40, DType::f16, causal, Layout::qkv_packed},
      {1, 2, 2, 7, 7, 24, 24, DType::bf16, none, Layout::qkv_packed},
      // Decode: one query row against many keys, GQA 8:1.
      {1, 8, 1, 1, 300, 64, 64, DType::bf16, none, Layout::bshd},
      // Crossing cpu.flash's tile boundaries (128 query rows, 256 keys) under masks.
      {1, 2, 2, 150, 300, 32, 16, DType::f32, causal_br, Layout::bshd},
      {1, 1, 1, 260, 530, 16, 16, DType::f32, Mask{MaskKind::window, 100, 20}, Layout::bshd},
      {2, 1, 1, 131, 517, 16, 16, DType::f32, padding, Layout::bhsd},
      {1, 2, 2, 5, 7, 256, 256, DType::f32, causal, Layout::bshd},
  };
}

class CpuKernelTest : public ::testing::TestWithParam<std::string> {
 protected:
  const Kernel& kernel() const {
    const Kernel* found = find_kernel(GetParam());
    EXPECT_NE(found, nullptr);
    return *found;
  }
};

TEST_P(CpuKernelTest, MatchesFp64LoopOnEveryCase) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const Case& c : correctness_cases()) {
    SCOPED_TRACE(describe(c));
    const Problem problem = to_problem(c);
    ASSERT_EQ(unsupported_reason(kernel().support, problem), "");
    CountingAllocator scratch;
    Result<std::unique_ptr<Plan>> made = kernel().make_plan(problem, PlanContext{scratch});
    ASSERT_TRUE(made) << made.status().message;
    std::unique_ptr<Plan> plan = std::move(*made);

    Tensors t = make_tensors(c, rng);
    AttentionParams params = make_params(t);
    const Status status = plan->run(params);
    ASSERT_TRUE(status.ok) << status.message;

    const Reference ref = reference_attention(t);
    double max_abs_ref = 0, max_error = 0;
    for (double value : ref.out) max_abs_ref = std::max(max_abs_ref, std::fabs(value));
    for (size_t e = 0; e < ref.out.size(); ++e) {
      const double value = load_element(c.dtype, t.out.data(), static_cast<int64_t>(e));
      const double error = std::fabs(value - ref.out[e]);
      max_error =
          std::isnan(error) ? std::numeric_limits<double>::infinity() : std::max(max_error, error);
    }
    EXPECT_LE(max_error, output_tolerance(c.dtype, max_abs_ref));

    double max_lse_error = 0;
    for (size_t e = 0; e < ref.lse.size(); ++e) {
      if (std::isinf(ref.lse[e])) {
        EXPECT_EQ(t.lse[e], kNegInf) << "LSE of a row with no visible key, at " << e;
        continue;
      }
      const double error = std::fabs(t.lse[e] - ref.lse[e]) / std::max(1.0, std::fabs(ref.lse[e]));
      max_lse_error = std::isnan(error) ? std::numeric_limits<double>::infinity()
                                        : std::max(max_lse_error, error);
    }
    EXPECT_LE(max_lse_error, kLseTolerance);

    // Deterministic: a second run writes the same bits.
    const std::vector<unsigned char> first_out = t.out;
    const std::vector<float> first_lse = t.lse;
    poison(t.out, c.dtype, static_cast<int64_t>(ref.out.size()));
    ASSERT_TRUE(plan->run(params).ok);
    EXPECT_EQ(t.out, first_out);
    EXPECT_EQ(std::memcmp(t.lse.data(), first_lse.data(), t.lse.size() * sizeof(float)), 0);
  }
}

TEST_P(CpuKernelTest, WritesNoLseWhenNotAsked) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const Case c{1, 2, 2, 9, 13, 16, 16, DType::f32, Mask{MaskKind::causal}, Layout::bshd};
  CountingAllocator scratch;
  Result<std::unique_ptr<Plan>> made = kernel().make_plan(to_problem(c), PlanContext{scratch});
  ASSERT_TRUE(made) << made.status().message;
  std::unique_ptr<Plan> plan = std::move(*made);
  Tensors t = make_tensors(c, rng);
  AttentionParams params = make_params(t);
  params.lse = nullptr;
  ASSERT_TRUE(plan->run(params).ok);
  for (float value : t.lse) EXPECT_TRUE(std::isnan(value));
  const Reference ref = reference_attention(t);
  for (size_t e = 0; e < ref.out.size(); ++e) {
    EXPECT_NEAR(load_element(c.dtype, t.out.data(), static_cast<int64_t>(e)), ref.out[e],
                output_tolerance(c.dtype, 1.0));
  }
}

TEST_P(CpuKernelTest, ScratchComesFromTheAllocatorAndIsReturned) {
  const Case c{1, 2, 2, 64, 64, 32, 32, DType::bf16, Mask{}, Layout::bshd};
  CountingAllocator scratch;
  Result<std::unique_ptr<Plan>> made = kernel().make_plan(to_problem(c), PlanContext{scratch});
  ASSERT_TRUE(made) << made.status().message;
  std::unique_ptr<Plan> plan = std::move(*made);
  EXPECT_GT(scratch.live_bytes(), 0u);
  plan.reset();
  EXPECT_EQ(scratch.live_bytes(), 0u);
}

TEST_P(CpuKernelTest, OutOfMemoryIsAReadableError) {
  const Case c{1, 2, 2, 64, 64, 32, 32, DType::f16, Mask{}, Layout::bshd};
  CountingAllocator scratch(/*limit_bytes=*/16);
  const Result<std::unique_ptr<Plan>> plan =
      kernel().make_plan(to_problem(c), PlanContext{scratch});
  EXPECT_FALSE(plan.ok());
  const std::string& message = plan.status().message;
  EXPECT_EQ(message.rfind("out of memory: ", 0), 0u) << message;
  EXPECT_NE(message.find(" GiB"), std::string::npos) << message;
  EXPECT_EQ(scratch.live_bytes(), 0u);
}

TEST_P(CpuKernelTest, RefusesProblemsOutsideItsTable) {
  Problem problem = to_problem({1, 1, 1, 8, 8, 64, 64, DType::e4m3, Mask{}, Layout::bshd});
  problem.output_dtype = DType::bf16;
  CountingAllocator scratch;
  const Result<std::unique_ptr<Plan>> plan = kernel().make_plan(problem, PlanContext{scratch});
  EXPECT_FALSE(plan.ok());
  const std::string& message = plan.status().message;
  EXPECT_NE(message.find("dtype e4m3 not supported"), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(Registry, CpuKernelTest, ::testing::ValuesIn(exact_cpu_kernel_names()),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           return test_name_part(param.param);
                         });

// ---- scratch scaling ---------------------------------------------------------------------------

size_t peak_scratch(const std::string& kernel_name, int seqlen) {
  const Case c{1, 4, 4, seqlen, seqlen, 64, 64, DType::f32, Mask{}, Layout::bshd};
  CountingAllocator scratch;
  const Result<std::unique_ptr<Plan>> plan =
      find_kernel(kernel_name)->make_plan(to_problem(c), PlanContext{scratch});
  EXPECT_TRUE(plan.ok()) << plan.status().message;
  return scratch.peak_bytes();
}

TEST(CpuKernelScratch, FlashScratchDoesNotGrowWithSequenceLength) {
  const size_t short_peak = peak_scratch("cpu.flash", 1024);
  EXPECT_GT(short_peak, 0u);
  EXPECT_EQ(peak_scratch("cpu.flash", 8192), short_peak);
}

TEST(CpuKernelScratch, NaiveScratchGrowsWithTheScoreMatrix) {
  const double ratio = static_cast<double>(peak_scratch("cpu.naive", 8192)) /
                       static_cast<double>(peak_scratch("cpu.naive", 1024));
  EXPECT_GT(ratio, 60.0);
  EXPECT_LE(ratio, 64.0);
}

// ---- support table, registry, the kernels' fp16/bf16 widening ----------------------------------

TEST(CpuKernelSupport, ReasonsNameWhatIsMissing) {
  const SupportTable table = find_kernel("cpu.flash")->support;
  Problem problem = to_problem({1, 1, 1, 8, 8, 64, 64, DType::f32, Mask{}, Layout::bshd});
  EXPECT_EQ(unsupported_reason(table, problem), "");

  Problem e4m3 = problem;
  e4m3.input_dtype = DType::e4m3;
  e4m3.output_dtype = DType::bf16;
  e4m3.p_dtype = DType::e4m3;
  EXPECT_EQ(unsupported_reason(table, e4m3), "dtype e4m3 not supported (fp32, fp16, bf16)");

  Problem fp32_out = problem;
  fp32_out.input_dtype = DType::bf16;
  EXPECT_EQ(unsupported_reason(table, fp32_out), "output dtype fp32 not supported for bf16 input");

  Problem wide = problem;
  wide.head_dim_qk = wide.head_dim_v = 512;
  EXPECT_EQ(unsupported_reason(table, wide), "head_dim 512 above the maximum 256");

  Problem large = problem;
  large.batch = 8;
  large.heads_q = large.heads_kv = 32;
  large.seqlen_q = large.seqlen_k = 8192;
  large.head_dim_qk = large.head_dim_v = 128;  // 4 * 8 * 32 * 8192^2 * 128 = 8.8e12
  EXPECT_EQ(unsupported_reason(table, large)
                .rfind("problem too large for this kernel: 8.8e12 FLOP > ", 0),
            0u)
      << unsupported_reason(table, large);

  SupportTable narrow = table;
  narrow.head_dims = {64, 128};
  narrow.separate_v_dim = false;
  narrow.masks = {MaskKind::none, MaskKind::causal};
  narrow.layouts = {Layout::bshd, Layout::bhsd};
  narrow.gqa = false;
  Problem odd_dim = problem;
  odd_dim.head_dim_qk = odd_dim.head_dim_v = 96;
  EXPECT_EQ(unsupported_reason(narrow, odd_dim), "head_dim 96 not instantiated (64, 128)");
  Problem split_dim = problem;
  split_dim.head_dim_v = 128;
  EXPECT_EQ(unsupported_reason(narrow, split_dim), "head_dim_v != head_dim_qk not supported");
  Problem window = problem;
  window.mask = Mask{MaskKind::window, 4, 0};
  EXPECT_EQ(unsupported_reason(narrow, window), "mask window not supported (none, causal)");
  Problem packed = problem;
  packed.layout = Layout::qkv_packed;
  EXPECT_EQ(unsupported_reason(narrow, packed), "layout qkv_packed not supported (bshd, bhsd)");
  Problem gqa = problem;
  gqa.heads_q = 4;
  EXPECT_EQ(unsupported_reason(narrow, gqa), "GQA not supported");

  const std::string description = describe_support(table);
  EXPECT_NE(description.find("dtypes: fp32, fp16, bf16"), std::string::npos) << description;
  EXPECT_NE(description.find("masks: none, causal, causal_br, window, padding"), std::string::npos)
      << description;
  EXPECT_NE(description.find("archs: cpu"), std::string::npos) << description;
}

TEST(CpuKernelRegistry, ListsTheNineCpuKernels) {
  EXPECT_EQ(cpu_kernel_names(),
            (std::vector<std::string>{"cpu.naive", "cpu.masked_outofplace", "cpu.masked_inplace",
                                      "cpu.masked_fused", "cpu.flash", "cpu.flash_fp8",
                                      "cpu.flash_fp8_block", "cpu.flash_fp8_incoherent",
                                      "cpu.flash_fp8_block_incoherent"}));
  EXPECT_EQ(fp8_recipe_cpu_kernel_names(),
            (std::vector<std::string>{"cpu.flash_fp8", "cpu.flash_fp8_block",
                                      "cpu.flash_fp8_incoherent",
                                      "cpu.flash_fp8_block_incoherent"}));
  for (const Kernel& kernel : all_kernels()) {
    if (kernel.backend != Backend::cpu) continue;
    EXPECT_EQ(find_kernel(kernel.name), &kernel);
    EXPECT_TRUE(kernel.deterministic);
    EXPECT_TRUE(kernel.returns_lse);
    EXPECT_TRUE(static_cast<bool>(kernel.make_plan));
  }
  EXPECT_EQ(find_kernel("cpu.nonexistent"), nullptr);
  EXPECT_EQ(backend_name(Backend::cpu), "cpu");
}

TEST(CpuKernelWidening, MatchesTheReferenceFormatsForEveryPattern) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const auto pattern = static_cast<uint16_t>(bits);
    const float fp16 = cpu::widen_fp16(pattern), bf16 = cpu::widen_bf16(pattern);
    const float fp16_ref = fp16_bits_to_float(pattern), bf16_ref = bf16_bits_to_float(pattern);
    if (std::isnan(fp16_ref)) {
      EXPECT_TRUE(std::isnan(fp16)) << std::hex << bits;
    } else {
      EXPECT_EQ(std::memcmp(&fp16, &fp16_ref, sizeof(float)), 0) << std::hex << bits;
    }
    if (std::isnan(bf16_ref)) {
      EXPECT_TRUE(std::isnan(bf16)) << std::hex << bits;
    } else {
      EXPECT_EQ(std::memcmp(&bf16, &bf16_ref, sizeof(float)), 0) << std::hex << bits;
    }
  }
}

TEST(CpuKernelExp2, WithinTwoUlpAndZeroBelowTheNormalRange) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> argument(-126.0f, 0.0f);
  double max_ulps = 0;
  for (int n = 0; n < 1000000; ++n) {
    const float x = argument(rng);
    const double exact = std::exp2(static_cast<double>(x));
    const double ulp = std::ldexp(1.0, std::ilogb(exact) - 23);
    max_ulps = std::max(max_ulps, std::fabs(cpu::fast_exp2(x) - exact) / ulp);
  }
  EXPECT_LT(max_ulps, 2.0);
  EXPECT_EQ(cpu::fast_exp2(0.0f), 1.0f);
  EXPECT_EQ(cpu::fast_exp2(kNegInf), 0.0f);
  EXPECT_EQ(cpu::fast_exp2(-200.0f), 0.0f);
}

}  // namespace
}  // namespace attnbench
