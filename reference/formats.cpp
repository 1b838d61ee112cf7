// Software fp16 / bf16 / fp8 conversions that reproduce the host code paths of CUDA 13's
// cuda_fp16.hpp, cuda_bf16.hpp and cuda_fp8.hpp bit for bit
// (tests/reference/test_formats_vs_cuda.cpp compares them exhaustively). The behaviours that
// differ between formats:
//   fp16, bf16  overflow rounds to +-inf; any NaN becomes the positive pattern 0x7fff.
//   e4m3, e5m2  saturate (__NV_SATFINITE): overflow and +-inf become +-max finite; any NaN
//               becomes 0x7f; the sign of zero and of underflow is kept.
//   decoding    bf16 is float's upper half, NaN payload and sign included; any fp16 or fp8 NaN
//               decodes to the positive float NaN 0x7fffffff (CUDA's fp8 decoders go through
//               fp16, whose decoder discards a NaN's sign and payload).
#include "reference/formats.h"

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

namespace attnbench {
namespace {

constexpr uint32_t kFloatSignBit = 0x80000000u;
constexpr uint32_t kFloatMagnitudeMask = 0x7fffffffu;
constexpr uint32_t kFloatInfBits = 0x7f800000u;
constexpr int kFloatMantissaBits = 23;
constexpr int kFloatExponentBias = 127;

constexpr uint32_t kHalfSignBit = 0x8000u;  // fp16 and bf16
constexpr uint32_t kHalfMagnitudeMask = 0x7fffu;
constexpr uint32_t kFp8SignBit = 0x80u;
constexpr uint32_t kFp8MagnitudeMask = 0x7fu;

constexpr uint16_t kFp16NanBits = 0x7fff;
constexpr uint16_t kBf16NanBits = 0x7fff;
constexpr uint8_t kFp8NanBits = 0x7f;

// A narrow binary format with an implicit leading bit and subnormals. fp16, e4m3 and e5m2 fit
// it; bf16 shares float's exponent range and is handled by truncating the float instead.
struct NarrowFormat {
  int exponent_bits;
  int mantissa_bits;
  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
};
constexpr NarrowFormat kFp16Format{5, 10};
constexpr NarrowFormat kE4m3Format{4, 3};
constexpr NarrowFormat kE5m2Format{5, 2};

// Largest finite and infinity patterns: fp16 overflows to inf, fp8 saturates to its largest.
constexpr uint32_t kFp16MaxFiniteBits = 0x7bff;
constexpr uint32_t kFp16InfBits = 0x7c00;
constexpr uint32_t kBf16MaxFiniteBits = 0x7f7f;
constexpr uint32_t kE4m3MaxFiniteBits = 0x7e;  // 0x7f is NaN: e4m3 has no infinity
constexpr uint32_t kE5m2MaxFiniteBits = 0x7b;
constexpr uint32_t kE5m2InfBits = 0x7c;

bool is_nan_bits(uint32_t bits) { return (bits & kFloatMagnitudeMask) > kFloatInfBits; }

// Shifts `significand` right by `shift` (>= 1) bits, rounding to nearest, ties to even.
uint32_t shift_right_round_even(uint32_t significand, int shift) {
  if (shift >= 32) return 0;  // far below half of the last kept bit
  const uint32_t kept = significand >> shift;
  const uint32_t dropped = significand & ((uint32_t{1} << shift) - 1);
  const uint32_t half = uint32_t{1} << (shift - 1);
  const bool round_up = dropped > half || (dropped == half && (kept & 1u) != 0);
  return kept + (round_up ? 1u : 0u);
}

// Encodes the magnitude of a non-NaN float (sign cleared) in `format`, rounding to nearest even.
// Results past the largest finite pattern mean overflow; the caller saturates or returns inf.
// Because the mantissa sits in the low bits and the exponent right above it, a rounding carry
// out of the mantissa moves to the next binade by itself.
uint32_t encode_magnitude(uint32_t magnitude, NarrowFormat format) {
  const int float_exponent = static_cast<int>(magnitude >> kFloatMantissaBits);
  // Float subnormals are far below half of the smallest subnormal of every NarrowFormat.
  if (float_exponent == 0) return 0;
  const int unbiased_exponent = float_exponent - kFloatExponentBias;
  const int min_normal_exponent = 1 - format.bias();
  const int dropped_bits = kFloatMantissaBits - format.mantissa_bits;
  if (unbiased_exponent >= min_normal_exponent) {
    const uint32_t rebias = static_cast<uint32_t>(kFloatExponentBias - format.bias())
                            << kFloatMantissaBits;
    return shift_right_round_even(magnitude - rebias, dropped_bits);
  }
  // Subnormal in the narrow format: the value is significand * 2^(unbiased_exponent - 23) and
  // the narrow unit is 2^(min_normal_exponent - mantissa_bits).
  const uint32_t significand =
      (magnitude & ((uint32_t{1} << kFloatMantissaBits) - 1)) | (uint32_t{1} << kFloatMantissaBits);
  return shift_right_round_even(significand,
                                dropped_bits + (min_normal_exponent - unbiased_exponent));
}

// Decodes a finite magnitude pattern of `format` (sign cleared) exactly.
float decode_finite_magnitude(uint32_t magnitude, NarrowFormat format) {
  const uint32_t exponent_field = magnitude >> format.mantissa_bits;
  const uint32_t mantissa = magnitude & ((uint32_t{1} << format.mantissa_bits) - 1);
  if (exponent_field == 0) {
    // Subnormal: mantissa units of 2^(1 - bias - mantissa_bits); exact in float.
    return std::ldexp(static_cast<float>(mantissa), 1 - format.bias() - format.mantissa_bits);
  }
  const uint32_t float_exponent =
      exponent_field + static_cast<uint32_t>(kFloatExponentBias - format.bias());
  return std::bit_cast<float>((float_exponent << kFloatMantissaBits) |
                              (mantissa << (kFloatMantissaBits - format.mantissa_bits)));
}

float with_sign(float magnitude, bool negative) { return negative ? -magnitude : magnitude; }

float canonical_nan() { return std::bit_cast<float>(formats_detail::kCanonicalNan); }

uint8_t float_to_fp8_bits(float value, NarrowFormat format, uint32_t max_finite_bits) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if (is_nan_bits(bits)) return kFp8NanBits;
  // +-inf lands here too: its encoding is past the largest finite one and saturates.
  uint32_t magnitude = encode_magnitude(bits & kFloatMagnitudeMask, format);
  if (magnitude > max_finite_bits) magnitude = max_finite_bits;
  const uint32_t sign = (bits & kFloatSignBit) != 0 ? kFp8SignBit : 0u;
  return static_cast<uint8_t>(sign | magnitude);
}

}  // namespace

uint16_t float_to_fp16_bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if (is_nan_bits(bits)) return kFp16NanBits;
  const uint32_t sign = (bits & kFloatSignBit) != 0 ? kHalfSignBit : 0u;
  uint32_t magnitude = encode_magnitude(bits & kFloatMagnitudeMask, kFp16Format);
  if (magnitude > kFp16MaxFiniteBits) magnitude = kFp16InfBits;
  return static_cast<uint16_t>(sign | magnitude);
}


uint16_t float_to_bf16_bits(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if (is_nan_bits(bits)) return kBf16NanBits;
  // bf16 is float's upper half: round the lower 16 bits away (a carry into the exponent is
  // the next binade, and past the largest finite value it is inf).
  constexpr int kDroppedBits = 16;
  const uint32_t sign = (bits & kFloatSignBit) >> kDroppedBits;
  return static_cast<uint16_t>(sign |
                               shift_right_round_even(bits & kFloatMagnitudeMask, kDroppedBits));
}

uint8_t float_to_e4m3_bits(float value) {
  return float_to_fp8_bits(value, kE4m3Format, kE4m3MaxFiniteBits);
}


uint8_t float_to_e5m2_bits(float value) {
  return float_to_fp8_bits(value, kE5m2Format, kE5m2MaxFiniteBits);
}

float e5m2_bits_to_float(uint8_t bits) {
  const uint32_t magnitude = bits & kFp8MagnitudeMask;
  const bool negative = (bits & kFp8SignBit) != 0;
  if (magnitude == kE5m2InfBits) return with_sign(std::numeric_limits<float>::infinity(), negative);
  if (magnitude > kE5m2InfBits) return canonical_nan();
  return with_sign(decode_finite_magnitude(magnitude, kE5m2Format), negative);
}

float round_to(DType dtype, float value) {
  switch (dtype) {
    case DType::f32:
      return value;
    case DType::f16:
      return fp16_bits_to_float(float_to_fp16_bits(value));
    case DType::bf16:
      return bf16_bits_to_float(float_to_bf16_bits(value));
    case DType::e4m3:
      return e4m3_bits_to_float(float_to_e4m3_bits(value));
    case DType::e5m2:
      return e5m2_bits_to_float(float_to_e5m2_bits(value));
  }
  return value;
}

float load_element(DType dtype, const void* data, int64_t index) {
  switch (dtype) {
    case DType::f32:
      return static_cast<const float*>(data)[index];
    case DType::f16:
      return fp16_bits_to_float(static_cast<const uint16_t*>(data)[index]);
    case DType::bf16:
      return bf16_bits_to_float(static_cast<const uint16_t*>(data)[index]);
    case DType::e4m3:
      return e4m3_bits_to_float(static_cast<const uint8_t*>(data)[index]);
    case DType::e5m2:
      return e5m2_bits_to_float(static_cast<const uint8_t*>(data)[index]);
  }
  return canonical_nan();
}

void store_element(DType dtype, void* data, int64_t index, float value) {
  switch (dtype) {
    case DType::f32:
      static_cast<float*>(data)[index] = value;
      return;
    case DType::f16:
      static_cast<uint16_t*>(data)[index] = float_to_fp16_bits(value);
      return;
    case DType::bf16:
      static_cast<uint16_t*>(data)[index] = float_to_bf16_bits(value);
      return;
    case DType::e4m3:
      static_cast<uint8_t*>(data)[index] = float_to_e4m3_bits(value);
      return;
    case DType::e5m2:
      static_cast<uint8_t*>(data)[index] = float_to_e5m2_bits(value);
      return;
  }
}

float max_finite(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return std::numeric_limits<float>::max();
    case DType::f16:
      return fp16_bits_to_float(kFp16MaxFiniteBits);
    case DType::bf16:
      return bf16_bits_to_float(kBf16MaxFiniteBits);
    case DType::e4m3:
      return e4m3_bits_to_float(kE4m3MaxFiniteBits);
    case DType::e5m2:
      return e5m2_bits_to_float(kE5m2MaxFiniteBits);
  }
  return 0;
}

}  // namespace attnbench
