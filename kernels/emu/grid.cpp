#include "kernels/emu/grid.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/emu/sanitizer.h"
#include "reference/random.h"

namespace attnbench::emu {

namespace {

Dim3 block_index(const Dim3& grid, unsigned linear) {
  return {linear % grid.x, (linear / grid.x) % grid.y, linear / (grid.x * grid.y)};
}

}  // namespace

uint64_t launch_grid(const Launch& launch, const std::function<void()>& body) {
  const unsigned blocks = launch.grid_dim.count();
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  // The race build runs a grid on at least two OS threads and gives each its first block
  // (block w to thread w), the rest going to whichever thread is free: two blocks on different
  // threads are unordered for ThreadSanitizer whenever they run, while blocks that one thread
  // runs in turn can look ordered (they reuse its fibers and stacks), so a race between blocks (a
  // plain add where CTAs must add atomically) is reported whatever the host's timing.
  constexpr bool kFirstBlockEach = kSanitizer == Sanitizer::thread;
  const unsigned wanted = launch.workers > 0 ? launch.workers : cores;
  const unsigned workers = std::min(blocks, kFirstBlockEach ? std::max(2u, wanted) : wanted);
  std::atomic<unsigned> next{kFirstBlockEach ? workers : 0u};
  std::atomic<bool> failed{false};
  std::mutex first_error_mutex;
  std::exception_ptr first_error;
  std::atomic<uint64_t> schedules{0};  // blocks' hashes, combined independently of their order
  const char launch_end = 0;  // every emulated thread releases it as it returns (sanitizer.h)
  std::atomic<unsigned> next_worker{0};
  auto work = [&] {
    const unsigned worker = next_worker++;
    bool first = kFirstBlockEach;
    auto next_block = [&] { return std::exchange(first, false) ? worker : next++; };
    for (unsigned b; !failed && (b = next_block()) < blocks;) {
      Block::Shape shape{launch.block_dim, block_index(launch.grid_dim, b), launch.grid_dim,
                         launch.dynamic_shared_bytes, launch.global_memory};
      try {
        Block block(shape, mix_seed(launch.seed, b));
        block.run(body, &launch_end);
        schedules.fetch_xor(mix_seed(block.schedule_hash(), b));
      } catch (const EmuError& e) {
        const Dim3 at = shape.block_index;
        std::lock_guard<std::mutex> lock(first_error_mutex);
        if (!failed.exchange(true)) {
          first_error = std::make_exception_ptr(EmuError("block (" + std::to_string(at.x) + "," +
                                                         std::to_string(at.y) + "," +
                                                         std::to_string(at.z) + "): " + e.what()));
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(first_error_mutex);
        if (!failed.exchange(true)) first_error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned w = 1; w < workers; ++w) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  sanitizer::acquire(&launch_end);  // the next launch sees all of this one, as on a GPU
  if (first_error) std::rethrow_exception(first_error);
  return schedules.load();
}

}  // namespace attnbench::emu
