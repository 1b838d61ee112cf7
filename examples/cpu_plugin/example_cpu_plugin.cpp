// An out-of-tree attnbench kernel: online-softmax attention on the CPU, one query row at a
// time, fp32 in and out. It shows the whole plugin ABI: the support table, a plan that takes
// its scratch from attnbench (so attnbench measures it), one-line errors, the phases
// `attnbench profile` shows (ABI 2) and a backward (ABI 3: `attnbench run --pass bwd`).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "attnbench_plugin.h"

#ifndef EXAMPLE_ABI_VERSION
#define EXAMPLE_ABI_VERSION ATTNBENCH_PLUGIN_ABI_VERSION
#endif

namespace {

struct ExamplePlan {
  attnbench_plan_context context;
  float* row = nullptr;  // one row of scores: scratch from attnbench's allocator
};

// Marks where the forward's time goes, for `attnbench profile` (free outside a profile).
void phase(const ExamplePlan& plan, const char* name) {
  if (plan.context.phase != nullptr) plan.context.phase(plan.context.phase_host, name);
}

// Keys query `i` of batch `b` may see: [first, last).
void visible_keys(const attnbench_params& p, int b, int i, int& first, int& last) {
  first = 0;
  last = p.seqlen_k;
  switch (p.mask) {
    case ATTNBENCH_MASK_CAUSAL:
      last = std::min(p.seqlen_k, i + 1);
      break;
    case ATTNBENCH_MASK_CAUSAL_BR:
      last = std::clamp(i + 1 + p.seqlen_k - p.seqlen_q, 0, p.seqlen_k);
      break;
    case ATTNBENCH_MASK_PADDING:
      last = p.key_lengths[b];
      break;
    default:
      break;
  }
}

int make_plan(void*, const attnbench_params* shape, const attnbench_plan_context* context,
              attnbench_plan** plan, char* error, size_t error_size) {
  auto* made = new ExamplePlan{*context, nullptr};
  made->row = static_cast<float*>(context->allocate(context->allocator, sizeof(float) * shape->seqlen_k));
  if (made->row == nullptr) {
    std::snprintf(error, error_size, "out of memory: %d floats of scores", shape->seqlen_k);
    delete made;
    return 1;
  }
  *plan = reinterpret_cast<attnbench_plan*>(made);
  return 0;
}

int run(attnbench_plan* opaque, const attnbench_params* params, char* error, size_t error_size) {
  const attnbench_params& p = *params;
  const ExamplePlan& plan = *reinterpret_cast<ExamplePlan*>(opaque);
  float* row = plan.row;
  if (p.input_dtype != ATTNBENCH_DTYPE_FP32) {
    std::snprintf(error, error_size, "dtype %d is outside the table (fp32)", p.input_dtype);
    return 1;
  }
  const auto* q = static_cast<const float*>(p.q);
  const auto* k = static_cast<const float*>(p.k);
  const auto* v = static_cast<const float*>(p.v);
  auto* out = static_cast<float*>(p.out);
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.heads_q; ++h) {
      const int kv_head = h / p.heads_per_kv;
      for (int i = 0; i < p.seqlen_q; ++i) {
        const float* q_row = q + b * p.q_batch_stride + i * p.q_row_stride + h * p.q_head_stride;
        float* o = out + b * p.out_batch_stride + i * p.out_row_stride + h * p.out_head_stride;
        int first = 0, last = 0;
        visible_keys(p, b, i, first, last);
        float max_score = -std::numeric_limits<float>::infinity();
        phase(plan, "scores");
        for (int j = first; j < last; ++j) {
          const float* k_row = k + b * p.k_batch_stride + j * p.k_row_stride + kv_head * p.k_head_stride;
          float dot = 0;
          for (int d = 0; d < p.head_dim_qk; ++d) dot += q_row[d] * k_row[d];
          row[j] = dot * p.scale;
          max_score = std::max(max_score, row[j]);
        }
        phase(plan, "softmax");
        double sum = 0;
        for (int j = first; j < last; ++j) sum += row[j] = std::exp(row[j] - max_score);
        phase(plan, "output");
        for (int d = 0; d < p.head_dim_v; ++d) o[d] = 0;
        for (int j = first; j < last; ++j) {
          const float* v_row = v + b * p.v_batch_stride + j * p.v_row_stride + kv_head * p.v_head_stride;
          const float weight = static_cast<float>(row[j] / sum);
          for (int d = 0; d < p.head_dim_v; ++d) o[d] += weight * v_row[d];
        }
        if (p.lse != nullptr) {
          p.lse[(static_cast<int64_t>(b) * p.heads_q + h) * p.seqlen_q + i] =
              last > first ? max_score + static_cast<float>(std::log(sum))
                           : -std::numeric_limits<float>::infinity();
        }
        if (last <= first) std::fill(o, o + p.head_dim_v, 0.0f);  // no visible key: zeros
      }
    }
  }
  phase(plan, nullptr);
  return 0;
}

// dq, dk, dv from dout and the forward's own out and LSE, row by row: P recomputed from the LSE,
// D = dO . O, dS = P (dP - D); dk and dv accumulate over every query head of their group.
int run_backward(attnbench_plan* opaque, const attnbench_params* params, char* error,
                 size_t error_size) {
  const attnbench_params& p = *params;
  const ExamplePlan& plan = *reinterpret_cast<ExamplePlan*>(opaque);
  if (p.grad_dtype != ATTNBENCH_DTYPE_FP32 || p.lse == nullptr) {
    std::snprintf(error, error_size, "the backward needs fp32 gradients and the forward's LSE");
    return 1;
  }
  const auto* q = static_cast<const float*>(p.q);
  const auto* k = static_cast<const float*>(p.k);
  const auto* v = static_cast<const float*>(p.v);
  const auto* out = static_cast<const float*>(p.out);
  const auto* dout = static_cast<const float*>(p.dout);
  auto* dq = static_cast<float*>(p.dq);
  auto* dk = static_cast<float*>(p.dk);
  auto* dv = static_cast<float*>(p.dv);
  phase(plan, "zero");
  for (int b = 0; b < p.batch; ++b) {
    for (int j = 0; j < p.seqlen_k; ++j) {
      for (int h = 0; h < p.heads_kv; ++h) {
        std::fill_n(dk + b * p.dk_batch_stride + j * p.dk_row_stride + h * p.dk_head_stride, p.head_dim_qk, 0.0f);
        std::fill_n(dv + b * p.dv_batch_stride + j * p.dv_row_stride + h * p.dv_head_stride, p.head_dim_v, 0.0f);
      }
    }
  }
  phase(plan, "gradients");
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.heads_q; ++h) {
      const int kv_head = h / p.heads_per_kv;
      for (int i = 0; i < p.seqlen_q; ++i) {
        const float* q_row = q + b * p.q_batch_stride + i * p.q_row_stride + h * p.q_head_stride;
        const float* o = out + b * p.out_batch_stride + i * p.out_row_stride + h * p.out_head_stride;
        const float* g = dout + b * p.dout_batch_stride + i * p.dout_row_stride + h * p.dout_head_stride;
        float* dq_row = dq + b * p.dq_batch_stride + i * p.dq_row_stride + h * p.dq_head_stride;
        std::fill_n(dq_row, p.head_dim_qk, 0.0f);
        const float lse = p.lse[(static_cast<int64_t>(b) * p.heads_q + h) * p.seqlen_q + i];
        float delta = 0;
        for (int d = 0; d < p.head_dim_v; ++d) delta += g[d] * o[d];
        int first = 0, last = 0;
        visible_keys(p, b, i, first, last);
        for (int j = first; j < last; ++j) {
          const int64_t k_at = b * p.k_batch_stride + j * p.k_row_stride + kv_head * p.k_head_stride;
          const int64_t v_at = b * p.v_batch_stride + j * p.v_row_stride + kv_head * p.v_head_stride;
          float score = 0, dp = 0;
          for (int d = 0; d < p.head_dim_qk; ++d) score += q_row[d] * k[k_at + d];
          for (int d = 0; d < p.head_dim_v; ++d) dp += g[d] * v[v_at + d];
          const float probability = std::exp(score * p.scale - lse);
          const float ds = probability * (dp - delta) * p.scale;
          float* dk_row = dk + b * p.dk_batch_stride + j * p.dk_row_stride + kv_head * p.dk_head_stride;
          float* dv_row = dv + b * p.dv_batch_stride + j * p.dv_row_stride + kv_head * p.dv_head_stride;
          for (int d = 0; d < p.head_dim_qk; ++d) {
            dq_row[d] += ds * k[k_at + d];
            dk_row[d] += ds * q_row[d];
          }
          for (int d = 0; d < p.head_dim_v; ++d) dv_row[d] += probability * g[d];
        }
      }
    }
  }
  phase(plan, nullptr);
  return 0;
}

void destroy_plan(attnbench_plan* opaque) {
  auto* plan = reinterpret_cast<ExamplePlan*>(opaque);
  plan->context.deallocate(plan->context.allocator, plan->row);
  delete plan;
}

const attnbench_kernel kKernels[] = {{
    "example.online_cpu",
    "out-of-tree example: online-softmax attention, one query row at a time (fp32)",
    ATTNBENCH_BACKEND_CPU,
    /*deterministic=*/1,
    /*returns_lse=*/1,
    {/*dtypes=*/"fp32", /*outputs_fp32=*/0, /*head_dims=*/"", /*max_head_dim=*/256,
     /*separate_v_dim=*/1, /*masks=*/"none,causal,causal_br,padding", /*layouts=*/"bshd,bhsd,qkv_packed",
     /*gqa=*/1, /*archs=*/"cpu", /*max_flops=*/4e9, /*notes=*/"examples/cpu_plugin"},
    make_plan,
    run,
    destroy_plan,
    /*details=*/nullptr,
    /*extra_memory_bytes=*/nullptr,
    /*kernel_data=*/nullptr,
}};

// ABI 3: the kernel's backward, deterministic (one thread, one order).
const attnbench_backward kBackwards[] = {{run_backward, /*deterministic=*/1}};

const attnbench_plugin kPlugin = {EXAMPLE_ABI_VERSION, "example-1.0", 1, kKernels, kBackwards};

}  // namespace

extern "C" __attribute__((visibility("default"))) const attnbench_plugin* attnbench_plugin_entry(void) {
  return &kPlugin;
}
