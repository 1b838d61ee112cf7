// The attention backward on the host, row by row, exact (fp64) and at a kernel's precision.
//
// Per query head h of batch b, with s_ij = scale * q_i . k_j over the visible keys:
//   P_ij  = exp(s_ij - lse_i)                 recomputed from the forward's LSE
//   D_i   = dO_i . O_i                        a row statistic (FlashAttention-2's "delta")
//   dP_ij = dO_i . v_j
//   dS_ij = P_ij (dP_ij - D_i)
//   dQ_i  = scale * sum_j dS_ij k_j           one query row: needs its own lse_i and D_i
//   dK_j  = scale * sum_{h in group} sum_i dS_ij q_i
//   dV_j  = sum_{h in group} sum_i P_ij dO_i  one key row of a kv head: every query row of the
//                                             group's heads that sees key j, with their stats
// A row with no visible key contributes nothing (dQ_i = 0); a key no query sees gets dK = dV = 0.
//
// The low-precision twin is what a straightforward kernel computes: the forward at lowp_row's
// precision (O rounded to the output dtype), D from that O in fp32, P and dS rounded to the
// input dtype before the products that read them (as FlashAttention's and cuDNN's tensor-core
// GEMMs do), fp32 accumulation, the gradients rounded to the gradient dtype; with GQA each query
// head's share of dK and dV is rounded to the gradient dtype before the group's sum (fp32, then
// rounded), as a framework's autograd of repeated K and V computes it (FlashAttention's tests'
// reference is that autograd). The checker allows a kernel twice its error
// (harness/measure/gradient_checker.h).
//
// One error the twin cannot stand for: D reads the kernel's own O, rounded to the output dtype,
// and a correct forward may round any element of O the other way than the twin's (the forward's
// checker allows it). With outliers one such element moves D by |dO_d| ulp(O_d), which can exceed
// a bf16 ulp of the gradient. The exact rows therefore also give an envelope of that effect:
// D's uncertainty u_i = 2 sqrt(sum_d (dO_id ulp(O_id))^2) (each element off by at most an ulp,
// at random), carried to dQ_i as scale u_i sum_j P_ij |k_j| and to dK_j as
// scale sum_i P_ij u_i |q_i|, elementwise; dV does not read D. For fp32 gradients the envelope
// also says how large the row's terms are (their absolute sum, elementwise) and the exponents
// its P values were taken from (|s| + |lse|), whose fp32 rounding moves P by eps (|s| + |lse|)
// in a kernel and in the twin alike, independently.
#pragma once

#include <cstdint>

#include "reference/attention.h"

namespace attnbench {

// What a row's backward needs from its forward, in the precision T of the computation.
template <typename T>
struct RowStatistics {
  T lse = 0;    // natural-log LSE of the scaled scores; -inf for a row with no visible key
  T delta = 0;  // D = dO . O
  T delta_uncertainty = 0;  // exact rows only: u_i above, from O rounded to the output dtype
};

// What bounds a correct kernel's rounding beyond the twin's in one gradient row (above): the
// largest element of O's rounding carried through D, the largest element of the absolute sum of
// the row's terms, and the largest exponent |s| + |lse| among them.
struct RowEnvelope {
  double o_rounding = 0;
  double magnitude = 0;
  double max_exponent = 0;
};

// What the low-precision twin rounds P and dS to before the products that read them: the inputs'
// dtype (the tensor cores' operand type), the gradients' for FP8 inputs.
DType operand_dtype(const Problem& problem);
// The spacing of `dtype`'s values at x (a normal number's ulp; a subnormal one near 0).
double dtype_spacing(DType dtype, double x);
// u_i above, of one row: its dO and its exact O (dim values each).
double delta_uncertainty(DType output_dtype, const float* dout, const double* out, int64_t dim);

// Exact (fp64): the forward row's LSE and D from the exact output.
RowStatistics<double> reference_row_statistics(const Problem& problem,
                                               const AttentionInputs& inputs, int64_t b, int64_t h,
                                               int64_t query);
// dQ of one query row (head_dim_qk values); with dq_envelope, also its envelope.
void reference_dq_row(const Problem& problem, const AttentionInputs& inputs,
                      const RowStatistics<double>& stats, int64_t b, int64_t h, int64_t query,
                      double* dq_row, RowEnvelope* dq_envelope = nullptr);
// dK and dV of key `key` of kv head `kv_head` (head_dim_qk and head_dim_v values). group_stats
// holds the statistics of every query row of the group's heads, (heads_per_kv, seqlen_q), in
// the order of the heads.
void reference_dkv_row(const Problem& problem, const AttentionInputs& inputs,
                       const RowStatistics<double>* group_stats, int64_t b, int64_t kv_head,
                       int64_t key, double* dk_row, double* dv_row,
                       RowEnvelope* dk_envelope = nullptr, RowEnvelope* dv_envelope = nullptr);

// The same at a kernel's precision (see above), returned as float.
RowStatistics<float> lowp_row_statistics(const Problem& problem, const AttentionInputs& inputs,
                                         int64_t b, int64_t h, int64_t query);
void lowp_dq_row(const Problem& problem, const AttentionInputs& inputs,
                 const RowStatistics<float>& stats, int64_t b, int64_t h, int64_t query,
                 float* dq_row);
void lowp_dkv_row(const Problem& problem, const AttentionInputs& inputs,
                  const RowStatistics<float>* group_stats, int64_t b, int64_t kv_head, int64_t key,
                  float* dk_row, float* dv_row);

}  // namespace attnbench
