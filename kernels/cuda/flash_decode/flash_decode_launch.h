// cuda.flash_decode's host-visible side: how many splits a problem's keys are cut into, the fp32
// workspace the splits hand to the combine, and the launch function of each instantiation
// (flash_decode_kernel.cuh, instantiated in flash_decode_instances.cu). The plan
// (flash_decode.cpp) and the CPU tests include this header without any device code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/kernel.h"
#include "kernels/params.h"
#include "reference/status.h"

namespace attnbench::flash_decode {

// A decode step's queries: at most this many query rows per sequence (speculative decoding's
// few drafted tokens); longer query sequences are prefill, for the tiled kernels.
inline constexpr int64_t kMaxQueryRows = 16;
// Fewer keys than this per split would spend more on the combine's partial rows than the split
// saves in parallelism (FlashDecoding splits long caches; a short one runs whole).
inline constexpr int64_t kMinKeysPerSplit = 256;
// The most splits of one sequence: 2 x 132 SMs of an H100/H200 at batch 1 and one KV head.
inline constexpr int64_t kMaxSplits = 256;

// The splits of `problem` on a device of `sm_count` SMs when none is given: enough (batch x KV
// head x split) blocks for two per SM, but no split under kMinKeysPerSplit keys of the longest
// sequence.
inline int64_t default_splits(const Problem& problem, int sm_count) {
  const int64_t blocks = problem.batch * problem.heads_kv;
  const int64_t for_the_sms = (2 * static_cast<int64_t>(sm_count) + blocks - 1) / blocks;
  const int64_t for_the_keys = (problem.seqlen_k + kMinKeysPerSplit - 1) / kMinKeysPerSplit;
  const int64_t splits = for_the_sms < for_the_keys ? for_the_sms : for_the_keys;
  return splits < 1 ? 1 : (splits > kMaxSplits ? kMaxSplits : splits);
}

// The workspace of `splits` splits: each split's normalized O and natural-log LSE per (batch,
// query head, query row), fp32: splits x batch x heads_q x seqlen_q x (head_dim_v + 1).
struct Workspace {
  float* out = nullptr;  // (splits, batch, heads_q, seqlen_q, head_dim_v)
  float* lse = nullptr;  // (splits, batch, heads_q, seqlen_q)
};
inline size_t workspace_bytes(const Problem& problem, int64_t splits) {
  return static_cast<size_t>(splits * problem.batch * problem.heads_q * problem.seqlen_q *
                             (problem.head_dim_v + 1)) *
         sizeof(float);
}

inline namespace ATTNBENCH_TARGET {

// One forward on `stream`: the split kernel over (splits, heads_kv, batch), then the combine over
// every (batch, head, query row). fp16/bf16 tensors of head dim HeadDim (Q, K, V and O alike).
template <int HeadDim, DType kDtype>
Status launch_flash_decode(const AttentionParams& params, const Workspace& workspace, int splits,
                           cudaStream_t stream);

#define ATTNBENCH_FLASH_DECODE(dim, dtype)                       \
  extern template Status launch_flash_decode<dim, DType::dtype>( \
      const AttentionParams&, const Workspace&, int, cudaStream_t)
ATTNBENCH_FLASH_DECODE(64, f16);
ATTNBENCH_FLASH_DECODE(64, bf16);
ATTNBENCH_FLASH_DECODE(128, f16);
ATTNBENCH_FLASH_DECODE(128, bf16);
#undef ATTNBENCH_FLASH_DECODE

using LaunchFunction = Status (*)(const AttentionParams&, const Workspace&, int, cudaStream_t);
struct Instantiation {
  int64_t head_dim;
  DType dtype;
  LaunchFunction launch;
};

// The Kernel entry of cuda.flash_decode over `instantiations` (the four above for the real
// kernel; a planted-bug copy's own under its name). `fixed_splits` > 0 makes a variant that always
// cuts the keys into that many splits (cuda.flash_decode[splits=1] is the unsplit kernel).
Kernel flash_decode_kernel_entry(std::string name, std::string summary,
                                 std::vector<Instantiation> instantiations,
                                 int64_t fixed_splits = 0);

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash_decode
