#include "kernels/emu/fiber.h"

#include <boost/context/fixedsize_stack.hpp>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace attnbench::emu {

namespace context = boost::context;

namespace {

// Stacks of the default size are kept for the next fibers: a launch makes and ends one fiber
// per emulated thread, tens of thousands, and under a sanitizer each allocation and release of
// 64 KiB costs system calls. Each OS thread keeps its own (no lock per fiber: the locks were 4 %
// of an emulated cuda.naive run) and hands them to a shared pool as it ends, for the threads of
// the next launch (kernels/emu/grid.cpp starts its workers per launch).
class StackPool {
 public:
  static constexpr size_t kKeptStacks = 2048;
  static StackPool& shared() {
    static StackPool* pool = new StackPool;  // never destroyed: fibers may end during exit
    return *pool;
  }
  // Moves up to `count` stacks into `into`.
  void take(std::vector<context::stack_context>& into, size_t count) {
    std::lock_guard<std::mutex> lock(mutex_);
    while (count-- > 0 && !free_.empty()) {
      into.push_back(free_.back());
      free_.pop_back();
    }
  }
  // Keeps what fits of `stacks` and returns the rest.
  std::vector<context::stack_context> keep(std::vector<context::stack_context> stacks) {
    std::lock_guard<std::mutex> lock(mutex_);
    while (!stacks.empty() && free_.size() < kKeptStacks) {
      free_.push_back(stacks.back());
      stacks.pop_back();
    }
    return stacks;
  }

 private:
  std::mutex mutex_;
  std::vector<context::stack_context> free_;
};

// This OS thread's stacks: taken from the shared pool a block's worth at a time, given back to it
// when the thread ends (what does not fit is freed).
class ThreadStacks {
 public:
  static constexpr size_t kBatch = 256;
  ~ThreadStacks() {
    for (context::stack_context& stack : StackPool::shared().keep(std::move(free_)))
      context::fixedsize_stack(Fiber::kDefaultStackBytes).deallocate(stack);
  }
  bool take(context::stack_context& stack) {
    if (free_.empty()) StackPool::shared().take(free_, kBatch);
    if (free_.empty()) return false;
    stack = free_.back();
    free_.pop_back();
    return true;
  }
  bool keep(const context::stack_context& stack) {
    if (free_.size() >= StackPool::kKeptStacks) return false;
    free_.push_back(stack);
    return true;
  }

 private:
  std::vector<context::stack_context> free_;
};

ThreadStacks& thread_stacks() {
  thread_local ThreadStacks stacks;
  return stacks;
}

// Boost's fixed-size stack, from the pool when it has the size, remembering where it lies
// (AddressSanitizer is told at each switch).
class RecordedStack {
 public:
  RecordedStack(size_t bytes, sanitizer::Stack* where)
      : inner_(bytes), bytes_(bytes), where_(where) {}
  context::stack_context allocate() {
    context::stack_context stack;
    if (!(pooled() && thread_stacks().take(stack))) stack = inner_.allocate();
    *where_ = {static_cast<const char*>(stack.sp) - stack.size, stack.size};
    return stack;
  }
  void deallocate(context::stack_context& stack) noexcept {
    if (!(pooled() && thread_stacks().keep(stack))) inner_.deallocate(stack);
  }

 private:
  bool pooled() const { return bytes_ == Fiber::kDefaultStackBytes; }
  context::fixedsize_stack inner_;
  size_t bytes_;
  sanitizer::Stack* where_;
};

}  // namespace

Fiber::Fiber(Body body, const std::string& name, size_t stack_bytes) : body_(std::move(body)) {
  self_ = context::fiber(std::allocator_arg, RecordedStack(stack_bytes, &stack_),
                         [this](context::fiber&& caller) { return enter(std::move(caller)); });
  // After the stack is allocated: TSan's fiber starts ordered after its creator's past, the
  // allocation of its stack included.
  tsan_self_ = sanitizer::create_fiber(name);
}

Fiber::~Fiber() { sanitizer::destroy_fiber(tsan_self_); }

context::fiber Fiber::enter(context::fiber&& caller) {
  sanitizer::finish_switch(nullptr, &caller_stack_);
  // A pooled stack's last user released it as it ended: the stack's reuse is no race.
  sanitizer::acquire(stack_.bottom);
  caller_ = std::move(caller);
  try {
    body_(*this);
  } catch (const context::detail::forced_unwind&) {
    throw;  // a suspended fiber being destroyed: Boost unwinds its stack
  } catch (...) {
    escaped_ = std::current_exception();
  }
  finished_ = true;
  sanitizer::release(stack_.bottom);
  sanitizer::switch_to_fiber(tsan_caller_);
  sanitizer::start_switch(nullptr, caller_stack_);  // this stack ends: its fake stack goes
  return std::move(caller_);
}

bool Fiber::resume() {
  if (finished_) return false;
  tsan_caller_ = sanitizer::current_fiber();
  sanitizer::switch_to_fiber(tsan_self_);
  sanitizer::start_switch(&caller_fake_stack_, stack_);
  self_ = std::move(self_).resume();
  sanitizer::finish_switch(caller_fake_stack_, nullptr);
  if (escaped_) {
    std::exception_ptr escaped = std::exchange(escaped_, nullptr);
    std::rethrow_exception(escaped);
  }
  return !finished_;
}

void Fiber::yield() {
  sanitizer::switch_to_fiber(tsan_caller_);
  sanitizer::start_switch(&fake_stack_, caller_stack_);
  caller_ = std::move(caller_).resume();
  sanitizer::finish_switch(fake_stack_, &caller_stack_);
}

}  // namespace attnbench::emu
