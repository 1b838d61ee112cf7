// cuda.flash3's tile scheduler: which query block of which (batch, head) pair a CTA owns. One CTA
// per (query block, query head, batch), query blocks fastest and in reverse order, as in
// cuda.flash2: the blocks of one head run side by side and share its K/V in L2, and under a
// causal mask the longest blocks (the last rows) start first so the short ones fill the tail.
#pragma once

#include <cstdint>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/params.h"

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

__device__ __forceinline__ BlockPosition block_position(const AttentionParams& p, int block_q) {
  const unsigned m_blocks = (static_cast<unsigned>(p.seqlen_q) + block_q - 1) / block_q;
  const unsigned m_block = m_blocks - 1 - blockIdx.x % m_blocks;
  const unsigned pair = blockIdx.x / m_blocks;
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

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
