// The case recipe (harness/measure/case_runner.h) on the CPU executor and on a CPU executor with
// parts that fail: the outcome names the executor's own timer, and whatever could not be
// measured (launches, energy) says why in the message, even when timing then fails too.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

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

CaseRequest case_of(const std::string& kernel, const std::string& shape) {
  CaseRequest request = small_case(false);
  request.kernel = kernel;
  request.problem = parsed_shape(shape);
  request.name = kernel + "/" + shape + "/normal";
  return request;
}

// Issue 41: the kernels of one problem, checked one by one and timed together; each outcome is
// what the case alone gives, its extra memory its own although the others' plans are alive.
TEST(CaseRunner, AGroupIsCheckedCaseByCaseAndTimedTogether) {
  const std::string shape = "b=1,hq=2,s=40,d=16";
  const std::unique_ptr<DeviceExecutor> cpu = make_cpu_executor(kScratchBytes);
  CaseRunner runner(*cpu);
  const CaseOutcome naive_alone = runner.run(case_of("cpu.naive", shape));
  ASSERT_EQ(naive_alone.status, ResultStatus::passed) << naive_alone.message;
  ASSERT_GT(naive_alone.extra_memory_bytes, 0);

  const std::vector<CaseOutcome> group =
      runner.run_group({case_of("cpu.masked_outofplace", shape), case_of("cpu.naive", shape),
                        case_of("cpu.nonexistent", shape), case_of("cpu.flash", shape)});
  ASSERT_EQ(group.size(), 4u);
  for (size_t i : {0, 1, 3}) {
    EXPECT_EQ(group[i].status, ResultStatus::passed) << i << ": " << group[i].message;
    EXPECT_TRUE(group[i].timing.timed) << i;
    EXPECT_GE(group[i].samples.size(), 2u) << i;
  }
  EXPECT_EQ(group[1].extra_memory_bytes, naive_alone.extra_memory_bytes);
  EXPECT_EQ(group[2].status, ResultStatus::error);
  EXPECT_EQ(group[2].message, "unknown kernel 'cpu.nonexistent'");
}

// A plan that does not fit beside the plans in flight lets those be timed and freed first, then
// runs: never "out of memory" for what fits alone. Another problem in the same request waits for
// the cases in flight too (they share the inputs).
TEST(CaseRunner, AGroupThatDoesNotFitTogetherIsTimedInTurns) {
  const std::string shape = "b=1,hq=2,s=64,d=16";
  const std::unique_ptr<DeviceExecutor> probe = make_cpu_executor(kScratchBytes);
  const CaseOutcome alone = CaseRunner(*probe).run(case_of("cpu.naive", shape));
  ASSERT_EQ(alone.status, ResultStatus::passed) << alone.message;
  const size_t one_plan = static_cast<size_t>(alone.extra_memory_bytes);
  const std::unique_ptr<DeviceExecutor> tight = make_cpu_executor(one_plan + one_plan / 2);
  CaseRunner runner(*tight);
  const std::vector<CaseOutcome> outcomes = runner.run_group(
      {case_of("cpu.naive", shape), case_of("cpu.naive", shape),
       case_of("cpu.naive", "b=1,hq=2,s=33,d=16"), case_of("cpu.flash", shape)});
  ASSERT_EQ(outcomes.size(), 4u);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    EXPECT_EQ(outcomes[i].status, ResultStatus::passed) << i << ": " << outcomes[i].message;
    EXPECT_TRUE(outcomes[i].timing.timed) << i;
  }
  EXPECT_EQ(outcomes[1].extra_memory_bytes, alone.extra_memory_bytes);
}

}  // namespace
}  // namespace attnbench
