#include "kernels/emu/block.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <map>
#include <utility>

#include "kernels/emu/block_thread.h"
#include "reference/random.h"

namespace attnbench::emu {

namespace {


std::string hex_mask(unsigned mask) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", mask);
  return text;
}

// Releases the launch's end for the sanitizer as an emulated thread ends, returning or unwinding:
// whatever it did is ordered before what the host does after the launch.
struct ReleaseLaunchEnd {
  const void* launch_end;
  ~ReleaseLaunchEnd() {
    if (launch_end != nullptr) sanitizer::release(launch_end);
  }
};

// Makes `g_current_block` the running block for a scope.
class CurrentBlock {
 public:
  explicit CurrentBlock(Block* block) : previous_(std::exchange(g_current_block, block)) {}
  ~CurrentBlock() { g_current_block = previous_; }
  CurrentBlock(const CurrentBlock&) = delete;
  CurrentBlock& operator=(const CurrentBlock&) = delete;

 private:
  Block* previous_;
};

}  // namespace

std::string Site::text() const {
  std::string name = file;
  const size_t slash = name.rfind('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  name += ':';
  name += std::to_string(line);
  return name;
}

namespace {

std::string dim_text(const Dim3& d) {
  std::string text = "(";
  text += std::to_string(d.x);
  text += ',';
  text += std::to_string(d.y);
  text += ',';
  text += std::to_string(d.z);
  text += ')';
  return text;
}

}  // namespace

Block::Block(const Shape& shape, uint64_t seed) : shape_(shape), rng_state_(seed) {
  constexpr size_t kPage = 1024;
  const size_t offset = 16 * (1 + splitmix64(rng_state_) % 63);  // 16..1008: never 1024-aligned
  const size_t dynamic_bytes = (shape.dynamic_shared_bytes + 15) / 16 * 16;
  shared_storage_.assign(2 * kPage + dynamic_bytes + kStaticSharedBytes, kNaNByte);
  const auto base = reinterpret_cast<uintptr_t>(shared_storage_.data());
  const uintptr_t aligned = (base + kPage - 1) / kPage * kPage;
  shared_window_ = reinterpret_cast<unsigned char*>(aligned);
  dynamic_shared_ = shared_window_ + offset;
  dynamic_bytes_ = dynamic_bytes;
  async_view_.assign(dynamic_bytes, kNaNByte);
  static_begin_ = shared_window_ + offset + dynamic_bytes;
  const size_t warps = (shape.block_dim.count() + kWarpSize - 1) / kWarpSize;
  warp_payloads_.resize(warps);
  warp_phase_.assign(warps * kWarpSize, 0);
  edges_.assign(kPhaseRing * (1 + kNamedBarriers + warps * kWarpSize), 0);
  // Only the dynamic shared memory and, as they are made, the static slots are the kernel's.
  sanitizer::poison(shared_storage_.data(), shared_storage_.size());
  sanitizer::unpoison(dynamic_shared_, dynamic_bytes);
}

Block::~Block() {
  cancel_suspended_threads();
  sanitizer::unpoison(shared_storage_.data(), shared_storage_.size());
}

// A block that stopped on a report leaves threads suspended at their synchronization points;
// each is resumed once more to unwind its fiber through its own code (Cancelled), so the
// sanitizers see every stack switch in pairs.
void Block::cancel_suspended_threads() noexcept {
  cancelling_ = true;
  for (unsigned t = 0; t < threads_.size(); ++t) {
    Fiber& fiber = *threads_[t].fiber;
    if (fiber.finished()) continue;
    running_ = t;
    try {
      while (fiber.resume()) {
      }
    } catch (...) {  // Cancelled, or whatever the unwinding thread threw instead
    }
  }
}

constinit thread_local Block* g_current_block = nullptr;

void Block::throw_outside_a_block() {
  throw EmuError("emu: a CUDA built-in was used outside an emulated block");
}

std::string Block::running_thread_name() {
  if (g_current_block == nullptr) return {};
  std::string name = "block ";
  name += dim_text(g_current_block->block_index());
  name += " thread ";
  name += std::to_string(g_current_block->running_);
  return name;
}

void Block::run(const std::function<void()>& body, const void* launch_end) {
  CurrentBlock current(this);
  body_ = &body;
  launch_end_ = launch_end;
  threads_.clear();
  const unsigned count = shape_.block_dim.count();
  const Dim3& d = shape_.block_dim;
  thread_indices_.resize(count);
  for (unsigned t = 0; t < count; ++t) thread_indices_[t] = {t % d.x, (t / d.x) % d.y, t / (d.x * d.y)};
  const std::string name =
      kSanitizer == Sanitizer::thread ? "block " + dim_text(shape_.block_index) + " thread " : "";
  threads_.reserve(count);  // filled before any thread runs: references to them stay valid
  for (unsigned t = 0; t < count; ++t) {
    Thread& thread = threads_.emplace_back();
    thread.fiber = std::make_unique<Fiber>(
        [this](Fiber&) {
          sanitizer::acquire(&block_start_);  // ordered after the host's past, as at a launch
          const ReleaseLaunchEnd at_end{launch_end_};  // also when the thread stops on a report
          (*body_)();
          finish_thread();
        },
        // The name is for ThreadSanitizer's reports alone: other builds skip a string per thread.
        kSanitizer == Sanitizer::thread ? name + std::to_string(t) : std::string());
  }
  sanitizer::release(&block_start_);
  schedule();
}

// The running thread returns: its copies in flight land (they outlive it).
void Block::finish_thread() {
  Thread& self = threads_[running_];
  if (!self.open_copies.empty()) {  // most threads never copy: no empty group to allocate
    self.committed_copies.push_back(CopyGroup{std::move(self.open_copies)});
    self.open_copies.clear();
  }
  completed_copies_.clear();
  complete_async_copies(self, 0);
  for (const CopyTarget& copy : completed_copies_)
    sanitizer::note_write(copy.destination, copy.bytes);
}

// Runs the runnable threads in a seeded order until each waits or returns; then releases
// whatever waits are complete; until every thread has returned, or nothing can move.
void Block::schedule() {
  std::vector<unsigned> order;
  for (;;) {
    order.clear();
    for (unsigned t = 0; t < threads_.size(); ++t) {
      if (threads_[t].wait == Wait::running) order.push_back(t);
    }
    if (order.empty()) {
      const bool all_finished = std::all_of(threads_.begin(), threads_.end(), [](const Thread& t) {
        return t.wait == Wait::finished;
      });
      if (all_finished) {
        while (land_any_bulk_copy()) {
        }  // boxes still in flight land: the copy engine outlives the threads
        return;
      }
      release_ready_waits();
      continue;
    }
    for (size_t i = order.size(); i > 1; --i) {  // Fisher-Yates with the block's seed
      std::swap(order[i - 1], order[splitmix64(rng_state_) % i]);
    }
    for (const unsigned t : order) {
      // After a report, no other thread runs on into more (sanitizer.h, report_printed).
      if (sanitizer::report_printed()) throw EmuError("stopped after a report of the sanitizer");
      running_ = t;
      schedule_hash_ = (schedule_hash_ ^ t) * 0x100000001b3ull;
      if (!threads_[t].fiber->resume()) finish_thread(t);
    }
  }
}

void Block::wait(Wait kind, Site site, unsigned mask) {
  if (sanitizer::report_printed()) {
    throw EmuError("stopped at " + site.text() + " after a report of the sanitizer");
  }
  Thread& self = threads_[running_];
  self.wait = kind;
  self.site = site;
  self.mask = mask;
  // After the wait is set: a box landing here may complete the very phase this thread waits for.
  land_some_async_copies(self);
  land_due_bulk_copies(running_);
  const unsigned me = running_;
  while (threads_[me].wait != Wait::running && !cancelling_) threads_[me].fiber->yield();
  if (cancelling_) throw Cancelled{};
  running_ = me;
}

void Block::let_others_run() {
  if (sanitizer::report_printed()) throw EmuError("stopped after a report of the sanitizer");
  const unsigned me = running_;
  threads_[me].fiber->yield();  // still running: resumed in the scheduler's next round
  if (cancelling_) throw Cancelled{};
  running_ = me;
}

void Block::finish_thread(unsigned t) {
  Thread& thread = threads_[t];
  thread.wait = Wait::finished;
  const bool stores_in_flight =
      !thread.open_stores.empty() ||
      std::any_of(thread.committed_stores.begin(), thread.committed_stores.end(),
                  [](const auto& group) { return !group.empty(); });
  if (stores_in_flight) {
    throw EmuError("thread " + std::to_string(t) +
                   " returned with TMA stores it never waited for (cp.async.bulk.wait_group): "
                   "they read shared memory the block gives up when it ends");
  }
  if (!thread.wgmma.committed.empty() || !thread.wgmma.open.empty()) {
    throw EmuError("thread " + std::to_string(t) + " returned with wgmma.mma_async in flight (" +
                   std::to_string(thread.wgmma.committed.size()) + " committed groups, " +
                   std::to_string(thread.wgmma.open.size()) +
                   " uncommitted): its accumulators were never completed");
  }
}

void Block::sync_threads(Site site) {
  const void* edge = barrier_edge();
  sanitizer::release(edge);
  wait(Wait::barrier, site, 0);
  sanitizer::acquire(edge);
}

const void* Block::barrier_edge() const { return &edges_[barrier_phase_ % kPhaseRing]; }

const void* Block::named_edge(unsigned id) const {
  return &edges_[kPhaseRing * (1 + id) + named_phase_[id] % kPhaseRing];
}

// A warp collective's edges belong to its warp and the lowest lane of its mask: the halves of a
// warp syncing apart do not order each other.
unsigned Block::warp_edge_slot(unsigned warp, unsigned mask) const {
  return warp * kWarpSize + static_cast<unsigned>(std::countr_zero(mask));
}

const void* Block::warp_edge(unsigned warp, unsigned mask) const {
  const unsigned slot = warp_edge_slot(warp, mask);
  return &edges_[kPhaseRing * (1 + kNamedBarriers + slot) + warp_phase_[slot] % kPhaseRing];
}

bool Block::count_into_named_barrier(const char* instruction, unsigned id, unsigned count,
                                     Site site) {
  const auto threads = static_cast<unsigned>(threads_.size());
  if (id >= kNamedBarriers || count == 0 || count % kWarpSize != 0 || count > threads) {
    throw EmuError(std::string(instruction) + " " + std::to_string(id) + ", " +
                   std::to_string(count) + " at " + site.text() +
                   ": the id must be 0-15 and the count a multiple of 32 up to the block's " +
                   std::to_string(threads) + " threads");
  }
  if (named_expected_[id] != 0 && named_expected_[id] != count) {
    throw EmuError(std::string(instruction) + " " + std::to_string(id) + ", " +
                   std::to_string(count) + " at " + site.text() + ": thread " +
                   std::to_string(running_) + " counts to " + std::to_string(count) +
                   " while the barrier counts to " + std::to_string(named_expected_[id]));
  }
  named_expected_[id] = count;
  if (++named_reached_[id] < count) return false;
  for (Thread& thread : threads_) {  // complete: its waiters go on, the next phase starts
    if (thread.wait == Wait::named && thread.mask == id) thread.wait = Wait::running;
  }
  named_expected_[id] = 0;
  named_reached_[id] = 0;
  ++named_phase_[id];
  return true;
}

void Block::named_barrier_sync(unsigned id, unsigned count, Site site) {
  const void* edge = id < kNamedBarriers ? named_edge(id) : nullptr;  // else reported below
  if (edge != nullptr) sanitizer::release(edge);
  if (!count_into_named_barrier("bar.sync", id, count, site)) {
    wait(Wait::named, site, id);  // the mask field holds the barrier's id
  }
  if (edge != nullptr) sanitizer::acquire(edge);
}

void Block::named_barrier_arrive(unsigned id, unsigned count, Site site) {
  if (id < kNamedBarriers) sanitizer::release(named_edge(id));
  count_into_named_barrier("bar.arrive", id, count, site);
}

void Block::sync_warp(unsigned mask, Site site) {
  collective(Collective::sync_warp, Shuffle::xor_lane, mask, 0, 0, kWarpSize, site);
}

unsigned Block::ballot(unsigned mask, bool predicate, Site site) {
  return static_cast<unsigned>(collective(Collective::ballot, Shuffle::xor_lane, mask,
                                          predicate ? 1 : 0, 0, kWarpSize, site));
}

std::string Block::collective_name(const Thread& thread) const {
  switch (thread.collective) {
    case Collective::sync_warp:
      return "__syncwarp";
    case Collective::ballot:
      return "__ballot_sync";
    case Collective::exchange:
      return thread.instruction;
    case Collective::elect:
      return "elect.sync";
    case Collective::shuffle:
      break;
  }
  switch (thread.mode) {
    case Shuffle::xor_lane:
      return "__shfl_xor_sync";
    case Shuffle::index:
      return "__shfl_sync";
    case Shuffle::up:
      return "__shfl_up_sync";
    case Shuffle::down:
      return "__shfl_down_sync";
  }
  return "?";
}

uint64_t Block::collective(Collective kind, Shuffle mode, unsigned mask, uint64_t word, int arg,
                           int width, Site site) {
  Thread& self = threads_[running_];
  self.collective = kind;
  self.mode = mode;
  self.arg = arg;
  self.width = width;
  self.deposit = word;
  if ((mask & (1u << lane())) == 0) {
    throw EmuError(collective_name(self) + "(" + hex_mask(mask) + ") at " + site.text() +
                   ": thread " + std::to_string(running_) + " (lane " + std::to_string(lane()) +
                   ") is not in its own mask");
  }
  // ldmatrix and mma exchange registers, not memory: no ordering (CUDA promises none).
  const void* edge = kind == Collective::exchange ? nullptr : warp_edge(running_ / kWarpSize, mask);
  if (edge != nullptr) sanitizer::release(edge);
  const unsigned me = running_;
  wait(Wait::warp, site, mask);
  if (edge != nullptr) sanitizer::acquire(edge);
  return threads_[me].received;
}

const WarpPayloads& Block::exchange(const char* instruction, const void* value, size_t bytes,
                                    Site site) {
  if (bytes > kLanePayloadBytes) throw EmuError("emu: an exchange carries at most 32 bytes a lane");
  Thread& self = threads_[running_];
  self.instruction = instruction;
  self.payload.fill(0);
  std::memcpy(self.payload.data(), value, bytes);
  const unsigned warp = running_ / kWarpSize;
  collective(Collective::exchange, Shuffle::xor_lane, kFullMask, 0, 0, kWarpSize, site);
  return warp_payloads_[warp];
}

void* Block::static_shared(const void* tag, size_t bytes, size_t alignment, Site site) {
  for (const auto& [slot_tag, slot] : static_slots_) {
    if (slot_tag == tag) return slot;
  }
  const size_t start = (static_used_ + alignment - 1) / alignment * alignment;
  if (start + bytes > kStaticSharedBytes) {
    throw EmuError("__shared__ at " + site.text() + ": static shared memory of the block exceeds " +
                   std::to_string(kStaticSharedBytes) + " bytes");
  }
  static_used_ = start + bytes;
  void* slot = static_begin_ + start;
  sanitizer::unpoison(slot, bytes);
  static_slots_.emplace_back(tag, slot);
  return slot;
}

uint32_t Block::shared_address(const void* pointer, Site site) const {
  const auto* p = static_cast<const unsigned char*>(pointer);
  const unsigned char* end = shared_storage_.data() + shared_storage_.size();
  if (p < shared_window_ || p >= end) {
    throw EmuError("cvta.to.shared at " + site.text() +
                   ": the pointer is not in the block's shared memory");
  }
  return static_cast<uint32_t>(p - shared_window_);
}

unsigned char* Block::async_view_of(const unsigned char* pointer) {
  const auto* begin = static_cast<const unsigned char*>(dynamic_shared_);
  if (pointer < begin || pointer >= begin + dynamic_bytes_) return nullptr;
  return async_view_.data() + (pointer - begin);
}

void Block::fence_proxy_async(Site) {
  if (dynamic_bytes_ != 0) std::memcpy(async_view_.data(), dynamic_shared_, dynamic_bytes_);
}

unsigned char* Block::shared_pointer(uint32_t address, size_t bytes, Site site) const {
  unsigned char* p = shared_window_ + address;
  const unsigned char* begin = static_cast<const unsigned char*>(dynamic_shared_);
  const unsigned char* end = static_begin_ + static_used_;
  if (p < begin || p + bytes > end) {
    throw EmuError("shared address " + std::to_string(address) + " (+" + std::to_string(bytes) +
                   " bytes) at " + site.text() + " is outside the block's shared memory");
  }
  return p;
}

// Called when no thread can run: releases the complete warp collectives, else the block
// barrier, else reports what is stuck.
void Block::release_ready_waits() {
  bool released = false;
  const unsigned warps = static_cast<unsigned>((threads_.size() + kWarpSize - 1) / kWarpSize);
  for (unsigned w = 0; w < warps; ++w) released = release_warp(w) || released;
  if (released) return;
  if (release_barrier()) return;
  if (land_any_bulk_copy()) return;
  report_stuck();
}

bool Block::release_barrier() {
  std::vector<unsigned> waiting, returned, elsewhere;
  for (unsigned t = 0; t < threads_.size(); ++t) {
    switch (threads_[t].wait) {
      case Wait::barrier:
        waiting.push_back(t);
        break;
      case Wait::finished:
        returned.push_back(t);
        break;
      default:
        elsewhere.push_back(t);
        break;
    }
  }
  if (waiting.empty() || !elsewhere.empty()) return false;
  const Site site = threads_[waiting.front()].site;
  std::vector<unsigned> other_site;
  for (const unsigned t : waiting) {
    if (!(threads_[t].site == site)) other_site.push_back(t);
  }
  if (!other_site.empty()) {
    throw EmuError("__syncthreads from different call sites: threads " + threads_text(waiting) +
                   " wait, thread " + std::to_string(waiting.front()) + " at " + site.text() +
                   ", thread " + std::to_string(other_site.front()) + " at " +
                   threads_[other_site.front()].site.text());
  }
  if (!returned.empty()) {
    throw EmuError("__syncthreads at " + site.text() + " reached by threads " +
                   threads_text(waiting) + " only: threads " + threads_text(returned) +
                   " returned before it");
  }
  for (const unsigned t : waiting) threads_[t].wait = Wait::running;
  ++barrier_phase_;
  return true;
}

// The lane a shuffle of `member` (at `lane`) reads, as CUDA defines each mode: a source outside
// the lane's segment of `width` lanes gives the lane its own value.
unsigned Block::source_lane(const Thread& member, unsigned lane) {
  const auto width = static_cast<unsigned>(member.width);
  const unsigned segment = lane - lane % width;
  const auto arg = static_cast<unsigned>(member.arg);
  unsigned source = lane;
  switch (member.mode) {
    case Shuffle::xor_lane:
      source = lane ^ arg;
      break;
    case Shuffle::index:
      return segment + arg % width;
    case Shuffle::up:
      source = lane - arg;
      break;  // wraps below the segment: own value
    case Shuffle::down:
      source = lane + arg;
      break;
  }
  return source < segment || source >= segment + width ? lane : source;
}

// Releases every group of lanes of warp `w` whose collective is complete: each lane its mask
// names waits in a warp collective with the same mask.
bool Block::release_warp(unsigned w) {
  const unsigned first = w * kWarpSize;
  const unsigned last =
      std::min<unsigned>(first + kWarpSize, static_cast<unsigned>(threads_.size()));
  bool released = false;
  for (unsigned t = first; t < last; ++t) {
    Thread& leader = threads_[t];
    if (leader.wait != Wait::warp) continue;
    const unsigned mask = leader.mask;
    bool complete = true;
    for (unsigned lane = 0; lane < kWarpSize && complete; ++lane) {
      if ((mask & (1u << lane)) == 0) continue;
      const unsigned other = first + lane;
      if (other >= last || threads_[other].wait == Wait::finished) {
        throw EmuError(collective_name(leader) + "(" + hex_mask(mask) + ") at " +
                       leader.site.text() + ": lane " + std::to_string(lane) + " of warp " +
                       std::to_string(w) + " is in the mask but returned without reaching it");
      }
      const Thread& peer = threads_[other];
      complete = peer.wait == Wait::warp && peer.mask == mask;
    }
    if (!complete) continue;
    unsigned votes = 0;
    for (unsigned lane = 0; lane < kWarpSize; ++lane) {
      if ((mask & (1u << lane)) == 0) continue;
      const Thread& member = threads_[first + lane];
      if (member.collective != leader.collective || member.mode != leader.mode ||
          (member.instruction != leader.instruction &&
           std::strcmp(member.instruction, leader.instruction) != 0)) {
        throw EmuError("lanes of warp " + std::to_string(w) + " with mask " + hex_mask(mask) +
                       " reach different collectives: " + collective_name(leader) + " at " +
                       leader.site.text() + " and " + collective_name(member) + " at " +
                       member.site.text());
      }
      if (member.deposit != 0) votes |= 1u << lane;
      if (member.collective == Collective::exchange) warp_payloads_[w][lane] = member.payload;
    }
    const unsigned elected = leader.collective == Collective::elect ? elected_lane(mask) : 0;
    for (unsigned lane = 0; lane < kWarpSize; ++lane) {
      if ((mask & (1u << lane)) == 0) continue;
      Thread& member = threads_[first + lane];
      if (member.collective == Collective::ballot) member.received = votes;
      if (member.collective == Collective::elect) member.received = elected;
      if (member.collective != Collective::shuffle) continue;
      const unsigned source = source_lane(member, lane);
      if ((mask & (1u << source)) == 0) {
        throw EmuError(collective_name(member) + "(" + hex_mask(mask) + ") at " +
                       member.site.text() + ": lane " + std::to_string(lane) + " of warp " +
                       std::to_string(w) + " reads lane " + std::to_string(source) +
                       ", which the mask leaves out");
      }
      member.received = threads_[first + source].deposit;
    }
    for (unsigned lane = 0; lane < kWarpSize; ++lane) {
      if ((mask & (1u << lane)) != 0) threads_[first + lane].wait = Wait::running;
    }
    ++warp_phase_[warp_edge_slot(w, mask)];
    released = true;
  }
  return released;
}

void Block::report_stuck() {
  std::map<std::string, std::vector<unsigned>> by_wait;
  for (unsigned t = 0; t < threads_.size(); ++t) {
    const Thread& thread = threads_[t];
    switch (thread.wait) {
      case Wait::barrier:
        by_wait["__syncthreads at " + thread.site.text()].push_back(t);
        break;
      case Wait::named:
        by_wait["bar.sync " + std::to_string(thread.mask) + " at " + thread.site.text()].push_back(
            t);
        break;
      case Wait::warp:
        by_wait[collective_name(thread) + "(" + hex_mask(thread.mask) + ") at " +
                thread.site.text()]
            .push_back(t);
        break;
      case Wait::mbarrier:
        by_wait["mbarrier.try_wait.parity " + std::to_string(thread.parity) + " at " +
                thread.site.text() + " (shared address " + std::to_string(thread.mask) + ", " +
                mbarriers_.at(thread.mask)->state() + ")"]
            .push_back(t);
        break;
      case Wait::finished:
        by_wait["returned"].push_back(t);
        break;
      case Wait::running:
        break;
    }
  }
  std::string message = "deadlock: every thread waits and none can be released:";
  for (const auto& [where, threads] : by_wait)
    message += " threads " + threads_text(threads) + " " + where + ";";
  message.pop_back();
  throw EmuError(message);
}

// "0-127, 200, 202-203"
std::string Block::threads_text(const std::vector<unsigned>& threads) const {
  std::string text;
  for (size_t i = 0; i < threads.size();) {
    size_t j = i;
    while (j + 1 < threads.size() && threads[j + 1] == threads[j] + 1) ++j;
    if (!text.empty()) text += ", ";
    text += std::to_string(threads[i]);
    if (j > i) {
      text += '-';
      text += std::to_string(threads[j]);
    }
    i = j + 1;
  }
  return text;
}

}  // namespace attnbench::emu
