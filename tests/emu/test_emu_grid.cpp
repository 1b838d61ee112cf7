// An emulated launch: every block runs once with its own index, blocks spread over OS threads,
// atomics sum exactly across them, and a block's report stops the launch naming the block.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kernels/emu/grid.h"
#include "tests/support/fresh_seed.h"

namespace attnbench::emu {
namespace {

TEST(EmuGrid, EveryBlockRunsOnceWithItsIndex) {
  Launch launch;
  launch.grid_dim = {3, 2, 2};
  launch.block_dim = {8, 4, 1};
  launch.seed = fresh_seed();
  launch.workers = 2;
  std::vector<int> visits(launch.grid_dim.count() * launch.block_dim.count(), 0);
  launch_grid(launch, [&] {
    Block& b = Block::current();
    const Dim3 block = b.block_index();
    const Dim3 thread = b.thread_index();
    const unsigned linear_block = block.x + 3 * (block.y + 2 * block.z);
    const unsigned linear_thread = thread.x + 8 * thread.y;
    EXPECT_EQ(linear_thread, b.linear_thread());
    ++visits[linear_block * 32 + linear_thread];  // each slot by one fiber of one block
  });
  for (size_t i = 0; i < visits.size(); ++i) EXPECT_EQ(visits[i], 1) << i;
}

TEST(EmuGrid, AtomicsSumExactlyAcrossBlocksOnTwoThreads) {
  std::mt19937 rng(std::random_device{}());
  const int step = 1 + static_cast<int>(rng() % 7);
  Launch launch;
  launch.grid_dim = {64, 1, 1};
  launch.block_dim = {128, 1, 1};
  launch.seed = fresh_seed();
  launch.workers = 2;
  long long total = 0;
  std::set<std::thread::id> threads;
  std::mutex threads_mutex;
  std::atomic<size_t> seen{0};
  launch_grid(launch, [&] {
    if (Block::current().linear_thread() == 0) {
      {
        std::lock_guard<std::mutex> lock(threads_mutex);
        threads.insert(std::this_thread::get_id());
        seen = threads.size();
      }
      // Hold the first blocks until the second worker runs one too, so the adds below do race
      // across OS threads (a block is microseconds: one worker could otherwise take them all).
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (seen < 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    }
    atomic_add(&total, static_cast<long long>(step));
  });
  EXPECT_EQ(total, 64LL * 128 * step);
  EXPECT_EQ(threads.size(), 2u);  // both workers took blocks
}

TEST(EmuGrid, ABlocksReportStopsTheLaunchAndNamesTheBlock) {
  Launch launch;
  launch.grid_dim = {4, 1, 1};
  launch.block_dim = {64, 1, 1};
  launch.seed = fresh_seed();
  try {
    launch_grid(launch, [] {
      Block& b = Block::current();
      if (b.block_index().x == 2 && b.linear_thread() >= 32) return;
      b.sync_threads(Site{__FILE__, __LINE__});
    });
    ADD_FAILURE() << "the partial barrier of block 2 was not reported";
  } catch (const EmuError& e) {
    const std::string report = e.what();
    EXPECT_EQ(report.rfind("block (2,0,0): __syncthreads at test_emu_grid.cpp:", 0), 0u) << report;
    EXPECT_NE(report.find("threads 32-63 returned before it"), std::string::npos) << report;
  }
}

}  // namespace
}  // namespace attnbench::emu
