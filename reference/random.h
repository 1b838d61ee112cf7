// Seeds and the generator behind every random choice of attnbench: splitmix64 and mix_seed derive
// independent seeds (per case, per tensor row, per emulated launch and block) from one seed; a
// small, fast, seedable generator (xoshiro256**) gives every row of a tensor its own stream, so
// inputs are identical however many threads generate them.
#pragma once

#include <cstdint>
#include <limits>

namespace attnbench {

constexpr uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// An independent seed for `salt` (a row, a run, a block) under `seed`.
constexpr uint64_t mix_seed(uint64_t seed, uint64_t salt) {
  uint64_t state = seed ^ (salt * 0xD1B54A32D192ED03ull);
  splitmix64(state);
  return splitmix64(state);
}

class Xoshiro256 {
 public:
  using result_type = uint64_t;
  explicit Xoshiro256(uint64_t seed) {
    for (auto& word : state_) word = splitmix64(seed);
  }
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return std::numeric_limits<result_type>::max(); }
  result_type operator()() {
    const uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

 private:
  static constexpr uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4];
};

}  // namespace attnbench
