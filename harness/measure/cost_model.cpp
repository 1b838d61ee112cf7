#include "harness/measure/cost_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "harness/measure/checker.h"
#include "harness/measure/executor.h"
#include "harness/measure/gradient_checker.h"
#include "reference/flops.h"

namespace attnbench {
namespace {

// ---- the devices ---------------------------------------------------------------------------
// Both Hoppers have 132 SMs and the same tensor cores at the same boost clock; they differ in
// memory (H100: 80 GB HBM3, ~3.0 TB/s; H200: 141 GB HBM3e, ~4.3 TB/s), so a compute-bound forward
// costs the same on both and a memory-bound one ~1.4x more on an H100. The overheads are leads
// from the CUDA documentation's orders of magnitude, to be replaced by gpu-check's measured step
// times: a launch ~5 us; a timed forward's flush reads 2x the 50-60 MB L2 (~30-40 us) plus two
// events and a synchronize (~20 us); a worker's CUDA context and cuBLAS/cuDNN handles ~2 s.
//
// One Hopper card: `name` for --device-model, `gpu_name` as CUDA names the card, where its rates
// come from, its bf16 GEMM rate (FP8 at twice it: the datasheet's ratio, not a measurement) and
// its device-to-device copy rate.
DeviceModel hopper_model(std::string name, std::string gpu_name, std::string rates_measured,
                         double gemm_flops_16bit, double copy_bytes_per_s) {
  DeviceModel model;
  model.name = std::move(name);
  model.gpu_name = std::move(gpu_name);
  model.rates_measured = std::move(rates_measured);
  model.gemm_flops_16bit = gemm_flops_16bit;
  model.gemm_flops_fp8 = 2 * gemm_flops_16bit;
  model.copy_bytes_per_s = copy_bytes_per_s;
  model.host_link_bytes_per_s = 10e9;  // pageable host memory over PCIe 5: ~10 GB/s
  model.launch_s = 5e-6;
  model.timed_forward_overhead_s = 50e-6;
  model.worker_start_s = 2.0;
  return model;
}

// ---- the kernels ---------------------------------------------------------------------------
// The fraction of the tensor-core GEMM rate each kernel's forward reaches at large shapes (a
// kernel with its own time model, Kernel::predicted_seconds, is timed by it instead). Leads:
// cuDNN 9.19 on an H200 reaches 702 of 790 TFLOP/s at bf16 d=128 (cudnn-frontend's published
// benchmark, issue 15); FlashAttention-2 on mma.sync reaches about 350 on Hopper; the in-house
// naive family materializes fp32 scores and is bound by their bytes (Kernel::bytes_moved), its
// SIMT arithmetic at a few percent of the tensor rate. A cuDNN graph build takes ~0.5 s
// (heuristics, then the engine's finalize, sometimes an NVRTC compile); the issue measured ~110
// graphs overrunning a 140 s ctest limit: ~1 s is the pessimistic end, used here. The launches of
// a forward are the kernel's own statement (Kernel::expected_resources), one where it makes none
// (cuDNN's and cuBLAS's engines choose theirs).
struct KernelCost {
  double efficiency = 0.05;  // of the dtype's GEMM rate; unknown kernels get a pessimistic 5 %
  double plan_s = 1e-3;
};
constexpr int kUndeclaredLaunches = 1;

const std::map<std::string, KernelCost>& kernel_costs() {
  static const std::map<std::string, KernelCost> costs = {
      {"cudnn.sdpa", {0.85, 1.0}},
      {"cudnn.sdpa_fp8", {0.6, 1.0}},
      // Not measured: cudnn.sdpa_fp8 after the amax and quantize passes, then the dequantize pass,
      // each memory-bound over the 16-bit tensors.
      {"cudnn.sdpa_fp8_quantized", {0.5, 1.0}},
      {"cudnn.sdpa_fp8_incoherent", {0.45, 1.0}},
      {"cuda.flash2", {0.4, 1e-3}},
      // Not measured: the same backward with dQ per split (its forward is cuda.flash2's), 0.85x
      // of it (GPU-CLAIMS.md, flash2-deterministic-cost, claims at least 0.8x).
      {"cuda.flash2_deterministic", {0.34, 1e-3}},
      // The PyTorch peers at the figure shape on an H200 (ci/gpu-runs/2026-12-04-h200-*.md):
      // torch.sdpa_flash 322-329 TFLOP/s, torch.sdpa_cudnn 520-573, of a 790 TFLOP/s bf16 GEMM.
      {"torch.sdpa_flash", {0.4, 1e-3}},
      {"torch.sdpa_cudnn", {0.65, 1e-3}},
      // Not measured: cuda.flash3_wg1, the same one-warpgroup schedule at bf16, measured 375
      // TFLOP/s (0.47 of the bf16 GEMM rate); 0.3 of the e4m3 rate.
      {"cuda.flash3_fp8", {0.3, 1e-3}},
      // Not measured: cuda.flash3_ws, the same warp-specialized schedule at bf16, measured 552
      // (0.70); FP8 halves the tensor cores' time but not the softmax's, which this stage does not
      // overlap: 0.45 of the e4m3 rate.
      {"cuda.flash3_fp8_ws", {0.45, 1e-3}},
      // Not measured: the same forward with no layout pass; its producer warpgroup transposes V
      // in shared memory, which the consumers wait for before P V.
      {"cuda.flash3_fp8_ws_transpose", {0.45, 1e-3}},
      // Not measured: cuda.flash3_fp8's forward after three memory-bound passes (amax, rotate and
      // quantize Q and K, quantize and lay out V), each reading the 16-bit inputs once more.
      {"cuda.flash3_fp8_incoherent", {0.25, 1e-3}},
      // Not measured: one pass finds and applies the block scales, then the layout pass.
      {"cuda.flash3_fp8_block", {0.25, 1e-3}},
      {"cuda.flash3_fp8_block_incoherent", {0.25, 1e-3}},
      {"cuda.flash1", {0.08, 1e-3}},
      {"cuda.naive_cublas", {0.3, 5e-3}},
      {"cuda.naive", {0.03, 1e-3}},
      {"cuda.masked_outofplace", {0.03, 1e-3}},
      {"cuda.masked_inplace", {0.03, 1e-3}},
      {"cuda.masked_fused", {0.03, 1e-3}},
  };
  return costs;
}

// ---- the host
// ------------------------------------------------------------------------------------ Measured on
// this project's 2-core build machine with both cores (AMD EPYC, Release, OMP_NUM_THREADS=2,
// 2026-12-03), a GPU host has more cores and is faster: making the inputs (draw, quantize, lay out)
// 15 ns per element at the figure shape, plus ~20 ms of fixed cost seen at small shapes; the fp64
// reference of the sampled rows (the exact and the kernel-precision attention: two passes of (d_qk
// + d_v) multiply-adds per key) 2.1 ns per multiply-add at 16-bit inputs, about 1.7x that for FP8
// (software e4m3 rounding of P).
constexpr double kInputSecondsPerElement = 15e-9;
constexpr double kInputFixedSeconds = 0.02;
constexpr double kReferenceSecondsPerMultiplyAdd = 2.1e-9;
// The gradients' reference on BLAS blocks (fp64 and fp32 GEMMs: the dQ rows, the groups'
// statistics): at the figure shape (b=2,hq=16,s=8192,d=128, pass=bwd; 2026-12-06, this 2-core
// host) perf put the statistics at 0.8-1.3 s of CPU for 3.4e10 multiply-adds, about 0.04 ns
// each; counted at 0.05 ns.
constexpr double kBlockedReferenceSecondsPerMultiplyAdd = 5e-11;
constexpr double kFp8ReferenceFactor = 1.7;
// Not counted yet: the FP8 recipe rows the checker adds for a kernel judged by its own recipe (one
// set) or by the envelope (four). Measured on this host, quiet, both cores, at the figure shape
// (b=2,hq=16,s=8192,d=128, 480 checked rows; 2026-12-06): on e4m3 inputs the reference took 7.1 s
// (this model: 7.2 s), one set of the kernels' own recipe 4.4 s (13-bit sums; 1.8 s with fp32
// sums), the envelope's four 15.5 s; on bf16 inputs cuda.flash3_fp8's and _incoherent's recipes
// (quantizing the inputs too) 5.0 s and 5.2 s. Counted, the H200 plan would grow by about 30 s, to
// about 264 s, past its 240 s: the rows must get cheaper first (the envelope's four recipes could
// share their scores, which differ in step 4 only; P V's 13-bit sums could run a column at a
// time), or the plan take the GPU host's own rates, which no run has measured (it has 16 cores).
// The comparison of the checked rows against the reference, per output element.
constexpr double kCompareSecondsPerElement = 4e-9;

double peak_flops(const DeviceModel& device, DType dtype) {
  return is_fp8(dtype) ? device.gemm_flops_fp8 : device.gemm_flops_16bit;
}

// The elements of q, k and v the harness allocates, and the output's bytes.
double input_elements(const ProblemLayout& layout) {
  return static_cast<double>(layout.q_buffer_elements + layout.k_buffer_elements +
                             layout.v_buffer_elements);
}

double output_bytes(const Problem& problem, const ProblemLayout& layout) {
  return static_cast<double>(layout.out_elements) *
         static_cast<double>(dtype_size(problem.output_dtype));
}

// The forward's reference visits each sampled row's visible keys only (a causal row half of
// them).
double forward_reference_seconds(const Problem& problem) {
  bool all_rows = false;
  double keys = 0;
  for (const RowIndex& row : select_rows(problem, /*seed=*/1, all_rows)) {
    keys += static_cast<double>(problem.visible(row.b, row.query).size());
  }
  const double per_key = static_cast<double>(problem.head_dim_qk + problem.head_dim_v);
  const double factor = is_fp8(problem.input_dtype) ? kFp8ReferenceFactor : 1.0;
  return 2 * keys * per_key * kReferenceSecondsPerMultiplyAdd * factor;
}

// A backward's gradients' reference (gradient_reference_work), exact and at the kernel's
// precision: its rows at the forward's rate per multiply-add, the statistics of the groups whose
// key rows are checked at the BLAS blocks' rate.
double gradient_reference_seconds(const Problem& problem) {
  if (!problem.has_backward()) return 0;
  const GradientReferenceWork work = gradient_reference_work(problem, /*seed=*/1);
  return 2 * (work.row_wise * kReferenceSecondsPerMultiplyAdd +
              work.blocked * kBlockedReferenceSecondsPerMultiplyAdd);
}

}  // namespace

const std::vector<DeviceModel>& device_models() {
  static const std::vector<DeviceModel> models = {
      // H100 SXM (80 GB HBM3): leads until a run of this project measures them. One such machine
      // measured ~3.0 TB/s device-to-device copy and 798 TFLOP/s on an 8192^3 bf16 GEMM (issue
      // 40, the device tool's notes).
      hopper_model("h100", "NVIDIA H100 80GB HBM3", "leads: no attnbench run on an H100 yet",
                   798e12, 3.0e12),
      // H200: bf16 GEMM 775-790 TFLOP/s and a 4.25-4.3 TB/s copy, measured by this project's own
      // H200 runs and the device tool's notes.
      hopper_model("h200", "NVIDIA H200",
                   "bf16 GEMM and copy measured (ci/gpu-runs/2026-12-04-h200-*.md)", 790e12,
                   4.3e12),
  };
  return models;
}

std::optional<DeviceModel> find_device_model(const std::string& name) {
  for (const DeviceModel& model : device_models()) {
    if (model.name == name) return model;
  }
  return std::nullopt;
}

std::optional<DeviceModel> device_model_of_gpu(const std::string& gpu_name) {
  // The name must start with the model's card name: "NVIDIA H200" also names the H200 NVL, which
  // keeps the H200's SMs and memory; "NVIDIA H100 PCIe" and "NVIDIA H100 NVL" are other cards.
  for (const DeviceModel& model : device_models()) {
    if (gpu_name.rfind(model.gpu_name, 0) == 0) return model;
  }
  return std::nullopt;
}

std::string device_model_names() {
  std::string names;
  for (const DeviceModel& model : device_models()) {
    names += (names.empty() ? "" : ", ") + model.name;
  }
  return names;
}

CasePrediction predict_case(const Kernel& kernel, const Problem& problem, const DeviceModel& device,
                            const CaseCostRequest& request) {
  const auto known = kernel_costs().find(kernel.name);
  const KernelCost cost = known == kernel_costs().end() ? KernelCost{} : known->second;
  CasePrediction p;
  const double bytes = kernel.bytes_moved ? kernel.bytes_moved(problem) : attention_bytes(problem);
  // A kernel's own time model (cuda.flash3's) is the H200's; the device's copy rate still
  // bounds it from below, so an H100's slower memory shows where the bytes decide.
  const double compute_s =
      kernel.predicted_seconds
          ? kernel.predicted_seconds(problem)
          : attention_flops(problem) / (cost.efficiency * peak_flops(device, problem.input_dtype));
  const double device_s = std::max(compute_s, bytes / device.copy_bytes_per_s);
  const int launches = expected_resources(kernel, problem).launches.value_or(kUndeclaredLaunches);
  p.forward_s = device_s + launches * device.launch_s;
  const ProblemLayout layout = describe_layout(problem);
  const double inputs = input_elements(layout);
  const double input_bytes = inputs * static_cast<double>(dtype_size(problem.input_dtype));
  const double copy_back_s = output_bytes(problem, layout) / device.host_link_bytes_per_s;
  p.host_s = kInputFixedSeconds + inputs * kInputSecondsPerElement +
             forward_reference_seconds(problem) + input_bytes / device.host_link_bytes_per_s +
             copy_back_s;
  p.gradient_reference_s = gradient_reference_seconds(problem);
  p.plan_s = cost.plan_s;
  const int checked_runs = kernel.deterministic ? 2 : 1;
  p.check_s = checked_runs * (p.forward_s + copy_back_s + device.launch_s) +
              static_cast<double>(layout.out_elements) * kCompareSecondsPerElement;
  if (!request.check_only) {
    p.timing = plan_timing(ForwardCost{p.forward_s, device.timed_forward_overhead_s},
                           request.repetitions, request.max_case_seconds);
    // warm-up, one captured forward, then the repetitions (no early stop assumed).
    p.timing_s = 2 * (p.forward_s + device.timed_forward_overhead_s) + p.timing.predicted_wall_s();
    if (request.measure_energy) p.energy_s = kEnergyLoopSeconds + 3 * p.forward_s;
  }
  return p;
}

}  // namespace attnbench
