// Variable-length batches, as FlashAttention's varlen interface and a serving batch have them:
// sequence b has its own query length and key length, at most the problem's seqlen_q and
// seqlen_k (the maxima, FlashAttention's max_seqlen_q/k). Its tensors are packed, layout thd:
// the rows of every sequence one after another, (total tokens, heads, dim), with cu_seqlens
// (each sequence's first row) saying where a sequence starts. Masks apply per sequence, with
// that sequence's own lengths (causal_br's offset is its key length minus its query length).
//   uniform        each length drawn from a fixed hash of the sequence's index: 1 + hash % max,
//                  the same draw for queries and keys (equal when seqlen_q == seqlen_k), so the
//                  lengths follow from the problem alone and a series key names them
//   list(L,...)    the lengths listed, one per sequence, equal for queries and keys
//   list(Lq:Lk,..) ... with a query and a key length each (a decode batch: list(1:4096,1:917))
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace attnbench {

enum class VarlenKind : uint8_t { none, uniform, list };

struct Varlen {
  VarlenKind kind = VarlenKind::none;
  std::vector<int64_t> query_lengths;  // list only: one per sequence
  std::vector<int64_t> key_lengths;    // list only
  bool operator==(const Varlen&) const = default;
};

// uniform's draw for sequence b: 1 .. max_length.
int64_t uniform_length(int64_t b, int64_t max_length);

// "uniform", "list(120,37,512)", "list(1:4096,2:917)": what shapes and suites spell.
std::string varlen_name(const Varlen& varlen);
// The inverse of varlen_name; lengths may be 0 (a sequence with no query or no key).
std::optional<Varlen> parse_varlen(std::string_view text);
std::string accepted_varlen_names();

}  // namespace attnbench
