// Error metrics for the checker. Judged by the maximum error, never the mean; rel-L2 and RMSE
// are recorded beside it.
#pragma once

#include <cstdint>

#include "reference/dtype.h"

namespace attnbench {

class ErrorAccumulator {
 public:
  // A NaN or Inf in `value` is counted and makes max_abs infinite.
  void add(double value, double reference);
  double max_abs() const;
  double rel_l2() const;  // ||value - ref||_2 / ||ref||_2 (0 when both are 0)
  double rmse() const;
  int64_t count() const { return count_; }
  int64_t nan_count() const { return nan_count_; }
  int64_t inf_count() const { return inf_count_; }

 private:
  double max_abs_ = 0;
  double sum_sq_error_ = 0;
  double sum_sq_ref_ = 0;
  int64_t count_ = 0;
  int64_t nan_count_ = 0;
  int64_t inf_count_ = 0;
};

// FlashAttention's absolute tolerance term for one reference value in `output_dtype`:
// |round(round(ref + probe) - probe) - ref|, probe 0.3 (FlashAttention's tests/test_flash_attn.py,
// out_ref + 0.3 - 0.3 - out_ref, for values of order 1);
// the case's atol is 2 x its maximum over the checked values.
inline constexpr double kAtolProbe = 0.3;
double rounding_error_term(DType output_dtype, double reference, double probe = kAtolProbe);

}  // namespace attnbench
