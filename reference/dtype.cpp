#include "reference/dtype.h"

#include <array>
#include <utility>

#include "reference/enum_names.h"

namespace attnbench {
namespace {

constexpr std::array<DType, 5> kAllDTypes = {DType::f32, DType::f16, DType::bf16, DType::e4m3,
                                             DType::e5m2};

// Other spellings people type: PyTorch's long names, and fp8 for the e4m3 that FP8 attention
// kernels use for their inputs.
constexpr std::array<std::pair<std::string_view, DType>, 4> kAliases = {{
    {"fp8", DType::e4m3},
    {"float32", DType::f32},
    {"float16", DType::f16},
    {"bfloat16", DType::bf16},
}};

}  // namespace

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return "fp32";
    case DType::f16:
      return "fp16";
    case DType::bf16:
      return "bf16";
    case DType::e4m3:
      return "e4m3";
    case DType::e5m2:
      return "e5m2";
  }
  return "unknown";
}

std::optional<DType> parse_dtype(std::string_view text) {
  if (const std::optional<DType> dtype = parse_enum_name(kAllDTypes, text, dtype_name)) {
    return dtype;
  }
  for (const auto& [alias, dtype] : kAliases) {
    if (text == alias) return dtype;
  }
  return std::nullopt;
}

std::string accepted_dtype_names() { return join_enum_names(kAllDTypes, dtype_name); }

}  // namespace attnbench
