#include "harness/core/shell.h"

#include <algorithm>
#include <string_view>

namespace attnbench {
namespace {

bool is_safe(char c) {
  const bool alphanumeric = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  return alphanumeric || std::string_view("@%+=:,./-_").find(c) != std::string_view::npos;
}

}  // namespace

std::string shell_quote(const std::string& text) {
  if (!text.empty() && std::all_of(text.begin(), text.end(), is_safe)) return text;
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted.append("'\\''");
    } else {
      quoted.push_back(c);
    }
  }
  quoted.push_back('\'');
  return quoted;
}

std::string shell_join(const std::vector<std::string>& words) {
  std::string joined;
  for (const std::string& word : words) {
    if (!joined.empty()) joined.push_back(' ');
    joined.append(shell_quote(word));
  }
  return joined;
}

}  // namespace attnbench
