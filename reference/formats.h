// Software number formats, bit-exact with CUDA's conversions (cuda_fp16.h, cuda_bf16.h,
// cuda_fp8.h): float -> narrow rounds to nearest even; fp16/bf16 overflow to inf as CUDA's
// __float2half_rn / __float2bfloat16_rn do; fp8 conversions saturate to the largest finite
// value (CUDA's __NV_SATFINITE) and turn NaN into the format's NaN pattern.
#pragma once

#include <cstdint>

#include "reference/dtype.h"

namespace attnbench {

uint16_t float_to_fp16_bits(float value);
float fp16_bits_to_float(uint16_t bits);
uint16_t float_to_bf16_bits(float value);
float bf16_bits_to_float(uint16_t bits);
uint8_t float_to_e4m3_bits(float value);  // saturating, NaN -> 0x7f
float e4m3_bits_to_float(uint8_t bits);
uint8_t float_to_e5m2_bits(float value);  // saturating, NaN -> 0x7f
float e5m2_bits_to_float(uint8_t bits);

// Round a float to the nearest value representable in `dtype` (identity for fp32).
float round_to(DType dtype, float value);

// Element `index` of a buffer stored in `dtype`, as float; and the inverse (rounding).
float load_element(DType dtype, const void* data, int64_t index);
void store_element(DType dtype, void* data, int64_t index, float value);

// Largest finite magnitude of the format (65504 for fp16, 448 for e4m3, ...).
float max_finite(DType dtype);

}  // namespace attnbench
