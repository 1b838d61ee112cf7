// cuda.flash3's plan, shared by its stages: the support table, what a launch needs checked on the
// host (sm_90, shared memory), the TMA maps of Q, K and V encoded for each forward (they hold
// the tensors' addresses), and the dispatch to the instantiation of the problem's head dim and
// dtype. The kernels are flash3_<stage>_kernel.cuh.
#include <algorithm>
#include <iterator>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/plan_helpers.h"
#include "kernels/cuda/common/tma_map.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/flash3/flash3_launch.h"
#include "kernels/cuda/flash3/flash3_traits.h"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {
namespace {

constexpr int kRequiredSm = 90;  // wgmma, TMA, mbarrier transactions: sm_90a code
constexpr size_t kKiB = 1024;

// The 4D view (d, sequence, head, batch) of one tensor, boxes of 64 elements x `box_rows` rows,
// the 128-byte swizzle; elements past the sequence read as zeros.
gpu::TensorMapSpec tensor_spec(const void* base, DType dtype, int head_dim, int64_t seqlen,
                               int64_t heads, int64_t batch, int64_t row_stride,
                               int64_t head_stride, int64_t batch_stride, int box_rows) {
  const int64_t element = static_cast<int64_t>(dtype_size(dtype));
  gpu::TensorMapSpec spec;
  spec.element = dtype;
  spec.rank = 4;
  spec.base = base;
  spec.dims = {head_dim, seqlen, heads, batch};
  spec.stride_bytes = {element, row_stride * element, head_stride * element,
                       batch_stride * element};
  spec.box = {kBoxColumns, box_rows, 1, 1};
  spec.swizzle_bytes = kSwizzleBytes;
  return spec;
}

Status encode_maps(const AttentionParams& p, const Instantiation& kernel, Flash3Params& params) {
  const DType dtype = p.input_dtype;
  const int d = p.head_dim_qk;
  const std::pair<gpu::TensorMapSpec, CUtensorMap*> maps[] = {
      {tensor_spec(p.q, dtype, d, p.seqlen_q, p.heads_q, p.batch, p.q_row_stride, p.q_head_stride,
                   p.q_batch_stride, kernel.block_q),
       &params.q_map},
      {tensor_spec(p.k, dtype, d, p.seqlen_k, p.heads_kv, p.batch, p.k_row_stride, p.k_head_stride,
                   p.k_batch_stride, kernel.block_k),
       &params.k_map},
      {tensor_spec(p.v, dtype, p.head_dim_v, p.seqlen_k, p.heads_kv, p.batch, p.v_row_stride,
                   p.v_head_stride, p.v_batch_stride, kernel.block_k),
       &params.v_map},
  };
  const char* names[] = {"q", "k", "v"};
  for (size_t i = 0; i < std::size(maps); ++i) {
    if (Status status = gpu::encode_tensor_map(maps[i].first, *maps[i].second); !status) {
      return Status::Error(std::string(names[i]) + ": " + status.message);
    }
  }
  return Status::Ok();
}

class Flash3Plan final : public Plan {
 public:
  Flash3Plan(const Problem& problem, const PlanContext& context, const Instantiation& kernel,
             std::string name)
      : problem_(problem),
        stream_(static_cast<cudaStream_t>(context.stream)),
        device_(context.device),
        kernel_(kernel),
        name_(std::move(name)) {}

  Status build() {
    int sm = 0;
    if (Status status = gpu::sm_version(device_, sm); !status) return status;
    if (sm != kRequiredSm) {
      return Status::Error("unsupported: " + name_ +
                           " runs sm_90a code (Hopper) only; device is sm_" + std::to_string(sm));
    }
    int shared_limit = 0;
    ATTNBENCH_CUDA_TRY(
        cudaDeviceGetAttribute(&shared_limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device_));
    if (static_cast<size_t>(shared_limit) < kernel_.shared_bytes) {
      return Status::Error("unsupported: " + name_ + " needs " +
                           std::to_string(kernel_.shared_bytes / kKiB) +
                           " KiB of shared memory per block; the device offers " +
                           std::to_string(static_cast<size_t>(shared_limit) / kKiB) + " KiB");
    }
    return Status::Ok();
  }

  Status run(const AttentionParams& params) override {
    if (Status status = gpu::check_params_match(problem_, params); !status) return status;
    Flash3Params launch{};
    launch.attention = params;
    if (Status status = encode_maps(params, kernel_, launch); !status) {
      return Status::Error(name_ + ": " + status.message);
    }
    return kernel_.launch(launch, stream_);
  }

 private:
  Problem problem_;
  cudaStream_t stream_;
  int device_;
  Instantiation kernel_;
  std::string name_;
};

SupportTable flash3_support_table(const std::vector<Instantiation>& instantiations) {
  SupportTable table;
  for (const Instantiation& instantiation : instantiations) {
    if (std::find(table.input_dtypes.begin(), table.input_dtypes.end(), instantiation.dtype) ==
        table.input_dtypes.end()) {
      table.input_dtypes.push_back(instantiation.dtype);
    }
    if (std::find(table.head_dims.begin(), table.head_dims.end(), instantiation.head_dim) ==
        table.head_dims.end()) {
      table.head_dims.push_back(instantiation.head_dim);
    }
  }
  table.separate_v_dim = false;
  table.masks = {MaskKind::none, MaskKind::causal, MaskKind::causal_br, MaskKind::window,
                 MaskKind::padding};
  table.layouts = {Layout::bshd, Layout::bhsd, Layout::qkv_packed};
  table.gqa = true;
  table.archs = {"sm_90"};
  table.notes =
      "TMA loads (128-byte swizzle) into an mbarrier ring, wgmma m64nNk16 with fp32 "
      "accumulation, P rounded to the input dtype for P V; no scratch memory";
  return table;
}

const Instantiation* find_instantiation(const std::vector<Instantiation>& instantiations,
                                        int64_t head_dim, DType dtype) {
  for (const Instantiation& instantiation : instantiations) {
    if (instantiation.head_dim == head_dim && instantiation.dtype == dtype) return &instantiation;
  }
  return nullptr;
}

}  // namespace

Kernel flash3_kernel_entry(std::string name, std::string summary,
                           std::vector<Instantiation> instantiations) {
  Kernel kernel;
  kernel.name = std::move(name);
  kernel.summary = std::move(summary);
  kernel.backend = kKernelBackend;
  kernel.deterministic = true;
  kernel.returns_lse = true;
  kernel.support = flash3_support_table(instantiations);
  kernel.make_plan = [name = kernel.name, instantiations = std::move(instantiations)](
                         const Problem& problem,
                         const PlanContext& context) -> Result<std::unique_ptr<Plan>> {
    const Instantiation* instantiation =
        find_instantiation(instantiations, problem.head_dim_qk, problem.input_dtype);
    if (instantiation == nullptr || problem.head_dim_v != problem.head_dim_qk) {
      return Status::Error(name + ": no instantiation for " + shape_string(problem));
    }
    auto plan = std::make_unique<Flash3Plan>(problem, context, *instantiation, name);
    if (Status status = plan->build(); !status) return status;
    return plan;
  };
  return kernel;
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3

namespace attnbench {
inline namespace ATTNBENCH_TARGET {

Kernel cuda_flash3_wg1_kernel() {
  const flash3::Instantiation instantiations[] = {
      {128, DType::bf16, &flash3::launch_flash3_wg1<128, DType::bf16>,
       flash3::Wg1Traits<128>::kSharedBytes, flash3::Wg1Traits<128>::kBlockQ,
       flash3::Wg1Traits<128>::kBlockK},
  };
  return flash3::flash3_kernel_entry(
      "cuda.flash3_wg1",
      "FlashAttention-3's first stage on Hopper: one warpgroup, TMA loads into an mbarrier ring, "
      "wgmma for S = Q K^T (shared-memory operands) and O += P V (P from registers), each batch "
      "waited for at once",
      std::vector<flash3::Instantiation>(std::begin(instantiations), std::end(instantiations)));
}

Kernel cuda_flash3_ws_kernel() {
  using Traits = flash3::WsTraits<128>;
  const flash3::Instantiation instantiations[] = {
      {128, DType::bf16, &flash3::launch_flash3_ws<128, DType::bf16>, Traits::kSharedBytes,
       Traits::kBlockQ, Traits::kBlockK},
  };
  return flash3::flash3_kernel_entry(
      "cuda.flash3_ws",
      "FlashAttention-3's second stage: warp specialization, a TMA producer warpgroup and two "
      "wgmma consumer warpgroups on a full/empty mbarrier ring, registers rebalanced with "
      "setmaxnreg",
      std::vector<flash3::Instantiation>(std::begin(instantiations), std::end(instantiations)));
}

Kernel cuda_flash3_pingpong_kernel() {
  using Traits = flash3::WsTraits<128>;
  const flash3::Instantiation instantiations[] = {
      {128, DType::bf16, &flash3::launch_flash3_pingpong<128, DType::bf16>, Traits::kSharedBytes,
       Traits::kBlockQ, Traits::kBlockK},
  };
  return flash3::flash3_kernel_entry(
      "cuda.flash3_pingpong",
      "FlashAttention-3's third stage: cuda.flash3_ws with ping-pong scheduling, the consumer "
      "warpgroups taking turns on the tensor cores (named barriers) so one's softmax runs under "
      "the other's wgmma",
      std::vector<flash3::Instantiation>(std::begin(instantiations), std::end(instantiations)));
}

Kernel cuda_flash3_kernel() {
  const auto row = [](auto head_dim, DType dtype, flash3::LaunchFunction launch) {
    using Traits = flash3::WsTraits<decltype(head_dim)::value>;
    return flash3::Instantiation{head_dim,        dtype,          launch, Traits::kSharedBytes,
                                 Traits::kBlockQ, Traits::kBlockK};
  };
  using D64 = std::integral_constant<int, 64>;
  using D128 = std::integral_constant<int, 128>;
  using D256 = std::integral_constant<int, 256>;
  const flash3::Instantiation instantiations[] = {
      row(D64{}, DType::f16, &flash3::launch_flash3<64, DType::f16>),
      row(D64{}, DType::bf16, &flash3::launch_flash3<64, DType::bf16>),
      row(D128{}, DType::f16, &flash3::launch_flash3<128, DType::f16>),
      row(D128{}, DType::bf16, &flash3::launch_flash3<128, DType::bf16>),
      row(D256{}, DType::f16, &flash3::launch_flash3<256, DType::f16>),
      row(D256{}, DType::bf16, &flash3::launch_flash3<256, DType::bf16>),
  };
  return flash3::flash3_kernel_entry(
      "cuda.flash3",
      "FlashAttention-3 forward on Hopper: TMA producer warpgroup, two wgmma consumer "
      "warpgroups in ping-pong, softmax overlapped with the warpgroup's own P V, setmaxnreg",
      std::vector<flash3::Instantiation>(std::begin(instantiations), std::end(instantiations)));
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench
