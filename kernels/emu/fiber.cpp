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
// 64 KiB costs system calls.
class StackPool {
 public:
  static constexpr size_t kKeptStacks = 2048;
  static StackPool& instance() {
    static StackPool* pool = new StackPool;  // never destroyed: fibers may end during exit
    return *pool;
  }
  bool take(context::stack_context& stack) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.empty()) return false;
    stack = free_.back();
    free_.pop_back();
    return true;
  }
  bool keep(const context::stack_context& stack) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_.size() >= kKeptStacks) return false;
    free_.push_back(stack);
    return true;
  }

 private:
  std::mutex mutex_;
  std::vector<context::stack_context> free_;
};

// Boost's fixed-size stack, from the pool when it has the size, remembering where it lies
// (AddressSanitizer is told at each switch).
class RecordedStack {
 public:
  RecordedStack(size_t bytes, sanitizer::Stack* where)
      : inner_(bytes), bytes_(bytes), where_(where) {}
  context::stack_context allocate() {
    context::stack_context stack;
    if (!(pooled() && StackPool::instance().take(stack))) stack = inner_.allocate();
    *where_ = {static_cast<const char*>(stack.sp) - stack.size, stack.size};
    return stack;
  }
  void deallocate(context::stack_context& stack) noexcept {
    if (!(pooled() && StackPool::instance().keep(stack))) inner_.deallocate(stack);
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
