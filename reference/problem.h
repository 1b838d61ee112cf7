// One attention problem: everything that decides the numbers and the time, the pass included
// (forward, backward, or both as one training step). All of it is part of a series key.
// GQA/MQA when heads_q is a multiple of heads_kv.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "reference/dtype.h"
#include "reference/mask.h"
#include "reference/pass.h"
#include "reference/status.h"
#include "reference/varlen.h"

namespace attnbench {

// bshd: (batch, seq, heads, dim), the default; bhsd: (batch, heads, seq, dim);
// qkv_packed: one (batch, seq, 3, heads, dim) buffer holding q, k and v (BS3HD); its output is
// bshd; thd: a variable-length batch's sequences packed row after row, (total tokens, heads, dim)
// for each tensor (reference/varlen.h), the layout of and only of a varlen problem.
enum class Layout : uint8_t { bshd, bhsd, qkv_packed, thd };

// How FP8 inputs are scaled into range: one factor per tensor, per (batch, head), or per block.
enum class Fp8Scaling : uint8_t { none, per_tensor, per_head, per_block };

// How the backward's upstream gradient dO is drawn, apart from q, k and v's distribution:
// normal N(0, 1); small, N(0, 1) * 2^-12, the size a loss averaged over a few thousand tokens
// hands back (fp16 keeps such values, and the dS they make, near its subnormals); outliers,
// normal with rare large entries (as the inputs' outliers distribution draws them).
enum class UpstreamGradient : uint8_t { normal, small, outliers };

struct Problem {
  int64_t batch = 1;
  int64_t heads_q = 1;
  int64_t heads_kv = 1;
  int64_t seqlen_q = 1;
  int64_t seqlen_k = 1;
  int64_t head_dim_qk = 64;
  int64_t head_dim_v = 64;
  DType input_dtype = DType::f32;
  DType output_dtype = DType::f32;
  DType p_dtype = DType::f32;  // rounding of P before P @ V (e4m3 for FP8 kernels)
  Fp8Scaling fp8_scaling = Fp8Scaling::none;
  Mask mask;
  Layout layout = Layout::bshd;
  double scale = 0;  // softmax scale; 0 means the default 1 / sqrt(head_dim_qk)
  Pass pass = Pass::fwd;
  UpstreamGradient dout = UpstreamGradient::normal;  // a forward has none: always normal there
  Varlen varlen;  // per-sequence lengths (layout thd); none: every sequence seqlen_q x seqlen_k
  // A paged KV cache: K and V live in pages of page_size key rows, shuffled in one pool, each
  // sequence's found through a page table (its last page partial); 0: K and V contiguous.
  int64_t page_size = 0;

  double softmax_scale() const;
  bool has_forward() const { return pass != Pass::bwd; }   // the timed step runs a forward
  bool has_backward() const { return pass != Pass::fwd; }  // ... a backward
  // The gradients' dtype (dQ, dK, dV, and the upstream dO): the output dtype, as a framework's
  // autograd gives the inputs' gradients the dtype of the output they flow back from.
  DType grad_dtype() const { return output_dtype; }
  bool is_varlen() const { return varlen.kind != VarlenKind::none; }
  // Query rows of sequence b: its varlen length, seqlen_q otherwise.
  int64_t query_length(int64_t b) const;
  // Key length of sequence b: its varlen length, padding_key_length for the padding mask,
  // seqlen_k otherwise.
  int64_t key_length(int64_t b) const;
  // Key rows K and V hold for sequence b: its varlen key length, seqlen_k otherwise (the padding
  // mask's hidden keys are stored too).
  int64_t key_rows(int64_t b) const { return is_varlen() ? key_length(b) : seqlen_k; }
  bool is_paged() const { return page_size > 0; }
  // Pages sequence b's keys take in a paged cache: key_rows(b) / page_size, rounded up.
  int64_t pages_of(int64_t b) const { return (key_rows(b) + page_size - 1) / page_size; }
  KeyRange visible(int64_t b, int64_t query) const;
  bool operator==(const Problem&) const = default;
};

// Per-tensor element strides (the head_dim stride is 1) and where each tensor starts.
struct Strides {
  int64_t batch = 0;
  int64_t seq = 0;
  int64_t head = 0;
};
struct TensorPlacement {
  Strides strides;
  int64_t offset = 0;  // first element, in elements of its buffer
  // Layout thd: the row each sequence starts at, batch + 1 entries (cu_seqlens; the last is the
  // total), in place of strides.batch. Empty for the other layouts.
  std::vector<int64_t> sequence_starts;
  // A paged K or V: key row s of sequence b is row s % page_size of page
  // page_table[b * pages_per_sequence + s / page_size], a page being page_size rows of
  // strides.seq; replaces strides.batch and sequence_starts. Empty and 0 when not paged.
  std::vector<int64_t> page_table;
  int64_t page_size = 0;
  int64_t pages_per_sequence = 0;
  // Rows sequence b holds: its length under thd, `dense_rows` (the tensor's seqlen) otherwise.
  int64_t rows(int64_t b, int64_t dense_rows) const {
    if (sequence_starts.empty()) return dense_rows;
    return sequence_starts[static_cast<size_t>(b) + 1] - sequence_starts[static_cast<size_t>(b)];
  }
  // The element (b, s, h, 0): the start of one contiguous row of head_dim elements.
  int64_t row_start(int64_t b, int64_t s, int64_t h) const {
    if (page_size > 0) {
      const int64_t page = page_table[static_cast<size_t>(b * pages_per_sequence + s / page_size)];
      return offset + (page * page_size + s % page_size) * strides.seq + h * strides.head;
    }
    const int64_t sequence = sequence_starts.empty()
                                 ? b * strides.batch
                                 : sequence_starts[static_cast<size_t>(b)] * strides.seq;
    return offset + sequence + s * strides.seq + h * strides.head;
  }
};
// Buffers the harness allocates: q, k, v share the first buffer for qkv_packed. The backward's
// tensors: dO is placed like out; dQ, dK and dV are bshd and contiguous whatever the inputs'
// layout (their own buffers, also for qkv_packed).
struct ProblemLayout {
  TensorPlacement q, k, v, out;
  TensorPlacement dq, dk, dv;
  int64_t q_buffer_elements = 0;  // packed: the whole BS3HD buffer
  int64_t k_buffer_elements = 0;  // packed: 0 (k lives in the q buffer)
  int64_t v_buffer_elements = 0;  // packed: 0
  int64_t out_elements = 0;
  int64_t cache_pages = 0;   // paged: the pages of K's pool (and of V's); 0 otherwise
  int64_t lse_elements = 0;  // (batch, heads_q, seqlen_q) fp32; varlen: rows past a length unused
  int64_t dq_elements = 0;   // as q, k, v unpacked
  int64_t dk_elements = 0;
  int64_t dv_elements = 0;
};
ProblemLayout describe_layout(const Problem& problem);

// Range checks and consistency (heads_q % heads_kv, packed layout needs equal shapes, ...).
Status validate(const Problem& problem);

// Canonical text, also accepted by parse_shape so a printed case can be pasted back:
// b=2,hq=8,hkv=2,sq=113,sk=203,d=64,dtype=bf16,mask=causal_br,pass=bwd,dout=small
// Fields equal to their default (dv == d, out == dtype, layout bshd, default scale, pass fwd,
// dout normal, ...) are omitted: a forward's shape reads as it did before the pass existed.
std::string shape_string(const Problem& problem);

// The same shape in another pass: a forward draws no dO, so its dout is reset to normal (the one
// way a suite's or --pass's expansion changes a problem's pass).
Problem in_pass(Problem problem, Pass pass);

// The shape of the inputs a problem reads: its forward's shape text (every pass of one shape reads
// the same q, k, v; a backward draws dO beside them), the key the passes share inputs by.
std::string inputs_shape(const Problem& problem);

// Parses the --shape syntax: comma-separated key=value with keys b, hq, hkv (default hq),
// sq, sk (s sets both), d (sets qk and v), dqk, dv, dtype, out, p, fp8_scaling, mask, layout,
// scale, pass, dout (only with a backward pass), varlen (reference/varlen.h: sets layout thd; a
// list also sets b, and sq and sk to its longest unless given), page (a paged KV cache's page
// size). The message names the key or value
// that was wrong and what is accepted.
Status parse_shape(std::string_view text, Problem& problem);

// Defaults when a suite or --shape names only the input dtype: the output is the input dtype
// (bf16 for FP8 inputs); P is rounded to e4m3 for FP8 inputs, kept in fp32 otherwise.
DType default_output_dtype(DType input_dtype);
DType default_p_dtype(DType input_dtype);

std::string_view layout_name(Layout layout);
std::optional<Layout> parse_layout(std::string_view text);
std::string accepted_layout_names();  // "bshd, bhsd, qkv_packed, thd"
std::string_view fp8_scaling_name(Fp8Scaling scaling);
std::string accepted_fp8_scaling_names();  // "none, per_tensor, per_head, per_block"
// fwd, bwd, fwd_bwd: the names suites, the CLI, shapes and the database use.
std::string_view pass_name(Pass pass);
std::optional<Pass> parse_pass(std::string_view text);
std::string accepted_pass_names();  // "fwd, bwd, fwd_bwd"
inline constexpr Pass kAllPasses[] = {Pass::fwd, Pass::bwd, Pass::fwd_bwd};
std::optional<Fp8Scaling> parse_fp8_scaling(std::string_view text);
// normal, small, outliers: the names shapes (dout=), suites and the database use.
std::string_view upstream_gradient_name(UpstreamGradient dout);
std::optional<UpstreamGradient> parse_upstream_gradient(std::string_view text);
std::string accepted_upstream_gradient_names();  // "normal, small, outliers"
inline constexpr UpstreamGradient kAllUpstreamGradients[] = {
    UpstreamGradient::normal, UpstreamGradient::small, UpstreamGradient::outliers};

}  // namespace attnbench
