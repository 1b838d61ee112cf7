#include "kernels/emu/tma.h"

#include <cstring>

namespace attnbench::emu {

uint64_t TensorMap::box_bytes() const {
  uint64_t elements = 1;
  for (unsigned d = 0; d < rank; ++d) elements *= box[d];
  return elements * element_bytes;
}

uint32_t swizzled_address(uint32_t address, Swizzle swizzle) {
  unsigned bits = 0;
  switch (swizzle) {
    case Swizzle::none:
      return address;
    case Swizzle::bytes32:
      bits = 1;
      break;
    case Swizzle::bytes64:
      bits = 2;
      break;
    case Swizzle::bytes128:
      bits = 3;
      break;
  }
  const uint32_t mask = (1u << bits) - 1;
  return address ^ (((address >> 7) & mask) << 4);
}

std::vector<unsigned char> gather_box(
    const TensorMap& map, const std::array<int32_t, TensorMap::kMaxRank>& coordinates,
    const std::function<void(const void* element, size_t bytes)>& check_read) {
  std::vector<unsigned char> bytes(map.box_bytes());
  const unsigned char fill = map.fill_nan ? 0xff : 0x00;  // all-ones: NaN in fp32, fp16 and bf16
  std::array<uint32_t, TensorMap::kMaxRank> index{};
  const auto* base = static_cast<const unsigned char*>(map.base);
  for (size_t out = 0; out < bytes.size(); out += map.element_bytes) {
    bool inside = true;
    uint64_t offset = 0;
    for (unsigned d = 0; d < map.rank; ++d) {
      const int64_t at = static_cast<int64_t>(coordinates[d]) + index[d];
      inside = inside && at >= 0 && static_cast<uint64_t>(at) < map.dims[d];
      offset += static_cast<uint64_t>(at) * map.stride_bytes[d];
    }
    if (inside) {
      check_read(base + offset, map.element_bytes);
      std::memcpy(&bytes[out], base + offset, map.element_bytes);
    } else {
      std::memset(&bytes[out], fill, map.element_bytes);
    }
    for (unsigned d = 0; d < map.rank && ++index[d] == map.box[d]; ++d) index[d] = 0;
  }
  return bytes;
}

void scatter_box(
    const TensorMap& map, const std::array<int32_t, TensorMap::kMaxRank>& coordinates,
    const std::vector<unsigned char>& bytes,
    const std::function<void(void* element, const unsigned char* from, size_t bytes)>& write) {
  std::array<uint32_t, TensorMap::kMaxRank> index{};
  auto* base = static_cast<unsigned char*>(const_cast<void*>(map.base));  // the map's tensor
  for (size_t in = 0; in < bytes.size(); in += map.element_bytes) {
    bool inside = true;
    uint64_t offset = 0;
    for (unsigned d = 0; d < map.rank; ++d) {
      const int64_t at = static_cast<int64_t>(coordinates[d]) + index[d];
      inside = inside && at >= 0 && static_cast<uint64_t>(at) < map.dims[d];
      offset += static_cast<uint64_t>(at) * map.stride_bytes[d];
    }
    if (inside) write(base + offset, &bytes[in], map.element_bytes);
    for (unsigned d = 0; d < map.rank && ++index[d] == map.box[d]; ++d) index[d] = 0;
  }
}

}  // namespace attnbench::emu
