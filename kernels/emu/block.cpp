#include "kernels/emu/block.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

namespace attnbench::emu {

namespace {

thread_local Block* g_current = nullptr;

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string hex_mask(unsigned mask) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", mask);
  return text;
}

// Makes `g_current` the running block for a scope.
class CurrentBlock {
 public:
  explicit CurrentBlock(Block* block) : previous_(std::exchange(g_current, block)) {}
  ~CurrentBlock() { g_current = previous_; }
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

// One cp.async in flight: what lands where (the source is read at issue, as the copy may read
// it at any time after).
struct PendingCopy {
  unsigned char* destination = nullptr;
  std::array<unsigned char, 16> data{};
  size_t bytes = 0;
};
using CopyGroup = std::vector<PendingCopy>;

constexpr unsigned char kNaNByte = 0xff;  // 0xffff.. is NaN as fp32, fp16 and bf16 alike

}  // namespace

struct Block::Thread {
  std::unique_ptr<Fiber> fiber;
  Wait wait = Wait::running;
  Site site;
  unsigned mask = 0;                              // a warp wait's mask
  Collective collective = Collective::sync_warp;  // which warp collective it waits in
  Shuffle mode = Shuffle::xor_lane;               // shuffles: how the source lane is found
  int arg = 0;                                    // shuffles: the xor mask, index or delta
  int width = kWarpSize;                          // shuffles: the segment width
  uint64_t deposit = 0;                    // this lane's value (shuffle) or predicate (ballot)
  uint64_t received = 0;                   // what the collective gives it back
  const char* instruction = "";            // exchanges: the warp instruction's name
  LanePayload payload{};                   // exchanges: this lane's part
  CopyGroup open_copies;                   // cp.async issued since the last commit
  std::deque<CopyGroup> committed_copies;  // committed groups in flight, oldest first
};

Block::Block(const Shape& shape, uint64_t seed) : shape_(shape), rng_state_(seed) {
  constexpr size_t kPage = 1024;
  const size_t offset = 16 * (1 + splitmix64(rng_state_) % 63);  // 16..1008: never 1024-aligned
  const size_t dynamic_bytes = (shape.dynamic_shared_bytes + 15) / 16 * 16;
  shared_storage_.assign(2 * kPage + dynamic_bytes + kStaticSharedBytes, kNaNByte);
  const auto base = reinterpret_cast<uintptr_t>(shared_storage_.data());
  const uintptr_t aligned = (base + kPage - 1) / kPage * kPage;
  shared_window_ = reinterpret_cast<unsigned char*>(aligned);
  dynamic_shared_ = shared_window_ + offset;
  static_begin_ = shared_window_ + offset + dynamic_bytes;
  warp_payloads_.resize((shape.block_dim.count() + kWarpSize - 1) / kWarpSize);
}

Block::~Block() = default;

Block& Block::current() {
  if (g_current == nullptr)
    throw EmuError("emu: a CUDA built-in was used outside an emulated block");
  return *g_current;
}

Dim3 Block::thread_index() const {
  const Dim3& d = shape_.block_dim;
  return {running_ % d.x, (running_ / d.x) % d.y, running_ / (d.x * d.y)};
}

void Block::run(const std::function<void()>& body) {
  CurrentBlock current(this);
  body_ = &body;
  threads_.clear();
  const unsigned count = shape_.block_dim.count();
  for (unsigned t = 0; t < count; ++t) {
    auto thread = std::make_unique<Thread>();
    thread->fiber = std::make_unique<Fiber>([this](Fiber&) { (*body_)(); });
    threads_.push_back(std::move(thread));
  }
  schedule();
}

// Runs the runnable threads in a seeded order until each waits or returns; then releases
// whatever waits are complete; until every thread has returned, or nothing can move.
void Block::schedule() {
  std::vector<unsigned> order;
  for (;;) {
    order.clear();
    for (unsigned t = 0; t < threads_.size(); ++t) {
      if (threads_[t]->wait == Wait::running) order.push_back(t);
    }
    if (order.empty()) {
      const bool all_finished = std::all_of(threads_.begin(), threads_.end(), [](const auto& t) {
        return t->wait == Wait::finished;
      });
      if (all_finished) return;
      release_ready_waits();
      continue;
    }
    for (size_t i = order.size(); i > 1; --i) {  // Fisher-Yates with the block's seed
      std::swap(order[i - 1], order[splitmix64(rng_state_) % i]);
    }
    for (const unsigned t : order) {
      running_ = t;
      schedule_hash_ = (schedule_hash_ ^ t) * 0x100000001b3ull;
      if (!threads_[t]->fiber->resume()) {
        Thread& done = *threads_[t];
        done.wait = Wait::finished;
        done.committed_copies.push_back(std::move(done.open_copies));  // copies outlive a thread
        land_async_copies(done, 0, false);
      }
    }
  }
}

void Block::wait(Wait kind, Site site, unsigned mask) {
  Thread& self = *threads_[running_];
  land_async_copies(self, self.committed_copies.size(), true);
  self.wait = kind;
  self.site = site;
  self.mask = mask;
  const unsigned me = running_;
  while (threads_[me]->wait != Wait::running) threads_[me]->fiber->yield();
  running_ = me;
}

void Block::sync_threads(Site site) { wait(Wait::barrier, site, 0); }

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
  for (const auto& thread : threads_) {  // complete: its waiters go on, the next phase starts
    if (thread->wait == Wait::named && thread->mask == id) thread->wait = Wait::running;
  }
  named_expected_[id] = 0;
  named_reached_[id] = 0;
  return true;
}

void Block::named_barrier_sync(unsigned id, unsigned count, Site site) {
  if (count_into_named_barrier("bar.sync", id, count, site)) return;
  wait(Wait::named, site, id);  // the mask field holds the barrier's id
}

void Block::named_barrier_arrive(unsigned id, unsigned count, Site site) {
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
  Thread& self = *threads_[running_];
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
  const unsigned me = running_;
  wait(Wait::warp, site, mask);
  return threads_[me]->received;
}

const WarpPayloads& Block::exchange(const char* instruction, const void* value, size_t bytes,
                                    Site site) {
  if (bytes > kLanePayloadBytes) throw EmuError("emu: an exchange carries at most 32 bytes a lane");
  Thread& self = *threads_[running_];
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

void Block::async_copy(uint32_t shared_destination, const void* source, size_t bytes,
                       bool read_source, Site site) {
  PendingCopy copy;
  copy.bytes = bytes;
  copy.destination = shared_pointer(shared_destination, bytes, site);
  if (shared_destination % bytes != 0) {
    throw EmuError("cp.async at " + site.text() + ": shared destination " +
                   std::to_string(shared_destination) + " is not " + std::to_string(bytes) +
                   "-byte aligned");
  }
  if (read_source) {
    check_global_read(source, bytes, "cp.async", site);
    std::memcpy(copy.data.data(), source, bytes);
  }  // else zero-filled: nothing is read
  std::memset(copy.destination, kNaNByte, bytes);
  threads_[running_]->open_copies.push_back(copy);
}

void Block::check_global_read(const void* source, size_t bytes, const char* instruction,
                              Site site) const {
  const std::vector<Allocation>* memory = shape_.global_memory;
  if (memory == nullptr || memory->empty()) return;
  const auto* begin = static_cast<const unsigned char*>(source);
  const Allocation* nearest = nullptr;
  ptrdiff_t nearest_past_end = 0;
  for (const Allocation& allocation : *memory) {
    const auto* start = static_cast<const unsigned char*>(allocation.begin);
    if (begin >= start && begin + bytes <= start + allocation.bytes) return;
    const ptrdiff_t past_end = begin + bytes - (start + allocation.bytes);
    if (begin >= start && (nearest == nullptr || past_end < nearest_past_end)) {
      nearest = &allocation;
      nearest_past_end = past_end;
    }
  }
  std::string message = instruction;
  message += " at ";
  message += site.text();
  message += ": thread ";
  message += std::to_string(running_);
  message += " reads ";
  message += std::to_string(bytes);
  message += " bytes outside every buffer of the case";
  if (nearest != nullptr) {
    message += " (ending ";
    message += std::to_string(nearest_past_end);
    message += " bytes past the end of ";
    message += nearest->name;
    message += ")";
  }
  throw EmuError(message);
}

void Block::async_commit() {
  Thread& self = *threads_[running_];
  self.committed_copies.push_back(std::move(self.open_copies));
  self.open_copies.clear();
}

void Block::async_wait(unsigned pending_groups) {
  Thread& self = *threads_[running_];
  land_async_copies(self, pending_groups, false);
}

// Lands the oldest committed groups of `thread` until `keep_pending` remain; with `seeded`, each
// of those remaining may land too, by the block's seed (a copy completes whenever it likes).
void Block::land_async_copies(Thread& thread, size_t keep_pending, bool seeded) {
  auto land = [](const CopyGroup& group) {
    for (const PendingCopy& copy : group)
      std::memcpy(copy.destination, copy.data.data(), copy.bytes);
  };
  while (thread.committed_copies.size() > keep_pending) {
    land(thread.committed_copies.front());
    thread.committed_copies.pop_front();
  }
  while (seeded && !thread.committed_copies.empty() && splitmix64(rng_state_) % 2 == 0) {
    land(thread.committed_copies.front());
    thread.committed_copies.pop_front();
  }
}

// Called when no thread can run: releases the complete warp collectives, else the block
// barrier, else reports what is stuck.
void Block::release_ready_waits() {
  bool released = false;
  const unsigned warps = static_cast<unsigned>((threads_.size() + kWarpSize - 1) / kWarpSize);
  for (unsigned w = 0; w < warps; ++w) released = release_warp(w) || released;
  if (released) return;
  if (release_barrier()) return;
  report_stuck();
}

bool Block::release_barrier() {
  std::vector<unsigned> waiting, returned, elsewhere;
  for (unsigned t = 0; t < threads_.size(); ++t) {
    switch (threads_[t]->wait) {
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
  const Site site = threads_[waiting.front()]->site;
  std::vector<unsigned> other_site;
  for (const unsigned t : waiting) {
    if (!(threads_[t]->site == site)) other_site.push_back(t);
  }
  if (!other_site.empty()) {
    throw EmuError("__syncthreads from different call sites: threads " + threads_text(waiting) +
                   " wait, thread " + std::to_string(waiting.front()) + " at " + site.text() +
                   ", thread " + std::to_string(other_site.front()) + " at " +
                   threads_[other_site.front()]->site.text());
  }
  if (!returned.empty()) {
    throw EmuError("__syncthreads at " + site.text() + " reached by threads " +
                   threads_text(waiting) + " only: threads " + threads_text(returned) +
                   " returned before it");
  }
  for (const unsigned t : waiting) threads_[t]->wait = Wait::running;
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
    Thread& leader = *threads_[t];
    if (leader.wait != Wait::warp) continue;
    const unsigned mask = leader.mask;
    bool complete = true;
    for (unsigned lane = 0; lane < kWarpSize && complete; ++lane) {
      if ((mask & (1u << lane)) == 0) continue;
      const unsigned other = first + lane;
      if (other >= last || threads_[other]->wait == Wait::finished) {
        throw EmuError(collective_name(leader) + "(" + hex_mask(mask) + ") at " +
                       leader.site.text() + ": lane " + std::to_string(lane) + " of warp " +
                       std::to_string(w) + " is in the mask but returned without reaching it");
      }
      const Thread& peer = *threads_[other];
      complete = peer.wait == Wait::warp && peer.mask == mask;
    }
    if (!complete) continue;
    unsigned votes = 0;
    for (unsigned lane = 0; lane < kWarpSize; ++lane) {
      if ((mask & (1u << lane)) == 0) continue;
      const Thread& member = *threads_[first + lane];
      if (member.collective != leader.collective || member.mode != leader.mode ||
          std::strcmp(member.instruction, leader.instruction) != 0) {
        throw EmuError("lanes of warp " + std::to_string(w) + " with mask " + hex_mask(mask) +
                       " reach different collectives: " + collective_name(leader) + " at " +
                       leader.site.text() + " and " + collective_name(member) + " at " +
                       member.site.text());
      }
      if (member.deposit != 0) votes |= 1u << lane;
      if (member.collective == Collective::exchange) warp_payloads_[w][lane] = member.payload;
    }
    for (unsigned lane = 0; lane < kWarpSize; ++lane) {
      if ((mask & (1u << lane)) == 0) continue;
      Thread& member = *threads_[first + lane];
      if (member.collective == Collective::ballot) member.received = votes;
      if (member.collective != Collective::shuffle) continue;
      const unsigned source = source_lane(member, lane);
      if ((mask & (1u << source)) == 0) {
        throw EmuError(collective_name(member) + "(" + hex_mask(mask) + ") at " +
                       member.site.text() + ": lane " + std::to_string(lane) + " of warp " +
                       std::to_string(w) + " reads lane " + std::to_string(source) +
                       ", which the mask leaves out");
      }
      member.received = threads_[first + source]->deposit;
    }
    for (unsigned lane = 0; lane < kWarpSize; ++lane) {
      if ((mask & (1u << lane)) != 0) threads_[first + lane]->wait = Wait::running;
    }
    released = true;
  }
  return released;
}

void Block::report_stuck() {
  std::map<std::string, std::vector<unsigned>> by_wait;
  for (unsigned t = 0; t < threads_.size(); ++t) {
    const Thread& thread = *threads_[t];
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
