#include "reference/tensor_core_sum.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace attnbench {

namespace {

// Toward zero to a multiple of `quantum` (a power of two), exactly: a product has at most 22
// significant bits (8 for e4m3), C 24, and the quotient stays far inside double's range.
double truncate_to(double x, double quantum) { return std::trunc(x / quantum) * quantum; }

// The double `x`, truncated toward zero to fp32. A finite sum beyond fp32's range gives the
// largest finite fp32, as truncation toward zero would; what the H200 gives there is not
// measured (the conformance inputs stay in range).
float truncate_to_float(double x) {
  float rounded = static_cast<float>(x);
  if (std::fabs(static_cast<double>(rounded)) > std::fabs(x))
    rounded = std::nextafter(rounded, 0.0f);
  return rounded;
}

}  // namespace

float tensor_core_sum(float c, const float* a, const float* b, unsigned count, unsigned b_stride,
                      int kept_bits) {
  bool finite = std::isfinite(c);
  int alignment = std::numeric_limits<int>::min();
  if (c != 0.0f) alignment = std::ilogb(c);
  for (unsigned k = 0; k < count; ++k) {
    const float x = a[k], y = b[k * b_stride];
    finite = finite && std::isfinite(x) && std::isfinite(y);
    if (x != 0.0f && y != 0.0f) alignment = std::max(alignment, std::ilogb(x) + std::ilogb(y));
  }
  if (!finite || alignment == std::numeric_limits<int>::min()) {
    double sum = c;  // IEEE arithmetic: NaN and infinities propagate; all zeros keep their sign
    for (unsigned k = 0; k < count; ++k)
      sum += static_cast<double>(a[k]) * static_cast<double>(b[k * b_stride]);
    return static_cast<float>(sum);
  }
  const double quantum = std::ldexp(1.0, alignment - kept_bits);
  double sum = truncate_to(c, quantum);
  for (unsigned k = 0; k < count; ++k) {
    sum += truncate_to(static_cast<double>(a[k]) * static_cast<double>(b[k * b_stride]), quantum);
  }
  return truncate_to_float(sum);
}

}  // namespace attnbench
