#include "kernels/cpu/cpu_common.h"

#include <cblas.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <numbers>
#include <utility>
#include <vector>

#include "reference/formats.h"

namespace attnbench::cpu {

namespace {

// Every CPU kernel handles any head dim up to this; beyond it nobody has a use for them.
constexpr int64_t kMaxHeadDim = 256;
constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;

template <typename Widen>
ATTNBENCH_CPU_CLONES void widen_block(const uint16_t* base, int64_t first, int64_t row_stride,
                                      int64_t rows, int64_t cols, float* dst, int64_t ld,
                                      Widen widen) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* src = base + first + r * row_stride;
    float* row = dst + r * ld;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) row[c] = widen(src[c]);
  }
}

}  // namespace

SingleThreadedBlas::SingleThreadedBlas() {
  if (openblas_get_parallel() == OPENBLAS_THREAD && openblas_get_num_threads() > 1) {
    restore_threads_ = openblas_get_num_threads();
    openblas_set_num_threads(1);
  }
}

SingleThreadedBlas::~SingleThreadedBlas() {
  if (restore_threads_ > 0) openblas_set_num_threads(restore_threads_);
}

SupportTable cpu_support_table(double max_flops, std::string notes) {
  SupportTable table;
  table.input_dtypes = {DType::f32, DType::f16, DType::bf16};
  table.outputs_fp32 = false;
  table.max_head_dim = kMaxHeadDim;
  table.separate_v_dim = true;
  table.masks = {MaskKind::none, MaskKind::causal, MaskKind::causal_br, MaskKind::window,
                 MaskKind::padding};
  table.layouts = {Layout::bshd, Layout::bhsd, Layout::qkv_packed};
  table.gqa = true;
  table.archs = {"cpu"};
  table.max_flops = max_flops;
  table.notes = std::move(notes);
  return table;
}

Status check_problem_for_plan(const SupportTable& table, const Problem& problem) {
  SupportTable without_size_limit = table;
  without_size_limit.max_flops = 0;
  const std::string reason = unsupported_reason(without_size_limit, problem);
  if (!reason.empty()) return Status::Error("unsupported: " + reason);
  return Status::Ok();
}

Status check_params_match(const Problem& planned, const AttentionParams& params) {
  const bool same_shape =
      params.batch == planned.batch && params.heads_q == planned.heads_q &&
      params.heads_kv == planned.heads_kv && params.seqlen_q == planned.seqlen_q &&
      params.seqlen_k == planned.seqlen_k && params.head_dim_qk == planned.head_dim_qk &&
      params.head_dim_v == planned.head_dim_v && params.heads_kv > 0 &&
      params.heads_per_kv == params.heads_q / params.heads_kv;
  if (!same_shape) return Status::Error("params do not match the shape the plan was built for");
  if (params.input_dtype != planned.input_dtype || params.output_dtype != planned.output_dtype) {
    return Status::Error("params do not match the dtypes the plan was built for");
  }
  if (params.mask != planned.mask.kind) {
    return Status::Error("params do not match the mask the plan was built for");
  }
  if (params.q == nullptr || params.k == nullptr || params.v == nullptr || params.out == nullptr) {
    return Status::Error("params: q, k, v and out must all be set");
  }
  // BLAS takes a row stride as a leading dimension, which must cover the row.
  const bool strides_cover_rows =
      (params.seqlen_q == 1 || params.q_row_stride >= params.head_dim_qk) &&
      (params.seqlen_k == 1 ||
       (params.k_row_stride >= params.head_dim_qk && params.v_row_stride >= params.head_dim_v));
  if (!strides_cover_rows) return Status::Error("params: a row stride is smaller than its row");
  if (params.mask == MaskKind::padding && params.key_lengths == nullptr) {
    return Status::Error("params: the padding mask needs key_lengths");
  }
  if ((planned.layout == Layout::thd) !=
      (params.cu_seqlens_q != nullptr && params.cu_seqlens_k != nullptr)) {
    return Status::Error(
        "params: cu_seqlens_q and cu_seqlens_k are set for, and only for, layout thd");
  }
  if (planned.is_paged() != (params.page_table != nullptr && params.page_size > 0)) {
    return Status::Error(
        "params: page_table and page_size are set for, and only for, a paged cache");
  }
  return Status::Ok();
}

Status allocate_scratch(ScratchAllocator& allocator, size_t bytes, std::string_view what,
                        ScratchBuffer& buffer) {
  buffer = ScratchBuffer(allocator, bytes);
  if (buffer || bytes == 0) return Status::Ok();
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.3g", static_cast<double>(bytes) / kBytesPerGiB);
  return Status::Error("out of memory: " + std::string(what) + " needs " + gib + " GiB");
}

int plan_threads(int64_t work_items) {
  const int64_t available = omp_get_max_threads();
  if (work_items < 1) return 1;
  return static_cast<int>(work_items < available ? work_items : available);
}

void load_block(DType dtype, const void* base, int64_t first, int64_t row_stride, int64_t rows,
                int64_t cols, float* dst, int64_t ld) {
  switch (dtype) {
    case DType::f32:
      for (int64_t r = 0; r < rows; ++r) {
        std::memcpy(dst + r * ld, static_cast<const float*>(base) + first + r * row_stride,
                    static_cast<size_t>(cols) * sizeof(float));
      }
      return;
    case DType::f16:
      // Lambdas, not function pointers, so the widening inlines into the vectorized loop.
      widen_block(static_cast<const uint16_t*>(base), first, row_stride, rows, cols, dst, ld,
                  [](uint16_t bits) { return widen_fp16(bits); });
      return;
    case DType::bf16:
      widen_block(static_cast<const uint16_t*>(base), first, row_stride, rows, cols, dst, ld,
                  [](uint16_t bits) { return widen_bf16(bits); });
      return;
    case DType::e4m3:
    case DType::e5m2:
      // Outside the CPU support table; make_plan refuses these problems before any run.
      return;
  }
}

BlockView view_block(DType dtype, const void* base, int64_t first, int64_t row_stride, int64_t rows,
                     int64_t cols, float* staging) {
  if (dtype == DType::f32) {
    // BLAS needs a leading dimension of at least the row length: check_params_match ensures it
    // wherever a tensor has more than one row, and a single row may have any stride.
    return {static_cast<const float*>(base) + first, rows == 1 ? cols : row_stride};
  }
  load_block(dtype, base, first, row_stride, rows, cols, staging, cols);
  return {staging, cols};
}

void store_row(DType dtype, void* out, int64_t first, const float* values, int64_t count) {
  switch (dtype) {
    case DType::f32:
      std::memcpy(static_cast<float*>(out) + first, values,
                  static_cast<size_t>(count) * sizeof(float));
      return;
    case DType::f16: {
      uint16_t* row = static_cast<uint16_t*>(out) + first;
      for (int64_t c = 0; c < count; ++c) row[c] = float_to_fp16_bits(values[c]);
      return;
    }
    case DType::bf16: {
      uint16_t* row = static_cast<uint16_t*>(out) + first;
      for (int64_t c = 0; c < count; ++c) row[c] = float_to_bf16_bits(values[c]);
      return;
    }
    case DType::e4m3:
    case DType::e5m2:
      for (int64_t c = 0; c < count; ++c) store_element(dtype, out, first + c, values[c]);
      return;
  }
}

float natural_lse(float max_log2, float sum) {
  if (!(sum > 0)) return kNegInf;
  // In double: the max can be in the hundreds, and the LSE is checked against an fp64 reference.
  return static_cast<float>((static_cast<double>(max_log2) + std::log2(static_cast<double>(sum))) *
                            std::numbers::ln2);
}

void row_deltas(const AttentionParams& p, float* delta) {
  const int64_t rows = static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q;
#pragma omp parallel
  {
    std::vector<float> out(static_cast<size_t>(p.head_dim_v)), dout(out.size());
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = r % p.seqlen_q, h = (r / p.seqlen_q) % p.heads_q;
      const int64_t b = r / (static_cast<int64_t>(p.seqlen_q) * p.heads_q);
      load_block(p.output_dtype, p.out, out_offset(p, b, h, i), 0, 1, p.head_dim_v, out.data(),
                 p.head_dim_v);
      load_block(p.grad_dtype, p.dout, dout_offset(p, b, h, i), 0, 1, p.head_dim_v, dout.data(),
                 p.head_dim_v);
      float sum = 0;
      for (int64_t d = 0; d < p.head_dim_v; ++d) sum += out[d] * dout[d];
      delta[r] = sum;
    }
  }
}

}  // namespace attnbench::cpu
