// cuda.flash_decode — split-KV decode (FlashDecoding): a few query rows against a long KV cache.
//
// Why: a decode step has 1 .. 16 query rows per sequence, so a kernel that gives one block to each
// (batch, head) runs batch x heads blocks, a handful of an H100's 132 SMs at batch 1, each
// reading the whole cache alone. Splitting the keys across blocks puts every SM to work on the
// one stream of bytes that matters: the cache.
// What it computes, in two launches:
//   split    grid (splits, heads_kv, batch), 4 warps a block. Block (s, g, b) takes split s of
//            sequence b's keys: every query row of every query head of KV group g (GQA's group
//            packed into one block, so each K/V row read serves the group) over the keys of its
//            split, a warp per row, each lane kHeadDim / 32 columns: the dot product a warp sum,
//            then an online softmax in fp32 (exp2, scale * log2 e folded into q). It writes its
//            split's O, normalized, and its natural-log LSE (-inf where the split holds no
//            visible key) to the fp32 workspace.
//   combine  one block per (batch, head, query row), a thread per column: the splits' LSEs give
//            the row's LSE = max + ln sum exp(lse_s - max), and O = sum exp(lse_s - LSE) O_s,
//            rounded once to the output dtype.
// Varlen batches (cu_seqlens) and paged caches (page_table) are read as params.h says: each
// sequence with its own lengths and masked as a problem of them; a key row found through its
// page. Rows past a varlen sequence's queries are not written.
// Numerics: as cuda.flash2's online softmax (row_stats.cuh's guards), P never rounded; the
// combine in fp32. Deterministic: every sum runs in one fixed order.
// Performance: not yet measured on a GPU. The split kernel is CUDA-core code, written for
// correctness first: each warp waits on one K row's load, warp sum and exponent before the next
// key, so a warp has one row in flight; it will be latency-bound well below the copy bandwidth
// (issue 39's claim asks 80 %) until the keys are loaded ahead in tiles (cp.async into shared
// memory, several rows a warp). Tried here: 8 keys a step lifted the rows in flight but put a
// 8-16 byte stack frame around the division's slow path at d 128 (StaticCuda forbids one).
// Limits: head dims 64 and 128, fp16/bf16, at most kMaxQueryRows query rows per sequence.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cuda/common/convert.cuh"
#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/common/row_stats.cuh"
#include "kernels/cuda/flash_decode/flash_decode_launch.h"
#include "reference/mask.h"

namespace attnbench::flash_decode {
inline namespace ATTNBENCH_TARGET {
namespace detail {

using gpu::kNegInf;
using gpu::kWarpSize;

constexpr int kWarps = 4;
constexpr int kSplitThreads = kWarps * kWarpSize;
constexpr float kLn2 = 0.693147180559945309f;

// One sequence as the kernels see it: its lengths, and those its mask is taken against.
struct Sequence {
  int queries;     // query rows
  int keys;        // key rows K and V hold for it
  int key_length;  // the padding mask's valid keys; keys otherwise
};

__device__ __forceinline__ Sequence sequence_of(const AttentionParams& p, int b) {
  if (p.cu_seqlens_q != nullptr) {
    const int keys = p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b];
    return {p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b], keys, keys};
  }
  return {p.seqlen_q, p.seqlen_k, p.key_lengths != nullptr ? p.key_lengths[b] : p.seqlen_k};
}

// Where sequence b's first query row starts in q or out: its cu_seqlens row, or b batch strides.
__device__ __forceinline__ int64_t query_sequence_offset(const AttentionParams& p, int b,
                                                         int64_t batch_stride, int64_t row_stride) {
  return p.cu_seqlens_q != nullptr ? p.cu_seqlens_q[b] * row_stride : b * batch_stride;
}

// Where key row `key` of sequence b starts in K or V: through the page table in a paged cache,
// else after the sequence's first row.
__device__ __forceinline__ int64_t key_row_offset(const AttentionParams& p, int b, int key,
                                                  int64_t batch_stride, int64_t row_stride) {
  if (p.page_table != nullptr) {
    const int slot = key / p.page_size;
    const int page = p.page_table[b * p.pages_per_sequence + slot];
    return (static_cast<int64_t>(page) * p.page_size + key % p.page_size) * row_stride;
  }
  const int64_t first =
      p.cu_seqlens_k != nullptr ? p.cu_seqlens_k[b] * row_stride : b * batch_stride;
  return first + static_cast<int64_t>(key) * row_stride;
}

// The workspace row of (split, batch, head, query): splits x batch x heads_q x seqlen_q rows.
__device__ __forceinline__ int64_t partial_row(const AttentionParams& p, int split, int b, int h,
                                               int query) {
  return ((static_cast<int64_t>(split) * p.batch + b) * p.heads_q + h) * p.seqlen_q + query;
}

template <int kHeadDim, DType kInput>
__global__ void __launch_bounds__(kSplitThreads)
    split_kernel(const __grid_constant__ AttentionParams p, Workspace workspace, int splits) {
  using Element = typename gpu::ElementOf<kInput>::type;
  constexpr int kPerLane = kHeadDim / kWarpSize;
  const int split = static_cast<int>(blockIdx.x);
  const int kv_head = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const Sequence sequence = sequence_of(p, b);
  const int keys_per_split = (sequence.keys + splits - 1) / splits;
  const int split_begin = split * keys_per_split;
  const int split_end =
      sequence.keys < split_begin + keys_per_split ? sequence.keys : split_begin + keys_per_split;
  const auto* q = static_cast<const Element*>(p.q);
  const auto* k = static_cast<const Element*>(p.k);
  const auto* v = static_cast<const Element*>(p.v);
  const int group = p.heads_per_kv;
  const int column = lane * kPerLane;

  // The group's rows, query-major: row r is query r / group of head kv_head * group + r % group.
  for (int row = warp; row < group * sequence.queries; row += kWarps) {
    const int h = kv_head * group + row % group;
    const int query = row / group;
    const KeyRange visible = visible_keys(p.mask, p.window_left, p.window_right, query,
                                          sequence.queries, sequence.keys, sequence.key_length);
    // The row's visible keys inside this split.
    const int begin = visible.begin > split_begin ? static_cast<int>(visible.begin) : split_begin;
    const int end = visible.end < split_end ? static_cast<int>(visible.end) : split_end;

    const Element* q_row = q + query_sequence_offset(p, b, p.q_batch_stride, p.q_row_stride) +
                           static_cast<int64_t>(query) * p.q_row_stride + h * p.q_head_stride +
                           column;
    float q_scaled[kPerLane];  // in log2 units: score = q_scaled . k
    for (int e = 0; e < kPerLane; ++e) q_scaled[e] = gpu::to_float(q_row[e]) * p.scale_log2;
    float accumulator[kPerLane] = {};
    float row_max = kNegInf;
    float row_sum = 0.0f;
    for (int key = begin; key < end; ++key) {
      const Element* k_row = k + key_row_offset(p, b, key, p.k_batch_stride, p.k_row_stride) +
                             kv_head * p.k_head_stride + column;
      float dot = 0.0f;
      for (int e = 0; e < kPerLane; ++e) dot += q_scaled[e] * gpu::to_float(k_row[e]);
      const float score = gpu::warp_sum(dot);
      const float new_max = fmaxf(row_max, score);
      // The first visible key: nothing to rescale (O and the sum are 0).
      const float correction = row_max == kNegInf ? 0.0f : exp2f(row_max - new_max);
      const float weight = exp2f(score - new_max);
      row_sum = row_sum * correction + weight;
      const Element* v_row = v + key_row_offset(p, b, key, p.v_batch_stride, p.v_row_stride) +
                             kv_head * p.v_head_stride + column;
      for (int e = 0; e < kPerLane; ++e) {
        accumulator[e] = accumulator[e] * correction + weight * gpu::to_float(v_row[e]);
      }
      row_max = new_max;
    }

    const int64_t partial = partial_row(p, split, b, h, query);
    const float inverse_sum = gpu::inverse_row_sum(row_sum);
    for (int e = 0; e < kPerLane; ++e) {
      workspace.out[partial * kHeadDim + column + e] = accumulator[e] * inverse_sum;
    }
    if (lane == 0) {
      workspace.lse[partial] = row_sum > 0.0f ? (row_max + log2f(row_sum)) * kLn2 : kNegInf;
    }
  }
}

template <int kHeadDim, DType kInput>
__global__ void __launch_bounds__(kHeadDim)
    combine_kernel(const __grid_constant__ AttentionParams p, Workspace workspace, int splits) {
  using Element = typename gpu::ElementOf<kInput>::type;
  const int row = static_cast<int>(blockIdx.x);  // (batch, head, query)
  const int query = row % p.seqlen_q;
  const int h = (row / p.seqlen_q) % p.heads_q;
  const int b = row / (p.seqlen_q * p.heads_q);
  if (query >= sequence_of(p, b).queries) return;  // past a varlen sequence's queries
  const int column = static_cast<int>(threadIdx.x);

  float lse_max = kNegInf;
  for (int split = 0; split < splits; ++split) {
    lse_max = fmaxf(lse_max, workspace.lse[partial_row(p, split, b, h, query)]);
  }
  float total = 0.0f;
  float value = 0.0f;
  for (int split = 0; split < splits; ++split) {
    const int64_t partial = partial_row(p, split, b, h, query);
    const float lse_split = workspace.lse[partial];
    const float weight = lse_split == kNegInf ? 0.0f : expf(lse_split - lse_max);
    total += weight;
    value += weight * workspace.out[partial * kHeadDim + column];
  }
  auto* out = static_cast<Element*>(p.out);
  out[query_sequence_offset(p, b, p.out_batch_stride, p.out_row_stride) +
      static_cast<int64_t>(query) * p.out_row_stride + h * p.out_head_stride + column] =
      gpu::from_float<Element>(value * gpu::inverse_row_sum(total));
  if (column == 0 && p.lse != nullptr) {
    p.lse[(static_cast<int64_t>(b) * p.heads_q + h) * p.seqlen_q + query] =
        gpu::row_lse(lse_max, total);
  }
}

}  // namespace detail

template <int HeadDim, DType kDtype>
Status launch_flash_decode(const AttentionParams& params, const Workspace& workspace, int splits,
                           cudaStream_t stream) {
  static_assert(HeadDim % gpu::kWarpSize == 0, "a lane takes HeadDim / 32 columns");
  const dim3 split_grid(static_cast<unsigned>(splits), static_cast<unsigned>(params.heads_kv),
                        static_cast<unsigned>(params.batch));
  launch_kernel(detail::split_kernel<HeadDim, kDtype>, split_grid, detail::kSplitThreads, 0, stream,
                params, workspace, splits);
  ATTNBENCH_CUDA_TRY_LAUNCH();
  const int64_t rows = static_cast<int64_t>(params.batch) * params.heads_q * params.seqlen_q;
  launch_kernel(detail::combine_kernel<HeadDim, kDtype>, static_cast<unsigned>(rows), HeadDim, 0,
                stream, params, workspace, splits);
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return Status::Ok();
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash_decode
