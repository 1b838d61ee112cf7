// Where a CPU forward spends its time (issue 17, `attnbench profile`): a kernel marks each phase of
// its work (scores, mask, softmax, output, ...) with a PhaseScope. While a PhaseRecording lives,
// every scope appends (phase, start, end) on the host's steady clock to its OpenMP thread's list;
// otherwise constructing a scope is one relaxed atomic load and next() a call that returns at
// once. Scopes must not nest: a thread's phases do not overlap, so their times add up. Recording
// costs a clock read and an append per phase change; that time falls between two phases (the
// profile's "gaps"), not inside one.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

namespace attnbench {

struct PhaseEvent {
  const char* phase;  // a string literal of the kernel's
  int64_t start_ns;   // phase_clock_ns()
  int64_t end_ns;
};

// The steady clock in nanoseconds, as the events, the emulated launches and the profiler's forward
// time read it.
inline int64_t phase_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Installs itself for its lifetime (one at a time). Events of threads numbered past `threads` are
// dropped (the profiler sizes it by omp_get_max_threads()).
class PhaseRecording {
 public:
  explicit PhaseRecording(int threads);
  ~PhaseRecording();
  PhaseRecording(const PhaseRecording&) = delete;
  PhaseRecording& operator=(const PhaseRecording&) = delete;

  void record(int thread, const PhaseEvent& event);
  // The same under a lock, for marks from threads attnbench does not number (mark_phase).
  void record_shared(int thread, const PhaseEvent& event);
  // Per OpenMP thread number, each in the order its scopes ended.
  std::vector<std::vector<PhaseEvent>> by_thread() const;

 private:
  // One thread's list on a cache line of its own: threads append side by side.
  struct alignas(64) ThreadEvents {
    std::vector<PhaseEvent> events;
  };
  std::vector<ThreadEvents> threads_;
  std::mutex shared_mutex_;
};

// A phase marked by calls rather than by a scope, for kernels from outside the build (the plugin
// ABI's phase callback, which Python kernels reach through attnbench_bridge.phase): starts
// `phase` on the calling thread, ending the phase this thread marked before; null only ends it.
// Any thread may mark: one outside an OpenMP team records on track 0 (its OpenMP number), under
// a lock, so a plugin's own threads share that track. Outside a recording it is one relaxed
// atomic load. The name must outlive the recording.
void mark_phase(const char* phase);

// One phase from construction to destruction, or to next(), which ends it and starts another (a
// next() to the phase already running changes nothing).
class PhaseScope {
 public:
  explicit PhaseScope(const char* phase);
  ~PhaseScope();
  void next(const char* phase);
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  PhaseRecording* recording_;  // null: not recording
  const char* phase_;
  int64_t start_ns_ = 0;
};

}  // namespace attnbench
