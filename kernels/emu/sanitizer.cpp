#include "kernels/emu/sanitizer.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>

#include "kernels/emu/block.h"
#include "kernels/emu/sanitizer_report.h"

#if defined(ATTNBENCH_EMU_SANITIZE_THREAD)
#include <sanitizer/tsan_interface.h>
#endif
#if defined(ATTNBENCH_EMU_SANITIZE_ADDRESS)
#include <sanitizer/asan_interface.h>
#endif
#if defined(ATTNBENCH_EMU_SANITIZE_THREAD) || defined(ATTNBENCH_EMU_SANITIZE_ADDRESS)
#include <sanitizer/common_interface_defs.h>
#endif

namespace attnbench::emu {

const char* sanitizer_build_name() {
  switch (kSanitizer) {
    case Sanitizer::thread:
      return "race";
    case Sanitizer::address:
      return "bounds";
    case Sanitizer::none:
      break;
  }
  return "plain";
}

namespace sanitizer {

namespace {

// Set when the sanitizer prints a report (its summary hook, below): the block stops at the
// running thread's next synchronization point instead of running on into more reports.
std::atomic<bool> g_report_printed{false};

// The emulated thread that was running when ASan found an error (ASan names OS threads only).
std::mutex g_report_mutex;
std::string g_faulting_thread;
std::string g_last_report_text;

// Reports go to an unnamed temporary file, read back after each launch.
FILE* report_file() {
  static FILE* file = [] {
    FILE* opened = std::tmpfile();
#if defined(ATTNBENCH_EMU_SANITIZE_THREAD) || defined(ATTNBENCH_EMU_SANITIZE_ADDRESS)
    if (opened != nullptr) {
      __sanitizer_set_report_fd(reinterpret_cast<void*>(static_cast<intptr_t>(fileno(opened))));
    }
#endif
    return opened;
  }();
  return file;
}

std::string read_new_report_text() {
  static off_t consumed = 0;
  FILE* file = report_file();
  if (file == nullptr) return {};
  std::string text;
  char chunk[1 << 16];
  for (;;) {
    const ssize_t got = pread(fileno(file), chunk, sizeof chunk, consumed);
    if (got <= 0) break;
    text.append(chunk, static_cast<size_t>(got));
    consumed += got;
  }
  return text;
}

}  // namespace

bool report_printed() { return g_report_printed.load(std::memory_order_relaxed); }

#if defined(ATTNBENCH_EMU_SANITIZE_THREAD)
namespace {
// TSan's fibers are kept for the next block: making one costs TSan a thread's state (a launch
// of cuda.naive makes tens of thousands of emulated threads). A reused fiber is ordered after
// what it did for an earlier block, so a race between two blocks that happened to get the same
// fiber is missed; races inside a block, the ones barriers are for, are all seen.
std::mutex g_fiber_pool_mutex;
std::vector<void*> g_fiber_pool;
}  // namespace
#endif

void* create_fiber(const std::string& name) {
  report_file();  // reports must go to the file before the first kernel instruction runs
#if defined(ATTNBENCH_EMU_SANITIZE_THREAD)
  void* fiber = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_fiber_pool_mutex);
    if (!g_fiber_pool.empty()) {
      fiber = g_fiber_pool.back();
      g_fiber_pool.pop_back();
    }
  }
  if (fiber == nullptr) fiber = __tsan_create_fiber(0);
  __tsan_set_fiber_name(fiber, name.c_str());
  return fiber;
#else
  (void)name;
  return nullptr;
#endif
}

#if defined(ATTNBENCH_EMU_SANITIZE_THREAD)  // else inline in the header
void destroy_fiber(void* fiber) {
  if (fiber == nullptr) return;
  std::lock_guard<std::mutex> lock(g_fiber_pool_mutex);
  g_fiber_pool.push_back(fiber);
}

void* current_fiber() {
  return __tsan_get_current_fiber();
}

void switch_to_fiber(void* fiber) {
  if (fiber != nullptr) __tsan_switch_to_fiber(fiber, __tsan_switch_to_fiber_no_sync);
}

void release(const void* sync_object) {
  __tsan_release(const_cast<void*>(sync_object));
}

void acquire(const void* sync_object) {
  __tsan_acquire(const_cast<void*>(sync_object));
}
#endif

#if defined(ATTNBENCH_EMU_SANITIZE_ADDRESS)  // else inline in the header
void start_switch(void** leaving_fake_stack, const Stack& to) {
  __sanitizer_start_switch_fiber(leaving_fake_stack, to.bottom, to.bytes);
}

void finish_switch(void* arriving_fake_stack, Stack* from) {
  const void* bottom = nullptr;
  size_t bytes = 0;
  __sanitizer_finish_switch_fiber(arriving_fake_stack, &bottom, &bytes);
  if (from != nullptr) *from = Stack{bottom, bytes};
}

void poison(const void* address, size_t bytes) {
  __asan_poison_memory_region(address, bytes);
}

void unpoison(const void* address, size_t bytes) {
  __asan_unpoison_memory_region(address, bytes);
}
#endif

std::string take_report(const std::vector<Allocation>* buffers) {
  std::string text = read_new_report_text();
  g_report_printed = false;
  std::lock_guard<std::mutex> lock(g_report_mutex);
  const std::string faulting = std::exchange(g_faulting_thread, std::string());
  if (text.empty()) return {};
  g_last_report_text = first_reports(text, kKeptReports);
  return one_line_report(g_last_report_text, faulting, buffers);
}

const std::string& last_report_text() { return g_last_report_text; }

}  // namespace sanitizer
}  // namespace attnbench::emu

// ---- the sanitizers' hooks: defined here, they replace the runtimes' weak defaults ------------
#if defined(ATTNBENCH_EMU_SANITIZE_THREAD) || defined(ATTNBENCH_EMU_SANITIZE_ADDRESS)
extern "C" {

// Called as a report ends (both sanitizers print a summary line last).
void __sanitizer_report_error_summary(const char* summary) {
  (void)summary;
  attnbench::emu::sanitizer::g_report_printed = true;
}

#if defined(ATTNBENCH_EMU_SANITIZE_THREAD)
// Reports are results here: the process does not fail because it printed one; each report is
// printed (a second case of the same kernel must not pass because its race was seen before),
// and the OpenMP runtime, uninstrumented, is not watched.
const char* __tsan_default_options() {
  return "exitcode=0:suppress_equal_stacks=0:suppress_equal_addresses=0:report_signal_unsafe=0"
         ":ignore_noninstrumented_modules=1";
}
#endif

#if defined(ATTNBENCH_EMU_SANITIZE_ADDRESS)
// Recover after an error (the build compiles with -fsanitize-recover=address), so the case fails
// with the report and the next case runs; no leak check at exit (the process's own business).
const char* __asan_default_options() { return "halt_on_error=0:detect_leaks=0"; }

// Called when ASan finds an error, on the faulting thread: remember which emulated thread it was.
void __asan_on_error() {
  std::string who = attnbench::emu::Block::running_thread_name();
  std::lock_guard<std::mutex> lock(attnbench::emu::sanitizer::g_report_mutex);
  attnbench::emu::sanitizer::g_faulting_thread = std::move(who);
}
#endif

}  // extern "C"
#endif
