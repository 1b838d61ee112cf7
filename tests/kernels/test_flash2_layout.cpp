// cuda.flash2's data layout, replayed on the CPU (label cpu, no GPU needed). The kernel's index
// math — the XOR swizzle of its shared tiles, which thread copies which chunk, which row address
// each lane gives ldmatrix, which accumulator register holds which score — is the part of a
// tensor-core kernel that fails silently. Here ldmatrix (plain and .trans) and mma.sync m16n8k16
// are emulated as the PTX ISA specifies their fragments, and one warp's S = Q K^T, O += P V and
// output staging are replayed through kernels/cuda/flash2/flash2_layout.h exactly as
// flash2_kernel.cuh's loops use it (same helpers, same register order), against plain products.
// Small integer inputs keep every sum exact.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/flash2/flash2_layout.h"
#include "kernels/cuda/flash2/flash2_traits.h"

namespace attnbench {
namespace {

using namespace flash2;

constexpr int kLanes = kWarpSize;
constexpr int kMatrices = 4;  // ldmatrix .x4
constexpr int kMatrixRows = 8;
constexpr int kMaxInput = 3;  // inputs in [-3, 3]: products and sums stay exact in float

// Per lane, four 32-bit registers of two 16-bit values each (held as float here).
using Registers = std::array<std::array<std::array<float, 2>, 4>, kLanes>;
using Accumulators = std::array<std::array<float, 4>, kLanes>;  // one C/D fragment per lane

std::vector<float> random_matrix(int rows, int columns, std::mt19937& rng) {
  std::uniform_int_distribution<int> value(-kMaxInput, kMaxInput);
  std::vector<float> matrix(static_cast<size_t>(rows) * columns);
  for (float& x : matrix) x = static_cast<float>(value(rng));
  return matrix;
}

// A (rows, Columns) row-major matrix copied into a swizzled shared tile of row_width(Columns)
// wide rows by Threads threads the way TileCopy does it: every slot of a column inside the matrix
// written exactly once, the padding past it (d 80 and 96 in 128-wide rows) never; it stays NaN,
// so a product that reads it fails.
template <int Columns, int Threads>
std::vector<float> copy_to_tile(const std::vector<float>& matrix, int rows) {
  using Pattern = CopyPattern<Columns, Threads>;
  constexpr int kWidth = Pattern::kWidth;
  std::vector<float> tile(static_cast<size_t>(rows) * kWidth, NAN);
  std::vector<int> writes(tile.size(), 0);
  for (int thread = 0; thread < Threads; ++thread) {
    for (int row = Pattern::first_row(thread); row < rows; row += Pattern::kRowStep) {
      for (int round = 0; round < Pattern::kRounds; ++round) {
        if (!Pattern::copies(thread, round)) continue;
        const int chunk = Pattern::chunk(thread, round);
        for (int e = 0; e < kChunkElements; ++e) {
          const int slot = swizzled_offset<kWidth>(row, chunk) + e;
          tile[slot] = matrix[static_cast<size_t>(row) * Columns + chunk * kChunkElements + e];
          ++writes[slot];
        }
      }
    }
  }
  for (int row = 0; row < rows; ++row) {
    for (int column = 0; column < kWidth; ++column) {
      const int slot =
          swizzled_offset<kWidth>(row, column / kChunkElements) + column % kChunkElements;
      EXPECT_EQ(writes[slot], column < Columns ? 1 : 0)
          << "row " << row << " column " << column << " of a " << Columns
          << "-column matrix written " << writes[slot] << " times";
    }
  }
  return tile;
}

// ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: lane l gives the address of row l % 8 of
// matrix l / 8; lane l receives, in register i, row l / 4, elements 2 (l % 4) and + 1 of matrix i
// (with .trans: column l / 4, rows 2 (l % 4) and + 1).
Registers load_matrix_x4(const std::vector<float>& tile, const std::array<int, kLanes>& address,
                         bool transposed) {
  Registers registers{};
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int matrix = 0; matrix < kMatrices; ++matrix) {
      for (int e = 0; e < 2; ++e) {
        const int pair = 2 * (lane % 4) + e;
        const int other = lane / 4;
        registers[lane][matrix][e] = transposed
                                         ? tile[address[matrix * kMatrixRows + pair] + other]
                                         : tile[address[matrix * kMatrixRows + other] + pair];
      }
    }
  }
  return registers;
}

// mma.sync.aligned.m16n8k16.row.col.f32: groupID g = lane / 4, t = lane % 4.
//   A: a0a1 (g, 2t + e), a2a3 (g + 8, 2t + e), a4a5 (g, 2t + 8 + e), a6a7 (g + 8, 2t + 8 + e)
//   B: b0b1 (k 2t + e, n g), b2b3 (k 2t + 8 + e, n g)
//   C/D: c0c1 (g, 2t + e), c2c3 (g + 8, 2t + e)
void mma_16x8x16(Accumulators& d, const Registers& a, const Registers& b, int b_first) {
  float matrix_a[kMmaM][kMmaK] = {};
  float matrix_b[kMmaK][kMmaN] = {};
  for (int lane = 0; lane < kLanes; ++lane) {
    const int g = lane / 4;
    const int t = lane % 4;
    for (int e = 0; e < 2; ++e) {
      matrix_a[g][2 * t + e] = a[lane][0][e];
      matrix_a[g + 8][2 * t + e] = a[lane][1][e];
      matrix_a[g][2 * t + 8 + e] = a[lane][2][e];
      matrix_a[g + 8][2 * t + 8 + e] = a[lane][3][e];
      matrix_b[2 * t + e][g] = b[lane][b_first][e];
      matrix_b[2 * t + 8 + e][g] = b[lane][b_first + 1][e];
    }
  }
  for (int lane = 0; lane < kLanes; ++lane) {
    const int g = lane / 4;
    const int t = lane % 4;
    for (int r = 0; r < 2; ++r) {
      for (int e = 0; e < 2; ++e) {
        float sum = 0;
        for (int k = 0; k < kMmaK; ++k) sum += matrix_a[g + 8 * r][k] * matrix_b[k][2 * t + e];
        d[lane][2 * r + e] += sum;
      }
    }
  }
}

template <int HeadDim, int HeadDimV>
void replay_warp(int warp, std::mt19937& rng) {
  using T = Traits<HeadDim, HeadDimV>;
  SCOPED_TRACE("head dims " + std::to_string(HeadDim) + "/" + std::to_string(HeadDimV) + ", warp " +
               std::to_string(warp));
  const int warp_row = warp * kRowsPerWarp;
  const std::vector<float> q = random_matrix(T::kBlockQ, HeadDim, rng);  // (kBlockQ, HeadDim)
  const std::vector<float> k = random_matrix(T::kBlockK, HeadDim, rng);  // (kBlockK, HeadDim)
  const std::vector<float> v = random_matrix(T::kBlockK, HeadDimV, rng);  // (kBlockK, HeadDimV)
  std::vector<float> q_tile = copy_to_tile<HeadDim, T::kThreads>(q, T::kBlockQ);
  const std::vector<float> k_tile = copy_to_tile<HeadDim, T::kThreads>(k, T::kBlockK);
  const std::vector<float> v_tile = copy_to_tile<HeadDimV, T::kThreads>(v, T::kBlockK);

  // Per lane, as each lane holds them.
  std::vector<LaneOffsets<T::kQkWidth>> q_lane, k_lane;
  std::vector<LaneOffsets<T::kVWidth>> v_lane;
  for (int lane = 0; lane < kLanes; ++lane) {
    q_lane.emplace_back(warp_row + a_lane_row(lane), a_lane_chunk(lane));
    k_lane.emplace_back(b_lane_row(lane), b_lane_chunk(lane));
    v_lane.emplace_back(bt_lane_row(lane), bt_lane_chunk(lane));
  }
  const auto addresses = [](const auto& lanes, int extra_rows, int chunk_pair) {
    std::array<int, kLanes> address{};
    for (int lane = 0; lane < kLanes; ++lane) {
      address[lane] = lanes[lane].elements(extra_rows, chunk_pair);
    }
    return address;
  };

  // S = Q K^T, the kernel's loop: Q's fragment per k-step, K two key tiles per ldmatrix.
  std::vector<Accumulators> s(T::kKeyTiles, Accumulators{});
  for (int step = 0; step < T::kDimSteps; ++step) {
    const Registers q_fragment = load_matrix_x4(q_tile, addresses(q_lane, 0, step), false);
    for (int pair_tile = 0; pair_tile < T::kKeyTiles / 2; ++pair_tile) {
      const Registers b =
          load_matrix_x4(k_tile, addresses(k_lane, pair_tile * 2 * kMmaN, step), false);
      mma_16x8x16(s[2 * pair_tile], q_fragment, b, 0);
      mma_16x8x16(s[2 * pair_tile + 1], q_fragment, b, 2);
    }
  }
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int tile = 0; tile < T::kKeyTiles; ++tile) {
      for (int r = 0; r < 2; ++r) {
        for (int e = 0; e < 2; ++e) {
          const int row = warp_row + lane / 4 + 8 * r;
          const int key = tile * kMmaN + 2 * (lane % 4) + e;
          float expected = 0;
          for (int d = 0; d < HeadDim; ++d) {
            expected += q[static_cast<size_t>(row) * HeadDim + d] *
                        k[static_cast<size_t>(key) * HeadDim + d];
          }
          ASSERT_EQ(s[tile][lane][2 * r + e], expected)
              << "S row " << row << " key " << key << " (lane " << lane << ")";
        }
      }
    }
  }

  // O = P V with P in S's C-fragment layout (random values, rows warp_row + 0..15), P's A
  // fragments packed from it as the kernel does, V through ldmatrix.trans.
  std::uniform_int_distribution<int> value(-kMaxInput, kMaxInput);
  std::vector<Accumulators> p(T::kKeyTiles);
  std::vector<float> p_matrix(static_cast<size_t>(kRowsPerWarp) * T::kBlockK);  // (16, kBlockK)
  for (int tile = 0; tile < T::kKeyTiles; ++tile) {
    for (int lane = 0; lane < kLanes; ++lane) {
      for (int r = 0; r < 2; ++r) {
        for (int e = 0; e < 2; ++e) {
          const float x = static_cast<float>(value(rng));
          p[tile][lane][2 * r + e] = x;
          p_matrix[static_cast<size_t>(lane / 4 + 8 * r) * T::kBlockK + tile * kMmaN +
                   2 * (lane % 4) + e] = x;
        }
      }
    }
  }
  std::vector<Accumulators> o(T::kDimTiles, Accumulators{});
  for (int step = 0; step < T::kKeySteps; ++step) {
    Registers a{};
    for (int lane = 0; lane < kLanes; ++lane) {
      a[lane][0] = {p[2 * step][lane][0], p[2 * step][lane][1]};
      a[lane][1] = {p[2 * step][lane][2], p[2 * step][lane][3]};
      a[lane][2] = {p[2 * step + 1][lane][0], p[2 * step + 1][lane][1]};
      a[lane][3] = {p[2 * step + 1][lane][2], p[2 * step + 1][lane][3]};
    }
    for (int pair_tile = 0; pair_tile < T::kDimTiles / 2; ++pair_tile) {
      const Registers b = load_matrix_x4(v_tile, addresses(v_lane, step * kMmaK, pair_tile), true);
      mma_16x8x16(o[2 * pair_tile], a, b, 0);
      mma_16x8x16(o[2 * pair_tile + 1], a, b, 2);
    }
  }
  std::vector<float> o_expected(static_cast<size_t>(kRowsPerWarp) * HeadDimV, 0.0f);  // (16, Dv)
  for (int row = 0; row < kRowsPerWarp; ++row) {
    for (int d = 0; d < HeadDimV; ++d) {
      float sum = 0;
      for (int key = 0; key < T::kBlockK; ++key) {
        sum += p_matrix[static_cast<size_t>(row) * T::kBlockK + key] *
               v[static_cast<size_t>(key) * HeadDimV + d];
      }
      o_expected[static_cast<size_t>(row) * HeadDimV + d] = sum;
    }
  }
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int tile = 0; tile < T::kDimTiles; ++tile) {
      for (int r = 0; r < 2; ++r) {
        for (int e = 0; e < 2; ++e) {
          const int row = lane / 4 + 8 * r;
          const int d = tile * kMmaN + 2 * (lane % 4) + e;
          ASSERT_EQ(o[tile][lane][2 * r + e], o_expected[static_cast<size_t>(row) * HeadDimV + d])
              << "O row " << row << " dim " << d << " (lane " << lane << ")";
        }
      }
    }
  }

  // The epilogue: O's fragments into this warp's rows of the Q tile, then 16-byte chunks out.
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int tile = 0; tile < T::kDimTiles; ++tile) {
      for (int r = 0; r < 2; ++r) {
        const int row = warp_row + lane / 4 + 8 * r;
        const int column = tile * kMmaN + 2 * (lane % 4);
        const int offset =
            swizzled_offset<T::kQkWidth>(row, column / kChunkElements) + column % kChunkElements;
        q_tile[offset] = o[tile][lane][2 * r];
        q_tile[offset + 1] = o[tile][lane][2 * r + 1];
      }
    }
  }
  std::vector<float> out(o_expected.size(), NAN);
  const int chunks_per_lane = kRowsPerWarp * T::kOutChunksPerRow / kWarpSize;
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int i = 0; i < chunks_per_lane; ++i) {
      const int chunk_index = lane + i * kWarpSize;
      const int row = chunk_index / T::kOutChunksPerRow;  // within the warp's 16
      const int chunk = chunk_index % T::kOutChunksPerRow;
      for (int e = 0; e < kChunkElements; ++e) {
        out[static_cast<size_t>(row) * HeadDimV + chunk * kChunkElements + e] =
            q_tile[swizzled_offset<T::kQkWidth>(warp_row + row, chunk) + e];
      }
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_EQ(out[i], o_expected[i])
        << "output element " << i << " (row " << i / HeadDimV << ", dim " << i % HeadDimV << ")";
  }
}

// LaneOffsets' folded form equals the plain swizzle for every lane, row tile and chunk pair.
template <int Width>
void check_lane_offsets() {
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int base_row : {0, 16, 112}) {
      for (int lane_chunk : {0, 1}) {
        const int row = base_row + lane % kSwizzleRows;
        const LaneOffsets<Width> offsets(row, lane_chunk);
        for (int extra_rows = 0; extra_rows < 64; extra_rows += kSwizzleRows) {
          for (int pair = 0; pair < Width / (2 * kChunkElements); ++pair) {
            EXPECT_EQ(offsets.elements(extra_rows, pair),
                      swizzled_offset<Width>(row + extra_rows, 2 * pair + lane_chunk))
                << "row width " << Width << " row " << row << " + " << extra_rows << " pair "
                << pair << " lane chunk " << lane_chunk;
          }
        }
      }
    }
  }
}

TEST(Flash2Layout, LaneOffsetsMatchTheSwizzle) {
  check_lane_offsets<64>();
  check_lane_offsets<128>();
  check_lane_offsets<192>();
  check_lane_offsets<256>();
}

// The swizzle keeps ldmatrix conflict-free: the 8 rows of one 8x8 matrix (one chunk column)
// land in 8 different 16-byte bank groups, in 128-wide rows (d 80 to 128) and 192-wide ones.
template <int Width>
void check_ldmatrix_banks() {
  constexpr int kBankGroupBytes = 128;  // 32 banks x 4 bytes
  for (int chunk = 0; chunk < Width / kChunkElements; ++chunk) {
    for (int first_row = 0; first_row < 64; first_row += kSwizzleRows) {
      std::vector<bool> used(kBankGroupBytes / kChunkBytes, false);
      for (int row = first_row; row < first_row + kSwizzleRows; ++row) {
        const int byte = swizzled_offset<Width>(row, chunk) * kElementBytes;
        const int group = (byte % kBankGroupBytes) / kChunkBytes;
        EXPECT_FALSE(used[group]) << "width " << Width << " chunk " << chunk << " rows "
                                  << first_row << "+: conflict";
        used[group] = true;
      }
    }
  }
}

TEST(Flash2Layout, SwizzleSpreadsAnLdmatrixOverAllBanks) {
  check_ldmatrix_banks<128>();
  check_ldmatrix_banks<192>();
}

TEST(Flash2Layout, OneWarpReplaysExactly) {
  std::mt19937 rng(20240607);
  for (int warp : {0, 3, 7}) {
    replay_warp<64, 64>(warp, rng);
    replay_warp<80, 80>(warp, rng);
    replay_warp<96, 96>(warp, rng);
    replay_warp<128, 128>(warp, rng);
    replay_warp<192, 128>(warp, rng);
    replay_warp<256, 256>(warp, rng);
  }
}

}  // namespace
}  // namespace attnbench
