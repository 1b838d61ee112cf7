#include "reference/mask.h"

#include <array>
#include <charconv>

#include "reference/enum_names.h"

namespace attnbench {
namespace {

constexpr std::array kMaskKinds = {MaskKind::none, MaskKind::causal, MaskKind::causal_br,
                                   MaskKind::window, MaskKind::padding};
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

std::string_view mask_name(MaskKind kind) {
  switch (kind) {
    case MaskKind::none:
      return "none";
    case MaskKind::causal:
      return "causal";
    case MaskKind::causal_br:
      return "causal_br";
    case MaskKind::window:
      return "window";
    case MaskKind::padding:
      return "padding";
  }
  return "unknown";
}

std::string mask_name(const Mask& mask) {
  std::string name(mask_name(mask.kind));
  if (mask.kind == MaskKind::window) {
    // Appended piece by piece: GCC 12's -Wrestrict misfires on "(" + std::to_string(...).
    name += '(';
    name += std::to_string(mask.window_left);
    name += ',';
    name += std::to_string(mask.window_right);
    name += ')';
  }
  return name;
}

std::optional<Mask> parse_mask(std::string_view text) {
  text = trim(text);
  for (MaskKind kind : kMaskKinds) {
    if (kind != MaskKind::window && text == mask_name(kind)) return Mask{kind};
  }
  const std::string window_prefix = std::string(mask_name(MaskKind::window)) + "(";
  if (!text.starts_with(window_prefix) || !text.ends_with(")")) return std::nullopt;
  const std::string_view bounds =
      text.substr(window_prefix.size(), text.size() - window_prefix.size() - 1);
  const auto comma = bounds.find(',');
  if (comma == std::string_view::npos) return std::nullopt;
  const auto left = parse_window_bound(bounds.substr(0, comma));
  const auto right = parse_window_bound(bounds.substr(comma + 1));
  if (!left || !right) return std::nullopt;
  return Mask{MaskKind::window, *left, *right};
}

std::optional<MaskKind> parse_mask_kind(std::string_view text) {
  return parse_enum_name(kMaskKinds, text, [](MaskKind kind) { return mask_name(kind); });
}

std::string accepted_mask_names() {
  std::string names;
  for (MaskKind kind : kMaskKinds) {
    names += (names.empty() ? "" : ", ") + std::string(mask_name(kind));
    if (kind == MaskKind::window) names += "(L,R) with L, R >= -1 (-1 = unbounded)";
  }
  return names;
}

}  // namespace attnbench
