// The timing plan and the repetition loop (harness/timing.h): plans in wall-clock time, one
// device reading per repetition, and the stop rule (stable, repetitions, budget).
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <vector>

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

// Issue 41: three cases timed together run one repetition each per round, in order, so a drift
// that starts mid-way reaches all of them alike; each stops by its own rule and one failing
// forward stops only its own case.
TEST(TimeInterleaved, RoundRobinOverTheCasesEachStoppingByItsOwnRule) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> noisy(1e-5, 2e-5);  // never stable
  std::vector<std::string> order;  // which case each repetition's first forward belonged to
  auto forward = [&](const std::string& name) -> TimedForward {
    return [&, name](std::string&) {
      if (order.empty() || order.back() != name) order.push_back(name);
      return noisy(rng);
    };
  };
  TimingPlan plan;
  plan.iterations = 3;
  plan.budget_s = 10;
  plan.max_repetitions = 4;
  TimingPlan shorter = plan;
  shorter.max_repetitions = 2;
  int failing_calls = 0;
  const TimedForward failing = [&](std::string& error) {
    order.push_back("c");
    if (++failing_calls < 2) return noisy(rng);  // its first repetition's first forward passes
    error = "illegal address";
    return -1.0;
  };
  const std::vector<TimingResult> results = time_interleaved(
      {{"a", forward("a"), plan, {}}, {"b", forward("b"), shorter, {}}, {"c", failing, plan, {}}});
  ASSERT_EQ(results.size(), 3u);
  ASSERT_TRUE(results[0].status.ok) << results[0].status.message;
  ASSERT_TRUE(results[1].status.ok) << results[1].status.message;
  EXPECT_EQ(results[0].samples.size(), 4u);
  EXPECT_EQ(results[0].summary.stop, TimingStop::repetitions);
  EXPECT_EQ(results[1].samples.size(), 2u);
  EXPECT_EQ(results[1].summary.forwards_timed, 6);
  EXPECT_FALSE(results[2].status.ok);
  EXPECT_NE(results[2].status.message.find("illegal address"), std::string::npos);
  // Round 1: a, b, c (c fails in it); round 2: a, b; rounds 3 and 4: a alone.
  const std::vector<std::string> expected = {"a", "b", "c", "c", "a", "b", "a"};
  EXPECT_EQ(order, expected);
  // Each case's budget is its own repetitions' wall time, not the group's.
  EXPECT_LT(results[1].summary.wall_s, results[0].summary.wall_s);
}

TEST(TimeInterleaved, OneCaseIsTimeCase) {
  TimingPlan plan;
  plan.iterations = 2;
  plan.max_repetitions = 3;
  plan.budget_s = 10;
  int calls = 0;
  const std::vector<TimingResult> results = time_interleaved(
      {{"one", [&](std::string&) { return 1e-5 * (1 + (++calls % 3)); }, plan, {}}});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].samples.size(), 3u);
  EXPECT_EQ(calls, 6);
  EXPECT_TRUE(time_interleaved({}).empty());
}

}  // namespace
}  // namespace attnbench
