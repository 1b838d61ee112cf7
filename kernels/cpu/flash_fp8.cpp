// cpu.flash_fp8 and its recipes: FlashAttention-3's FP8 forward on the host (issue 16), so the
// numerics of FP8 attention are run, tested and studied at any size without a GPU.
//
// What it computes: the recipe of reference/fp8_recipe.h on fp16/bf16 inputs. Its quantization
// pass (incoherent processing and e4m3 rounding with per-group scales) is the recipe's own
// quantize_inputs, run inside the timed forward; the forward after it is this file's, tiled as
// cpu.flash is: for each block of kBlockQ query rows of one head, key tiles of recipe.key_tile
//   S = Q_e4m3 K_e4m3^T                    cblas_sgemm (e4m3 values: exact products)
//   s = S * descale_q(row) * descale_k(key) * softmax scale
//   per row: m' = max(m, tile max); x = (s - m') log2 e + offset; l += 2^x (unrounded);
//            P = 2^x rounded to e4m3; O, l *= 2^((m - m') log2 e) when the max grew
//   O += P V                               cblas_sgemm, V's e4m3 values descaled per key
//   out = O / l rounded to the output dtype; LSE = m + ln l - offset ln 2.
// The checker's low-precision rows follow the same recipe one row at a time
// (fp8_recipe_row): the two agree up to fp32 summation order (BLAS's against a plain loop), which
// can move a P across an e4m3 rounding point.
// Variants: cpu.flash_fp8 (per-tensor scales), cpu.flash_fp8_block (a scale per 64 tokens of one
// head), cpu.flash_fp8_incoherent (per-tensor, Q and K rotated by a random Hadamard transform),
// cpu.flash_fp8_block_incoherent (both: FlashAttention-3's two techniques).
// Limits: fp16/bf16 inputs (the recipe quantizes them), head_dim up to 256 (a power of two for
// the incoherent variants). The quantized copies of Q, K and V are host vectors outside the
// harness's tracking allocator; the plan reports them with its tiles as its extra memory.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/phases.h"
#include "reference/formats.h"
#include "reference/fp8_scale.h"

namespace attnbench {

namespace {

using cpu::kNegInf;

constexpr int64_t kBlockQ = 64;
constexpr double kMaxFlops = 1e11;  // the quantization pass and e4m3 rounding of P cost extra

class FlashFp8Plan final : public Plan {
 public:
  FlashFp8Plan(const Problem& problem, const Fp8Recipe& recipe)
      : problem_(problem),
        recipe_(recipe),
        layout_(describe_layout(problem)),
        block_q_(std::min<int64_t>(kBlockQ, problem.seqlen_q)),
        block_k_(std::min<int64_t>(recipe.key_tile, problem.seqlen_k)),
        query_blocks_((problem.seqlen_q + block_q_ - 1) / block_q_),
        threads_(cpu::plan_threads(problem.batch * problem.heads_q * query_blocks_)) {}

  Status allocate(ScratchAllocator& allocator) {
    return cpu::allocate_scratch(allocator, tiles_bytes(), "cpu.flash_fp8 per-thread tiles",
                                 tiles_);
  }

  Status run(const AttentionParams& params) override {
    if (Status status = cpu::check_params_match(problem_, params); !status) return status;
    QuantizedInputs quantized;
    {
      // The recipe's amax, (rotation,) and e4m3 rounding of Q, K and V, on the calling thread.
      const PhaseScope phase("quantize");
      quantized = quantize_inputs(recipe_, problem_, views(params));
    }
    quantized_bytes_ = footprint_bytes(quantized);
    const cpu::SingleThreadedBlas single_threaded_blas;
    const int64_t items = static_cast<int64_t>(params.batch) * params.heads_q * query_blocks_;
#pragma omp parallel num_threads(threads_)
    {
      const Tiles tiles = thread_tiles(omp_get_thread_num());
#pragma omp for schedule(static, 1)
      for (int64_t item = 0; item < items; ++item) {
        const int64_t head_pair = item / query_blocks_;
        run_block(params, quantized, head_pair / params.heads_q, head_pair % params.heads_q,
                  (item % query_blocks_) * block_q_, tiles);
      }
    }
    return Status::Ok();
  }

  // The quantized copies are host vectors the tracking allocator does not see: the extra memory
  // of a forward is the tiles plus the copies of its last run.
  std::optional<int64_t> own_extra_memory_bytes() const override {
    return static_cast<int64_t>(tiles_bytes() + quantized_bytes_);
  }

 private:
  struct Tiles {
    float* q;        // (block_q, dqk) e4m3 values
    float* k;        // (block_k, dqk) e4m3 values
    float* v;        // (block_k, dv) descaled e4m3 values
    float* scores;   // (block_q, block_k): S, then P
    float* out;      // (block_q, dv)
    float* row_max;  // (block_q,) natural units
    float* row_sum;  // (block_q,)
  };

  size_t tiles_bytes() const {
    return static_cast<size_t>(threads_) * static_cast<size_t>(thread_floats()) * sizeof(float);
  }

  static size_t footprint_bytes(const QuantizedInputs& in) {
    size_t bytes = 0;
    for (const QuantizedTensor* t : {&in.q, &in.k, &in.v}) {
      bytes += t->bits.size() + (t->values.size() + t->descales.size()) * sizeof(float);
    }
    return bytes;
  }

  int64_t thread_floats() const {
    const int64_t dqk = problem_.head_dim_qk, dv = problem_.head_dim_v;
    return block_q_ * dqk + block_k_ * (dqk + dv) + block_q_ * block_k_ + block_q_ * dv +
           2 * block_q_;
  }

  Tiles thread_tiles(int thread) const {
    const int64_t dqk = problem_.head_dim_qk, dv = problem_.head_dim_v;
    Tiles t{};
    t.q = tiles_.as<float>() + thread * thread_floats();
    t.k = t.q + block_q_ * dqk;
    t.v = t.k + block_k_ * dqk;
    t.scores = t.v + block_k_ * dv;
    t.out = t.scores + block_q_ * block_k_;
    t.row_max = t.out + block_q_ * dv;
    t.row_sum = t.row_max + block_q_;
    return t;
  }

  // The inputs as the recipe reads them: each view at its own params pointer.
  AttentionInputs views(const AttentionParams& p) const {
    auto view = [&](const void* data, int64_t batch, int64_t row, int64_t head) {
      TensorView v;
      v.dtype = p.input_dtype;
      v.data = data;
      v.placement.strides = {batch, row, head};
      return v;
    };
    return {view(p.q, p.q_batch_stride, p.q_row_stride, p.q_head_stride),
            view(p.k, p.k_batch_stride, p.k_row_stride, p.k_head_stride),
            view(p.v, p.v_batch_stride, p.v_row_stride, p.v_head_stride), {}};
  }

  static const uint8_t* bits_at(const QuantizedTensor& t, const TensorPlacement& at, int64_t b,
                                int64_t s, int64_t h) {
    return t.bits.data() + at.offset + b * at.strides.batch + s * at.strides.seq +
           h * at.strides.head;
  }

  void run_block(const AttentionParams& p, const QuantizedInputs& in, int64_t b, int64_t h,
                 int64_t first_row, const Tiles& t) const {
    const int64_t rows = std::min(block_q_, static_cast<int64_t>(p.seqlen_q) - first_row);
    const int64_t h_kv = h / p.heads_per_kv;
    const int64_t dqk = p.head_dim_qk, dv = p.head_dim_v;
    int64_t keys_begin = p.seqlen_k, keys_end = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const KeyRange keys = problem_.visible(b, first_row + r);
      if (keys.size() == 0) continue;
      keys_begin = std::min(keys_begin, keys.begin);
      keys_end = std::max(keys_end, keys.end);
    }
    PhaseScope phase("convert");  // e4m3 bits decoded to fp32 for BLAS, V descaled
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* q = bits_at(in.q, layout_.q, b, first_row + r, h);
      for (int64_t d = 0; d < dqk; ++d) t.q[r * dqk + d] = e4m3_bits_to_float(q[d]);
    }
    cpu::fill_row(t.row_max, 0, rows, kNegInf);
    cpu::fill_row(t.row_sum, 0, rows, 0.0f);
    cpu::fill_row(t.out, 0, rows * dv, 0.0f);
    if (keys_begin < keys_end) {
      const int64_t first_tile = keys_begin / recipe_.key_tile;
      const int64_t last_tile = (keys_end - 1) / recipe_.key_tile;
      for (int64_t step = 0; step <= last_tile - first_tile; ++step) {
        const int64_t tile = recipe_.reverse_keys ? last_tile - step : first_tile + step;
        const int64_t first_key = std::max(keys_begin, tile * recipe_.key_tile);
        const int64_t cols = std::min(keys_end, (tile + 1) * recipe_.key_tile) - first_key;
        phase.next("convert");
        load_kv(in, b, h_kv, first_key, cols, t);
        phase.next("scores");
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, cols, dqk, 1.0f, t.q, dqk, t.k,
                    dqk, 0.0f, t.scores, block_k_);
        phase.next("softmax");  // descales, the mask (P = 0) and P's e4m3 rounding too
        softmax_tile(in, b, h, h_kv, first_row, rows, first_key, cols, t);
        phase.next("output");
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, dv, cols, 1.0f, t.scores,
                    block_k_, t.v, dv, 1.0f, t.out, dv);
      }
    }
    phase.next("output");
    store_rows(p, in, b, h, first_row, rows, t);
  }

  void load_kv(const QuantizedInputs& in, int64_t b, int64_t h_kv, int64_t first_key, int64_t cols,
               const Tiles& t) const {
    const int64_t dqk = problem_.head_dim_qk, dv = problem_.head_dim_v;
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t key = first_key + c;
      const uint8_t* k = bits_at(in.k, layout_.k, b, key, h_kv);
      for (int64_t d = 0; d < dqk; ++d) t.k[c * dqk + d] = e4m3_bits_to_float(k[d]);
      const uint8_t* v = bits_at(in.v, layout_.v, b, key, h_kv);
      const float v_descale = in.v.descales[static_cast<size_t>(in.v.group_of(b, key, h_kv))];
      for (int64_t d = 0; d < dv; ++d) t.v[c * dv + d] = e4m3_bits_to_float(v[d]) * v_descale;
    }
  }

  // S -> P (e4m3 values, 0 where masked); each row's max, sum and O scale move as the recipe says.
  void softmax_tile(const QuantizedInputs& in, int64_t b, int64_t h, int64_t h_kv,
                    int64_t first_row, int64_t rows, int64_t first_key, int64_t cols,
                    const Tiles& t) const {
    const float scale = static_cast<float>(problem_.softmax_scale());
    for (int64_t r = 0; r < rows; ++r) {
      float* s_row = t.scores + r * block_k_;
      const KeyRange keys = problem_.visible(b, first_row + r);
      const int64_t begin = std::clamp<int64_t>(keys.begin - first_key, 0, cols);
      const int64_t end = std::clamp<int64_t>(keys.end - first_key, 0, cols);
      const float q_descale =
          in.q.descales[static_cast<size_t>(in.q.group_of(b, first_row + r, h))];
      float tile_max = kNegInf;
      for (int64_t c = begin; c < end; ++c) {
        const float k_descale =
            in.k.descales[static_cast<size_t>(in.k.group_of(b, first_key + c, h_kv))];
        s_row[c] = s_row[c] * q_descale * k_descale * scale;
        tile_max = std::max(tile_max, s_row[c]);
      }
      if (tile_max > t.row_max[r]) {
        const float correction = fp8_rescale(t.row_max[r], tile_max);
        t.row_sum[r] *= correction;
        cpu::scale_row(t.out + r * problem_.head_dim_v, problem_.head_dim_v, correction);
        t.row_max[r] = tile_max;
      }
      for (int64_t c = 0; c < cols; ++c) {
        if (c < begin || c >= end) {
          s_row[c] = 0.0f;
          continue;
        }
        const float x = fp8_p_exponent(s_row[c], t.row_max[r], recipe_.p_max_offset);
        t.row_sum[r] += std::exp2(x);
        s_row[c] = fp8_p(x);
      }
    }
  }

  void store_rows(const AttentionParams& p, const QuantizedInputs& in, int64_t b, int64_t h,
                  int64_t first_row, int64_t rows, const Tiles& t) const {
    const int64_t dv = p.head_dim_v;
    // The recipe's e4m3 output at V's scale (step 5), before the output dtype.
    const bool through_e4m3 = fp8_output_through_e4m3(recipe_, p.output_dtype);
    const float output_scale = fp8_output_scale(in.v.descales.front());
    for (int64_t r = 0; r < rows; ++r) {
      const float sum = t.row_sum[r];
      float* out_row = t.out + r * dv;
      cpu::scale_row(out_row, dv, sum > 0 ? 1.0f / sum : 0.0f);  // no visible key: zeros
      for (int64_t d = 0; through_e4m3 && d < dv; ++d) {
        out_row[d] = fp8_e4m3_output(out_row[d], output_scale);
      }
      cpu::store_row(p.output_dtype, p.out, cpu::out_offset(p, b, h, first_row + r), out_row, dv);
      if (p.lse != nullptr) {
        p.lse[cpu::lse_offset(p, b, h, first_row + r)] =
            sum > 0 ? fp8_lse(t.row_max[r], sum, recipe_.p_max_offset) : kNegInf;
      }
    }
  }

  Problem problem_;
  Fp8Recipe recipe_;
  ProblemLayout layout_;
  int64_t block_q_;
  int64_t block_k_;
  int64_t query_blocks_;
  int threads_;
  ScratchBuffer tiles_;
  size_t quantized_bytes_ = 0;
};

}  // namespace

Kernel cpu_flash_fp8_recipe_kernel(const std::string& name, const std::string& summary,
                                   const Fp8Recipe& recipe) {
  Kernel kernel;
  kernel.name = name;
  kernel.summary = summary;
  kernel.backend = Backend::cpu;
  kernel.deterministic = true;
  kernel.returns_lse = true;
  kernel.fp8_recipe = recipe;
  kernel.support = cpu::cpu_support_table(
      kMaxFlops, "FP8 recipe: " + describe(recipe) + "; its quantization pass is timed");
  kernel.support.input_dtypes = {DType::f16, DType::bf16};
  kernel.make_plan = [table = kernel.support, recipe](
                         const Problem& problem,
                         const PlanContext& context) -> Result<std::unique_ptr<Plan>> {
    if (Status status = cpu::check_problem_for_plan(table, problem); !status) return status;
    if (std::string why = fp8_recipe_limits(recipe, problem); !why.empty())
      return Status::Error("unsupported: " + why);
    if (recipe.tensor_core_sum_bits != 0) {
      return Status::Error(
          "unsupported: cpu.flash_fp8 sums in fp32 (BLAS), not as the FP8 "
          "tensor cores do (tensor_core_sum_bits " +
          std::to_string(recipe.tensor_core_sum_bits) + ")");
    }
    auto plan = std::make_unique<FlashFp8Plan>(problem, recipe);
    if (Status status = plan->allocate(context.scratch); !status) return status;
    return plan;
  };
  return kernel;
}

namespace {

Fp8Recipe recipe_of(Fp8Scaling scaling, bool incoherent) {
  Fp8Recipe recipe;
  recipe.scaling = scaling;
  recipe.incoherent = incoherent;
  return recipe;
}

}  // namespace

Kernel cpu_flash_fp8_kernel() {
  return cpu_flash_fp8_recipe_kernel(
      "cpu.flash_fp8",
      "FlashAttention-3's FP8 recipe on the host: e4m3 Q, K, V with per-tensor "
      "scales, P in e4m3 with a max offset",
      recipe_of(Fp8Scaling::per_tensor, false));
}
Kernel cpu_flash_fp8_block_kernel() {
  return cpu_flash_fp8_recipe_kernel(
      "cpu.flash_fp8_block",
      "cpu.flash_fp8 with block quantization: a scale per 64 tokens of a head",
      recipe_of(Fp8Scaling::per_block, false));
}
Kernel cpu_flash_fp8_incoherent_kernel() {
  return cpu_flash_fp8_recipe_kernel(
      "cpu.flash_fp8_incoherent",
      "cpu.flash_fp8 with incoherent processing: Q, K rotated by a random "
      "Hadamard transform before quantization",
      recipe_of(Fp8Scaling::per_tensor, true));
}
Kernel cpu_flash_fp8_block_incoherent_kernel() {
  return cpu_flash_fp8_recipe_kernel(
      "cpu.flash_fp8_block_incoherent",
      "cpu.flash_fp8 with block quantization and incoherent processing",
      recipe_of(Fp8Scaling::per_block, true));
}

}  // namespace attnbench
