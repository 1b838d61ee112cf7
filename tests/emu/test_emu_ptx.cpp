// The emulated bodies of kernels/cuda/common/ptx.cuh, compiled as a kernel is for `emu`
// (ATTNBENCH_EMU) and run by emulated warps: ldmatrix x1/x2/x4 and .trans deliver the fragments
// the PTX ISA specifies, mma.sync m16n8k16 computes D = A B + C on them (small integers: every
// sum exact), cp.async fills its destination with NaN at issue and the data only by the wait
// that completes its group (a zero-fill copy reads nothing), ex2.approx.ftz flushes subnormals.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/common/ptx.cuh"
#include "kernels/cuda/common/shared.cuh"
#include "reference/formats.h"

namespace attnbench {
namespace {

constexpr unsigned kLanes = 32;
using Fragments = std::array<std::array<uint32_t, 4>, kLanes>;

emu::Launch one_warp(uint64_t seed) {
  emu::Launch launch;
  launch.block_dim = {kLanes, 1, 1};
  launch.dynamic_shared_bytes = 4 * 64 * sizeof(uint16_t);
  launch.seed = seed;
  launch.workers = 1;
  return launch;
}

uint16_t element_bits(int value, bool bf16) {
  return bf16 ? float_to_bf16_bits(static_cast<float>(value))
              : float_to_fp16_bits(static_cast<float>(value));
}

// Four 8x8 b16 matrices, row-major one after another in shared memory, element (m, r, c) = a
// distinct value; lane l gives the address of row l % 8 of matrix l / 8.
Fragments run_ldmatrix(unsigned matrices, bool transposed) {
  Fragments fragments{};
  emu::launch_grid(one_warp(7), [&] {
    ATTNBENCH_DYNAMIC_SHARED(shared, 16);
    auto* tiles = reinterpret_cast<uint16_t*>(shared);
    const unsigned lane = threadIdx.x;
    for (unsigned i = lane; i < 4 * 64; i += kLanes) tiles[i] = static_cast<uint16_t>(i);
    __syncwarp();
    const uint32_t row = ptx::shared_address(tiles + (lane % (8 * matrices)) * 8);
    uint32_t out[4] = {};
    if (matrices == 1) {
      uint32_t f[1];
      transposed ? ptx::load_matrix_x1_transposed(f, row) : ptx::load_matrix_x1(f, row);
      out[0] = f[0];
    } else if (matrices == 2) {
      uint32_t f[2];
      transposed ? ptx::load_matrix_x2_transposed(f, row) : ptx::load_matrix_x2(f, row);
      std::memcpy(out, f, sizeof f);
    } else {
      uint32_t f[4];
      transposed ? ptx::load_matrix_x4_transposed(f, row) : ptx::load_matrix_x4(f, row);
      std::memcpy(out, f, sizeof f);
    }
    for (unsigned i = 0; i < 4; ++i) fragments[lane][i] = out[i];
  });
  return fragments;
}

TEST(EmuPtx, LdmatrixGivesEachLaneTheIsaFragment) {
  for (const unsigned matrices : {1u, 2u, 4u}) {
    for (const bool transposed : {false, true}) {
      std::string name = "x";  // piecewise: g++ 12's -Wrestrict misfires on "x" + to_string()
      name += std::to_string(matrices);
      name += transposed ? ".trans" : "";
      SCOPED_TRACE(name);
      const Fragments got = run_ldmatrix(matrices, transposed);
      for (unsigned lane = 0; lane < kLanes; ++lane) {
        for (unsigned m = 0; m < matrices; ++m) {
          // Plain: row lane / 4, columns 2 (lane % 4) and + 1; .trans: column lane / 4, rows
          // 2 (lane % 4) and + 1. Element (m, r, c) holds the value 64 m + 8 r + c.
          const unsigned a = lane / 4, b = 2 * (lane % 4);
          const uint32_t low = transposed ? 64 * m + 8 * b + a : 64 * m + 8 * a + b;
          const uint32_t high = transposed ? 64 * m + 8 * (b + 1) + a : 64 * m + 8 * a + b + 1;
          EXPECT_EQ(got[lane][m], low | (high << 16)) << "lane " << lane << " matrix " << m;
        }
      }
    }
  }
}

template <typename Element>
void check_mma(bool bf16) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> small(-3, 3);
  int a[16][16], b[16][8];
  float c[16][8];
  for (auto& row : a)
    for (int& x : row) x = small(rng);
  for (auto& row : b)
    for (int& x : row) x = small(rng);
  for (auto& row : c)
    for (float& x : row) x = static_cast<float>(small(rng));
  std::array<std::array<float, 4>, kLanes> d{};
  emu::launch_grid(one_warp(11), [&] {
    const unsigned lane = threadIdx.x, g = lane / 4, t = lane % 4;
    auto pack = [&](int low, int high) {
      return uint32_t{element_bits(low, bf16)} | (uint32_t{element_bits(high, bf16)} << 16);
    };
    const uint32_t fa[4] = {
        pack(a[g][2 * t], a[g][2 * t + 1]), pack(a[g + 8][2 * t], a[g + 8][2 * t + 1]),
        pack(a[g][2 * t + 8], a[g][2 * t + 9]), pack(a[g + 8][2 * t + 8], a[g + 8][2 * t + 9])};
    const uint32_t b0 = pack(b[2 * t][g], b[2 * t + 1][g]);
    const uint32_t b1 = pack(b[2 * t + 8][g], b[2 * t + 9][g]);
    float acc[4] = {c[g][2 * t], c[g][2 * t + 1], c[g + 8][2 * t], c[g + 8][2 * t + 1]};
    ptx::mma_16x8x16<Element>(acc, fa, b0, b1);
    for (int i = 0; i < 4; ++i) d[lane][i] = acc[i];
  });
  for (unsigned lane = 0; lane < kLanes; ++lane) {
    const unsigned g = lane / 4, t = lane % 4;
    for (unsigned i = 0; i < 4; ++i) {
      const unsigned row = g + 8 * (i / 2), column = 2 * t + i % 2;
      float expected = c[row][column];
      for (int k = 0; k < 16; ++k) expected += static_cast<float>(a[row][k] * b[k][column]);
      EXPECT_EQ(d[lane][i], expected) << "lane " << lane << " D(" << row << "," << column << ")";
    }
  }
}

TEST(EmuPtx, MmaComputesTheProductFromTheIsaFragments) {
  check_mma<__half>(false);
  check_mma<__nv_bfloat16>(true);
}

TEST(EmuPtx, AsyncCopyIsNaNUntilItsGroupIsWaitedFor) {
  std::array<float, 8> source{};
  for (size_t i = 0; i < source.size(); ++i) source[i] = static_cast<float>(i + 1);
  emu::Launch launch = one_warp(3);
  launch.block_dim = {1, 1, 1};
  emu::launch_grid(launch, [&] {
    ATTNBENCH_DYNAMIC_SHARED(shared, 16);
    auto* tile = reinterpret_cast<float*>(shared);
    const uint32_t address = ptx::shared_address(tile);
    ptx::copy_async_16(address, source.data(), true);  // group 0: source[0..3]
    ptx::commit_copies();
    EXPECT_TRUE(std::isnan(tile[0])) << "a copy in flight must read NaN, not its data";
    ptx::copy_async_16(address + 16, source.data() + 4, true);  // group 1: source[4..7]
    ptx::commit_copies();
    ptx::copy_async_16(address + 32, nullptr, false);  // group 2: zero-fill, reads no source
    ptx::commit_copies();
    ptx::wait_copies<2>();  // group 0 complete; groups 1 and 2 may still be in flight
    EXPECT_EQ(tile[0], 1.0f);
    EXPECT_EQ(tile[3], 4.0f);
    EXPECT_TRUE(std::isnan(tile[4])) << "wait_group 2 must leave the two youngest groups pending";
    ptx::wait_copies<0>();
    EXPECT_EQ(tile[7], 8.0f);
    EXPECT_EQ(tile[8], 0.0f);
    EXPECT_EQ(tile[11], 0.0f);
  });
}

TEST(EmuPtx, Ex2ApproxFlushesSubnormals) {
  EXPECT_EQ(ptx::exp2_approx(3.0f), 8.0f);
  const float zero = ptx::exp2_approx(-INFINITY);
  EXPECT_EQ(zero, 0.0f);
  EXPECT_FALSE(std::signbit(zero));
  EXPECT_EQ(ptx::exp2_approx(-130.0f), 0.0f) << "2^-130 is subnormal: flushed";
  EXPECT_EQ(ptx::exp2_approx(1e-40f), 1.0f) << "a subnormal input counts as 0";
  EXPECT_TRUE(std::isnan(ptx::exp2_approx(NAN)));
}

TEST(EmuPtx, AWarpInstructionPartOfTheWarpSkipsIsReported) {
  try {
    emu::launch_grid(one_warp(5), [&] {
      ATTNBENCH_DYNAMIC_SHARED(shared, 16);
      if (threadIdx.x >= 16) return;
      uint32_t f[1];
      ptx::load_matrix_x1(f, ptx::shared_address(shared));
    });
    FAIL() << "ldmatrix reached by half the warp must be reported";
  } catch (const emu::EmuError& report) {
    EXPECT_NE(std::string(report.what()).find("ldmatrix"), std::string::npos) << report.what();
    EXPECT_NE(std::string(report.what()).find("returned without reaching it"), std::string::npos)
        << report.what();
  }
}

TEST(EmuPtx, AMisalignedLdmatrixRowIsReported) {
  try {
    emu::launch_grid(one_warp(5), [&] {
      ATTNBENCH_DYNAMIC_SHARED(shared, 16);
      uint32_t f[1];
      ptx::load_matrix_x1(f, ptx::shared_address(shared + 8));
    });
    FAIL() << "an ldmatrix row address off 16 bytes must be reported";
  } catch (const emu::EmuError& report) {
    EXPECT_NE(std::string(report.what()).find("not 16-byte aligned"), std::string::npos)
        << report.what();
  }
}

emu::Launch one_block(unsigned threads, uint64_t seed) {
  emu::Launch launch = one_warp(seed);
  launch.block_dim = {threads, 1, 1};
  return launch;
}

TEST(EmuPtx, NamedBarriersSyncTheirOwnThreadsOnly) {
  // Two halves of a block, each its own barrier: each half sums what its threads wrote.
  std::array<int, 256> sums{};
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    emu::launch_grid(one_block(256, seed), [&] {
      using Values = int[256];
      ATTNBENCH_SHARED(Values, values, alignof(int));
      const unsigned t = threadIdx.x;
      const unsigned half = t / 128;
      values[t] = static_cast<int>(t);
      ptx::named_barrier_sync(1 + half, 128);
      int sum = 0;
      for (unsigned i = 0; i < 128; ++i) sum += values[half * 128 + i];
      sums[t] = sum;
    });
    EXPECT_EQ(sums[0], 127 * 128 / 2);
    EXPECT_EQ(sums[255], 128 * 128 + 127 * 128 / 2);
  }
}

TEST(EmuPtx, AProducerArrivesAndItsConsumersSync) {
  // Warp 0 fills a slot, arrives on barrier 1; warps 1-3 sync on it, read, then arrive on
  // barrier 2, which the producer syncs on before refilling: four rounds through one slot.
  std::array<int, 4> seen_by_thread_96{};
  emu::launch_grid(one_block(128, 9), [&] {
    ATTNBENCH_SHARED(int, slot, alignof(int));
    const unsigned t = threadIdx.x;
    for (int round = 0; round < 4; ++round) {
      if (t < 32) {
        if (t == 0) slot = 100 + round;
        ptx::named_barrier_arrive(1, 128);
        ptx::named_barrier_sync(2, 128);
      } else {
        ptx::named_barrier_sync(1, 128);
        if (t == 96) seen_by_thread_96[static_cast<size_t>(round)] = slot;
        ptx::named_barrier_arrive(2, 128);
      }
    }
  });
  EXPECT_EQ(seen_by_thread_96, (std::array<int, 4>{100, 101, 102, 103}));
}

TEST(EmuPtx, ANamedBarrierThatNeverCompletesIsReportedAsADeadlock) {
  try {
    emu::launch_grid(one_block(128, 3), [&] {
      if (threadIdx.x < 96) ptx::named_barrier_sync(1, 128);  // only 96 of 128 ever come
    });
    FAIL() << "a named barrier short of its count must be reported";
  } catch (const emu::EmuError& report) {
    EXPECT_NE(std::string(report.what()).find("deadlock"), std::string::npos) << report.what();
    EXPECT_NE(std::string(report.what()).find("bar.sync 1 at"), std::string::npos) << report.what();
  }
}

}  // namespace
}  // namespace attnbench
