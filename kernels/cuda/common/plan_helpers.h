// What every GPU plan needs besides its kernels: device scratch with a readable out-of-memory
// message, the device's SM version for arch gates, a guard that the params a plan runs with
// describe the problem it was built for, and plain dtype facts. Host code, included by g++ and
// nvcc translation units alike.
#pragma once

#include <cstddef>
#include <string_view>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/kernel.h"

namespace attnbench::gpu {
inline namespace ATTNBENCH_TARGET {

// One device scratch allocation from the harness's tracking allocator, or
// "out of memory: <what> needs <N> MiB". Zero bytes succeeds with an empty buffer (cudaMalloc of
// nothing is not an allocation).
Status allocate_scratch(ScratchAllocator& allocator, size_t bytes, std::string_view what,
                        ScratchBuffer& buffer);

// 80 for sm_80, 90 for sm_90, 100 for sm_100: what arch gates compare against.
Status sm_version(int device, int& version);

// run's gate: shapes, dtypes, mask and strides of `params` must be those of the planned problem
// (the plan's graphs, pointer arrays and scratch were sized for it).
Status check_params_match(const Problem& planned, const AttentionParams& params);

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::gpu
