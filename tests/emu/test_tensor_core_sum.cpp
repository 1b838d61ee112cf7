// reference/tensor_core_sum.h: the tensor cores' fp32 accumulation as an H200 gave it. The
// recorded vectors are mma.sync outputs from the first GPU runs' PtxConformance data
// (2026-12-04), chosen where rounding the exact sum once to nearest gives other bits: a model that
// rounds, keeps another number of bits, or aligns to the products' true exponents fails them.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "reference/formats.h"
#include "reference/tensor_core_sum.h"

namespace attnbench {
namespace {

struct Recorded {
  bool bf16;
  uint16_t a[16];  // one row of A
  uint16_t b[16];  // one column of B
  uint32_t c;      // fp32 bits
  uint32_t d;      // the H200's fp32 bits
};

// clang-format off
const Recorded kRecorded[] = {
    {true, {0x4380, 0xc380, 0x4380, 0xc380, 0x4380, 0xc380, 0x4380, 0xc380, 0x4380, 0xc380, 0x4380, 0xc380, 0x4380, 0xc380, 0x4380, 0xc380},
     {0x4380, 0xc380, 0x4380, 0xc380, 0x4380, 0xc380, 0x4380, 0xc380, 0xc380, 0x4380, 0xc380, 0x4380, 0xc380, 0x4380, 0xc380, 0x4380}, 0x3b400000, 0x3b000000},
    {true, {0x0, 0x4080, 0x4000, 0xc000, 0x4000, 0xbf80, 0xc080, 0x4080, 0xc080, 0x0, 0x4000, 0xc080, 0xbf80, 0x4040, 0x4080, 0xbf80},
     {0x0, 0x4000, 0x4040, 0x4080, 0xc040, 0x4040, 0x4000, 0xc040, 0x4080, 0xc000, 0x4000, 0xbf80, 0xc080, 0xc000, 0x4080, 0x4040}, 0x3f674810, 0xc198c5bf},
    {true, {0xbe38, 0xbeb0, 0xbe27, 0xbcd3, 0x3e1c, 0xbe83, 0x3ed5, 0x3eeb, 0xbe4b, 0xbed2, 0xbbf5, 0x3dc8, 0x3e24, 0xbd51, 0xbdae, 0x3d6b},
     {0xbe52, 0xbdf5, 0xbe11, 0x3e55, 0x3d2d, 0x3e0b, 0x3e21, 0x3ddf, 0x3dd1, 0xbdc0, 0x3e7b, 0x3e31, 0xbebb, 0x3df8, 0xbccf, 0xbf16}, 0x47000000, 0x4700001e},
    {true, {0xbf31, 0xbf15, 0x400b, 0xbfab, 0xbe14, 0xbe2b, 0xbf08, 0x3c1d, 0xbf9a, 0x3fd0, 0x3ee1, 0xbf08, 0x3e07, 0xbf6d, 0x403c, 0xbfaf},
     {0x3e07, 0xbffe, 0x3ea5, 0xbfaa, 0x3eea, 0x3ebb, 0x3e7b, 0xbf06, 0xbf80, 0x3fa2, 0x3f4f, 0xbe3f, 0xbf90, 0x3eb4, 0x3f9d, 0x3e2f}, 0x3e0eba8b, 0x41206610},
    {false, {0x0, 0xc400, 0x0, 0xc400, 0xc200, 0xbc00, 0xc000, 0xc400, 0xc400, 0x4400, 0xc200, 0xbc00, 0x3c00, 0x0, 0xbc00, 0x4400},
     {0x4400, 0x4400, 0xc000, 0xc400, 0xbc00, 0x4200, 0xc400, 0x3c00, 0x4000, 0x0, 0xc400, 0x3c00, 0xc000, 0xc200, 0x4000, 0x0}, 0xbff6ceba, 0x3f893148},
    {false, {0xc000, 0xc000, 0x0, 0x4000, 0x0, 0x3c00, 0xc200, 0x3c00, 0x4400, 0x4000, 0x4400, 0x0, 0x3c00, 0x4400, 0x3c00, 0x4200},
     {0x4200, 0x4200, 0xbc00, 0x4000, 0xc200, 0xbc00, 0xc400, 0xc000, 0x4400, 0x3c00, 0x0, 0x3c00, 0xc200, 0x0, 0xc200, 0xbc00}, 0x3f4bcece, 0x412cbcec},
    {false, {0xbc9e, 0xb71f, 0xbe5b, 0xc36a, 0x3940, 0xb4d7, 0x39cc, 0x3cb5, 0xb859, 0x2d07, 0x30a8, 0xbdbc, 0x3c88, 0xbb8d, 0xbdd4, 0xb7c9},
     {0xb260, 0xbbe8, 0x2eac, 0xb4ce, 0x2984, 0x3e4a, 0xa87d, 0x3e44, 0xbd08, 0xbc20, 0x40bc, 0xb8c2, 0xbb5e, 0xbf47, 0x383e, 0x36f1}, 0x4001778c, 0x40d005bb},
    {false, {0x3b78, 0x384a, 0x35ea, 0xbb06, 0x4412, 0x4429, 0x3a79, 0x3d31, 0xbd5d, 0xa874, 0xbc98, 0x39df, 0x3dbb, 0xbabc, 0x425f, 0x38ef},
     {0xb44e, 0xb27b, 0x44c8, 0x3eaf, 0xc1f5, 0xbcc8, 0x34cf, 0xc2c4, 0xbe0f, 0xbade, 0x33e8, 0x3fc4, 0x35e6, 0xb8b5, 0xb8ae, 0x42a2}, 0x43000000, 0x42de3558},
};
// clang-format on

float float_of(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t bits_of(float value) { return std::bit_cast<uint32_t>(value); }

TEST(TensorCoreSum, GivesTheBitsAnH200GaveWhereRoundingOnceDoesNot) {
  for (const Recorded& r : kRecorded) {
    float a[16], b[16];
    double exact = float_of(r.c);
    for (int k = 0; k < 16; ++k) {
      a[k] = r.bf16 ? bf16_bits_to_float(r.a[k]) : fp16_bits_to_float(r.a[k]);
      b[k] = r.bf16 ? bf16_bits_to_float(r.b[k]) : fp16_bits_to_float(r.b[k]);
      exact += static_cast<double>(a[k]) * b[k];
    }
    EXPECT_NE(bits_of(static_cast<float>(exact)), r.d) << "not a distinguishing vector";
    EXPECT_EQ(bits_of(tensor_core_sum(float_of(r.c), a, b, 16)), r.d)
        << "c " << float_of(r.c) << ": expected " << float_of(r.d);
  }
}

// On fresh random inputs: truncation never moves a sum of non-negative terms up, and moves it
// down by less than the 17 terms' truncation (2^-25 of the alignment each) and one fp32 step.
TEST(TensorCoreSum, TruncatesNonNegativeSumsDownByLessThanItsQuanta) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> magnitude(0.0f, 4.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  for (int trial = 0; trial < 2000; ++trial) {
    float a[16], b[16];
    int alignment = -1000;
    double exact = 0;
    const float c = std::ldexp(magnitude(rng), exponent(rng));
    for (int k = 0; k < 16; ++k) {
      a[k] = bf16_bits_to_float(float_to_bf16_bits(std::ldexp(magnitude(rng), exponent(rng))));
      b[k] = bf16_bits_to_float(float_to_bf16_bits(magnitude(rng)));
      exact += static_cast<double>(a[k]) * b[k];
      if (a[k] != 0 && b[k] != 0) alignment = std::max(alignment, std::ilogb(a[k]) + std::ilogb(b[k]));
    }
    exact += c;
    alignment = std::max(alignment, std::ilogb(c));
    const double got = tensor_core_sum(c, a, b, 16);
    EXPECT_LE(got, exact);
    const double allowed = 17 * std::ldexp(1.0, alignment - 25) + std::ldexp(exact, -23);
    EXPECT_GE(got, exact - allowed) << "trial " << trial;
  }
}

// The FP8 model (kFp8TensorCoreBits, not yet fitted) keeps 13 bits below the alignment exponent
// where the fp16/bf16 one keeps 25: a term 2^-14 of the largest is lost, 2^-13 kept.
TEST(TensorCoreSum, TheFp8ModelKeepsThirteenBitsBelowTheAlignment) {
  const float one[2] = {1.0f, 1.0f};
  const float small[2] = {1.0f, 0x1p-14f};
  const float kept[2] = {1.0f, 0x1p-13f};
  EXPECT_EQ(tensor_core_sum(0.0f, small, one, 2, 1, kFp8TensorCoreBits), 1.0f);
  EXPECT_EQ(tensor_core_sum(0.0f, kept, one, 2, 1, kFp8TensorCoreBits), 1.0f + 0x1p-13f);
  EXPECT_EQ(tensor_core_sum(0.0f, small, one, 2), 1.0f + 0x1p-14f);  // fp16/bf16: kept
  // Negative terms truncate toward zero too: -2^-14 - 2^-15 below 1 is lost entirely.
  const float negative[3] = {1.0f, -0x1p-14f, -0x1p-15f};
  const float ones[3] = {1.0f, 1.0f, 1.0f};
  EXPECT_EQ(tensor_core_sum(0.0f, negative, ones, 3, 1, kFp8TensorCoreBits), 1.0f);
}

}  // namespace
}  // namespace attnbench
