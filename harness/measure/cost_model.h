// What a case will cost in wall-clock seconds on a modeled device, before any GPU is touched:
// the planner behind `attnbench plan` and `ci/gpu-check.sh --plan`. A prediction is a lead, not
// a measurement: the forward from the kernel's own time model (Kernel::predicted_seconds) or from
// FLOPs and bytes over the device's ceilings at a per-kernel efficiency, the host's share
// (inputs, the fp64 reference of the sampled rows) from rates measured on this project's 2-core
// build machine, and the harness's own overheads (worker start, plan build, checked runs, the
// timing plan of harness/timing.h, energy loop). A GPU run's summary puts each step's measured
// seconds beside its prediction.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/measure/timing.h"
#include "kernels/kernel.h"

namespace attnbench {

struct DeviceModel {
  std::string name;                     // "h100", "h200"
  std::string gpu_name;                 // the name CUDA and nvidia-smi give the card
  std::string rates_measured;           // which rates a GPU run measured, and where
  double gemm_flops_16bit = 0;          // dense fp16/bf16 tensor-core FLOP/s
  double gemm_flops_fp8 = 0;            // dense e4m3 FLOP/s
  double copy_bytes_per_s = 0;          // device-to-device copy, bytes read + written per second
  double host_link_bytes_per_s = 0;     // host <-> device copies of inputs and outputs
  double launch_s = 0;                  // one kernel launch, enqueued and started
  double timed_forward_overhead_s = 0;  // L2 flush + events + synchronize per timed forward
  double worker_start_s = 0;            // a worker process: CUDA context, libraries loaded
};

// Every modeled device, in the order `--device-model`'s error lists them.
const std::vector<DeviceModel>& device_models();
// "h100" or "h200"; nullopt for any other name.
std::optional<DeviceModel> find_device_model(const std::string& name);
// The model of a GPU from the name CUDA gives it ("NVIDIA H100 80GB HBM3"): nullopt for a card
// no model describes (an H100 PCIe or NVL has other SM counts, clocks or memory).
std::optional<DeviceModel> device_model_of_gpu(const std::string& gpu_name);
// "h100, h200": the names --device-model accepts.
std::string device_model_names();

struct CasePrediction {
  double forward_s = 0;  // one forward on the device
  double host_s = 0;     // inputs and the forward's reference, paid once per group of kernels
  double gradient_reference_s = 0;  // a backward's gradients' reference, once per group too
  double plan_s = 0;     // plan build (a cuDNN graph is the expensive one)
  double check_s = 0;    // checked runs: poison, run, copy back, compare, twice if deterministic
  double timing_s = 0;   // warm-up, launch count, the timing plan's repetitions
  double energy_s = 0;   // the hot loop, when asked for
  TimingPlan timing;     // the plan harness/timing.h would make from the predicted forward
  double case_s() const { return plan_s + check_s + timing_s + energy_s; }  // host_s apart
};

struct CaseCostRequest {
  bool check_only = false;
  int repetitions = 10;
  double max_case_seconds = 2.0;
  bool measure_energy = false;
};

CasePrediction predict_case(const Kernel& kernel, const Problem& problem, const DeviceModel& device,
                            const CaseCostRequest& request);

}  // namespace attnbench
