// A status with a message: the library never exits, it returns what went wrong. Both Status and
// Result are [[nodiscard]]: a status is handled (propagated, reported) or, where ignoring it is
// right, cast to void with a comment that says why.
#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace attnbench {

struct [[nodiscard]] Status {
  bool ok = true;
  std::string message;

  static Status Ok() { return {}; }
  static Status Error(std::string message) { return {false, std::move(message)}; }
  explicit operator bool() const { return ok; }
};

// A value, or the status that says why there is none: what a function returns instead of
// filling an out-parameter next to a Status. Built from anything that converts to T (a
// unique_ptr to a derived class, std::nullopt for a Result<std::optional<X>>), or from an error
// status (never an ok one: an ok Result holds a value).
template <typename T>
class [[nodiscard]] Result {
 public:
  // Spelled in C++17: some .cu files (harness/measure/cuda/, tests/) compile as C++17.
  template <typename U = T,
            typename = std::enable_if_t<std::is_convertible_v<U&&, T> &&
                                        !std::is_same_v<std::decay_t<U>, Status> &&
                                        !std::is_same_v<std::decay_t<U>, Result>>>
  Result(U&& value) : value_(std::in_place, std::forward<U>(value)) {}  // NOLINT: implicit
  Result(Status error)  // NOLINT: implicit, an error status
      : status_(error.ok ? Status::Error("internal error: a Result made from an ok status")
                         : std::move(error)) {}
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
