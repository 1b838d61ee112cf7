#include "reference/tensor_core_sum.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace attnbench {

namespace {

// Toward zero to a multiple of `quantum` (a power of two; `inverse` = 1 / quantum), exactly: a
// product has at most 22 significant bits (8 for e4m3), C 24, and x * inverse stays far inside
// double's range.
double truncate_to(double x, double quantum, double inverse) {
  return std::trunc(x * inverse) * quantum;
}

// ilogb of a finite, non-zero float: from its exponent bits when it is normal (the hot path: the
// emulator's every product), from std::ilogb when it is subnormal.
int exponent_of(float x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  const int field = static_cast<int>((bits >> 23) & 0xffu);
  return field != 0 ? field - 127 : std::ilogb(x);
}

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
  if (c != 0.0f && finite) alignment = exponent_of(c);
  for (unsigned k = 0; k < count; ++k) {
    const float x = a[k], y = b[k * b_stride];
    finite = finite && std::isfinite(x) && std::isfinite(y);
    if (x != 0.0f && y != 0.0f && finite)
      alignment = std::max(alignment, exponent_of(x) + exponent_of(y));
  }
  if (!finite || alignment == std::numeric_limits<int>::min()) {
    double sum = c;  // IEEE arithmetic: NaN and infinities propagate; all zeros keep their sign
    for (unsigned k = 0; k < count; ++k)
      sum += static_cast<double>(a[k]) * static_cast<double>(b[k * b_stride]);
    return static_cast<float>(sum);
  }
  const double quantum = std::ldexp(1.0, alignment - kept_bits);
  const double inverse = std::ldexp(1.0, kept_bits - alignment);
  double sum = truncate_to(c, quantum, inverse);
  for (unsigned k = 0; k < count; ++k) {
    sum += truncate_to(static_cast<double>(a[k]) * static_cast<double>(b[k * b_stride]), quantum,
                       inverse);
  }
  return truncate_to_float(sum);
}

}  // namespace attnbench
