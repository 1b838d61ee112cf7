// The steps of the naive CUDA family (cuda.naive, cuda.masked_*), one launch each, on a score
// matrix that lives in device memory. Declared for host compilers; the kernels live in naive.cu
// (scores, softmax, output) and masked.cu (the two separate mask passes). naive_family.cpp
// chains them into a plan.
//
// Every step takes the forward's AttentionParams (device pointers, strides in elements, fp16 or
// bf16 in and out, even head dims up to kMaxHeadDim) and a score matrix
//   scores: (batch, heads_q, seqlen_q, seqlen_k) fp32, row-major, contiguous
// from the plan's scratch. Each returns the launch error (ATTNBENCH_CUDA_TRY_LAUNCH).
#pragma once

#include <cstdint>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/params.h"
#include "reference/status.h"

namespace attnbench::gpu::naive_steps {
inline namespace ATTNBENCH_TARGET {

// The kernels load q, k, v and dO as pairs of elements (4-byte loads): head dims are even. The
// scores kernel stages the head dim in chunks of 32, the output kernels write 64 columns per block,
// both zero past the head dim. 256: the largest head dim models ship, and the family's table's.
inline constexpr int64_t kHeadDimMultiple = 2;
inline constexpr int64_t kMaxHeadDim = 256;

// S = scale * Q K^T over every key; with mask_keys, masked keys (reference/mask.h) get -inf as
// they are written, else every score is kept (the masked_* variants mask in a later step).
Status launch_scores(const AttentionParams& params, bool mask_keys, float* scores,
                     cudaStream_t stream);

// P = softmax(S) row by row, written over its input (P has S's shape, fp32). Without
// mask_inside, -inf entries of S are the masked keys and the whole row is read; with
// mask_inside, the kernel reads only each row's visible keys and writes 0 elsewhere (the fused
// variant). A row with no visible key gets P = 0 and LSE -inf. Writes the natural-log LSE when
// params.lse is set.
Status launch_softmax(const AttentionParams& params, bool mask_inside, float* scores,
                      cudaStream_t stream);

// out = P V, P (the softmax's output) read from `probabilities`, out in the output dtype.
Status launch_output(const AttentionParams& params, const float* probabilities,
                     cudaStream_t stream);

// masked.cu. Out of place: masked_scores = S with -inf at masked keys, every element read and
// written (masked_fill's copy). In place: -inf written over the masked keys of S only (the
// visible ones are neither read nor written: the mask is a predicate of the indices, so
// masked_fill_ needs no read of S).
Status launch_mask_copy(const AttentionParams& params, const float* scores, float* masked_scores,
                        cudaStream_t stream);
Status launch_mask_fill(const AttentionParams& params, float* scores, cudaStream_t stream);

// ---- the backward (cuda.naive's textbook backward, naive_family.cpp chains the steps) --------

// dS = P (dP - D) scale, written over dP, one block per query row: D = dO . O of the row (the
// forward's output, params.out, and params.dout). The softmax scale is folded in, so that
// dQ = dS K and dK = dS^T Q. probabilities and gradients: (batch, heads_q, seqlen_q, seqlen_k).
Status launch_softmax_backward(const AttentionParams& params, const float* probabilities,
                               float* gradients, cudaStream_t stream);

// out[b, key, g, :] = sum over the query heads h of kv head g and the queries q of
// matrix[b, h, q, key] x[b, q, h, :]: dK = dS^T Q and dV = P^T dO, a GQA group's heads summed in
// a fixed order (deterministic). x and out in `dtype`, `dim` (even, up to kMaxHeadDim)
// columns, rows via the strides (elements).
struct TransposedProduct {
  const float* matrix;  // (batch, heads_q, seqlen_q, seqlen_k) fp32
  const void* x;
  int64_t x_batch_stride, x_row_stride, x_head_stride;
  void* out;
  int64_t out_batch_stride, out_row_stride, out_head_stride;
  int batch, heads_q, heads_kv, seqlen_q, seqlen_k, dim;
  int heads_per_kv;  // the query heads summed into one kv head's rows (heads_q / heads_kv)
};
Status launch_transposed_product(const TransposedProduct& product, DType dtype,
                                 cudaStream_t stream);

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::gpu::naive_steps
