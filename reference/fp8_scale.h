// The FP8 recipe's step 2 as one rule for the host and the device (reference/fp8_recipe.h): a
// group's descale from its amax, the largest |value| of the group after step 1. The recipe's
// quantize_inputs and cuda.flash3_fp8's quantize passes both call it, so their bits agree.
#pragma once

#include <cstdint>

#include "reference/mask.h"  // ATTNBENCH_HOST_DEVICE

namespace attnbench {

// e4m3's largest finite value (formats.h's max_finite(DType::e4m3); test_fp8_recipe holds them
// equal).
constexpr float kE4m3Largest = 448.0f;

// Where (batch b, head h) of a tensor with `heads` heads keeps its descale in a per-head array
// (fp8_scaling per_head: params.h's *_head_descales, the reference's views, the recipe's groups).
ATTNBENCH_HOST_DEVICE constexpr int64_t head_descale_index(int64_t b, int64_t h, int64_t heads) {
  return b * heads + h;
}

// amax / 448, so the group's largest value lands on e4m3's largest; 1 for an all-zero group.
ATTNBENCH_HOST_DEVICE inline float fp8_descale(float amax) {
  return amax > 0.0f ? amax / kE4m3Largest : 1.0f;
}

// The e4m3 output at V's scale (Fp8Recipe::e4m3_output): out * output_scale is stored, with
// output_scale = 2^-1 / descale_v. |out| <= amax of V, except that P's rounding can lift it a few
// per cent past it: the 2^-1 keeps the stored value under e4m3's 448 at the cost of one binade.
ATTNBENCH_HOST_DEVICE inline float fp8_output_scale(float v_descale) { return 0.5f / v_descale; }

}  // namespace attnbench
