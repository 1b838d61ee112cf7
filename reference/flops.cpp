#include "reference/flops.h"

namespace attnbench {
namespace {

// One multiply and one add per element of q . k (d_qk) and of P @ V (d_v).
constexpr double kFlopsPerMultiplyAdd = 2;
constexpr double kLseBytes = 4;  // fp32 per (batch, head, query)
constexpr double kPageTableEntryBytes = 4;  // int32 per page of a paged cache

// Query and key rows over the whole batch: each sequence's own lengths in a varlen batch (its
// tensors hold no other rows), batch x seqlen otherwise (padding keys are stored and counted).
double query_tokens(const Problem& p) {
  if (!p.is_varlen()) return static_cast<double>(p.batch) * static_cast<double>(p.seqlen_q);
  double tokens = 0;
  for (int64_t b = 0; b < p.batch; ++b) tokens += static_cast<double>(p.query_length(b));
  return tokens;
}
double key_tokens(const Problem& p) {
  if (!p.is_varlen()) return static_cast<double>(p.batch) * static_cast<double>(p.seqlen_k);
  double tokens = 0;
  for (int64_t b = 0; b < p.batch; ++b) tokens += static_cast<double>(p.key_length(b));
  return tokens;
}

double elements(double tokens, int64_t heads, int64_t head_dim) {
  return tokens * static_cast<double>(heads) * static_cast<double>(head_dim);
}

// A paged cache's page table, read once per page of every sequence.
double page_table_bytes(const Problem& p) {
  double pages = 0;
  for (int64_t b = 0; p.is_paged() && b < p.batch; ++b) pages += static_cast<double>(p.pages_of(b));
  return kPageTableEntryBytes * pages;
}

double forward_bytes(const Problem& p) {
  const double input_size = static_cast<double>(dtype_size(p.input_dtype));
  const double output_size = static_cast<double>(dtype_size(p.output_dtype));
  return page_table_bytes(p) +
         input_size * (elements(query_tokens(p), p.heads_q, p.head_dim_qk) +
                       elements(key_tokens(p), p.heads_kv, p.head_dim_qk) +
                       elements(key_tokens(p), p.heads_kv, p.head_dim_v)) +
         output_size * elements(query_tokens(p), p.heads_q, p.head_dim_v);
}

// Reads q, k, v and out (the forward's traffic, with out read instead of written), dO and the
// LSE; writes dQ, dK, dV in the gradient dtype.
double backward_bytes(const Problem& p) {
  const double grad_size = static_cast<double>(dtype_size(p.grad_dtype()));
  const double gradients = elements(query_tokens(p), p.heads_q, p.head_dim_qk) +
                           elements(key_tokens(p), p.heads_kv, p.head_dim_qk) +
                           elements(key_tokens(p), p.heads_kv, p.head_dim_v);
  const double dout = grad_size * elements(query_tokens(p), p.heads_q, p.head_dim_v);
  const double lse = kLseBytes * elements(query_tokens(p), p.heads_q, 1);
  return forward_bytes(p) + dout + lse + grad_size * gradients;
}

}  // namespace

int64_t visible_pairs(const Problem& problem) {
  // Only a varlen batch and the padding mask differ between sequences; the others count one
  // sequence and multiply.
  const bool alike = !problem.is_varlen() && problem.mask.kind != MaskKind::padding;
  const int64_t distinct_batches = alike ? 1 : problem.batch;
  int64_t pairs = 0;
  for (int64_t b = 0; b < distinct_batches; ++b) {
    for (int64_t query = 0; query < problem.query_length(b); ++query) {
      pairs += problem.visible(b, query).size();
    }
  }
  return distinct_batches == 1 ? pairs * problem.batch : pairs;
}

// Multiply-adds per visible pair and query head: the forward's two products, the backward's five.
double flops_per_pair(const Problem& p) {
  const double forward = static_cast<double>(p.head_dim_qk + p.head_dim_v);
  const double backward = static_cast<double>(3 * p.head_dim_qk + 2 * p.head_dim_v);
  return kFlopsPerMultiplyAdd *
         ((p.has_forward() ? forward : 0.0) + (p.has_backward() ? backward : 0.0));
}

double attention_flops(const Problem& problem) {
  return flops_per_pair(problem) *
         static_cast<double>(problem.heads_q) * static_cast<double>(visible_pairs(problem));
}

double attention_bytes(const Problem& problem) {
  return (problem.has_forward() ? forward_bytes(problem) : 0.0) +
         (problem.has_backward() ? backward_bytes(problem) : 0.0);
}

}  // namespace attnbench
