#include "reference/flops.h"

namespace attnbench {
namespace {

// One multiply and one add per element of q . k (d_qk) and of P @ V (d_v).
constexpr double kFlopsPerMultiplyAdd = 2;

}  // namespace

int64_t visible_pairs(const Problem& problem) {
  // Only the padding mask differs between batches; the others count one batch and multiply.
  const int64_t distinct_batches = problem.mask.kind == MaskKind::padding ? problem.batch : 1;
  int64_t pairs = 0;
  for (int64_t b = 0; b < distinct_batches; ++b) {
    for (int64_t query = 0; query < problem.seqlen_q; ++query) {
      pairs += problem.visible(b, query).size();
    }
  }
  return distinct_batches == 1 ? pairs * problem.batch : pairs;
}

double attention_flops(const Problem& problem) {
  return kFlopsPerMultiplyAdd * static_cast<double>(problem.head_dim_qk + problem.head_dim_v) *
         static_cast<double>(problem.heads_q) * static_cast<double>(visible_pairs(problem));
}

double attention_bytes(const Problem& problem) {
  const auto elements = [](int64_t seqlen, int64_t heads, int64_t head_dim, int64_t batch) {
    return static_cast<double>(batch) * static_cast<double>(seqlen) * static_cast<double>(heads) *
           static_cast<double>(head_dim);
  };
  const double input_size = static_cast<double>(dtype_size(problem.input_dtype));
  const double output_size = static_cast<double>(dtype_size(problem.output_dtype));
  const Problem& p = problem;
  return input_size * (elements(p.seqlen_q, p.heads_q, p.head_dim_qk, p.batch) +
                       elements(p.seqlen_k, p.heads_kv, p.head_dim_qk, p.batch) +
                       elements(p.seqlen_k, p.heads_kv, p.head_dim_v, p.batch)) +
         output_size * elements(p.seqlen_q, p.heads_q, p.head_dim_v, p.batch);
}

}  // namespace attnbench
