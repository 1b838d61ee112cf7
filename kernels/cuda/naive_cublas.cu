// cuda.naive_cublas — attention as eager framework code computes it on a GPU.
//
// What it computes, for every (batch, query head) pair, with the scores in global memory:
//   1. S = scale * Q K^T  one cuBLAS batched GEMM over all pairs: fp16/bf16 in, fp32 out
//                         (CUDA_R_32F), fp32 compute — the scores PyTorch's math path would
//                         upcast before its softmax
//   2. P = softmax(S)     one block per query row: the mask (reference/mask.h, the same
//                         visible_keys the reference uses), max, exp, sum; P written in the input
//                         dtype, as `softmax(S.float()).to(q.dtype)` does; LSE from the same pass
//   3. O = P V            one cuBLAS batched GEMM, fp32 compute, O in the output dtype
// Three launches per forward, plus one tiny kernel that rebuilds the pointer arrays whenever the
// harness hands over different buffers (in practice once per plan, never in a timed forward).
// cublasGemmBatchedEx takes one pointer per matrix, so any layout's strides and GQA's head sharing
// (query head h reads kv head h / heads_per_kv) cost nothing: no copies, no repeat_interleave.
// Against the previous version: the first GPU kernel; the baseline the fused kernels beat.
// Scratch: S is batch * heads_q * seqlen_q * seqlen_k fp32 and P as many elements in the input
// dtype — it grows with the square of the sequence length, which is what FlashAttention removes.
// Limits: fp16/bf16 in, the same dtype out; head dims up to 256 (any value: cuBLAS needs no
// alignment); every mask (masked scores are computed, then dropped, as eager code does); bshd,
// bhsd and packed QKV; GQA/MQA; sm_80 and newer. A row with no visible key gives 0 and LSE -inf.
#include <cublas_v2.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "kernels/cuda/common/convert.cuh"
#include "kernels/cuda/common/cublas_check.h"
#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/common/plan_helpers.h"
#include "kernels/cuda/common/row_stats.cuh"
#include "kernels/cuda/common/shared.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "reference/mask.h"

namespace attnbench {
namespace {

// The softmax's pieces every in-house kernel shares (kernels/cuda/common/).
using gpu::add_score;
using gpu::block_row_stats;
using gpu::from_float;
using gpu::inverse_row_sum;
using gpu::kNegInf;
using gpu::kWarpSize;
using gpu::row_lse;
using gpu::RowStats;

// ---- traits -------------------------------------------------------------------------------------

// One block per query row. 8 warps keep a 16k-key row at 64 scores per thread, enough loads in
// flight per SM to stream S at memory speed, and the block reduction one shuffle tree plus 8
// shared-memory values.
constexpr int kSoftmaxThreads = 256;
constexpr int kSoftmaxWarps = kSoftmaxThreads / kWarpSize;
static_assert(kSoftmaxThreads % kWarpSize == 0, "the softmax reduction works in whole warps");
constexpr int kPointerThreads = 256;  // one thread per (batch, head) pair; any size works

// Matrices per (batch, head) pair that cuBLAS reads through pointer arrays: K, Q, S for the first
// GEMM, V, P, O for the second.
constexpr int kPointerArrays = 6;

// cuBLAS's recommended cublasSetWorkspace sizes (cuBLAS docs, "cublasSetWorkspace"): 32 MiB on
// Hopper, 4 MiB before it. From the harness's allocator, so it counts as this kernel's memory.
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kCublasWorkspaceHopper = 32 * kMiB;
constexpr size_t kCublasWorkspaceAmpere = 4 * kMiB;
constexpr int kHopperSm = 90;
constexpr int kMinimumSm = 80;  // bf16 tensor cores
constexpr int64_t kMaxHeadDim = 256;


// ---- kernels ------------------------------------------------------------------------------------

struct SoftmaxParams {
  const float* __restrict__ scores;     // (batch, heads_q, seqlen_q, seqlen_k) fp32, scaled
  void* __restrict__ probabilities;     // (batch, heads_q, seqlen_q, seqlen_k) input dtype
  float* __restrict__ lse;              // (batch, heads_q, seqlen_q) natural log, or null
  const int* __restrict__ key_lengths;  // (batch,) valid keys for the padding mask, else null
  int heads_q, seqlen_q, seqlen_k;
  MaskKind mask;
  int window_left, window_right;
};

// One block per query row r = (b * heads_q + h) * seqlen_q + i; P = 0 outside the visible keys.
template <typename Element>
__global__ void __launch_bounds__(kSoftmaxThreads)
    masked_softmax_rows(const __grid_constant__ SoftmaxParams p) {
  const int64_t row = blockIdx.x;
  const int64_t query = row % p.seqlen_q;
  const int64_t b = row / (static_cast<int64_t>(p.seqlen_q) * p.heads_q);
  const int64_t key_length = p.key_lengths != nullptr ? p.key_lengths[b] : p.seqlen_k;
  const KeyRange keys = visible_keys(p.mask, p.window_left, p.window_right, query, p.seqlen_q,
                                     p.seqlen_k, key_length);
  const float* scores = p.scores + row * p.seqlen_k;  // (seqlen_k,)
  Element* probabilities = static_cast<Element*>(p.probabilities) + row * p.seqlen_k;  // same

  RowStats local{kNegInf, 0.0f};
  for (int64_t j = keys.begin + threadIdx.x; j < keys.end; j += blockDim.x) {
    local = add_score(local, scores[j]);
  }
  const RowStats stats = block_row_stats<kSoftmaxWarps>(local);
  const float inverse_sum = inverse_row_sum(stats.sum);
  for (int64_t j = threadIdx.x; j < p.seqlen_k; j += blockDim.x) {
    const bool visible = j >= keys.begin && j < keys.end;
    probabilities[j] =
        from_float<Element>(visible ? expf(scores[j] - stats.max) * inverse_sum : 0.0f);
  }
  if (p.lse != nullptr && threadIdx.x == 0) {
    p.lse[row] = row_lse(stats.max, stats.sum);
  }
}

struct PointerParams {
  const unsigned char* q;  // first element of each tensor, as bytes
  const unsigned char* k;
  const unsigned char* v;
  unsigned char* out;
  unsigned char* scores;         // (pairs, seqlen_q, seqlen_k) fp32, plan scratch
  unsigned char* probabilities;  // (pairs, seqlen_q, seqlen_k) input dtype, plan scratch
  // Strides in bytes between batches and heads of each tensor.
  int64_t q_batch, q_head, k_batch, k_head, v_batch, v_head, out_batch, out_head;
  int64_t score_matrix_bytes, probability_matrix_bytes;
  int heads_q, heads_per_kv, pairs;
  void** arrays;  // kPointerArrays arrays of `pairs` pointers: K, Q, S, V, P, O
};

__global__ void __launch_bounds__(kPointerThreads)
    build_matrix_pointers(const __grid_constant__ PointerParams p) {
  const int pair = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (pair >= p.pairs) return;
  const int64_t b = pair / p.heads_q;
  const int64_t h = pair % p.heads_q;
  const int64_t h_kv = h / p.heads_per_kv;
  void** k = p.arrays;
  void** q = k + p.pairs;
  void** s = q + p.pairs;
  void** v = s + p.pairs;
  void** probabilities = v + p.pairs;
  void** out = probabilities + p.pairs;
  k[pair] = const_cast<unsigned char*>(p.k + b * p.k_batch + h_kv * p.k_head);
  q[pair] = const_cast<unsigned char*>(p.q + b * p.q_batch + h * p.q_head);
  s[pair] = p.scores + pair * p.score_matrix_bytes;
  v[pair] = const_cast<unsigned char*>(p.v + b * p.v_batch + h_kv * p.v_head);
  probabilities[pair] = p.probabilities + pair * p.probability_matrix_bytes;
  out[pair] = p.out + b * p.out_batch + h * p.out_head;
}

// ---- launch -------------------------------------------------------------------------------------

cudaDataType_t cuda_data_type(DType dtype) {
  return dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
}

// One cuBLAS handle per device for the life of the worker process: creating one costs
// milliseconds and some device memory, and destroying it from a static destructor can run after
// the CUDA runtime has shut down — so they are deliberately never destroyed.
Status cublas_handle_for(int device, cublasHandle_t& handle) {
  static std::mutex mutex;
  static std::unordered_map<int, cublasHandle_t> handles;
  const std::lock_guard<std::mutex> lock(mutex);
  if (auto found = handles.find(device); found != handles.end()) {
    handle = found->second;
    return Status::Ok();
  }
  ATTNBENCH_CUDA_TRY(cudaSetDevice(device));
  ATTNBENCH_CUBLAS_TRY(cublasCreate(&handle));
  handles.emplace(device, handle);
  return Status::Ok();
}

bool fits_int(int64_t value) { return value <= std::numeric_limits<int>::max(); }

class NaiveCublasPlan final : public Plan {
 public:
  NaiveCublasPlan(const Problem& problem, const PlanContext& context)
      : problem_(problem),
        stream_(static_cast<cudaStream_t>(context.stream)),
        device_(context.device),
        pairs_(problem.batch * problem.heads_q) {}

  Status build(ScratchAllocator& allocator) {
    const Problem& p = problem_;
    const ProblemLayout layout = describe_layout(p);
    const int64_t rows = pairs_ * p.seqlen_q;
    const bool ints_fit = fits_int(rows) && fits_int(p.seqlen_k) &&
                          fits_int(layout.q.strides.seq) && fits_int(layout.k.strides.seq) &&
                          fits_int(layout.v.strides.seq) && fits_int(layout.out.strides.seq);
    if (!ints_fit) {
      return Status::Error("unsupported: cuda.naive_cublas: a size or stride exceeds cuBLAS's int");
    }
    int sm = 0;
    if (Status status = gpu::sm_version(device_, sm); !status) return status;
    if (sm < kMinimumSm) {
      return Status::Error("unsupported: cuda.naive_cublas needs sm_80 or newer; device is sm_" +
                           std::to_string(sm));
    }
    if (Status status = cublas_handle_for(device_, cublas_); !status) return status;

    const size_t matrix_elements =
        static_cast<size_t>(p.seqlen_q) * static_cast<size_t>(p.seqlen_k);
    const size_t all_matrices = static_cast<size_t>(pairs_) * matrix_elements;
    // One declaration per step: nvcc's front end reads `status = f()` as discarding the
    // [[nodiscard]] Status that operator= returns.
    if (Status status =
            gpu::allocate_scratch(allocator, all_matrices * sizeof(float),
                                  "cuda.naive_cublas scores (b*hq*sq*sk fp32)", scores_);
        !status) {
      return status;
    }
    if (Status status =
            gpu::allocate_scratch(allocator, all_matrices * dtype_size(p.input_dtype),
                                  "cuda.naive_cublas probabilities (b*hq*sq*sk)", probabilities_);
        !status) {
      return status;
    }
    if (Status status = gpu::allocate_scratch(allocator, kPointerArrays * pairs_ * sizeof(void*),
                                              "cuda.naive_cublas pointer arrays", pointers_);
        !status) {
      return status;
    }
    const size_t workspace = sm >= kHopperSm ? kCublasWorkspaceHopper : kCublasWorkspaceAmpere;
    return gpu::allocate_scratch(allocator, workspace, "cuBLAS workspace", workspace_);
  }

  Status run(const AttentionParams& params) override {
    if (Status status = gpu::check_params_match(problem_, params); !status) return status;
    if (Status status = update_pointer_arrays(params); !status) return status;
    const cudaDataType_t input_type = cuda_data_type(params.input_dtype);
    const cudaDataType_t output_type = cuda_data_type(params.output_dtype);
    void** arrays = pointers_.as<void*>();
    const void* const* k_matrices = arrays;
    const void* const* q_matrices = arrays + pairs_;
    void* const* score_matrices = arrays + 2 * pairs_;
    const void* const* v_matrices = arrays + 3 * pairs_;
    const void* const* probability_matrices = arrays + 4 * pairs_;
    void* const* out_matrices = arrays + 5 * pairs_;
    const int batch_count = static_cast<int>(pairs_);
    const int sq = params.seqlen_q;
    const int sk = params.seqlen_k;

    // cublasSetStream resets the workspace to cuBLAS's own pool, so the workspace comes second.
    ATTNBENCH_CUBLAS_TRY(cublasSetStream(cublas_, stream_));
    ATTNBENCH_CUBLAS_TRY(cublasSetWorkspace(cublas_, workspace_.data(), workspace_.bytes()));

    // Row-major S (sq x sk) = scale * Q K^T is column-major S^T (sk x sq) = K^T' Q', where a
    // row-major (rows x d) matrix with row stride ld reads as a column-major (d x rows) one.
    const float scale = params.scale;
    const float zero = 0.0f;
    ATTNBENCH_CUBLAS_TRY(cublasGemmBatchedEx(
        cublas_, CUBLAS_OP_T, CUBLAS_OP_N, sk, sq, params.head_dim_qk, &scale, k_matrices,
        input_type, static_cast<int>(params.k_row_stride), q_matrices, input_type,
        static_cast<int>(params.q_row_stride), &zero, score_matrices, CUDA_R_32F, sk, batch_count,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));

    SoftmaxParams softmax{};
    softmax.scores = scores_.as<const float>();
    softmax.probabilities = probabilities_.data();
    softmax.lse = params.lse;
    softmax.key_lengths = params.key_lengths;
    softmax.heads_q = params.heads_q;
    softmax.seqlen_q = sq;
    softmax.seqlen_k = sk;
    softmax.mask = params.mask;
    softmax.window_left = params.window_left;
    softmax.window_right = params.window_right;
    const unsigned rows = static_cast<unsigned>(pairs_ * sq);
    if (params.input_dtype == DType::bf16) {
      launch_kernel(masked_softmax_rows<__nv_bfloat16>, rows, kSoftmaxThreads, 0, stream_, softmax);
    } else {
      launch_kernel(masked_softmax_rows<__half>, rows, kSoftmaxThreads, 0, stream_, softmax);
    }
    ATTNBENCH_CUDA_TRY_LAUNCH();

    // Row-major O (sq x dv) = P V is column-major O^T (dv x sq) = V' P'.
    const float one = 1.0f;
    ATTNBENCH_CUBLAS_TRY(cublasGemmBatchedEx(
        cublas_, CUBLAS_OP_N, CUBLAS_OP_N, params.head_dim_v, sq, sk, &one, v_matrices, input_type,
        static_cast<int>(params.v_row_stride), probability_matrices, input_type, sk, &zero,
        out_matrices, output_type, static_cast<int>(params.out_row_stride), batch_count,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return Status::Ok();
  }

 private:
  // The pointer arrays depend only on the buffers' addresses: rebuilt on the device (so a
  // captured forward never needs a host copy) when those change, which in the harness happens
  // on the first forward of a plan.
  Status update_pointer_arrays(const AttentionParams& params) {
    if (params.q == built_for_q_ && params.k == built_for_k_ && params.v == built_for_v_ &&
        params.out == built_for_out_) {
      return Status::Ok();
    }
    const int64_t input_bytes = static_cast<int64_t>(dtype_size(params.input_dtype));
    const int64_t output_bytes = static_cast<int64_t>(dtype_size(params.output_dtype));
    const int64_t matrix_elements = static_cast<int64_t>(params.seqlen_q) * params.seqlen_k;
    PointerParams pointers{};
    pointers.q = static_cast<const unsigned char*>(params.q);
    pointers.k = static_cast<const unsigned char*>(params.k);
    pointers.v = static_cast<const unsigned char*>(params.v);
    pointers.out = static_cast<unsigned char*>(params.out);
    pointers.scores = scores_.as<unsigned char>();
    pointers.probabilities = probabilities_.as<unsigned char>();
    pointers.q_batch = params.q_batch_stride * input_bytes;
    pointers.q_head = params.q_head_stride * input_bytes;
    pointers.k_batch = params.k_batch_stride * input_bytes;
    pointers.k_head = params.k_head_stride * input_bytes;
    pointers.v_batch = params.v_batch_stride * input_bytes;
    pointers.v_head = params.v_head_stride * input_bytes;
    pointers.out_batch = params.out_batch_stride * output_bytes;
    pointers.out_head = params.out_head_stride * output_bytes;
    pointers.score_matrix_bytes = matrix_elements * static_cast<int64_t>(sizeof(float));
    pointers.probability_matrix_bytes = matrix_elements * input_bytes;
    pointers.heads_q = params.heads_q;
    pointers.heads_per_kv = params.heads_per_kv;
    pointers.pairs = static_cast<int>(pairs_);
    pointers.arrays = pointers_.as<void*>();
    const unsigned blocks = static_cast<unsigned>((pairs_ + kPointerThreads - 1) / kPointerThreads);
    launch_kernel(build_matrix_pointers, blocks, kPointerThreads, 0, stream_, pointers);
    ATTNBENCH_CUDA_TRY_LAUNCH();
    built_for_q_ = params.q;
    built_for_k_ = params.k;
    built_for_v_ = params.v;
    built_for_out_ = params.out;
    return Status::Ok();
  }

  Problem problem_;
  cudaStream_t stream_;
  int device_;
  int64_t pairs_;  // batch * heads_q: the GEMMs' batch count
  cublasHandle_t cublas_ = nullptr;
  ScratchBuffer scores_;         // (batch, heads_q, seqlen_q, seqlen_k) fp32
  ScratchBuffer probabilities_;  // (batch, heads_q, seqlen_q, seqlen_k) input dtype
  ScratchBuffer pointers_;       // kPointerArrays x pairs device pointers
  ScratchBuffer workspace_;      // cuBLAS workspace
  const void* built_for_q_ = nullptr;
  const void* built_for_k_ = nullptr;
  const void* built_for_v_ = nullptr;
  const void* built_for_out_ = nullptr;
};

SupportTable naive_cublas_support_table() {
  SupportTable table;
  table.input_dtypes = {DType::f16, DType::bf16};
  table.max_head_dim = kMaxHeadDim;
  table.separate_v_dim = true;
  table.masks = {MaskKind::none, MaskKind::causal, MaskKind::causal_br, MaskKind::window,
                 MaskKind::padding};
  table.layouts = {Layout::bshd, Layout::bhsd, Layout::qkv_packed};
  table.gqa = true;
  table.archs = {"sm_80", "sm_90"};
  table.notes = "scratch grows as batch x heads_q x seqlen_q x seqlen_k (fp32 scores + P)";
  return table;
}

}  // namespace

inline namespace ATTNBENCH_TARGET {

Kernel cuda_naive_cublas_kernel() {
  Kernel kernel;
  kernel.name = "cuda.naive_cublas";
  kernel.summary =
      "eager-framework attention: cuBLAS batched GEMMs, fp32 scores in memory, "
      "a softmax kernel between them";
  kernel.backend = Backend::cuda;
  kernel.deterministic = true;
  kernel.returns_lse = true;
  kernel.support = naive_cublas_support_table();
  kernel.make_plan = [](const Problem& problem,
                        const PlanContext& context) -> Result<std::unique_ptr<Plan>> {
    auto plan = std::make_unique<NaiveCublasPlan>(problem, context);
    if (Status status = plan->build(context.scratch); !status) return status;
    return plan;
  };
  return kernel;
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench
