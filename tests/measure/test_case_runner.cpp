// The case recipe (harness/measure/case_runner.h) on the CPU executor and on a CPU executor with
// parts that fail: the outcome names the executor's own timer, and whatever could not be
// measured (launches, energy) says why in the message, even when timing then fails too.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "harness/measure/case_runner.h"
#include "harness/measure/executor.h"
#include "tests/support/problems.h"

namespace attnbench {
namespace {

constexpr size_t kScratchBytes = size_t{1} << 30;

CaseRequest small_case(bool measure_energy) {
  CaseRequest request;
  request.kernel = "cpu.flash";
  request.name = "cpu.flash/b=1,hq=2,s=17,d=16/normal";
  request.problem = parsed_shape("b=1,hq=2,s=17,d=16");
  request.seed = 11;
  request.repetitions = 2;
  request.max_case_seconds = 0.05;
  request.measure_energy = measure_energy;
  return request;
}

// The CPU executor, with its launch counter, energy counter or timer made to fail.
class FailingParts final : public DeviceExecutor {
 public:
  FailingParts(bool launches_fail, bool energy_silent, bool timing_fails)
      : inner_(make_cpu_executor(kScratchBytes)),
        launches_fail_(launches_fail),
        energy_silent_(energy_silent),
        timing_fails_(timing_fails) {}
  Status load_inputs(const ProblemInputs& inputs) override { return inner_->load_inputs(inputs); }
  ScratchAllocator& scratch() override { return inner_->scratch(); }
  void reset_scratch_peak() override { inner_->reset_scratch_peak(); }
  size_t scratch_peak_bytes() const override { return inner_->scratch_peak_bytes(); }
  PlanContext plan_context() override { return inner_->plan_context(); }
  Status run_checked(Plan& plan, KernelOutputs& outputs, Pass pass) override {
    return inner_->run_checked(plan, outputs, pass);
  }
  TimedForward timed_forward(Plan& plan, KernelOutputs& outputs) override {
    TimedForward forward = inner_->timed_forward(plan, outputs);
    if (!timing_fails_) return forward;
    // The first call (the warm-up) passes; the timed repetitions fail.
    return [forward, calls = 0](std::string& error) mutable -> double {
      if (++calls == 1) return forward(error);
      error = "the timer broke";
      return -1;
    };
  }
  void annotate_sample(Sample& sample) override { inner_->annotate_sample(sample); }
  int count_launches(Plan& plan, KernelOutputs& outputs, Status& status) override {
    if (!launches_fail_) return inner_->count_launches(plan, outputs, status);
    status = Status::Error("stream capture refused");
    return -1;
  }
  double energy_per_forward(Plan& plan, KernelOutputs& outputs, Status& status) override {
    if (!energy_silent_) return inner_->energy_per_forward(plan, outputs, status);
    return kNotMeasured;  // neither a value nor a reason
  }
  Result<ForwardProfile> profile_forward(Plan& plan, KernelOutputs& outputs) override {
    return inner_->profile_forward(plan, outputs);
  }
  std::string timer_name() const override { return "test timer \"quoted\""; }
  Backend backend() const override { return inner_->backend(); }

 private:
  std::unique_ptr<DeviceExecutor> inner_;
  bool launches_fail_, energy_silent_, timing_fails_;
};

TEST(CaseRunner, TheOutcomeNamesTheExecutorsTimer) {
  const std::unique_ptr<DeviceExecutor> cpu = make_cpu_executor(kScratchBytes);
  CaseRunner runner(*cpu);
  const CaseOutcome outcome = runner.run(small_case(false));
  EXPECT_EQ(outcome.status, ResultStatus::passed) << outcome.message;
  EXPECT_EQ(outcome.timer, cpu->timer_name());
  EXPECT_EQ(outcome.timer, "host steady_clock around one forward");
  EXPECT_TRUE(outcome.timing.timed);
  // A CPU forward has no launches to count: -1, and nothing to explain.
  EXPECT_EQ(outcome.launches, -1);
  EXPECT_TRUE(outcome.message.empty()) << outcome.message;

  FailingParts other(false, false, false);
  CaseRunner other_runner(other);
  EXPECT_EQ(other_runner.run(small_case(false)).timer, "test timer \"quoted\"");
}

TEST(CaseRunner, EnergyTheHostCannotMeasureSaysWhy) {
  const std::unique_ptr<DeviceExecutor> cpu = make_cpu_executor(kScratchBytes);
  CaseRunner runner(*cpu);
  const CaseOutcome outcome = runner.run(small_case(true));
  EXPECT_EQ(outcome.status, ResultStatus::passed) << outcome.message;
  EXPECT_TRUE(std::isnan(outcome.energy_j));
  EXPECT_EQ(outcome.message, "energy not measured: no energy counter on the host (energy is measured on "
                             "GPUs, by NVML)");
}

TEST(CaseRunner, LaunchesAndEnergyNotMeasuredBothSayWhy) {
  FailingParts executor(/*launches_fail=*/true, /*energy_silent=*/true, /*timing_fails=*/false);
  CaseRunner runner(executor);
  const CaseOutcome outcome = runner.run(small_case(true));
  EXPECT_EQ(outcome.status, ResultStatus::passed) << outcome.message;
  EXPECT_EQ(outcome.message,
            "launches not measured: stream capture refused; "
            "energy not measured: the executor gave no value and no reason");
}

TEST(CaseRunner, ATimingFailureKeepsTheLaunchesReason) {
  FailingParts executor(/*launches_fail=*/true, /*energy_silent=*/false, /*timing_fails=*/true);
  CaseRunner runner(executor);
  const CaseOutcome outcome = runner.run(small_case(true));
  EXPECT_EQ(outcome.status, ResultStatus::error);
  EXPECT_EQ(outcome.message.rfind("timing: ", 0), 0u) << outcome.message;
  EXPECT_NE(outcome.message.find("the timer broke"), std::string::npos) << outcome.message;
  EXPECT_NE(outcome.message.find("; launches not measured: stream capture refused"), std::string::npos)
      << outcome.message;
}

}  // namespace
}  // namespace attnbench
