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
//
// The backward (issue 37), as eager autograd of the same code computes it, every matrix
// materialized:
//   1-2. S and P recomputed as above (the forward's LSE is left as the forward wrote it)
//   3.   dP = dO V^T               cuBLAS batched GEMM, fp32 out, over S's scratch
//   4.   dS = P (dP - D)           one block per query row, D = dO . O in fp32; dS in the input
//                                  dtype, the operand type of the GEMMs that read it
//   5-7. dQ = scale dS K, dK = scale dS^T Q, dV = P^T dO   three cuBLAS batched GEMMs
//   8.   with GQA, one kernel sums each group's per-head dK and dV (written per query head in
//        the gradient dtype, as autograd of repeat_interleave'd K and V does) in fp32
// Seven launches (eight with GQA). Scratch adds dS (b*hq*sq*sk in the input dtype) and, with
// GQA, the per-head dK and dV; cuBLAS sums in a fixed order: deterministic.
#include <cublas_v2.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

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
using gpu::block_sum;
using gpu::from_float;
using gpu::inverse_row_sum;
using gpu::kNegInf;
using gpu::kWarpSize;
using gpu::row_lse;
using gpu::RowStats;
using gpu::to_float;

// ---- traits -------------------------------------------------------------------------------------

// One block per query row. 8 warps keep a 16k-key row at 64 scores per thread, enough loads in
// flight per SM to stream S at memory speed, and the block reduction one shuffle tree plus 8
// shared-memory values.
constexpr int kSoftmaxThreads = 256;
constexpr int kSoftmaxWarps = kSoftmaxThreads / kWarpSize;
static_assert(kSoftmaxThreads % kWarpSize == 0, "the softmax reduction works in whole warps");
constexpr int kPointerThreads = 256;  // one thread per (batch, head) pair; any size works

// Matrices per (batch, head) pair that cuBLAS reads through pointer arrays, each an array of
// `pairs` pointers, in this order: K, Q, S for the first GEMM, V, P, O for the second; the
// backward's dO, dS, dQ and where dK and dV go (the gradient itself, or with GQA the per-head
// copy its group sum reads). The device fills them (build_matrix_pointers), the host hands them
// to cuBLAS (matrix_arrays): both index them by this one order.
enum PointerArray : int {
  kKArray, kQArray, kScoresArray, kVArray, kProbabilitiesArray, kOutArray,
  kForwardPointerArrays,  // a forward's plan has these
  kDoutArray = kForwardPointerArrays, kDsArray, kDqArray, kDkArray, kDvArray,
  kAllPointerArrays,  // a backward's plan has these
};
constexpr int kGroupSumThreads = 256;

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
  void** arrays;  // kForwardPointerArrays or kAllPointerArrays arrays (PointerArray's order)
  // The backward's (null in a forward's plan): dO, dQ, and dK/dV as the GEMMs write them.
  const unsigned char* dout;
  unsigned char* dq;
  unsigned char* dk_target;
  unsigned char* dv_target;
  unsigned char* ds;  // (pairs, seqlen_q, seqlen_k) input dtype, plan scratch
  int64_t dout_batch, dout_head, dq_batch, dq_head;
  // A target's strides: the gradient's own (batch, kv head) or a per-pair copy's (0, pair bytes).
  int64_t dk_batch, dk_head, dv_batch, dv_head;
  bool dkv_per_pair;  // GQA: dK and dV written per query head, summed by the group kernel
  bool backward;      // the backward's arrays too (a backward's plan)
};

__global__ void __launch_bounds__(kPointerThreads)
    build_matrix_pointers(const __grid_constant__ PointerParams p) {
  const int pair = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (pair >= p.pairs) return;
  const int64_t b = pair / p.heads_q;
  const int64_t h = pair % p.heads_q;
  const int64_t h_kv = h / p.heads_per_kv;
  const auto entry = [&](PointerArray array) -> void*& {
    return p.arrays[static_cast<int64_t>(array) * p.pairs + pair];
  };
  entry(kKArray) = const_cast<unsigned char*>(p.k + b * p.k_batch + h_kv * p.k_head);
  entry(kQArray) = const_cast<unsigned char*>(p.q + b * p.q_batch + h * p.q_head);
  entry(kScoresArray) = p.scores + pair * p.score_matrix_bytes;
  entry(kVArray) = const_cast<unsigned char*>(p.v + b * p.v_batch + h_kv * p.v_head);
  entry(kProbabilitiesArray) = p.probabilities + pair * p.probability_matrix_bytes;
  entry(kOutArray) = p.out + b * p.out_batch + h * p.out_head;
  if (!p.backward) return;
  entry(kDoutArray) = const_cast<unsigned char*>(p.dout + b * p.dout_batch + h * p.dout_head);
  entry(kDsArray) = p.ds + pair * p.probability_matrix_bytes;
  entry(kDqArray) = p.dq + b * p.dq_batch + h * p.dq_head;
  const int64_t target_head = p.dkv_per_pair ? h : h_kv;
  entry(kDkArray) = p.dk_target + b * p.dk_batch + target_head * p.dk_head;
  entry(kDvArray) = p.dv_target + b * p.dv_batch + target_head * p.dv_head;
}

struct SoftmaxBackwardParams {
  const void* __restrict__ probabilities;  // P: (batch, heads_q, seqlen_q, seqlen_k) input dtype
  const float* __restrict__ dp;            // dP = dO V^T, same shape, fp32
  void* __restrict__ ds;                   // dS out, same shape, input dtype
  const void* __restrict__ out;            // the forward's O and the upstream dO (bshd strides)
  const void* __restrict__ dout;
  int64_t out_batch, out_row, out_head, dout_batch, dout_row, dout_head;  // elements
  int heads_q, seqlen_q, seqlen_k, head_dim_v;
};

// One block per query row r = (b * heads_q + h) * seqlen_q + i: D = dO . O in fp32, then
// dS = P (dP - D) over the whole row (P is 0 at a masked key, so is dS).
template <typename Element>
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_backward_rows(const __grid_constant__ SoftmaxBackwardParams p) {
  const int64_t row = blockIdx.x;
  const int64_t query = row % p.seqlen_q;
  const int64_t pair = row / p.seqlen_q;
  const int64_t b = pair / p.heads_q;
  const int64_t h = pair % p.heads_q;
  const Element* out = static_cast<const Element*>(p.out) + b * p.out_batch + query * p.out_row +
                       h * p.out_head;
  const Element* dout = static_cast<const Element*>(p.dout) + b * p.dout_batch +
                        query * p.dout_row + h * p.dout_head;
  float partial = 0.0f;
  for (int d = static_cast<int>(threadIdx.x); d < p.head_dim_v; d += kSoftmaxThreads) {
    partial = fmaf(to_float(dout[d]), to_float(out[d]), partial);
  }
  const float delta = block_sum<kSoftmaxWarps>(partial);
  const Element* probabilities = static_cast<const Element*>(p.probabilities) + row * p.seqlen_k;
  const float* dp = p.dp + row * p.seqlen_k;
  Element* ds = static_cast<Element*>(p.ds) + row * p.seqlen_k;
  for (int64_t j = threadIdx.x; j < p.seqlen_k; j += kSoftmaxThreads) {
    ds[j] = from_float<Element>(to_float(probabilities[j]) * (dp[j] - delta));
  }
}

struct GroupSumParams {
  const void* __restrict__ per_head;  // (batch, heads_q, seqlen_k, dim) gradient dtype
  void* __restrict__ gradient;        // (batch, seqlen_k, heads_kv, dim) via its strides
  int64_t batch_stride, row_stride, head_stride;  // the gradient's, elements
  int heads_q, heads_per_kv, seqlen_k, dim;
  int64_t elements;  // batch * heads_kv * seqlen_k * dim
};

// dK (or dV) of a GQA group: its query heads' copies summed in fp32 in the heads' order, one
// element per thread; blockIdx.y picks dK (0) or dV (1).
template <typename Element>
__global__ void __launch_bounds__(kGroupSumThreads)
    sum_group_heads(const __grid_constant__ GroupSumParams dk, const __grid_constant__ GroupSumParams dv) {
  const GroupSumParams& p = blockIdx.y == 0 ? dk : dv;
  const int64_t index = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (index >= p.elements) return;
  const int64_t d = index % p.dim;
  const int64_t key = index / p.dim % p.seqlen_k;
  const int64_t kv_head_index = index / (static_cast<int64_t>(p.dim) * p.seqlen_k);
  const int heads_kv = p.heads_q / p.heads_per_kv;
  const int64_t b = kv_head_index / heads_kv;
  const int64_t g = kv_head_index % heads_kv;
  const Element* copies = static_cast<const Element*>(p.per_head);
  float sum = 0.0f;
  for (int i = 0; i < p.heads_per_kv; ++i) {
    const int64_t h = g * p.heads_per_kv + i;
    sum += to_float(copies[((b * p.heads_q + h) * p.seqlen_k + key) * p.dim + d]);
  }
  static_cast<Element*>(p.gradient)[b * p.batch_stride + key * p.row_stride + g * p.head_stride +
                                    d] = from_float<Element>(sum);
}

// ---- launch -------------------------------------------------------------------------------------

cudaDataType_t cuda_data_type(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return CUDA_R_16BF;
    case DType::f32:
      return CUDA_R_32F;
    default:
      return CUDA_R_16F;  // the table's other input dtype
  }
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

// The GEMMs' operands: one array of `pairs` device pointers per matrix (build_matrix_pointers).
struct MatrixArrays {
  const void* const* k;
  const void* const* q;
  void* const* scores;  // S, then dP over it
  const void* const* v;
  const void* const* probabilities;
  void* const* out;
  const void* const* dout;
  const void* const* ds;
  void* const* dq;
  void* const* dk;  // the gradient, or with GQA the per-head copies
  void* const* dv;
};

class NaiveCublasPlan final : public Plan {
 public:
  NaiveCublasPlan(const Problem& problem, const PlanContext& context)
      : problem_(problem),
        stream_(static_cast<cudaStream_t>(context.stream)),
        device_(context.device),
        pairs_(problem.batch * problem.heads_q),
        dkv_per_pair_(problem.has_backward() && problem.heads_q != problem.heads_kv) {}

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

    const size_t all_matrices = static_cast<size_t>(pairs_) * static_cast<size_t>(p.seqlen_q) *
                                static_cast<size_t>(p.seqlen_k);
    const size_t input_size = dtype_size(p.input_dtype);
    const int arrays = p.has_backward() ? kAllPointerArrays : kForwardPointerArrays;
    const size_t workspace = sm >= kHopperSm ? kCublasWorkspaceHopper : kCublasWorkspaceAmpere;
    struct Request {
      size_t bytes;
      const char* what;
      ScratchBuffer* buffer;
    };
    std::vector<Request> requests = {
        {all_matrices * sizeof(float), "cuda.naive_cublas scores (b*hq*sq*sk fp32)", &scores_},
        {all_matrices * input_size, "cuda.naive_cublas probabilities (b*hq*sq*sk)",
         &probabilities_},
        {arrays * pairs_ * sizeof(void*), "cuda.naive_cublas pointer arrays", &pointers_},
        {workspace, "cuBLAS workspace", &workspace_}};
    if (p.has_backward()) {
      requests.push_back({all_matrices * input_size, "cuda.naive_cublas dS (b*hq*sq*sk)", &ds_});
    }
    if (dkv_per_pair_) {
      const size_t per_head_keys = static_cast<size_t>(pairs_) * static_cast<size_t>(p.seqlen_k) *
                                   dtype_size(p.grad_dtype());
      requests.push_back({per_head_keys * p.head_dim_qk,
                          "cuda.naive_cublas dK per query head (b*hq*sk*d)", &dk_per_head_});
      requests.push_back({per_head_keys * p.head_dim_v,
                          "cuda.naive_cublas dV per query head (b*hq*sk*dv)", &dv_per_head_});
    }
    for (const Request& request : requests) {
      // One declaration per step: nvcc's front end reads `status = f()` as discarding the
      // [[nodiscard]] Status that operator= returns.
      if (Status status = gpu::allocate_scratch(allocator, request.bytes, request.what,
                                                *request.buffer);
          !status) {
        return status;
      }
    }
    return Status::Ok();
  }

  Status run(const AttentionParams& params) override {
    if (Status status = prepare(params); !status) return status;
    const MatrixArrays m = matrix_arrays();
    if (Status status = scores_and_softmax(params, m, params.lse); !status) return status;
    // Row-major O (sq x dv) = P V is column-major O^T (dv x sq) = V' P'.
    return gemm(CUBLAS_OP_N, CUBLAS_OP_N, params.head_dim_v, params.seqlen_q, params.seqlen_k,
                1.0f, m.v, params.input_dtype, params.v_row_stride, m.probabilities,
                params.input_dtype, params.seqlen_k, m.out, params.output_dtype,
                params.out_row_stride);
  }

  // The backward as the header says, step by step. cuBLAS is column-major: a row-major r x c
  // matrix X with row stride ld reads as the c x r matrix X' = X^T, so each row-major product
  // below is computed as its transpose.
  Status run_backward(const AttentionParams& params) override {
    if (Status status = prepare(params); !status) return status;
    const MatrixArrays m = matrix_arrays();
    const int sq = params.seqlen_q;
    const int sk = params.seqlen_k;
    const DType in = params.input_dtype;
    const DType grad = params.grad_dtype;
    // 1-2. S and P; the forward's LSE stays as the forward wrote it.
    if (Status status = scores_and_softmax(params, m, nullptr); !status) return status;
    // 3. Row-major dP (sq x sk) = dO V^T, over S: column-major dP^T = V'^T dO'.
    if (Status status = gemm(CUBLAS_OP_T, CUBLAS_OP_N, sk, sq, params.head_dim_v, 1.0f, m.v, in,
                             params.v_row_stride, m.dout, grad, params.dout_row_stride,
                             m.scores, DType::f32, sk);
        !status) {
      return status;
    }
    // 4. dS = P (dP - D).
    if (Status status = softmax_backward(params); !status) return status;
    // 5. Row-major dQ (sq x d) = scale dS K: column-major dQ^T = K' dS'.
    if (Status status = gemm(CUBLAS_OP_N, CUBLAS_OP_N, params.head_dim_qk, sq, sk, params.scale,
                             m.k, in, params.k_row_stride, m.ds, in, sk, m.dq, grad,
                             params.dq_row_stride);
        !status) {
      return status;
    }
    // 6. Row-major dK (sk x d) = scale dS^T Q: column-major dK^T = Q' dS'^T.
    if (Status status = gemm(CUBLAS_OP_N, CUBLAS_OP_T, params.head_dim_qk, sk, sq, params.scale,
                             m.q, in, params.q_row_stride, m.ds, in, sk, m.dk, grad,
                             dkv_per_pair_ ? params.head_dim_qk : params.dk_row_stride);
        !status) {
      return status;
    }
    // 7. Row-major dV (sk x dv) = P^T dO: column-major dV^T = dO' P'^T.
    if (Status status = gemm(CUBLAS_OP_N, CUBLAS_OP_T, params.head_dim_v, sk, sq, 1.0f, m.dout,
                             grad, params.dout_row_stride, m.probabilities, in, sk, m.dv, grad,
                             dkv_per_pair_ ? params.head_dim_v : params.dv_row_stride);
        !status) {
      return status;
    }
    // 8. GQA: each group's query heads summed into dK and dV.
    return dkv_per_pair_ ? sum_groups(params) : Status::Ok();
  }

 private:
  // What run and run_backward do first: the params are the plan's problem, the pointer arrays
  // point at this call's buffers, cuBLAS is on the harness's stream with its workspace.
  Status prepare(const AttentionParams& params) {
    if (Status status = gpu::check_params_match(problem_, params); !status) return status;
    if (Status status = update_pointer_arrays(params); !status) return status;
    // cublasSetStream resets the workspace to cuBLAS's own pool, so the workspace comes second.
    ATTNBENCH_CUBLAS_TRY(cublasSetStream(cublas_, stream_));
    ATTNBENCH_CUBLAS_TRY(cublasSetWorkspace(cublas_, workspace_.data(), workspace_.bytes()));
    return Status::Ok();
  }

  MatrixArrays matrix_arrays() const {
    const auto array = [&](PointerArray which) {
      return pointers_.as<void*>() + static_cast<int64_t>(which) * pairs_;
    };
    MatrixArrays m{};
    m.k = array(kKArray);
    m.q = array(kQArray);
    m.scores = array(kScoresArray);
    m.v = array(kVArray);
    m.probabilities = array(kProbabilitiesArray);
    m.out = array(kOutArray);
    if (problem_.has_backward()) {
      m.dout = array(kDoutArray);
      m.ds = array(kDsArray);
      m.dq = array(kDqArray);
      m.dk = array(kDkArray);
      m.dv = array(kDvArray);
    }
    return m;
  }

  // One cublasGemmBatchedEx over every (batch, head) pair, fp32 compute, beta 0: column-major
  // C (m x n) = alpha op(A) op(B).
  Status gemm(cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k, float alpha,
              const void* const* a, DType a_type, int64_t lda, const void* const* b, DType b_type,
              int64_t ldb, void* const* c, DType c_type, int64_t ldc) {
    const float zero = 0.0f;
    ATTNBENCH_CUBLAS_TRY(cublasGemmBatchedEx(
        cublas_, op_a, op_b, m, n, k, &alpha, a, cuda_data_type(a_type), static_cast<int>(lda), b,
        cuda_data_type(b_type), static_cast<int>(ldb), &zero, c, cuda_data_type(c_type),
        static_cast<int>(ldc), static_cast<int>(pairs_), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return Status::Ok();
  }

  // S = scale Q K^T (row-major S is column-major S^T = K'^T Q'), then P = softmax(S) and the LSE
  // where `lse` is set.
  Status scores_and_softmax(const AttentionParams& params, const MatrixArrays& m, float* lse) {
    const int sq = params.seqlen_q;
    const int sk = params.seqlen_k;
    if (Status status = gemm(CUBLAS_OP_T, CUBLAS_OP_N, sk, sq, params.head_dim_qk, params.scale,
                             m.k, params.input_dtype, params.k_row_stride, m.q,
                             params.input_dtype, params.q_row_stride, m.scores, DType::f32, sk);
        !status) {
      return status;
    }
    SoftmaxParams softmax{};
    softmax.scores = scores_.as<const float>();
    softmax.probabilities = probabilities_.data();
    softmax.lse = lse;
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
    return Status::Ok();
  }

  Status softmax_backward(const AttentionParams& params) {
    SoftmaxBackwardParams p{};
    p.probabilities = probabilities_.data();
    p.dp = scores_.as<const float>();
    p.ds = ds_.data();
    p.out = params.out;
    p.dout = params.dout;
    p.out_batch = params.out_batch_stride;
    p.out_row = params.out_row_stride;
    p.out_head = params.out_head_stride;
    p.dout_batch = params.dout_batch_stride;
    p.dout_row = params.dout_row_stride;
    p.dout_head = params.dout_head_stride;
    p.heads_q = params.heads_q;
    p.seqlen_q = params.seqlen_q;
    p.seqlen_k = params.seqlen_k;
    p.head_dim_v = params.head_dim_v;
    const unsigned rows = static_cast<unsigned>(pairs_ * params.seqlen_q);
    // The tier's one dtype: input, output and gradient alike (the table's same-dtype rule).
    if (params.input_dtype == DType::bf16) {
      launch_kernel(softmax_backward_rows<__nv_bfloat16>, rows, kSoftmaxThreads, 0, stream_, p);
    } else {
      launch_kernel(softmax_backward_rows<__half>, rows, kSoftmaxThreads, 0, stream_, p);
    }
    ATTNBENCH_CUDA_TRY_LAUNCH();
    return Status::Ok();
  }

  Status sum_groups(const AttentionParams& params) {
    const auto group_sum = [&](const ScratchBuffer& per_head, void* gradient, int64_t batch_stride,
                               int64_t row_stride, int64_t head_stride, int dim) {
      GroupSumParams p{};
      p.per_head = per_head.data();
      p.gradient = gradient;
      p.batch_stride = batch_stride;
      p.row_stride = row_stride;
      p.head_stride = head_stride;
      p.heads_q = params.heads_q;
      p.heads_per_kv = params.heads_per_kv;
      p.seqlen_k = params.seqlen_k;
      p.dim = dim;
      p.elements = static_cast<int64_t>(params.batch) * params.heads_kv * params.seqlen_k * dim;
      return p;
    };
    const GroupSumParams dk =
        group_sum(dk_per_head_, params.dk, params.dk_batch_stride, params.dk_row_stride,
                  params.dk_head_stride, params.head_dim_qk);
    const GroupSumParams dv =
        group_sum(dv_per_head_, params.dv, params.dv_batch_stride, params.dv_row_stride,
                  params.dv_head_stride, params.head_dim_v);
    const int64_t most = dk.elements > dv.elements ? dk.elements : dv.elements;
    const dim3 grid(static_cast<unsigned>((most + kGroupSumThreads - 1) / kGroupSumThreads), 2);
    if (params.grad_dtype == DType::bf16) {
      launch_kernel(sum_group_heads<__nv_bfloat16>, grid, kGroupSumThreads, 0, stream_, dk, dv);
    } else {
      launch_kernel(sum_group_heads<__half>, grid, kGroupSumThreads, 0, stream_, dk, dv);
    }
    ATTNBENCH_CUDA_TRY_LAUNCH();
    return Status::Ok();
  }

  // The pointer arrays depend only on the buffers' addresses: rebuilt on the device (so a
  // captured forward never needs a host copy) when those change, which in the harness happens
  // on the first forward (and the first backward) of a plan.
  Status update_pointer_arrays(const AttentionParams& params) {
    const std::array<const void*, 8> buffers = {params.q,    params.k,  params.v,  params.out,
                                                params.dout, params.dq, params.dk, params.dv};
    if (buffers == built_for_) return Status::Ok();
    const int64_t input_bytes = static_cast<int64_t>(dtype_size(params.input_dtype));
    const int64_t output_bytes = static_cast<int64_t>(dtype_size(params.output_dtype));
    const int64_t grad_bytes = static_cast<int64_t>(dtype_size(params.grad_dtype));
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
    if (problem_.has_backward()) {
      set_backward_pointers(params, grad_bytes, pointers);
    }
    const unsigned blocks = static_cast<unsigned>((pairs_ + kPointerThreads - 1) / kPointerThreads);
    launch_kernel(build_matrix_pointers, blocks, kPointerThreads, 0, stream_, pointers);
    ATTNBENCH_CUDA_TRY_LAUNCH();
    built_for_ = buffers;
    return Status::Ok();
  }

  void set_backward_pointers(const AttentionParams& params, int64_t grad_bytes,
                             PointerParams& pointers) {
    pointers.dout = static_cast<const unsigned char*>(params.dout);
    pointers.dq = static_cast<unsigned char*>(params.dq);
    pointers.ds = ds_.as<unsigned char>();
    pointers.dout_batch = params.dout_batch_stride * grad_bytes;
    pointers.dout_head = params.dout_head_stride * grad_bytes;
    pointers.dq_batch = params.dq_batch_stride * grad_bytes;
    pointers.dq_head = params.dq_head_stride * grad_bytes;
    pointers.dkv_per_pair = dkv_per_pair_;
    if (dkv_per_pair_) {  // (batch, heads_q, seqlen_k, dim) copies, contiguous
      const int64_t keys = params.seqlen_k;
      pointers.dk_target = dk_per_head_.as<unsigned char>();
      pointers.dv_target = dv_per_head_.as<unsigned char>();
      pointers.dk_head = keys * params.head_dim_qk * grad_bytes;
      pointers.dv_head = keys * params.head_dim_v * grad_bytes;
      pointers.dk_batch = params.heads_q * pointers.dk_head;
      pointers.dv_batch = params.heads_q * pointers.dv_head;
    } else {
      pointers.dk_target = static_cast<unsigned char*>(params.dk);
      pointers.dv_target = static_cast<unsigned char*>(params.dv);
      pointers.dk_batch = params.dk_batch_stride * grad_bytes;
      pointers.dk_head = params.dk_head_stride * grad_bytes;
      pointers.dv_batch = params.dv_batch_stride * grad_bytes;
      pointers.dv_head = params.dv_head_stride * grad_bytes;
    }
    pointers.backward = true;
  }

  Problem problem_;
  cudaStream_t stream_;
  int device_;
  int64_t pairs_;       // batch * heads_q: the GEMMs' batch count
  bool dkv_per_pair_;   // a backward with GQA: dK and dV per query head, then the group sum
  cublasHandle_t cublas_ = nullptr;
  ScratchBuffer scores_;         // (batch, heads_q, seqlen_q, seqlen_k) fp32: S, then dP
  ScratchBuffer probabilities_;  // (batch, heads_q, seqlen_q, seqlen_k) input dtype
  ScratchBuffer pointers_;       // the pointer arrays, forward's then backward's
  ScratchBuffer workspace_;      // cuBLAS workspace
  ScratchBuffer ds_;             // backward: dS, as P
  ScratchBuffer dk_per_head_;    // backward with GQA: (batch, heads_q, seqlen_k, head_dim_qk)
  ScratchBuffer dv_per_head_;    // backward with GQA: (batch, heads_q, seqlen_k, head_dim_v)
  std::array<const void*, 8> built_for_{};  // q, k, v, out, dout, dq, dk, dv
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
  table.passes = {Pass::fwd, Pass::bwd, Pass::fwd_bwd};
  table.notes = "scratch grows as batch x heads_q x seqlen_q x seqlen_k (fp32 scores + P; "
                "the backward adds dS)";
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
