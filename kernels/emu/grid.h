// An emulated launch: the grid's blocks spread over OS threads (each block on one thread, its
// CUDA threads as fibers: block.h), each block with its own seed drawn from the launch's seed,
// and atomics that are atomic across those OS threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

#include "kernels/emu/block.h"

namespace attnbench::emu {

struct Launch {
  Dim3 grid_dim;
  Dim3 block_dim;
  size_t dynamic_shared_bytes = 0;
  uint64_t seed = 0;     // stored with the result: a schedule is replayed by its seed
  unsigned workers = 0;  // OS threads; 0: the host's cores
  const std::vector<Allocation>* global_memory = nullptr;  // the case's buffers; null: unchecked
};

// Runs `body` as every thread of every block. The first report (EmuError) of any block stops
// the launch and is rethrown, prefixed with its block: "block (3,0,0): __syncthreads at ...".
// Returns a hash of the orders the blocks' threads ran in (equal seeds, equal hash).
uint64_t launch_grid(const Launch& launch, const std::function<void()>& body);

// atomicAdd: atomic across the blocks' OS threads (a block's own threads never run at once).
template <typename T>
T atomic_add(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value);
}

}  // namespace attnbench::emu
