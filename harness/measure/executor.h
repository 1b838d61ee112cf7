// Where a case's kernel runs. One executor per worker process and device: the CPU executor runs
// on host buffers with the host clock; the CUDA executor (harness/cuda/) owns a dedicated stream,
// device copies of the inputs, guarded device outputs, event timing with an L2 flush outside the
// timed region, NVML clocks per repetition, energy from a hot loop, and launch counts from a
// captured CUDA graph. The case recipe (harness/case_runner.cpp) is the same for every device.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "harness/measure/checker.h"
#include "harness/measure/inputs.h"
#include "harness/measure/profile.h"
#include "harness/core/records.h"
#include "harness/measure/timing.h"
#include "kernels/kernel.h"

namespace attnbench {

class DeviceExecutor {
 public:
  virtual ~DeviceExecutor() = default;

  // Makes `inputs` the current inputs (the CUDA executor copies q, k, v and the key lengths to
  // the device). `inputs` outlives every call below until the next load_inputs.
  virtual Status load_inputs(const ProblemInputs& inputs) = 0;

  // Scratch for plans: a tracking allocator (host or device memory). The peak is reset before
  // each plan is built and read after its checked runs: the measured extra memory per forward
  // (above what other plans still alive hold: an interleaved group keeps its plans together).
  virtual ScratchAllocator& scratch() = 0;
  virtual void reset_scratch_peak() = 0;
  virtual size_t scratch_peak_bytes() const = 0;
  virtual PlanContext plan_context() = 0;

  // Poisons what a step of `pass` writes (poison_outputs), runs that step (run_pass: a forward,
  // a backward reading the forward outputs left in `outputs` by an earlier forward step, or
  // both), waits for it, and brings what it wrote back into the host buffers of `outputs` (made
  // by make_outputs); sets outputs.guards_ok from the guard regions around the device buffers.
  // Any error, a sticky CUDA error included, is returned. The case runner checks a backward by
  // a forward step, then a backward step.
  virtual Status run_checked(Plan& plan, KernelOutputs& outputs, Pass pass) = 0;

  // The methods below run the case's own pass (its problem's: a forward, a backward, or both)
  // wherever they say "forward": one timed step.
  // One forward as Google Benchmark times it: seconds measured by the device's timer (host
  // clock; CUDA events on a dedicated stream, with the L2 flushed before, outside the events).
  // Valid until the next load_inputs.
  virtual TimedForward timed_forward(Plan& plan, KernelOutputs& outputs) = 0;
  // After each timed repetition: what the device reads once per repetition (the SM clock and
  // clock-event reasons from NVML on a GPU; nothing on the CPU), never once per forward.
  virtual void annotate_sample(Sample& sample) = 0;

  // Kernel launches in one forward: on a GPU from a captured CUDA graph; on the emulated device
  // those of the last checked forward, as its stream counted them (it times nothing, so the
  // case recipe asks right after the check); -1 where it does not apply (the CPU).
  virtual int count_launches(Plan& plan, KernelOutputs& outputs, Status& status) = 0;
  // Joules per forward from back-to-back forwards lasting at least kEnergyLoopSeconds; NaN when
  // the device has no energy counter.
  virtual double energy_per_forward(Plan& plan, KernelOutputs& outputs, Status& status) = 0;

  // One forward recorded as activities (harness/measure/profile.h): the phases of a CPU kernel,
  // CUPTI's activities on a GPU, the emulated launches; its forward_s as timed_forward times it.
  // For `attnbench profile`, after the case's check; median_s is left for the caller.
  virtual Result<ForwardProfile> profile_forward(Plan& plan, KernelOutputs& outputs) = 0;

  virtual std::string timer_name() const = 0;  // "host steady_clock", "cudaEvent (L2 flushed)"

  // Which kernels run here (a kernel's Backend), and whether this device times them: the
  // emulated device checks correctness only, so its cases store no samples.
  virtual Backend backend() const = 0;
  virtual bool measures_time() const { return true; }
  // What the device adds to a result's details (a JSON object; empty for nothing): the
  // emulated device's schedule seeds, so a failing schedule can be replayed.
  virtual std::string run_details() const { return {}; }

  // False after an error that leaves the device unusable (a sticky CUDA error: illegal address,
  // launch failure). The worker reports the case as crashed and exits; the parent starts a
  // fresh worker for the next case.
  virtual bool healthy() const { return true; }
};

constexpr double kEnergyLoopSeconds = 1.0;

std::unique_ptr<DeviceExecutor> make_cpu_executor(size_t scratch_limit_bytes);
// kernels/emu/: the in-house CUDA kernels on the CPU; ATTNBENCH_EMU_SEED sets the schedules' seed.
std::unique_ptr<DeviceExecutor> make_emu_executor(size_t scratch_limit_bytes);

#if defined(ATTNBENCH_HAVE_CUDA)
// harness/cuda/: binds the calling process to `device` (cudaSetDevice) and makes its stream.
std::unique_ptr<DeviceExecutor> make_cuda_executor(int device, Status& status);
#endif

}  // namespace attnbench
