#include "kernels/cpu/phases.h"

#include <omp.h>

#include <atomic>
#include <chrono>
#include <stdexcept>

namespace attnbench {
namespace {

std::atomic<PhaseRecording*> g_recording{nullptr};
// Counts recordings, so a phase marked under one is never closed into the next (which may live
// at the same address).
std::atomic<uint64_t> g_recordings{0};

}  // namespace


// Events reserved per thread, so appending does not reallocate inside a forward's phases.
constexpr size_t kReservedEvents = 1 << 16;

PhaseRecording::PhaseRecording(int threads)
    : threads_(static_cast<size_t>(threads > 0 ? threads : 1)) {
  for (ThreadEvents& thread : threads_) thread.events.reserve(kReservedEvents);
  PhaseRecording* expected = nullptr;
  g_recordings.fetch_add(1);
  if (!g_recording.compare_exchange_strong(expected, this)) {
    throw std::logic_error("PhaseRecording: another recording is already installed");
  }
}

PhaseRecording::~PhaseRecording() { g_recording.store(nullptr); }

void PhaseRecording::record(int thread, const PhaseEvent& event) {
  if (thread >= 0 && static_cast<size_t>(thread) < threads_.size()) {
    threads_[static_cast<size_t>(thread)].events.push_back(event);
  }
}

void PhaseRecording::record_shared(int thread, const PhaseEvent& event) {
  std::lock_guard<std::mutex> lock(shared_mutex_);
  record(thread, event);
}

std::vector<std::vector<PhaseEvent>> PhaseRecording::by_thread() const {
  std::vector<std::vector<PhaseEvent>> events;
  for (const ThreadEvents& thread : threads_) events.push_back(thread.events);
  return events;
}

PhaseScope::PhaseScope(const char* phase)
    : recording_(g_recording.load(std::memory_order_relaxed)), phase_(phase) {
  if (recording_ != nullptr) start_ns_ = phase_clock_ns();
}

PhaseScope::~PhaseScope() {
  if (recording_ != nullptr) {
    recording_->record(omp_get_thread_num(), PhaseEvent{phase_, start_ns_, phase_clock_ns()});
  }
}

void PhaseScope::next(const char* phase) {
  if (recording_ == nullptr || phase == phase_) {
    phase_ = phase;
    return;
  }
  recording_->record(omp_get_thread_num(), PhaseEvent{phase_, start_ns_, phase_clock_ns()});
  phase_ = phase;
  start_ns_ = phase_clock_ns();  // after the append: its cost is nobody's phase
}

namespace {

// The phase mark_phase started on this thread, and under which recording (g_recordings' count).
struct MarkedPhase {
  uint64_t recording = 0;
  const char* phase = nullptr;
  int64_t start_ns = 0;
};
thread_local MarkedPhase t_marked;

}  // namespace

void mark_phase(const char* phase) {
  PhaseRecording* recording = g_recording.load(std::memory_order_relaxed);
  MarkedPhase& marked = t_marked;
  if (recording == nullptr) {
    marked.phase = nullptr;
    return;
  }
  const uint64_t current = g_recordings.load(std::memory_order_relaxed);
  if (marked.phase != nullptr && marked.recording == current) {
    recording->record_shared(omp_get_thread_num(),
                             PhaseEvent{marked.phase, marked.start_ns, phase_clock_ns()});
  }
  marked.recording = current;
  marked.phase = phase;
  if (phase != nullptr) marked.start_ns = phase_clock_ns();
}

}  // namespace attnbench
