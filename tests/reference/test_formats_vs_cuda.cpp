// Our software formats against CUDA's own conversion code: cuda_fp16.h, cuda_bf16.h and
// cuda_fp8.h compiled by the host compiler, which takes their host code paths (the ones a GPU
// kernel's conversions are specified to match). Encoders: every interesting value of every
// format (each representable value, each rounding midpoint and its float neighbours, zeros,
// infinities, NaNs) plus a stride over all 2^32 float patterns; decoders: every pattern.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "reference/formats.h"

namespace attnbench {
namespace {

// Odd, so the sampled patterns cycle through every residue of the low bits (the rounding
// bits); 2^32 / 61 is about 70 million floats, each through four encoders twice.
constexpr uint64_t kFloatPatternStride = 61;
constexpr uint64_t kFloatPatterns = uint64_t{1} << 32;
// Each midpoint is also checked this many float ulps to either side.
constexpr int kNeighbourUlps = 2;
constexpr int kMaxReportedMismatches = 10;

uint32_t cuda_fp16_bits(float value) { return static_cast<__half_raw>(__float2half_rn(value)).x; }
uint32_t cuda_bf16_bits(float value) {
  return static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(value)).x;
}
uint32_t cuda_e4m3_bits(float value) {
  return __nv_cvt_float_to_fp8(value, __NV_SATFINITE, __NV_E4M3);
}
uint32_t cuda_e5m2_bits(float value) {
  return __nv_cvt_float_to_fp8(value, __NV_SATFINITE, __NV_E5M2);
}

float cuda_fp16_to_float(uint16_t bits) {
  __half_raw raw;
  raw.x = bits;
  return __half2float(__half(raw));
}
float cuda_bf16_to_float(uint16_t bits) {
  __nv_bfloat16_raw raw;
  raw.x = bits;
  return __bfloat162float(__nv_bfloat16(raw));
}
float cuda_e4m3_to_float(uint8_t bits) {
  __nv_fp8_e4m3 value;
  value.__x = bits;
  return static_cast<float>(value);
}
float cuda_e5m2_to_float(uint8_t bits) {
  __nv_fp8_e5m2 value;
  value.__x = bits;
  return static_cast<float>(value);
}

struct Encoder {
  const char* name;
  uint32_t (*ours)(float);
  uint32_t (*cuda)(float);
};
const Encoder kEncoders[] = {
    {"fp16", [](float x) -> uint32_t { return float_to_fp16_bits(x); }, cuda_fp16_bits},
    {"bf16", [](float x) -> uint32_t { return float_to_bf16_bits(x); }, cuda_bf16_bits},
    {"e4m3", [](float x) -> uint32_t { return float_to_e4m3_bits(x); }, cuda_e4m3_bits},
    {"e5m2", [](float x) -> uint32_t { return float_to_e5m2_bits(x); }, cuda_e5m2_bits},
};

// Compares every encoder on every value; reports the first few mismatches, returns the count.
int64_t count_encoder_mismatches(const std::vector<float>& values) {
  int64_t mismatches = 0;
  for (const Encoder& encoder : kEncoders) {
    for (float value : values) {
      const uint32_t ours = encoder.ours(value);
      const uint32_t cuda = encoder.cuda(value);
      if (ours == cuda) continue;
      if (++mismatches <= kMaxReportedMismatches) {
        ADD_FAILURE() << encoder.name << " of float bits 0x" << std::hex
                      << std::bit_cast<uint32_t>(value) << " (" << value << "): ours 0x" << ours
                      << ", CUDA 0x" << cuda;
      }
    }
  }
  return mismatches;
}

// Every finite value of a narrow format, the midpoints between neighbours (including the one
// past the largest finite value, where overflow starts) and the floats right around them.
std::vector<float> interesting_values(int bits, float (*decode)(uint32_t)) {
  std::vector<float> values;
  std::vector<float> finite_positive;
  const uint32_t sign_bit = 1u << (bits - 1);
  for (uint32_t pattern = 0; pattern < sign_bit; ++pattern) {
    const float value = decode(pattern);
    if (std::isfinite(value)) finite_positive.push_back(value);
  }
  // Spacing to the next value; past the largest finite value, the spacing just below it (the
  // midpoint there is where overflow starts, and the next value itself may be inf in float).
  const float spacing_at_top = finite_positive.back() - finite_positive[finite_positive.size() - 2];
  for (size_t i = 0; i < finite_positive.size(); ++i) {
    const float spacing = i + 1 < finite_positive.size()
                              ? finite_positive[i + 1] - finite_positive[i]
                              : spacing_at_top;
    // The midpoint needs one more bit than the format has: exact in float.
    const float midpoint = finite_positive[i] + spacing / 2;
    for (float anchor : {finite_positive[i], midpoint}) {
      float below = anchor;
      float above = anchor;
      values.push_back(anchor);
      for (int step = 0; step < kNeighbourUlps; ++step) {
        below = std::nextafter(below, 0.0f);
        above = std::nextafter(above, std::numeric_limits<float>::infinity());
        values.push_back(below);
        values.push_back(above);
      }
    }
  }
  const size_t positive_count = values.size();
  for (size_t i = 0; i < positive_count; ++i) values.push_back(-values[i]);
  return values;
}

std::vector<float> special_values() {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::vector<float> values = {0.0f,
                               -0.0f,
                               kInf,
                               -kInf,
                               std::numeric_limits<float>::max(),
                               -std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::min(),
                               std::numeric_limits<float>::denorm_min(),
                               -std::numeric_limits<float>::denorm_min()};
  // NaNs of both signs, quiet and signalling, with small and large payloads.
  for (uint32_t nan_bits : {0x7fc00000u, 0x7f800001u, 0x7fffffffu, 0x7fa5a5a5u, 0xffc00000u,
                            0xff800001u, 0xffffffffu}) {
    values.push_back(std::bit_cast<float>(nan_bits));
  }
  return values;
}

TEST(FormatsVsCuda, EncodersAgreeOnSpecialValues) {
  EXPECT_EQ(count_encoder_mismatches(special_values()), 0);
}

TEST(FormatsVsCuda, EncodersAgreeAroundEveryValueAndMidpoint) {
  const std::vector<std::pair<const char*, std::vector<float>>> formats = {
      {"fp16", interesting_values(16, [](uint32_t b) { return fp16_bits_to_float(b); })},
      {"bf16", interesting_values(16, [](uint32_t b) { return bf16_bits_to_float(b); })},
      {"e4m3", interesting_values(8, [](uint32_t b) { return e4m3_bits_to_float(b); })},
      {"e5m2", interesting_values(8, [](uint32_t b) { return e5m2_bits_to_float(b); })},
  };
  for (const auto& [name, values] : formats) {
    SCOPED_TRACE(std::string("values around every ") + name + " value");
    EXPECT_EQ(count_encoder_mismatches(values), 0);
  }
}

TEST(FormatsVsCuda, EncodersAgreeOnAStrideOverAllFloats) {
  // A random start, so successive runs sample different patterns.
  const auto seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const uint64_t start = std::mt19937_64(seed)() % kFloatPatternStride;
  std::vector<float> values;
  values.reserve(kFloatPatterns / kFloatPatternStride + 1);
  for (uint64_t bits = start; bits < kFloatPatterns; bits += kFloatPatternStride) {
    values.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits)));
  }
  EXPECT_EQ(count_encoder_mismatches(values), 0);
}

// Decoders: every pattern, compared as float bit patterns (so NaN payloads and -0 count).
template <typename Ours, typename Cuda>
int64_t count_decoder_mismatches(const char* name, int bits, Ours ours, Cuda cuda) {
  int64_t mismatches = 0;
  for (uint32_t pattern = 0; pattern < (1u << bits); ++pattern) {
    const uint32_t ours_bits = std::bit_cast<uint32_t>(ours(pattern));
    const uint32_t cuda_bits = std::bit_cast<uint32_t>(cuda(pattern));
    if (ours_bits == cuda_bits) continue;
    if (++mismatches <= kMaxReportedMismatches) {
      ADD_FAILURE() << name << " pattern 0x" << std::hex << pattern << ": ours 0x" << ours_bits
                    << ", CUDA 0x" << cuda_bits;
    }
  }
  return mismatches;
}

TEST(FormatsVsCuda, DecodersAgreeOnEveryPattern) {
  EXPECT_EQ(count_decoder_mismatches(
                "fp16", 16, [](uint32_t b) { return fp16_bits_to_float(b); },
                [](uint32_t b) { return cuda_fp16_to_float(static_cast<uint16_t>(b)); }),
            0);
  EXPECT_EQ(count_decoder_mismatches(
                "bf16", 16, [](uint32_t b) { return bf16_bits_to_float(b); },
                [](uint32_t b) { return cuda_bf16_to_float(static_cast<uint16_t>(b)); }),
            0);
  EXPECT_EQ(count_decoder_mismatches(
                "e4m3", 8, [](uint32_t b) { return e4m3_bits_to_float(b); },
                [](uint32_t b) { return cuda_e4m3_to_float(static_cast<uint8_t>(b)); }),
            0);
  EXPECT_EQ(count_decoder_mismatches(
                "e5m2", 8, [](uint32_t b) { return e5m2_bits_to_float(b); },
                [](uint32_t b) { return cuda_e5m2_to_float(static_cast<uint8_t>(b)); }),
            0);
}

// CUDA's fp8 class constructors saturate too (their default is __NV_SATFINITE); the classes are
// what kernels use, so check that the default matches ours as well.
TEST(FormatsVsCuda, Fp8ClassConstructorsSaturateLikeOurs) {
  for (float value : {1e6f, -1e6f, std::numeric_limits<float>::infinity(), 463.0f, 465.0f}) {
    EXPECT_EQ(__nv_fp8_e4m3(value).__x, float_to_e4m3_bits(value)) << value;
    EXPECT_EQ(__nv_fp8_e5m2(value).__x, float_to_e5m2_bits(value)) << value;
  }
}

}  // namespace
}  // namespace attnbench
