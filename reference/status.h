// A status with a message: the library never exits, it returns what went wrong.
#pragma once

#include <string>
#include <utility>

namespace attnbench {

struct Status {
  bool ok = true;
  std::string message;

  static Status Ok() { return {}; }
  static Status Error(std::string message) { return {false, std::move(message)}; }
  explicit operator bool() const { return ok; }
};

}  // namespace attnbench
