// cp.async for an emulated block (block.h): a copy reads its source at issue, its destination is
// NaN from issue until its group lands, at a point drawn at commit or at the completing wait.
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/emu/block.h"
#include "kernels/emu/block_thread.h"
#include "kernels/emu/sanitizer.h"
#include "reference/random.h"

namespace attnbench::emu {

unsigned char* Block::async_copy(uint32_t shared_destination, const void* source, size_t bytes,
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
  threads_[running_].open_copies.push_back(copy);
  return copy.destination;
}

void Block::check_global_read(const void* source, size_t bytes, const char* instruction,
                              Site site) const {
  check_global_access(source, bytes, instruction, "reads", site);
}

void Block::check_global_write(const void* destination, size_t bytes, const char* instruction,
                               Site site) const {
  check_global_access(destination, bytes, instruction, "writes", site);
}

void Block::check_global_access(const void* source, size_t bytes, const char* instruction,
                                const char* verb, Site site) const {
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
  message += " ";
  message += verb;
  message += " ";
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
  Thread& self = threads_[running_];
  CopyGroup group{std::move(self.open_copies)};
  const uint64_t draw = splitmix64(rng_state_) % (2 * CopyGroup::kLandingSpread);
  if (draw < CopyGroup::kLandingSpread) group.syncs_before_landing = static_cast<int>(draw);
  self.committed_copies.push_back(std::move(group));
  self.open_copies.clear();
}

const std::vector<Block::CopyTarget>& Block::async_wait(unsigned pending_groups) {
  completed_copies_.clear();
  complete_async_copies(threads_[running_], pending_groups);
  return completed_copies_;
}

namespace {

void land(std::vector<PendingCopy>& copies, bool& landed) {
  if (landed) return;
  for (const PendingCopy& copy : copies)
    std::memcpy(copy.destination, copy.data.data(), copy.bytes);
  landed = true;
}

}  // namespace

void Block::land_some_async_copies(Thread& thread) {
  for (CopyGroup& group : thread.committed_copies) {
    if (group.landed || group.syncs_before_landing == CopyGroup::kLandsAtCompletion) continue;
    if (group.syncs_before_landing-- == 0) land(group.copies, group.landed);
  }
}

void Block::complete_async_copies(Thread& thread, size_t keep_pending) {
  while (thread.committed_copies.size() > keep_pending) {
    CopyGroup& group = thread.committed_copies.front();
    land(group.copies, group.landed);
    if constexpr (kSanitizer == Sanitizer::thread) {
      for (const PendingCopy& copy : group.copies)
        completed_copies_.push_back({copy.destination, copy.bytes});
    }
    thread.committed_copies.erase(thread.committed_copies.begin());
  }
}

// ---- cp.async.bulk.tensor (TMA) ---------------------------------------------------------------

namespace {

// The box's start along the innermost dimension must lie on a 16-byte boundary (before the tensor
// too): an H200 stops on an illegal instruction for a box that starts 3 bf16 elements in and loads
// the same box 8 elements in (PtxConformance's TMA ladder, 2026-12-04). Measured for loads; stores
// are held to the same rule.
void check_inner_start(const TensorMap& map, const std::array<int32_t, 4>& coordinates,
                       const char* what, Site site) {
  const int64_t start_bytes = int64_t{coordinates[0]} * map.element_bytes;
  if (start_bytes % 16 != 0) {
    throw EmuError(std::string(what) + " at " + site.text() + ": the box starts at element " +
                   std::to_string(coordinates[0]) + " of the innermost dimension, " +
                   std::to_string(start_bytes) +
                   " bytes, not a multiple of 16 (the hardware stops on an illegal instruction)");
  }
}

}  // namespace

void Block::tma_load(const TensorMap& map, const std::array<int32_t, 4>& coordinates,
                     uint32_t destination, uint32_t barrier, Site site) {
  const uint64_t bytes = map.box_bytes();
  const uint64_t inner_bytes = uint64_t{map.box[0]} * map.element_bytes;
  if (destination % 128 != 0 ||
      (map.swizzle != Swizzle::none && inner_bytes > static_cast<uint64_t>(map.swizzle))) {
    throw EmuError("cp.async.bulk.tensor at " + site.text() + ": the destination " +
                   std::to_string(destination) + " must be 128-byte aligned and a swizzled box's " +
                   "inner dimension (" + std::to_string(inner_bytes) +
                   " bytes) at most the swizzle's span");
  }
  check_inner_start(map, coordinates, "cp.async.bulk.tensor", site);
  mbarrier_at(barrier, "cp.async.bulk.tensor", site);  // the barrier must exist at issue
  shared_pointer(destination, bytes, site);            // the box must lie in shared memory
  auto copy = std::make_unique<BulkCopy>();
  copy->bytes = gather_box(map, coordinates, [&](const void* element, size_t element_bytes) {
    check_global_read(element, element_bytes, "cp.async.bulk.tensor", site);
  });
  // In flight: the bytes the box will write (its swizzled image) are NaN until it lands, in both
  // proxies; bytes of its rows it does not write keep their values, as on the hardware.
  for (uint64_t i = 0; i < bytes; ++i) {
    unsigned char* byte = shared_pointer(
        swizzled_address(destination + static_cast<uint32_t>(i), map.swizzle), 1, site);
    *byte = kNaNByte;
    if (unsigned char* seen = async_view_of(byte)) *seen = kNaNByte;
  }
  copy->destination = destination;
  copy->swizzle = map.swizzle;
  copy->barrier = barrier;
  copy->issuer = running_;
  constexpr uint64_t kLandingSpread = 16;
  const uint64_t draw = splitmix64(rng_state_) % (2 * kLandingSpread);
  if (draw < kLandingSpread) copy->syncs_before_landing = static_cast<int>(draw);
  sanitizer::release(copy.get());  // the landing, wherever it runs, comes after this issue
  bulk_copies_.push_back(std::move(copy));
}

void Block::tma_store(const TensorMap& map, const std::array<int32_t, 4>& coordinates,
                      uint32_t source, Site site) {
  if (source % 128 != 0) {
    throw EmuError("cp.async.bulk.tensor (store) at " + site.text() + ": the shared source " +
                   std::to_string(source) + " is not 128-byte aligned");
  }
  check_inner_start(map, coordinates, "cp.async.bulk.tensor (store)", site);
  shared_pointer(source, map.box_bytes(), site);  // the box must lie in shared memory
  threads_[running_].open_stores.push_back({map, coordinates, source, site});
}

void Block::bulk_commit() {
  Thread& self = threads_[running_];
  self.committed_stores.push_back(std::move(self.open_stores));
  self.open_stores.clear();
}

// Completes the oldest bulk groups until `pending_groups` remain: each store reads its box from
// shared memory now (through the async proxy: a byte an ordinary store changed with no fence
// since is reported) and writes it to global memory.
void Block::bulk_wait(unsigned pending_groups, Site site) {
  Thread& self = threads_[running_];
  while (self.committed_stores.size() > pending_groups) {
    const std::vector<PendingStore> group = std::move(self.committed_stores.front());
    self.committed_stores.erase(self.committed_stores.begin());
    for (const PendingStore& store : group) {
      std::vector<unsigned char> bytes(store.map.box_bytes());
      for (size_t i = 0; i < bytes.size(); ++i) {
        const uint32_t at =
            swizzled_address(store.source + static_cast<uint32_t>(i), store.map.swizzle);
        const unsigned char* byte = shared_pointer(at, 1, store.site);
        const unsigned char* seen = async_view_of(byte);
        if (seen != nullptr && *seen != *byte) {
          throw EmuError("cp.async.bulk.tensor (store) issued at " + store.site.text() +
                         " reads shared address " + std::to_string(at) +
                         ", written by an ordinary store with no fence.proxy.async since (the "
                         "TMA reads through the async proxy); completed at " +
                         site.text());
        }
        bytes[i] = *byte;
      }
      sanitizer::note_read(shared_pointer(store.source, bytes.size(), store.site), bytes.size());
      scatter_box(store.map, store.coordinates, bytes,
                  [&](void* element, const unsigned char* from, size_t element_bytes) {
                    check_global_write(element, element_bytes, "cp.async.bulk.tensor (store)",
                                       store.site);
                    std::memcpy(element, from, element_bytes);
                    sanitizer::note_write(element, element_bytes);
                  });
    }
  }
}

void Block::land_bulk_copy(BulkCopy& copy) {
  sanitizer::acquire(&copy);
  for (size_t i = 0; i < copy.bytes.size(); ++i) {
    const uint32_t at = swizzled_address(copy.destination + static_cast<uint32_t>(i), copy.swizzle);
    unsigned char* byte = shared_pointer(at, 1, {});
    *byte = copy.bytes[i];
    if (unsigned char* seen = async_view_of(byte)) *seen = copy.bytes[i];
  }
  sanitizer::note_write(shared_pointer(copy.destination, copy.bytes.size(), {}), copy.bytes.size());
  mbarrier_complete_tx(copy.barrier, static_cast<uint32_t>(copy.bytes.size()), {});
}

// At a synchronization point of `issuer`: its boxes whose drawn point it is land.
void Block::land_due_bulk_copies(unsigned issuer) {
  for (size_t i = 0; i < bulk_copies_.size();) {
    BulkCopy& copy = *bulk_copies_[i];
    if (copy.issuer == issuer && copy.syncs_before_landing >= 0 &&
        copy.syncs_before_landing-- == 0) {
      const std::unique_ptr<BulkCopy> landing = std::move(bulk_copies_[i]);
      bulk_copies_.erase(bulk_copies_.begin() + static_cast<ptrdiff_t>(i));
      land_bulk_copy(*landing);
      continue;
    }
    ++i;
  }
}

// When no thread can go on: the oldest box in flight lands (the copy engine never waits for a
// thread). False when none is in flight.
bool Block::land_any_bulk_copy() {
  if (bulk_copies_.empty()) return false;
  const std::unique_ptr<BulkCopy> landing = std::move(bulk_copies_.front());
  bulk_copies_.erase(bulk_copies_.begin());
  land_bulk_copy(*landing);
  return true;
}

}  // namespace attnbench::emu
