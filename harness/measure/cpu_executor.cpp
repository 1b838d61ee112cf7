// The CPU executor: host buffers, the harness's tracking host allocator, the host clock.
#include <omp.h>

#include <chrono>

#include "harness/measure/executor.h"
#include "harness/measure/tracking_allocator.h"

namespace attnbench {
namespace {

using Clock = std::chrono::steady_clock;

class CpuExecutor final : public DeviceExecutor {
 public:
  explicit CpuExecutor(size_t scratch_limit) : scratch_(scratch_limit) {}

  Status load_inputs(const ProblemInputs& inputs) override {
    inputs_ = &inputs;
    return Status::Ok();
  }

  ScratchAllocator& scratch() override { return scratch_; }
  void reset_scratch_peak() override { scratch_.reset_peak(); }
  size_t scratch_peak_bytes() const override { return scratch_.peak_bytes(); }
  PlanContext plan_context() override { return PlanContext{scratch_}; }

  Status run_checked(Plan& plan, KernelOutputs& outputs, Pass pass) override {
    poison_outputs(inputs_->problem, pass, outputs);
    return run_pass(plan, pass, host_params(*inputs_, outputs));
  }

  TimedForward timed_forward(Plan& plan, KernelOutputs& outputs) override {
    return [&plan, pass = inputs_->problem.pass,
            params = host_params(*inputs_, outputs)](std::string& error) -> double {
      const auto start = Clock::now();
      const Status status = run_pass(plan, pass, params);
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      if (!status.ok) {
        error = status.message;
        return -1;
      }
      return seconds;
    };
  }

  // The phases the kernel marks, on every OpenMP thread, around one forward timed as
  // timed_forward times it.
  Result<ForwardProfile> profile_forward(Plan& plan, KernelOutputs& outputs) override {
    ForwardProfile profile;
    profile.source = "phases";
    PhaseRecording recording(omp_get_max_threads());
    std::string error;
    profile.start_ns = phase_clock_ns();
    profile.forward_s = timed_forward(plan, outputs)(error);
    profile.end_ns = phase_clock_ns();
    if (profile.forward_s < 0) return Status::Error(error);
    profile.activities = activities_from_phases(recording.by_thread());
    return profile;
  }

  void annotate_sample(Sample&) override {}
  int count_launches(Plan&, KernelOutputs&, Status&) override { return -1; }  // no launches here
  double energy_per_forward(Plan&, KernelOutputs&, Status& status) override {
    status = Status::Error("no energy counter on the host (energy is measured on GPUs, by NVML)");
    return kNotMeasured;
  }
  std::string timer_name() const override { return "host steady_clock around one forward"; }
  Backend backend() const override { return Backend::cpu; }

 private:
  TrackingHostAllocator scratch_;
  const ProblemInputs* inputs_ = nullptr;
};

}  // namespace

std::unique_ptr<DeviceExecutor> make_cpu_executor(size_t scratch_limit_bytes) {
  return std::make_unique<CpuExecutor>(scratch_limit_bytes);
}

}  // namespace attnbench
