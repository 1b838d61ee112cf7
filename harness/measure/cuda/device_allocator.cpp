#include "harness/measure/cuda/device_allocator.h"

#include <cuda_runtime.h>

namespace attnbench {

DeviceAllocator::~DeviceAllocator() {
  // Nothing to report from a destructor: after a sticky error cudaFree fails and the process,
  // which the parent is about to replace, takes the memory with it.
  for (auto& [pointer, bytes] : live_) cudaFree(pointer);
}

void* DeviceAllocator::allocate(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (bytes == 0) bytes = 1;
  if (live_bytes_ + bytes > limit_bytes_) return nullptr;
  void* pointer = nullptr;
  if (cudaMalloc(&pointer, bytes) != cudaSuccess) {
    // An allocation failure is not sticky: clear it so the next launch check does not report it.
    cudaGetLastError();
    return nullptr;
  }
  live_[pointer] = bytes;
  live_bytes_ += bytes;
  if (live_bytes_ > peak_bytes_) peak_bytes_ = live_bytes_;
  return pointer;
}

void DeviceAllocator::deallocate(void* pointer) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(pointer);
  if (it == live_.end()) return;
  live_bytes_ -= it->second;
  live_.erase(it);
  cudaFree(pointer);
}

size_t DeviceAllocator::live_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_bytes_;
}

size_t DeviceAllocator::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_bytes_ - live_at_reset_;
}

void DeviceAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  peak_bytes_ = live_at_reset_ = live_bytes_;
}

}  // namespace attnbench
