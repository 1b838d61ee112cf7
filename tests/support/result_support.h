// How the tests read a Result<T> (reference/status.h) they go on with: its value, or the end of
// the test with the status's message. A test that expects an error checks ok() and status().
#pragma once

#include <stdexcept>
#include <utility>

#include "reference/status.h"

namespace attnbench {

// The value. Without one this throws: GoogleTest fails the test, naming the status's message,
// and nothing reads a value that is not there.
template <typename T>
T value_of(Result<T> result) {
  if (!result) throw std::runtime_error("expected a value: " + result.status().message);
  return std::move(*result);
}

}  // namespace attnbench
