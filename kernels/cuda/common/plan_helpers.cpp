#include "kernels/cuda/common/plan_helpers.h"

#include <string>

#include "kernels/cuda/common/cuda_check.h"

namespace attnbench::gpu {
inline namespace ATTNBENCH_TARGET {

namespace {

constexpr double kBytesPerMiB = 1024.0 * 1024.0;

bool strides_match(const Strides& planned, int64_t batch, int64_t row, int64_t head) {
  return planned.batch == batch && planned.seq == row && planned.head == head;
}

}  // namespace

Status allocate_scratch(ScratchAllocator& allocator, size_t bytes, std::string_view what,
                        ScratchBuffer& buffer) {
  if (bytes == 0) {
    buffer.reset();
    return Status::Ok();
  }
  buffer = ScratchBuffer(allocator, bytes);
  if (buffer) return Status::Ok();
  const double mib = static_cast<double>(bytes) / kBytesPerMiB;
  return Status::Error("out of memory: " + std::string(what) + " needs " +
                       std::to_string(static_cast<long long>(mib + 0.5)) + " MiB");
}

Status sm_version(int device, int& version) {
  int major = 0;
  int minor = 0;
  ATTNBENCH_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  ATTNBENCH_CUDA_TRY(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  version = major * 10 + minor;
  return Status::Ok();
}

Status sm_count(int device, int& count) {
  ATTNBENCH_CUDA_TRY(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return Status::Ok();
}

Status check_params_match(const Problem& planned, const AttentionParams& params) {
  const Problem& p = planned;
  const bool shapes = params.batch == p.batch && params.heads_q == p.heads_q &&
                      params.heads_kv == p.heads_kv && params.seqlen_q == p.seqlen_q &&
                      params.seqlen_k == p.seqlen_k && params.head_dim_qk == p.head_dim_qk &&
                      params.head_dim_v == p.head_dim_v;
  const bool types = params.input_dtype == p.input_dtype && params.output_dtype == p.output_dtype &&
                     params.mask == p.mask.kind &&
                     params.window_left == static_cast<int>(p.mask.window_left) &&
                     params.window_right == static_cast<int>(p.mask.window_right);
  const ProblemLayout layout = describe_layout(p);
  const bool strides = strides_match(layout.q.strides, params.q_batch_stride, params.q_row_stride,
                                     params.q_head_stride) &&
                       strides_match(layout.k.strides, params.k_batch_stride, params.k_row_stride,
                                     params.k_head_stride) &&
                       strides_match(layout.v.strides, params.v_batch_stride, params.v_row_stride,
                                     params.v_head_stride) &&
                       strides_match(layout.out.strides, params.out_batch_stride,
                                     params.out_row_stride, params.out_head_stride);
  if (shapes && types && strides) return Status::Ok();
  return Status::Error("params do not match the problem the plan was built for (" +
                       shape_string(planned) + ")");
}

Status check_shared_memory(int device, size_t bytes, const std::string& what) {
  constexpr size_t kKiB = 1024;
  int limit = 0;
  ATTNBENCH_CUDA_TRY(
      cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (static_cast<size_t>(limit) >= bytes) return Status::Ok();
  return Status::Error("unsupported: " + what + " needs " + std::to_string(bytes / kKiB) +
                       " KiB of shared memory per block; the device offers " +
                       std::to_string(static_cast<size_t>(limit) / kKiB) + " KiB");
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::gpu
