// flush_l2_by_reading: a grid-stride read of the flush buffer, 16 bytes per thread per step,
// folded into a value the compiler cannot drop (it is written only if it equals a sentinel the
// fold never produces, so nothing is ever written).
#include <cstdint>

#include "harness/measure/cuda/l2_flush.h"
#include "kernels/cuda/common/cuda_check.h"

namespace attnbench {
namespace {

constexpr int kThreadsPerBlock = 256;
// Enough blocks to keep every SM's load units busy; the loop strides over the rest.
constexpr int kBlocksPerLaunch = 1024;
// The fold is an XOR of 32-bit words of the buffer; it never reaches this value when the buffer
// holds one repeated byte (the harness fills it with 0x5A: every word is 0x5A5A5A5A, so any XOR
// of them is 0 or 0x5A5A5A5A).
constexpr uint32_t kNeverFolded = 0x00000001u;

__global__ void read_everything(const uint4* __restrict__ buffer, size_t vectors, uint32_t* sink) {
  uint32_t fold = 0;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < vectors;
       i += stride) {
    const uint4 v = buffer[i];
    fold ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (fold == kNeverFolded) *sink = fold;
}

}  // namespace

Status flush_l2_by_reading(const void* buffer, size_t bytes, cudaStream_t stream) {
  const size_t vectors = bytes / sizeof(uint4);
  if (vectors == 0) return Status::Ok();
  // The sink is never written (see kNeverFolded); the buffer's own first word serves as its
  // address so the kernel needs no allocation of its own.
  auto* sink = const_cast<uint32_t*>(static_cast<const uint32_t*>(buffer));
  read_everything<<<kBlocksPerLaunch, kThreadsPerBlock, 0, stream>>>(
      static_cast<const uint4*>(buffer), vectors, sink);
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return Status::Ok();
}

}  // namespace attnbench
