// Where kernels get their extra memory. The harness passes a tracking allocator and records
// its high-water mark, so the extra memory of a forward is measured, never declared.
#pragma once

#include <cstddef>
#include <memory>

namespace attnbench {

class ScratchAllocator {
 public:
  virtual ~ScratchAllocator() = default;
  // Aligned to 64 bytes at least; returns nullptr when out of memory.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* pointer) = 0;
};

// RAII owner of one scratch allocation.
class ScratchBuffer {
 public:
  ScratchBuffer() = default;
  ScratchBuffer(ScratchAllocator& allocator, size_t bytes)
      : allocator_(&allocator), data_(allocator.allocate(bytes)), bytes_(bytes) {}
  ScratchBuffer(ScratchBuffer&& other) noexcept { *this = std::move(other); }
  ScratchBuffer& operator=(ScratchBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      allocator_ = other.allocator_;
      data_ = other.data_;
      bytes_ = other.bytes_;
      other.allocator_ = nullptr;
      other.data_ = nullptr;
      other.bytes_ = 0;
    }
    return *this;
  }
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ~ScratchBuffer() { reset(); }

  void reset() {
    if (data_ != nullptr) allocator_->deallocate(data_);
    data_ = nullptr;
    bytes_ = 0;
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  ScratchAllocator* allocator_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace attnbench
