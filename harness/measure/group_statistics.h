// The gradients' reference on BLAS blocks (harness/measure/gradient_checker.h): the row
// statistics (LSE, D, D's uncertainty) of every query row of one (batch, kv head) group, which
// its key rows need, and the dQ rows of one head. The same quantities as reference/
// attention_backward.h's row-by-row functions (reference_row_statistics, lowp_row_statistics,
// reference_dq_row and lowp_dq_row with their envelopes), in another summation order. fp64 GEMMs
// over the stored values are exact in every product, as the row-wise reference is; the
// low-precision ones are fp32 GEMMs, rounding P and O where lowp_row does. At the figure shape
// (8192 query rows of one head, 8192 keys, d 128) the row-wise pair took minutes on two cores; the
// blocks take seconds.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/attention_backward.h"

namespace attnbench {

// Rows in the order the key rows read them: (head of the group, query), heads_per_kv x seqlen_q.
void group_statistics(const Problem& problem, const AttentionInputs& inputs, int64_t b,
                      int64_t kv_head, std::vector<RowStatistics<double>>& exact,
                      std::vector<RowStatistics<float>>& lowp);

// dQ of the query rows `queries` of head h of batch b (their statistics given, in that order):
// exact (fp64 GEMMs) into dq, with their envelopes, and at the kernel's precision (fp32 GEMMs,
// dS rounded to operand_dtype) into lowp_dq; rows of head_dim_qk values.
void head_dq_rows(const Problem& problem, const AttentionInputs& inputs, int64_t b, int64_t h,
                  const std::vector<int64_t>& queries,
                  const std::vector<RowStatistics<double>>& exact,
                  const std::vector<RowStatistics<float>>& lowp, double* dq, float* lowp_dq,
                  RowEnvelope* envelopes);

}  // namespace attnbench
