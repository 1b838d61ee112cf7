// Seeded inputs for one problem, and the host buffers they live in. Values are drawn in fp32
// from the distribution, then quantized to the input dtype (FP8: scaled first by a descale per
// tensor, or per (batch, head) with fp8_scaling per_head), so the reference sees exactly what the
// kernel sees. Never zeros.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/core/records.h"
#include "kernels/params.h"
#include "reference/attention.h"
#include "reference/problem.h"
#include "reference/random.h"  // mix_seed
#include "reference/status.h"

namespace attnbench {

// A host buffer with guard regions ("canaries") before and after it: a kernel that writes out
// of bounds touches them and the checker notices.
class GuardedBuffer {
 public:
  static constexpr size_t kCanaryBytes = 4096;
  static constexpr unsigned char kCanaryByte = 0xA5;

  GuardedBuffer() = default;
  explicit GuardedBuffer(size_t bytes);
  void* data() { return storage_.data() + kCanaryBytes; }
  const void* data() const { return storage_.data() + kCanaryBytes; }
  size_t bytes() const { return bytes_; }
  bool canaries_intact() const;
  // The guard regions (kCanaryBytes each; null when empty), for a sanitizer to poison while a
  // kernel runs.
  const unsigned char* guard_before() const { return storage_.empty() ? nullptr : storage_.data(); }
  const unsigned char* guard_after() const {
    return storage_.empty() ? nullptr : storage_.data() + kCanaryBytes + bytes_;
  }
  // Fills every element with the dtype's NaN (poison): unwritten elements stay NaN.
  void poison(DType dtype);

 private:
  std::vector<unsigned char> storage_;
  size_t bytes_ = 0;
};

struct ProblemInputs {
  Problem problem;
  ProblemLayout layout;
  GuardedBuffer q_buffer, k_buffer, v_buffer;  // k and v empty for qkv_packed
  float q_descale = 1, k_descale = 1, v_descale = 1;
  // fp8_scaling per_head: (batch, heads) descales of each tensor (the scalar ones are then 1);
  // empty otherwise.
  std::vector<float> q_head_descales, k_head_descales, v_head_descales;
  std::vector<int> key_lengths;  // (batch,), always filled (seqlen_k without padding)
  // Layout thd: cu_seqlens_q then cu_seqlens_k, (batch + 1,) each (layout.q's and layout.k's
  // sequence_starts as int32); empty for the other layouts.
  std::vector<int> cu_seqlens;
  // A paged cache: the page table (layout.k's page_table as int32); empty otherwise.
  std::vector<int> page_table;
  // The backward's upstream gradient dO, placed like out, in the gradient dtype; empty for a
  // forward problem.
  GuardedBuffer dout_buffer;
  UpstreamGradient dout_drawn = UpstreamGradient::normal;  // what dout_buffer holds, when drawn
  AttentionInputs view() const;  // what the reference reads
};

Status make_inputs(const Problem& problem, Distribution distribution, uint64_t seed,
                   ProblemInputs& inputs);
// Makes `inputs` those of `problem`, another pass of the shape they were made for: the pass is
// set, and dO drawn (as make_inputs draws it) when the pass has a backward and dO is missing or
// was drawn from another UpstreamGradient.
void set_pass(const Problem& problem, uint64_t seed, ProblemInputs& inputs);

// Where the kernel finds the inputs: the starts of the q, k, v buffers (k and v are the q buffer
// for qkv_packed) and the key lengths, in host memory (CPU) or device memory (GPU copies).
struct InputPointers {
  const void* q_buffer = nullptr;
  const void* k_buffer = nullptr;
  const void* v_buffer = nullptr;
  const int* key_lengths = nullptr;  // (batch,)
  const int* cu_seqlens = nullptr;   // thd: ProblemInputs::cu_seqlens, or null
  const int* page_table = nullptr;   // paged: ProblemInputs::page_table, or null
  // per_head FP8 descales (ProblemInputs' vectors, or their device copies); null otherwise.
  const float* q_head_descales = nullptr;
  const float* k_head_descales = nullptr;
  const float* v_head_descales = nullptr;
  const void* dout = nullptr;  // the backward's dO; null for a forward problem
};
InputPointers host_pointers(const ProblemInputs& inputs);

// Where a backward writes dQ, dK and dV (host or device memory); null in a forward.
struct GradientPointers {
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
};

// The kernel-facing parameters for these inputs, an output (and optional LSE) buffer and, for a
// problem with a backward, the gradients' buffers.
AttentionParams make_params(const ProblemInputs& inputs, const InputPointers& pointers, void* out,
                            float* lse, float out_scale, const GradientPointers& gradients = {});

uint64_t hash_string(const std::string& text);

}  // namespace attnbench
