// The backward's checker: dQ, dK and dV against the exact fp64 backward
// (reference/attention_backward.h), each by FlashAttention's rule
//   max|grad - ref| <= 2 * max|grad_lowp - ref| + atol
// where grad_lowp is the straightforward computation at the kernel's precision and atol twice
// the gradient dtype's rounding of the reference values, plus the largest element of the
// envelope of O's rounding in D (reference/attention_backward.h: a correct forward may round O
// either way, and D reads it), plus, for fp32 gradients, the noise FlashAttention's 16-bit tests
// never meet: two fp32 sums of n terms (eps sqrt(n) max|ref|) and P's relative error from the
// fp32 rounding of its exponent (eps (|s| + |lse|) times the terms' absolute sum), each twice. The
// factor 2 is FlashAttention's, which its backward tests use too: a correct tiled kernel rounds P
// and dS at the same points as the twin and sums in another order, so its error is the twin's give
// or take rounding noise; a dropped term, a missing scale or a skipped block is off by far more.
//
// What is checked: dQ on the forward checker's query rows (select_rows: their statistics read
// from the forward's reference rows, the rows computed on BLAS blocks); dK and dV on key rows of
// chosen (batch, kv head) groups: all of them for a small problem; else the last group (its
// offsets are the largest), then the first and a random one while the fp64 work stays within
// kKeyRowCheckWork, and in each the first and last key, the keys at tile boundaries and random
// ones. A key row sums over every query row of its group, so the statistics (LSE, D) of those
// rows are computed exactly first, on BLAS blocks (group_statistics.h); `plan` shows the cost.
// NaN/Inf counts, poison and canaries cover all of dQ, dK and dV.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/measure/checker.h"
#include "reference/attention_backward.h"

namespace attnbench {

struct KeyRowIndex {
  int64_t b = 0;
  int64_t kv_head = 0;
  int64_t key = 0;
};

// One gradient's bound: 2 * lowp_error + atol.
struct GradientBound {
  double lowp_error = 0;
  double atol = 0;
  double bound() const { return 2 * lowp_error + atol; }
};

struct GradientReference {
  std::vector<RowIndex> query_rows;   // where dQ is checked
  std::vector<KeyRowIndex> key_rows;  // where dK and dV are checked
  bool all_rows = false;              // every row of all three
  std::vector<double> dq, dk, dv;     // exact, (rows, head_dim) each
  std::vector<float> lowp_dq, lowp_dk, lowp_dv;
  GradientBound dq_bound, dk_bound, dv_bound;
};

// Multiply-adds of the groups' statistics (harness/measure/group_statistics.h, BLAS blocks)
// above which dK/dV rows are checked in fewer groups (see above): at the figure shape (8192 rows
// of 8192 keys, d 128) one group, the last.
constexpr double kKeyRowCheckWork = double(int64_t{1} << 33);

// The rows the gradient check reads, chosen as described above (seeded).
struct GradientRows {
  std::vector<RowIndex> query_rows;
  std::vector<KeyRowIndex> key_rows;
  std::vector<std::pair<int64_t, int64_t>> groups;  // (b, kv_head) whose key rows are checked
  bool all_rows = false;
};
GradientRows select_gradient_rows(const Problem& problem, uint64_t seed);
// The multiply-adds of compute_gradient_reference for `problem`, each done twice (exact and at
// the kernel's precision): row by row (the key rows), and on BLAS blocks (the dQ rows and the
// groups' statistics). What `plan` prices.
struct GradientReferenceWork {
  double row_wise = 0;
  double blocked = 0;
};
GradientReferenceWork gradient_reference_work(const Problem& problem, uint64_t seed);

// `forward`: the forward's reference rows of the same inputs and seed (compute_reference), whose
// rows are the dQ rows: their statistics are read from it.
GradientReference compute_gradient_reference(const ProblemInputs& inputs, uint64_t seed,
                                             const ReferenceRows& forward);

// One gradient's result, for the details stored with a backward's result.
struct GradientCheck {
  std::string name;  // dq, dk, dv
  double max_abs_error = 0;
  double bound = 0;
  double rel_l2 = 0;
  int64_t nan_count = 0;
  int64_t inf_count = 0;
};

// Compares the gradients of `outputs` (poisoned, then written by one backward) against the
// reference: the summary carries the gradient nearest its bound (or failing worst), checks gives
// each gradient's figures, failure a one-line reason naming the gradient, the element and both
// values (empty when all pass).
CheckSummary compare_gradients(const ProblemInputs& inputs, const GradientReference& reference,
                               const KernelOutputs& outputs, std::vector<GradientCheck>& checks,
                               std::string& failure);

}  // namespace attnbench
