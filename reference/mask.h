// Attention masks. Query i in [0, seqlen_q), key j in [0, seqlen_k), offset = seqlen_k - seqlen_q.
//   none       every key
//   causal     top-left aligned (PyTorch's is_causal): j <= i
//   causal_br  bottom-right aligned (FlashAttention's causal when seqlen_q != seqlen_k): j <= i +
//   offset window     FlashAttention's local attention, bottom-right aligned:
//              i + offset - left <= j <= i + offset + right, -1 meaning unbounded on that side
//   padding    per-batch valid key lengths: j < key_length(b)
// Every mask keeps one contiguous range of keys per row, so a kernel can skip whole tiles and
// FLOP counting is exact. A row with no visible key outputs 0 (and LSE -inf), never NaN.
// This header is shared by host and device code: one definition of visibility everywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#if defined(__CUDACC__)
#define ATTNBENCH_HOST_DEVICE __host__ __device__
#else
#define ATTNBENCH_HOST_DEVICE
#endif

namespace attnbench {

enum class MaskKind : uint8_t { none, causal, causal_br, window, padding };

struct Mask {
  MaskKind kind = MaskKind::none;
  int64_t window_left = -1;   // window only; -1 = unbounded
  int64_t window_right = -1;  // window only; -1 = unbounded
  bool operator==(const Mask&) const = default;
};

// Half-open range [begin, end) of visible keys for one query row; empty when begin >= end.
struct KeyRange {
  int64_t begin;
  int64_t end;
  ATTNBENCH_HOST_DEVICE constexpr int64_t size() const { return end > begin ? end - begin : 0; }
};

ATTNBENCH_HOST_DEVICE constexpr int64_t clamp_index(int64_t value, int64_t low, int64_t high) {
  return value < low ? low : (value > high ? high : value);
}

// key_length is the batch's valid key count (padding); other masks ignore it.
ATTNBENCH_HOST_DEVICE constexpr KeyRange visible_keys(MaskKind kind, int64_t window_left,
                                                      int64_t window_right, int64_t query,
                                                      int64_t seqlen_q, int64_t seqlen_k,
                                                      int64_t key_length) {
  const int64_t offset = seqlen_k - seqlen_q;
  int64_t begin = 0;
  int64_t end = seqlen_k;
  switch (kind) {
    case MaskKind::none:
      break;
    case MaskKind::causal:
      end = query + 1;
      break;
    case MaskKind::causal_br:
      end = query + offset + 1;
      break;
    case MaskKind::window:
      if (window_left >= 0) begin = query + offset - window_left;
      if (window_right >= 0) end = query + offset + window_right + 1;
      break;
    case MaskKind::padding:
      end = key_length;
      break;
  }
  return {clamp_index(begin, 0, seqlen_k), clamp_index(end, 0, seqlen_k)};
}

// Valid key length of batch `b` under the padding mask: ((b + 1) * seqlen_k) / (batch + 1), so
// every batch is padded, lengths differ, and the rule is reproducible from the problem alone.
ATTNBENCH_HOST_DEVICE constexpr int64_t padding_key_length(int64_t b, int64_t batch,
                                                           int64_t seqlen_k) {
  return ((b + 1) * seqlen_k) / (batch + 1);
}

// "none", "causal", "causal_br", "window(L,R)", "padding".
std::string mask_name(const Mask& mask);
// A kind's name, without window bounds: "none", "causal", "causal_br", "window", "padding" (as
// support tables list masks and the store's mask_kind column holds them). The one spelling of
// the names: mask_name(Mask), parse_mask and accepted_mask_names are built on it.
std::string_view mask_name(MaskKind kind);
// Parses the names above; window also as "window(L,R)" with L, R >= -1.
std::optional<Mask> parse_mask(std::string_view text);
// The inverse of mask_name(MaskKind): "window" without bounds; nullopt for any other text.
std::optional<MaskKind> parse_mask_kind(std::string_view text);
std::string accepted_mask_names();

}  // namespace attnbench
