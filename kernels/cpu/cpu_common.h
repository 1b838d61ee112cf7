// Pieces shared by the CPU kernels: their support table, scratch with a readable out-of-memory
// message, index arithmetic over AttentionParams, exact fp16/bf16 widening for loading tiles,
// output stores, and a fast vectorizable exp2 with the row-wise softmax steps built on it.
// Everything here is host code; the heavy lifting is in BLAS.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "kernels/kernel.h"
#include "kernels/params.h"
#include "reference/mask.h"

// The hot host loops (softmax rows, tile widening) are built for the baseline ISA and, on
// x86-64 with GCC, also for AVX2 and AVX-512; the loader picks the best the CPU runs (ifunc),
// as OpenBLAS does for its kernels. On SSE2 alone the softmax took more time than the GEMMs.
// A given machine always runs the same clone, so results stay bit-for-bit reproducible there.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ATTNBENCH_CPU_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ATTNBENCH_CPU_CLONES
#endif

namespace attnbench::cpu {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// ---- support, plans, scratch -------------------------------------------------------------------

// The table all CPU kernels share; they differ only in their size limit.
SupportTable cpu_support_table(double max_flops, std::string notes);

// make_plan's gate: the problem must be inside the table. The size limit is a time budget for
// the harness, not a capability, so it is not enforced here (scratch can be measured anywhere).
Status check_problem_for_plan(const SupportTable& table, const Problem& problem);

// run's gate: the params must describe the problem the plan (and its scratch) was built for.
Status check_params_match(const Problem& planned, const AttentionParams& params);

// One scratch allocation, or "out of memory: <what> needs <N> GiB".
Status allocate_scratch(ScratchAllocator& allocator, size_t bytes, std::string_view what,
                        ScratchBuffer& buffer);

// Threads a plan uses: OpenMP's maximum, but never more than there are work items.
int plan_threads(int64_t work_items);

// Keeps BLAS single-threaded while it lives. OpenBLAS's OpenMP build already runs one thread
// when called inside our parallel regions; its pthreads build (what the system's alternatives
// pick when a binary lacks the RUNPATH to the OpenMP build) would start its own threads from
// each of ours and spin on them, measured 15x slower. A plan's run holds one of these.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas();
  ~SingleThreadedBlas();
  SingleThreadedBlas(const SingleThreadedBlas&) = delete;
  SingleThreadedBlas& operator=(const SingleThreadedBlas&) = delete;

 private:
  int restore_threads_ = 0;  // 0: nothing changed
};

// ---- index arithmetic --------------------------------------------------------------------------

// Where sequence b's rows start: its cu_seqlens row under layout thd (a varlen batch), b batch
// strides otherwise.
inline int64_t sequence_offset(const int* cu_seqlens, int64_t b, int64_t batch_stride,
                               int64_t row_stride) {
  return cu_seqlens != nullptr ? cu_seqlens[b] * row_stride : b * batch_stride;
}
inline int64_t q_offset(const AttentionParams& p, int64_t b, int64_t h, int64_t row) {
  return sequence_offset(p.cu_seqlens_q, b, p.q_batch_stride, p.q_row_stride) +
         row * p.q_row_stride + h * p.q_head_stride;
}
// Where key row `row` of sequence b starts in K or V: through the page table in a paged cache,
// else after the sequence's first row.
inline int64_t key_row_offset(const AttentionParams& p, int64_t b, int64_t row,
                              int64_t batch_stride, int64_t row_stride) {
  if (p.page_table != nullptr) {
    const int64_t page = p.page_table[b * p.pages_per_sequence + row / p.page_size];
    return (page * p.page_size + row % p.page_size) * row_stride;
  }
  return sequence_offset(p.cu_seqlens_k, b, batch_stride, row_stride) + row * row_stride;
}
inline int64_t k_offset(const AttentionParams& p, int64_t b, int64_t h_kv, int64_t row) {
  return key_row_offset(p, b, row, p.k_batch_stride, p.k_row_stride) + h_kv * p.k_head_stride;
}
inline int64_t v_offset(const AttentionParams& p, int64_t b, int64_t h_kv, int64_t row) {
  return key_row_offset(p, b, row, p.v_batch_stride, p.v_row_stride) + h_kv * p.v_head_stride;
}
// Key rows [first, first + rows) run contiguously in K and V (at the row strides) until this
// row: the end of first's page in a paged cache, never otherwise.
inline int64_t contiguous_key_rows_end(const AttentionParams& p, int64_t first, int64_t end) {
  if (p.page_table == nullptr) return end;
  const int64_t page_end = (first / p.page_size + 1) * p.page_size;
  return page_end < end ? page_end : end;
}
inline int64_t out_offset(const AttentionParams& p, int64_t b, int64_t h, int64_t row) {
  return sequence_offset(p.cu_seqlens_q, b, p.out_batch_stride, p.out_row_stride) +
         row * p.out_row_stride + h * p.out_head_stride;
}
// Query and key rows of sequence b: a varlen sequence's own lengths, seqlen_q and seqlen_k
// otherwise.
inline int64_t query_rows(const AttentionParams& p, int64_t b) {
  return p.cu_seqlens_q != nullptr ? p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b] : p.seqlen_q;
}
inline int64_t key_rows(const AttentionParams& p, int64_t b) {
  return p.cu_seqlens_k != nullptr ? p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b] : p.seqlen_k;
}
inline int64_t dout_offset(const AttentionParams& p, int64_t b, int64_t h, int64_t row) {
  return b * p.dout_batch_stride + row * p.dout_row_stride + h * p.dout_head_stride;
}
inline int64_t dq_offset(const AttentionParams& p, int64_t b, int64_t h, int64_t row) {
  return b * p.dq_batch_stride + row * p.dq_row_stride + h * p.dq_head_stride;
}
inline int64_t dk_offset(const AttentionParams& p, int64_t b, int64_t h_kv, int64_t row) {
  return b * p.dk_batch_stride + row * p.dk_row_stride + h_kv * p.dk_head_stride;
}
inline int64_t dv_offset(const AttentionParams& p, int64_t b, int64_t h_kv, int64_t row) {
  return b * p.dv_batch_stride + row * p.dv_row_stride + h_kv * p.dv_head_stride;
}
// LSE is (batch, heads_q, seqlen_q), contiguous.
inline int64_t lse_offset(const AttentionParams& p, int64_t b, int64_t h, int64_t row) {
  return (b * p.heads_q + h) * p.seqlen_q + row;
}

// Keys query row `query` of batch `b` may see. key_lengths is filled for every mask by the
// harness, so it is read only under the padding mask. A varlen sequence is masked as a problem
// of its own lengths (Problem::visible).
inline KeyRange row_keys(const AttentionParams& p, int64_t b, int64_t query) {
  if (p.cu_seqlens_q != nullptr) {
    const int64_t keys = key_rows(p, b);
    return visible_keys(p.mask, p.window_left, p.window_right, query, query_rows(p, b), keys, keys);
  }
  const int64_t key_length = p.mask == MaskKind::padding ? p.key_lengths[b] : p.seqlen_k;
  return visible_keys(p.mask, p.window_left, p.window_right, query, p.seqlen_q, p.seqlen_k,
                      key_length);
}

// ---- loading inputs: fp16/bf16 -> fp32 is exact, so it is written here branch-free and inline
// (the hot path converts whole tiles); rounding back lives in reference/formats.

inline float widen_bf16(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }

inline float widen_fp16(uint16_t bits) {
  constexpr int kFp32MantissaBits = 23;
  constexpr int kMantissaShift = kFp32MantissaBits - 10;         // fp16 keeps 10 mantissa bits
  constexpr uint32_t kExponentMask = 0x7c00u << kMantissaShift;  // fp16's, moved to fp32's place
  // fp32's exponent bias minus fp16's, in the exponent field; applied twice, fp16's all-ones
  // exponent (31, inf and NaN) becomes fp32's (255).
  constexpr uint32_t kRebias = (127 - 15) << kFp32MantissaBits;
  // A subnormal fp16 becomes an fp32 with exponent -14 and an implicit 1 to subtract:
  // 2^-14 * (1.mantissa) - 2^-14, exact.
  constexpr float kSubnormalBias = 6.103515625e-05f;  // 2^-14
  constexpr uint32_t kImplicitOne = 1u << kFp32MantissaBits;
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t magnitude = static_cast<uint32_t>(bits & 0x7fffu) << kMantissaShift;
  const uint32_t exponent = magnitude & kExponentMask;
  const uint32_t normal = magnitude + kRebias;
  const float subnormal = std::bit_cast<float>(normal + kImplicitOne) - kSubnormalBias;
  const uint32_t widened = exponent == kExponentMask ? normal + kRebias
                           : exponent == 0           ? std::bit_cast<uint32_t>(subnormal)
                                                     : normal;
  return std::bit_cast<float>(widened | sign);
}

// Copies a (rows x cols) block whose row r starts at element first + r * row_stride of `base`
// (stored in `dtype`: fp32, fp16 or bf16) into dst with leading dimension ld, as fp32.
void load_block(DType dtype, const void* base, int64_t first, int64_t row_stride, int64_t rows,
                int64_t cols, float* dst, int64_t ld);

// An fp32 view of a (rows x cols) block for BLAS: the input itself when it is fp32 (its row
// stride as the leading dimension), otherwise a copy widened into `staging` (ld = cols).
struct BlockView {
  const float* data;
  int64_t ld;
};
BlockView view_block(DType dtype, const void* base, int64_t first, int64_t row_stride, int64_t rows,
                     int64_t cols, float* staging);

// Writes `count` fp32 values to out (in `dtype`, rounded to nearest even) from element `first`.
void store_row(DType dtype, void* out, int64_t first, const float* values, int64_t count);

// ---- exp2 and softmax steps --------------------------------------------------------------------

// 2^x for x <= ~127, vectorizable (no calls, no branches in a simd loop): x = n + f with n an
// integer and f in [-0.5, 0.5]; 2^f from a degree-6 minimax polynomial (relative error 1.9e-9,
// far below fp32's ulp, so what remains is the rounding of the Horner steps: measured < 2 ulp);
// 2^n built in the exponent bits. Results below 2^-126 flush to 0, so -inf gives exactly 0 and
// a masked key contributes nothing; fp32 denormals would add nothing to a softmax sum >= 1.
inline float fast_exp2(float x) {
  constexpr float kMinExponent = -126.0f;  // smallest normal fp32 exponent
  constexpr int kExponentBias = 127;
  constexpr int kMantissaBits = 23;
  constexpr float kRoundToInt = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  constexpr float kC0 = 1.0f, kC1 = 6.9314720574e-01f, kC2 = 2.4022646891e-01f,
                  kC3 = 5.5503287770e-02f, kC4 = 9.6184889571e-03f, kC5 = 1.3399931219e-03f,
                  kC6 = 1.5345812004e-04f;
  const float clamped = x < kMinExponent ? kMinExponent : x;
  const float n = (clamped + kRoundToInt) - kRoundToInt;
  const float f = clamped - n;
  const float poly = kC0 + f * (kC1 + f * (kC2 + f * (kC3 + f * (kC4 + f * (kC5 + f * kC6)))));
  const float two_to_n = std::bit_cast<float>(
      static_cast<uint32_t>(static_cast<int32_t>(n) + kExponentBias) << kMantissaBits);
  return x < kMinExponent ? 0.0f : poly * two_to_n;
}

// Largest of s[begin, end); -inf when the range is empty.
inline float row_max(const float* s, int64_t begin, int64_t end) {
  float max = kNegInf;
#pragma omp simd reduction(max : max)
  for (int64_t j = begin; j < end; ++j) max = s[j] > max ? s[j] : max;
  return max;
}

// s[j] = 2^(s[j] - max) over [begin, end), in place; returns their sum. max must be finite.
inline float exp2_and_sum(float* s, int64_t begin, int64_t end, float max) {
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = begin; j < end; ++j) {
    s[j] = fast_exp2(s[j] - max);
    sum += s[j];
  }
  return sum;
}

inline void scale_row(float* s, int64_t count, float factor) {
#pragma omp simd
  for (int64_t j = 0; j < count; ++j) s[j] *= factor;
}

inline void fill_row(float* s, int64_t begin, int64_t end, float value) {
  for (int64_t j = begin; j < end; ++j) s[j] = value;
}

// D_i = dO_i . O_i of every query row (the backward's row statistic), in fp32 from the stored
// out and dout, into delta[(b * heads_q + h) * seqlen_q + i] (the LSE's order).
void row_deltas(const AttentionParams& p, float* delta);

// Natural-log LSE from a row's max (log2 units, scores already times scale * log2(e)) and
// its sum of 2^(s - max); -inf for a row that sees no key.
float natural_lse(float max_log2, float sum);

}  // namespace attnbench::cpu
