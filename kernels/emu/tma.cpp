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

namespace {

// Walks the box at `coordinates` element by element in box order: `visit` gets the element's byte
// offset in the box and, when it lies inside the tensor, its address there (else null).
void for_each_box_element(const TensorMap& map,
                          const std::array<int32_t, TensorMap::kMaxRank>& coordinates,
                          const std::function<void(size_t in_box, unsigned char* element)>& visit) {
  std::array<uint32_t, TensorMap::kMaxRank> index{};
  auto* base = static_cast<unsigned char*>(const_cast<void*>(map.base));  // the map's tensor
  for (size_t in_box = 0; in_box < map.box_bytes(); in_box += map.element_bytes) {
    bool inside = true;
    uint64_t offset = 0;
    for (unsigned d = 0; d < map.rank; ++d) {
      const int64_t at = static_cast<int64_t>(coordinates[d]) + index[d];
      inside = inside && at >= 0 && static_cast<uint64_t>(at) < map.dims[d];
      offset += static_cast<uint64_t>(at) * map.stride_bytes[d];
    }
    visit(in_box, inside ? base + offset : nullptr);
    for (unsigned d = 0; d < map.rank && ++index[d] == map.box[d]; ++d) index[d] = 0;
  }
}

}  // namespace

std::vector<unsigned char> gather_box(
    const TensorMap& map, const std::array<int32_t, TensorMap::kMaxRank>& coordinates,
    const std::function<void(const void* element, size_t bytes)>& check_read) {
  std::vector<unsigned char> bytes(map.box_bytes());
  const unsigned char fill = map.fill_nan ? 0xff : 0x00;  // all-ones: NaN in fp32, fp16 and bf16
  for_each_box_element(map, coordinates, [&](size_t in_box, const unsigned char* element) {
    if (element != nullptr) {
      check_read(element, map.element_bytes);
      std::memcpy(&bytes[in_box], element, map.element_bytes);
    } else {
      std::memset(&bytes[in_box], fill, map.element_bytes);
    }
  });
  return bytes;
}

void scatter_box(
    const TensorMap& map, const std::array<int32_t, TensorMap::kMaxRank>& coordinates,
    const std::vector<unsigned char>& bytes,
    const std::function<void(void* element, const unsigned char* from, size_t bytes)>& write) {
  for_each_box_element(map, coordinates, [&](size_t in_box, unsigned char* element) {
    if (element != nullptr) write(element, &bytes[in_box], map.element_bytes);
  });
}

}  // namespace attnbench::emu
