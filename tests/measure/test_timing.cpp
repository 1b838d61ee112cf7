// The timing plan and the repetition loop (harness/timing.h): plans in wall-clock time, one
// device reading per repetition, and the stop rule (stable, repetitions, budget).
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "harness/measure/timing.h"

namespace attnbench {
namespace {

using Clock = std::chrono::steady_clock;

// A forward that takes `wall_s` of real time (a spin: sleeps round up to the scheduler's tick)
// and reports `reported_s()` as its timed seconds.
TimedForward spinning_forward(double wall_s, std::function<double()> reported_s) {
  return [wall_s, reported_s](std::string&) {
    const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                     std::chrono::duration<double>(wall_s));
    while (Clock::now() < end) {
    }
    return reported_s();
  };
}

TEST(TimingPlan, CountsEveryForwardsWallCostNotOnlyTheDeviceTime) {
  std::mt19937_64 rng(std::random_device{}());
  // A microsecond-scale GPU forward whose flush, events and synchronize cost ten times more.
  const double forward_s = std::uniform_real_distribution<double>(3e-6, 8e-6)(rng);
  const double overhead_s = std::uniform_real_distribution<double>(40e-6, 60e-6)(rng);
  const TimingPlan device_only = plan_timing(ForwardCost{forward_s, 0}, 10, 0.5);
  const TimingPlan wall = plan_timing(ForwardCost{forward_s, overhead_s}, 10, 0.5);
  EXPECT_EQ(wall.iterations,
            static_cast<int64_t>(kTargetRepetitionSeconds / (forward_s + overhead_s)));
  EXPECT_GT(device_only.iterations, 5 * wall.iterations);
  EXPECT_NEAR(wall.repetition_wall_s, kTargetRepetitionSeconds, forward_s + overhead_s);
  // Ten repetitions of 20 ms fit 0.5 s: the prediction is all of them.
  EXPECT_EQ(wall.repetitions_within_budget(), 10);
  EXPECT_LE(wall.predicted_wall_s(), 0.5);
}

TEST(TimingPlan, ASlowForwardGetsFewerRepetitionsDownToOne) {
  // 0.3 s forwards, 10 repetitions asked, 1 s budget: one iteration each, three repetitions.
  const TimingPlan slow = plan_timing(ForwardCost{0.3, 1e-4}, 10, 1.0);
  EXPECT_EQ(slow.iterations, 1);
  EXPECT_EQ(slow.min_repetitions, kMinRepetitions);
  EXPECT_EQ(slow.repetitions_within_budget(), 3);
  // 2 s forwards against a 1 s budget: three would take six times the budget; one is taken.
  const TimingPlan slower = plan_timing(ForwardCost{2.0, 1e-4}, 10, 1.0);
  EXPECT_EQ(slower.min_repetitions, 1);
  EXPECT_EQ(slower.repetitions_within_budget(), 1);
}

TEST(TimeCase, StopsOnceTheSamplesAreStableAndReadsTheDeviceOncePerRepetition) {
  std::mt19937_64 rng(std::random_device{}());
  const double seconds = std::uniform_real_distribution<double>(1e-5, 1e-4)(rng);
  TimingPlan plan;
  plan.max_repetitions = 20;
  plan.iterations = 7;
  plan.budget_s = 10;
  int hooks = 0;
  const TimingResult result =
      time_case("stable", spinning_forward(1e-6, [seconds] { return seconds; }), plan,
                [&hooks](Sample& sample) {
                  ++hooks;
                  sample.sm_clock_mhz = 1000 + sample.repetition;
                });
  ASSERT_TRUE(result.status.ok) << result.status.message;
  ASSERT_EQ(result.samples.size(), static_cast<size_t>(kMinStableRepetitions));
  EXPECT_EQ(hooks, kMinStableRepetitions);
  EXPECT_EQ(result.samples.back().sm_clock_mhz, 1000 + kMinStableRepetitions - 1);
  EXPECT_EQ(result.summary.stop, TimingStop::stable);
  EXPECT_EQ(result.summary.forwards_timed, 7 * kMinStableRepetitions);
  EXPECT_DOUBLE_EQ(result.summary.median_s, seconds);
  EXPECT_GT(result.summary.wall_s, 0);
}

TEST(TimeCase, NoisySamplesRunEveryRepetitionAskedFor) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> noisy(1e-5, 2e-5);  // far above 0.5 % spread
  TimingPlan plan;
  plan.max_repetitions = 6;
  plan.iterations = 2;
  plan.budget_s = 10;
  const TimingResult result =
      time_case("noisy", spinning_forward(1e-6, [&] { return noisy(rng); }), plan);
  ASSERT_TRUE(result.status.ok) << result.status.message;
  EXPECT_EQ(result.samples.size(), 6u);
  EXPECT_EQ(result.summary.stop, TimingStop::repetitions);
  EXPECT_EQ(result.summary.forwards_timed, 12);
}

TEST(TimeCase, TheWallClockBudgetHoldsWhateverTheDeviceTimeSays) {
  // Forwards that report 1 us but cost 2 ms of wall time each (as a flushed GPU forward costs
  // far more than its events say): 20 of them a repetition, a 0.2 s budget.
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> noisy(1e-6, 2e-6);
  constexpr double kForwardWallSeconds = 2e-3;
  const TimingPlan plan = plan_timing(ForwardCost{1.5e-6, kForwardWallSeconds}, 1000, 0.2);
  const TimingResult result =
      time_case("budget", spinning_forward(kForwardWallSeconds, [&] { return noisy(rng); }), plan);
  ASSERT_TRUE(result.status.ok) << result.status.message;
  EXPECT_EQ(result.summary.stop, TimingStop::budget);
  const double repetition_wall_s = result.summary.wall_s / result.summary.repetitions;
  EXPECT_LE(result.summary.wall_s, plan.budget_s + 2 * repetition_wall_s);
  EXPECT_GE(result.summary.repetitions, kMinRepetitions);
}

TEST(TimeCase, AFailingForwardStopsWithItsError) {
  TimingPlan plan;
  const TimingResult result = time_case(
      "fails",
      [](std::string& error) {
        error = "illegal address";
        return -1.0;
      },
      plan);
  EXPECT_FALSE(result.status.ok);
  EXPECT_NE(result.status.message.find("illegal address"), std::string::npos);
}

}  // namespace
}  // namespace attnbench
