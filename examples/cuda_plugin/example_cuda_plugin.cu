// An out-of-tree attnbench kernel on the GPU: one thread per query row, online softmax, fp32.
// Deliberately simple: it shows the plugin ABI on CUDA (device pointers, launches on attnbench's
// stream, no synchronization of its own), not a fast kernel.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>

#include "attnbench_plugin.h"

namespace {

__global__ void row_attention(attnbench_params p) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;  // query row
  const int h = blockIdx.y;
  const int b = blockIdx.z;
  if (i >= p.seqlen_q) return;
  const int kv_head = h / p.heads_per_kv;
  int last = p.seqlen_k;
  if (p.mask == ATTNBENCH_MASK_CAUSAL) last = min(p.seqlen_k, i + 1);
  if (p.mask == ATTNBENCH_MASK_CAUSAL_BR) last = max(0, min(p.seqlen_k, i + 1 + p.seqlen_k - p.seqlen_q));
  const float* q = static_cast<const float*>(p.q) + b * p.q_batch_stride + i * p.q_row_stride + h * p.q_head_stride;
  float* out = static_cast<float*>(p.out) + b * p.out_batch_stride + i * p.out_row_stride + h * p.out_head_stride;
  float running_max = -INFINITY, running_sum = 0.0f;
  for (int d = 0; d < p.head_dim_v; ++d) out[d] = 0.0f;
  for (int j = 0; j < last; ++j) {
    const float* k = static_cast<const float*>(p.k) + b * p.k_batch_stride + j * p.k_row_stride + kv_head * p.k_head_stride;
    const float* v = static_cast<const float*>(p.v) + b * p.v_batch_stride + j * p.v_row_stride + kv_head * p.v_head_stride;
    float score = 0.0f;
    for (int d = 0; d < p.head_dim_qk; ++d) score += q[d] * k[d];
    score *= p.scale;
    const float new_max = fmaxf(running_max, score);
    const float rescale = expf(running_max - new_max);
    const float weight = expf(score - new_max);
    running_sum = running_sum * rescale + weight;
    for (int d = 0; d < p.head_dim_v; ++d) out[d] = out[d] * rescale + weight * v[d];
    running_max = new_max;
  }
  const float inverse = running_sum > 0.0f ? 1.0f / running_sum : 0.0f;
  for (int d = 0; d < p.head_dim_v; ++d) out[d] *= inverse;
}

struct ExamplePlan {
  cudaStream_t stream;
};

int make_plan(void*, const attnbench_params*, const attnbench_plan_context* context, attnbench_plan** plan,
              char*, size_t) {
  *plan = reinterpret_cast<attnbench_plan*>(new ExamplePlan{static_cast<cudaStream_t>(context->stream)});
  return 0;
}

int run(attnbench_plan* opaque, const attnbench_params* p, char* error, size_t error_size) {
  const auto* plan = reinterpret_cast<ExamplePlan*>(opaque);
  const dim3 block(128);
  const dim3 grid((p->seqlen_q + 127) / 128, p->heads_q, p->batch);
  row_attention<<<grid, block, 0, plan->stream>>>(*p);
  const cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess) {
    std::snprintf(error, error_size, "row_attention launch: %s", cudaGetErrorString(launched));
    return 1;
  }
  return 0;
}

void destroy_plan(attnbench_plan* plan) { delete reinterpret_cast<ExamplePlan*>(plan); }

const attnbench_kernel kKernels[] = {{
    "example.rows_cuda",
    "out-of-tree example: one thread per query row, online softmax (fp32)",
    ATTNBENCH_BACKEND_CUDA,
    /*deterministic=*/1,
    /*returns_lse=*/0,
    {/*dtypes=*/"fp32", /*outputs_fp32=*/0, /*head_dims=*/"", /*max_head_dim=*/256,
     /*separate_v_dim=*/1, /*masks=*/"none,causal,causal_br", /*layouts=*/"bshd,bhsd,qkv_packed",
     /*gqa=*/1, /*archs=*/"sm_80,sm_90", /*max_flops=*/2e11, /*notes=*/"examples/cuda_plugin"},
    make_plan,
    run,
    destroy_plan,
    /*details=*/nullptr,
    /*extra_memory_bytes=*/nullptr,
    /*kernel_data=*/nullptr,
}};

const attnbench_plugin kPlugin = {ATTNBENCH_PLUGIN_ABI_VERSION, "example-1.0", 1, kKernels};

}  // namespace

extern "C" __attribute__((visibility("default"))) const attnbench_plugin* attnbench_plugin_entry(void) {
  return &kPlugin;
}
