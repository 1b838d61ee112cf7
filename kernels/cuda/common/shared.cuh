// Shared memory, declared one way for both builds. On the GPU these are __shared__ variables;
// emulated, a block's threads are fibers of one OS thread, so a block-scope __shared__ would be
// one copy per thread (silently wrong) and an extern __shared__ one copy per process: each
// comes from the emulated block instead (kernels/emu/block.h).
//   ATTNBENCH_SHARED(Type, name, alignment)   a static __shared__ Type name, at function scope
//   ATTNBENCH_DYNAMIC_SHARED(name, alignment) unsigned char* name: the launch's dynamic shared
// Array types go through an alias: using Tile = float[64][33]; ATTNBENCH_SHARED(Tile, tile, 4).
#pragma once

#include "kernels/cuda/common/cuda_api.h"

#if defined(ATTNBENCH_EMU)
#define ATTNBENCH_SHARED(Type, name, alignment)                                              \
  static const char name##_shared_tag = 0;                                                   \
  Type& name = *static_cast<Type*>(::attnbench::emu::Block::current().static_shared(        \
      &name##_shared_tag, sizeof(Type),                                                      \
      (alignment) > alignof(Type) ? (alignment) : alignof(Type), ATTNBENCH_EMU_HERE))
#define ATTNBENCH_DYNAMIC_SHARED(name, alignment)                             \
  static_assert((alignment) <= 16, "CUDA aligns dynamic shared memory to 16 bytes only"); \
  unsigned char* const name =                                                 \
      static_cast<unsigned char*>(::attnbench::emu::Block::current().dynamic_shared())
#else
#define ATTNBENCH_SHARED(Type, name, alignment) __shared__ __align__(alignment) Type name
#define ATTNBENCH_DYNAMIC_SHARED(name, alignment)                         \
  extern __shared__ __align__(alignment) unsigned char name##_storage[]; \
  unsigned char* const name = name##_storage
#endif
