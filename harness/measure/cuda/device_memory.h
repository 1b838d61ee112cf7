// One cudaMalloc allocation, freed on destruction: the harness's own device buffers (inputs,
// outputs, the L2 flush buffer, calibration operands). Plans' scratch comes from the tracking
// DeviceAllocator instead, so that it is measured.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/common/cuda_check.h"

namespace attnbench {

class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() { release(); }

  // Makes the allocation exactly `bytes` long (contents undefined); keeps it when it already is.
  Status resize(size_t bytes) {
    if (bytes == bytes_ && data_ != nullptr) return Status::Ok();
    release();
    ATTNBENCH_CUDA_TRY(cudaMalloc(&data_, bytes));
    bytes_ = bytes;
    return Status::Ok();
  }
  // After a sticky error cudaFree fails; the process, which the parent replaces, takes the
  // memory with it.
  void release() {
    if (data_ != nullptr) cudaFree(data_);
    data_ = nullptr;
    bytes_ = 0;
  }
  unsigned char* data() const { return static_cast<unsigned char*>(data_); }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace attnbench
