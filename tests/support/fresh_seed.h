// A fresh seed for a test's random draws: 64 bits from the system's entropy, new on every run (a
// test never runs on fixed inputs). A test prints or traces the seed it drew; setting
// ATTNBENCH_TEST_SEED=<that seed> makes fresh_seed() return it, to replay the failure.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <random>

namespace attnbench {

inline uint64_t fresh_seed() {
  if (const char* fixed = std::getenv("ATTNBENCH_TEST_SEED"); fixed != nullptr && *fixed != 0) {
    return std::strtoull(fixed, nullptr, 10);
  }
  return (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
}

}  // namespace attnbench
