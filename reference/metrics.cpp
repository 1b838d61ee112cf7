#include "reference/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "reference/formats.h"

namespace attnbench {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

}  // namespace

// NaN and Inf values are counted and make max_abs infinite; rel_l2 and rmse describe the
// finite values, so one bad element does not hide how far off the others are.
void ErrorAccumulator::add(double value, double reference) {
  ++count_;
  if (std::isnan(value)) {
    ++nan_count_;
    max_abs_ = kInfinity;
    return;
  }
  if (std::isinf(value)) {
    ++inf_count_;
    max_abs_ = kInfinity;
    return;
  }
  const double error = std::abs(value - reference);
  // A non-finite reference is a broken check, never a pass: the error is infinite.
  max_abs_ = std::isfinite(error) ? std::max(max_abs_, error) : kInfinity;
  sum_sq_error_ += error * error;
  sum_sq_ref_ += reference * reference;
}

double ErrorAccumulator::max_abs() const { return max_abs_; }

double ErrorAccumulator::rel_l2() const {
  if (sum_sq_error_ == 0) return 0;
  if (sum_sq_ref_ == 0) return kInfinity;
  return std::sqrt(sum_sq_error_ / sum_sq_ref_);
}

double ErrorAccumulator::rmse() const {
  const int64_t finite_count = count_ - nan_count_ - inf_count_;
  if (finite_count == 0) return 0;
  return std::sqrt(sum_sq_error_ / static_cast<double>(finite_count));
}

double rounding_error_term(DType output_dtype, double reference, double probe) {
  const float shifted = round_to(output_dtype, static_cast<float>(reference + probe));
  const float back = round_to(output_dtype, static_cast<float>(shifted - probe));
  return std::abs(static_cast<double>(back) - reference);
}

}  // namespace attnbench
