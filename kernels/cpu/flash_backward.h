// cpu.flash's backward: FlashAttention-2's algorithm on BLAS tiles (flash_backward.cpp).
#pragma once

#include <memory>

#include "kernels/kernel.h"

namespace attnbench::cpu {

// A planted bug, for the tests that prove the gradient checker catches each (the test kernels
// test.cpu_flash_bwd_*); none in every kernel of the registry.
enum class FlashBackwardBug {
  none,
  no_delta,          // dS = P * dP: D = rowsum(dO * O) left out
  no_softmax_scale,  // dQ and dK without the softmax scale the scores were taken with
  gqa_not_summed,    // dK and dV of a kv head from its group's last query head only
  last_key_block_skipped,
};

class FlashBackward {
 public:
  FlashBackward(const Problem& problem, FlashBackwardBug bug);
  Status allocate(ScratchAllocator& allocator);
  Status run(const AttentionParams& params);

 private:
  struct ThreadTiles;
  ThreadTiles thread_tiles(int thread) const;
  int64_t thread_floats() const;
  void run_key_block(const AttentionParams& p, int64_t b, int64_t kv_head, int64_t first_key,
                     const ThreadTiles& tiles) const;
  void query_block(const AttentionParams& p, int64_t b, int64_t h, int64_t first_row,
                   int64_t first_key, int64_t keys, const ThreadTiles& tiles) const;
  void store_dq(const AttentionParams& p) const;

  Problem problem_;
  FlashBackwardBug bug_;
  int64_t block_q_, block_k_, key_blocks_;
  int threads_;
  ScratchBuffer tiles_;    // per thread: thread_floats()
  ScratchBuffer dq_sums_;  // per thread: an fp32 dQ accumulator of the whole problem
  ScratchBuffer deltas_;   // D per query row, (batch, heads_q, seqlen_q)
};

}  // namespace attnbench::cpu
