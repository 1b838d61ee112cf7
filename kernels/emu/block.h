// One emulated thread block: its CUDA threads run as fibers (fiber.h) on the calling OS thread,
// each until it reaches a synchronization point or returns; between those points the order of
// the threads is drawn from a seed, so a schedule is reproducible and different seeds try
// different orders. The block keeps CUDA's rules where the hardware leaves them undefined and
// reports them instead of hanging or guessing (issue 14, item 5):
//   - a __syncthreads reached by part of the block only (others returned or wait elsewhere),
//     or from different call sites;
//   - a warp collective (__syncwarp, __shfl*_sync, __ballot_sync) whose mask names a lane that never arrives,
//     that leaves out a lane it reads from, or that lanes call with different masks;
//   - a deadlock: every live thread waits and no wait can be released.
// A report is an EmuError whose one-line message names the threads and the source lines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/emu/fiber.h"

namespace attnbench::emu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  unsigned count() const { return x * y * z; }
};

// Where a thread waits: a source line, as the caller's __builtin_FILE/__builtin_LINE give it.
struct Site {
  const char* file = "";
  int line = 0;
  std::string text() const;
  bool operator==(const Site& other) const {
    return line == other.line && std::strcmp(file, other.file) == 0;
  }
};

class EmuError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

constexpr unsigned kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;

class Block {
 public:
  struct Shape {
    Dim3 block_dim;
    Dim3 block_index;
    Dim3 grid_dim;
    size_t dynamic_shared_bytes = 0;
  };
  Block(const Shape& shape, uint64_t seed);
  ~Block();
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  // Runs `body` as every thread of the block to its end, or throws EmuError with the report.
  void run(const std::function<void()>& body);

  // A hash of the order the threads ran in: equal for equal seeds, different for most others.
  uint64_t schedule_hash() const { return schedule_hash_; }

  // ---- from inside a thread of the running block (current()) ------------------------------
  static Block& current();
  Dim3 thread_index() const;
  Dim3 block_index() const { return shape_.block_index; }
  Dim3 block_dim() const { return shape_.block_dim; }
  Dim3 grid_dim() const { return shape_.grid_dim; }
  unsigned linear_thread() const { return running_; }
  unsigned lane() const { return running_ % kWarpSize; }
  // The block's dynamic shared memory: 16-byte aligned at a seeded offset (not 1024-aligned, as a
  // kernel that assumed more alignment than CUDA promises would otherwise pass by luck).
  void* dynamic_shared() const { return dynamic_shared_; }

  void sync_threads(Site site);
  void sync_warp(unsigned mask, Site site);
  // The __shfl*_sync family: the value of the source lane within segments of `width` lanes.
  // xor_lane: lane ^ arg; index: arg; up: lane - arg; down: lane + arg (a source outside the
  // lane's segment gives its own value, as CUDA defines it).
  enum class Shuffle : uint8_t { xor_lane, index, up, down };
  template <typename T>
  T shfl(Shuffle mode, unsigned mask, T value, int arg, int width, Site site);
  template <typename T>
  T shfl_xor(unsigned mask, T value, int lane_mask, int width, Site site) {
    return shfl(Shuffle::xor_lane, mask, value, lane_mask, width, site);
  }
  // __ballot_sync, __any_sync, __all_sync over the lanes of `mask`.
  unsigned ballot(unsigned mask, bool predicate, Site site);
  bool any(unsigned mask, bool predicate, Site site) { return ballot(mask, predicate, site) != 0; }
  bool all(unsigned mask, bool predicate, Site site) { return ballot(mask, predicate, site) == mask; }

 private:
  enum class Wait : uint8_t { running, barrier, warp, finished };
  struct Thread;

  void schedule();
  void release_ready_waits();
  bool release_barrier();
  bool release_warp(unsigned warp);
  [[noreturn]] void report_stuck();
  enum class Collective : uint8_t { sync_warp, shuffle, ballot };
  uint64_t collective(Collective kind, Shuffle mode, unsigned mask, uint64_t word, int arg, int width,
                      Site site);
  std::string collective_name(const Thread& thread) const;
  static unsigned source_lane(const Thread& member, unsigned lane);
  void wait(Wait kind, Site site, unsigned mask);
  std::string threads_text(const std::vector<unsigned>& threads) const;

  Shape shape_;
  uint64_t rng_state_;  // the seed's stream: the shared-memory offset, then the schedule
  uint64_t schedule_hash_ = 0;
  std::vector<std::unique_ptr<Thread>> threads_;
  unsigned running_ = 0;
  std::vector<unsigned char> shared_storage_;
  void* dynamic_shared_ = nullptr;
  const std::function<void()>* body_ = nullptr;
};

template <typename T>
T Block::shfl(Shuffle mode, unsigned mask, T value, int arg, int width, Site site) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(uint64_t),
                "shuffles move values of up to 8 bytes");
  uint64_t word = 0;
  std::memcpy(&word, &value, sizeof(T));
  word = collective(Collective::shuffle, mode, mask, word, arg, width, site);
  T result;
  std::memcpy(&result, &word, sizeof(T));
  return result;
}

}  // namespace attnbench::emu
