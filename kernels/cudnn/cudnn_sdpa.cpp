// cudnn.sdpa, cudnn.sdpa_fp8 and its 16-bit series — cuDNN's fused attention forward through
// cudnn-frontend's graph API: the baseline every in-house kernel is judged against. This file and
// cudnn_versions.cpp are the only ones that include cudnn-frontend.
//
// What a plan holds (built in make_plan, outside the timed region): one frontend graph for the
// problem — Q, K, V in (dims (batch, heads, seq, dim) with the layout's own strides, so bshd, bhsd
// and packed QKV need no copies; K and V with heads_kv heads for GQA/MQA), O and Stats out; FP8
// adds descale/scale inputs and amax outputs — validated, lowered, the first engine of cuDNN's
// heuristics (modes A, then fallback) built, its workspace taken from the harness's allocator.
// A forward is one graph execute on the plan's stream.
//
// Masks (cudnn_support.h has the mapping and its reasons): causal is the top-left diagonal;
// causal_br and window(L, R) are bottom-right bands with cuDNN's left bound L + 1 and right bound
// R; padding is cuDNN's padding mask with seq_len_q = seqlen_q and seq_len_kv = the key lengths.
// When seqlen_q > seqlen_k a bottom-right band leaves the first rows without keys: cuDNN gets only
// the rows below them (Q, O and Stats start further in), and empty_rows.cu writes those rows
// (out 0, LSE -inf), as it does for batches whose padding leaves no key (cuDNN skips them).
// Stats: cuDNN's Stats is max + ln(sum exp), the natural-log LSE of params.lse: written in place.
//
// FP8 (Hopper): x = x_stored * descale for Q, K and V (params' per-tensor factors); O is stored in
// e4m3 as O * out_scale; P is rounded to e4m3 for the second GEMM as P * scale_s with
// scale_s = 256. P <= 1, so 256 = 2^8 stays under e4m3's 448, and being a power of two it moves
// the exponent only (448 would round on another grid). Which e4m3 values P lands on depends on
// the running max, so on the key tiles' size and order, which cuDNN does not publish: no
// reference reproduces cuDNN's rounding. The checker judges this kernel by an envelope
// (lowp_model_for in harness/measure/checker.h): the widest bound of the plain low-precision
// rows and of the FP8 recipe (reference/fp8_recipe.h) with P offset 2^8 at 64- and 128-key tiles,
// forward and reverse (opaque_fp8_recipes), plus the FP8 tensor cores' narrow-sum term.
// amax_s (of P) and amax_o (of O) are read back by details().
//
// cudnn.sdpa_fp8_quantized and cudnn.sdpa_fp8_incoherent: the FP8 graph on fp16/bf16 inputs, the
// in-house 16-bit FP8 series' peers. cuDNN's FP8 forward on Hopper reads and writes FP8 only, so
// a forward is three steps on the plan's stream: cuda.flash3_fp8's amax and quantize passes write
// Q, K and V packed in e4m3 (Q and K rotated first for _incoherent), their descales and the output
// scale fp8_output_scale(descale_v) into scratch, where the graph's descale and scale_o tensors
// point (no host round trip); the graph (built for those copies: graph_problem) writes its e4m3
// output into scratch; the dequantize pass writes it into the 16-bit output. The checker judges
// them by the envelope around their base recipe (Kernel::fp8_envelope_base), its e4m3 output
// included.
//
// The backward (cudnn.sdpa, and cudnn.sdpa_deterministic: cuDNN's deterministic algorithm, which
// runs the backward only): a second frontend graph built in make_plan when the case's pass has a
// backward, from Q, K, V, the forward's O and Stats (the plan's own forward outputs, in params'
// out and lse) and dO to dQ, dK, dV, with the forward's mask mapping; cuDNN sums dK and dV over a
// GQA group. The rows cuDNN is not given (above a bottom-right band, batches without keys) get
// zero gradients from the adapter before the graph runs, inside the timed step.
//
// Refusals: where cuDNN declines a graph (validation, heuristics, plan building) make_plan fails
// with "cudnn: <stage>: <cuDNN's message>", which the harness records as skipped; anything else
// fails as "cudnn.sdpa: ..." and is an error.
#include <cuda_runtime.h>
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <array>
#include <cmath>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/plan_helpers.h"
#include "kernels/cuda/empty_rows.h"
#include "kernels/cuda/flash3/flash3_fp8_launch.h"
#include "kernels/cudnn/cudnn_kernels.h"

namespace fe = cudnn_frontend;

namespace attnbench {
namespace {

// ---- constants ----------------------------------------------------------------------------------

// Tensor uids: the variant pack of a run binds device pointers to these.
enum TensorUid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kSeqLenQ,
  kSeqLenKv,
  kDescaleQ,
  kDescaleK,
  kDescaleV,
  kDescaleS,
  kScaleS,
  kScaleO,
  kAmaxS,
  kAmaxO,
  kDO,  // the backward's
  kDQ,
  kDK,
  kDV,
};

// FP8 scalars, one float each, in one device buffer in this order.
enum Fp8Scalar : int {
  kDescaleQSlot,
  kDescaleKSlot,
  kDescaleVSlot,
  kDescaleSSlot,
  kScaleSSlot,
  kScaleOSlot,
  kAmaxSSlot,
  kAmaxOSlot,
  kFp8Scalars,
};

constexpr float kProbabilityScale = 256.0f;  // scale_s: see the file comment
const std::vector<int64_t> kScalarDims = {1, 1, 1, 1};

// ---- the problem cuDNN sees ---------------------------------------------------------------------

// The problem itself, or, for cudnn.sdpa_fp8_quantized's 16-bit inputs, the e4m3 copies its
// quantize pass writes: Q, K and V packed (bshd), per-tensor descales, an e4m3 output packed
// (bshd) for the dequantize pass.
Problem graph_problem(const Problem& problem, bool quantized) {
  if (!quantized) return problem;
  Problem copies = problem;
  copies.input_dtype = DType::e4m3;
  copies.output_dtype = DType::e4m3;
  copies.p_dtype = DType::e4m3;
  copies.fp8_scaling = Fp8Scaling::per_tensor;
  copies.layout = Layout::bshd;
  return copies;
}

// ---- cuDNN handles ------------------------------------------------------------------------------

Status cudnn_status(cudnnStatus_t status, const char* call) {
  if (status == CUDNN_STATUS_SUCCESS) return Status::Ok();
  return Status::Error(std::string(call) + " failed: " + cudnnGetErrorString(status));
}

// One cuDNN handle per device for the life of the worker process: creating one costs tens of
// milliseconds, and destroying it from a static destructor can run after the CUDA runtime has
// shut down — so they are deliberately never destroyed.
Status cudnn_handle_for(int device, cudnnHandle_t& handle) {
  static std::mutex mutex;
  static std::unordered_map<int, cudnnHandle_t> handles;
  const std::lock_guard<std::mutex> lock(mutex);
  if (auto found = handles.find(device); found != handles.end()) {
    handle = found->second;
    return Status::Ok();
  }
  ATTNBENCH_CUDA_TRY(cudaSetDevice(device));
  if (Status status = cudnn_status(cudnnCreate(&handle), "cudnnCreate"); !status) return status;
  handles.emplace(device, handle);
  return Status::Ok();
}

// ---- the graph ----------------------------------------------------------------------------------

fe::DataType_t frontend_type(DType dtype) {
  switch (dtype) {
    case DType::f16:
      return fe::DataType_t::HALF;
    case DType::bf16:
      return fe::DataType_t::BFLOAT16;
    case DType::e4m3:
      return fe::DataType_t::FP8_E4M3;
    case DType::e5m2:
      return fe::DataType_t::FP8_E5M2;
    case DType::f32:
      break;
  }
  return fe::DataType_t::FLOAT;
}

// cuDNN's dims are (batch, heads, seq, dim); strides come from the layout, the dim stride is 1.
std::vector<int64_t> strides_of(const Strides& strides) {
  return {strides.batch, strides.head, strides.seq, 1};
}

std::shared_ptr<fe::graph::Tensor_attributes> scalar_input(fe::graph::Graph& graph,
                                                           const char* name, int64_t uid) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim(kScalarDims)
                          .set_stride(kScalarDims)
                          .set_data_type(fe::DataType_t::FLOAT));
}

void mark_scalar_output(fe::graph::Tensor_attributes& tensor, int64_t uid) {
  tensor.set_output(true)
      .set_uid(uid)
      .set_dim(kScalarDims)
      .set_stride(kScalarDims)
      .set_data_type(fe::DataType_t::FLOAT);
}

// A graph for a device of `sm_version` (80, 90, ...) with the problem's io type. The SM version
// is set before any node is added, since nodes copy the graph's context when they are created.
std::shared_ptr<fe::graph::Graph> new_graph(const Problem& p, int sm_version) {
  auto graph = std::make_shared<fe::graph::Graph>();
  graph->set_sm_version(sm_version);
  graph->set_io_data_type(frontend_type(p.input_dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return graph;
}

// A tensor of the graph: (batch, heads, seq, dim) dims with the layout's strides.
std::shared_ptr<fe::graph::Tensor_attributes> tensor(fe::graph::Graph& graph, const char* name,
                                                     int64_t uid, std::vector<int64_t> dims,
                                                     std::vector<int64_t> strides) {
  return graph.tensor(fe::graph::Tensor_attributes()
                          .set_name(name)
                          .set_uid(uid)
                          .set_dim(std::move(dims))
                          .set_stride(std::move(strides)));
}

// Q (the `rows` cuDNN sees), K and V of `p`, as both graphs take them.
std::array<std::shared_ptr<fe::graph::Tensor_attributes>, 3> qkv_tensors(
    fe::graph::Graph& graph, const Problem& p, const ProblemLayout& layout, int64_t rows) {
  return {tensor(graph, "Q", kQ, {p.batch, p.heads_q, rows, p.head_dim_qk},
                 strides_of(layout.q.strides)),
          tensor(graph, "K", kK, {p.batch, p.heads_kv, p.seqlen_k, p.head_dim_qk},
                 strides_of(layout.k.strides)),
          tensor(graph, "V", kV, {p.batch, p.heads_kv, p.seqlen_k, p.head_dim_v},
                 strides_of(layout.v.strides))};
}

// The mask mapping on a forward's or a backward's SDPA attributes (the same setters on each).
template <typename Attributes>
void set_mask(Attributes& options, const CudnnMaskMapping& mapping, fe::graph::Graph& graph,
              int64_t batch) {
  options.set_diagonal_alignment(mapping.diagonal == CudnnDiagonal::bottom_right
                                     ? fe::DiagonalAlignment_t::BOTTOM_RIGHT
                                     : fe::DiagonalAlignment_t::TOP_LEFT);
  if (mapping.left_bound) {
    options.set_diagonal_band_left_bound(static_cast<int>(*mapping.left_bound));
  }
  if (mapping.right_bound) {
    options.set_diagonal_band_right_bound(static_cast<int>(*mapping.right_bound));
  }
  if (!mapping.padding) return;
  // (batch, 1, 1, 1) int32: one length per batch.
  auto seq_len = [&graph, batch](const char* name, int64_t uid) {
    return graph.tensor(fe::graph::Tensor_attributes()
                            .set_name(name)
                            .set_uid(uid)
                            .set_dim({batch, 1, 1, 1})
                            .set_stride(kScalarDims)
                            .set_data_type(fe::DataType_t::INT32));
  };
  options.set_padding_mask(true)
      .set_seq_len_q(seq_len("seq_len_q", kSeqLenQ))
      .set_seq_len_kv(seq_len("seq_len_kv", kSeqLenKv));
}

// The graph of one problem for a device of `sm_version`: cuDNN sees rows [skipped_rows,
// seqlen_q) of Q, O and Stats.
std::shared_ptr<fe::graph::Graph> describe_graph(const Problem& problem,
                                                 const CudnnMaskMapping& mapping,
                                                 CudnnVariant variant, int sm_version) {
  const Problem& p = problem;
  const ProblemLayout layout = describe_layout(p);
  const int64_t rows = p.seqlen_q - mapping.skipped_rows;

  auto graph = new_graph(p, sm_version);
  auto [q, k, v] = qkv_tensors(*graph, p, layout, rows);
  auto options =
      fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(true).set_attn_scale(
          static_cast<float>(p.softmax_scale()));
  set_mask(options, mapping, *graph, p.batch);

  std::shared_ptr<fe::graph::Tensor_attributes> o;
  std::shared_ptr<fe::graph::Tensor_attributes> stats;
  if (variant == CudnnVariant::fp8) {
    auto [o_fp8, stats_fp8, amax_s, amax_o] = graph->sdpa_fp8(
        q, k, v, scalar_input(*graph, "descale_q", kDescaleQ),
        scalar_input(*graph, "descale_k", kDescaleK), scalar_input(*graph, "descale_v", kDescaleV),
        scalar_input(*graph, "descale_s", kDescaleS), scalar_input(*graph, "scale_s", kScaleS),
        scalar_input(*graph, "scale_o", kScaleO), options);
    mark_scalar_output(*amax_s, kAmaxS);
    mark_scalar_output(*amax_o, kAmaxO);
    o = o_fp8;
    stats = stats_fp8;
  } else {
    auto [o_half, stats_half] = graph->sdpa(q, k, v, options);
    o = o_half;
    stats = stats_half;
  }
  o->set_output(true)
      .set_uid(kO)
      .set_data_type(frontend_type(p.output_dtype))
      .set_dim({p.batch, p.heads_q, rows, p.head_dim_v})
      .set_stride(strides_of(layout.out.strides));
  // params.lse is (batch, heads_q, seqlen_q) fp32: heads apart by seqlen_q rows.
  stats->set_output(true)
      .set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({p.batch, p.heads_q, rows, 1})
      .set_stride({p.heads_q * p.seqlen_q, p.seqlen_q, 1, 1});
  return graph;
}

// The backward's graph of one problem (fp16/bf16): the forward's tensors and mask, with O, dO and
// Stats in and dQ, dK, dV out, each with its params' strides; rows as the forward's graph. cuDNN
// below 9.26 reads Stats packed (b, h, rows): params.lse itself when no row is skipped, else a
// packed copy (the plan's packed_stats_).
std::shared_ptr<fe::graph::Graph> describe_backward_graph(const Problem& problem,
                                                          const CudnnMaskMapping& mapping,
                                                          bool deterministic, int sm_version) {
  const Problem& p = problem;
  const ProblemLayout layout = describe_layout(p);
  const int64_t rows = p.seqlen_q - mapping.skipped_rows;
  auto graph = new_graph(p, sm_version);
  auto [q, k, v] = qkv_tensors(*graph, p, layout, rows);
  auto o = tensor(*graph, "O", kO, {p.batch, p.heads_q, rows, p.head_dim_v},
                  strides_of(layout.out.strides));
  auto d_o = tensor(*graph, "dO", kDO, {p.batch, p.heads_q, rows, p.head_dim_v},
                    strides_of(layout.out.strides));
  auto stats = graph->tensor(fe::graph::Tensor_attributes()
                                 .set_name("Stats")
                                 .set_uid(kStats)
                                 .set_dim({p.batch, p.heads_q, rows, 1})
                                 .set_stride({p.heads_q * rows, rows, 1, 1})
                                 .set_data_type(fe::DataType_t::FLOAT));
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("sdpa_backward")
                     .set_attn_scale(static_cast<float>(p.softmax_scale()))
                     .set_deterministic_algorithm(deterministic);
  set_mask(options, mapping, *graph, p.batch);
  auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, d_o, stats, options);
  dq->set_output(true).set_uid(kDQ).set_dim({p.batch, p.heads_q, rows, p.head_dim_qk})
      .set_stride(strides_of(layout.dq.strides));
  dk->set_output(true).set_uid(kDK).set_dim({p.batch, p.heads_kv, p.seqlen_k, p.head_dim_qk})
      .set_stride(strides_of(layout.dk.strides));
  dv->set_output(true).set_uid(kDV).set_dim({p.batch, p.heads_kv, p.seqlen_k, p.head_dim_v})
      .set_stride(strides_of(layout.dv.strides));
  return graph;
}

// cuDNN declining a graph (no engine, unsupported feature) versus anything else going wrong.
bool is_refusal(fe::error_t& error) {
  switch (error.get_code()) {
    case fe::error_code_t::GRAPH_NOT_SUPPORTED:
    case fe::error_code_t::HEURISTIC_QUERY_FAILED:
    case fe::error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED:
      return true;
    default:
      return error.get_message().find("NOT_SUPPORTED") != std::string::npos;
  }
}

Status frontend_failure(std::string_view kernel_name, const char* stage, fe::error_t error) {
  const std::string message = std::string(stage) + ": " + error.get_message();
  if (is_refusal(error)) return Status::Error("cudnn: " + message);
  return Status::Error(std::string(kernel_name) + ": " + message);
}

// A float in the plan's details (nlohmann::json, like every JSON the harness writes): null when
// it is not finite, which JSON cannot hold.
nlohmann::json json_number(float value) {
  return std::isfinite(value) ? nlohmann::json(static_cast<double>(value)) : nlohmann::json(nullptr);
}

// ---- the plan -----------------------------------------------------------------------------------

class CudnnSdpaPlan final : public Plan {
 public:
  // `quantized`: the recipe whose passes bring fp16/bf16 inputs to the FP8 graph (its steps 1
  // and 2, and its e4m3 output); none when cuDNN reads the inputs as given.
  CudnnSdpaPlan(std::string kernel_name, const Problem& problem, CudnnVariant variant,
                std::optional<Fp8Recipe> quantized, bool deterministic_backward,
                const PlanContext& context)
      : kernel_name_(std::move(kernel_name)),
        problem_(problem),
        variant_(variant),
        deterministic_backward_(deterministic_backward),
        quantized_(std::move(quantized)),
        graph_problem_(graph_problem(problem, quantized_.has_value())),
        stream_(static_cast<cudaStream_t>(context.stream)),
        device_(context.device) {}

  Status build(ScratchAllocator& allocator) {
    int sm = 0;
    if (Status status = gpu::sm_version(device_, sm); !status) return status;
    if (std::string reason = cudnn_limits_reason(problem_, variant_, sm); !reason.empty()) {
      return Status::Error(reason);
    }
    if (quantized_) {  // the passes are sm_90a code, as the flash3 kernels they come from
      if (Status status = flash3::check_hopper_device(device_, 0, kernel_name_); !status) {
        return status;
      }
    }
    map_mask(problem_, variant_, mapping_);  // accepted by cudnn_limits_reason just above
    empty_batches_ = batches_without_keys(problem_);
    if (Status status = cudnn_handle_for(device_, handle_); !status) return status;

    graph_ = describe_graph(graph_problem_, mapping_, variant_, sm);
    Status status = build_graph(*graph_, "", allocator, workspace_, engine_);
    if (!status) return status;
    if (problem_.has_backward()) {
      backward_graph_ = describe_backward_graph(problem_, mapping_, deterministic_backward_, sm);
      status = build_graph(*backward_graph_, "backward: ", allocator, backward_workspace_,
                           backward_engine_);
      if (!status) return status;
      if (mapping_.skipped_rows > 0) {
        const size_t rows = static_cast<size_t>(problem_.batch * problem_.heads_q *
                                                (problem_.seqlen_q - mapping_.skipped_rows));
        status = gpu::allocate_scratch(allocator, rows * sizeof(float),
                                       "Stats of the rows cuDNN sees, packed", packed_stats_);
        if (!status) return status;
      }
    }
    if (mapping_.padding) {
      status = upload_query_lengths(allocator);
      if (!status) return status;
    }
    if (variant_ == CudnnVariant::fp8) {
      status = gpu::allocate_scratch(allocator, kFp8Scalars * sizeof(float), "FP8 scale factors",
                                     fp8_scalars_);
      if (!status) return status;
      fp8_host_.fill(std::nanf(""));  // nothing uploaded yet: the first run uploads all
      fp8_host_[kDescaleSSlot] = 1.0f / kProbabilityScale;
      fp8_host_[kScaleSSlot] = kProbabilityScale;
    }
    if (quantized_) return allocate_quantize_scratch(allocator);
    return Status::Ok();
  }

  Status run(const AttentionParams& params) override {
    try {
      return run_forward(params);
    } catch (const std::exception& error) {
      return Status::Error(kernel_name_ + ": " + error.what());
    }
  }

  Status run_backward(const AttentionParams& params) override {
    if (!backward_graph_) return Plan::run_backward(params);
    try {
      return run_backward_graph(params);
    } catch (const std::exception& error) {
      return Status::Error(kernel_name_ + ": backward: " + error.what());
    }
  }

  std::string details() const override {
    nlohmann::json details = {{"engine", engine_}};
    if (backward_graph_) {
      details["backward_engine"] = backward_engine_;
      details["deterministic_backward"] = deterministic_backward_;
    }
    if (mapping_.skipped_rows > 0) details["rows_written_as_empty"] = mapping_.skipped_rows;
    if (variant_ == CudnnVariant::fp8) {
      std::array<float, 2> amax = {std::nanf(""), std::nanf("")};
      const bool copied =
          cudaMemcpyAsync(amax.data(), fp8_scalars_.as<float>() + kAmaxSSlot, sizeof amax,
                          cudaMemcpyDeviceToHost, stream_) == cudaSuccess &&
          cudaStreamSynchronize(stream_) == cudaSuccess;
      details["scale_s"] = json_number(kProbabilityScale);
      details["amax_s"] = copied ? json_number(amax[0]) : nlohmann::json(nullptr);
      details["amax_o"] = copied ? json_number(amax[1]) : nlohmann::json(nullptr);
    }
    // The engine's name is cuDNN's: any byte that is not UTF-8 is replaced, never thrown.
    return details.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

 private:
  // Validates, lowers and plans `graph` (cuDNN's heuristics, modes A then fallback; the first
  // engine), and takes its workspace from the harness's allocator. `stage` prefixes messages.
  Status build_graph(fe::graph::Graph& graph, const std::string& stage, ScratchAllocator& allocator,
                     ScratchBuffer& workspace, std::string& engine) {
    const auto failure = [&](const char* step, fe::error_t error) {
      return frontend_failure(kernel_name_, (stage + step).c_str(), std::move(error));
    };
    if (auto error = graph.validate(); error.is_bad()) return failure("validate", error);
    if (auto error = graph.build_operation_graph(handle_); error.is_bad()) {
      return failure("build_operation_graph", error);
    }
    if (auto error = graph.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
        error.is_bad()) {
      return failure("create_execution_plans", error);
    }
    if (auto error = graph.check_support(); error.is_bad()) return failure("check_support", error);
    if (auto error = graph.build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE); error.is_bad()) {
      return failure("build_plans", error);
    }
    if (auto error = graph.get_plan_name(engine); error.is_bad()) engine.clear();
    int64_t workspace_bytes = 0;
    if (auto error = graph.get_workspace_size(workspace_bytes); error.is_bad()) {
      return failure("get_workspace_size", error);
    }
    return gpu::allocate_scratch(allocator, static_cast<size_t>(workspace_bytes),
                                 (stage + "cuDNN workspace").c_str(), workspace);
  }

  // The rows cuDNN's backward is not given get zero gradients: dQ above a bottom-right band, and
  // dQ, dK, dV of the batches whose padding leaves no key (cuDNN skips them).
  Status zero_unseen_gradients(const AttentionParams& params) {
    const size_t element = dtype_size(params.grad_dtype);
    if (mapping_.skipped_rows > 0) {
      ATTNBENCH_CUDA_TRY(cudaMemset2DAsync(
          params.dq, static_cast<size_t>(params.dq_batch_stride) * element, 0,
          static_cast<size_t>(mapping_.skipped_rows * params.dq_row_stride) * element,
          static_cast<size_t>(params.batch), stream_));
    }
    if (empty_batches_ > 0) {
      const std::array<std::pair<void*, int64_t>, 3> gradients = {{
          {params.dq, params.dq_batch_stride},
          {params.dk, params.dk_batch_stride},
          {params.dv, params.dv_batch_stride},
      }};
      for (const auto& [gradient, batch_stride] : gradients) {
        ATTNBENCH_CUDA_TRY(cudaMemsetAsync(
            gradient, 0, static_cast<size_t>(empty_batches_ * batch_stride) * element, stream_));
      }
    }
    return Status::Ok();
  }

  Status run_backward_graph(const AttentionParams& params) {
    if (Status status = gpu::check_params_match(problem_, params); !status) return status;
    if (params.lse == nullptr || params.dout == nullptr || params.dq == nullptr) {
      return Status::Error(kernel_name_ + ": the backward needs the forward's LSE, dO and dQ/dK/dV");
    }
    const ProblemLayout layout = describe_layout(problem_);
    const auto skipped = static_cast<size_t>(mapping_.skipped_rows);
    const size_t input_bytes = dtype_size(problem_.input_dtype);
    const size_t output_bytes = dtype_size(problem_.output_dtype);
    const size_t grad_bytes = dtype_size(problem_.grad_dtype());
    // The variant pack's type is void*: cuDNN only reads Q, K, V, O, dO, Stats and the lengths.
    const auto rows_in = [skipped](const void* base, int64_t row_stride, size_t bytes) {
      return static_cast<unsigned char*>(const_cast<void*>(base)) +
             skipped * static_cast<size_t>(row_stride) * bytes;
    };
    std::unordered_map<int64_t, void*> pack = {
        {kQ, rows_in(params.q, layout.q.strides.seq, input_bytes)},
        {kK, const_cast<void*>(params.k)},
        {kV, const_cast<void*>(params.v)},
        {kO, rows_in(params.out, layout.out.strides.seq, output_bytes)},
        {kDO, rows_in(params.dout, layout.out.strides.seq, grad_bytes)},
        {kStats, params.lse},
        {kDQ, rows_in(params.dq, layout.dq.strides.seq, grad_bytes)},
        {kDK, params.dk},
        {kDV, params.dv},
    };
    if (mapping_.padding) {
      pack[kSeqLenQ] = query_lengths_.data();
      pack[kSeqLenKv] = const_cast<int*>(params.key_lengths);
    }
    if (skipped > 0) {  // the seen rows' LSE, packed (see describe_backward_graph)
      const size_t rows = static_cast<size_t>(problem_.seqlen_q) - skipped;
      ATTNBENCH_CUDA_TRY(cudaMemcpy2DAsync(
          packed_stats_.data(), rows * sizeof(float), params.lse + skipped,
          static_cast<size_t>(problem_.seqlen_q) * sizeof(float), rows * sizeof(float),
          static_cast<size_t>(problem_.batch * problem_.heads_q), cudaMemcpyDeviceToDevice,
          stream_));
      pack[kStats] = packed_stats_.data();
    }
    if (Status status = zero_unseen_gradients(params); !status) return status;
    if (Status status = cudnn_status(cudnnSetStream(handle_, stream_), "cudnnSetStream"); !status) {
      return status;
    }
    if (auto error = backward_graph_->execute(handle_, pack, backward_workspace_.data());
        error.is_bad()) {
      return Status::Error(kernel_name_ + ": backward execute: " + error.get_message());
    }
    return Status::Ok();
  }

  Status run_forward(const AttentionParams& params) {
    if (Status status = gpu::check_params_match(problem_, params); !status) return status;
    if (params.lse == nullptr) {
      return Status::Error(kernel_name_ + " writes cuDNN's stats into the LSE buffer; none given");
    }
    if (variant_ == CudnnVariant::fp8) {
      if (Status status = update_fp8_scalars(params); !status) return status;
    }
    const bool copies = quantized_.has_value();
    if (copies) {
      if (Status status = launch_quantize(params); !status) return status;
    }
    // What cuDNN reads and writes: the params' buffers, or the quantize pass's e4m3 copies and
    // the e4m3 output the dequantize pass reads.
    const ProblemLayout layout = describe_layout(graph_problem_);
    const size_t input_bytes = dtype_size(graph_problem_.input_dtype);
    const size_t output_bytes = dtype_size(graph_problem_.output_dtype);
    const auto skipped = static_cast<size_t>(mapping_.skipped_rows);
    // cuDNN only reads Q, K, V, the lengths and the scalars; the variant pack's type is void*.
    auto* q = static_cast<unsigned char*>(copies ? q_.data() : const_cast<void*>(params.q)) +
              skipped * static_cast<size_t>(layout.q.strides.seq) * input_bytes;
    auto* out = static_cast<unsigned char*>(copies ? o_.data() : params.out) +
                skipped * static_cast<size_t>(layout.out.strides.seq) * output_bytes;
    void* k = copies ? k_.data() : const_cast<void*>(params.k);
    void* v = copies ? v_.data() : const_cast<void*>(params.v);
    std::unordered_map<int64_t, void*> pack = {
        {kQ, q}, {kK, k}, {kV, v}, {kO, out}, {kStats, params.lse + skipped},
    };
    if (mapping_.padding) {
      pack[kSeqLenQ] = query_lengths_.data();
      pack[kSeqLenKv] = const_cast<int*>(params.key_lengths);
    }
    if (variant_ == CudnnVariant::fp8) {
      float* scalars = fp8_scalars_.as<float>();
      const std::array<std::pair<int64_t, int>, kFp8Scalars> slots = {{
          {kDescaleQ, kDescaleQSlot},
          {kDescaleK, kDescaleKSlot},
          {kDescaleV, kDescaleVSlot},
          {kDescaleS, kDescaleSSlot},
          {kScaleS, kScaleSSlot},
          {kScaleO, kScaleOSlot},
          {kAmaxS, kAmaxSSlot},
          {kAmaxO, kAmaxOSlot},
      }};
      for (const auto& [uid, slot] : slots) pack[uid] = scalars + slot;
      if (copies) {  // the quantize pass's descales and output scale, on the device
        float* descales = descales_.as<float>();
        pack[kDescaleQ] = descales + flash3::kTensorQ;
        pack[kDescaleK] = descales + flash3::kTensorK;
        pack[kDescaleV] = descales + flash3::kTensorV;
        pack[kScaleO] = output_scale_.as<float>();
      }
    }
    if (Status status = cudnn_status(cudnnSetStream(handle_, stream_), "cudnnSetStream"); !status) {
      return status;
    }
    if (auto error = graph_->execute(handle_, pack, workspace_.data()); error.is_bad()) {
      return Status::Error(kernel_name_ + ": execute: " + error.get_message());
    }
    if (copies) {
      if (Status status = launch_dequantize(params); !status) return status;
    }
    return write_empty_rows(params);
  }

  // ---- cudnn.sdpa_fp8_quantized: the passes around cuDNN's forward ----

  Status allocate_quantize_scratch(ScratchAllocator& allocator) {
    const Problem& p = problem_;
    const size_t q_bytes = static_cast<size_t>(p.batch * p.seqlen_q * p.heads_q * p.head_dim_qk);
    const size_t k_bytes = static_cast<size_t>(p.batch * p.seqlen_k * p.heads_kv * p.head_dim_qk);
    const size_t v_bytes = static_cast<size_t>(p.batch * p.seqlen_k * p.heads_kv * p.head_dim_v);
    const size_t o_bytes = static_cast<size_t>(p.batch * p.seqlen_q * p.heads_q * p.head_dim_v);
    const std::array<std::tuple<size_t, const char*, ScratchBuffer*>, 7> requests = {{
        {q_bytes, "Q in e4m3 (b*sq*hq*d)", &q_},
        {k_bytes, "K in e4m3 (b*sk*hkv*d)", &k_},
        {v_bytes, "V in e4m3 (b*sk*hkv*d)", &v_},
        {o_bytes, "cuDNN's e4m3 output (b*sq*hq*d)", &o_},
        {3 * flash3::kAmaxBlocks * sizeof(float), "amax partials of Q, K, V", &amax_partials_},
        {3 * sizeof(float), "descales of Q, K, V", &descales_},
        {sizeof(float), "output scale", &output_scale_},
    }};
    for (const auto& [bytes, what, buffer] : requests) {
      if (Status status = gpu::allocate_scratch(allocator, bytes, what, *buffer); !status) {
        return status;
      }
    }
    pass_args_.q = q_.as<uint8_t>();
    pass_args_.k = k_.as<uint8_t>();
    pass_args_.v = v_.as<uint8_t>();
    pass_args_.amax_partials = amax_partials_.as<float>();
    pass_args_.descales = descales_.as<float>();
    pass_args_.output_scale = output_scale_.as<float>();
    if (quantized_->incoherent) {
      flash3::set_incoherent_rotation(pass_args_, quantized_->sign_seed, problem_.head_dim_qk);
    }
    return Status::Ok();
  }

  Status launch_quantize(const AttentionParams& params) {
    if (params.input_dtype == DType::f16) {
      return flash3::launch_fp8_quantize<128, DType::f16>(params, pass_args_, stream_);
    }
    return flash3::launch_fp8_quantize<128, DType::bf16>(params, pass_args_, stream_);
  }

  Status launch_dequantize(const AttentionParams& params) {
    const auto* stored = static_cast<const uint8_t*>(o_.data());
    const float* scale = output_scale_.as<float>();
    if (params.output_dtype == DType::f16) {
      return flash3::launch_fp8_dequantize_output<128, DType::f16>(params, stored, scale, stream_);
    }
    return flash3::launch_fp8_dequantize_output<128, DType::bf16>(params, stored, scale, stream_);
  }

  // seq_len_q for the padding mask: every query row counts (padding masks keys only).
  Status upload_query_lengths(ScratchAllocator& allocator) {
    const std::vector<int> lengths(static_cast<size_t>(problem_.batch),
                                   static_cast<int>(problem_.seqlen_q));
    Status status = gpu::allocate_scratch(allocator, lengths.size() * sizeof(int),
                                          "padding mask query lengths", query_lengths_);
    if (!status) return status;
    ATTNBENCH_CUDA_TRY(cudaMemcpyAsync(query_lengths_.data(), lengths.data(),
                                       lengths.size() * sizeof(int), cudaMemcpyHostToDevice,
                                       stream_));
    ATTNBENCH_CUDA_TRY(cudaStreamSynchronize(stream_));
    return Status::Ok();
  }

  // The descales and out_scale come with each run's params; they change only with new inputs,
  // so they are uploaded then (the first run of a plan), never inside a timed or captured forward
  // that repeats the same inputs.
  Status update_fp8_scalars(const AttentionParams& params) {
    const std::array<std::pair<int, float>, 4> wanted = {{
        {kDescaleQSlot, params.q_descale},
        {kDescaleKSlot, params.k_descale},
        {kDescaleVSlot, params.v_descale},
        {kScaleOSlot, params.out_scale},
    }};
    bool changed = false;
    for (const auto& [slot, value] : wanted) {
      if (fp8_host_[static_cast<size_t>(slot)] != value) {
        fp8_host_[static_cast<size_t>(slot)] = value;
        changed = true;
      }
    }
    if (!changed) return Status::Ok();
    // Up to the amax outputs, which cuDNN writes.
    ATTNBENCH_CUDA_TRY(cudaMemcpyAsync(fp8_scalars_.data(), fp8_host_.data(),
                                       kAmaxSSlot * sizeof(float), cudaMemcpyHostToDevice,
                                       stream_));
    ATTNBENCH_CUDA_TRY(cudaStreamSynchronize(stream_));
    return Status::Ok();
  }

  Status write_empty_rows(const AttentionParams& params) {
    gpu::OutputView output;
    output.out = params.out;
    output.element_bytes = dtype_size(params.output_dtype);
    output.batch_stride = params.out_batch_stride;
    output.row_stride = params.out_row_stride;
    output.head_stride = params.out_head_stride;
    output.heads_q = params.heads_q;
    output.seqlen_q = params.seqlen_q;
    output.head_dim_v = params.head_dim_v;
    output.lse = params.lse;
    const gpu::EmptyRows above_band{0, params.batch, 0, mapping_.skipped_rows};
    if (Status status = gpu::fill_empty_rows(above_band, output, stream_); !status) return status;
    const gpu::EmptyRows keyless_batches{0, empty_batches_, 0, params.seqlen_q};
    return gpu::fill_empty_rows(keyless_batches, output, stream_);
  }

  std::string kernel_name_;
  Problem problem_;
  CudnnVariant variant_;
  bool deterministic_backward_;  // cuDNN's deterministic backward algorithm
  std::optional<Fp8Recipe> quantized_;
  Problem graph_problem_;  // what cuDNN's graph is built for (graph_problem)
  cudaStream_t stream_;
  int device_;
  CudnnMaskMapping mapping_;
  int64_t empty_batches_ = 0;
  cudnnHandle_t handle_ = nullptr;
  std::shared_ptr<fe::graph::Graph> graph_;
  std::string engine_;
  ScratchBuffer workspace_;
  std::shared_ptr<fe::graph::Graph> backward_graph_;  // problems with a backward only
  std::string backward_engine_;
  ScratchBuffer backward_workspace_;
  ScratchBuffer packed_stats_;  // rows above a bottom-right band skipped: their LSE packed
  ScratchBuffer query_lengths_;                // (batch,) int32, all seqlen_q: padding mask only
  ScratchBuffer fp8_scalars_;                  // (kFp8Scalars,) fp32: FP8 only
  std::array<float, kFp8Scalars> fp8_host_{};  // what fp8_scalars_ holds (amax slots unused)
  // The quantize pass's copies and scales, and cuDNN's e4m3 output: quantized plans only.
  ScratchBuffer q_, k_, v_, o_, amax_partials_, descales_, output_scale_;
  flash3::Fp8PassArgs pass_args_;
};

// `quantized`: cudnn.sdpa_fp8's 16-bit series, the recipe of their passes (per-tensor scales,
// incoherent or not, e4m3 output at V's scale); its tiles and key order are cuDNN's own.
// `backward`: the passes with cuDNN's backward graph (fp16/bf16 only), its deterministic algorithm
// or not; none: forward only.
enum class CudnnBackward : uint8_t { none, atomic, deterministic };

Kernel cudnn_kernel(std::string name, std::string summary, CudnnVariant variant,
                    std::optional<Fp8Recipe> quantized = std::nullopt,
                    CudnnBackward backward = CudnnBackward::none) {
  const bool fp8 = variant == CudnnVariant::fp8;
  Kernel kernel;
  kernel.name = std::move(name);
  kernel.summary = std::move(summary);
  kernel.backend = Backend::cuda;
  // Not bit-for-bit repeatable: on an H200 (2026-12-04) the decode engine cuDNN picks at seqlen_q 1
  // (two launches: split keys, then a combine) gave other bits on a second run of the same inputs
  // (b=4,hq=16,hkv=1,sq=1,sk=4096,d=128,bf16), once in two runs. Its results are judged by the
  // bound alone.
  kernel.deterministic = fp8;
  kernel.returns_lse = true;
  kernel.support = quantized ? cudnn_sdpa_fp8_quantized_support_table(quantized->incoherent)
                   : fp8     ? cudnn_sdpa_fp8_support_table()
                             : cudnn_sdpa_support_table();
  const bool deterministic_backward = backward == CudnnBackward::deterministic;
  if (backward == CudnnBackward::atomic) {
    kernel.support.passes = {Pass::fwd, Pass::bwd, Pass::fwd_bwd};
    kernel.backward_deterministic = false;  // dQ accumulated with atomics across key blocks
  } else if (deterministic_backward) {
    // Its forward is cudnn.sdpa's: only the passes with the deterministic backward.
    kernel.support.passes = {Pass::bwd, Pass::fwd_bwd};
    kernel.backward_deterministic = true;
  }
  if (quantized) {
    // The checker's envelope is built around it (checker.h).
    kernel.fp8_envelope_base = quantized;
    kernel.correctness_suite = "hopper-fp8";  // its 16-bit shapes at d 128, the in-house peers'
  }
  kernel.make_plan = [variant, quantized, deterministic_backward, name = kernel.name](
                         const Problem& problem,
                         const PlanContext& context) -> Result<std::unique_ptr<Plan>> {
    try {
      auto plan = std::make_unique<CudnnSdpaPlan>(name, problem, variant, quantized,
                                                  deterministic_backward, context);
      if (Status status = plan->build(context.scratch); !status) return status;
      return plan;
    } catch (const std::exception& error) {
      return Status::Error(name + ": " + error.what());
    }
  };
  return kernel;
}

}  // namespace

Kernel cudnn_sdpa_kernel() {
  return cudnn_kernel("cudnn.sdpa",
                      "cuDNN fused attention (FlashAttention-2 style engines), fp16/bf16; its "
                      "backward graph",
                      CudnnVariant::fp16_bf16, std::nullopt, CudnnBackward::atomic);
}
Kernel cudnn_sdpa_deterministic_kernel() {
  return cudnn_kernel("cudnn.sdpa_deterministic",
                      "cudnn.sdpa's backward with cuDNN's deterministic algorithm (bwd and "
                      "fwd_bwd only: its forward is cudnn.sdpa's)",
                      CudnnVariant::fp16_bf16, std::nullopt, CudnnBackward::deterministic);
}
Kernel cudnn_sdpa_fp8_kernel() {
  return cudnn_kernel("cudnn.sdpa_fp8",
                      "cuDNN fused attention, e4m3 in and out with per-tensor scales (Hopper)",
                      CudnnVariant::fp8);
}
namespace {

// The recipe of the passes around cuDNN's FP8 graph on fp16/bf16 inputs.
Fp8Recipe quantized_recipe(bool incoherent) {
  Fp8Recipe recipe;
  recipe.incoherent = incoherent;
  recipe.e4m3_output = true;
  return recipe;
}

}  // namespace

Kernel cudnn_sdpa_fp8_quantized_kernel() {
  return cudnn_kernel("cudnn.sdpa_fp8_quantized",
                      "cudnn.sdpa_fp8 on fp16/bf16 Q, K, V: attnbench's passes quantize them to "
                      "e4m3 (per-tensor scales) and dequantize cuDNN's e4m3 output, all timed",
                      CudnnVariant::fp8, quantized_recipe(/*incoherent=*/false));
}
Kernel cudnn_sdpa_fp8_incoherent_kernel() {
  return cudnn_kernel("cudnn.sdpa_fp8_incoherent",
                      "cudnn.sdpa_fp8_quantized with incoherent processing: Q and K rotated by "
                      "(1/sqrt(d)) H diag(s) before quantization, as cuda.flash3_fp8_incoherent",
                      CudnnVariant::fp8, quantized_recipe(/*incoherent=*/true));
}

std::string validate_graph_on_host(const Problem& problem, CudnnVariant variant, int sm_version,
                                   bool quantized) {
  if (std::string reason = cudnn_limits_reason(problem, variant, sm_version); !reason.empty()) {
    return reason;
  }
  try {
    CudnnMaskMapping mapping;
    map_mask(problem, variant, mapping);
    auto graph = describe_graph(graph_problem(problem, quantized), mapping, variant, sm_version);
    if (auto error = graph->validate(); error.is_bad()) {
      return "cudnn: validate: " + error.get_message();
    }
    if (problem.has_backward() && variant == CudnnVariant::fp16_bf16) {
      for (const bool deterministic : {false, true}) {
        auto backward = describe_backward_graph(problem, mapping, deterministic, sm_version);
        if (auto error = backward->validate(); error.is_bad()) {
          return "cudnn: backward: validate: " + error.get_message();
        }
      }
    }
    return {};
  } catch (const std::exception& error) {
    return std::string("cudnn: validate: ") + error.what();
  }
}

}  // namespace attnbench
