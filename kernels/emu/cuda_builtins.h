// The CUDA built-ins a kernel's source names, for the host compiler: threadIdx and friends,
// __syncthreads, __syncwarp, the __shfl*_sync family, the votes and atomicAdd, backed by the
// emulated block and launch (block.h, grid.h), each barrier and collective carrying its source
// line for the reports. Included only where a kernel is compiled for `emu` (issue 14; the
// kernels move onto it through kernels/cuda/common/, which alone may include this header).
#pragma once

#include "kernels/emu/block.h"
#include "kernels/emu/grid.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__

#define threadIdx (::attnbench::emu::Block::current().thread_index())
#define blockIdx (::attnbench::emu::Block::current().block_index())
#define blockDim (::attnbench::emu::Block::current().block_dim())
#define gridDim (::attnbench::emu::Block::current().grid_dim())
#define warpSize (static_cast<int>(::attnbench::emu::kWarpSize))

#define ATTNBENCH_EMU_HERE (::attnbench::emu::Site{__FILE__, __LINE__})
#define ATTNBENCH_EMU_BLOCK (::attnbench::emu::Block::current())

#define __syncthreads() ATTNBENCH_EMU_BLOCK.sync_threads(ATTNBENCH_EMU_HERE)
#define __syncwarp(...) ::attnbench::emu::syncwarp_at(ATTNBENCH_EMU_HERE __VA_OPT__(, ) __VA_ARGS__)
#define __shfl_xor_sync(...) \
  ::attnbench::emu::shfl_at(ATTNBENCH_EMU_HERE, ::attnbench::emu::Block::Shuffle::xor_lane, __VA_ARGS__)
#define __shfl_sync(...) \
  ::attnbench::emu::shfl_at(ATTNBENCH_EMU_HERE, ::attnbench::emu::Block::Shuffle::index, __VA_ARGS__)
#define __shfl_up_sync(...) \
  ::attnbench::emu::shfl_at(ATTNBENCH_EMU_HERE, ::attnbench::emu::Block::Shuffle::up, __VA_ARGS__)
#define __shfl_down_sync(...) \
  ::attnbench::emu::shfl_at(ATTNBENCH_EMU_HERE, ::attnbench::emu::Block::Shuffle::down, __VA_ARGS__)
#define __ballot_sync(mask, predicate) ATTNBENCH_EMU_BLOCK.ballot(mask, predicate, ATTNBENCH_EMU_HERE)
#define __any_sync(mask, predicate) ATTNBENCH_EMU_BLOCK.any(mask, predicate, ATTNBENCH_EMU_HERE)
#define __all_sync(mask, predicate) ATTNBENCH_EMU_BLOCK.all(mask, predicate, ATTNBENCH_EMU_HERE)
#define atomicAdd(address, value) ::attnbench::emu::atomic_add(address, value)

namespace attnbench::emu {

inline void syncwarp_at(Site site, unsigned mask = kFullMask) { Block::current().sync_warp(mask, site); }

template <typename T>
T shfl_at(Site site, Block::Shuffle mode, unsigned mask, T value, int arg,
          int width = static_cast<int>(kWarpSize)) {
  return Block::current().shfl(mode, mask, value, arg, width, site);
}

}  // namespace attnbench::emu
