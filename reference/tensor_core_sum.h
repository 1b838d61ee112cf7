// How Hopper's tensor cores add up one k-step of 16 products for fp16/bf16 inputs with fp32
// accumulation (mma.sync m16n8k16 and wgmma m64nNk16): the model every emulated matrix
// instruction uses, so that the emulated device gives the hardware's bits, and the FP8 recipe's
// Q K^T and P V sums use for a kernel on the FP8 tensor cores (reference/fp8_recipe.h, steps 3
// and 4).
//
// Fitted to, and matching bit for bit, 152,064 mma.sync outputs (every finite one of the first 600
// cases of each format) of PtxConformance's inputs (cancellations, exponent gaps, subnormals,
// random) run on an H200 (2026-12-04, ci/gpu-runs/); the next run matched all 1,024,000 mma.sync
// and 3,670,016 wgmma outputs with it:
//   1. every product a_k b_k is exact;
//   2. the alignment exponent is the largest of the products' *nominal* exponents
//      ilogb(a_k) + ilogb(b_k) (the product of the significands, in [1, 4), is not normalized
//      first) and of ilogb(c);
//   3. each product and C are truncated toward zero to a multiple of 2^(that exponent - 25);
//   4. the 17 truncated terms are added exactly, and the sum truncated toward zero to fp32.
// Rounding once to nearest (the emulator's first model) disagreed in the last bit on 23-33 % of
// outputs. Non-finite inputs take IEEE arithmetic (NaN and infinities propagate).
#pragma once

namespace attnbench {

// The quantum of step 3 is 2^(alignment - kept_bits): 25 for fp16/bf16 inputs (fitted, above).
constexpr int kHalfTensorCoreBits = 25;
// FP8 (e4m3) inputs, wgmma m64nNk32: NOT fitted to an H200. Hopper's FP8 tensor cores keep
// "around 14 bits" of a sum (DeepSeek-V3's report, section 3.3.2); this model takes the same
// steps with 32 products per k-step and a quantum of 2^(alignment - 13), until a GPU run of
// PtxConformance measures it. The checker's kFp8ScoreRelativeError covers a GPU whose sums keep
// more or fewer bits than this (tests/measure/test_checker_fp8.cpp).
constexpr int kFp8TensorCoreBits = 13;
// Products one e4m3 k-step adds (wgmma m64nNk32).
constexpr int kFp8MmaDepth = 32;

// c + sum_k a[k] * b[k * b_stride], k < count (16 for one fp16/bf16 k-step, 32 for e4m3), as the
// tensor cores give it.
float tensor_core_sum(float c, const float* a, const float* b, unsigned count,
                      unsigned b_stride = 1, int kept_bits = kHalfTensorCoreBits);

// One operand vector of a k-step's products with what every sum it enters needs of it, found
// once: an emulated wgmma's A row enters n / 4 of a thread's sums, its B column two.
struct TensorCoreOperand {
  static constexpr int kZeroExponent = -(1 << 20);  // a zero's: no product with it aligns a sum
  float value[kFp8MmaDepth];
  int exponent[kFp8MmaDepth];  // ilogb of each value, kZeroExponent for a zero
  unsigned count;
  bool finite;  // no NaN or infinity among the values
};
TensorCoreOperand tensor_core_operand(const float* values, unsigned count, unsigned stride = 1);

// The same sum from operands prepared above (a.count == b.count).
float tensor_core_sum(float c, const TensorCoreOperand& a, const TensorCoreOperand& b,
                      int kept_bits = kHalfTensorCoreBits);

}  // namespace attnbench
