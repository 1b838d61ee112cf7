// mbarriers and elect.sync for an emulated block (block.h): Hopper's transaction barriers, whose
// phases complete when their arrivals and their copies' bytes are all in, and the warp's
// election of one lane.
#include <bit>
#include <memory>
#include <string>

#include "kernels/emu/block.h"
#include "kernels/emu/block_thread.h"
#include "kernels/emu/sanitizer.h"
#include "reference/random.h"

namespace attnbench::emu {

namespace {

std::string at(uint32_t address, Site site) {
  return " at shared address " + std::to_string(address) + " (" + site.text() + ")";
}

}  // namespace

Block::MBarrier& Block::mbarrier_at(uint32_t address, const char* instruction, Site site) {
  const auto found = mbarriers_.find(address);
  if (found == mbarriers_.end()) {
    throw EmuError(std::string(instruction) + at(address, site) + ": thread " +
                   std::to_string(running_) + " uses an mbarrier nobody initialized");
  }
  return *found->second;
}

void Block::mbarrier_init(uint32_t address, unsigned count, Site site) {
  shared_pointer(address, sizeof(uint64_t), site);  // inside the block's shared memory
  if (address % sizeof(uint64_t) != 0 || count == 0) {
    throw EmuError("mbarrier.init" + at(address, site) +
                   ": the barrier must be 8-byte aligned and count at least one arrival");
  }
  auto& slot = mbarriers_[address];
  if (slot != nullptr && slot->pending != slot->count) {
    throw EmuError("mbarrier.init" + at(address, site) + ": the barrier is in use (" +
                   slot->state() + ")");
  }
  slot = std::make_unique<MBarrier>();
  slot->count = count;
  slot->pending = count;
}

void Block::complete_mbarrier_phase(uint32_t address, MBarrier& barrier) {
  const unsigned completed_parity = barrier.phase % 2;
  ++barrier.phase;
  barrier.pending = barrier.count;
  barrier.transaction_bytes = 0;
  for (Thread& thread : threads_) {
    if (thread.wait == Wait::mbarrier && thread.mask == address &&
        thread.parity == completed_parity) {
      thread.wait = Wait::running;
    }
  }
}

void Block::mbarrier_arrive(uint32_t address, uint32_t expect_tx_bytes, Site site) {
  MBarrier& barrier = mbarrier_at(address, "mbarrier.arrive", site);
  if (barrier.pending == 0) {
    throw EmuError("mbarrier.arrive" + at(address, site) + ": thread " + std::to_string(running_) +
                   " arrives once more than the barrier's count (" + barrier.state() + ")");
  }
  sanitizer::release(barrier.edge(barrier.phase));
  barrier.transaction_bytes += expect_tx_bytes;
  if (--barrier.pending == 0 && barrier.transaction_bytes == 0) {
    complete_mbarrier_phase(address, barrier);
  }
}

void Block::mbarrier_expect_tx(uint32_t address, uint32_t bytes, Site site) {
  mbarrier_at(address, "mbarrier.expect_tx", site).transaction_bytes += bytes;
}

void Block::mbarrier_complete_tx(uint32_t address, uint32_t bytes, Site site) {
  MBarrier& barrier = mbarrier_at(address, "mbarrier.complete_tx", site);
  sanitizer::release(barrier.edge(barrier.phase));
  barrier.transaction_bytes -= bytes;
  if (barrier.pending == 0 && barrier.transaction_bytes == 0) {
    complete_mbarrier_phase(address, barrier);
  }
}

void Block::mbarrier_wait_parity(uint32_t address, unsigned parity, Site site) {
  MBarrier& barrier = mbarrier_at(address, "mbarrier.try_wait.parity", site);
  parity %= 2;
  // The phase of that parity has completed once the current phase's parity differs from it.
  const unsigned waited_phase = barrier.phase % 2 != parity ? barrier.phase - 1 : barrier.phase;
  if (barrier.phase % 2 == parity) {
    Thread& self = threads_[running_];
    self.parity = parity;
    wait(Wait::mbarrier, site, address);
  }
  sanitizer::acquire(mbarrier_at(address, "mbarrier.try_wait.parity", site).edge(waited_phase));
}

bool Block::elect_one(unsigned mask, Site site) {
  const unsigned me = running_;
  collective(Collective::elect, Shuffle::xor_lane, mask, 0, 0, kWarpSize, site);
  return threads_[me].received == me % kWarpSize;
}

// The lane elect.sync picks among `mask`'s lanes: the seed's choice.
unsigned Block::elected_lane(unsigned mask) {
  const auto members = static_cast<unsigned>(std::popcount(mask));
  unsigned pick = static_cast<unsigned>(splitmix64(rng_state_) % members);
  for (unsigned lane = 0; lane < kWarpSize; ++lane) {
    if ((mask & (1u << lane)) != 0 && pick-- == 0) return lane;
  }
  return 0;
}

}  // namespace attnbench::emu
