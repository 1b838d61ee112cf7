// cuda.flash3's plan, shared by its stages: the support table, what a launch needs checked on the
// host (sm_90, shared memory), the TMA maps of Q, K and V (and of the output, for the stage that
// stores it with TMA) encoded for each forward (they hold the tensors' addresses), and the
// dispatch to the instantiation of the problem's head dim and dtype. The kernels are
// flash3_<stage>_kernel.cuh.
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/plan_helpers.h"
#include "kernels/cuda/common/tma_map.h"
#include "kernels/cuda/common/visible_tiles.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/flash3/flash3_launch.h"
#include "kernels/cuda/flash3/flash3_traits.h"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {
namespace {

constexpr int kRequiredSm = 90;  // wgmma, TMA, mbarrier transactions: sm_90a code

// The 4D view (d, sequence, head, batch) of one tensor, boxes of 64 elements x `box_rows` rows,
// the 128-byte swizzle; elements past the sequence read as zeros (and are not stored).
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

Status encode_maps(const AttentionParams& p, const Instantiation& kernel, Stage stage,
                   Flash3Params& params) {
  const DType dtype = p.input_dtype;
  const int d = p.head_dim_qk;
  std::vector<std::pair<gpu::TensorMapSpec, CUtensorMap*>> maps = {
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
  if (stores_output_with_tma(stage)) {
    maps.push_back({tensor_spec(p.out, p.output_dtype, p.head_dim_v, p.seqlen_q, p.heads_q, p.batch,
                                p.out_row_stride, p.out_head_stride, p.out_batch_stride, kWgmmaM),
                    &params.out_map});
  }
  const char* names[] = {"q", "k", "v", "out"};
  for (size_t i = 0; i < maps.size(); ++i) {
    if (Status status = gpu::encode_tensor_map(maps[i].first, *maps[i].second); !status) {
      return Status::Error(std::string(names[i]) + ": " + status.message);
    }
  }
  return Status::Ok();
}

// A forward's blocks (query block, query head, batch): one CTA each unless the grid is persistent.
int64_t query_block_count(const Problem& problem, int block_q) {
  return gpu::tile_count(problem.seqlen_q, block_q) * problem.heads_q * problem.batch;
}

// cuda.flash3[probe=clock64]'s records of one forward: two per CTA (its consumer warpgroups).
size_t probe_record_count(const Problem& problem, int block_q) {
  return static_cast<size_t>(query_block_count(problem, block_q) * 2);
}

class Flash3Plan final : public Plan {
 public:
  Flash3Plan(const Problem& problem, const PlanContext& context, const Instantiation& kernel,
             Stage stage, std::string name)
      : problem_(problem),
        scratch_(context.scratch),
        stream_(static_cast<cudaStream_t>(context.stream)),
        device_(context.device),
        kernel_(kernel),
        stage_(stage),
        name_(std::move(name)) {}

  Status build() {
    if (Status status = check_hopper_device(device_, kernel_.shared_bytes, name_); !status) {
      return status;
    }
    if (Status status = gpu::sm_count(device_, sm_count_); !status) return status;
    return kernel_.clock_probe ? allocate_probe_records() : Status::Ok();
  }

  Status run(const AttentionParams& params) override {
    if (Status status = gpu::check_params_match(problem_, params); !status) return status;
    Flash3Params launch{};
    launch.attention = params;
    launch.probe = probe_records_.as<ProbeRecord>();
    launch.sm_count = sm_count_;
    if (Status status = encode_maps(params, kernel_, stage_, launch); !status) {
      return Status::Error(name_ + ": " + status.message);
    }
    return kernel_.launch(launch, stream_);
  }

  // A persistent grid's CTAs beside its blocks; the clock probe's records of the last forward as
  // clocks per key tile (flash3_probe.h).
  std::string details() const override {
    if (kernel_.grid == Grid::persistent) {
      const int64_t blocks = query_block_count(problem_, kernel_.block_q);
      return nlohmann::json{
          {"persistent_grid",
           {{"ctas", grid_ctas(blocks, kernel_.grid, sm_count_)}, {"blocks", blocks}}}}
          .dump();
    }
    if (!kernel_.clock_probe) return {};
    std::vector<ProbeRecord> records(probe_record_count(problem_, kernel_.block_q));
    const Status copied = [&]() -> Status {
      ATTNBENCH_CUDA_TRY(cudaStreamSynchronize(stream_));
      ATTNBENCH_CUDA_TRY(cudaMemcpy(records.data(), probe_records_.as<ProbeRecord>(),
                                    records.size() * sizeof(ProbeRecord), cudaMemcpyDeviceToHost));
      return Status::Ok();
    }();
    return copied ? probe_details(records)
                  : nlohmann::json{{"clock_probe_error", copied.message}}.dump();
  }

 private:
  // Zeroed once: a block with no visible key writes no record, the same blocks at every launch.
  Status allocate_probe_records() {
    const std::vector<ProbeRecord> zeros(probe_record_count(problem_, kernel_.block_q),
                                         ProbeRecord{});
    const size_t bytes = zeros.size() * sizeof(ProbeRecord);
    if (Status status =
            gpu::allocate_scratch(scratch_, bytes, "clock probe records", probe_records_);
        !status) {
      return status;
    }
    ATTNBENCH_CUDA_TRY(
        cudaMemcpy(probe_records_.as<ProbeRecord>(), zeros.data(), bytes, cudaMemcpyHostToDevice));
    return Status::Ok();
  }

  Problem problem_;
  ScratchAllocator& scratch_;
  cudaStream_t stream_;
  int device_;
  int sm_count_ = 0;
  Instantiation kernel_;
  Stage stage_;
  std::string name_;
  ScratchBuffer probe_records_;  // cuda.flash3[probe=clock64] only
};

SupportTable flash3_support_table(const std::vector<Instantiation>& instantiations) {
  SupportTable table = flash3_common_support();
  gpu::add_instantiated(table, instantiations);
  table.notes =
      "TMA loads (128-byte swizzle) into an mbarrier ring, wgmma m64nNk16 with fp32 "
      "accumulation, P rounded to the input dtype for P V; no scratch memory";
  return table;
}

}  // namespace

Status check_hopper_device(int device, size_t shared_bytes, const std::string& name) {
  int sm = 0;
  if (Status status = gpu::sm_version(device, sm); !status) return status;
  if (sm != kRequiredSm) {
    return Status::Error("unsupported: " + name + " runs sm_90a code (Hopper) only; device is sm_" +
                         std::to_string(sm));
  }
  return gpu::check_shared_memory(device, shared_bytes, name);
}

SupportTable flash3_common_support() {
  SupportTable table;
  table.separate_v_dim = false;
  table.masks = {MaskKind::none, MaskKind::causal, MaskKind::causal_br, MaskKind::window,
                 MaskKind::padding};
  table.layouts = {Layout::bshd, Layout::bhsd, Layout::qkv_packed};
  table.gqa = true;
  table.archs = {"sm_90"};
  return table;
}

Kernel flash3_kernel_entry(std::string name, std::string summary, Stage stage,
                           std::vector<Instantiation> instantiations) {
  Kernel kernel;
  kernel.name = std::move(name);
  kernel.summary = std::move(summary);
  kernel.backend = kKernelBackend;
  kernel.deterministic = true;
  kernel.returns_lse = true;
  kernel.support = flash3_support_table(instantiations);
  // cuda.flash3 itself instantiates every head dim; its stages only d 128 bf16.
  kernel.correctness_suite = stage == Stage::overlapped ? "ctest" : "hopper-stages";
  // Priced at the tile shape of the problem's instantiation (a variant may change its keys).
  kernel.predicted_seconds = [stage, instantiations](const Problem& problem) {
    const Instantiation* instantiation = gpu::find_instantiation(instantiations, problem);
    return predict(stage, problem, instantiation != nullptr ? instantiation->block_k : 0).seconds;
  };
  // Every stage keeps its state on chip and launches once (flash3_launch.h's launch_blocks).
  kernel.expected_resources = [](const Problem&) { return ResourceExpectation{0, 1}; };
  kernel.make_plan = [name = kernel.name, stage, instantiations = std::move(instantiations)](
                         const Problem& problem,
                         const PlanContext& context) -> Result<std::unique_ptr<Plan>> {
    const Instantiation* instantiation = gpu::find_instantiation(instantiations, problem);
    if (instantiation == nullptr) {
      return Status::Error(name + ": no instantiation for " + shape_string(problem));
    }
    auto plan = std::make_unique<Flash3Plan>(problem, context, *instantiation, stage, name);
    if (Status status = plan->build(); !status) return status;
    return plan;
  };
  return kernel;
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {
namespace {

// One row of a kernel's table, its sizes from the kernel's traits.
template <typename Traits>
Instantiation instantiate(DType dtype, LaunchFunction launch) {
  return {Traits::kHeadDim,     Traits::kHeadDimV, dtype,          launch,
          Traits::kSharedBytes, Traits::kBlockQ,   Traits::kBlockK};
}

}  // namespace
}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3

namespace attnbench {
inline namespace ATTNBENCH_TARGET {

Kernel cuda_flash3_wg1_kernel() {
  using flash3::instantiate;
  return flash3::flash3_kernel_entry(
      "cuda.flash3_wg1",
      "FlashAttention-3's first stage on Hopper: one warpgroup, TMA loads into an mbarrier ring, "
      "wgmma for S = Q K^T (shared-memory operands) and O += P V (P from registers), each batch "
      "waited for at once",
      flash3::Stage::wg1,
      {instantiate<flash3::Wg1Traits<128>>(DType::bf16,
                                           &flash3::launch_flash3_wg1<128, DType::bf16>)});
}

Kernel cuda_flash3_ws_kernel() {
  using flash3::instantiate;
  return flash3::flash3_kernel_entry(
      "cuda.flash3_ws",
      "FlashAttention-3's second stage: warp specialization, a TMA producer warpgroup and two "
      "wgmma consumer warpgroups on a full/empty mbarrier ring, registers rebalanced with "
      "setmaxnreg",
      flash3::Stage::ws,
      {instantiate<flash3::WsTraits<128>>(DType::bf16,
                                          &flash3::launch_flash3_ws<128, DType::bf16>)});
}

Kernel cuda_flash3_pingpong_kernel() {
  using flash3::instantiate;
  return flash3::flash3_kernel_entry(
      "cuda.flash3_pingpong",
      "FlashAttention-3's third stage: cuda.flash3_ws with ping-pong scheduling, the consumer "
      "warpgroups taking turns on the tensor cores (named barriers) so one's softmax runs under "
      "the other's wgmma",
      flash3::Stage::pingpong,
      {instantiate<flash3::WsTraits<128>>(DType::bf16,
                                          &flash3::launch_flash3_pingpong<128, DType::bf16>)});
}

Kernel cuda_flash3_kernel() {
  using flash3::instantiate;
  using flash3::WsTraits;
  Kernel kernel = flash3::flash3_kernel_entry(
      "cuda.flash3",
      "FlashAttention-3 forward on Hopper: TMA producer warpgroup, two wgmma consumer "
      "warpgroups in ping-pong, softmax overlapped with the warpgroup's own P V, setmaxnreg",
      flash3::Stage::overlapped,
      {
          instantiate<WsTraits<64>>(DType::f16, &flash3::launch_flash3<64, DType::f16>),
          instantiate<WsTraits<64>>(DType::bf16, &flash3::launch_flash3<64, DType::bf16>),
          instantiate<WsTraits<80>>(DType::f16, &flash3::launch_flash3<80, DType::f16>),
          instantiate<WsTraits<80>>(DType::bf16, &flash3::launch_flash3<80, DType::bf16>),
          instantiate<WsTraits<96>>(DType::f16, &flash3::launch_flash3<96, DType::f16>),
          instantiate<WsTraits<96>>(DType::bf16, &flash3::launch_flash3<96, DType::bf16>),
          instantiate<WsTraits<128>>(DType::f16, &flash3::launch_flash3<128, DType::f16>),
          instantiate<WsTraits<128>>(DType::bf16, &flash3::launch_flash3<128, DType::bf16>),
          instantiate<WsTraits<256>>(DType::f16, &flash3::launch_flash3<256, DType::f16>),
          instantiate<WsTraits<256>>(DType::bf16, &flash3::launch_flash3<256, DType::bf16>),
          instantiate<WsTraits<192, 128>>(DType::f16, &flash3::launch_flash3<192, DType::f16, 128>),
          instantiate<WsTraits<192, 128>>(DType::bf16,
                                          &flash3::launch_flash3<192, DType::bf16, 128>),
      });
  // The table it owns: K and V rings as deep as shared memory allows at the head dim, the
  // consumers in ping-pong, O rescaled between the S and P V issues, one CTA per block. Every
  // variant changes one.
  kernel.default_variant = [](const Problem& problem) {
    const int head_dim = static_cast<int>(problem.head_dim_qk);
    const int head_dim_v = static_cast<int>(problem.head_dim_v);
    return "stages=" + std::to_string(flash3::ws_stages(head_dim, head_dim_v)) +
           ",block_n=" + std::to_string(flash3::ws_block_k(head_dim_v)) +
           ",pingpong=on,rescale=before_pv,persistent=off";
  };
  return kernel;
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {
namespace {

// A variant of cuda.flash3 at d 128, bf16 (the figure shape's), for `attnbench tune` and the GPU
// experiment: one parameter of the default changed; its correctness suite is the stages'.
Kernel flash3_variant(const std::string& parameters, std::string summary,
                      const Instantiation& instantiation) {
  Kernel kernel = flash3_kernel_entry(variant_name("cuda.flash3", parameters), std::move(summary),
                                      Stage::overlapped, {instantiation});
  kernel.variant_of = "cuda.flash3";
  kernel.correctness_suite = "hopper-stages";  // d 128, bf16, as the stages
  return kernel;
}

// cuda.flash3[probe=clock64]: the default with its waits timed (flash3_probe.h), for the GPU
// experiment; its records (64 bytes per consumer warpgroup) are its extra memory.
Kernel clock_probe_variant() {
  Instantiation probed =
      instantiate<WsTraits<128>>(DType::bf16, &launch_flash3_clock_probe<128, DType::bf16>);
  probed.clock_probe = true;
  Kernel kernel = flash3_variant(
      "probe=clock64",
      "cuda.flash3 with the SM clock read around each wait of its consumer warpgroups (K and V "
      "stages, the turn, the S and P V wgmma): clocks per key tile in its details; the reads "
      "perturb its own time",
      probed);
  kernel.support.notes += "; the probe's records: 64 bytes of scratch per consumer warpgroup";
  kernel.expected_resources = [block_q = probed.block_q](const Problem& problem) {
    return ResourceExpectation{
        static_cast<int64_t>(probe_record_count(problem, block_q) * sizeof(ProbeRecord)), 1};
  };
  return kernel;
}

// cuda.flash3[persistent=on]: the default on a persistent grid; its details give the grid.
Kernel persistent_variant() {
  Instantiation persistent =
      instantiate<WsTraits<128>>(DType::bf16, &launch_flash3_persistent<128, DType::bf16>);
  persistent.grid = Grid::persistent;
  return flash3_variant(
      "persistent=on",
      "cuda.flash3 on a persistent grid, one CTA per SM running its query blocks in turn: a "
      "block's first K and Q load while the previous block's output is stored",
      persistent);
}

}  // namespace
}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3

namespace attnbench {
inline namespace ATTNBENCH_TARGET {

std::vector<Kernel> cuda_flash3_variant_kernels() {
  using flash3::instantiate;
  using flash3::WsTraits;
  return {
      flash3::flash3_variant(
          "stages=2",
          "cuda.flash3 with K and V rings of 2 stages (3 fit at d 128): what the third stage buys",
          instantiate<WsTraits<128, 128, 2>>(DType::bf16,
                                             &flash3::launch_flash3_stages<128, DType::bf16, 2>)),
      flash3::flash3_variant(
          "stages=2,block_n=176",
          "cuda.flash3 on key tiles of 176 (FlashAttention-3's at d 128; S = Q K^T one wgmma of "
          "N = 176) and the 2 stages of K and V that fit",
          instantiate<WsTraits<128, 128, flash3::ws_stages(128, 128, 176), 176>>(
              DType::bf16, &flash3::launch_flash3_block_k<128, DType::bf16, 176>)),
      flash3::flash3_variant(
          "pingpong=off",
          "cuda.flash3 without the turns: each consumer warpgroup issues its wgmma when ready, its "
          "softmax still under its own P V: what ping-pong buys on top of the overlap",
          instantiate<WsTraits<128>>(DType::bf16,
                                     &flash3::launch_flash3_without_turns<128, DType::bf16>)),
      flash3::clock_probe_variant(),
      flash3::flash3_variant(
          "rescale=after_pv",
          "cuda.flash3 with O rescaled after the P V wait, outside the turn, rather than between "
          "the S and P V issues inside it (FlashAttention-3's RescaleOBeforeGemm off, its choice "
          "at d <= 128)",
          instantiate<WsTraits<128>>(DType::bf16,
                                     &flash3::launch_flash3_rescale_after_pv<128, DType::bf16>)),
      flash3::persistent_variant(),
  };
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench
