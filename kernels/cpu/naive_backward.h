// cpu.naive's backward: the textbook, every intermediate materialized (naive_backward.cpp).
#pragma once

#include "kernels/kernel.h"

namespace attnbench::cpu {

class NaiveBackward {
 public:
  explicit NaiveBackward(const Problem& problem);
  Status allocate(ScratchAllocator& allocator);
  Status run(const AttentionParams& params);

 private:
  struct Matrices;
  Matrices thread_matrices(int thread) const;
  int64_t thread_floats() const;
  void run_group(const AttentionParams& p, int64_t b, int64_t kv_head, const Matrices& m) const;
  void run_head(const AttentionParams& p, int64_t b, int64_t h, const Matrices& m) const;

  Problem problem_;
  int threads_;
  ScratchBuffer matrices_;  // per thread: thread_floats()
};

}  // namespace attnbench::cpu
