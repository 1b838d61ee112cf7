// Number formats the problems are stated in. Storage: fp32 as float, fp16/bf16 as their
// 16-bit patterns, fp8 as 8-bit patterns (see formats.h for the conversions).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace attnbench {

enum class DType : uint8_t { f32, f16, bf16, e4m3, e5m2 };

// Canonical names used by suites, the CLI and the database: fp32, fp16, bf16, e4m3, e5m2.
std::string_view dtype_name(DType dtype);
// Accepts the canonical names and the aliases fp8 (= e4m3), float32, float16, bfloat16.
std::optional<DType> parse_dtype(std::string_view text);
// "fp32, fp16, bf16, e4m3, e5m2" — for error messages.
std::string accepted_dtype_names();

constexpr size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 4;
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::e4m3:
    case DType::e5m2:
      return 1;
  }
  return 0;
}

constexpr bool is_fp8(DType dtype) { return dtype == DType::e4m3 || dtype == DType::e5m2; }

}  // namespace attnbench
