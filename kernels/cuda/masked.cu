// cuda.masked_outofplace, cuda.masked_inplace, cuda.masked_fused — three ways to apply the mask
// on the naive path (the "Profiling in PyTorch (Part 3)" study: in-place masking and a fused
// kernel cut runtime without touching the model).
//
// All three run naive.cu's scores kernel WITHOUT the mask (every score kept), then:
//   outofplace  mask_copy_kernel writes a masked copy of S into a second matrix
//               (scores.masked_fill(mask, -inf)): every element of S read, every element of the
//               copy written; the softmax reads the copy
//   inplace     mask_fill_kernel writes -inf over the masked entries of S and touches nothing
//               else (scores.masked_fill_(mask, -inf)): our masks are predicates of the indices,
//               so there is no mask tensor to read and no visible score needs reading; the
//               softmax reads S
//   fused       no mask pass: the softmax kernel reads each row's visible keys only and writes 0
//               elsewhere (launch_softmax with mask_inside)
// and naive.cu's softmax and output kernels. This file holds the two mask passes; the plans and
// the bytes models that predict their times are in naive_family.cpp.
// Against the previous version (cuda.naive, mask applied while writing the scores): the same
// arithmetic, the mask moved to a separate step, to measure what that step costs.
// Scratch: S, plus the masked copy for outofplace, each (batch, heads_q, seqlen_q, seqlen_k) fp32.
// Performance: not yet measured on a GPU.
// Limits: cuda.naive's; a row with no visible key is all -inf after masking and gets P = 0.
#include <cstdint>
#include <limits>
#include <string>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/common/row_stats.cuh"
#include "kernels/cuda/naive_steps.h"
#include "reference/mask.h"

namespace attnbench::gpu::naive_steps {
inline namespace ATTNBENCH_TARGET {
namespace {

// ---- traits -------------------------------------------------------------------------------------

// One block per score row, as the softmax: 256 threads stream a row in coalesced 1 KiB steps,
// and each row computes its visible range once.
constexpr int kRowThreads = 256;
constexpr int64_t kMaxGridBlocks = std::numeric_limits<int32_t>::max();  // gridDim.x

// ---- device helpers -----------------------------------------------------------------------------

// The visible keys of score row r = (batch * heads_q + head) * seqlen_q + query.
// 32-bit arithmetic (the grid has one block per row, under 2^31): a 64-bit division would be a
// subroutine call.
__device__ KeyRange row_visible_keys(const AttentionParams& p, int row) {
  const int batch = row / (p.seqlen_q * p.heads_q);
  const int64_t key_length = p.key_lengths != nullptr ? p.key_lengths[batch] : p.seqlen_k;
  return visible_keys(p.mask, p.window_left, p.window_right, row % p.seqlen_q, p.seqlen_q,
                      p.seqlen_k, key_length);
}

// ---- kernels ------------------------------------------------------------------------------------

// masked[r][j] = scores[r][j] where key j is visible, -inf elsewhere; every element read and
// written, as an out-of-place masked_fill does.
__global__ void __launch_bounds__(kRowThreads)
    mask_copy_kernel(const __grid_constant__ AttentionParams p, const float* __restrict__ scores,
                     float* __restrict__ masked_scores) {
  const int row = static_cast<int>(blockIdx.x);
  const int64_t sk = p.seqlen_k;
  const KeyRange keys = row_visible_keys(p, row);
  const float* in = scores + static_cast<int64_t>(row) * sk;    // (seqlen_k,)
  float* out = masked_scores + static_cast<int64_t>(row) * sk;  // (seqlen_k,)
  for (int64_t j = threadIdx.x; j < sk; j += blockDim.x) {
    const float score = in[j];
    out[j] = j >= keys.begin && j < keys.end ? score : kNegInf;
  }
}

// scores[r][j] = -inf for the masked keys j < begin and j >= end; visible scores untouched.
__global__ void __launch_bounds__(kRowThreads)
    mask_fill_kernel(const __grid_constant__ AttentionParams p, float* __restrict__ scores) {
  const int row = static_cast<int>(blockIdx.x);
  const int64_t sk = p.seqlen_k;
  const KeyRange keys = row_visible_keys(p, row);
  float* s = scores + static_cast<int64_t>(row) * sk;  // (seqlen_k,)
  // An empty row has begin == end: the two loops together cover it all.
  for (int64_t j = threadIdx.x; j < keys.begin; j += blockDim.x) s[j] = kNegInf;
  for (int64_t j = keys.end + threadIdx.x; j < sk; j += blockDim.x) s[j] = kNegInf;
}

// ---- launch -------------------------------------------------------------------------------------

Status score_rows(const AttentionParams& params, unsigned& rows) {
  const int64_t count = static_cast<int64_t>(params.batch) * params.heads_q * params.seqlen_q;
  if (count > kMaxGridBlocks) {
    return Status::Error("cuda.masked: " + std::to_string(count) +
                         " score rows exceed one launch's grid");
  }
  rows = static_cast<unsigned>(count);
  return Status::Ok();
}

}  // namespace

Status launch_mask_copy(const AttentionParams& params, const float* scores, float* masked_scores,
                        cudaStream_t stream) {
  unsigned rows = 0;
  if (Status status = score_rows(params, rows); !status) return status;
  launch_kernel(mask_copy_kernel, rows, kRowThreads, 0, stream, params, scores, masked_scores);
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return Status::Ok();
}

Status launch_mask_fill(const AttentionParams& params, float* scores, cudaStream_t stream) {
  unsigned rows = 0;
  if (Status status = score_rows(params, rows); !status) return status;
  launch_kernel(mask_fill_kernel, rows, kRowThreads, 0, stream, params, scores);
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return Status::Ok();
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::gpu::naive_steps
