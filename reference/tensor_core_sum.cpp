#include "reference/tensor_core_sum.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace attnbench {

namespace {

// 2^e as a double, from its exponent bits (every emulated matrix instruction's sums need two; a
// library call each was measurable). Every e here is far inside double's normal range: alignments
// run from about -300 (a product of two bf16 subnormals) to 255, kept bits are 13 or 25.
double power_of_two(int e) {
  const uint64_t bits = static_cast<uint64_t>(e + 1023) << 52;
  return std::bit_cast<double>(bits);
}

// x / quantum truncated toward zero, as an integer, exactly: a product has at most 22 significant
// bits (8 for e4m3) and is below 2^(alignment + 2), C below 2^(alignment + 1), so |x| / quantum <
// 2^(kept_bits + 2) and the conversion's truncation toward zero is the rule's.
int64_t quanta_of(double x, double inverse_quantum) {
  return static_cast<int64_t>(x * inverse_quantum);
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

TensorCoreOperand tensor_core_operand(const float* values, unsigned count, unsigned stride) {
  TensorCoreOperand operand;
  operand.count = count;
  operand.finite = true;
  for (unsigned k = 0; k < count; ++k) {
    const float x = values[k * stride];
    operand.value[k] = x;
    operand.finite = operand.finite && std::isfinite(x);
    operand.exponent[k] =
        x != 0.0f && std::isfinite(x) ? exponent_of(x) : TensorCoreOperand::kZeroExponent;
  }
  return operand;
}

float tensor_core_sum(float c, const float* a, const float* b, unsigned count, unsigned b_stride,
                      int kept_bits) {
  return tensor_core_sum(c, tensor_core_operand(a, count), tensor_core_operand(b, count, b_stride),
                         kept_bits);
}

float tensor_core_sum(float c, const TensorCoreOperand& a, const TensorCoreOperand& b,
                      int kept_bits) {
  const unsigned count = a.count;
  const bool finite = std::isfinite(c) && a.finite && b.finite;
  // Step 2. A product with a zero factor has an exponent sum far below any real one (the least,
  // of two float subnormals, is about -300): it never sets the alignment.
  int alignment = c != 0.0f && finite ? exponent_of(c) : TensorCoreOperand::kZeroExponent;
  for (unsigned k = 0; k < count; ++k) alignment = std::max(alignment, a.exponent[k] + b.exponent[k]);
  if (!finite || alignment < TensorCoreOperand::kZeroExponent / 2) {
    double sum = c;  // IEEE arithmetic: NaN and infinities propagate; all zeros keep their sign
    for (unsigned k = 0; k < count; ++k)
      sum += static_cast<double>(a.value[k]) * static_cast<double>(b.value[k]);
    return static_cast<float>(sum);
  }
  // The terms are added exactly as integer multiples of the quantum (17 or 33 terms below
  // 2^(kept_bits + 2) each: far inside int64, and the total converts back to double exactly).
  const double inverse_quantum = power_of_two(kept_bits - alignment);
  int64_t quanta = quanta_of(c, inverse_quantum);
  for (unsigned k = 0; k < count; ++k) {
    quanta += quanta_of(static_cast<double>(a.value[k]) * static_cast<double>(b.value[k]),
                        inverse_quantum);
  }
  const double sum = static_cast<double>(quanta) * power_of_two(alignment - kept_bits);
  return truncate_to_float(sum);
}

}  // namespace attnbench
