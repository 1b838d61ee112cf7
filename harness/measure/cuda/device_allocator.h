// The harness's scratch allocator for GPU plans: cudaMalloc/cudaFree with live bytes and a
// high-water mark, so "extra device memory per forward" is a measurement. A limit turns a
// request that would pass it into nullptr (the kernel reports out of memory and the case is
// skipped) before the GPU itself runs out and takes the inputs, outputs and flush buffer with it.
#pragma once

#include <cstddef>
#include <mutex>
#include <unordered_map>

#include "kernels/scratch.h"

namespace attnbench {

class DeviceAllocator final : public ScratchAllocator {
 public:
  explicit DeviceAllocator(size_t limit_bytes) : limit_bytes_(limit_bytes) {}
  ~DeviceAllocator() override;  // frees whatever plans left behind
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // cudaMalloc memory (256-byte aligned) on the current device; nullptr past the limit or when
  // the GPU has no more memory.
  void* allocate(size_t bytes) override;
  void deallocate(void* pointer) override;

  size_t live_bytes() const;
  // The peak since reset_peak above what was live then: the next plan's extra memory, measured
  // alone even while other plans hold theirs.
  size_t peak_bytes() const;
  size_t limit_bytes() const { return limit_bytes_; }
  void reset_peak();

 private:
  mutable std::mutex mutex_;
  std::unordered_map<void*, size_t> live_;
  size_t live_bytes_ = 0;
  size_t peak_bytes_ = 0;
  size_t live_at_reset_ = 0;
  size_t limit_bytes_;
};

}  // namespace attnbench
