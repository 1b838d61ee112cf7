// The kernel interface. A kernel publishes a support table and answers every problem with
// "supported" or a reason; inside its table it may not decline. It builds a plan per problem
// (scratch, tiling decisions), and the harness reuses the plan for every timed iteration.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/params.h"
#include "kernels/scratch.h"
#include "reference/problem.h"
#include "reference/status.h"

namespace attnbench {

enum class Backend : uint8_t { cpu, cuda };
std::string_view backend_name(Backend backend);

struct SupportTable {
  std::vector<DType> input_dtypes;
  // Output dtype per input: same as the input, or fp32 accepted too when outputs_fp32 is set.
  bool outputs_fp32 = false;
  std::vector<int64_t> head_dims;  // exact head dims instantiated; empty = any up to max_head_dim
  int64_t max_head_dim = 0;
  bool separate_v_dim = false;  // head_dim_v may differ from head_dim_qk
  std::vector<MaskKind> masks;
  std::vector<Layout> layouts;
  bool gqa = true;                 // heads_q a multiple of heads_kv (includes MQA)
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
  // Values the kernel reports about its last run, as a JSON object (FP8 amax outputs, the
  // engine cuDNN chose, ...), stored with the result. Empty when there is nothing to say.
  virtual std::string details() const { return {}; }
};

struct Kernel {
  std::string name;     // "cpu.flash"
  std::string summary;  // one line: what it is
  Backend backend = Backend::cpu;
  bool deterministic = true;  // runs twice bit-for-bit equal
  bool returns_lse = false;
  SupportTable support;
  // The bytes one forward moves through device memory, from the kernel's own structure (a
  // materialized score matrix written and read back, ...); the harness divides it by the
  // calibrated copy bandwidth to predict the time, and stores prediction and measurement side
  // by side. Empty when the kernel has no such model.
  std::function<double(const Problem& problem)> bytes_moved;
  // Builds a plan; scratch comes from context.scratch so the harness measures it. Called
  // outside the timed region. On failure, the status says why ("out of memory: ..." when
  // scratch could not be had).
  std::function<Result<std::unique_ptr<Plan>>(const Problem& problem, const PlanContext& context)>
      make_plan;
};

}  // namespace attnbench
