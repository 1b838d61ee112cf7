// Enums stored, printed and parsed by name: the name function spells each name in one place; its
// inverse tries every value, and the list a message gives as "accepted" joins every name.
#pragma once

#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace attnbench {

// The value of `values` whose name(value) is `text`, or nullopt.
template <typename Values, typename Name>
auto parse_enum_name(const Values& values, std::string_view text, Name name)
    -> std::optional<std::decay_t<decltype(*std::begin(values))>> {
  for (const auto value : values) {
    if (name(value) == text) return value;
  }
  return std::nullopt;
}

// "a, b, c": every value's name, in order.
template <typename Values, typename Name>
std::string join_enum_names(const Values& values, Name name) {
  std::string names;
  for (const auto value : values) {
    if (!names.empty()) names += ", ";
    names += name(value);
  }
  return names;
}

}  // namespace attnbench
