// One emulated thread block: its CUDA threads run as fibers (fiber.h) on the calling OS thread,
// each until it reaches a synchronization point or returns; between those points the order of
// the threads is drawn from a seed, so a schedule is reproducible and different seeds try
// different orders. The block keeps CUDA's rules where the hardware leaves them undefined and
// reports them instead of hanging or guessing (issue 14, item 5):
//   - a __syncthreads reached by part of the block only (others returned or wait elsewhere),
//     or from different call sites;
//   - a warp collective (__syncwarp, __shfl*_sync, __ballot_sync) whose mask names a lane that
//   never arrives,
//     that leaves out a lane it reads from, or that lanes call with different masks;
//   - a deadlock: every live thread waits and no wait can be released.
// A report is an EmuError whose one-line message names the threads and the source lines.
// Under a sanitizer build (sanitizer.h) the block also draws CUDA's happens-before edges for
// ThreadSanitizer (each barrier, named barrier and warp collective: a release by every thread
// that reaches it, an acquire by every thread it releases) and poisons the shared memory outside
// what the kernel was given for AddressSanitizer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/emu/fiber.h"
#include "kernels/emu/tma.h"
#include "kernels/emu/wgmma.h"

namespace attnbench::emu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  unsigned count() const { return x * y * z; }
};

// A buffer of the case a launch may read and write ("device memory"): the emulated instructions
// that read global memory (cp.async) check their bytes lie inside one.
struct Allocation {
  const void* begin = nullptr;
  size_t bytes = 0;
  std::string name;  // "q", "out", ...
};

// Where a thread waits: a source line, as the caller's __builtin_FILE/__builtin_LINE give it.
struct Site {
  const char* file = "";
  int line = 0;
  std::string text() const;
  bool operator==(const Site& other) const {
    return line == other.line && std::strcmp(file, other.file) == 0;
  }
};

class EmuError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

constexpr unsigned kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;
// What one lane gives a full-warp exchange (ldmatrix: an address; mma: its A and B fragments).
constexpr size_t kLanePayloadBytes = 32;
using LanePayload = std::array<unsigned char, kLanePayloadBytes>;
using WarpPayloads = std::array<LanePayload, kWarpSize>;
// Static __shared__ variables of one block together: CUDA's limit without opt-in.
constexpr size_t kStaticSharedBytes = 48 * 1024;

class Block;
// The block whose thread runs on this OS thread (null outside one); constinit, so reading it from
// another file is a plain thread-local load.
extern constinit thread_local Block* g_current_block;

class Block {
 public:
  struct Shape {
    Dim3 block_dim;
    Dim3 block_index;
    Dim3 grid_dim;
    size_t dynamic_shared_bytes = 0;
    const std::vector<Allocation>* global_memory = nullptr;  // null or empty: unchecked
  };
  Block(const Shape& shape, uint64_t seed);
  ~Block();
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  // Runs `body` as every thread of the block to its end, or throws EmuError with the report.
  // Each thread, as it returns, releases `launch_end` (sanitizer.h): whoever acquires it after
  // the launch is ordered after everything the block did.
  void run(const std::function<void()>& body, const void* launch_end = nullptr);

  // A hash of the order the threads ran in: equal for equal seeds, different for most others.
  uint64_t schedule_hash() const { return schedule_hash_; }

  // ---- from inside a thread of the running block (current()) ------------------------------
  // Inline: every threadIdx, shuffle and barrier of a kernel goes through it.
  static Block& current() {
    if (g_current_block == nullptr) throw_outside_a_block();
    return *g_current_block;
  }
  // "block (1,0,0) thread 37" for the thread running on this OS thread; "" outside a block.
  static std::string running_thread_name();
  [[noreturn]] static void throw_outside_a_block();
  // Whether `pointer` lies in this block's shared memory (static or dynamic), else it is global.
  bool in_shared_memory(const void* pointer) const {
    const auto* p = static_cast<const unsigned char*>(pointer);
    return p >= shared_storage_.data() && p < shared_storage_.data() + shared_storage_.size();
  }
  // threadIdx: read on every use of it in a kernel, so a lookup, not three divisions.
  Dim3 thread_index() const { return thread_indices_[running_]; }
  Dim3 block_index() const { return shape_.block_index; }
  Dim3 block_dim() const { return shape_.block_dim; }
  Dim3 grid_dim() const { return shape_.grid_dim; }
  unsigned linear_thread() const { return running_; }
  unsigned lane() const { return running_ % kWarpSize; }
  // The block's dynamic shared memory: 16-byte aligned at a seeded offset (not 1024-aligned, as a
  // kernel that assumed more alignment than CUDA promises would otherwise pass by luck).
  void* dynamic_shared() const { return dynamic_shared_; }

  void sync_threads(Site site);
  // Named barriers (bar.sync / bar.arrive id, count): barrier `id` (0-15) completes when
  // `count` threads (a multiple of 32) have reached it, waiting (sync) or not (arrive); the
  // waiters then go on. A count that differs from the one the barrier is counting to, or a
  // barrier that never completes (a deadlock), is reported.
  void named_barrier_sync(unsigned id, unsigned count, Site site);
  void named_barrier_arrive(unsigned id, unsigned count, Site site);
  void sync_warp(unsigned mask, Site site);
  // The __shfl*_sync family: the value of the source lane within segments of `width` lanes.
  // xor_lane: lane ^ arg; index: arg; up: lane - arg; down: lane + arg (a source outside the
  // lane's segment gives its own value, as CUDA defines it).
  enum class Shuffle : uint8_t { xor_lane, index, up, down };
  template <typename T>
  T shfl(Shuffle mode, unsigned mask, T value, int arg, int width, Site site);
  template <typename T>
  T shfl_xor(unsigned mask, T value, int lane_mask, int width, Site site) {
    return shfl(Shuffle::xor_lane, mask, value, lane_mask, width, site);
  }
  // __ballot_sync, __any_sync, __all_sync over the lanes of `mask`.
  unsigned ballot(unsigned mask, bool predicate, Site site);
  // The .sync.aligned warp instructions (ldmatrix, mma): every lane of the warp gives
  // `bytes` (<= kLanePayloadBytes) and gets back every lane's, indexed by lane. Valid until the
  // warp's next exchange, which no lane reaches before this one's readers are done.
  const WarpPayloads& exchange(const char* instruction, const void* value, size_t bytes, Site site);

  // Static __shared__ storage: one slot per `tag` (the address of a function-scope static of
  // the declaring code) and block, made by the first thread that reaches it, filled with NaN
  // bytes as uninitialized shared memory may hold anything.
  void* static_shared(const void* tag, size_t bytes, size_t alignment, Site site);
  // The shared state space as 32-bit addresses (cvta.to.shared), checked against the block's
  // shared memory: a pointer outside it, or an access of `bytes` reaching past it, is reported.
  uint32_t shared_address(const void* pointer, Site site) const;
  unsigned char* shared_pointer(uint32_t address, size_t bytes, Site site) const;

  // cp.async for the running thread: the destination is NaN from issue; the data lands at a
  // seeded synchronization point of the issuing thread, and at the latest at the wait_group
  // that completes its group (or when the thread returns).
  // Returns the destination (the caller notes the write for the race build).
  unsigned char* async_copy(uint32_t shared_destination, const void* source, size_t bytes,
                            bool read_source, Site site);
  void async_commit();
  // Reports a read of global memory that does not lie inside one of the launch's buffers.
  void check_global_read(const void* source, size_t bytes, const char* instruction,
                         Site site) const;
  // The same for a write (a TMA store through a map that reaches past its tensor's buffer).
  void check_global_write(const void* destination, size_t bytes, const char* instruction,
                          Site site) const;
  void check_global_access(const void* pointer, size_t bytes, const char* instruction,
                           const char* verb, Site site) const;
  // Completes the oldest groups until `pending_groups` remain. Returns the destinations of the
  // copies it completed (filled in the race build only, where the caller notes them as written).
  struct CopyTarget {
    unsigned char* destination;
    size_t bytes;
  };
  const std::vector<CopyTarget>& async_wait(unsigned pending_groups);
  // mbarriers (Hopper's transaction barriers, an 8-byte object in shared memory, here kept by
  // the block per shared address): init sets the arrival count of each phase; arrive counts one
  // arrival, after adding `expect_tx_bytes` to the phase's transaction count; complete_tx (a TMA
  // copy landing) subtracts its bytes; the phase completes when every arrival is in and the
  // transaction count is zero, and the next phase begins. wait_parity returns once the phase of
  // that parity has completed (try_wait.parity in a loop). Reported: a barrier used before init
  // or initialized twice, more arrivals than the count, a wait that never completes (a deadlock,
  // with the barrier's state).
  void mbarrier_init(uint32_t address, unsigned count, Site site);
  void mbarrier_arrive(uint32_t address, uint32_t expect_tx_bytes, Site site);
  void mbarrier_expect_tx(uint32_t address, uint32_t bytes, Site site);
  void mbarrier_complete_tx(uint32_t address, uint32_t bytes, Site site);
  void mbarrier_wait_parity(uint32_t address, unsigned parity, Site site);
  // cp.async.bulk.tensor (TMA) for the running thread: the box of `map` at `coordinates`
  // (innermost first) to the shared address `destination` (128-byte aligned), with the map's
  // swizzle, completing on the mbarrier at `barrier` by the box's bytes. The destination is NaN
  // from issue; the box lands at a point drawn at issue (one of the issuing thread's next
  // synchronization points) or, at the latest, when no thread could otherwise go on; for the
  // race build the landing is ordered after everything the issuer did before the issue,
  // whichever context it runs in.
  void tma_load(const TensorMap& map, const std::array<int32_t, 4>& coordinates,
                uint32_t destination, uint32_t barrier, Site site);
  // cp.async.bulk.tensor's store (shared to global, bulk_group completion) for the running
  // thread: the box at the shared address `source` (128-byte aligned, laid out with the map's
  // swizzle) to `coordinates` of the map's tensor, elements outside it skipped. The source is
  // read at the cp.async.bulk.wait_group that completes the store's group, the latest the
  // hardware may read it, so shared memory reused before that wait stores the wrong values; a
  // byte stored with no fence.proxy.async since is reported, as is a thread returning with a
  // store it never waited for.
  void tma_store(const TensorMap& map, const std::array<int32_t, 4>& coordinates, uint32_t source,
                 Site site);
  void bulk_commit();
  void bulk_wait(unsigned pending_groups, Site site);
  // wgmma.mma_async and its fence / commit_group / wait_group for the running thread
  // (kernels/emu/wgmma.h). The wait computes the products of the groups it completes and returns
  // the 16-byte chunks of shared memory they read (filled in the race build only, which notes
  // them as read then).
  void wgmma_fence(Site site);
  void wgmma_issue(const WgmmaOp& op, Site site);
  void wgmma_commit(Site site);
  const std::vector<const unsigned char*>& wgmma_wait(unsigned pending_groups, Site site);
  // fence.proxy.async: the shared memory the running thread's ordinary stores wrote becomes
  // visible to the async proxy (TMA, wgmma). Modeled for the dynamic shared memory as a view of
  // what the async proxy may read: a fence publishes every ordinary store made so far (by any
  // thread: a fence in one thread covering another's stores is missed), TMA writes go to both.
  // A wgmma operand byte that differs from the view was stored without a fence since: reported.
  void fence_proxy_async(Site site);
  // elect.sync: true in one lane of `mask`, drawn from the block's seed, false in the others.
  bool elect_one(unsigned mask, Site site);
  bool any(unsigned mask, bool predicate, Site site) { return ballot(mask, predicate, site) != 0; }
  bool all(unsigned mask, bool predicate, Site site) {
    return ballot(mask, predicate, site) == mask;
  }

 private:
  enum class Wait : uint8_t { running, barrier, named, warp, mbarrier, finished };
  struct Thread;
  struct CopyGroup;
  // Thrown into a suspended thread's fiber to unwind it when the block stops on a report.
  struct Cancelled {};

  void schedule();
  void release_ready_waits();
  bool release_barrier();
  bool release_warp(unsigned warp);
  [[noreturn]] void report_stuck();
  void finish_thread(unsigned t);
  // Suspends the running thread without a wait: the threads the scheduler's next round puts
  // first run before it resumes.
  void let_others_run();
  enum class Collective : uint8_t { sync_warp, shuffle, ballot, exchange, elect };
  struct MBarrier;
  struct BulkCopy;
  void land_bulk_copy(BulkCopy& copy);
  void land_due_bulk_copies(unsigned issuer);
  bool land_any_bulk_copy();
  MBarrier& mbarrier_at(uint32_t address, const char* instruction, Site site);
  void complete_mbarrier_phase(uint32_t address, MBarrier& barrier);
  unsigned elected_lane(unsigned mask);
  std::vector<float> complete_wgmma(const PendingWgmma& pending, Site wait_site);
  // The async proxy's copy of the shared byte at `pointer` (null outside the dynamic memory).
  unsigned char* async_view_of(const unsigned char* pointer);
  // cp.async groups of `thread`: at a synchronization point those whose drawn point it is land;
  // at the completing wait the oldest land until `keep_pending` remain (their destinations
  // noted as written again for the race build: written from issue to that wait).
  void land_some_async_copies(Thread& thread);
  void complete_async_copies(Thread& thread, size_t keep_pending);
  void finish_thread();
  void cancel_suspended_threads() noexcept;
  // The sync objects of the happens-before edges: for each barrier a ring of phases, so a thread
  // acquires the phase it waited in, not a later one that faster threads already release into.
  const void* barrier_edge() const;
  const void* named_edge(unsigned id) const;
  unsigned warp_edge_slot(unsigned warp, unsigned mask) const;
  const void* warp_edge(unsigned warp, unsigned mask) const;
  // Counts the running thread into named barrier `id`; true when that completed the barrier.
  bool count_into_named_barrier(const char* instruction, unsigned id, unsigned count, Site site);
  uint64_t collective(Collective kind, Shuffle mode, unsigned mask, uint64_t word, int arg,
                      int width, Site site);
  std::string collective_name(const Thread& thread) const;
  static unsigned source_lane(const Thread& member, unsigned lane);
  void wait(Wait kind, Site site, unsigned mask);
  std::string threads_text(const std::vector<unsigned>& threads) const;

  Shape shape_;
  uint64_t rng_state_;  // the seed's stream: the shared-memory offset, then the schedule
  uint64_t schedule_hash_ = 0;
  // One allocation, in index order: the scheduler reads every thread's state each round.
  std::vector<Thread> threads_;
  std::vector<Dim3> thread_indices_;  // threadIdx of each thread, by its linear index
  unsigned running_ = 0;
  std::vector<unsigned char> shared_storage_;  // [pad][dynamic][static], NaN-filled
  std::vector<unsigned char> async_view_;  // the dynamic shared memory as the async proxy sees it
  size_t dynamic_bytes_ = 0;
  unsigned char* shared_window_ = nullptr;  // shared address 0
  void* dynamic_shared_ = nullptr;
  unsigned char* static_begin_ = nullptr;
  size_t static_used_ = 0;
  std::vector<std::pair<const void*, void*>> static_slots_;
  std::vector<WarpPayloads> warp_payloads_;
  static constexpr unsigned kNamedBarriers = 16;
  std::array<unsigned, kNamedBarriers> named_expected_{};  // 0: the barrier is not counting
  std::array<unsigned, kNamedBarriers> named_reached_{};   // threads counted in this phase
  const std::function<void()>* body_ = nullptr;
  const void* launch_end_ = nullptr;
  char block_start_ = 0;  // the host releases it as the block starts, each thread acquires it
  bool cancelling_ = false;
  static constexpr unsigned kPhaseRing = 4;
  unsigned barrier_phase_ = 0;
  std::array<unsigned, kNamedBarriers> named_phase_{};
  std::vector<unsigned> warp_phase_;  // per (warp, lowest lane of the collective's mask)
  std::vector<char> edges_;           // the sync objects: [barrier | named | warp slots][ring]
  std::vector<CopyTarget> completed_copies_;                 // of the last async_wait (race build)
  std::vector<const unsigned char*> wgmma_chunks_read_;      // of the last wgmma_wait
  std::map<uint32_t, std::unique_ptr<MBarrier>> mbarriers_;  // by shared address
  std::vector<std::unique_ptr<BulkCopy>> bulk_copies_;       // TMA boxes in flight, oldest first
};

template <typename T>
T Block::shfl(Shuffle mode, unsigned mask, T value, int arg, int width, Site site) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= sizeof(uint64_t),
                "shuffles move values of up to 8 bytes");
  uint64_t word = 0;
  std::memcpy(&word, &value, sizeof(T));
  word = collective(Collective::shuffle, mode, mask, word, arg, width, site);
  T result;
  std::memcpy(&result, &word, sizeof(T));
  return result;
}

}  // namespace attnbench::emu
