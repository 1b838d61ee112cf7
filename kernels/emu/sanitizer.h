// The emulated device under the compilers' sanitizers (issue 14, item 5), and the one place the
// emulator speaks to them. The race build (ATTNBENCH_EMU_SANITIZE=thread) compiles the emulated
// kernels with ThreadSanitizer, the bounds build (=address) with AddressSanitizer; the emulator
// itself stays uninstrumented and tells the sanitizer what a GPU would do:
//   - fibers: each CUDA thread is a TSan fiber, switched to without implied synchronization, and
//     every switch of stacks is announced to ASan;
//   - edges: a barrier, a warp collective and the end of a launch are a release by each thread
//     that reaches it and an acquire by each that leaves it, so TSan orders exactly what CUDA
//     orders, and reports every other pair of conflicting accesses;
//   - accesses the emulator makes on a kernel's behalf: ldmatrix reads its rows as the lane that
//     reads them; a cp.async destination is written at issue and again at the completing wait;
//   - memory no kernel may touch (the case buffers' guard regions, the unused parts of a block's
//     shared memory) is poisoned for ASan.
// A report becomes the launch's error: take_report() gives it as one line naming the kernel's
// source lines and the emulated threads. In the plain build every hook does nothing.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace attnbench::emu {

struct Allocation;  // block.h

enum class Sanitizer { none, thread, address };
#if defined(ATTNBENCH_EMU_SANITIZE_THREAD)
inline constexpr Sanitizer kSanitizer = Sanitizer::thread;
#elif defined(ATTNBENCH_EMU_SANITIZE_ADDRESS)
inline constexpr Sanitizer kSanitizer = Sanitizer::address;
#else
inline constexpr Sanitizer kSanitizer = Sanitizer::none;
#endif
// "race" (thread), "bounds" (address) or "plain": the build's name in results and test labels.
const char* sanitizer_build_name();

namespace sanitizer {

// ---- ThreadSanitizer fibers and happens-before edges ---------------------------------------
// A fiber for an emulated thread (null without TSan); it starts ordered after its creator's past
// only if the caller acquires something the creator released (Block does, at each block start).
void* create_fiber(const std::string& name);
#if defined(ATTNBENCH_EMU_SANITIZE_THREAD)
void destroy_fiber(void* fiber);
void* current_fiber();
void switch_to_fiber(void* fiber);  // with no synchronization implied
void release(const void* sync_object);
void acquire(const void* sync_object);
#else
// Without TSan the hooks are empty and inline: every switch of fibers calls several, and calls
// that do nothing were a few percent of an emulated kernel's time.
inline void destroy_fiber(void*) {}
inline void* current_fiber() { return nullptr; }
inline void switch_to_fiber(void*) {}
inline void release(const void*) {}
inline void acquire(const void*) {}
#endif
// A read or write the emulator makes for the running thread (ldmatrix's rows, cp.async's
// destination and source). Inline, and called from the kernels' PTX wrappers (ptx.cuh), so the
// report's stack holds the kernel's source line.
inline void note_read(const void* address, size_t bytes);
inline void note_write(const void* address, size_t bytes);

// ---- AddressSanitizer: stacks and poison -----------------------------------------------------
struct Stack {
  const void* bottom = nullptr;  // lowest address
  size_t bytes = 0;
};
// Around a switch from one stack to another: the leaving side's fake stack is kept in
// *leaving_fake_stack (null: the leaving fiber ends); the arriving side passes the fake stack it
// kept and learns the stack it came from.
#if defined(ATTNBENCH_EMU_SANITIZE_ADDRESS)
void start_switch(void** leaving_fake_stack, const Stack& to);
void finish_switch(void* arriving_fake_stack, Stack* from);
void poison(const void* address, size_t bytes);
void unpoison(const void* address, size_t bytes);
#else
inline void start_switch(void**, const Stack&) {}  // without ASan: empty and inline, as above
inline void finish_switch(void*, Stack*) {}
inline void poison(const void*, size_t) {}
inline void unpoison(const void*, size_t) {}
#endif

// ---- reports ----------------------------------------------------------------------------------
// Whether a report was printed since the last take_report(): the thread that printed it stops at
// its next synchronization point, and the block resumes no other thread.
bool report_printed();
// The reports' text a result keeps (sanitizer_report.h, first_reports).
constexpr size_t kKeptReports = 4;
// The first report the sanitizer wrote since the last call, as one line ("" when none); `buffers`
// (the case's) name the buffer an address lies in or beside. The text of the first kKeptReports
// reports stays in last_report_text() until a later report.
std::string take_report(const std::vector<Allocation>* buffers);
const std::string& last_report_text();

#if defined(ATTNBENCH_EMU_SANITIZE_THREAD)
extern "C" void __tsan_read_range(void* address, unsigned long bytes);   // NOLINT: its ABI
extern "C" void __tsan_write_range(void* address, unsigned long bytes);  // NOLINT: its ABI
inline void note_read(const void* address, size_t bytes) {
  __tsan_read_range(const_cast<void*>(address), bytes);
}
inline void note_write(const void* address, size_t bytes) {
  __tsan_write_range(const_cast<void*>(address), bytes);
}
#else
inline void note_read(const void*, size_t) {}
inline void note_write(const void*, size_t) {}
#endif

}  // namespace sanitizer
}  // namespace attnbench::emu
