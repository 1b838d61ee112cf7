// Software number formats, bit-exact with CUDA's conversions (cuda_fp16.h, cuda_bf16.h,
// cuda_fp8.h): float -> narrow rounds to nearest even; fp16/bf16 overflow to inf as CUDA's
// __float2half_rn / __float2bfloat16_rn do; fp8 conversions saturate to the largest finite
// value (CUDA's __NV_SATFINITE) and turn NaN into the format's NaN pattern.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "reference/dtype.h"

namespace attnbench {

uint16_t float_to_fp16_bits(float value);
inline float fp16_bits_to_float(uint16_t bits);
uint16_t float_to_bf16_bits(float value);
inline float bf16_bits_to_float(uint16_t bits);
uint8_t float_to_e4m3_bits(float value);  // saturating, NaN -> 0x7f
inline float e4m3_bits_to_float(uint8_t bits);
uint8_t float_to_e5m2_bits(float value);  // saturating, NaN -> 0x7f
float e5m2_bits_to_float(uint8_t bits);

// Round a float to the nearest value representable in `dtype` (identity for fp32).
float round_to(DType dtype, float value);

// Element `index` of a buffer stored in `dtype`, as float; and the inverse (rounding).
float load_element(DType dtype, const void* data, int64_t index);
void store_element(DType dtype, void* data, int64_t index, float value);

// Largest finite magnitude of the format (65504 for fp16, 448 for e4m3, ...).
float max_finite(DType dtype);

// A subnormal float as zero of its sign, others as they are: the flush-to-zero of the GPU's .ftz
// instructions and of atom.add.f32 on global memory (the emulated device's).
inline float flush_subnormal(float value) {
  return std::fpclassify(value) == FP_SUBNORMAL ? std::copysign(0.0f, value) : value;
}

// ---- the decoders, inline: the emulated tensor cores decode every operand of every product ----
// (out of line, fp16's and e4m3's were a sixth of an emulated forward's time, perf 2026-12-06).
// Widening is exact: an fp16, bf16 or e4m3 value is a float with its exponent rebiased and its
// significand shifted up; a subnormal is its significand times the format's smallest quantum. As
// CUDA's host decoders: NaN is float's one positive quiet NaN for fp16 and e4m3, and bf16 keeps
// its payload and sign (tests/reference/test_formats*.cpp check every pattern).

namespace formats_detail {
// The NaN CUDA's host decoders return (cuda_fp16.hpp, cuda_fp8.hpp): all ones but the sign.
inline constexpr uint32_t kCanonicalNan = 0x7fffffffu;
inline float with_sign(float magnitude, bool negative) { return negative ? -magnitude : magnitude; }
}  // namespace formats_detail

inline float fp16_bits_to_float(uint16_t bits) {
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t significand = bits & 0x3ffu;
  const uint32_t sign = uint32_t{bits & 0x8000u} << 16;
  if (exponent == 0x1fu) {
    return significand == 0 ? std::bit_cast<float>(sign | 0x7f800000u)
                            : std::bit_cast<float>(formats_detail::kCanonicalNan);
  }
  if (exponent != 0) {  // rebias 15 -> 127, significand 10 -> 23 bits
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (significand << 13));
  }
  return formats_detail::with_sign(static_cast<float>(significand) * 0x1p-24f, sign != 0);
}

inline float bf16_bits_to_float(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }

inline float e4m3_bits_to_float(uint8_t bits) {
  const uint32_t exponent = (bits >> 3) & 0xfu;
  const uint32_t significand = bits & 0x7u;
  const bool negative = (bits & 0x80u) != 0;
  if (exponent == 0xfu && significand == 0x7u) {  // e4m3 has no infinity: S.1111.111 is NaN
    return std::bit_cast<float>(formats_detail::kCanonicalNan);
  }
  if (exponent != 0) {  // rebias 7 -> 127, significand 3 -> 23 bits
    return std::bit_cast<float>((negative ? 0x80000000u : 0u) | ((exponent + 120u) << 23) |
                                (significand << 20));
  }
  return formats_detail::with_sign(static_cast<float>(significand) * 0x1p-9f, negative);
}

}  // namespace attnbench
