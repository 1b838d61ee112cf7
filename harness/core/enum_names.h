// Reading back an enum that is stored or printed by name: the inverse of its name function, by
// trying every value, so that a name is spelled in one place (the name function) only.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace attnbench {

template <typename Enum, size_t N>
std::optional<Enum> parse_enum_name(const std::array<Enum, N>& values, std::string_view text,
                                    std::string_view (*name)(Enum)) {
  for (Enum value : values) {
    if (name(value) == text) return value;
  }
  return std::nullopt;
}

}  // namespace attnbench
