// What every GPU plan needs besides its kernels: device scratch with a readable out-of-memory
// message, the device's SM version for arch gates, a guard that the params a plan runs with
// describe the problem it was built for, the shared-memory gate and the instantiation table of
// the tiled kernels (flash2, flash3). Host code, included by g++ and nvcc translation units alike.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

// The device's streaming multiprocessors: a persistent grid's size.
Status sm_count(int device, int& count);

// run's gate: shapes, dtypes, mask and strides of `params` must be those of the planned problem
// (the plan's graphs, pointer arrays and scratch were sized for it).
Status check_params_match(const Problem& planned, const AttentionParams& params);

// "unsupported: <what> needs N KiB of shared memory per block; the device offers M KiB" when
// the device's opt-in limit is below `bytes`.
Status check_shared_memory(int device, size_t bytes, const std::string& what);

// A kernel compiled for some (head dim, dtype) pairs: any type with `head_dim` and `dtype`
// members (flash2::Instantiation, flash3::Instantiation), and `head_dim_v` where V's head dim may
// differ (flash2's; otherwise it is head_dim). The one for the problem, or null.
template <typename Instantiation>
const Instantiation* find_instantiation(const std::vector<Instantiation>& instantiations,
                                        const Problem& problem) {
  for (const Instantiation& instantiation : instantiations) {
    int64_t head_dim_v = instantiation.head_dim;
    if constexpr (requires { instantiation.head_dim_v; }) head_dim_v = instantiation.head_dim_v;
    if (instantiation.head_dim == problem.head_dim_qk && head_dim_v == problem.head_dim_v &&
        instantiation.dtype == problem.input_dtype) {
      return &instantiation;
    }
  }
  return nullptr;
}

// The support table's dtypes and head dims: those instantiated, each once, in table order; an
// instantiation whose head_dim_v differs from its head_dim gives a head-dim pair.
template <typename Instantiation>
void add_instantiated(SupportTable& table, const std::vector<Instantiation>& instantiations) {
  for (const Instantiation& instantiation : instantiations) {
    if (std::find(table.input_dtypes.begin(), table.input_dtypes.end(), instantiation.dtype) ==
        table.input_dtypes.end()) {
      table.input_dtypes.push_back(instantiation.dtype);
    }
    if constexpr (requires { instantiation.head_dim_v; }) {
      const HeadDimPair pair{instantiation.head_dim, instantiation.head_dim_v};
      if (pair.qk != pair.v) {
        if (std::find(table.head_dim_pairs.begin(), table.head_dim_pairs.end(), pair) ==
            table.head_dim_pairs.end()) {
          table.head_dim_pairs.push_back(pair);
        }
        continue;
      }
    }
    if (std::find(table.head_dims.begin(), table.head_dims.end(), instantiation.head_dim) ==
        table.head_dims.end()) {
      table.head_dims.push_back(instantiation.head_dim);
    }
  }
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::gpu
