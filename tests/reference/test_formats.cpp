// Software number formats (reference/formats.h) and dtype names (reference/dtype.h).
// Decoders are checked exhaustively against an independent formula; encoders against known bit
// patterns, by round trip of every finite pattern, and on random floats (within half an ulp,
// ties to even). Bit-exactness with CUDA's own code is tests/reference/test_formats_vs_cuda.cpp.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "reference/dtype.h"
#include "reference/formats.h"

namespace attnbench {
namespace {

constexpr uint32_t kCanonicalFloatNan = 0x7fffffffu;
constexpr int kRandomSamplesPerFormat = 1 << 20;

// What distinguishes the formats, written from their specifications (IEEE 754 binary16,
// bfloat16, and the OCP FP8 paper's E4M3 / E5M2), not from reference/formats.cpp.
struct FormatSpec {
  DType dtype;
  int exponent_bits;
  int mantissa_bits;
  bool ieee_specials;  // all-ones exponent = inf / NaN; else (e4m3) only S.1111.111 is NaN
  int bits() const { return 1 + exponent_bits + mantissa_bits; }
  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
};
constexpr FormatSpec kFp16{DType::f16, 5, 10, true};
constexpr FormatSpec kBf16{DType::bf16, 8, 7, true};
constexpr FormatSpec kE4m3{DType::e4m3, 4, 3, false};
constexpr FormatSpec kE5m2{DType::e5m2, 5, 2, true};
constexpr FormatSpec kAllFormats[] = {kFp16, kBf16, kE4m3, kE5m2};

uint32_t encode(const FormatSpec& format, float value) {
  switch (format.dtype) {
    case DType::f16:
      return float_to_fp16_bits(value);
    case DType::bf16:
      return float_to_bf16_bits(value);
    case DType::e4m3:
      return float_to_e4m3_bits(value);
    case DType::e5m2:
      return float_to_e5m2_bits(value);
    case DType::f32:
      break;
  }
  ADD_FAILURE() << "no encoder for " << dtype_name(format.dtype);
  return 0;
}

float decode(const FormatSpec& format, uint32_t bits) {
  switch (format.dtype) {
    case DType::f16:
      return fp16_bits_to_float(static_cast<uint16_t>(bits));
    case DType::bf16:
      return bf16_bits_to_float(static_cast<uint16_t>(bits));
    case DType::e4m3:
      return e4m3_bits_to_float(static_cast<uint8_t>(bits));
    case DType::e5m2:
      return e5m2_bits_to_float(static_cast<uint8_t>(bits));
    case DType::f32:
      break;
  }
  ADD_FAILURE() << "no decoder for " << dtype_name(format.dtype);
  return 0;
}

// (-1)^s * 2^(e - bias) * (1 + m / 2^M), or 2^(1 - bias) * (m / 2^M) when e == 0.
double formula_decode(const FormatSpec& format, uint32_t bits) {
  const uint32_t mantissa = bits & ((1u << format.mantissa_bits) - 1);
  const uint32_t exponent = (bits >> format.mantissa_bits) & ((1u << format.exponent_bits) - 1);
  const bool negative = (bits >> (format.bits() - 1)) & 1u;
  const uint32_t max_exponent = (1u << format.exponent_bits) - 1;
  const uint32_t max_mantissa = (1u << format.mantissa_bits) - 1;
  const double sign = negative ? -1.0 : 1.0;
  if (format.ieee_specials && exponent == max_exponent) {
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  }
  if (!format.ieee_specials && exponent == max_exponent && mantissa == max_mantissa) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  const double fraction = mantissa / std::pow(2.0, format.mantissa_bits);
  if (exponent == 0) return sign * std::pow(2.0, 1 - format.bias()) * fraction;
  return sign * std::pow(2.0, static_cast<int>(exponent) - format.bias()) * (1 + fraction);
}

bool is_finite_pattern(const FormatSpec& format, uint32_t bits) {
  return std::isfinite(formula_decode(format, bits));
}

// Spacing of the format's values around |value| (finite, within range): 2^(E - M) where E is
// the binade's exponent, never below the subnormal spacing 2^(1 - bias - M).
double ulp_at(const FormatSpec& format, double value) {
  int exponent = 0;
  std::frexp(value, &exponent);  // value = f * 2^exponent, f in [0.5, 1)
  const int binade = std::max(exponent - 1, 1 - format.bias());
  return std::ldexp(1.0, binade - format.mantissa_bits);
}

TEST(Formats, DecodesEveryPatternLikeTheFormula) {
  for (const FormatSpec& format : kAllFormats) {
    SCOPED_TRACE(std::string(dtype_name(format.dtype)));
    for (uint32_t bits = 0; bits < (1u << format.bits()); ++bits) {
      const double expected = formula_decode(format, bits);
      const float decoded = decode(format, bits);
      if (std::isnan(expected)) {
        // As CUDA's host decoders: bf16 widens to float bit for bit (payload and sign kept);
        // fp16 and fp8 return the one positive NaN whatever the payload or sign.
        const uint32_t expected_nan = format.dtype == DType::bf16 ? bits << 16 : kCanonicalFloatNan;
        ASSERT_EQ(std::bit_cast<uint32_t>(decoded), expected_nan) << "bits " << bits;
        continue;
      }
      ASSERT_EQ(static_cast<double>(decoded), expected) << "bits " << bits;
      ASSERT_EQ(std::signbit(decoded), std::signbit(expected)) << "bits " << bits;
    }
  }
}

TEST(Formats, RoundTripsEveryFinitePattern) {
  for (const FormatSpec& format : kAllFormats) {
    SCOPED_TRACE(std::string(dtype_name(format.dtype)));
    int64_t finite_patterns = 0;
    for (uint32_t bits = 0; bits < (1u << format.bits()); ++bits) {
      if (!is_finite_pattern(format, bits)) continue;
      ++finite_patterns;
      ASSERT_EQ(encode(format, decode(format, bits)), bits) << "bits " << bits;
    }
    // Every pattern but the infinities and NaNs: 2 * (2^(bits-1) - specials per sign).
    const int64_t specials_per_sign = format.ieee_specials ? (1 << format.mantissa_bits) : 1;
    EXPECT_EQ(finite_patterns, 2 * ((int64_t{1} << (format.bits() - 1)) - specials_per_sign));
  }
}

struct KnownEncoding {
  float value;
  uint32_t bits;
  const char* what;
};

void expect_encodings(const FormatSpec& format, const std::vector<KnownEncoding>& cases) {
  for (const KnownEncoding& known : cases) {
    EXPECT_EQ(encode(format, known.value), known.bits)
        << dtype_name(format.dtype) << " " << known.what << " (" << known.value << ")";
  }
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// The float right after / before `value`.
float next_up(float value) { return std::nextafter(value, kInf); }
float next_down(float value) { return std::nextafter(value, -kInf); }

TEST(Formats, EncodesFp16KnownPatterns) {
  const float max_finite_fp16 = 65504;  // (2 - 2^-10) * 2^15
  const float first_overflow = 65520;   // max + half an ulp (ulp 32): ties away from odd 0x7bff
  const float min_subnormal = std::ldexp(1.0f, -24);
  expect_encodings(kFp16, {
                              {1.0f, 0x3c00, "one"},
                              {-2.0f, 0xc000, "minus two"},
                              {max_finite_fp16, 0x7bff, "max finite"},
                              {next_down(first_overflow), 0x7bff, "just below overflow"},
                              {first_overflow, 0x7c00, "first overflowing value"},
                              {-first_overflow, 0xfc00, "first negative overflow"},
                              {1e30f, 0x7c00, "far overflow"},
                              {kInf, 0x7c00, "+inf"},
                              {-kInf, 0xfc00, "-inf"},
                              {kNan, 0x7fff, "NaN"},
                              {-kNan, 0x7fff, "-NaN loses its sign"},
                              {-0.0f, 0x8000, "-0"},
                              {0.0f, 0x0000, "+0"},
                              {min_subnormal, 0x0001, "min subnormal"},
                              {min_subnormal / 2, 0x0000, "half min subnormal ties to 0"},
                              {next_up(min_subnormal / 2), 0x0001, "above half rounds up"},
                              {-min_subnormal / 4, 0x8000, "underflow keeps sign"},
                              {3 * min_subnormal / 2, 0x0002, "1.5 subnormal ties up to even"},
                              {std::ldexp(1.0f, -14), 0x0400, "min normal"},
                              {1 + std::ldexp(1.0f, -11), 0x3c00, "tie rounds down to even"},
                              {1 + 3 * std::ldexp(1.0f, -11), 0x3c02, "tie rounds up to even"},
                              {2049.0f, 0x6800, "2049 ties to 2048"},
                              {2051.0f, 0x6802, "2051 ties to 2052"},
                          });
}

TEST(Formats, EncodesBf16KnownPatterns) {
  const float max_finite_bf16 = std::bit_cast<float>(0x7f7f0000u);
  const float first_overflow = std::bit_cast<float>(0x7f7f8000u);  // max + half an ulp
  const float min_subnormal = std::bit_cast<float>(0x00010000u);   // 2^-133
  expect_encodings(kBf16, {
                              {1.0f, 0x3f80, "one"},
                              {-2.0f, 0xc000, "minus two"},
                              {max_finite_bf16, 0x7f7f, "max finite"},
                              {next_down(first_overflow), 0x7f7f, "just below overflow"},
                              {first_overflow, 0x7f80, "first overflowing value"},
                              {std::numeric_limits<float>::max(), 0x7f80, "FLT_MAX overflows"},
                              {kInf, 0x7f80, "+inf"},
                              {-kInf, 0xff80, "-inf"},
                              {kNan, 0x7fff, "NaN"},
                              {-kNan, 0x7fff, "-NaN loses its sign"},
                              {-0.0f, 0x8000, "-0"},
                              {min_subnormal, 0x0001, "min subnormal"},
                              {min_subnormal / 2, 0x0000, "half min subnormal ties to 0"},
                              {next_up(min_subnormal / 2), 0x0001, "above half rounds up"},
                              {1 + std::ldexp(1.0f, -8), 0x3f80, "tie rounds down to even"},
                              {1 + 3 * std::ldexp(1.0f, -8), 0x3f82, "tie rounds up to even"},
                          });
}

TEST(Formats, EncodesE4m3KnownPatterns) {
  const float max_finite_e4m3 = 448;  // 1.75 * 2^8; S.1111.111 is NaN, so no 480
  const float tie_at_top = 464;       // between 448 (mantissa 110, even) and 480
  const float min_subnormal = std::ldexp(1.0f, -9);
  expect_encodings(kE4m3, {
                              {1.0f, 0x38, "one"},
                              {-2.0f, 0xc0, "minus two"},
                              {max_finite_e4m3, 0x7e, "max finite"},
                              {tie_at_top, 0x7e, "464 ties down to 448"},
                              {next_up(tie_at_top), 0x7e, "first overflowing value saturates"},
                              {480.0f, 0x7e, "480 saturates, never NaN"},
                              {-1e6f, 0xfe, "negative overflow saturates"},
                              {kInf, 0x7e, "+inf saturates"},
                              {-kInf, 0xfe, "-inf saturates"},
                              {kNan, 0x7f, "NaN"},
                              {-kNan, 0x7f, "-NaN loses its sign"},
                              {-0.0f, 0x80, "-0"},
                              {min_subnormal, 0x01, "min subnormal"},
                              {min_subnormal / 2, 0x00, "half min subnormal ties to 0"},
                              {-min_subnormal / 2, 0x80, "negative underflow keeps sign"},
                              {next_up(min_subnormal / 2), 0x01, "above half rounds up"},
                              {3 * min_subnormal / 2, 0x02, "1.5 subnormal ties up to even"},
                              {7 * min_subnormal, 0x07, "max subnormal"},
                              {std::ldexp(1.0f, -6), 0x08, "min normal"},
                              {1.0625f, 0x38, "1 + 2^-4 ties down to even"},
                              {1.1875f, 0x3a, "1 + 3 * 2^-4 ties up to even"},
                          });
}

TEST(Formats, EncodesE5m2KnownPatterns) {
  const float max_finite_e5m2 = 57344;  // 1.75 * 2^15
  const float first_overflow = 61440;   // max + half an ulp
  const float min_subnormal = std::ldexp(1.0f, -16);
  expect_encodings(kE5m2, {
                              {1.0f, 0x3c, "one"},
                              {-2.0f, 0xc0, "minus two"},
                              {max_finite_e5m2, 0x7b, "max finite"},
                              {next_down(first_overflow), 0x7b, "just below overflow"},
                              {first_overflow, 0x7b, "first overflowing value saturates"},
                              {-1e9f, 0xfb, "negative overflow saturates"},
                              {kInf, 0x7b, "+inf saturates"},
                              {-kInf, 0xfb, "-inf saturates"},
                              {kNan, 0x7f, "NaN"},
                              {-kNan, 0x7f, "-NaN loses its sign"},
                              {-0.0f, 0x80, "-0"},
                              {min_subnormal, 0x01, "min subnormal"},
                              {min_subnormal / 2, 0x00, "half min subnormal ties to 0"},
                              {next_up(min_subnormal / 2), 0x01, "above half rounds up"},
                              {std::ldexp(1.0f, -14), 0x04, "min normal"},
                              {1.125f, 0x3c, "1 + 2^-3 ties down to even"},
                              {1.375f, 0x3e, "1 + 3 * 2^-3 ties up to even"},
                          });
}

// Random floats over each format's finite range, uniform in the exponent so every binade and
// the subnormals get samples: the encoding must be within half an ulp, ties to the even pattern.
TEST(Formats, RandomFloatsRoundToNearestEven) {
  const auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const FormatSpec& format : kAllFormats) {
    SCOPED_TRACE(std::string(dtype_name(format.dtype)));
    const double max_value = max_finite(format.dtype);
    const int min_exponent = 1 - format.bias() - format.mantissa_bits - 2;  // below subnormals
    const int max_exponent = static_cast<int>(std::floor(std::log2(max_value)));
    std::uniform_int_distribution<int> exponent_dist(min_exponent, max_exponent);
    std::uniform_real_distribution<double> fraction_dist(1.0, 2.0);
    std::bernoulli_distribution negative_dist(0.5);
    for (int i = 0; i < kRandomSamplesPerFormat; ++i) {
      const double magnitude = std::ldexp(fraction_dist(rng), exponent_dist(rng));
      const float value =
          static_cast<float>(std::min(magnitude, max_value)) * (negative_dist(rng) ? -1 : 1);
      const uint32_t bits = encode(format, value);
      const double rounded = decode(format, bits);
      const double error = std::abs(rounded - value);
      const double half_ulp = ulp_at(format, std::abs(value)) / 2;
      ASSERT_LE(error, half_ulp) << "value " << value << " -> bits " << bits;
      if (error == half_ulp) {
        ASSERT_EQ(bits & 1u, 0u) << "tie not to even: " << value;
      }
      ASSERT_EQ(std::signbit(rounded), std::signbit(value)) << "value " << value;
    }
  }
}

TEST(Formats, RoundToMatchesEncodeDecode) {
  const auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 10.0f);
  for (int i = 0; i < 10000; ++i) {
    const float value = normal(rng);
    EXPECT_EQ(round_to(DType::f32, value), value);
    for (const FormatSpec& format : kAllFormats) {
      EXPECT_EQ(round_to(format.dtype, value), decode(format, encode(format, value)))
          << dtype_name(format.dtype) << " " << value;
    }
  }
  // The rounding is real: 1 + 2^-12 is not a bf16, fp16 or fp8 value.
  const float between = 1 + std::ldexp(1.0f, -12);
  for (const FormatSpec& format : kAllFormats) EXPECT_EQ(round_to(format.dtype, between), 1.0f);
}

TEST(Formats, StoreAndLoadElementsInEveryDtype) {
  const auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  constexpr int64_t kElements = 257;
  for (DType dtype : {DType::f32, DType::f16, DType::bf16, DType::e4m3, DType::e5m2}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    std::vector<unsigned char> buffer(kElements * dtype_size(dtype));
    std::vector<float> values(kElements);
    for (int64_t i = 0; i < kElements; ++i) {
      values[i] = normal(rng);
      store_element(dtype, buffer.data(), i, values[i]);
    }
    for (int64_t i = 0; i < kElements; ++i) {
      ASSERT_EQ(load_element(dtype, buffer.data(), i), round_to(dtype, values[i])) << i;
    }
  }
  // Elements are packed at dtype_size: storing element 1 of an fp16 buffer writes bytes 2..3.
  std::vector<uint16_t> halves(3, 0);
  store_element(DType::f16, halves.data(), 1, 1.0f);
  EXPECT_EQ(halves[0], 0u);
  EXPECT_EQ(halves[1], 0x3c00u);
  EXPECT_EQ(halves[2], 0u);
}

TEST(Formats, MaxFinite) {
  EXPECT_EQ(max_finite(DType::f32), std::numeric_limits<float>::max());
  EXPECT_EQ(max_finite(DType::f16), 65504.0f);
  EXPECT_EQ(max_finite(DType::bf16), std::bit_cast<float>(0x7f7f0000u));
  EXPECT_EQ(max_finite(DType::e4m3), 448.0f);
  EXPECT_EQ(max_finite(DType::e5m2), 57344.0f);
}

TEST(DTypes, NamesParseBackAndAliasesResolve) {
  for (DType dtype : {DType::f32, DType::f16, DType::bf16, DType::e4m3, DType::e5m2}) {
    EXPECT_EQ(parse_dtype(dtype_name(dtype)), dtype) << dtype_name(dtype);
  }
  EXPECT_EQ(dtype_name(DType::f32), "fp32");
  EXPECT_EQ(dtype_name(DType::e4m3), "e4m3");
  EXPECT_EQ(parse_dtype("fp8"), DType::e4m3);
  EXPECT_EQ(parse_dtype("float32"), DType::f32);
  EXPECT_EQ(parse_dtype("float16"), DType::f16);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_EQ(parse_dtype("fp9"), std::nullopt);
  EXPECT_EQ(parse_dtype(""), std::nullopt);
  EXPECT_EQ(parse_dtype("FP16"), std::nullopt);
  EXPECT_EQ(accepted_dtype_names(), "fp32, fp16, bf16, e4m3, e5m2");
}

}  // namespace
}  // namespace attnbench
