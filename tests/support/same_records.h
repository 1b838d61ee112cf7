// Records (harness/core/records.h) compared field by field, for the tests that send them
// somewhere and read them back: the store (tests/store/) and the worker protocol
// (tests/measure/). Each failure names the field.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "harness/core/records.h"

namespace attnbench {

// Doubles must come back bit for bit; NaN (not measured) must come back NaN.
inline void expect_same_double(double expected, double actual, const char* field) {
  if (std::isnan(expected)) {
    EXPECT_TRUE(std::isnan(actual)) << field << " = " << actual << ", expected NaN";
  } else {
    EXPECT_EQ(expected, actual) << field;
  }
}

#define EXPECT_SAME_FIELD(expected, actual, field) \
  EXPECT_EQ((expected).field, (actual).field) << #field
#define EXPECT_SAME_DOUBLE(expected, actual, field) \
  ::attnbench::expect_same_double((expected).field, (actual).field, #field)

inline void expect_same_sample(const Sample& expected, const Sample& actual) {
  EXPECT_SAME_FIELD(expected, actual, repetition);
  EXPECT_SAME_DOUBLE(expected, actual, time_s);
  EXPECT_SAME_FIELD(expected, actual, iterations);
  EXPECT_SAME_DOUBLE(expected, actual, sm_clock_mhz);
  EXPECT_SAME_FIELD(expected, actual, clock_reasons);
}

// What a case's measurement holds, in any record that carries one (a ResultRecord, a worker's
// CaseOutcome): the check, the timing summary and the samples.
template <typename Record>
void expect_same_measurement(const Record& expected, const Record& actual) {
  EXPECT_SAME_FIELD(expected, actual, check.checked);
  EXPECT_SAME_DOUBLE(expected, actual, check.max_abs_error);
  EXPECT_SAME_DOUBLE(expected, actual, check.lowp_error);
  EXPECT_SAME_DOUBLE(expected, actual, check.atol);
  EXPECT_SAME_DOUBLE(expected, actual, check.bound);
  EXPECT_SAME_DOUBLE(expected, actual, check.rel_l2);
  EXPECT_SAME_DOUBLE(expected, actual, check.rmse);
  EXPECT_SAME_FIELD(expected, actual, check.nan_count);
  EXPECT_SAME_FIELD(expected, actual, check.inf_count);
  EXPECT_SAME_FIELD(expected, actual, check.rows_checked);
  EXPECT_SAME_FIELD(expected, actual, check.rows_total);
  EXPECT_SAME_DOUBLE(expected, actual, check.lse_max_error);
  EXPECT_SAME_FIELD(expected, actual, check.canaries_ok);
  EXPECT_SAME_FIELD(expected, actual, check.repeatable);
  EXPECT_SAME_FIELD(expected, actual, timing.timed);
  EXPECT_SAME_DOUBLE(expected, actual, timing.median_s);
  EXPECT_SAME_DOUBLE(expected, actual, timing.mean_s);
  EXPECT_SAME_DOUBLE(expected, actual, timing.min_s);
  EXPECT_SAME_DOUBLE(expected, actual, timing.max_s);
  EXPECT_SAME_DOUBLE(expected, actual, timing.stddev_s);
  EXPECT_SAME_DOUBLE(expected, actual, timing.cv);
  EXPECT_SAME_FIELD(expected, actual, timing.repetitions);
  EXPECT_SAME_FIELD(expected, actual, timing.iterations_per_repetition);
  EXPECT_SAME_FIELD(expected, actual, timing.forwards_timed);
  EXPECT_SAME_DOUBLE(expected, actual, timing.wall_s);
  EXPECT_SAME_FIELD(expected, actual, timing.stop);
  EXPECT_SAME_FIELD(expected, actual, extra_memory_bytes);
  EXPECT_SAME_FIELD(expected, actual, launches);
  EXPECT_SAME_DOUBLE(expected, actual, energy_j);
  EXPECT_SAME_FIELD(expected, actual, details_json);
  ASSERT_EQ(expected.samples.size(), actual.samples.size());
  for (size_t i = 0; i < expected.samples.size(); ++i) {
    SCOPED_TRACE("sample " + std::to_string(i));
    expect_same_sample(expected.samples[i], actual.samples[i]);
  }
}

}  // namespace attnbench
