#include "reference/varlen.h"

#include <charconv>

#include "reference/random.h"

namespace attnbench {
namespace {

std::optional<int64_t> parse_length(std::string_view text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

// "L" or "Lq:Lk".
bool parse_pair(std::string_view item, Varlen& varlen) {
  const auto colon = item.find(':');
  const auto query = parse_length(item.substr(0, colon));
  const auto key = colon == std::string_view::npos ? query : parse_length(item.substr(colon + 1));
  if (!query || !key) return false;
  varlen.query_lengths.push_back(*query);
  varlen.key_lengths.push_back(*key);
  return true;
}

}  // namespace

int64_t uniform_length(int64_t b, int64_t max_length) {
  uint64_t state = static_cast<uint64_t>(b);  // neighbouring sequences get unrelated lengths
  return 1 + static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(max_length));
}

std::string varlen_name(const Varlen& varlen) {
  switch (varlen.kind) {
    case VarlenKind::none:
      return "none";
    case VarlenKind::uniform:
      return "uniform";
    case VarlenKind::list: {
      std::string text = "list(";
      for (size_t b = 0; b < varlen.query_lengths.size(); ++b) {
        if (b > 0) text += ',';
        text += std::to_string(varlen.query_lengths[b]);
        if (varlen.key_lengths[b] != varlen.query_lengths[b]) {
          text += ':' + std::to_string(varlen.key_lengths[b]);
        }
      }
      return text + ")";
    }
  }
  return "unknown";
}

std::optional<Varlen> parse_varlen(std::string_view text) {
  if (text == "none") return Varlen{};
  if (text == "uniform") {
    Varlen uniform;
    uniform.kind = VarlenKind::uniform;
    return uniform;
  }
  constexpr std::string_view kOpen = "list(";
  if (!text.starts_with(kOpen) || !text.ends_with(')')) return std::nullopt;
  std::string_view items = text.substr(kOpen.size(), text.size() - kOpen.size() - 1);
  Varlen varlen;
  varlen.kind = VarlenKind::list;
  while (true) {
    const auto comma = items.find(',');
    if (!parse_pair(items.substr(0, comma), varlen)) return std::nullopt;
    if (comma == std::string_view::npos) break;
    items.remove_prefix(comma + 1);
  }
  return varlen;
}

std::string accepted_varlen_names() {
  return "none, uniform, list(L,...) or list(Lq:Lk,...) with one length (0 or more) per sequence";
}

}  // namespace attnbench
