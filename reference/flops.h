// FLOP and byte counts, FlashAttention's convention: forward = 2 * (d_qk + d_v) FLOPs per
// visible (query, key) pair per query head — 4 * b * h_q * s_q * avg_keys * d when d_qk == d_v
// — counting only unmasked keys (causal roughly halves it). The backward counts its five matrix
// products over the same pairs: S = Q K^T recomputed (d_qk), dV = P^T dO (d_v), dP = dO V^T
// (d_v), dQ = dS K (d_qk), dK = dS^T Q (d_qk): 2 * (3 d_qk + 2 d_v) per pair, 2.5 times the
// forward at d_qk == d_v (FlashAttention's 2.5x, cuDNN's five GEMMs). fwd_bwd is the sum.
// Bytes = the minimum HBM traffic of the pass, each tensor read or written once in its dtype:
// forward reads q, k, v and writes out; backward reads q, k, v, out, dO and the LSE and writes
// dQ, dK, dV; fwd_bwd is the forward's traffic plus the backward's. A varlen batch counts each
// sequence's own pairs and rows (its tensors hold nothing else); a paged cache adds its page
// table (4 bytes per page), its K and V counted over the rows they hold, not whole pages.
#pragma once

#include <cstdint>

#include "reference/problem.h"

namespace attnbench {

// Number of visible (query, key) pairs summed over batch and query rows, for one head.
int64_t visible_pairs(const Problem& problem);
// FLOPs per visible (query, key) pair and query head in problem.pass: 2 * (d_qk + d_v) forward,
// 2 * (3 d_qk + 2 d_v) backward, their sum for fwd_bwd.
double flops_per_pair(const Problem& problem);
// Of problem.pass.
double attention_flops(const Problem& problem);
double attention_bytes(const Problem& problem);

}  // namespace attnbench
