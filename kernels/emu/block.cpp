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

struct Block::Thread {
  std::unique_ptr<Fiber> fiber;
  Wait wait = Wait::running;
  Site site;
  unsigned mask = 0;                          // a warp wait's mask
  Collective collective = Collective::sync_warp;  // which warp collective it waits in
  Shuffle mode = Shuffle::xor_lane;           // shuffles: how the source lane is found
  int arg = 0;                                // shuffles: the xor mask, index or delta
  int width = kWarpSize;                      // shuffles: the segment width
  uint64_t deposit = 0;                       // this lane's value (shuffle) or predicate (ballot)
  uint64_t received = 0;                      // what the collective gives it back
};

Block::Block(const Shape& shape, uint64_t seed) : shape_(shape), rng_state_(seed) {
  constexpr size_t kPage = 1024;
  const size_t offset = 16 * (1 + splitmix64(rng_state_) % 63);  // 16..1008: never 1024-aligned
  shared_storage_.resize(shape.dynamic_shared_bytes + 2 * kPage);
  const auto base = reinterpret_cast<uintptr_t>(shared_storage_.data());
  const uintptr_t aligned = (base + kPage - 1) / kPage * kPage;
  dynamic_shared_ = reinterpret_cast<void*>(aligned + offset);
}

Block::~Block() = default;

Block& Block::current() {
  if (g_current == nullptr) throw EmuError("emu: a CUDA built-in was used outside an emulated block");
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
      if (!threads_[t]->fiber->resume()) threads_[t]->wait = Wait::finished;
    }
  }
}

void Block::wait(Wait kind, Site site, unsigned mask) {
  Thread& self = *threads_[running_];
  self.wait = kind;
  self.site = site;
  self.mask = mask;
  const unsigned me = running_;
  while (threads_[me]->wait != Wait::running) threads_[me]->fiber->yield();
  running_ = me;
}

void Block::sync_threads(Site site) { wait(Wait::barrier, site, 0); }

void Block::sync_warp(unsigned mask, Site site) {
  collective(Collective::sync_warp, Shuffle::xor_lane, mask, 0, 0, kWarpSize, site);
}

unsigned Block::ballot(unsigned mask, bool predicate, Site site) {
  return static_cast<unsigned>(
      collective(Collective::ballot, Shuffle::xor_lane, mask, predicate ? 1 : 0, 0, kWarpSize, site));
}

std::string Block::collective_name(const Thread& thread) const {
  switch (thread.collective) {
    case Collective::sync_warp: return "__syncwarp";
    case Collective::ballot: return "__ballot_sync";
    case Collective::shuffle: break;
  }
  switch (thread.mode) {
    case Shuffle::xor_lane: return "__shfl_xor_sync";
    case Shuffle::index: return "__shfl_sync";
    case Shuffle::up: return "__shfl_up_sync";
    case Shuffle::down: return "__shfl_down_sync";
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
      case Wait::barrier: waiting.push_back(t); break;
      case Wait::finished: returned.push_back(t); break;
      default: elsewhere.push_back(t); break;
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
    throw EmuError("__syncthreads at " + site.text() + " reached by threads " + threads_text(waiting) +
                   " only: threads " + threads_text(returned) + " returned before it");
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
    case Shuffle::xor_lane: source = lane ^ arg; break;
    case Shuffle::index: return segment + arg % width;
    case Shuffle::up: source = lane - arg; break;  // wraps below the segment: own value
    case Shuffle::down: source = lane + arg; break;
  }
  return source < segment || source >= segment + width ? lane : source;
}

// Releases every group of lanes of warp `w` whose collective is complete: each lane its mask
// names waits in a warp collective with the same mask.
bool Block::release_warp(unsigned w) {
  const unsigned first = w * kWarpSize;
  const unsigned last = std::min<unsigned>(first + kWarpSize, static_cast<unsigned>(threads_.size()));
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
      if (member.collective != leader.collective || member.mode != leader.mode) {
        throw EmuError("lanes of warp " + std::to_string(w) + " with mask " + hex_mask(mask) +
                       " reach different collectives: " + collective_name(leader) + " at " +
                       leader.site.text() + " and " + collective_name(member) + " at " +
                       member.site.text());
      }
      if (member.deposit != 0) votes |= 1u << lane;
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
      case Wait::barrier: by_wait["__syncthreads at " + thread.site.text()].push_back(t); break;
      case Wait::warp:
        by_wait[collective_name(thread) + "(" + hex_mask(thread.mask) + ") at " + thread.site.text()]
            .push_back(t);
        break;
      case Wait::finished: by_wait["returned"].push_back(t); break;
      case Wait::running: break;
    }
  }
  std::string message = "deadlock: every thread waits and none can be released:";
  for (const auto& [where, threads] : by_wait) message += " threads " + threads_text(threads) + " " + where + ";";
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
