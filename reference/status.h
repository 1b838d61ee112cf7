// A status with a message: the library never exits, it returns what went wrong.
#pragma once

#include <optional>
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

// A value, or the status that says why there is none: what a function returns instead of
// filling an out-parameter next to a Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status error) : status_(std::move(error)) {}  // NOLINT: an error status
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Status& status() const { return status_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace attnbench
