// cuda.flash1's host-visible side: its tile sizes, the state it keeps in device memory between
// K/V blocks, how many launches one forward takes, and the per-instantiation entry points
// (defined in flash1_hdim<D>_<dtype>.cu from the kernel in flash1.cuh). Host code may include
// this; the CPU tests pin the launch count and scratch size to hand-computed values.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/visible_tiles.h"
#include "kernels/kernel.h"

namespace attnbench::gpu::flash1 {

// Tile choice: 64 query rows x 64 keys per block and launch, for both head dims.
//   - 64 x 64 scores over 256 threads is a 4 x 4 micro-tile per thread: 16 FMAs for 8 shared
//     loads in the QK^T loop, and 16 threads per query row, so a row's max and sum are a
//     half-warp shuffle (no shared memory, no block barrier).
//   - Shared memory holds Q, K and V tiles in the input dtype (64 x (d + 2) each) and the P
//     tile in fp32 (64 x 80): 45 KiB at d = 64, 69 KiB at d = 128, so the shared memory of
//     3 blocks fits an SM on an H200 (228 KiB) and of 2 on an A100 (164 KiB) at d = 128; the
//     launch bounds cap registers at 128 a thread, so 2 blocks (16 warps) always fit (ptxas:
//     96 registers at d = 64, 118-120 at d = 128, no spills).
//   - kBlockK sets the number of launches (FA1's outer loop: one launch per K/V block) and how
//     often O, l and m make the round trip to device memory: 64 keys keep the FA1 paper's
//     order of magnitude (B_c = M / 4d with M of about 100 KB of SRAM per block).
inline constexpr int kBlockQ = 64;
inline constexpr int kBlockK = 64;

// What the kernel keeps in device memory between K/V blocks (FA1's O, l and m), fp32, from the
// plan's scratch. Rows r = (batch * heads_q + head) * seqlen_q + query.
struct State {
  float* out = nullptr;  // (batch, heads_q, seqlen_q, head_dim_v): unnormalized O
  float* max = nullptr;  // (batch, heads_q, seqlen_q): running max m, log2 units
  float* sum = nullptr;  // (batch, heads_q, seqlen_q): running sum l
};

// One launch per K/V block.
inline int64_t launch_count(const Problem& problem) {
  return tile_count(problem.seqlen_k, kBlockK);
}

// O, m and l: b * hq * sq * (dv + 2) fp32 — flat in seqlen_k.
inline size_t state_elements(const Problem& problem) {
  return static_cast<size_t>(problem.batch) * static_cast<size_t>(problem.heads_q) *
         static_cast<size_t>(problem.seqlen_q) * static_cast<size_t>(problem.head_dim_v + 2);
}
inline size_t scratch_bytes(const Problem& problem) {
  return state_elements(problem) * sizeof(float);
}

inline namespace ATTNBENCH_TARGET {

// One instantiation per head dim and input dtype (the output dtype is the input's).
template <int kHeadDim, DType kInput>
struct Instance {
  // Allows the kernel's dynamic shared memory above the 48 KiB default on the current device.
  static Status configure();
  // The launch for K/V block `kv_block` of launch_count(problem): the first starts the state,
  // the last normalizes and writes out (and LSE).
  static Status launch(const AttentionParams& params, const State& state, int64_t kv_block,
                       cudaStream_t stream);
};

extern template struct Instance<64, DType::f16>;
extern template struct Instance<64, DType::bf16>;
extern template struct Instance<128, DType::f16>;
extern template struct Instance<128, DType::bf16>;

}  // namespace ATTNBENCH_TARGET

}  // namespace attnbench::gpu::flash1
