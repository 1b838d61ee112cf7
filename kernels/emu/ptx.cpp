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
  // This lane's D is c0 c1 (row g, columns 2t, 2t + 1) and c2 c3 (row g + 8, the same columns), so
  // it decodes only A's rows g and g + 8 (held by lanes 4g .. 4g + 3) and B's columns 2t and 2t + 1
  // (held by lanes 4(2t + e) .. + 3): a sixth of the two matrices, the emulator's hottest loop.
  const unsigned g = block.lane() / 4;
  const unsigned t = block.lane() % 4;
  auto operands_of = [&](unsigned lane) {
    MmaOperands operands;
    std::memcpy(&operands, lanes[lane].data(), sizeof operands);
    return operands;
  };
  auto element = [&](uint32_t reg, unsigned e) {
    return widen(input, static_cast<uint16_t>(reg >> (16 * e)));
  };
  float rows_a[2][16];    // A's rows g and g + 8
  float columns_b[2][16];  // B's columns 2t and 2t + 1, k contiguous
  for (unsigned holder_t = 0; holder_t < 4; ++holder_t) {
    const MmaOperands row_holder = operands_of(4 * g + holder_t);
    for (unsigned e = 0; e < 2; ++e) {
      rows_a[0][2 * holder_t + e] = element(row_holder.a[0], e);
      rows_a[1][2 * holder_t + e] = element(row_holder.a[1], e);
      rows_a[0][2 * holder_t + 8 + e] = element(row_holder.a[2], e);
      rows_a[1][2 * holder_t + 8 + e] = element(row_holder.a[3], e);
    }
    for (unsigned column = 0; column < 2; ++column) {
      const MmaOperands column_holder = operands_of(4 * (2 * t + column) + holder_t);
      for (unsigned e = 0; e < 2; ++e) {
        columns_b[column][2 * holder_t + e] = element(column_holder.b[0], e);
        columns_b[column][2 * holder_t + 8 + e] = element(column_holder.b[1], e);
      }
    }
  }
  // Each row and column enters two of the four sums: prepared once (tensor_core_sum.h).
  const TensorCoreOperand rows[2] = {tensor_core_operand(rows_a[0], 16),
                                     tensor_core_operand(rows_a[1], 16)};
  const TensorCoreOperand columns[2] = {tensor_core_operand(columns_b[0], 16),
                                        tensor_core_operand(columns_b[1], 16)};
  for (unsigned r = 0; r < 2; ++r) {
    for (unsigned e = 0; e < 2; ++e) d[2 * r + e] = tensor_core_sum(d[2 * r + e], rows[r], columns[e]);
  }
}

float ex2_approx_ftz(float x) { return flush_subnormal(std::exp2(flush_subnormal(x))); }

uint32_t pack_e4m3x4(float x0, float x1, float x2, float x3) {
  return uint32_t{float_to_e4m3_bits(x0)} | (uint32_t{float_to_e4m3_bits(x1)} << 8) |
         (uint32_t{float_to_e4m3_bits(x2)} << 16) | (uint32_t{float_to_e4m3_bits(x3)} << 24);
}

}  // namespace attnbench::emu
