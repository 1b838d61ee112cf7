// The harness's scratch allocator for host kernels: counts live bytes and keeps the high-water
// mark, so "extra memory per forward" is a measurement. A limit turns a request that would pass
// it into nullptr (the kernel reports out of memory) instead of swapping the machine to death.
#pragma once

#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "kernels/scratch.h"

namespace attnbench {

class TrackingHostAllocator final : public ScratchAllocator {
 public:
  static constexpr size_t kAlignment = 64;  // a cache line; enough for AVX-512 loads

  explicit TrackingHostAllocator(size_t limit_bytes) : limit_bytes_(limit_bytes) {}
  ~TrackingHostAllocator() override {
    for (auto& [pointer, bytes] : live_) std::free(pointer);
  }

  void* allocate(size_t bytes) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (bytes == 0) bytes = 1;
    if (live_bytes_ + bytes > limit_bytes_) return nullptr;
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* pointer = std::aligned_alloc(kAlignment, rounded);
    if (pointer == nullptr) return nullptr;
    live_[pointer] = bytes;
    live_bytes_ += bytes;
    if (live_bytes_ > peak_bytes_) peak_bytes_ = live_bytes_;
    return pointer;
  }

  void deallocate(void* pointer) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(pointer);
    if (it == live_.end()) return;
    live_bytes_ -= it->second;
    live_.erase(it);
    std::free(pointer);
  }

  // The peak since reset_peak above what was live then: one plan's own scratch, also while the
  // plans of an interleaved group (case_runner.h) hold theirs.
  size_t peak_bytes() const { return peak_bytes_ - live_at_reset_; }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_bytes_ = live_at_reset_ = live_bytes_;
  }
  size_t live_bytes() const { return live_bytes_; }
  size_t limit_bytes() const { return limit_bytes_; }
  // Calls visit(pointer, bytes) for every live allocation (the emulated device's bounds: a
  // kernel's scratch is one of the case's buffers).
  template <typename Visit>
  void for_each_live(Visit&& visit) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [pointer, bytes] : live_) visit(static_cast<const void*>(pointer), bytes);
  }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, size_t> live_;
  size_t live_bytes_ = 0;
  size_t peak_bytes_ = 0;
  size_t live_at_reset_ = 0;
  size_t limit_bytes_;
};

}  // namespace attnbench
