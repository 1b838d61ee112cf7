// An emulated launch: the grid's blocks spread over OS threads (each block on one thread, its
// CUDA threads as fibers: block.h), each block with its own seed drawn from the launch's seed,
// and atomics that are atomic across those OS threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

#include "kernels/emu/block.h"
#include "reference/formats.h"  // flush_subnormal

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

// atomicAdd on fp32 (atom.add.f32): on global memory it flushes subnormal inputs and results to
// zero of their sign, on shared memory it keeps them (the PTX ISA; NVIDIA's measurements; the
// hardware conformance test compares both with a GPU). A backward's fp32 dQ accumulator of small
// gradients reaches that range.
inline float atomic_add(float* address, float value) {
  std::atomic_ref<float> target(*address);
  if (Block::current().in_shared_memory(address)) return target.fetch_add(value);
  const float addend = flush_subnormal(value);
  float old = target.load();
  while (!target.compare_exchange_weak(old, flush_subnormal(flush_subnormal(old) + addend))) {
  }
  return old;
}

}  // namespace attnbench::emu
