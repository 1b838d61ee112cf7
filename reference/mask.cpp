#include "reference/mask.h"

#include <charconv>

namespace attnbench {
namespace {

constexpr std::string_view kWindowPrefix = "window(";
constexpr int64_t kUnbounded = -1;

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

// A window bound: an integer >= -1 (-1 = unbounded), the whole text and nothing else.
std::optional<int64_t> parse_window_bound(std::string_view text) {
  text = trim(text);
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < kUnbounded) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

std::string mask_name(const Mask& mask) {
  switch (mask.kind) {
    case MaskKind::none:
      return "none";
    case MaskKind::causal:
      return "causal";
    case MaskKind::causal_br:
      return "causal_br";
    case MaskKind::window:
      return "window(" + std::to_string(mask.window_left) + "," +
             std::to_string(mask.window_right) + ")";
    case MaskKind::padding:
      return "padding";
  }
  return "unknown";
}

std::optional<Mask> parse_mask(std::string_view text) {
  text = trim(text);
  if (text == "none") return Mask{MaskKind::none};
  if (text == "causal") return Mask{MaskKind::causal};
  if (text == "causal_br") return Mask{MaskKind::causal_br};
  if (text == "padding") return Mask{MaskKind::padding};
  if (!text.starts_with(kWindowPrefix) || !text.ends_with(")")) return std::nullopt;
  const std::string_view bounds =
      text.substr(kWindowPrefix.size(), text.size() - kWindowPrefix.size() - 1);
  const auto comma = bounds.find(',');
  if (comma == std::string_view::npos) return std::nullopt;
  const auto left = parse_window_bound(bounds.substr(0, comma));
  const auto right = parse_window_bound(bounds.substr(comma + 1));
  if (!left || !right) return std::nullopt;
  return Mask{MaskKind::window, *left, *right};
}

std::string accepted_mask_names() {
  return "none, causal, causal_br, window(L,R) with L, R >= -1 (-1 = unbounded), padding";
}

}  // namespace attnbench
