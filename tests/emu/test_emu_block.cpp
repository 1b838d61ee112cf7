// An emulated block: CUDA threads as fibers in a seeded order between synchronization points,
// __syncthreads, __syncwarp and __shfl_xor_sync as CUDA defines them, and what CUDA leaves
// undefined reported in one line instead of hanging: a barrier part of the block skips or
// reaches from two places, a shuffle that reads a lane its mask leaves out, a warp collective a
// named lane never reaches, a deadlock.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/emu/block.h"
#include "tests/support/fresh_seed.h"

namespace attnbench::emu {
namespace {

#define HERE (Site{__FILE__, __LINE__})

Block::Shape block_of(unsigned threads, size_t shared_bytes = 0) {
  Block::Shape shape;
  shape.block_dim = {threads, 1, 1};
  shape.dynamic_shared_bytes = shared_bytes;
  return shape;
}

// The message of the EmuError `body` raises in a block of `threads`, or "" when it raises none.
std::string report_of(unsigned threads, const std::function<void()>& body) {
  Block block(block_of(threads), fresh_seed());
  try {
    block.run(body);
  } catch (const EmuError& e) {
    return e.what();
  }
  return "";
}

// Every thread writes its slot, waits at the barrier, then reads its neighbour's: right for any
// seed. Without the barrier, some thread reads a slot not yet written (threads run to their end
// in turn), so the test can tell a barrier from none.
TEST(EmuBlock, SharedWritesAreSeenAfterTheBarrier) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  constexpr unsigned kThreads = 256;
  for (const bool barrier : {true, false}) {
    Block block(block_of(kThreads, kThreads * sizeof(float)), seed);
    std::vector<float> read(kThreads, -1.0f);
    const float offset = static_cast<float>(seed % 1000);
    block.run([&] {
      Block& b = Block::current();
      auto* slots = static_cast<float*>(b.dynamic_shared());
      const unsigned t = b.linear_thread();
      slots[t] = offset + static_cast<float>(t);
      if (barrier) b.sync_threads(HERE);
      read[t] = slots[(t + 1) % kThreads];
    });
    int wrong = 0;
    for (unsigned t = 0; t < kThreads; ++t) wrong += read[t] != offset + static_cast<float>((t + 1) % kThreads);
    if (barrier) {
      EXPECT_EQ(wrong, 0);
    } else {
      EXPECT_GT(wrong, 0) << "without the barrier every read was right: the schedule hides races";
    }
  }
}

TEST(EmuBlock, TheSeedSetsTheSchedule) {
  auto hash_of = [](uint64_t seed) {
    Block block(block_of(128), seed);
    block.run([] {
      Block& b = Block::current();
      b.sync_threads(HERE);
      b.sync_warp(kFullMask, HERE);
    });
    return block.schedule_hash();
  };
  const uint64_t base = fresh_seed();
  std::set<uint64_t> hashes;
  for (uint64_t s = 0; s < 8; ++s) hashes.insert(hash_of(base + s));
  EXPECT_GE(hashes.size(), 2u);
  EXPECT_EQ(hash_of(base), hash_of(base));
}

TEST(EmuBlock, SharedMemoryIs16ByteAlignedButNotAPage) {
  const uint64_t base = fresh_seed();
  for (uint64_t s = 0; s < 8; ++s) {
    Block block(block_of(32, 4096), base + s);
    const auto address = reinterpret_cast<uintptr_t>(block.dynamic_shared());
    EXPECT_EQ(address % 16, 0u);
    EXPECT_NE(address % 1024, 0u);
  }
}

TEST(EmuBlock, ButterflyShufflesSumTheWarp) {
  std::mt19937 rng(std::random_device{}());
  std::vector<int> values(64);
  for (int& v : values) v = static_cast<int>(rng() % 1000) - 500;
  std::vector<int> sums(64), half_sums(64);
  Block block(block_of(64), fresh_seed());
  block.run([&] {
    Block& b = Block::current();
    const unsigned t = b.linear_thread();
    int sum = values[t];
    for (int offset = 16; offset > 0; offset /= 2) sum += b.shfl_xor(kFullMask, sum, offset, 32, HERE);
    sums[t] = sum;
    int half = values[t];  // width 16: two independent half-warps
    for (int offset = 8; offset > 0; offset /= 2) half += b.shfl_xor(kFullMask, half, offset, 16, HERE);
    half_sums[t] = half;
  });
  for (unsigned t = 0; t < 64; ++t) {
    int warp = 0, segment = 0;
    for (unsigned u = t / 32 * 32; u < t / 32 * 32 + 32; ++u) warp += values[u];
    for (unsigned u = t / 16 * 16; u < t / 16 * 16 + 16; ++u) segment += values[u];
    EXPECT_EQ(sums[t], warp) << t;
    EXPECT_EQ(half_sums[t], segment) << t;
  }
}

// Each mode reads the lane CUDA names: __shfl_sync (index within the segment), __shfl_up_sync
// and __shfl_down_sync (own value where the source leaves the segment).
TEST(EmuBlock, ShufflesOfEveryModeReadTheirSourceLane) {
  std::mt19937 rng(std::random_device{}());
  const int base = static_cast<int>(rng() % 1000);
  const int index = static_cast<int>(rng() % 8), up = 1 + static_cast<int>(rng() % 7),
            down = 1 + static_cast<int>(rng() % 15);
  std::vector<int> by_index(64), by_up(64), by_down(64);
  Block block(block_of(64), fresh_seed());
  block.run([&] {
    Block& b = Block::current();
    const unsigned t = b.linear_thread();
    const int mine = base + static_cast<int>(t);
    by_index[t] = b.shfl(Block::Shuffle::index, kFullMask, mine, index, 8, HERE);
    by_up[t] = b.shfl(Block::Shuffle::up, kFullMask, mine, up, 16, HERE);
    by_down[t] = b.shfl(Block::Shuffle::down, kFullMask, mine, down, 32, HERE);
  });
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    EXPECT_EQ(by_index[t], base + (t - lane % 8) + index) << t;
    EXPECT_EQ(by_up[t], base + (lane % 16 >= up ? t - up : t)) << t;
    EXPECT_EQ(by_down[t], base + (lane + down < 32 ? t + down : t)) << t;
  }
}

TEST(EmuBlock, BallotAnyAndAllCountTheLanesOfTheMask) {
  std::mt19937 rng(std::random_device{}());
  const unsigned modulus = 2 + rng() % 5;
  unsigned expected = 0;
  for (unsigned lane = 0; lane < 32; ++lane) expected |= (lane % modulus == 0 ? 1u : 0u) << lane;
  std::vector<unsigned> ballots(32);
  std::vector<int> anys(32), alls(32), half_alls(32);
  Block block(block_of(32), fresh_seed());
  block.run([&] {
    Block& b = Block::current();
    const unsigned lane = b.lane();
    ballots[lane] = b.ballot(kFullMask, lane % modulus == 0, HERE);
    anys[lane] = b.any(kFullMask, lane == 31, HERE);
    alls[lane] = b.all(kFullMask, lane != 7, HERE);
    const unsigned half = lane < 16 ? 0x0000ffffu : 0xffff0000u;
    half_alls[lane] = b.all(half, lane < 16 || lane == 20, HERE);
  });
  for (unsigned lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(ballots[lane], expected) << lane;
    EXPECT_TRUE(anys[lane]);
    EXPECT_FALSE(alls[lane]);
    EXPECT_EQ(half_alls[lane] != 0, lane < 16) << lane;
  }
}

TEST(EmuBlock, LanesInDifferentCollectivesAreReported) {
  const std::string report = report_of(32, [] {
    Block& b = Block::current();
    if (b.lane() < 16) {
      b.sync_warp(kFullMask, HERE);
    } else {
      (void)b.ballot(kFullMask, true, HERE);
    }
  });
  EXPECT_NE(report.find("reach different collectives: "), std::string::npos) << report;
  EXPECT_NE(report.find("__syncwarp at test_emu_block.cpp:"), std::string::npos) << report;
  EXPECT_NE(report.find("__ballot_sync at test_emu_block.cpp:"), std::string::npos) << report;
}

TEST(EmuBlock, AShuffleMaskThatLeavesOutALaneItReadsIsReported) {
  const std::string report = report_of(32, [] {
    Block& b = Block::current();
    if (b.lane() == 0) return;  // lane 0 sits out, and the mask says so
    const float v = b.shfl_xor(0xfffffffeu, 1.0f, 1, 32, HERE);
    (void)v;
  });
  EXPECT_NE(report.find("__shfl_xor_sync(0xfffffffe)"), std::string::npos) << report;
  EXPECT_NE(report.find("lane 1 of warp 0 reads lane 0, which the mask leaves out"), std::string::npos) << report;
}

TEST(EmuBlock, ABarrierOnlyPartOfTheBlockReachesIsReportedNotHung) {
  const std::string report = report_of(256, [] {
    Block& b = Block::current();
    if (b.linear_thread() < 128) b.sync_threads(HERE);
  });
  EXPECT_NE(report.find("__syncthreads at test_emu_block.cpp:"), std::string::npos) << report;
  EXPECT_NE(report.find("reached by threads 0-127 only: threads 128-255 returned before it"),
            std::string::npos)
      << report;
}

TEST(EmuBlock, BarriersAtTwoCallSitesAreReported) {
  const std::string report = report_of(64, [] {
    Block& b = Block::current();
    if (b.linear_thread() % 2 == 0) {
      b.sync_threads(HERE);
    } else {
      b.sync_threads(HERE);
    }
  });
  EXPECT_NE(report.find("__syncthreads from different call sites"), std::string::npos) << report;
}

TEST(EmuBlock, AWarpSyncALaneNeverReachesIsReported) {
  const std::string report = report_of(32, [] {
    Block& b = Block::current();
    if (b.lane() == 5) return;
    b.sync_warp(kFullMask, HERE);
  });
  EXPECT_NE(report.find("lane 5 of warp 0 is in the mask but returned without reaching it"),
            std::string::npos)
      << report;
}

TEST(EmuBlock, ADeadlockNamesWhereEveryThreadWaits) {
  // Warp 0 waits at the block barrier; warp 1 waits in a __syncwarp its lane 31 never joins,
  // because lane 31 waits at the barrier: nothing can move.
  const std::string report = report_of(64, [] {
    Block& b = Block::current();
    if (b.linear_thread() < 32 || b.lane() == 31) {
      b.sync_threads(HERE);
    } else {
      b.sync_warp(kFullMask, HERE);
    }
  });
  EXPECT_EQ(report.rfind("deadlock: every thread waits and none can be released:", 0), 0u) << report;
  EXPECT_NE(report.find("threads 0-31, 63 __syncthreads at test_emu_block.cpp:"), std::string::npos) << report;
  EXPECT_NE(report.find("threads 32-62 __syncwarp(0xffffffff) at test_emu_block.cpp:"), std::string::npos)
      << report;
}

TEST(EmuBlock, BuiltInsOutsideABlockAreAnError) {
  EXPECT_THROW(Block::current(), EmuError);
}

}  // namespace
}  // namespace attnbench::emu
