/* attnbench's plugin ABI: how a shared library outside this tree hands attnbench its kernels.
 *
 * Plain C, so a plugin builds with any compiler (C, C++, CUDA) against this one header and no
 * other attnbench file. A plugin exports one function,
 *
 *     const attnbench_plugin* attnbench_plugin_entry(void);
 *
 * and `attnbench run|check|list --plugin path/libmykernels.so` loads it, checks abi_version
 * against ATTNBENCH_PLUGIN_ABI_VERSION (a mismatch is a one-line error) and registers every
 * kernel it lists: they are checked, timed, stored and gated like the built-in ones.
 *
 * Rules a plugin keeps:
 *  - Names are "<namespace>.<kernel>" (letters, digits, '_', '.', '-'), unique in the run.
 *  - Strings in a support table are comma-separated canonical names, as suites write them:
 *    dtypes fp32, fp16, bf16, e4m3, e5m2; masks none, causal, causal_br, window, padding;
 *    layouts bshd, bhsd, qkv_packed; archs "cpu" or "sm_80", "sm_90a", ...
 *  - A kernel may not decline a problem inside its support table: make_plan fails only for
 *    real errors (out of memory: start the message with "out of memory").
 *  - Scratch memory comes from the context's allocator, so attnbench measures it.
 *  - GPU kernels enqueue every launch on context->stream and return without synchronizing.
 *  - A query row with no visible key outputs zeros (and LSE -inf).
 *  - Error messages are one line, written into `error` (error_size bytes, NUL-terminated).
 *
 * Version history: 1 (attnbench issue 13) — the first; 2 (issue 17) — the plan context's phase
 * callback; 3 (issue 36) — the backward: the params' gradient fields and the plugin's optional
 * `backwards` table. attnbench accepts plugins of every version; older ones are forward only.
 */
#ifndef ATTNBENCH_PLUGIN_H_
#define ATTNBENCH_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTNBENCH_PLUGIN_ABI_VERSION 3

/* Element types, masks and layouts, numbered as attnbench numbers them. */
typedef enum {
  ATTNBENCH_DTYPE_FP32 = 0,
  ATTNBENCH_DTYPE_FP16 = 1,
  ATTNBENCH_DTYPE_BF16 = 2,
  ATTNBENCH_DTYPE_E4M3 = 3,
  ATTNBENCH_DTYPE_E5M2 = 4
} attnbench_dtype;

typedef enum {
  ATTNBENCH_MASK_NONE = 0,
  ATTNBENCH_MASK_CAUSAL = 1,    /* top-left aligned: query i sees keys 0..i */
  ATTNBENCH_MASK_CAUSAL_BR = 2, /* bottom-right aligned: query i sees keys 0..i + seqlen_k - seqlen_q */
  ATTNBENCH_MASK_WINDOW = 3,    /* bottom-right aligned local attention, offset = seqlen_k - seqlen_q:
                                   i + offset - window_left <= j <= i + offset + window_right,
                                   -1 unbounded on that side */
  ATTNBENCH_MASK_PADDING = 4    /* batch b sees its first key_lengths[b] keys */
} attnbench_mask;

typedef enum { ATTNBENCH_BACKEND_CPU = 0, ATTNBENCH_BACKEND_CUDA = 1 } attnbench_backend;

/* One forward's arguments: the same fields as attnbench's own kernels receive
 * (kernels/params.h). Strides are in elements; the head_dim stride is 1. Pointers are host
 * pointers for CPU kernels and device pointers for CUDA ones; make_plan sees them null. */
typedef struct {
  const void* q;   /* (batch, seqlen_q, heads_q, head_dim_qk) through q_*_stride */
  const void* k;   /* (batch, seqlen_k, heads_kv, head_dim_qk) */
  const void* v;   /* (batch, seqlen_k, heads_kv, head_dim_v) */
  void* out;       /* (batch, seqlen_q, heads_q, head_dim_v) */
  float* lse;      /* (batch, heads_q, seqlen_q) natural-log LSE, or null when not wanted */
  int64_t q_batch_stride, q_row_stride, q_head_stride;
  int64_t k_batch_stride, k_row_stride, k_head_stride;
  int64_t v_batch_stride, v_row_stride, v_head_stride;
  int64_t out_batch_stride, out_row_stride, out_head_stride;
  int32_t batch, heads_q, heads_kv, seqlen_q, seqlen_k, head_dim_qk, head_dim_v;
  int32_t heads_per_kv;        /* heads_q / heads_kv */
  float scale;                 /* softmax scale applied to q . k */
  int32_t mask;                /* attnbench_mask */
  int32_t window_left, window_right;
  const int32_t* key_lengths;  /* padding mask: (batch,) valid keys, same memory as q; else null */
  int32_t input_dtype, output_dtype; /* attnbench_dtype */
  float q_descale, k_descale, v_descale, out_scale; /* FP8 scales; 1 otherwise */
  /* Since ABI 3: the backward's tensors (null in a forward). out and lse hold the plan's own
   * forward outputs, which a backward reads; dout is the upstream gradient, placed like out;
   * dq (batch, seqlen_q, heads_q, head_dim_qk), dk (batch, seqlen_k, heads_kv, head_dim_qk) and
   * dv (batch, seqlen_k, heads_kv, head_dim_v) are written through their strides, dk and dv of a
   * GQA group summed over its query heads. dout and the gradients are in grad_dtype. */
  const void* dout;
  void* dq;
  void* dk;
  void* dv;
  int64_t dout_batch_stride, dout_row_stride, dout_head_stride;
  int64_t dq_batch_stride, dq_row_stride, dq_head_stride;
  int64_t dk_batch_stride, dk_row_stride, dk_head_stride;
  int64_t dv_batch_stride, dv_row_stride, dv_head_stride;
  int32_t grad_dtype; /* attnbench_dtype */
  int32_t pass;       /* 0 fwd, 1 bwd, 2 fwd_bwd: the case's pass, so make_plan can size for it */
} attnbench_params;

/* Where a plan's scratch comes from, and where a GPU plan launches. */
typedef struct {
  void* (*allocate)(void* allocator, size_t bytes); /* 64-byte aligned; null when out of memory */
  void (*deallocate)(void* allocator, void* pointer);
  void* allocator;
  void* stream; /* cudaStream_t for CUDA kernels; null for CPU kernels */
  int32_t device; /* CUDA device ordinal; -1 for the CPU */
  /* Since ABI 2. Where a CPU forward spends its time, for `attnbench profile`:
   * phase(phase_host, "scores") starts the phase "scores" on the calling thread, ending the one
   * it started before; phase(phase_host, NULL) ends it (after run returns attnbench ends the
   * calling thread's; end your own threads' phases yourself). Threads of your own share one track
   * in the profile. Outside a profile a call costs one load and a branch. Names must stay valid
   * while the plan lives; attnbench's own use scores, mask, softmax, output, convert. */
  void (*phase)(void* phase_host, const char* name);
  void* phase_host;
} attnbench_plan_context;

typedef struct {
  const char* dtypes;      /* input dtypes, e.g. "fp32,bf16" */
  int32_t outputs_fp32;    /* 1: fp32 output accepted besides the input dtype */
  const char* head_dims;   /* exact head dims, e.g. "64,128"; "" or null: any up to max_head_dim */
  int32_t max_head_dim;    /* 0: no limit */
  int32_t separate_v_dim;  /* 1: head_dim_v may differ from head_dim_qk */
  const char* masks;       /* e.g. "none,causal" */
  const char* layouts;     /* e.g. "bshd,bhsd" */
  int32_t gqa;             /* 1: heads_q a multiple of heads_kv */
  const char* archs;       /* "cpu", or "sm_80,sm_90a" */
  double max_flops;        /* 0: no limit; else a size limit in 2 (d_qk + d_v) b h_q s_q s_k FLOP */
  const char* notes;       /* one line, or null */
} attnbench_support;

typedef struct attnbench_plan attnbench_plan; /* the plugin's own */

typedef struct {
  const char* name;      /* "mylib.attention" */
  const char* summary;   /* one line: what it is */
  int32_t backend;       /* attnbench_backend */
  int32_t deterministic; /* 1: two runs give identical bytes (attnbench checks it) */
  int32_t returns_lse;   /* 1: writes params->lse */
  attnbench_support support;
  /* Builds a plan for the problem in `shape` (its pointers are null). `kernel_data` is this
   * description's own field below, handed back. Returns 0 and sets *plan, or nonzero with a
   * one-line reason in `error`. */
  int (*make_plan)(void* kernel_data, const attnbench_params* shape,
                   const attnbench_plan_context* context, attnbench_plan** plan, char* error,
                   size_t error_size);
  /* One forward. Returns 0, or nonzero with a one-line reason in `error`. */
  int (*run)(attnbench_plan* plan, const attnbench_params* params, char* error, size_t error_size);
  void (*destroy_plan)(attnbench_plan* plan);
  /* Optional (null): a JSON object about the last run, stored with the result; the string
   * stays valid until the next call on this plan. */
  const char* (*details)(attnbench_plan* plan);
  /* Optional (null): the extra memory of the last forward in bytes, for a plan whose memory
   * bypasses the context's allocator (a caching allocator of its own); -1 when not known. */
  int64_t (*extra_memory_bytes)(attnbench_plan* plan);
  /* Optional: the plugin's own state for this kernel, passed to make_plan (one make_plan can
   * serve many kernels). */
  void* kernel_data;
} attnbench_kernel;

/* Since ABI 3: one kernel's backward. attnbench calls run_backward after a forward (run) of the
 * same plan, with params->out and params->lse holding that forward's outputs (lse only when the
 * kernel sets returns_lse; a plan may keep what its backward needs itself); it writes
 * params->dq, dk and dv. Returns 0, or nonzero with a
 * one-line reason in `error`. A plan is built for its problem's pass (make_plan's shape->pass),
 * so make_plan may size the backward's scratch there. */
typedef struct {
  int (*run_backward)(attnbench_plan* plan, const attnbench_params* params, char* error,
                      size_t error_size);
  int32_t deterministic; /* 1: two backwards give identical bytes (attnbench checks it); 0: its
                            run-to-run difference is measured and stored */
} attnbench_backward;

typedef struct {
  int32_t abi_version;  /* ATTNBENCH_PLUGIN_ABI_VERSION as the plugin was built */
  const char* version;  /* the plugin's own version or commit, stored with every result */
  int32_t kernel_count;
  const attnbench_kernel* kernels;
  /* Since ABI 3, optional (null: no kernel has a backward): kernel_count entries, the backward of
   * kernels[i] at backwards[i]; an entry whose run_backward is null has none. */
  const attnbench_backward* backwards;
} attnbench_plugin;

typedef const attnbench_plugin* (*attnbench_plugin_entry_fn)(void);
#define ATTNBENCH_PLUGIN_ENTRY_SYMBOL "attnbench_plugin_entry"

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ATTNBENCH_PLUGIN_H_ */
