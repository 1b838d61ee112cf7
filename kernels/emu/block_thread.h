// The state the block keeps for each of its emulated threads (block.h): internal to the block's
// files (block.cpp: scheduling, barriers, collectives; block_copies.cpp: cp.async;
// block_mbarrier.cpp: mbarriers and elect.sync; block_wgmma.cpp: wgmma).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/emu/block.h"
#include "kernels/emu/tma.h"

namespace attnbench::emu {

// One cp.async in flight: what lands where (the source is read at issue, as the copy may read
// it at any time after).
struct PendingCopy {
  unsigned char* destination = nullptr;
  std::array<unsigned char, 16> data{};
  size_t bytes = 0;
};

constexpr unsigned char kNaNByte = 0xff;  // 0xffff.. is NaN as fp32, fp16 and bf16 alike

// A committed group of cp.async: landed once its data is in shared memory. Where in its window
// it lands is drawn at commit: half the groups at the issuing thread's k-th synchronization
// point after the commit (k < kLandingSpread), half only at the wait that completes them, so a
// wait that is short by one group reads NaN about every other time.
struct Block::CopyGroup {
  static constexpr int kLandsAtCompletion = -1;
  static constexpr uint64_t kLandingSpread = 16;
  std::vector<PendingCopy> copies;
  int syncs_before_landing = kLandsAtCompletion;
  bool landed = false;
};

// One TMA store issued by a thread and not yet waited for: its shared-memory source is read at
// the cp.async.bulk.wait_group that completes its group (the latest the hardware may read it),
// and written to global memory then.
struct PendingStore {
  TensorMap map;
  std::array<int32_t, TensorMap::kMaxRank> coordinates{};
  uint32_t source = 0;
  Site site;
};

struct Block::Thread {
  std::unique_ptr<Fiber> fiber;
  Wait wait = Wait::running;
  Site site;
  unsigned mask = 0;    // a warp wait's mask; a named barrier's id; an mbarrier's address
  unsigned parity = 0;  // an mbarrier wait: the parity of the phase it waits for
  Collective collective = Collective::sync_warp;  // which warp collective it waits in
  Shuffle mode = Shuffle::xor_lane;               // shuffles: how the source lane is found
  int arg = 0;                                    // shuffles: the xor mask, index or delta
  int width = kWarpSize;                          // shuffles: the segment width
  uint64_t deposit = 0;                    // this lane's value (shuffle) or predicate (ballot)
  uint64_t received = 0;                   // what the collective gives it back
  const char* instruction = "";            // exchanges: the warp instruction's name
  LanePayload payload{};                   // exchanges: this lane's part
  std::vector<PendingCopy> open_copies;    // cp.async issued since the last commit
  // FIFOs of a few groups are vectors, not deques: an empty std::deque allocates, and every
  // emulated thread has three (malloc and free were a fifth of an emulated cuda.masked_outofplace).
  std::vector<CopyGroup> committed_copies;  // committed groups in flight, oldest first
  WgmmaState wgmma;                        // wgmma.mma_async issued and not yet waited for
  std::vector<PendingStore> open_stores;   // TMA stores issued since the last bulk commit
  std::vector<std::vector<PendingStore>> committed_stores;  // bulk groups not yet waited for
};

// One TMA box in flight: its bytes (read at issue), where they go, the barrier they complete on,
// and when they land (the issuing thread's k-th synchronization point from issue; -1: only when
// nothing else can run).
struct Block::BulkCopy {
  std::vector<unsigned char> bytes;
  uint32_t destination = 0;
  Swizzle swizzle = Swizzle::none;
  uint32_t barrier = 0;
  unsigned issuer = 0;
  int syncs_before_landing = -1;
};

// One mbarrier: the arrivals each phase waits for, what is still missing of the current phase,
// and the phase count (its parity is what try_wait.parity tests). The race build's edges: every
// arrival releases the phase's sync object, every wait acquires it (a ring, as for barriers).
struct Block::MBarrier {
  static constexpr unsigned kPhaseRing = 4;
  unsigned count = 0;
  unsigned pending = 0;
  int64_t transaction_bytes = 0;  // may dip below zero: bytes may land before they are expected
  unsigned phase = 0;
  std::array<char, kPhaseRing> edges{};
  const void* edge(unsigned of_phase) const { return &edges[of_phase % kPhaseRing]; }
  std::string state() const {
    return "phase " + std::to_string(phase) + ", " + std::to_string(pending) + " of " +
           std::to_string(count) + " arrivals and " + std::to_string(transaction_bytes) +
           " transaction bytes missing";
  }
};

}  // namespace attnbench::emu
