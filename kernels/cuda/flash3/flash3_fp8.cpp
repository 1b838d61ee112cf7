// cuda.flash3_fp8's plan (issue 16): the support table, the sm_90 and shared-memory gates, V^T's
// scratch (the layout pass writes it every forward), the TMA maps of Q, K (e4m3, 128-byte boxes)
// and V^T, encoded per forward, and the launch. The kernel is flash3_fp8_kernel.cuh.
#include <memory>
#include <string>
#include <utility>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/plan_helpers.h"
#include "kernels/cuda/common/tma_map.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/flash3/flash3_fp8_launch.h"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {

using Fp8Tiles = Fp8Traits<128>;  // the one instantiation

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
                Fp8LaunchFunction launch)
      : problem_(problem),
        stream_(static_cast<cudaStream_t>(context.stream)),
        device_(context.device),
        name_(std::move(name)),
        launch_(launch),
        keys_padded_(fp8_keys_padded(problem.seqlen_k)) {}

  Status build(ScratchAllocator& allocator) {
    if (Status status = check_hopper_device(device_, Fp8Tiles::kSharedBytes, name_); !status) {
      return status;
    }
    const size_t vt_bytes = static_cast<size_t>(problem_.batch) * problem_.heads_kv *
                            problem_.head_dim_v * static_cast<size_t>(keys_padded_);
    return gpu::allocate_scratch(allocator, vt_bytes,
                                 name_ + " V^T (b*hkv*d*seqlen_k rounded to 128, e4m3)", vt_);
  }

  Status run(const AttentionParams& params) override {
    if (Status status = gpu::check_params_match(problem_, params); !status) return status;
    Flash3Params launch{};
    launch.attention = params;
    if (Status status = encode_maps(params, launch); !status) {
      return Status::Error(name_ + ": " + status.message);
    }
    return launch_(launch, vt_.as<uint8_t>(), static_cast<int>(keys_padded_), stream_);
  }

 private:
  Status encode_maps(const AttentionParams& p, Flash3Params& launch) const {
    const int64_t d = p.head_dim_qk;
    const std::pair<gpu::TensorMapSpec, CUtensorMap*> maps[] = {
        {byte_spec(p.q, d, p.seqlen_q, p.heads_q, p.batch, p.q_row_stride, p.q_head_stride,
                   p.q_batch_stride, Fp8Tiles::kBlockQ),
         &launch.q_map},
        {byte_spec(p.k, d, p.seqlen_k, p.heads_kv, p.batch, p.k_row_stride, p.k_head_stride,
                   p.k_batch_stride, Fp8Tiles::kBlockK),
         &launch.k_map},
        // V^T (batch, head_kv, d, keys_padded): keys inner, d rows a box.
        {byte_spec(vt_.data(), keys_padded_, p.head_dim_v, p.heads_kv, p.batch, keys_padded_,
                   p.head_dim_v * keys_padded_, p.heads_kv * p.head_dim_v * keys_padded_,
                   p.head_dim_v),
         &launch.v_map},
    };
    const char* names[] = {"q", "k", "v^T"};
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
  Fp8LaunchFunction launch_;
  int64_t keys_padded_;
  ScratchBuffer vt_;
};

SupportTable flash3_fp8_support_table() {
  SupportTable table = flash3_common_support();
  table.input_dtypes = {DType::e4m3};
  table.head_dims = {Fp8Tiles::kHeadDim};
  table.notes =
      "e4m3 in and out, per-tensor descales; a layout pass writes V^T (wgmma takes FP8 B "
      "K-major only) into scratch every forward, inside the timed region; wgmma m64nNk32 e4m3 "
      "with fp32 accumulation, P scaled by 2^8 and rounded to e4m3; one warpgroup per 64 rows";
  return table;
}

}  // namespace

Kernel flash3_fp8_kernel_entry(std::string name, std::string summary, Fp8LaunchFunction launch) {
  Kernel kernel;
  kernel.name = std::move(name);
  kernel.summary = std::move(summary);
  kernel.backend = kKernelBackend;
  kernel.deterministic = true;
  kernel.returns_lse = true;
  // The recipe it runs on stored e4m3 inputs: per-tensor descales, 128-key tiles in order, P's
  // offset 2^8; the checker judges it by that recipe's rows.
  Fp8Recipe recipe;
  recipe.key_tile = Fp8Tiles::kBlockK;
  recipe.p_max_offset = kFp8PMaxOffset;
  kernel.fp8_recipe = recipe;
  kernel.support = flash3_fp8_support_table();
  kernel.make_plan = [name = kernel.name, launch](
                         const Problem& problem,
                         const PlanContext& context) -> Result<std::unique_ptr<Plan>> {
    if (problem.head_dim_v != problem.head_dim_qk || problem.head_dim_qk != Fp8Tiles::kHeadDim) {
      return Status::Error(name + ": no instantiation for " + shape_string(problem));
    }
    auto plan = std::make_unique<Flash3Fp8Plan>(problem, context, name, launch);
    if (Status status = plan->build(context.scratch); !status) return status;
    return plan;
  };
  return kernel;
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3

namespace attnbench {
inline namespace ATTNBENCH_TARGET {

Kernel cuda_flash3_fp8_kernel() {
  return flash3::flash3_fp8_kernel_entry(
      "cuda.flash3_fp8",
      "FlashAttention-3's FP8 forward on Hopper, first stage: e4m3 Q, K, V with per-tensor "
      "descales, V^T by a layout pass, wgmma k32 e4m3, P in e4m3 with a 2^8 offset, one "
      "warpgroup",
      &flash3::launch_flash3_fp8<flash3::Fp8Tiles::kHeadDim>);
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench
