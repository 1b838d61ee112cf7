// Text as part of a GoogleTest name (or a file name made from one).
#pragma once

#include <cctype>
#include <string>

namespace attnbench {

// Letters and digits kept, everything else '_' (GoogleTest names take nothing else):
// "cpu.masked_fused" -> "cpu_masked_fused".
inline std::string test_name_part(std::string text) {
  for (char& c : text) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return text;
}

}  // namespace attnbench
