#include "kernels/emu/ptx.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "reference/formats.h"
#include "reference/tensor_core_sum.h"

namespace attnbench::emu {

namespace {

constexpr unsigned kMatrixRows = 8;
constexpr size_t kRowBytes = 16;  // eight b16 elements

uint16_t load_b16(const unsigned char* address) {
  uint16_t value;
  std::memcpy(&value, address, sizeof value);
  return value;
}

uint32_t pack_b16(uint16_t low, uint16_t high) { return uint32_t{low} | (uint32_t{high} << 16); }

float widen(MmaInput input, uint16_t bits) {
  return input == MmaInput::f16 ? fp16_bits_to_float(bits) : bf16_bits_to_float(bits);
}

struct MmaOperands {
  uint32_t a[4];
  uint32_t b[2];
};

}  // namespace

RowsRead ldmatrix(unsigned matrices, bool transposed, uint32_t address, uint32_t* fragment,
                  Site site) {
  Block& block = Block::current();
  const char* name = transposed ? "ldmatrix.trans" : "ldmatrix";
  if (address % kRowBytes != 0 && block.lane() < matrices * kMatrixRows) {
    throw EmuError(std::string(name) + " at " + site.text() + ": lane " +
                   std::to_string(block.lane()) + " gives row address " + std::to_string(address) +
                   ", which is not 16-byte aligned");
  }
  const WarpPayloads& rows = block.exchange(name, &address, sizeof address, site);
  const unsigned lane = block.lane();
  RowsRead read;
  auto row_address = [&](unsigned matrix, unsigned row) {
    uint32_t value;
    std::memcpy(&value, rows[matrix * kMatrixRows + row].data(), sizeof value);
    const unsigned char* row_pointer = block.shared_pointer(value, kRowBytes, site);
    read.rows[read.count++] = row_pointer;
    return row_pointer;
  };
  for (unsigned matrix = 0; matrix < matrices; ++matrix) {
    if (transposed) {
      const unsigned column = lane / 4;
      const unsigned row = 2 * (lane % 4);
      fragment[matrix] = pack_b16(load_b16(row_address(matrix, row) + 2 * column),
                                  load_b16(row_address(matrix, row + 1) + 2 * column));
    } else {
      const unsigned column = 2 * (lane % 4);
      const unsigned char* row = row_address(matrix, lane / 4);
      fragment[matrix] = pack_b16(load_b16(row + 2 * column), load_b16(row + 2 * column + 2));
    }
  }
  return read;
}

void mma_m16n8k16(MmaInput input, float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                  Site site) {
  Block& block = Block::current();
  MmaOperands mine{{a[0], a[1], a[2], a[3]}, {b0, b1}};
  const WarpPayloads& lanes =
      block.exchange(input == MmaInput::f16 ? "mma.sync.m16n8k16.f16" : "mma.sync.m16n8k16.bf16",
                     &mine, sizeof mine, site);
  // The 16x16 A and 16x8 B matrices, from every lane's fragments (groupID g = lane / 4, t = lane %
  // 4):
  //   A: reg 0 (g, 2t + e), reg 1 (g + 8, 2t + e), reg 2 (g, 2t + 8 + e), reg 3 (g + 8, 2t + 8 + e)
  //   B: reg 0 (k 2t + e, n g), reg 1 (k 2t + 8 + e, n g)
  float matrix_a[16][16];
  float matrix_b[16][8];
  for (unsigned lane = 0; lane < kWarpSize; ++lane) {
    MmaOperands operands;
    std::memcpy(&operands, lanes[lane].data(), sizeof operands);
    const unsigned g = lane / 4;
    const unsigned t = lane % 4;
    for (unsigned e = 0; e < 2; ++e) {
      auto element = [&](uint32_t reg) {
        return widen(input, static_cast<uint16_t>(reg >> (16 * e)));
      };
      matrix_a[g][2 * t + e] = element(operands.a[0]);
      matrix_a[g + 8][2 * t + e] = element(operands.a[1]);
      matrix_a[g][2 * t + 8 + e] = element(operands.a[2]);
      matrix_a[g + 8][2 * t + 8 + e] = element(operands.a[3]);
      matrix_b[2 * t + e][g] = element(operands.b[0]);
      matrix_b[2 * t + 8 + e][g] = element(operands.b[1]);
    }
  }
  // This lane's D: c0 c1 (row g, columns 2t, 2t + 1), c2 c3 (row g + 8, the same columns).
  const unsigned g = block.lane() / 4;
  const unsigned t = block.lane() % 4;
  for (unsigned r = 0; r < 2; ++r) {
    for (unsigned e = 0; e < 2; ++e) {
      d[2 * r + e] = tensor_core_sum(d[2 * r + e], matrix_a[g + 8 * r], &matrix_b[0][2 * t + e],
                                     16, 8);
    }
  }
}

float ex2_approx_ftz(float x) {
  if (std::fpclassify(x) == FP_SUBNORMAL) x = 0.0f;
  const float y = std::exp2(x);
  return std::fpclassify(y) == FP_SUBNORMAL ? 0.0f : y;
}

uint32_t pack_e4m3x4(float x0, float x1, float x2, float x3) {
  return uint32_t{float_to_e4m3_bits(x0)} | (uint32_t{float_to_e4m3_bits(x1)} << 8) |
         (uint32_t{float_to_e4m3_bits(x2)} << 16) | (uint32_t{float_to_e4m3_bits(x3)} << 24);
}

}  // namespace attnbench::emu
