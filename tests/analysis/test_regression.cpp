// The regression detector: Mann-Whitney U against hand-computed values, PELT on series with
// known change points, the state rules one by one, and the detector evaluation on synthetic
// histories of the smoke suite's size under a GPU's and a shared host's noise (false alarms per
// night and per series, recall and precision printed).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "harness/analysis/alert_wording.h"
#include "harness/analysis/kernel_wide.h"
#include "harness/analysis/regression.h"
#include "harness/core/statistics.h"
#include "tests/support/fresh_seed.h"

namespace attnbench {
namespace {

using Rng = std::mt19937_64;

// ---- Mann-Whitney U ----------------------------------------------------------------------------

TEST(MannWhitney, ExactSmallSamplesMatchHandCounts) {
  // Completely separated samples of 3: one ordering in C(6,3) = 20 gives U = 0.
  const MannWhitneyResult below = mann_whitney_u({1, 2, 3}, {4, 5, 6});
  EXPECT_TRUE(below.exact);
  EXPECT_DOUBLE_EQ(below.u, 0);
  EXPECT_DOUBLE_EQ(below.p_less, 1.0 / 20);
  EXPECT_DOUBLE_EQ(below.p_greater, 1.0);
  EXPECT_DOUBLE_EQ(below.p_two_sided, 0.1);
  const MannWhitneyResult above = mann_whitney_u({4, 5, 6}, {1, 2, 3});
  EXPECT_DOUBLE_EQ(above.u, 9);
  EXPECT_DOUBLE_EQ(above.p_greater, 1.0 / 20);

  // x = 1,3,5,7 against y = 2,4,6: U = 0 + 1 + 2 + 3 = 6, the middle of 0..12. Orderings with
  // U = 6 are the partitions of 6 into at most 3 parts of at most 4: 4+2, 4+1+1, 3+3, 3+2+1,
  // 2+2+2, so 5 of C(7,3) = 35, and by symmetry P(U >= 6) = (35 + 5) / 70.
  const MannWhitneyResult middle = mann_whitney_u({1, 3, 5, 7}, {2, 4, 6});
  EXPECT_TRUE(middle.exact);
  EXPECT_DOUBLE_EQ(middle.u, 6);
  EXPECT_NEAR(middle.p_greater, 40.0 / 70, 1e-12);
  EXPECT_NEAR(middle.p_less, 40.0 / 70, 1e-12);
}

TEST(MannWhitney, TiesUseTheNormalApproximationWithTieCorrection) {
  // Pooled: 1x 2x 2x 2y 3x 3y 4y 4y. Ranks 1, (2+3+4)/3 = 3, (5+6)/2 = 5.5, (7+8)/2 = 7.5.
  // R1 = 1 + 3 + 3 + 5.5 = 12.5, U = 12.5 - 4*5/2 = 2.5. Ties: groups of 3, 2, 2 ->
  // sum t^3 - t = 24 + 6 + 6 = 36. var = 4*4/12 * (9 - 36/56) = 11.142857.
  // z = (2.5 - 8) / sqrt(var) = -1.64767; p_less = Phi((2.5 - 8 + 0.5) / sqrt(var)) = 0.06708.
  const MannWhitneyResult tied = mann_whitney_u({1, 2, 2, 3}, {2, 3, 4, 4});
  EXPECT_FALSE(tied.exact);
  EXPECT_DOUBLE_EQ(tied.u, 2.5);
  EXPECT_NEAR(tied.z, -1.64767, 1e-4);
  EXPECT_NEAR(tied.p_less, 0.06708, 1e-4);
  EXPECT_NEAR(tied.p_two_sided, 2 * 0.06708, 2e-4);
  // Everything tied: no evidence.
  const MannWhitneyResult same = mann_whitney_u({5, 5, 5}, {5, 5});
  EXPECT_DOUBLE_EQ(same.p_greater, 1);
  EXPECT_TRUE(std::isnan(mann_whitney_u({}, {1.0}).p_greater));
}

TEST(MannWhitney, ExactAndNormalApproximationAgreeAtTwentyValues) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  std::normal_distribution<double> noise(0, 1);
  std::vector<double> a(20), b(20);
  for (double& v : a) v = noise(rng) + 0.5;
  for (double& v : b) v = noise(rng);
  const MannWhitneyResult exact = mann_whitney_u(a, b);
  ASSERT_TRUE(exact.exact);
  // The normal approximation by hand: mean n1 n2 / 2 = 200, var n1 n2 (n + 1) / 12 = 1366.67.
  const double sd = std::sqrt(20.0 * 20.0 * 41.0 / 12.0);
  const double normal_p = 0.5 * std::erfc((exact.u - 200 - 0.5) / sd / std::sqrt(2.0));
  EXPECT_NEAR(exact.p_greater, normal_p, 0.01);
  EXPECT_NEAR(exact.z, (exact.u - 200) / sd, 1e-12);
}

// ---- change points -----------------------------------------------------------------------------

TEST(ChangePoints, PeltFindsKnownStepsAndNothingInNoise) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  std::normal_distribution<double> noise(0, 1);
  // Steps of 5 sigma at 30 and 70.
  std::vector<double> steps(100);
  for (size_t i = 0; i < steps.size(); ++i) {
    steps[i] = noise(rng) + (i >= 30 ? 5 : 0) + (i >= 70 ? -5 : 0);
  }
  // Both steps are found where they are. Noise alone gives a spurious change point in up to 5 %
  // of series (asserted below), and so may this one: at most one point beside the two steps
  // (seed 2011701307380919737 gives one, where asserting exactly two failed).
  const std::vector<size_t> found = pelt_change_points(steps, change_point_penalty(steps), 3);
  const auto near = [&](double at) {
    return std::count_if(found.begin(), found.end(), [&](size_t point) {
      return std::fabs(static_cast<double>(point) - at) <= 1;
    });
  };
  EXPECT_EQ(near(30), 1) << "change points found: " << found.size();
  EXPECT_EQ(near(70), 1) << "change points found: " << found.size();
  EXPECT_LE(found.size(), 3u);

  // Pure noise: spurious change points are rare.
  int spurious = 0;
  constexpr int kNoiseSeries = 200;
  for (int s = 0; s < kNoiseSeries; ++s) {
    std::vector<double> flat(100);
    for (double& v : flat) v = noise(rng);
    spurious += pelt_change_points(flat, change_point_penalty(flat), 3).empty() ? 0 : 1;
  }
  EXPECT_LE(spurious, kNoiseSeries / 20);
}

TEST(ChangePoints, PeltMatchesExhaustiveOptimalPartitioning) {
  // Without pruning, the optimum over every segmentation of a short series by brute force.
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  std::normal_distribution<double> noise(0, 1);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<double> values(12);
    for (size_t i = 0; i < values.size(); ++i) values[i] = noise(rng) + (i >= 5 ? 3 : 0);
    const double penalty = 2.0;
    const size_t min_segment = 2;
    auto cost = [&](size_t a, size_t b) {
      double sum = 0, squares = 0;
      for (size_t i = a; i < b; ++i) {
        sum += values[i];
        squares += values[i] * values[i];
      }
      return squares - sum * sum / static_cast<double>(b - a);
    };
    auto total = [&](const std::vector<size_t>& changes) {
      double value = 0;
      size_t start = 0;
      for (size_t c : changes) {
        value += cost(start, c) + penalty;
        start = c;
      }
      return value + cost(start, values.size());
    };
    double best = total({});
    const size_t n = values.size();
    for (uint32_t mask = 0; mask < (1u << (n - 1)); ++mask) {
      std::vector<size_t> changes;
      for (size_t i = 1; i < n; ++i) {
        if (mask & (1u << (i - 1))) changes.push_back(i);
      }
      bool valid = true;
      size_t start = 0;
      for (size_t c : changes) {
        valid = valid && c - start >= min_segment;
        start = c;
      }
      valid = valid && n - start >= min_segment;
      if (valid) best = std::min(best, total(changes));
    }
    const std::vector<size_t> found = pelt_change_points(values, penalty, min_segment);
    EXPECT_NEAR(total(found), best, 1e-9);
  }
}

TEST(ChangePoints, DriftStartIsTheFirstChangePoint) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  std::normal_distribution<double> noise(0, 0.002);
  // log times: flat for 40 runs, then 0.5 % slower per run, with a throttled spike at 20.
  std::vector<double> series(100);
  for (size_t i = 0; i < series.size(); ++i) {
    series[i] = noise(rng) + (i >= 40 ? 0.005 * static_cast<double>(i - 40) : 0);
  }
  series[20] += 0.15;
  const std::vector<double> clean = despike(series);
  EXPECT_LT(clean[20], 0.02) << "the spike is clamped";
  const std::vector<size_t> found = pelt_change_points(clean, change_point_penalty(clean), 3);
  ASSERT_FALSE(found.empty());
  EXPECT_GE(found.front(), 36u);
  EXPECT_LE(found.front(), 50u);
}

// ---- the rules ---------------------------------------------------------------------------------

constexpr double kBase = 1e-3;

SeriesPoint point(int64_t run_id, double median_s, const std::string& chip = "GPU-a") {
  SeriesPoint p;
  p.run_id = run_id;
  p.median_s = median_s;
  p.cv = 0.01;
  p.chip = chip;
  p.error = 1e-3;
  return p;
}

// A flat history of n runs at kBase with +-0.2 % wiggle, runs 1..n.
std::vector<SeriesPoint> flat_history(int n) {
  std::vector<SeriesPoint> history;
  for (int i = 1; i <= n; ++i) history.push_back(point(i, kBase * (1 + 0.002 * ((i % 3) - 1))));
  return history;
}

SeriesInput single(std::vector<SeriesPoint> history, std::optional<SeriesPoint> candidate) {
  SeriesInput input;
  input.key = "cpu.k|b=1|normal|dev|Release";
  input.group = group_key(input.key);
  input.history = std::move(history);
  input.candidate = std::move(candidate);
  return input;
}

SeriesAnalysis judge_one(SeriesInput input) {
  std::vector<SeriesInput> inputs = {std::move(input)};
  return analyze_run(inputs, {}, DetectorOptions{}).series[0];
}

// The medians of a kernels x shapes suite, each as a multiple of its shape's base time: the
// history's runs 1..12, the run (13) and, when `rerun` is set, its rerun (14).
struct SuiteTimes {
  std::function<double(int kernel, int run)> history;
  std::function<double(int kernel)> run;
  std::function<double(int kernel)> rerun;
};

// Kernels "cpu.k0".. x 8 shapes, one series each, timed as `times` says (runs 1..history_runs,
// the run history_runs + 1, its rerun history_runs + 2).
std::vector<SeriesInput> kernel_suite(int kernels, bool host_timed, const SuiteTimes& times,
                                      int history_runs = 12) {
  std::vector<SeriesInput> inputs;
  for (int kernel = 0; kernel < kernels; ++kernel) {
    for (int shape = 0; shape < 8; ++shape) {
      SeriesInput input;
      input.key =
          "cpu.k" + std::to_string(kernel) + "|b=" + std::to_string(shape) + "|normal|dev|Release";
      input.group = group_key(input.key);
      input.host_timed = host_timed;
      const double base = kBase * (1 + shape);
      for (int run = 1; run <= history_runs; ++run)
        input.history.push_back(point(run, base * times.history(kernel, run)));
      input.candidate = point(history_runs + 1, base * times.run(kernel));
      if (times.rerun) input.rerun = point(history_runs + 2, base * times.rerun(kernel));
      inputs.push_back(input);
    }
  }
  return inputs;
}

// ---- what the gate can see (issue 41) -----------------------------------------------------------

// A GPU series at 3 % threshold and 0.5 % spread: within one nightly its run and rerun must both
// trip (each with sqrt(0.9) = 0.949: 3 % + 1.635 spreads = 3.82 %); within three, one nightly of
// three suffices (each with 0.536, each trip 0.732: 3 % + 0.619 spreads = 3.31 %).
TEST(Detectable, AGpuSeriesNeedsItsThresholdAndAFewSpreads) {
  DetectionNoise noise;
  noise.threshold = 0.03;
  noise.spread = 0.005;
  const Detectable seen = detectable_change(noise);
  EXPECT_NEAR(seen.within_one, 0.03 + 1.6351 * 0.005, 1e-4);
  EXPECT_NEAR(seen.within_three, 0.03 + 0.6190 * 0.005, 1e-4);
  EXPECT_NEAR(confirmation_probability(noise, seen.within_one, 1), kDetectionPower, 1e-6);
  // At the threshold each trip is a coin: both in one nightly 1/4, in one of three 1 - (3/4)^3.
  EXPECT_NEAR(confirmation_probability(noise, 0.03, 3), 1 - 0.75 * 0.75 * 0.75, 1e-9);
  // Twice the spread, twice the margin over the threshold.
  noise.spread = 0.01;
  EXPECT_NEAR(detectable_change(noise).within_one, 0.03 + 1.6351 * 0.01, 1e-4);
}

// A host-timed series needs two nightlies in a row (suspected, then confirmed): never within
// one; a series beyond +100 % is blind.
TEST(Detectable, AHostTimedSeriesNeedsTwoNightlies) {
  DetectionNoise noise;
  noise.threshold = 0.03;
  noise.spread = 0.01;
  noise.host_timed = true;
  const Detectable seen = detectable_change(noise);
  EXPECT_TRUE(std::isinf(seen.within_one));
  EXPECT_EQ(confirmation_probability(noise, 0.5, 1), 0.0);
  ASSERT_TRUE(std::isfinite(seen.within_three));
  noise.host_timed = false;
  EXPECT_GT(seen.within_three, detectable_change(noise).within_three);
  noise.host_timed = true;
  noise.spread = 1.0;  // a series that doubles as often as not
  EXPECT_TRUE(std::isinf(detectable_change(noise).within_three));
}

// With a history, its own deviations are the noise: a slowdown trips where it and a deviation
// exceed the threshold; unclear runs hold a suspicion and advance nothing.
TEST(Detectable, TheHistorysOwnDeviationsAndUnclearRunsSetIt) {
  DetectionNoise noise;
  noise.threshold = 0.03;
  noise.host_timed = true;
  // Twenty runs: deviations -4.5 % .. +5 % in steps of 0.5 %, all clear.
  for (int i = 0; i < 20; ++i) {
    noise.deviations.push_back(-0.045 + 0.005 * i);
    noise.clear.push_back(true);
  }
  // At +6 %: a run trips where its deviation exceeds -3 %, 16 of 20 (0.8); both trips 0.64.
  const double both = 0.8 * 0.8;
  EXPECT_NEAR(confirmation_probability(noise, 0.06, 2), both * both, 1e-9);
  // Within three: 19 trips of 20 give 0.894 (two advances of 0.9025 in a row, or after a miss),
  // so every run must trip: just over +7.5 %, which lifts the lowest deviation (-4.5 %) to the
  // threshold.
  EXPECT_NEAR(detectable_change(noise).within_three, 0.075, 1e-6);
  // Half the runs unclear: at any slowdown a nightly advances with 3/4 (its run clear, or its
  // rerun), holds with 1/4 (both unclear): two advances within three nightlies come with
  // 9/16 + 2 x 9/64 = 0.84375 at most: blind within three.
  for (size_t i = 0; i < noise.clear.size(); i += 2) noise.clear[i] = false;
  EXPECT_NEAR(confirmation_probability(noise, 1.0, 3), 0.84375, 1e-9);
  EXPECT_TRUE(std::isinf(detectable_change(noise).within_three));
}

TEST(Detector, BaselineIsTheMedianAndFlooredSpreadOfTheLastKGoodRuns) {
  std::vector<SeriesPoint> history = flat_history(15);
  history[14].state = Verdict::outlier;  // set aside
  history[13].status = ResultStatus::crashed;
  const Baseline baseline = compute_baseline(history, DetectorOptions{});
  ASSERT_EQ(baseline.points.size(), 10u);
  EXPECT_EQ(baseline.points.front(), 12u) << "newest good run first";
  EXPECT_EQ(baseline.points.back(), 3u);
  EXPECT_NEAR(baseline.center, kBase, kBase * 1e-9);
  // The wiggle's MAD is 0.2 % x 1.4826 = 0.3 %: floored at 0.5 %.
  EXPECT_NEAR(baseline.spread / baseline.center, 0.005, 1e-12);
  EXPECT_TRUE(baseline.usable);
  EXPECT_FALSE(compute_baseline(flat_history(2), DetectorOptions{}).usable);
}

TEST(Detector, FirstTripIsSuspectedAndTheNextRunConfirmsIt) {
  std::vector<SeriesPoint> history = flat_history(12);
  const SeriesAnalysis first = judge_one(single(history, point(13, kBase * 1.10)));
  EXPECT_EQ(first.performance.state, Verdict::suspected);
  EXPECT_NEAR(first.performance.trip.change, 0.10, 1e-3);
  EXPECT_DOUBLE_EQ(first.performance.trip.threshold, 0.03);
  SeriesPoint suspected = point(13, kBase * 1.10);
  suspected.state = Verdict::suspected;
  suspected.since_run_id = 13;
  history.push_back(suspected);
  const SeriesAnalysis second = judge_one(single(history, point(14, kBase * 1.09)));
  EXPECT_EQ(second.performance.state, Verdict::confirmed);
  EXPECT_EQ(second.performance.since_run_id, 13);
  // Had the next run come back, the suspicion was an outlier.
  const SeriesAnalysis reverted = judge_one(single(history, point(14, kBase)));
  EXPECT_EQ(reverted.performance.state, Verdict::ok);
  EXPECT_TRUE(reverted.performance.previous_reverted);
  // Small changes and improvements.
  EXPECT_EQ(judge_one(single(flat_history(12), point(13, kBase * 1.02))).performance.state,
            Verdict::ok);
  EXPECT_EQ(judge_one(single(flat_history(12), point(13, kBase * 0.9))).performance.state,
            Verdict::improved);
  EXPECT_EQ(judge_one(single(flat_history(2), point(3, kBase * 2))).performance.state,
            Verdict::insufficient_history);
}

TEST(Detector, RerunConfirmsWithMannWhitneyOrRevertsToOutlier) {
  SeriesInput input = single(flat_history(12), point(13, kBase * 1.10));
  input.baseline_samples = {kBase * 0.99, kBase, kBase * 1.01, kBase * 1.005, kBase * 0.995};
  input.rerun = point(14, kBase * 1.10);
  input.rerun_samples = {kBase * 1.09, kBase * 1.10, kBase * 1.11, kBase * 1.105, kBase * 1.095};
  const SeriesAnalysis confirmed = judge_one(input);
  EXPECT_EQ(confirmed.performance.state, Verdict::confirmed);
  ASSERT_TRUE(confirmed.performance.mann_whitney.has_value());
  EXPECT_TRUE(confirmed.performance.mann_whitney->exact);
  EXPECT_NEAR(confirmed.performance.mann_whitney->p_greater, 1.0 / 252, 1e-12);
  input.rerun = point(14, kBase * 1.001);
  input.rerun_samples = input.baseline_samples;
  EXPECT_EQ(judge_one(input).performance.state, Verdict::outlier);
}

TEST(Detector, ChipChangeAloneIsNeverConfirmed) {
  std::vector<SeriesPoint> history = flat_history(12);
  SeriesInput input = single(history, point(13, kBase * 1.05, "GPU-b"));
  input.rerun = point(14, kBase * 1.05, "GPU-b");
  const SeriesAnalysis analysis = judge_one(input);
  EXPECT_EQ(analysis.performance.state, Verdict::suspected);
  EXPECT_TRUE(analysis.performance.chip_changed);
  // The chip-change suspicion stays in the baseline, so the next run on that chip is compared
  // with it and is not confirmed by the previous suspicion alone.
  SeriesPoint on_new_chip = point(13, kBase * 1.05, "GPU-b");
  on_new_chip.state = Verdict::suspected;
  on_new_chip.chip_changed = true;
  on_new_chip.since_run_id = 13;
  history.push_back(on_new_chip);
  EXPECT_TRUE(counts_for_baseline(history.back()));
  const SeriesAnalysis next = judge_one(single(history, point(14, kBase * 1.05, "GPU-b")));
  EXPECT_NE(next.performance.state, Verdict::confirmed);
}

TEST(Detector, FarClockOrNoisyRepetitionsAreAmbiguous) {
  std::vector<SeriesPoint> history = flat_history(12);
  for (SeriesPoint& p : history) p.clock_mhz = 1980;
  SeriesPoint throttled = point(13, kBase * 1.15);
  throttled.clock_mhz = 1700;
  const SeriesAnalysis clock = judge_one(single(history, throttled));
  EXPECT_EQ(clock.performance.state, Verdict::ambiguous);
  EXPECT_NE(clock.performance.reason.find("clock"), std::string::npos);
  SeriesPoint noisy = point(13, kBase * 1.15);
  noisy.cv = 0.2;
  const SeriesAnalysis cv = judge_one(single(history, noisy));
  EXPECT_EQ(cv.performance.state, Verdict::ambiguous);
  EXPECT_NE(cv.performance.reason.find("noisy"), std::string::npos);
}

TEST(Detector, ASeriesWithTwoSpeedsIsTooNoisyToJudgeAlone) {
  // A tiny case that runs either at 11 us or at 16 us, as one did on a shared host: the MAD of
  // its baseline sees only the main mode, but two baseline runs lie far beyond the threshold.
  std::vector<SeriesPoint> history = flat_history(12);
  history[4].median_s *= 1.45;
  history[8].median_s *= 1.45;
  const Baseline baseline = compute_baseline(history, DetectorOptions{});
  EXPECT_EQ(baseline.wide_points, 2);
  const SeriesAnalysis analysis = judge_one(single(history, point(13, kBase * 1.45)));
  EXPECT_EQ(analysis.performance.state, Verdict::ambiguous);
  EXPECT_NE(analysis.performance.reason.find("more than one speed"), std::string::npos);
  EXPECT_EQ(compute_baseline(flat_history(12), DetectorOptions{}).wide_points, 0);
}

TEST(Detector, AccuracyStatusAndMissing) {
  SeriesPoint worse = point(13, kBase);
  worse.error = 3.5e-3;
  const SeriesAnalysis accuracy = judge_one(single(flat_history(12), worse));
  EXPECT_EQ(accuracy.accuracy.state, Verdict::suspected);
  EXPECT_NEAR(accuracy.accuracy.ratio, 3.5, 1e-9);
  SeriesPoint crashed = point(13, kNotMeasured);
  crashed.status = ResultStatus::crashed;
  EXPECT_EQ(judge_one(single(flat_history(12), crashed)).status_change, "passed -> crashed");
  const SeriesAnalysis missing = judge_one(single(flat_history(12), std::nullopt));
  EXPECT_TRUE(missing.missing);
  EXPECT_EQ(missing.status_change, "passed -> missing");
}

TEST(Detector, RunLevelRemovesWhatMovesEverySeriesAndGroupsCatchNoisyKernels) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  std::normal_distribution<double> noise(0, 1);
  // 3 kernels x 8 shapes. Every series 8 % slower in the run (a slow host): nothing trips.
  // Kernel k2's shapes are noisy (8 % spread) and 25 % slower: too noisy one by one, but the
  // kernel-wide median (its own spread about 3.5 %, so a threshold near 14 %) trips.
  auto make_inputs = [&](double shared) {
    return kernel_suite(
        3, false,
        {[&](int kernel, int) { return std::exp((kernel == 2 ? 0.08 : 0.003) * noise(rng)); },
         [&](int kernel) {
           return shared * (kernel == 2 ? 1.25 : 1.0) * std::exp(0.003 * noise(rng));
         },
         {}});
  };
  std::vector<SeriesInput> inputs = make_inputs(1.08);
  const RunAnalysis analysis = analyze_run(inputs, {}, DetectorOptions{});
  EXPECT_NEAR(analysis.level, std::log(1.08), 0.02);
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_EQ(analysis.series[i].performance.state, Verdict::ok) << inputs[i].key;
  }
  ASSERT_EQ(analysis.groups.size(), 3u);
  EXPECT_EQ(analysis.groups[0].state, Verdict::ok);
  EXPECT_EQ(analysis.groups[1].state, Verdict::ok);
  EXPECT_EQ(analysis.groups[2].group, "cpu.k2|*|*|dev|Release");
  EXPECT_EQ(analysis.groups[2].state, Verdict::suspected);
  EXPECT_NEAR(analysis.groups[2].trip.change, 0.25, 0.08);

  // A whole run 30 % off its usual level: the host, not the kernels; its trips are unclear.
  std::vector<SeriesInput> busy = make_inputs(1.3);
  const RunAnalysis unclear = analyze_run(busy, {}, DetectorOptions{});
  EXPECT_NEAR(unclear.level, std::log(1.3), 0.02);
  EXPECT_EQ(unclear.groups[2].state, Verdict::ambiguous);
}

TEST(Detector, ASlowedKernelCarriesNeitherTheRunsLevelNorItsRerunsWithIt) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  std::normal_distribution<double> noise(0, 1);
  // 3 kernels x 8 shapes; k2's shapes are noisy run to run (6 %: too noisy to trip one by one at
  // +10 %, as cpu.flash's tiny shapes are on the project's CI host) and k2 is 10 % slower in the
  // run and in its rerun, which re-measures every k2 shape and, as controls, the other kernels'
  // shapes. The rerun's level must come from the controls alone: k2's own untripped shapes
  // would carry it about half-way up and hide half of the slowdown (measured on that host: a
  // +10.6 % cpu.flash aggregate whose rerun read +2 %).
  auto slowed = [&](int kernel) {
    return (kernel == 2 ? 1.1 : 1.0) * std::exp(0.003 * noise(rng));
  };
  std::vector<SeriesInput> inputs = kernel_suite(
      3, false,
      {[&](int kernel, int) { return std::exp((kernel == 2 ? 0.06 : 0.003) * noise(rng)); }, slowed,
       slowed});
  const RunAnalysis analysis = analyze_run(inputs, {}, DetectorOptions{});
  // Both levels come from k0 and k1, which did not move.
  EXPECT_LT(std::fabs(analysis.level), 0.005);
  EXPECT_LT(std::fabs(analysis.rerun_level), 0.005);
  EXPECT_EQ(analysis.rerun_level_series, 16);
  ASSERT_EQ(analysis.groups.size(), 3u);
  const GroupAnalysis& k2 = analysis.groups[2];
  ASSERT_EQ(k2.group, "cpu.k2|*|*|dev|Release");
  // Its centers are each off by up to a few percent (12 runs of 6 % noise): the aggregate's
  // change is within 4 % of the 10 %, and the rerun measures the same change as the run.
  EXPECT_NEAR(k2.trip.change, 0.10, 0.04);
  EXPECT_NEAR(k2.rerun_trip.change, k2.trip.change, 0.01);
}

TEST(Detector, AKernelThatFeelsABusyHostMoreIsJudgedAtItsOwnSensitivity) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  std::normal_distribution<double> noise(0, 1);
  // 5 CPU kernels x 8 shapes over 12 runs whose levels vary as on a shared host (0 to +9 %).
  // k0 feels the busy host 1.8x as much as the run does (cpu.naive on the project's CI host,
  // measured: slope 0.4-0.8 over 80 nightlies), so at a +8 % run it is +14 %: not a regression.
  // k1 is truly 10 % slower in that run.
  const std::vector<double> levels = {0,     0.01, -0.01, 0.06,  0,    0.08,
                                      -0.02, 0.02, 0.05,  -0.01, 0.09, 0};
  const double run_level = 0.08;
  auto feel = [](int kernel) { return kernel == 0 ? 1.8 : 1.0; };
  auto make_inputs = [&]() {
    return kernel_suite(5, true,
                        {[&](int kernel, int run) {
                           return std::exp(feel(kernel) * levels[run - 1] + 0.003 * noise(rng));
                         },
                         [&](int kernel) {
                           return (kernel == 1 ? 1.1 : 1.0) *
                                  std::exp(feel(kernel) * run_level + 0.003 * noise(rng));
                         },
                         {}});
  };
  std::vector<SeriesInput> inputs = make_inputs();
  const RunAnalysis analysis = analyze_run(inputs, {}, DetectorOptions{});
  ASSERT_EQ(analysis.groups.size(), 5u);
  EXPECT_NEAR(analysis.groups[0].load_sensitivity, 0.8, 0.1);
  EXPECT_EQ(analysis.groups[0].state, Verdict::ok) << analysis.groups[0].reason;
  EXPECT_LT(std::fabs(analysis.groups[0].trip.change), 0.02);
  EXPECT_EQ(analysis.groups[1].state, Verdict::suspected) << analysis.groups[1].reason;
  EXPECT_NEAR(analysis.groups[1].trip.change, 0.10, 0.015);
  for (size_t k = 2; k < 5; ++k) EXPECT_EQ(analysis.groups[k].state, Verdict::ok);

  EXPECT_NEAR(analysis.groups[0].trip.threshold, 0.03, 1e-9);  // the 3 % floor: a sharp baseline

  // Without the fitted sensitivity k0 reads +6 % beyond the run, and its busy days scatter its
  // baseline: a threshold of about 12 %, blind to a 10 % step of its own.
  DetectorOptions flat;
  flat.max_load_sensitivity = 0;
  std::vector<SeriesInput> again = make_inputs();
  const RunAnalysis unfitted = analyze_run(again, {}, flat);
  EXPECT_EQ(unfitted.groups[0].load_sensitivity, 0);
  EXPECT_NEAR(unfitted.groups[0].trip.change, 0.8 * (run_level - 0.01), 0.02);
  EXPECT_GT(unfitted.groups[0].trip.threshold, 0.10);
}

TEST(Detector, AHostTimedKernelNeedsItsRerunAndTheNextRun) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  std::normal_distribution<double> noise(0, 1);
  // 3 CPU kernels x 8 shapes, steady to 0.3 %; kernel k2 is 20 % slower in the run and in its
  // rerun. On a host's clock a slowdown that lasts one rerun is not yet a regression (a kernel
  // with two speeds, measured on this project's CI host, stays on one for minutes).
  auto slowed = [&](int kernel) {
    return (kernel == 2 ? 1.2 : 1.0) * std::exp(0.003 * noise(rng));
  };
  auto make_inputs = [&](bool host_timed) {
    return kernel_suite(3, host_timed,
                        {[&](int, int) { return std::exp(0.003 * noise(rng)); }, slowed, slowed});
  };
  const std::string k2 = "cpu.k2|*|*|dev|Release";
  std::vector<SeriesInput> gpu_like = make_inputs(false);
  EXPECT_EQ(analyze_run(gpu_like, {}, DetectorOptions{}).groups[2].state, Verdict::confirmed);

  std::vector<SeriesInput> first = make_inputs(true);
  const RunAnalysis once = analyze_run(first, {}, DetectorOptions{});
  ASSERT_EQ(once.groups[2].group, k2);
  EXPECT_EQ(once.groups[2].state, Verdict::suspected);
  EXPECT_NE(once.groups[2].reason.find("also needs the next run"), std::string::npos)
      << once.groups[2].reason;
  EXPECT_EQ(once.groups[0].state, Verdict::ok);

  // The next run, slower again with its rerun: confirmed, since the first.
  std::vector<SeriesInput> second = make_inputs(true);
  const RunAnalysis twice =
      analyze_run(second, {{k2, GroupPrior{Verdict::suspected, 7, false}}}, DetectorOptions{});
  EXPECT_EQ(twice.groups[2].state, Verdict::confirmed) << twice.groups[2].reason;
  EXPECT_EQ(twice.groups[2].since_run_id, 7);
  // ...but not when its rerun is back within the baseline.
  std::vector<SeriesInput> recovered = make_inputs(true);
  for (SeriesInput& input : recovered) {
    if (input.group == k2) input.rerun->median_s /= 1.2;
  }
  const RunAnalysis back =
      analyze_run(recovered, {{k2, GroupPrior{Verdict::suspected, 7, false}}}, DetectorOptions{});
  EXPECT_EQ(back.groups[2].state, Verdict::outlier) << back.groups[2].reason;
}

// Issue 41: a host that moves kernels of one kind together and apart from the rest. No level for
// the whole run fits them; each kernel-wide aggregate is measured against the peer that feels the
// host most like it, and a slowdown the run's level hid is seen.
TEST(Detector, OnAHostThatMovesKernelsInKindsAKernelIsMeasuredAgainstItsPeer) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  std::normal_distribution<double> normal(0, 1);
  // 5 CPU kernels x 8 shapes over 30 runs whose level swings with sd 7 %; k0 and k1 feel each run
  // alike, as do k2, k3 and k4, each kind unevenly (50 % sd per run). The run (31): level +6 %,
  // felt 1.5x by k0 and k1 and 0.5x by the others; k0 is 8 % slower.
  constexpr int kRuns = 30;
  std::vector<double> level(kRuns + 1), kind_a(kRuns + 1), kind_b(kRuns + 1);
  for (int run = 1; run <= kRuns; ++run) {
    level[run] = 0.07 * normal(rng);
    kind_a[run] = 1 + 0.5 * normal(rng);
    kind_b[run] = 1 + 0.5 * normal(rng);
  }
  auto make_inputs = [&]() {
    return kernel_suite(
        5, true,
        {[&](int kernel, int run) {
           return std::exp(level[run] * (kernel < 2 ? kind_a[run] : kind_b[run]) +
                           0.003 * normal(rng));
         },
         [&](int kernel) {
           return (kernel == 0 ? 1.08 : 1.0) *
                  std::exp(0.06 * (kernel < 2 ? 1.5 : 0.5) + 0.003 * normal(rng));
         },
         {}},
        kRuns);
  };
  const std::string k0 = "cpu.k0|*|*|dev|Release", k1 = "cpu.k1|*|*|dev|Release";
  std::vector<SeriesInput> inputs = make_inputs();
  const RunAnalysis analysis = analyze_run(inputs, {}, DetectorOptions{});
  ASSERT_EQ(analysis.groups.size(), 5u);
  const GroupAnalysis& slowed = analysis.groups[0];
  ASSERT_EQ(slowed.group, k0);
  EXPECT_EQ(slowed.peer, k1);
  EXPECT_EQ(analysis.groups[1].peer, k0);
  // The other kind is most of the run: its level fits them (or a peer of their own kind does).
  for (size_t k = 2; k < 5; ++k) {
    EXPECT_NE(analysis.groups[k].peer, k0);
    EXPECT_NE(analysis.groups[k].peer, k1);
  }
  EXPECT_NEAR(slowed.trip.change, 0.08, 0.02);
  EXPECT_NEAR(slowed.trip.threshold, 0.03, 1e-9);  // against its peer, at the floor
  // Suspected, or unclear when the kinds' split scattered the run's series far from its level.
  EXPECT_TRUE(slowed.state == Verdict::suspected || slowed.state == Verdict::ambiguous)
      << slowed.reason;
  EXPECT_NE(kernel_message(slowed, 31).find("with its peer cpu.k1"), std::string::npos)
      << kernel_message(slowed, 31);
  // The peer reads the slowdown as its own speed-up; the other kind is untouched.
  EXPECT_EQ(analysis.groups[1].state, Verdict::improved);
  for (size_t k = 2; k < 5; ++k) EXPECT_EQ(analysis.groups[k].state, Verdict::ok);

  // Detector version 2 measures every kernel against the run's level (it read k0 at 10-17 % over
  // seeds instead of 8 %: what its kind felt beyond the others that night).
  DetectorOptions one_level;
  one_level.peer_levels = false;
  std::vector<SeriesInput> again = make_inputs();
  for (const GroupAnalysis& group : analyze_run(again, {}, one_level).groups)
    EXPECT_TRUE(group.peer.empty()) << group.group;
}

// On a quiet host every kernel fits the run's level: no peer is chosen, and a kernel is never the
// peer of another pass of itself.
TEST(Detector, OnAQuietHostTheRunsLevelStaysAndAPassIsNeverItsOwnPeer) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  std::normal_distribution<double> normal(0, 1);
  std::vector<double> level(31);
  for (double& l : level) l = 0.01 * normal(rng);
  std::vector<SeriesInput> inputs = kernel_suite(
      3, true,
      {[&](int, int run) { return std::exp(level[run] + 0.003 * normal(rng)); },
       [&](int) { return std::exp(0.003 * normal(rng)); }, {}},
      30);
  const RunAnalysis analysis = analyze_run(inputs, {}, DetectorOptions{});
  for (const GroupAnalysis& group : analysis.groups) EXPECT_TRUE(group.peer.empty()) << group.group;

  EXPECT_TRUE(can_be_peer("cpu.naive|*|*|dev|Release", "cpu.masked_fused|*|*|dev|Release"));
  EXPECT_FALSE(can_be_peer("cpu.naive|*|*|dev|Release", "cpu.naive|*,pass=bwd|*|dev|Release"));
  EXPECT_FALSE(can_be_peer("cpu.naive|*|*|dev|Release", "cpu.flash|*|*|other|Release"));
  EXPECT_FALSE(can_be_peer("cpu.naive|*|*|dev|Release", "cpu.flash|*|*|dev|Debug"));
}

TEST(Detector, ARunWhoseSeriesScatterFarMoreThanUsualIsUnclear) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  std::normal_distribution<double> noise(0, 1);
  // 40 series steady to 0.3 % for 12 runs; then a busy host moves each by its own 6 %. The first
  // series is 40 % slower in the run, so that it trips under any draw of that noise. (With 20
  // series and 20 %, one run of the test in 50 failed: the scatter of the 10 series below the
  // level can read 3 where 12 is usual, and the 20 % could stay within the threshold.)
  auto make_inputs = [&](double run_noise) {
    std::vector<SeriesInput> inputs;
    for (int s = 0; s < 40; ++s) {
      SeriesInput input;
      input.key = "cpu.k|b=" + std::to_string(s) + "|normal|dev|Release";
      input.group = group_key(input.key);
      for (int run = 1; run <= 12; ++run) {
        input.history.push_back(point(run, kBase * std::exp(0.003 * noise(rng))));
      }
      input.candidate = point(13, kBase * std::exp(run_noise * noise(rng)) * (s == 0 ? 1.4 : 1.0));
      inputs.push_back(input);
    }
    return inputs;
  };
  std::vector<SeriesInput> quiet = make_inputs(0.003);
  const RunAnalysis calm = analyze_run(quiet, {}, DetectorOptions{});
  EXPECT_LT(calm.scatter, 2.0);
  EXPECT_EQ(calm.series[0].performance.state, Verdict::suspected);
  std::vector<SeriesInput> busy = make_inputs(0.06);
  const RunAnalysis scattered = analyze_run(busy, {}, DetectorOptions{});
  EXPECT_GT(scattered.scatter, 4.0);
  for (const SeriesAnalysis& series : scattered.series) {
    EXPECT_NE(series.performance.state, Verdict::suspected) << series.performance.reason;
    EXPECT_NE(series.performance.state, Verdict::confirmed);
  }
  EXPECT_EQ(scattered.series[0].performance.state, Verdict::ambiguous);
  EXPECT_NE(scattered.series[0].performance.reason.find("busy host"), std::string::npos);
}

TEST(Detector, ALoneSeriesWithinWhatItsFamilyDoesByItselfIsNotConfirmed) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  std::normal_distribution<double> noise(0, 1);
  // 3 host-timed kernels x 8 shapes steady to 0.3 % over 12 runs. k0's first shape had a second
  // speed: +30 % and +27 % at runs 8 and 9, then back (as cpu.naive's 1.9 or 2.6 ms on the CI
  // host).
  // In the run and its rerun k1's first shape is 12 % slower (4 of its thresholds, within the
  // family's 10), its second 50 % (beyond), and run 12 already suspected both.
  auto make_inputs = [&](bool family_wise_history) {
    std::vector<SeriesInput> inputs =
        kernel_suite(3, true,
                     {[&](int, int) { return std::exp(0.003 * noise(rng)); },
                      [&](int) { return std::exp(0.003 * noise(rng)); },
                      [&](int) { return std::exp(0.003 * noise(rng)); }});
    if (family_wise_history) {
      inputs[0].history[7].median_s *= 1.3;
      inputs[0].history[8].median_s *= 1.27;
    }
    for (auto [index, slower] : {std::pair{8, 1.12}, std::pair{9, 1.5}}) {
      SeriesInput& input = inputs[index];
      SeriesPoint& previous = input.history.back();
      previous.median_s *= slower;
      previous.state = Verdict::suspected;
      previous.since_run_id = previous.run_id;
      input.candidate->median_s *= slower;
      input.rerun->median_s *= slower;
    }
    return inputs;
  };
  std::vector<SeriesInput> inputs = make_inputs(true);
  const RunAnalysis analysis = analyze_run(inputs, {}, DetectorOptions{});
  const Excursion& largest = analysis.family.in_thresholds;
  EXPECT_EQ(largest.series_key, inputs[0].key);
  // +30 %, in the thresholds of k0's first shape (3 % or a little more: its baseline holds the
  // two slow runs).
  const Baseline& first = analysis.series[0].baseline;
  EXPECT_NEAR(largest.change, 0.30, 0.02);
  EXPECT_NEAR(largest.ratio, largest.change / std::max(0.03, 4 * first.spread / first.center),
              1e-9);
  EXPECT_EQ(largest.run_id, 8);
  EXPECT_EQ(analysis.family.in_size.series_key, inputs[0].key);
  const PerformanceJudgement& within = analysis.series[8].performance;
  EXPECT_EQ(within.state, Verdict::suspected) << within.reason;
  EXPECT_NE(within.reason.find("within what the run's series do by themselves"), std::string::npos)
      << within.reason;
  EXPECT_NEAR(within.family_limit, analysis.family.limit(within.trip.threshold), 1e-12);
  EXPECT_GE(within.family_limit, largest.change);
  EXPECT_EQ(within.since_run_id, 12);
  EXPECT_EQ(analysis.series[9].performance.state, Verdict::confirmed)
      << analysis.series[9].performance.reason;

  // A family that never wandered by itself sets no limit: the same lone 12 % is confirmed, as
  // it is without the family-wise limit (detector version 1).
  std::vector<SeriesInput> calm = make_inputs(false);
  const RunAnalysis settled = analyze_run(calm, {}, DetectorOptions{});
  EXPECT_EQ(settled.family.in_thresholds.ratio, 0);
  EXPECT_EQ(settled.family.limit(0.03), 0);
  EXPECT_EQ(settled.series[8].performance.state, Verdict::confirmed)
      << settled.series[8].performance.reason;
  DetectorOptions version_1;
  version_1.family_wise = false;
  std::vector<SeriesInput> again = make_inputs(true);
  EXPECT_EQ(analyze_run(again, {}, version_1).series[8].performance.state, Verdict::confirmed);

  // A lone change the size of an excursion the series itself came back from (+12 % at run 8) is
  // its second speed again, even beyond the family excursion (which is that same one).
  std::vector<SeriesInput> repeat = make_inputs(false);
  repeat[8].history[7].median_s *= 1.12;
  repeat[8].candidate->median_s *= 1.14 / 1.12;
  repeat[8].rerun->median_s *= 1.14 / 1.12;
  repeat[8].history.back().median_s *= 1.14 / 1.12;
  const RunAnalysis repeated = analyze_run(repeat, {}, DetectorOptions{});
  EXPECT_EQ(repeated.family.in_thresholds.series_key, repeat[8].key);
  const PerformanceJudgement& own = repeated.series[8].performance;
  EXPECT_GT(own.trip.change, own.family_limit);
  EXPECT_EQ(own.state, Verdict::suspected) << own.reason;
  EXPECT_NE(own.reason.find("the size of an excursion of its own"), std::string::npos)
      << own.reason;
}

// ---- detector evaluation -----------------------------------------------------------------------
//
// Synthetic histories replayed through the nightly job (run, rerun of the suspects, next run),
// judged per NIGHT at the smoke suite's size: a gate raises false alarms per night for the
// whole suite, not per series, so 150 series each wrong once in 10,000 nights are a false alarm
// every 70 nights. Two noise models: a GPU's (the issue's) and a shared host's timed by its own
// clock (the project's 2-core CI VM, ci/gate-runs/).

// What moves a series' run medians when nothing changed. What a run shares (a GPU's random
// effect, throttling and chip; a host's busy neighbour, which each kernel feels to its own
// degree and each series unevenly) moves all its series; the rest belongs to one series.
struct NoiseModel {
  std::string name;
  std::string device;  // the series keys' device field
  bool host_timed = false;
  int kernels = 5;
  int shapes = 30;  // per kernel: 150 series, the smoke suite's size
  int repetitions = 10;
  double repetition_cv_low = 0.01, repetition_cv_high = 0.01;  // per series, uniform
  // A repetition interrupted by another process (host): this much slower, uniform.
  double interrupt_probability = 0, interrupt_low = 0, interrupt_high = 0;
  double run_effect_sd = 0;  // shared by all series of a run (and its rerun)
  // GPU: throttled runs, chip changes (each series feels a chip's shift to its own degree) and
  // slow drifts of single series.
  double throttle_probability = 0, throttle_low = 0, throttle_high = 0;
  double chip_change_probability = 0, chip_shift_max = 0;
  double drift_per_run = 0, drift_probability = 0;
  double usual_clock_mhz = kNotMeasured;
  // Host: each series' own run-to-run noise (sd of its log median beyond its repetitions,
  // log-uniform per series), persistent from one back-to-back run to the next (AR(1)).
  double series_noise_low = 0, series_noise_high = 0, series_noise_persistence = 0;
  // Busy runs: the host's level rises by a uniform amount, times each kernel's load
  // sensitivity, and each series feels its own share (sd: busy_unevenness x the busy level).
  double busy_probability = 0, busy_low = 0, busy_high = 0, busy_unevenness = 0;
  std::vector<double> load_sensitivity;  // per kernel; empty: 1
  // How unevenly the kernels feel one run's host beyond their sensitivity: per run and kernel,
  // the sensitivity times 1 + this sd x a normal draw (a rerun shares the run's draw when it
  // shares its busy level).
  double kernel_response_sd = 0;
  // Kernels of one kind (per kernel; empty: each its own) share that unevenness: the run's draw
  // is the kind's, plus each kernel's own of this sd.
  std::vector<int> kernel_kind;
  double kernel_own_response_sd = 0;
  // Two speeds (cpu.naive on the CI host: 1.9 or 2.6 ms, for minutes at a time): a fraction of
  // the series has a slower second speed, entered with some probability per run and kept with
  // another; most second speeds are a few percent, some a third slower.
  double two_speed_fraction = 0;
  double slow_speed_low = 0, slow_speed_high = 0;
  double big_slow_speed_fraction = 0, big_slow_speed_low = 0, big_slow_speed_high = 0;
  double slow_speed_enter = 0, slow_speed_stay = 0;
  // A rerun minutes after its run finds the host as busy with this probability, and its series'
  // own noise correlated with the run's by this much; a second speed persists into it.
  double rerun_shares_busy = 1, rerun_noise_correlation = 0;
};

// The GPU model: run effect 1.5 %, throttling in 2 % of runs, a chip change every 30
// runs moving each series up to 3 %, slow drifts of 0.1 % a run in 30 % of the series, 10
// repetitions of CV 1 %; the GPU's clock is recorded.
NoiseModel gpu_model() {
  NoiseModel model;
  model.name = "GPU";
  model.device = "NVIDIA H200";
  model.run_effect_sd = 0.015;
  model.throttle_probability = 0.02;
  model.throttle_low = 0.10;
  model.throttle_high = 0.20;
  model.chip_change_probability = 1.0 / 30;
  model.chip_shift_max = 0.03;
  model.drift_per_run = 0.001;
  model.drift_probability = 0.3;
  model.usual_clock_mhz = 1980;
  return model;
}

// The shared 2-core CI host, timed by the host's clock: 5 repetitions of CV 1-3 % (one in 30
// interrupted, 5-30 % slower); each series' own noise 0.2-1 % with persistence 0.5 between
// back-to-back runs; a busy host in a third of the runs (+2 to +20 %, felt 0.85-1.8x by the
// kernels as on the CI host, unevenly: scatter 2-9x the usual, as ci/gate-runs records); 15 %
// of the series with a second speed (+2-8 %, one in five +25-40 %) entered in 3 % of runs and
// kept 70 % of the time. Harsher than the CI host itself: under the rule before the per-night
// control (detector version 1) it raises a false alarm in 3-4 % of nightlies, where the CI host
// raised one in its 17th nightly after 80 without (ci/gate-runs, issue 12); its quiet runs
// scatter 0.6-1.5 and its busy ones 2-4.5, as the CI host's did (1.0-2.0 and 2.1-4.8).
NoiseModel cpu_model() {
  NoiseModel model;
  model.name = "CPU host";
  model.device = "AMD EPYC";
  model.host_timed = true;
  model.repetitions = 5;
  model.repetition_cv_low = 0.01;
  model.repetition_cv_high = 0.03;
  model.interrupt_probability = 1.0 / 30;
  model.interrupt_low = 0.05;
  model.interrupt_high = 0.30;
  model.run_effect_sd = 0.01;
  model.series_noise_low = 0.002;
  model.series_noise_high = 0.01;
  model.series_noise_persistence = 0.5;
  model.busy_probability = 0.35;
  model.busy_low = 0.02;
  model.busy_high = 0.20;
  model.busy_unevenness = 0.4;
  model.load_sensitivity = {1.8, 0.85, 1.0, 1.1, 0.9};
  model.two_speed_fraction = 0.15;
  model.slow_speed_low = 0.02;
  model.slow_speed_high = 0.08;
  model.big_slow_speed_fraction = 0.2;
  model.big_slow_speed_low = 0.25;
  model.big_slow_speed_high = 0.40;
  model.slow_speed_enter = 0.03;
  model.slow_speed_stay = 0.7;
  model.rerun_shares_busy = 0.6;
  model.rerun_noise_correlation = 0.7;
  return model;
}

// Another 2-core CI host (Intel Xeon), where issue 41's gate-check missed an 8 % slowdown: the
// run levels swung -21.3 % to +17.3 % from nightly to nightly, the series scattered up to 3.45x
// their usual spreads around them, and the kernels did not feel the host alike. The CI host's
// model with a run effect of 7 % (sd; every run, quiet or busy), busy runs as there, and each
// kernel's response to a run uneven by 30 % (sd) around its sensitivity. What the model gives
// (printed by the test): nightly levels about -20 % to +25 %, scatter about 1-4.
NoiseModel noisy_host_model() {
  NoiseModel model = cpu_model();
  model.name = "noisy CPU host";
  model.device = "Intel Xeon";
  model.run_effect_sd = 0.07;
  model.kernel_response_sd = 0.3;
  return model;
}

// The noisy host's model with kinds: the kernels that hold the score matrix (0 and 2, as cpu.naive
// and the masked kernels) feel the host's unevenness alike, and so do the streaming ones (1, 3
// and 4, as cpu.flash and its FP8 variants), each kernel with a small unevenness of its own (5 %
// sd). The run levels and the scatter are the same as above; what the host measured
// does not say whether its kernels' unevenness came in kinds (these numbers are an assumption).
NoiseModel noisy_host_with_kinds_model() {
  NoiseModel model = noisy_host_model();
  model.name = "noisy CPU host, kernels in kinds";
  model.kernel_kind = {0, 1, 0, 1, 1};
  model.kernel_own_response_sd = 0.05;
  return model;
}

struct TrueStep {
  int run = -1;  // first slower run (index; its run id is run + 1)
  double size = 0;
};

// A whole kernel made slower from one run on (ci/gate-check.sh's injection), to be caught
// kernel-wide within `catch_within` slowed nightlies (gate-check's limit: five).
struct KernelStep {
  int kernel = -1;
  int run = -1;
  double size = 0;
  int catch_within = 5;
};

struct SyntheticSuite {
  int runs = 0;
  int kernels = 0;
  bool host_timed = false;
  std::vector<std::string> keys;
  std::vector<int> kernel_of;   // per series
  std::vector<TrueStep> steps;  // per series (a kernel step included)
  KernelStep kernel_step;
  // [run][series]
  std::vector<std::vector<SeriesPoint>> points;
  std::vector<std::vector<std::vector<double>>> samples;
  // What a rerun of each run measures: minutes later, on the same chip.
  std::vector<std::vector<SeriesPoint>> reruns;
  std::vector<std::vector<std::vector<double>>> rerun_samples;
};

// Per series: what stays the same from run to run.
struct SeriesTraits {
  double base = 0;
  int kernel = 0;
  double repetition_cv = 0;
  double noise = 0;       // host: own run-to-run sd
  double slow_speed = 0;  // 0: one speed
  double drift_start = -1, drift_length = 0;
  double chip_sensitivity = 1;
};

// What one measurement (a run or its rerun) of a series shares with the rest of its run.
struct RunConditions {
  double factor = 1;  // GPU: run effect x throttle x chip; host: quiet run effect
  double busy = 0;    // host: the busy level
  double clock = kNotMeasured;
  std::string chip;
};

// `step_probability`: each series gets one true step at a run in [25, runs - 5), of 3-10 %.
SyntheticSuite make_suite(Rng& rng, int runs, double step_probability, const NoiseModel& model,
                          KernelStep kernel_step = {}) {
  std::normal_distribution<double> normal(0, 1);
  std::uniform_real_distribution<double> uniform(0, 1);
  auto between = [&](double low, double high) { return low + (high - low) * uniform(rng); };
  const int series = model.kernels * model.shapes;
  SyntheticSuite suite;
  suite.runs = runs;
  suite.kernels = model.kernels;
  suite.host_timed = model.host_timed;
  suite.kernel_step = kernel_step;
  const std::string prefix = model.host_timed ? "cpu.k" : "cuda.k";
  std::vector<SeriesTraits> traits(series);
  for (int s = 0; s < series; ++s) {
    SeriesTraits& t = traits[s];
    t.kernel = s / model.shapes;
    suite.kernel_of.push_back(t.kernel);
    suite.keys.push_back(prefix + std::to_string(t.kernel) + "|shape" +
                         std::to_string(s % model.shapes) + "|normal|" + model.device + "|Release");
    t.base = 50e-6 * std::exp(uniform(rng) * std::log(100.0));  // 50 us .. 5 ms
    t.repetition_cv = between(model.repetition_cv_low, model.repetition_cv_high);
    if (model.series_noise_high > 0) {
      t.noise =
          std::exp(between(std::log(model.series_noise_low), std::log(model.series_noise_high)));
    }
    if (uniform(rng) < model.two_speed_fraction) {
      t.slow_speed = uniform(rng) < model.big_slow_speed_fraction
                         ? between(model.big_slow_speed_low, model.big_slow_speed_high)
                         : between(model.slow_speed_low, model.slow_speed_high);
    }
    TrueStep step;
    if (uniform(rng) < step_probability) {
      step.run = 25 + static_cast<int>(uniform(rng) * (runs - 30));
      step.size = between(0.03, 0.10);
    }
    if (t.kernel == kernel_step.kernel) step = {kernel_step.run, kernel_step.size};
    suite.steps.push_back(step);
    if (uniform(rng) < model.drift_probability) {
      t.drift_start = uniform(rng) * 70;
      t.drift_length = between(20, 40);
    }
  }
  auto sensitivity = [&](int kernel) {
    return model.load_sensitivity.empty() ? 1.0 : model.load_sensitivity[kernel];
  };
  auto busy_level = [&]() {
    return uniform(rng) < model.busy_probability ? between(model.busy_low, model.busy_high) : 0.0;
  };
  auto measure = [&](const SeriesTraits& t, double truth, int64_t run_id,
                     const RunConditions& conditions, std::vector<double>& reps) {
    reps.clear();
    for (int r = 0; r < model.repetitions; ++r) {
      double rep = truth * (1 + t.repetition_cv * normal(rng));
      if (uniform(rng) < model.interrupt_probability) {
        rep *= 1 + between(model.interrupt_low, model.interrupt_high);
      }
      reps.push_back(rep);
    }
    SeriesPoint p;
    p.run_id = run_id;
    p.median_s = median(reps);
    p.cv = sample_stddev(reps) / mean(reps);
    p.clock_mhz = conditions.clock;
    p.chip = conditions.chip;
    p.error = 1e-3 * (1 + 0.3 * uniform(rng));
    return p;
  };

  int chip = 0;
  double chip_shift = 0;
  std::vector<double> own(series, 0.0);  // host: each series' persistent own noise
  std::vector<bool> slow(series, false);
  suite.points.resize(runs);
  suite.samples.resize(runs);
  suite.reruns.resize(runs);
  suite.rerun_samples.resize(runs);
  for (int run = 0; run < runs; ++run) {
    if (run > 0 && uniform(rng) < model.chip_change_probability) {
      ++chip;
      chip_shift = model.chip_shift_max * (2 * uniform(rng) - 1);
      for (SeriesTraits& t : traits) t.chip_sensitivity = 0.5 + 0.5 * uniform(rng);
    }
    RunConditions conditions;
    conditions.chip = (model.host_timed ? "cpu-" : "GPU-") + std::to_string(chip);
    conditions.factor = 1 + model.run_effect_sd * normal(rng);
    if (std::isfinite(model.usual_clock_mhz)) {
      conditions.clock = model.usual_clock_mhz * (1 + 0.002 * normal(rng));
      if (uniform(rng) < model.throttle_probability) {
        const double throttle = 1 + between(model.throttle_low, model.throttle_high);
        conditions.factor *= throttle;
        conditions.clock = model.usual_clock_mhz / throttle;
      }
    }
    conditions.busy = busy_level();
    RunConditions rerun_conditions = conditions;
    auto draw_responses = [&]() {
      std::vector<double> by_kind(model.kernels), response(model.kernels);
      for (double& r : by_kind) r = model.kernel_response_sd * normal(rng);
      for (int k = 0; k < model.kernels; ++k) {
        const int kind = model.kernel_kind.empty() ? k : model.kernel_kind[k];
        response[k] = 1 + by_kind[kind] + model.kernel_own_response_sd * normal(rng);
      }
      return response;
    };
    const std::vector<double> response = draw_responses();
    std::vector<double> rerun_response = response;
    if (uniform(rng) >= model.rerun_shares_busy) {
      rerun_conditions.busy = busy_level();
      rerun_response = draw_responses();
    }
    const double persistence = model.series_noise_persistence;
    const double rerun_correlation = model.rerun_noise_correlation;
    for (int s = 0; s < series; ++s) {
      const SeriesTraits& t = traits[s];
      own[s] =
          persistence * own[s] + std::sqrt(1 - persistence * persistence) * t.noise * normal(rng);
      const double rerun_own =
          rerun_correlation * own[s] +
          std::sqrt(1 - rerun_correlation * rerun_correlation) * t.noise * normal(rng);
      slow[s] = t.slow_speed > 0 &&
                uniform(rng) < (slow[s] ? model.slow_speed_stay : model.slow_speed_enter);
      double truth =
          t.base * (1 + chip_shift * t.chip_sensitivity) * (slow[s] ? 1 + t.slow_speed : 1);
      const TrueStep& step = suite.steps[s];
      if (step.run >= 0 && run >= step.run) truth *= 1 + step.size;
      if (t.drift_start >= 0 && run > t.drift_start) {
        truth *= 1 + model.drift_per_run * std::min(run - t.drift_start, t.drift_length);
      }
      const double share = model.busy_unevenness * normal(rng);
      const double rerun_share = 0.7 * share + 0.7 * model.busy_unevenness * normal(rng);
      auto at = [&](const RunConditions& c, double own_noise, double uneven, double felt) {
        const double host =
            sensitivity(t.kernel) * felt * (c.factor - 1 + c.busy) + c.busy * uneven;
        return truth * (model.host_timed ? std::exp(host + own_noise) : c.factor);
      };
      std::vector<double> reps;
      suite.points[run].push_back(measure(
          t, at(conditions, own[s], share, response[t.kernel]), run + 1, conditions, reps));
      suite.samples[run].push_back(reps);
      suite.reruns[run].push_back(
          measure(t, at(rerun_conditions, rerun_own, rerun_share, rerun_response[t.kernel]),
                  100000 + run, rerun_conditions, reps));
      suite.rerun_samples[run].push_back(reps);
    }
  }
  return suite;
}

// A confirmed alert as the gate raises it: a series' or a kernel-wide aggregate's, new when its
// (series or group, since) was not confirmed before.
struct Episode {
  int series = -1;    // -1: kernel-wide
  int kernel = -1;    // the kernel of a kernel-wide alert
  int64_t since = 0;  // run id where the confirmed regression began
  int64_t confirmed_at = 0;
};

struct Replay {
  std::vector<Episode> episodes;        // series-level confirmed regressions
  std::vector<Episode> group_episodes;  // kernel-wide ones
  // What the gate said it could see of the injected kernel as a whole at the last nightly before
  // the injection (its kernel-wide detectable change); NaN when it said nothing.
  Detectable injected_kernel_detectable{kNotMeasured, kNotMeasured};
  std::vector<double> levels, scatters;  // each run's level (relative) and scatter, as analysed
};

// The group prior as harness/analysis/run_analysis.cpp builds it from the stored states of a
// kernel-wide aggregate's earlier runs: the newest of the last five that was not unclear; the
// runs it tripped (and, during an open suspicion, its unclear runs) are set aside.
GroupPrior prior_from(const std::map<int64_t, GroupPrior>& states, int64_t from_run) {
  constexpr int kLookback = 5;
  GroupPrior prior;
  std::vector<int64_t> unclear;
  bool found = false;
  int looked = 0;
  for (auto earlier = states.rbegin(); earlier != states.rend() && earlier->first >= from_run;
       ++earlier) {
    const GroupPrior& stored = earlier->second;
    if (stored.state == Verdict::outlier || stored.state == Verdict::confirmed ||
        (stored.state == Verdict::suspected && !stored.chip_changed)) {
      prior.set_aside_runs.insert(earlier->first);
    }
    if (stored.state == Verdict::ambiguous) unclear.push_back(earlier->first);
    if (found || looked++ >= kLookback || stored.state == Verdict::ambiguous) continue;
    found = true;
    prior.state = stored.state == Verdict::insufficient_history ? Verdict::ok : stored.state;
    prior.since_run_id = stored.since_run_id;
    prior.chip_changed = stored.chip_changed;
    prior.run_id = earlier->first;
  }
  if (prior.state == Verdict::suspected || prior.state == Verdict::confirmed) {
    for (int64_t run : unclear) {
      if (run >= prior.since_run_id) prior.set_aside_runs.insert(run);
    }
  }
  return prior;
}

// Replays the nightly job over the suite: each run is analysed on the last max_history results
// of each series (as the store hands them over); suspects, unclear trips and every shape of a
// suspected or unclear kernel are re-measured at once (plus 12 controls) and the run analysed
// again, as ci/nightly.sh does. States are kept as the store keeps them.
Replay replay(const SyntheticSuite& suite, const DetectorOptions& options) {
  constexpr size_t kControls = 12;
  const size_t series = suite.keys.size();
  const size_t max_history = static_cast<size_t>(options.max_history);
  std::vector<std::vector<SeriesPoint>> history(series);
  std::vector<std::vector<std::vector<double>>> history_samples(series);
  std::map<std::string, std::map<int64_t, GroupPrior>> group_states;
  Replay result;
  std::set<std::pair<int, int64_t>> seen;
  std::set<std::pair<std::string, int64_t>> seen_groups;
  for (int run = 0; run < suite.runs; ++run) {
    std::map<std::string, GroupPrior> group_priors;
    const int64_t oldest = std::max(1, run + 1 - static_cast<int>(max_history));
    for (const auto& [group, states] : group_states)
      group_priors[group] = prior_from(states, oldest);
    auto build = [&](bool with_rerun, const std::vector<bool>& rerun_this) {
      std::vector<SeriesInput> inputs(series);
      for (size_t s = 0; s < series; ++s) {
        inputs[s].key = suite.keys[s];
        inputs[s].group = group_key(suite.keys[s]);
        inputs[s].host_timed = suite.host_timed;
        const size_t skip = history[s].size() - std::min(history[s].size(), max_history);
        inputs[s].history.assign(history[s].begin() + static_cast<std::ptrdiff_t>(skip),
                                 history[s].end());
        inputs[s].candidate = suite.points[run][s];
        if (with_rerun && rerun_this[s]) {
          inputs[s].rerun = suite.reruns[run][s];
          inputs[s].rerun_samples = suite.rerun_samples[run][s];
          const Baseline baseline = compute_baseline(inputs[s].history, options);
          if (!baseline.points.empty()) {
            inputs[s].baseline_samples = history_samples[s][skip + baseline.representative];
            inputs[s].baseline_samples_level = inputs[s].history[baseline.representative].level;
          }
        }
      }
      return inputs;
    };
    std::vector<SeriesInput> inputs = build(false, {});
    RunAnalysis analysis = analyze_run(inputs, group_priors, options);
    {
      std::vector<bool> rerun_this(series, false);
      bool any = false;
      for (size_t s = 0; s < series; ++s) {
        const Verdict state = analysis.series[s].performance.state;
        if (state == Verdict::suspected || state == Verdict::ambiguous) rerun_this[s] = any = true;
      }
      // A suspected kernel's shapes, and its peer's (attnbench rerun --suspects).
      for (const GroupAnalysis& group : analysis.groups) {
        if (group.state != Verdict::suspected && group.state != Verdict::ambiguous) continue;
        for (size_t s = 0; s < series; ++s) {
          if (inputs[s].group == group.group || inputs[s].group == group.peer)
            rerun_this[s] = any = true;
        }
      }
      if (any) {
        size_t controls = 0;
        for (size_t s = 0; s < series && controls < kControls; s += 3) {
          if (!rerun_this[s] && analysis.series[s].performance.state == Verdict::ok) {
            rerun_this[s] = true;
            ++controls;
          }
        }
        inputs = build(true, rerun_this);
        analysis = analyze_run(inputs, group_priors, options);
      }
    }
    result.levels.push_back(std::exp(analysis.level) - 1);
    result.scatters.push_back(analysis.scatter);
    for (size_t s = 0; s < series; ++s) {
      const SeriesAnalysis& verdict = analysis.series[s];
      SeriesPoint stored = *inputs[s].candidate;
      stored.state = verdict.performance.state;
      stored.since_run_id = verdict.performance.since_run_id;
      stored.change = verdict.performance.trip.change;
      stored.chip_changed = verdict.performance.chip_changed;
      stored.accuracy_state = verdict.accuracy.state;
      stored.accuracy_since_run_id = verdict.accuracy.since_run_id;
      if (verdict.performance.previous_reverted) history[s].back().state = Verdict::outlier;
      if (stored.state == Verdict::confirmed &&
          seen.insert({static_cast<int>(s), stored.since_run_id}).second) {
        result.episodes.push_back(
            {static_cast<int>(s), suite.kernel_of[s], stored.since_run_id, stored.run_id});
      }
      history[s].push_back(stored);
      history_samples[s].push_back(suite.samples[run][s]);
    }
    for (const GroupAnalysis& group : analysis.groups) {
      const std::string kernel = kernel_of_series_key(group.group);
      const int kernel_index = std::stoi(kernel.substr(kernel.find(".k") + 2));
      if (run + 1 == suite.kernel_step.run && kernel_index == suite.kernel_step.kernel) {
        result.injected_kernel_detectable = group.detectable;
      }
      std::map<int64_t, GroupPrior>& states = group_states[group.group];
      if (group.previous_reverted && states.count(group.previous_run_id)) {
        states[group.previous_run_id].state = Verdict::outlier;
      }
      states[run + 1] = {group.state, group.since_run_id, group.chip_changed};
      if (group.state == Verdict::confirmed &&
          seen_groups.insert({group.group, group.since_run_id}).second) {
        result.group_episodes.push_back({-1, kernel_index, group.since_run_id, run + 1});
      }
    }
  }
  return result;
}

// Whether an alert is a true one: its series (or, kernel-wide, its kernel) had a step that
// began at or before the alert's start, no more than two runs before it.
bool true_alert(const SyntheticSuite& suite, const Episode& e) {
  auto began_with = [&](const TrueStep& step) {
    return step.run >= 0 && e.since >= step.run + 1 && e.since <= step.run + 3;
  };
  if (e.series >= 0) return began_with(suite.steps[e.series]);
  const KernelStep& k = suite.kernel_step;
  return k.kernel == e.kernel && began_with({k.run, k.size});
}

struct Figures {
  int steps = 0, detected = 0;              // true steps of 5 % or more
  int small_steps = 0, small_detected = 0;  // 3-5 %
  int episodes = 0, true_episodes = 0;
  // Per night, on the nights judged before any true step (after the first K runs): how many,
  // how many raised a new false confirmed alert (series or kernel-wide), and the series-nights.
  int nights = 0, false_nights = 0;
  int series_nights = 0, false_series_alerts = 0, false_group_alerts = 0;
  // The kernel-wide injection: caught kernel-wide within five slowed nightlies (ci/gate-check.sh's
  // limit), and the injections with a false alert elsewhere up to the catch.
  int injections = 0, injections_caught = 0, injections_with_false_alerts = 0;
  // What the gate said beforehand: the injections it said it could confirm within the window
  // (the kernel's detectable change within three nightlies at most the injection's size), and of
  // them the ones caught; the detectable changes it stated, for the printout.
  int injections_said_visible = 0, said_visible_caught = 0;
  std::vector<double> stated_detectable;
  std::vector<double> levels, scatters;  // of the nights judged
};

// A step at run index N (run id N + 1) counts as found when a confirmed regression beginning in
// [N + 1, N + 3] was confirmed by run id N + 3 at the latest.
void score_steps(const SyntheticSuite& suite, const Replay& replayed, Figures& figures) {
  for (size_t s = 0; s < suite.steps.size(); ++s) {
    const TrueStep& step = suite.steps[s];
    if (step.run < 0 || suite.kernel_of[s] == suite.kernel_step.kernel) continue;
    const int64_t first_slow_id = step.run + 1;
    bool found = false;
    for (const Episode& e : replayed.episodes) {
      found = found || (e.series == static_cast<int>(s) && e.since >= first_slow_id &&
                        e.since <= first_slow_id + 2 && e.confirmed_at <= first_slow_id + 2);
    }
    if (step.size >= 0.05) {
      ++figures.steps;
      figures.detected += found;
    } else {
      ++figures.small_steps;
      figures.small_detected += found;
    }
  }
  for (const Episode& e : replayed.episodes) {
    ++figures.episodes;
    figures.true_episodes += true_alert(suite, e);
  }
}

// Per night, on a suite without per-series steps: the nights from run K + 1 to the kernel-wide
// injection (or the end), then the injection itself.
void score_nights(const SyntheticSuite& suite, const Replay& replayed, Figures& figures) {
  const int64_t first_judged = DetectorOptions{}.window + 1;
  const int64_t step_id = suite.kernel_step.run >= 0 ? suite.kernel_step.run + 1 : suite.runs + 1;
  std::map<int64_t, int> false_alerts;  // by night
  for (const std::vector<Episode>* episodes : {&replayed.episodes, &replayed.group_episodes}) {
    for (const Episode& e : *episodes) {
      if (true_alert(suite, e)) continue;
      ++false_alerts[e.confirmed_at];
      if (e.confirmed_at < first_judged || e.confirmed_at >= step_id) continue;
      ++(e.series >= 0 ? figures.false_series_alerts : figures.false_group_alerts);
    }
  }
  for (int64_t night = first_judged; night < step_id; ++night) {
    figures.levels.push_back(replayed.levels[static_cast<size_t>(night - 1)]);
    figures.scatters.push_back(replayed.scatters[static_cast<size_t>(night - 1)]);
    ++figures.nights;
    figures.series_nights += static_cast<int>(suite.keys.size());
    figures.false_nights += false_alerts.count(night) > 0;
  }
  if (suite.kernel_step.run < 0) return;
  ++figures.injections;
  const int64_t last_night = step_id + suite.kernel_step.catch_within - 1;
  int64_t caught_at = last_night;
  bool caught = false;
  for (const Episode& e : replayed.group_episodes) {
    if (true_alert(suite, e) && e.confirmed_at <= last_night) {
      caught = true;
      caught_at = std::min(caught_at, e.confirmed_at);
    }
  }
  figures.injections_caught += caught;
  const double stated = replayed.injected_kernel_detectable.within_three;
  figures.stated_detectable.push_back(std::isfinite(stated) ? stated : kMaxDetectable);
  if (stated <= suite.kernel_step.size) {
    ++figures.injections_said_visible;
    figures.said_visible_caught += caught;
  }
  bool false_alert = false;
  for (int64_t night = step_id; night <= caught_at; ++night)
    false_alert = false_alert || false_alerts.count(night);
  figures.injections_with_false_alerts += false_alert;
}

void add(Figures& total, const Figures& more) {
  total.steps += more.steps;
  total.detected += more.detected;
  total.small_steps += more.small_steps;
  total.small_detected += more.small_detected;
  total.episodes += more.episodes;
  total.true_episodes += more.true_episodes;
  total.nights += more.nights;
  total.false_nights += more.false_nights;
  total.series_nights += more.series_nights;
  total.false_series_alerts += more.false_series_alerts;
  total.false_group_alerts += more.false_group_alerts;
  total.injections += more.injections;
  total.injections_caught += more.injections_caught;
  total.injections_with_false_alerts += more.injections_with_false_alerts;
  total.injections_said_visible += more.injections_said_visible;
  total.said_visible_caught += more.said_visible_caught;
  total.stated_detectable.insert(total.stated_detectable.end(), more.stated_detectable.begin(),
                                 more.stated_detectable.end());
  total.levels.insert(total.levels.end(), more.levels.begin(), more.levels.end());
  total.scatters.insert(total.scatters.end(), more.scatters.begin(), more.scatters.end());
}

// statistics.h's quantile over the finite values (a run without a level has none).
double quantile_of(std::vector<double> values, double q) {
  std::erase_if(values, [](double v) { return !std::isfinite(v); });
  return quantile(std::move(values), q);
}

double ratio(int a, int b) { return b == 0 ? 1.0 : static_cast<double>(a) / b; }

// Replays `suites` on up to two threads (the suites are drawn first, in order, so a seed
// reproduces them) and adds up what `score` finds.
Figures evaluate(const std::vector<SyntheticSuite>& suites, const DetectorOptions& options,
                 void (*score)(const SyntheticSuite&, const Replay&, Figures&)) {
  std::vector<Figures> each(suites.size());
  std::atomic<size_t> next{0};
  auto work = [&]() {
    for (size_t i; (i = next++) < suites.size();)
      score(suites[i], replay(suites[i], options), each[i]);
  };
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 2u);
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  Figures total;
  for (const Figures& f : each) add(total, f);
  return total;
}

// The kernel-wide injection an evaluation makes: its size, and the slowed nightlies it must be
// caught within (ci/gate-check.sh's: 10 % within five).
struct Injection {
  double size = 0.10;
  int catch_within = 5;
};

struct ModelFigures {
  Injection injection;
  Figures nights;  // step-free nightlies, then a kernel-wide injection
  Figures steps;   // a fifth of the series stepped
  // The same nightlies under the rule without the family-wise limit, where asked for.
  std::optional<Figures> nights_version_1;
};

// The evaluation of one noise model at the smoke suite's size: 25 suites of 100 nightlies
// whose first 90 are unchanged (80 judged after the first K runs: 2,000 nightlies), the last 10
// with one kernel 10 % slower; `extra_injections` short suites of 56 nightlies with one kernel
// 10 % slower from the 50th (their first 50 count as unchanged nightlies too); and 25 suites
// where a fifth of the series step by 3-10 %. With `compare`, the 25 long unchanged suites also
// under the rule of detector version 1.
ModelFigures evaluate_model(const NoiseModel& model, uint64_t seed, bool compare,
                            int extra_injections, Injection injection = {}) {
  constexpr int kSuites = 25;
  constexpr int kRuns = 100;
  constexpr int kInjectedRun = 90;
  constexpr int kShortRuns = 56;
  constexpr int kShortInjectedRun = 50;
  Rng rng(seed);
  std::vector<SyntheticSuite> unchanged, injected, stepped;
  for (int h = 0; h < kSuites; ++h) {
    unchanged.push_back(make_suite(
        rng, kRuns, 0.0, model,
        {h % model.kernels, kInjectedRun, injection.size, injection.catch_within}));
  }
  for (int h = 0; h < extra_injections; ++h) {
    injected.push_back(make_suite(
        rng, kShortRuns, 0.0, model,
        {h % model.kernels, kShortInjectedRun, injection.size, injection.catch_within}));
  }
  for (int h = 0; h < kSuites; ++h) stepped.push_back(make_suite(rng, kRuns, 0.2, model));
  Figures nights = evaluate(unchanged, DetectorOptions{}, score_nights);
  add(nights, evaluate(injected, DetectorOptions{}, score_nights));
  ModelFigures figures{injection, nights, evaluate(stepped, DetectorOptions{}, score_steps),
                       std::nullopt};
  if (compare) {
    DetectorOptions version_1;
    version_1.family_wise = false;
    figures.nights_version_1 = evaluate(unchanged, version_1, score_nights);
  }
  return figures;
}

void print_figures(const std::string& name, const ModelFigures& figures, uint64_t seed) {
  const Figures& n = figures.nights;
  const Figures& s = figures.steps;
  std::printf(
      "detector evaluation [%s; 150 series; seed %llu]:\n"
      "  per night: %.2f %% of %d unchanged nightlies raised a new confirmed alert (%d series "
      "alerts, %d kernel-wide); per series: %.4f %% of %d series-nights\n",
      name.c_str(), static_cast<unsigned long long>(seed), 100 * ratio(n.false_nights, n.nights),
      n.nights, n.false_series_alerts, n.false_group_alerts,
      100 * ratio(n.false_series_alerts, n.series_nights), n.series_nights);
  if (const std::optional<Figures>& v1 = figures.nights_version_1) {
    std::printf(
        "  without the family-wise limit (detector version 1): %.2f %% of nightlies (%d series "
        "alerts, %d kernel-wide); per series %.4f %%\n",
        100 * ratio(v1->false_nights, v1->nights), v1->false_series_alerts, v1->false_group_alerts,
        100 * ratio(v1->false_series_alerts, v1->series_nights));
  }
  std::printf(
      "  steps >= 5 %%: recall %.3f (%d/%d), 3-5 %%: recall %.3f (%d/%d); precision %.3f "
      "(%d/%d confirmed episodes)\n"
      "  %.0f %% kernel-wide injection caught kernel-wide within %d nightlies: %d/%d; with a "
      "false alert elsewhere up to the catch: %d/%d\n",
      ratio(s.detected, s.steps), s.detected, s.steps, ratio(s.small_detected, s.small_steps),
      s.small_detected, s.small_steps, ratio(s.true_episodes, s.episodes), s.true_episodes,
      s.episodes, 100 * figures.injection.size, figures.injection.catch_within,
      n.injections_caught, n.injections, n.injections_with_false_alerts, n.injections);
  std::printf(
      "  the unchanged nightlies' run levels: 1st-99th percentile %+.1f %% to %+.1f %% (5th-95th "
      "%+.1f to %+.1f %%); their scatter: median %.2f, 99th percentile %.2f\n",
      100 * quantile_of(n.levels, 0.01), 100 * quantile_of(n.levels, 0.99),
      100 * quantile_of(n.levels, 0.05), 100 * quantile_of(n.levels, 0.95),
      quantile_of(n.scatters, 0.5), quantile_of(n.scatters, 0.99));
  if (!n.stated_detectable.empty()) {
    auto at = [&](double q) { return 100 * quantile_of(n.stated_detectable, q); };
    std::printf(
        "  the gate's stated detectable change of the injected kernel within 3 nightlies, the "
        "night before: median %.1f %% (10th-90th percentile %.1f-%.1f %%; 100 %% = blind); it "
        "said the injection was visible %d times, and caught %d of those\n",
        at(0.5), at(0.1), at(0.9), n.injections_said_visible, n.said_visible_caught);
  }
  std::fflush(stdout);
}

// The gate's promise, per night for the whole suite: at most one nightly in 100 with a false
// confirmed alert. On a GPU, 9 in 10 steps of 5 % or more found within three runs, and most
// confirmed alerts true.
TEST(DetectorEvaluation, GpuNoiseAtTheSmokeSuitesSize) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (ATTNBENCH_TEST_SEED replays it)");
  // Version 1 raised no false alarm on this model either (0 of 2,000 nightlies): not replayed.
  const ModelFigures figures = evaluate_model(gpu_model(), seed, false, 0);
  print_figures("GPU noise: nightly job, rerun of suspects + next run", figures, seed);
  EXPECT_LE(ratio(figures.nights.false_nights, figures.nights.nights), 0.01);
  EXPECT_GE(ratio(figures.steps.detected, figures.steps.steps), 0.9);
  EXPECT_GE(ratio(figures.steps.true_episodes, figures.steps.episodes), 0.95);
  EXPECT_GE(ratio(figures.nights.injections_caught, figures.nights.injections), 0.9);
  // What the gate said it could see (within three nightlies) it caught (within five).
  EXPECT_GE(ratio(figures.nights.said_visible_caught, figures.nights.injections_said_visible), 0.9);
}

// On the shared host, one shape of a kernel has second speeds of its own, so the gate's promise
// rests on the family-wise limit, and a slowdown is caught kernel-wide (ci/gate-check.sh's
// injection: 10 % into one kernel) without a false alert elsewhere. A lone series' recall is
// printed, not promised: within the excursions its family makes by itself it is not confirmed.
TEST(DetectorEvaluation, HostTimedNoiseAtTheSmokeSuitesSize) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (ATTNBENCH_TEST_SEED replays it)");
  // The harsh host model catches about 95 % of the injections: 25 of them against a bound of
  // 0.9 would fail by chance about one run in ten, 325 about one in 10^4.
  const ModelFigures figures = evaluate_model(cpu_model(), seed, true, 300);
  print_figures("CPU host noise: nightly job, rerun of suspects + next run", figures, seed);
  EXPECT_LE(ratio(figures.nights.false_nights, figures.nights.nights), 0.01);
  EXPECT_GE(ratio(figures.nights.injections_caught, figures.nights.injections), 0.9);
  EXPECT_LE(figures.nights.injections_with_false_alerts, figures.nights.injections / 10);
  // What the gate said it could see (within three nightlies) it caught (within five).
  EXPECT_GE(ratio(figures.nights.said_visible_caught, figures.nights.injections_said_visible), 0.9);
}

// Issue 41, on the noisy host's model: at most one unchanged nightly in 100 with a confirmed
// alert, and the gate says what it cannot see. An 8 % slowdown of one kernel is caught within
// three nightlies in only about a quarter of the injections there (printed; the aim is 9
// in 10, which this measurement protocol does not reach), but the night before, the gate had
// stated the kernel's detectable change above 8 % for most of those it then missed.
TEST(DetectorEvaluation, OnANoisyHostTheGateSaysWhatItCannotSee) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (ATTNBENCH_TEST_SEED replays it)");
  const ModelFigures figures =
      evaluate_model(noisy_host_model(), seed, false, 300, Injection{0.08, 3});
  print_figures("noisy CPU host: nightly job, rerun of suspects + next run", figures, seed);
  const Figures& n = figures.nights;
  EXPECT_LE(ratio(n.false_nights, n.nights), 0.01);
  EXPECT_LE(n.injections_with_false_alerts, n.injections / 10);
  const int missed = n.injections - n.injections_caught;
  const int missed_unannounced = n.injections_said_visible - n.said_visible_caught;
  // Measured over five seeds: 13-21 % of the misses came after the gate had stated it could see
  // 8 % (of the 54-69 times it said so, it caught 19-31: its reading takes a rerun as noisy as a
  // run and the next nightlies' thresholds as tonight's; on this host both are optimistic).
  EXPECT_LE(missed_unannounced, missed / 3) << "the gate claimed to see what it missed";
}

// Issue 41, where the host's unevenness comes in kinds of kernels: each kernel-wide aggregate
// measured against the peer that feels the host most like it (kernel_wide.cpp). At most one
// unchanged nightly in 100 raises a confirmed alert; an 8 % slowdown of one kernel is confirmed
// within three nightlies, naming that kernel alone, in 88-90 % of the injections (294 and 285 of
// 325 over two seeds; the independent-response model, 24-30 %): about the 9 in 10 but not
// reliably above it, so the bound is 8 in 10. What is left: some kernels of the larger kind (the
// run's level nearly fits them, so no peer is chosen, and a busy run is unclear for them) and the
// host-timed rule's rerun and next run.
TEST(DetectorEvaluation, OnANoisyHostWithKernelsInKindsPeersCancelTheNoise) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (ATTNBENCH_TEST_SEED replays it)");
  const ModelFigures figures =
      evaluate_model(noisy_host_with_kinds_model(), seed, false, 300, Injection{0.08, 3});
  print_figures("noisy CPU host, kernels in kinds: nightly job, rerun of suspects + next run",
                figures, seed);
  const Figures& n = figures.nights;
  EXPECT_LE(ratio(n.false_nights, n.nights), 0.01);
  EXPECT_GE(ratio(n.injections_caught, n.injections), 0.8);
  EXPECT_LE(n.injections_with_false_alerts, n.injections / 10);
}

}  // namespace
}  // namespace attnbench
