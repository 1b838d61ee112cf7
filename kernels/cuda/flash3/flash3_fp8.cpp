// The plan of cuda.flash3_fp8, its variants and its warp-specialized stages cuda.flash3_fp8_ws and
// cuda.flash3_fp8_ws_transpose (issue 16): the support table, the sm_90 and shared-memory gates,
// the scratch the passes before the forward write every forward (V^T, unless the forward
// transposes V itself; for 16-bit inputs also Q and K in e4m3, the amax partials and the
// descales), the TMA maps of Q, K (e4m3, 128-byte boxes) and V^T (or V), encoded per forward,
// and the launch. The kernels and their passes are flash3_fp8_kernel.cuh and
// flash3_fp8_ws_kernel.cuh.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/plan_helpers.h"
#include "kernels/cuda/common/tma_map.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/flash3/flash3_fp8_launch.h"
#include "reference/tensor_core_sum.h"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {

using Fp8Tiles = Fp8Traits<128>;  // the one instantiation (its key tile: every stage's)

namespace {

// A 4D view (inner, rows, head, batch) of e4m3 bytes, boxes of 128 bytes x `box_rows`, the
// 128-byte swizzle; elements past the view read as zeros.
gpu::TensorMapSpec byte_spec(const void* base, int64_t inner, int64_t rows, int64_t heads,
                             int64_t batch, int64_t row_stride, int64_t head_stride,
                             int64_t batch_stride, int box_rows) {
  gpu::TensorMapSpec spec;
  spec.element = DType::e4m3;
  spec.rank = 4;
  spec.base = base;
  spec.dims = {inner, rows, heads, batch};
  spec.stride_bytes = {1, row_stride, head_stride, batch_stride};
  spec.box = {kSwizzleBytes, box_rows, 1, 1};
  spec.swizzle_bytes = kSwizzleBytes;
  return spec;
}

class Flash3Fp8Plan final : public Plan {
 public:
  Flash3Fp8Plan(const Problem& problem, const PlanContext& context, std::string name,
                const Fp8Recipe& recipe, const Fp8Instantiation& forward)
      : problem_(problem),
        stream_(static_cast<cudaStream_t>(context.stream)),
        device_(context.device),
        name_(std::move(name)),
        recipe_(recipe),
        forward_(forward),
        keys_padded_(fp8_keys_padded(problem.seqlen_k)) {}

  Status build(ScratchAllocator& allocator) {
    if (Status status = check_hopper_device(device_, forward_.shared_bytes, name_); !status) {
      return status;
    }
    const size_t vt_bytes = forward_.transposes_v
                                ? 0
                                : static_cast<size_t>(problem_.batch) * problem_.heads_kv *
                                      problem_.head_dim_v * static_cast<size_t>(keys_padded_);
    if (Status status = gpu::allocate_scratch(
            allocator, vt_bytes, name_ + " V^T (b*hkv*d*seqlen_k rounded to 128, e4m3)", vt_);
        !status) {
      return status;
    }
    groups_ = scale_groups();
    if (quantizes()) {
      if (Status status = allocate_quantize_scratch(allocator); !status) return status;
    }
    pass_args_ = make_pass_args();
    return Status::Ok();
  }

  Status run(const AttentionParams& params) override {
    if (Status status = gpu::check_params_match(problem_, params); !status) return status;
    Flash3Params launch{};
    launch.attention = params;
    if (Status status = encode_maps(params, launch); !status) {
      return Status::Error(name_ + ": " + status.message);
    }
    return forward_.launch(launch, pass_args_, stream_);
  }

 private:
  // 16-bit inputs: the kernel's passes quantize them (the recipe's steps 1 and 2).
  bool quantizes() const { return problem_.input_dtype != DType::e4m3; }

  // The recipe's scale groups as the passes and the forward index them.
  Fp8ScaleGroups scale_groups() const {
    Fp8ScaleGroups groups;
    groups.block_rows =
        recipe_.scaling == Fp8Scaling::per_block ? static_cast<int>(recipe_.block_rows) : 0;
    groups.batch = problem_.batch;
    groups.heads_q = problem_.heads_q;
    groups.heads_kv = problem_.heads_kv;
    groups.seqlen_q = problem_.seqlen_q;
    groups.seqlen_k = problem_.seqlen_k;
    return groups;
  }

  struct ScratchRequest {
    size_t bytes;
    std::string what;
    ScratchBuffer* buffer;
  };

  Status allocate_quantize_scratch(ScratchAllocator& allocator) {
    const size_t q_bytes = static_cast<size_t>(problem_.batch) * problem_.seqlen_q *
                           problem_.heads_q * problem_.head_dim_qk;
    const size_t k_bytes = static_cast<size_t>(problem_.batch) * problem_.seqlen_k *
                           problem_.heads_kv * problem_.head_dim_qk;
    const bool per_tensor = groups_.block_rows == 0;
    const ScratchRequest requests[] = {
        {q_bytes, " Q in e4m3 (b*sq*hq*d)", &q_},
        {k_bytes, " K in e4m3 (b*sk*hkv*d)", &k_},
        {per_tensor ? 3 * kAmaxBlocks * sizeof(float) : 0,
         " amax partials (3 x " + std::to_string(kAmaxBlocks) + " floats)", &amax_partials_},
        {static_cast<size_t>(groups_.total()) * sizeof(float),
         " descales (" + std::to_string(groups_.total()) + " scale groups)", &descales_},
        {per_tensor ? 0 : static_cast<size_t>(groups_.count(kTensorV)) * sizeof(float),
         " inverse descales of V's blocks", &v_inverses_},
    };
    for (const ScratchRequest& request : requests) {
      if (Status status = gpu::allocate_scratch(allocator, request.bytes, name_ + request.what,
                                                *request.buffer);
          !status) {
        return status;
      }
    }
    return Status::Ok();
  }

  // The passes' scratch and, for the incoherent recipe, its signs and norm
  // (reference/fp8_recipe.h).
  Fp8PassArgs make_pass_args() const {
    Fp8PassArgs args;
    args.vt = vt_.as<uint8_t>();
    args.keys_padded = static_cast<int>(keys_padded_);
    if (!quantizes()) return args;
    args.q = q_.as<uint8_t>();
    args.k = k_.as<uint8_t>();
    args.amax_partials = amax_partials_.as<float>();
    args.descales = descales_.as<float>();
    args.v_inverses = v_inverses_.as<float>();
    args.groups = groups_;
    if (recipe_.incoherent) set_incoherent_rotation(args, recipe_.sign_seed, problem_.head_dim_qk);
    return args;
  }

  // Q and K: the e4m3 inputs as the params lay them out, or the quantize pass's packed copies.
  Status encode_maps(const AttentionParams& p, Flash3Params& launch) const {
    const int64_t d = p.head_dim_qk;
    const bool packed = quantizes();
    const std::pair<gpu::TensorMapSpec, CUtensorMap*> maps[] = {
        {packed ? byte_spec(q_.data(), d, p.seqlen_q, p.heads_q, p.batch, p.heads_q * d, d,
                            int64_t{p.seqlen_q} * p.heads_q * d, forward_.block_q)
                : byte_spec(p.q, d, p.seqlen_q, p.heads_q, p.batch, p.q_row_stride, p.q_head_stride,
                            p.q_batch_stride, forward_.block_q),
         &launch.q_map},
        {packed ? byte_spec(k_.data(), d, p.seqlen_k, p.heads_kv, p.batch, p.heads_kv * d, d,
                            int64_t{p.seqlen_k} * p.heads_kv * d, Fp8Tiles::kBlockK)
                : byte_spec(p.k, d, p.seqlen_k, p.heads_kv, p.batch, p.k_row_stride,
                            p.k_head_stride, p.k_batch_stride, Fp8Tiles::kBlockK),
         &launch.k_map},
        // V as stored, key tiles as K's, for a forward that transposes it itself; else V^T
        // (batch, head_kv, d, keys_padded): keys inner, d rows a box.
        {forward_.transposes_v
             ? byte_spec(p.v, p.head_dim_v, p.seqlen_k, p.heads_kv, p.batch, p.v_row_stride,
                         p.v_head_stride, p.v_batch_stride, Fp8Tiles::kBlockK)
             : byte_spec(vt_.data(), keys_padded_, p.head_dim_v, p.heads_kv, p.batch, keys_padded_,
                         p.head_dim_v * keys_padded_, p.heads_kv * p.head_dim_v * keys_padded_,
                         p.head_dim_v),
         &launch.v_map},
    };
    const char* names[] = {"q", "k", forward_.transposes_v ? "v" : "v^T"};
    for (size_t i = 0; i < 3; ++i) {
      if (Status status = gpu::encode_tensor_map(maps[i].first, *maps[i].second); !status) {
        return Status::Error(std::string(names[i]) + ": " + status.message);
      }
    }
    return Status::Ok();
  }

  Problem problem_;
  cudaStream_t stream_;
  int device_;
  std::string name_;
  Fp8Recipe recipe_;
  Fp8Instantiation forward_;
  int64_t keys_padded_;
  ScratchBuffer vt_;
  Fp8ScaleGroups groups_;
  ScratchBuffer q_, k_, amax_partials_, descales_, v_inverses_;  // 16-bit inputs
  Fp8PassArgs pass_args_;  // made once the scratch is allocated
};

// The launches of one forward, as launch_fp8_passes and launch_fp8_forward make them
// (flash3_fp8_kernel.cuh): on 16-bit inputs the amax and quantize passes (per-tensor scales) or
// the one pass finding and applying block scales; the V^T layout pass, unless the forward
// transposes V itself; then the forward.
int fp8_launch_count(const Fp8Recipe& recipe, const Fp8Instantiation& forward) {
  int launches = 1;
  if (forward.dtype != DType::e4m3) launches += recipe.scaling == Fp8Scaling::per_block ? 1 : 2;
  if (!forward.transposes_v) launches += 1;
  return launches;
}

// Which passes each FP8 series' time includes (issue 16: docs/fp8.md repeats it), by what it is
// instantiated for.
SupportTable flash3_fp8_support_table(const std::vector<Fp8Instantiation>& instantiations,
                                      const Fp8Recipe& recipe) {
  SupportTable table = flash3_common_support();
  gpu::add_instantiated(table, instantiations);
  const bool stored =
      std::count(table.input_dtypes.begin(), table.input_dtypes.end(), DType::e4m3) > 0;
  const bool quantized = table.input_dtypes.size() > (stored ? 1u : 0u);
  std::vector<std::string> notes;
  // Every instantiation of an entry shares its forward's schedule.
  const Fp8Instantiation* forward = instantiations.empty() ? nullptr : &instantiations.front();
  const bool transposes_v = forward != nullptr && forward->transposes_v;
  if (stored) {
    table.fp8_scalings = {Fp8Scaling::per_tensor, Fp8Scaling::per_head};
    notes.push_back(transposes_v
                        ? "e4m3 in and out with per-tensor or per-(batch, head) descales: no pass "
                          "before the forward, whose producer warpgroup writes each key tile's "
                          "V^T in shared memory"
                        : "e4m3 in and out with per-tensor or per-(batch, head) descales: the "
                          "timed forward includes the layout pass writing V^T");
  }
  if (quantized) {
    const std::string scales = recipe.scaling == Fp8Scaling::per_block
                                   ? "per-block scales (" + std::to_string(recipe.block_rows) +
                                         " tokens of one head; one pass finds and applies them)"
                                   : "per-tensor scales (an amax pass, then the quantize passes)";
    notes.push_back("fp16/bf16 in and out: the timed forward also includes the passes quantizing " +
                    std::string(recipe.incoherent
                                    ? "Q and K rotated by (1/sqrt(d)) H diag(s) in double"
                                    : "Q and K") +
                    " and V (into V^T) to e4m3, " + scales);
  }
  const bool warp_specialized = forward != nullptr && forward->block_q > kWgmmaM;
  notes.push_back(
      std::string("V^T because wgmma takes FP8 B K-major only; wgmma m64nNk32 e4m3 with fp32 "
                  "accumulation, P scaled by 2^8 and rounded to e4m3; ") +
      (warp_specialized ? "a producer warpgroup issuing the TMA loads and two consumer "
                          "warpgroups of 64 query rows (warp specialization)"
                        : "one warpgroup per 64 query rows"));
  for (const std::string& note : notes) {
    table.notes += (table.notes.empty() ? "" : "; ") + note;
  }
  return table;
}

}  // namespace

Kernel flash3_fp8_kernel_entry(std::string name, std::string summary, const Fp8Recipe& recipe,
                               std::vector<Fp8Instantiation> instantiations) {
  Kernel kernel;
  kernel.name = std::move(name);
  kernel.summary = std::move(summary);
  kernel.backend = kKernelBackend;
  kernel.deterministic = true;
  kernel.returns_lse = true;
  // The checker judges it by its recipe's own rows.
  kernel.fp8_recipe = recipe;
  kernel.support = flash3_fp8_support_table(instantiations, recipe);
  kernel.correctness_suite = "hopper-fp8";
  // Launches only: the passes' scratch (V^T, e4m3 copies, amax partials, descales) is not
  // declared yet.
  kernel.expected_resources = [recipe, instantiations](const Problem& problem) {
    const Fp8Instantiation* found = gpu::find_instantiation(instantiations, problem);
    ResourceExpectation expected;
    if (found != nullptr) expected.launches = fp8_launch_count(recipe, *found);
    return expected;
  };
  kernel.make_plan = [name = kernel.name, recipe, instantiations](
                         const Problem& problem,
                         const PlanContext& context) -> Result<std::unique_ptr<Plan>> {
    const Fp8Instantiation* found = gpu::find_instantiation(instantiations, problem);
    if (found == nullptr) {
      return Status::Error(name + ": no instantiation for " + shape_string(problem));
    }
    auto plan = std::make_unique<Flash3Fp8Plan>(problem, context, name, recipe, *found);
    if (Status status = plan->build(context.scratch); !status) return status;
    return plan;
  };
  return kernel;
}

Fp8Recipe flash3_fp8_recipe(bool incoherent, bool block_scales) {
  Fp8Recipe recipe;
  recipe.key_tile = Fp8Tiles::kBlockK;
  recipe.p_max_offset = kFp8PMaxOffset;
  recipe.tensor_core_sum_bits = kFp8TensorCoreBits;  // Q K^T and P V on the FP8 tensor cores
  recipe.incoherent = incoherent;
  if (block_scales) {
    recipe.scaling = Fp8Scaling::per_block;
    recipe.block_rows = kFp8BlockRows;
  }
  return recipe;
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3

namespace attnbench {
inline namespace ATTNBENCH_TARGET {

using flash3::fp8_instantiation;

Kernel cuda_flash3_fp8_kernel() {
  using flash3::launch_flash3_fp8;
  using T = flash3::Fp8Tiles;
  constexpr int kD = T::kHeadDim;
  return flash3::flash3_fp8_kernel_entry(
      "cuda.flash3_fp8",
      "FlashAttention-3's FP8 forward on Hopper, first stage: e4m3 Q, K, V with per-tensor "
      "descales (or fp16/bf16 quantized by its own passes), V^T by a layout pass, wgmma k32 "
      "e4m3, P in e4m3 with a 2^8 offset, one warpgroup",
      flash3::flash3_fp8_recipe(/*incoherent=*/false, /*block_scales=*/false),
      {fp8_instantiation<T>(DType::e4m3, &launch_flash3_fp8<kD, DType::e4m3>),
       fp8_instantiation<T>(DType::f16, &launch_flash3_fp8<kD, DType::f16>),
       fp8_instantiation<T>(DType::bf16, &launch_flash3_fp8<kD, DType::bf16>)});
}

Kernel cuda_flash3_fp8_ws_kernel() {
  using flash3::launch_flash3_fp8_ws;
  using T = flash3::Fp8WsTraits<128>;
  constexpr int kD = T::kHeadDim;
  return flash3::flash3_fp8_kernel_entry(
      "cuda.flash3_fp8_ws",
      "FlashAttention-3's FP8 forward on Hopper, warp-specialized: cuda.flash3_fp8's recipe and "
      "passes on e4m3 inputs, a producer warpgroup issuing the TMA loads into a K/V^T ring and "
      "two consumer warpgroups of 64 query rows (cuda.flash3_ws's pipeline)",
      flash3::flash3_fp8_recipe(/*incoherent=*/false, /*block_scales=*/false),
      {fp8_instantiation<T>(DType::e4m3, &launch_flash3_fp8_ws<kD, DType::e4m3>)});
}

Kernel cuda_flash3_fp8_ws_transpose_kernel() {
  using flash3::launch_flash3_fp8_ws_transpose;
  using T = flash3::Fp8WsTransposeTraits<128>;
  constexpr int kD = T::kHeadDim;
  return flash3::flash3_fp8_kernel_entry(
      "cuda.flash3_fp8_ws_transpose",
      "cuda.flash3_fp8_ws with V transposed in the kernel: e4m3 V as stored comes by TMA into a "
      "ring stage of its own and the producer warpgroup writes each key tile's V^T in shared "
      "memory, so no layout pass runs before the forward (FlashAttention-3's in-kernel transpose)",
      flash3::flash3_fp8_recipe(/*incoherent=*/false, /*block_scales=*/false),
      {fp8_instantiation<T>(DType::e4m3, &launch_flash3_fp8_ws_transpose<kD, DType::e4m3>)});
}

namespace {

// A variant of cuda.flash3_fp8 on fp16/bf16 inputs: the same forward, another recipe for the
// passes before it.
Kernel flash3_fp8_16bit_variant(std::string name, std::string summary, bool incoherent,
                                bool block_scales) {
  using flash3::launch_flash3_fp8;
  using T = flash3::Fp8Tiles;
  constexpr int kD = T::kHeadDim;
  return flash3::flash3_fp8_kernel_entry(
      std::move(name), std::move(summary), flash3::flash3_fp8_recipe(incoherent, block_scales),
      {fp8_instantiation<T>(DType::f16, &launch_flash3_fp8<kD, DType::f16>),
       fp8_instantiation<T>(DType::bf16, &launch_flash3_fp8<kD, DType::bf16>)});
}

}  // namespace

Kernel cuda_flash3_fp8_incoherent_kernel() {
  return flash3_fp8_16bit_variant(
      "cuda.flash3_fp8_incoherent",
      "cuda.flash3_fp8 with incoherent processing: fp16/bf16 Q and K rotated by (1/sqrt(d)) "
      "H diag(s) in a pass before quantization to e4m3 (per-tensor scales), as FlashAttention-3's "
      "paper describes",
      /*incoherent=*/true, /*block_scales=*/false);
}

Kernel cuda_flash3_fp8_block_kernel() {
  return flash3_fp8_16bit_variant(
      "cuda.flash3_fp8_block",
      "cuda.flash3_fp8 with block quantization: fp16/bf16 Q, K, V scaled to e4m3 per block of "
      "128 tokens of one head (one K and V descale per key tile), as FlashAttention-3's paper "
      "describes",
      /*incoherent=*/false, /*block_scales=*/true);
}

Kernel cuda_flash3_fp8_block_incoherent_kernel() {
  return flash3_fp8_16bit_variant(
      "cuda.flash3_fp8_block_incoherent",
      "cuda.flash3_fp8 with both of FlashAttention-3's techniques: Q and K rotated, then "
      "fp16/bf16 Q, K, V scaled to e4m3 per block of 128 tokens of one head",
      /*incoherent=*/true, /*block_scales=*/true);
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench
