// The naive CUDA family's host side: cuda.naive and the three cuda.masked_* variants differ only
// in where the mask is applied (MaskStep). One plan chains naive_steps.h's launches; one bytes
// model predicts each variant's time from the calibrated copy bandwidth. Host code, compiled by
// the host compiler; the tier-1 support table is shared with cuda.flash1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/kernel.h"

namespace attnbench::gpu {

// A backward bug planted on purpose (tests/test_kernels/planted/planted_naive_backward.cpp,
// test.cuda_naive_bwd_*): the checker must fail each, naming the gradient it breaks. Each is a
// change of the steps' operands on the host; none is in the device code.
enum class NaiveBackwardBug : uint8_t {
  none,
  no_softmax_scale,  // dS without the softmax scale the scores were taken with
  delta_from_dout,   // D = dO . dO instead of dO . O
  gqa_not_summed,    // dK and dV from one query head per kv head, not the group's sum
};

inline namespace ATTNBENCH_TARGET {

enum class MaskStep : uint8_t {
  in_scores,     // cuda.naive: the scores kernel writes -inf at masked keys
  out_of_place,  // cuda.masked_outofplace: a separate pass writes a masked copy of S
  in_place,      // cuda.masked_inplace: a separate pass writes -inf over the masked entries of S
  fused,         // cuda.masked_fused: the softmax reads only the visible keys
};

// The in-house tier-1 table (issue 4, item 1): fp16 and bf16 in, the same dtype out, fp32
// accumulation; head dims 64 and 128 (head_dim_v = head_dim_qk); every mask; bshd, bhsd and
// packed QKV (all three are strides); GQA and MQA; any seqlen, seqlen_q != seqlen_k; sm_80 and
// sm_90 (SASS for both, compute_80 PTX for newer GPUs).
SupportTable tier1_support_table(std::string notes);
// The naive family's (cuda.naive, cuda.masked_*): tier 1's with any even head dim up to 256 and
// head_dim_v its own.
SupportTable naive_support_table(std::string notes);

// Device-memory bytes one forward moves, term by term (naive_family.cpp says why each term is
// what it is). Terms in bytes; total() is what Kernel::bytes_moved returns.
struct NaiveBytes {
  double q = 0, k = 0, v = 0;  // inputs, each unique element read once
  double scores_write = 0;     // scores kernel: S written in full
  double mask_read = 0;        // mask pass: S read (out of place)
  double mask_write = 0;       // mask pass: the copy (out of place) or the masked entries
  double softmax_read = 0;     // softmax: its input matrix, or the visible scores (fused)
  double softmax_write = 0;    // softmax: P written in full
  double lse = 0;              // softmax: LSE, fp32 per (batch, head, query)
  double output_read = 0;      // output kernel: P read in full
  double out = 0;              // output kernel: out written in the output dtype
  double total() const {
    return q + k + v + scores_write + mask_read + mask_write + softmax_read + softmax_write + lse +
           output_read + out;
  }
};
NaiveBytes naive_bytes(const Problem& problem, MaskStep step);

// Scratch of one plan: S (b*hq*sq*sk fp32; P is written over it), twice that out of place; a
// problem with a backward adds one more for dP (dS written over it).
size_t naive_scratch_bytes(const Problem& problem, MaskStep step);

// Launches of one timed step of the problem's pass: a forward's scores, softmax and output, and
// the separate mask pass out of place and in place; a backward's seven (S, softmax, dP, dS, dQ,
// dK, dV). naive_family.cpp's run() and run_backward() make exactly these.
int naive_launch_count(const Problem& problem, MaskStep step);

// The Kernel entry (name, summary, table, bytes model, plan factory) of one variant; `bug` plants
// a backward bug (tests only).
Kernel naive_family_kernel(MaskStep step, NaiveBackwardBug bug = NaiveBackwardBug::none);

// Launch-time guard shared by the family and cuda.flash1: q, k, v and out start on `alignment`
// bytes and every row, head and batch stride is a whole number of `alignment`-byte steps, so
// vector loads of that width are legal. Every layout of describe_layout meets it for head dims
// 64 and 128 and 16 bytes; an error (not a skip) names the first offender otherwise.
Status check_alignment(const AttentionParams& params, size_t alignment, const std::string& kernel);

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::gpu
