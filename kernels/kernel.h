// The kernel interface. A kernel publishes a support table and answers every problem with
// "supported" or a reason; inside its table it may not decline. It builds a plan per problem
// (scratch, tiling decisions), and the harness reuses the plan for every timed iteration.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/params.h"
#include "kernels/scratch.h"
#include "reference/fp8_recipe.h"
#include "reference/problem.h"
#include "reference/status.h"

namespace attnbench {

// cpu: host code; cuda: a CUDA GPU; emu: the in-house CUDA kernels' own source on the emulated
// device (kernels/emu/), a correctness device that measures no time.
enum class Backend : uint8_t { cpu, cuda, emu };
std::string_view backend_name(Backend backend);

// A head-dim pair instantiated as such: Q's and K's, then V's and O's (DeepSeek's 192/128).
struct HeadDimPair {
  int64_t qk = 0;
  int64_t v = 0;
  friend bool operator==(const HeadDimPair&, const HeadDimPair&) = default;
};

struct SupportTable {
  std::vector<DType> input_dtypes;
  // Output dtype per input: same as the input, or fp32 accepted too when outputs_fp32 is set.
  bool outputs_fp32 = false;
  std::vector<int64_t> head_dims;  // exact head dims instantiated; empty = any up to max_head_dim
  int64_t max_head_dim = 0;
  int64_t head_dim_multiple = 1;  // with head_dims empty: what every head dim is a multiple of
  bool separate_v_dim = false;  // head_dim_v may differ from head_dim_qk
  // Without separate_v_dim, the pairs with head_dim_v != head_dim_qk instantiated besides
  // head_dims' equal ones (cuda.flash2's 192/128).
  std::vector<HeadDimPair> head_dim_pairs;
  std::vector<MaskKind> masks;
  std::vector<Layout> layouts;
  bool gqa = true;  // heads_q a multiple of heads_kv (includes MQA)
  bool paged_kv = false;  // K and V in a paged cache (Problem::page_size, params.h page_table)
  // The most query rows per sequence (a decode kernel's few); 0: any.
  int64_t max_seqlen_q = 0;
  // The passes the kernel computes: a kernel with a backward (Plan::run_backward) lists bwd and
  // fwd_bwd; the backward covers the rest of the table. FP8 inputs need fp8_backward besides.
  std::vector<Pass> passes = {Pass::fwd};
  bool fp8_backward = false;
  // The head dims the backward is instantiated for, where fewer than the forward's (cuda.flash2:
  // 64 and 128 of 64, 128, 256); empty: the same as the forward's.
  std::vector<int64_t> backward_head_dims;
  // FP8 inputs as stored: the descales the kernel reads (params.h), one per tensor unless it
  // also takes per_head. Problems without FP8 inputs have none and pass.
  std::vector<Fp8Scaling> fp8_scalings = {Fp8Scaling::per_tensor};
  std::vector<std::string> archs;  // "cpu", or "sm_80", "sm_90a", ...
  // Size limit, e.g. what a CPU finishes in reasonable time: problems above it are outside
  // the table and skipped with the reason. 0 = no limit.
  double max_flops = 0;
  std::string notes;
};

// Empty when the problem is inside the table; otherwise "head_dim 96 not instantiated (64, 128)".
std::string unsupported_reason(const SupportTable& table, const Problem& problem);
// One line per property, for `attnbench list kernels --support`.
std::string describe_support(const SupportTable& table);

// What a plan is built with: where its scratch comes from (host memory for CPU kernels, device
// memory for GPU kernels: the harness's tracking allocator either way) and, for GPU kernels,
// the stream every launch goes to and the device it runs on.
struct PlanContext {
  ScratchAllocator& scratch;
  void* stream = nullptr;  // cudaStream_t; null for CPU kernels
  int device = -1;         // CUDA device ordinal; -1 for the CPU
};

class Plan {
 public:
  virtual ~Plan() = default;
  // One forward. CPU plans run synchronously; GPU plans enqueue on the plan's stream.
  virtual Status run(const AttentionParams& params) = 0;
  // One backward (kernels whose table lists the bwd pass): dQ, dK and dV from q, k, v, the
  // upstream gradient dout, and this plan's own forward outputs in out and lse (params.h), which
  // the harness computed with run() before. The plan is built for the problem's pass, so its
  // scratch covers the backward's.
  virtual Status run_backward(const AttentionParams&) {
    return Status::Error("this kernel has no backward");
  }
  // Values the kernel reports about its last run, as a JSON object (FP8 amax outputs, the
  // engine cuDNN chose, ...), stored with the result. Empty when there is nothing to say.
  virtual std::string details() const { return {}; }
  // The extra memory of the last forward in bytes, where the kernel's memory bypasses the
  // harness's tracking allocator (a torch kernel on torch's caching allocator); nullopt: the
  // tracking allocator's high-water mark is the figure; -1: not known (a numpy kernel's).
  virtual std::optional<int64_t> own_extra_memory_bytes() const { return std::nullopt; }
};

// What one forward of a kernel should cost in the two resources the harness measures, from the
// kernel's own structure: the scratch it materializes (fp32 scores, an accumulator row per query)
// and the launches it makes. The harness still measures both (the tracking allocator's high-water
// mark, a captured graph's kernel nodes); the expectation is stored beside the measurement
// (details_json "expected", `attnbench describe`) so that a reader compares the two without a
// formula of its own, and the cost model counts launches from it. nullopt: the kernel declares
// nothing about that resource (a closed library's workspace, a Python kernel's allocator).
struct ResourceExpectation {
  std::optional<int64_t> extra_memory_bytes;
  std::optional<int> launches;  // per forward
};

struct Kernel {
  std::string name;     // "cpu.flash"
  std::string summary;  // one line: what it is
  Backend backend = Backend::cpu;
  bool deterministic = true;  // runs twice bit-for-bit equal
  // The backward's determinism, declared apart: atomics make a backward vary from run to run
  // (its spread is measured and stored); a deterministic one must rerun bit for bit.
  bool backward_deterministic = true;
  bool returns_lse = false;
  // The FP8 recipe the kernel computes with, where it quantizes its fp16/bf16 inputs itself
  // (cpu.flash_fp8, ...): the checker's low-precision result follows it.
  std::optional<Fp8Recipe> fp8_recipe;
  // A kernel whose FP8 recipe is closed (cuDNN's: tile size and key order not published): what it
  // does publish (scales, incoherent processing, an e4m3 output). The checker judges it by the
  // envelope of opaque_fp8_recipes(*fp8_envelope_base). Kernels with neither field are judged by
  // the envelope of the default base on e4m3 inputs.
  std::optional<Fp8Recipe> fp8_envelope_base;
  SupportTable support;
  // The suite whose shapes prove the kernel correct (ctest's tests, the emulated device's matrix,
  // gpu-check's plan): ctest's awkward shapes, or the same shapes at the sizes a kernel
  // instantiates only ("hopper-stages": d 128 bf16; "hopper-fp8": d 128, e4m3 and 16-bit).
  std::string correctness_suite = "ctest";
  // The bytes one forward moves through device memory, from the kernel's own structure (a
  // materialized score matrix written and read back, ...); the harness divides it by the
  // calibrated copy bandwidth to predict the time, and stores prediction and measurement side
  // by side. Empty when the kernel has no such model.
  std::function<double(const Problem& problem)> bytes_moved;
  // The kernel's own time model: the seconds one forward should take on the GPU it is built for,
  // from its structure (cuda.flash3: instructions per key tile over the H200's rates). Stored as
  // the result's predicted_s in place of the bytes model, and `attnbench plan` budgets with it.
  // Empty when the kernel has none.
  std::function<double(const Problem& problem)> predicted_seconds;
  // What one forward of `problem` should cost (ResourceExpectation), the one statement of it:
  // the plan allocates and launches by the same functions where it can. Empty when the kernel
  // declares nothing.
  std::function<ResourceExpectation(const Problem& problem)> expected_resources;
  // Builds a plan; scratch comes from context.scratch so the harness measures it. Called
  // outside the timed region. On failure, the status says why ("out of memory: ..." when
  // scratch could not be had).
  std::function<Result<std::unique_ptr<Plan>>(const Problem& problem, const PlanContext& context)>
      make_plan;
  // A configuration of another kernel, published so a team can name and time it (`attnbench
  // tune`): the family's name ("cpu.flash" for "cpu.flash[block_q=128,block_k=256]", the spelling
  // variant_name gives); empty for the family's own kernel. A variant runs only where named: no
  // glob but its exact name or "<family>[*]" selects it (kernel_selected, registry.h).
  std::string variant_of;
  // The family kernel's own choice for `problem`, spelled as a variant's parameters
  // ("block_q=256,block_k=512"): the table it owns and its plan follows. Empty where the kernel
  // has no variants.
  std::function<std::string(const Problem& problem)> default_variant;
  // Where a kernel from outside the build comes from ("plugin /abs/libx.so, version 1.2",
  // "python /abs/mylib.py, sha256 ..."), stored with each of its results; empty when built in.
  std::string origin;
  // Set when the kernel is known but cannot run on this host (PyTorch not installed, ...):
  // `list kernels` shows it and its cases are skipped with it.
  std::string unavailable_reason;
};

// A variant's name: its family and parameters, "cpu.flash[block_q=128,block_k=256]".
inline std::string variant_name(const std::string& family, const std::string& parameters) {
  return family + "[" + parameters + "]";
}
// The family a kernel belongs to: its variant_of, or its own name.
inline const std::string& family_name(const Kernel& kernel) {
  return kernel.variant_of.empty() ? kernel.name : kernel.variant_of;
}

// The parameters of `problem` without buffers: shapes, strides of its layout, scales, mask and
// dtypes; every pointer null, descales 1. The harness adds the buffers (make_params); a plugin's
// plan sees exactly this.
AttentionParams shape_params(const Problem& problem);

// Why `kernel` does not run `problem` here: its unavailable_reason, else its table's
// unsupported_reason; empty when it runs. The one rule run and plan share.
std::string skip_reason(const Kernel& kernel, const Problem& problem);

// One timed step of `pass` on a built plan: run (fwd), run_backward (bwd: out and lse already
// hold the plan's forward outputs), or both in order (fwd_bwd). The one place a pass becomes
// calls; every executor runs its steps through it.
Status run_pass(Plan& plan, Pass pass, const AttentionParams& params);

// kernel.expected_resources(problem), or nothing declared when the kernel has no such function.
ResourceExpectation expected_resources(const Kernel& kernel, const Problem& problem);

}  // namespace attnbench
