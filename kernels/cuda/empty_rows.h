// Query rows that see no key get out = 0 and LSE = -inf (DESIGN, "Masks"). Adapters whose
// library leaves such rows unwritten or undefined write them with this: cudnn.sdpa for the rows
// above a bottom-right diagonal when seqlen_q > seqlen_k (it hands cuDNN only the rows below) and
// for batches whose padding leaves no key at all. Declared for host compilers; the kernel lives in
// empty_rows.cu.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/common/cuda_api.h"
#include "reference/status.h"

namespace attnbench::gpu {

// A block of rows: query rows [row_begin, row_end) of batches [batch_begin, batch_end), all heads.
struct EmptyRows {
  int64_t batch_begin = 0;
  int64_t batch_end = 0;
  int64_t row_begin = 0;
  int64_t row_end = 0;
  bool empty() const { return batch_begin >= batch_end || row_begin >= row_end; }
};

// Where an attention output lives: strides in elements, head dim stride 1.
struct OutputView {
  void* out = nullptr;  // (batch, seqlen_q, heads_q, head_dim_v) via the strides
  size_t element_bytes = 0;
  int64_t batch_stride = 0, row_stride = 0, head_stride = 0;
  int64_t heads_q = 0, seqlen_q = 0, head_dim_v = 0;
  float* lse = nullptr;  // (batch, heads_q, seqlen_q), or null
};

// One launch on `stream`; nothing when `rows` is empty. Zero bits are 0 in every output dtype.
Status fill_empty_rows(const EmptyRows& rows, const OutputView& output, cudaStream_t stream);

}  // namespace attnbench::gpu
