// cuda.flash3's tile scheduler: which query block of which (batch, head) pair a CTA owns. One CTA
// per (query block, query head, batch), query blocks fastest and in reverse order, as in
// cuda.flash2: the blocks of one head run side by side and share its K/V in L2, and under a
// causal mask the longest blocks (the last rows) start first so the short ones fill the tail.
#pragma once

#include <climits>
#include <cstdint>
#include <string>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/common/visible_tiles.h"
#include "kernels/cuda/flash3/flash3_launch.h"
#include "kernels/params.h"
#include "reference/status.h"

namespace attnbench::flash3 {
inline namespace ATTNBENCH_TARGET {

struct BlockPosition {
  int batch;
  int head;
  int head_kv;     // GQA/MQA: the K/V head of `head`
  int first_row;   // the block's first query row
  int last_row;    // its last row inside seqlen_q (inclusive)
  int key_length;  // keys of this batch (the padding mask), else seqlen_k
};

__device__ __forceinline__ unsigned query_blocks(const AttentionParams& p, int block_q) {
  return (static_cast<unsigned>(p.seqlen_q) + block_q - 1) / block_q;
}

// Block `index` of the grid's order (index < block_count).
__device__ __forceinline__ BlockPosition block_position(const AttentionParams& p, int block_q,
                                                        unsigned index) {
  const unsigned m_blocks = query_blocks(p, block_q);
  const unsigned m_block = m_blocks - 1 - index % m_blocks;
  const unsigned pair = index / m_blocks;
  BlockPosition block;
  block.head = static_cast<int>(pair % static_cast<unsigned>(p.heads_q));
  block.batch = static_cast<int>(pair / static_cast<unsigned>(p.heads_q));
  block.head_kv = block.head / p.heads_per_kv;
  block.first_row = static_cast<int>(m_block) * block_q;
  block.last_row =
      p.seqlen_q - block.first_row > block_q ? block.first_row + block_q - 1 : p.seqlen_q - 1;
  block.key_length = p.key_lengths != nullptr ? p.key_lengths[block.batch] : p.seqlen_k;
  return block;
}
// This CTA's block where each CTA runs one.
__device__ __forceinline__ BlockPosition block_position(const AttentionParams& p, int block_q) {
  return block_position(p, block_q, blockIdx.x);
}

// The blocks this CTA runs (Grid, flash3_launch.h): its own, or in a persistent grid blocks c,
// c + gridDim.x, c + 2 gridDim.x, ... of the order above (a static round robin).
template <Grid kGrid, typename Body>
__device__ __forceinline__ void for_each_block(const AttentionParams& p, int block_q, Body&& body) {
  if constexpr (kGrid == Grid::persistent) {
    const unsigned blocks = query_blocks(p, block_q) * static_cast<unsigned>(p.heads_q) *
                            static_cast<unsigned>(p.batch);
    for (unsigned index = blockIdx.x; index < blocks; index += gridDim.x) {
      body(block_position(p, block_q, index));
    }
  } else {
    body(block_position(p, block_q));
  }
}

// The key tiles a block visits (gpu::block_key_tiles: fully masked tiles skipped), counted from
// the first visible one.
struct KeyTiles {
  gpu::BlockKeyTiles visible;
  int count;      // tiles to visit
  int first_key;  // key of the first one
  __device__ __forceinline__ int key_of(int tile, int block_k) const {
    return first_key + tile * block_k;
  }
};

__device__ __forceinline__ KeyTiles key_tiles(const AttentionParams& p, const BlockPosition& block,
                                              int block_k) {
  KeyTiles keys;
  keys.visible =
      gpu::block_key_tiles(p.mask, p.window_left, p.window_right, block.first_row, block.last_row,
                           p.seqlen_q, p.seqlen_k, block.key_length, block_k);
  keys.count = static_cast<int>(keys.visible.tiles());
  keys.first_key = static_cast<int>(keys.visible.first_tile) * block_k;
  return keys;
}

// One forward of `kernel` (a kernel of shape Traits) over the scheduler's grid: one CTA per
// (query block, query head, batch), or with Grid::persistent one per SM (params.sm_count) where
// there are more blocks; the kernel takes params and then `extra`.
template <typename Traits, Grid kGrid = Grid::one_cta_per_block, typename... KernelParams,
          typename... Extra>
Status launch_blocks(const char* name, void (*kernel)(KernelParams...), const Flash3Params& params,
                     cudaStream_t stream, Extra... extra) {
  const AttentionParams& p = params.attention;
  const int64_t m_blocks =
      (static_cast<int64_t>(p.seqlen_q) + Traits::kBlockQ - 1) / Traits::kBlockQ;
  const int64_t ctas = m_blocks * p.heads_q * p.batch;
  if (ctas > INT_MAX) {
    return Status::Error(std::string(name) + ": " + std::to_string(ctas) +
                         " query blocks exceed one launch's grid");
  }
  const int64_t grid = grid_ctas(ctas, kGrid, params.sm_count);
  ATTNBENCH_CUDA_TRY(allow_dynamic_shared(kernel, static_cast<int>(Traits::kSharedBytes)));
  launch_kernel(kernel, static_cast<unsigned>(grid), Traits::kThreads, Traits::kSharedBytes, stream,
                params, extra...);
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return Status::Ok();
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
