#include "kernels/cuda/common/tma_map.h"

#include <cstring>
#include <string>

#if defined(ATTNBENCH_EMU)
#include "kernels/emu/tma.h"
#endif

namespace attnbench::gpu {
inline namespace ATTNBENCH_TARGET {

namespace {

constexpr int kMaxBoxElements = 256;
constexpr int64_t kStrideAlignment = 16;

Status rule(const std::string& text) { return Status::Error("tensor map: " + text); }

}  // namespace

Status check_tensor_map(const TensorMapSpec& spec) {
  if (spec.rank < 2 || spec.rank > TensorMapSpec::kMaxRank) return rule("rank must be 2 to 4");
  if (reinterpret_cast<uintptr_t>(spec.base) % kStrideAlignment != 0) {
    return rule("the base address must be 16-byte aligned");
  }
  if (spec.stride_bytes[0] != static_cast<int64_t>(dtype_size(spec.element))) {
    return rule("the innermost dimension must be contiguous (stride = the element's size)");
  }
  for (int d = 0; d < spec.rank; ++d) {
    if (spec.dims[d] < 1) return rule("every dimension needs at least one element");
    if (spec.box[d] < 1 || spec.box[d] > kMaxBoxElements) {
      return rule("a box dimension must be 1 to 256 elements");
    }
    if (d > 0 && spec.stride_bytes[d] % kStrideAlignment != 0) {
      return rule("strides beyond the innermost must be multiples of 16 bytes");
    }
  }
  const int64_t inner_bytes = spec.box[0] * static_cast<int64_t>(dtype_size(spec.element));
  if (spec.swizzle_bytes != 0 && spec.swizzle_bytes != 32 && spec.swizzle_bytes != 64 &&
      spec.swizzle_bytes != 128) {
    return rule("the swizzle is 0, 32, 64 or 128 bytes");
  }
  if (inner_bytes % kStrideAlignment != 0) {
    return rule("the box's inner dimension must be a multiple of 16 bytes");
  }
  if (spec.swizzle_bytes != 0 && inner_bytes > spec.swizzle_bytes) {
    return rule("the box's inner dimension (" + std::to_string(inner_bytes) +
                " bytes) must fit the swizzle's span (" + std::to_string(spec.swizzle_bytes) + ")");
  }
  return Status::Ok();
}

#if defined(ATTNBENCH_EMU)

Status encode_tensor_map(const TensorMapSpec& spec, CUtensorMap& map) {
  if (Status checked = check_tensor_map(spec); !checked) return checked;
  emu::TensorMap emulated;
  emulated.rank = static_cast<unsigned>(spec.rank);
  emulated.element_bytes = static_cast<unsigned>(dtype_size(spec.element));
  emulated.swizzle = static_cast<emu::Swizzle>(spec.swizzle_bytes);
  emulated.fill_nan = spec.fill_nan;
  emulated.base = spec.base;
  for (int d = 0; d < spec.rank; ++d) {
    emulated.dims[d] = static_cast<uint64_t>(spec.dims[d]);
    emulated.stride_bytes[d] = static_cast<uint64_t>(spec.stride_bytes[d]);
    emulated.box[d] = static_cast<uint32_t>(spec.box[d]);
  }
  static_assert(sizeof(emu::TensorMap) <= sizeof(CUtensorMap), "the map fits the opaque bytes");
  std::memset(&map, 0, sizeof map);
  std::memcpy(&map, &emulated, sizeof emulated);
  return Status::Ok();
}

#else

namespace {

CUtensorMapDataType data_type(DType element) {
  switch (element) {
    case DType::f16:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case DType::bf16:
      return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case DType::f32:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case DType::e4m3:
    case DType::e5m2:
      break;
  }
  return CU_TENSOR_MAP_DATA_TYPE_UINT8;  // FP8 moves as bytes
}

CUtensorMapSwizzle swizzle(int bytes) {
  switch (bytes) {
    case 32:
      return CU_TENSOR_MAP_SWIZZLE_32B;
    case 64:
      return CU_TENSOR_MAP_SWIZZLE_64B;
    case 128:
      return CU_TENSOR_MAP_SWIZZLE_128B;
    default:
      return CU_TENSOR_MAP_SWIZZLE_NONE;
  }
}

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                 const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                 const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// The driver's encoder, looked up once (the runtime links no libcuda; the driver has it).
Status encoder(EncodeTiled& encode) {
  static EncodeTiled found = nullptr;
  static cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
  if (found == nullptr) {
    void* function = nullptr;
    const cudaError_t error = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function,
                                                               12000, cudaEnableDefault, &query);
    if (error != cudaSuccess || query != cudaDriverEntryPointSuccess || function == nullptr) {
      return rule(std::string("the driver has no cuTensorMapEncodeTiled (") +
                  cudaGetErrorName(error) + ")");
    }
    found = reinterpret_cast<EncodeTiled>(function);
  }
  encode = found;
  return Status::Ok();
}

}  // namespace

Status encode_tensor_map(const TensorMapSpec& spec, CUtensorMap& map) {
  if (Status checked = check_tensor_map(spec); !checked) return checked;
  EncodeTiled encode = nullptr;
  if (Status found = encoder(encode); !found) return found;
  std::array<cuuint64_t, TensorMapSpec::kMaxRank> dims{};
  std::array<cuuint64_t, TensorMapSpec::kMaxRank> strides{};  // of dimensions 1.. (rank - 1)
  std::array<cuuint32_t, TensorMapSpec::kMaxRank> box{};
  std::array<cuuint32_t, TensorMapSpec::kMaxRank> element_strides{1, 1, 1, 1};
  for (int d = 0; d < spec.rank; ++d) {
    dims[d] = static_cast<cuuint64_t>(spec.dims[d]);
    box[d] = static_cast<cuuint32_t>(spec.box[d]);
    if (d > 0) strides[d - 1] = static_cast<cuuint64_t>(spec.stride_bytes[d]);
  }
  const CUresult result = encode(&map, data_type(spec.element), static_cast<cuuint32_t>(spec.rank),
                                 const_cast<void*>(spec.base), dims.data(), strides.data(),
                                 box.data(), element_strides.data(), CU_TENSOR_MAP_INTERLEAVE_NONE,
                                 swizzle(spec.swizzle_bytes), CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                 spec.fill_nan ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
                                               : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    return rule("cuTensorMapEncodeTiled failed with CUresult " + std::to_string(result));
  }
  return Status::Ok();
}

#endif

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::gpu
