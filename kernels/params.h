// The one plain struct every attention kernel receives. Shapes, strides and derived values are
// computed on the host (make_params); no logic lives here. Strides are in elements and the
// head_dim stride is 1. Pointers are host pointers for CPU kernels, device pointers for GPU ones.
#pragma once

#include <cstdint>

#include "reference/dtype.h"
#include "reference/mask.h"
#include "reference/pass.h"

namespace attnbench {

struct AttentionParams {
  const void* __restrict__ q;  // (batch, seqlen_q, heads_q, head_dim_qk) via q_*_stride
  const void* __restrict__ k;  // (batch, seqlen_k, heads_kv, head_dim_qk) via k_*_stride
  const void* __restrict__ v;  // (batch, seqlen_k, heads_kv, head_dim_v) via v_*_stride
  void* __restrict__ out;      // (batch, seqlen_q, heads_q, head_dim_v) via out_*_stride
  float* __restrict__ lse;     // (batch, heads_q, seqlen_q) natural-log LSE, or null if not wanted

  int64_t q_batch_stride, q_row_stride, q_head_stride;
  int64_t k_batch_stride, k_row_stride, k_head_stride;
  int64_t v_batch_stride, v_row_stride, v_head_stride;
  int64_t out_batch_stride, out_row_stride, out_head_stride;

  int batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim_qk, head_dim_v;
  int heads_per_kv;  // heads_q / heads_kv (GQA group size; heads_q for MQA)

  float scale;       // softmax scale applied to q . k
  float scale_log2;  // scale * log2(e), for exp2-based softmax

  MaskKind mask;
  int window_left, window_right;  // window mask; -1 unbounded
  // Padding mask: valid key count per batch, (batch,) int32, same memory space as q; else null.
  const int* __restrict__ key_lengths;
  // Layout thd (a varlen batch): the row each sequence starts at in the packed q and out
  // (cu_seqlens_q) and k and v (cu_seqlens_k), (batch + 1,) int32 ending with the total, same
  // memory space as q; a sequence's lengths are the differences. The batch strides are then 0
  // and seqlen_q, seqlen_k the longest sequence's. Null for the other layouts.
  const int* __restrict__ cu_seqlens_q;
  const int* __restrict__ cu_seqlens_k;
  // A paged KV cache (Problem::page_size): k and v point at pools of pages, each page_size key
  // rows at k_row_stride / v_row_stride; key row s of sequence b is row s % page_size of page
  // page_table[b * pages_per_sequence + s / page_size] ((batch, pages_per_sequence) int32, same
  // memory space as q; entries past a sequence's last page -1). The k and v batch strides are
  // then 0. Null and 0 for a contiguous cache.
  const int* __restrict__ page_table;
  int page_size, pages_per_sequence;

  DType input_dtype, output_dtype, p_dtype;
  // FP8: x_real = x_stored * descale; out_stored = out_real * out_scale. 1 otherwise.
  float q_descale, k_descale, v_descale, out_scale;
  // FP8 with fp8_scaling per_head: one descale per (batch, head) of each tensor, (batch, heads_q)
  // for q and (batch, heads_kv) for k and v, in the same memory space as q; they replace the
  // scalar descales above (which are then 1). Null otherwise.
  const float* __restrict__ q_head_descales;
  const float* __restrict__ k_head_descales;
  const float* __restrict__ v_head_descales;

  // The backward (Plan::run_backward; null in a forward). out and lse above hold the plan's own
  // forward outputs, which the backward reads; dout is the upstream gradient dL/dout, placed like
  // out, in grad_dtype. The backward writes dq (batch, seqlen_q, heads_q, head_dim_qk),
  // dk (batch, seqlen_k, heads_kv, head_dim_qk) and dv (batch, seqlen_k, heads_kv, head_dim_v),
  // in grad_dtype, via their strides (bshd, contiguous); dk and dv of a GQA group sum its query
  // heads' contributions.
  const void* __restrict__ dout;
  void* __restrict__ dq;
  void* __restrict__ dk;
  void* __restrict__ dv;
  int64_t dout_batch_stride, dout_row_stride, dout_head_stride;
  int64_t dq_batch_stride, dq_row_stride, dq_head_stride;
  int64_t dk_batch_stride, dk_row_stride, dk_head_stride;
  int64_t dv_batch_stride, dv_row_stride, dv_head_stride;
  DType grad_dtype;
  Pass pass;  // the case's pass: a plan is built for it (make_plan sees it in shape_params)
};

}  // namespace attnbench
