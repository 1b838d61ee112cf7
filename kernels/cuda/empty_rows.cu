// Writes out = 0 and LSE = -inf for a block of query rows that see no key (see empty_rows.h).
// One CUDA block per (batch, row, head); its threads clear the head's output bytes.
#include <string>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/common/cuda_check.h"
#include "kernels/cuda/common/launch.cuh"
#include "kernels/cuda/common/row_stats.cuh"
#include "kernels/cuda/empty_rows.h"

namespace attnbench::gpu {
namespace {

constexpr int kThreads = 128;  // a 256-wide fp32 head is 1 KiB: 8 bytes per thread

struct FillParams {
  unsigned char* out;  // first byte of the output
  float* lse;          // (batch, heads_q, seqlen_q), or null
  int64_t element_bytes, batch_stride, row_stride, head_stride;  // strides in elements
  int64_t heads_q, seqlen_q, head_bytes;
  int64_t batch_begin, row_begin, rows;  // the block: rows x (batches) x heads_q
};

__global__ void __launch_bounds__(kThreads) clear_rows(const __grid_constant__ FillParams p) {
  const int64_t item = blockIdx.x;  // ((b - batch_begin) * rows + (row - row_begin)) * heads + h
  const int64_t h = item % p.heads_q;
  const int64_t row = p.row_begin + (item / p.heads_q) % p.rows;
  const int64_t b = p.batch_begin + item / (p.heads_q * p.rows);
  unsigned char* head =
      p.out + (b * p.batch_stride + row * p.row_stride + h * p.head_stride) * p.element_bytes;
  for (int64_t byte = threadIdx.x; byte < p.head_bytes; byte += blockDim.x) head[byte] = 0;
  if (p.lse != nullptr && threadIdx.x == 0) {
    p.lse[(b * p.heads_q + h) * p.seqlen_q + row] = kNegInf;
  }
}

}  // namespace

Status fill_empty_rows(const EmptyRows& rows, const OutputView& output, cudaStream_t stream) {
  if (rows.empty()) return Status::Ok();
  FillParams params{};
  params.out = static_cast<unsigned char*>(output.out);
  params.lse = output.lse;
  params.element_bytes = static_cast<int64_t>(output.element_bytes);
  params.batch_stride = output.batch_stride;
  params.row_stride = output.row_stride;
  params.head_stride = output.head_stride;
  params.heads_q = output.heads_q;
  params.seqlen_q = output.seqlen_q;
  params.head_bytes = output.head_dim_v * params.element_bytes;
  params.batch_begin = rows.batch_begin;
  params.row_begin = rows.row_begin;
  params.rows = rows.row_end - rows.row_begin;
  const int64_t items = (rows.batch_end - rows.batch_begin) * params.rows * output.heads_q;
  if (items > std::numeric_limits<int>::max()) {
    return Status::Error("fill_empty_rows: " + std::to_string(items) +
                         " heads to clear exceed one launch's grid");
  }
  launch_kernel(clear_rows, static_cast<unsigned>(items), kThreads, 0, stream, params);
  ATTNBENCH_CUDA_TRY_LAUNCH();
  return Status::Ok();
}

}  // namespace attnbench::gpu
