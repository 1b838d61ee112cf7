// FLOP and byte counts, FlashAttention's convention: forward = 2 * (d_qk + d_v) FLOPs per
// visible (query, key) pair per query head — 4 * b * h_q * s_q * avg_keys * d when d_qk == d_v
// — counting only unmasked keys (causal roughly halves it). Bytes = the minimum HBM traffic:
// read q, k, v once and write out once, in their dtypes.
#pragma once

#include <cstdint>

#include "reference/problem.h"

namespace attnbench {

// Number of visible (query, key) pairs summed over batch and query rows, for one head.
int64_t visible_pairs(const Problem& problem);
double attention_flops(const Problem& problem);
double attention_bytes(const Problem& problem);

}  // namespace attnbench
