#include "kernels/emu/fiber.h"

#include <memory>
#include <utility>

#include <boost/context/fixedsize_stack.hpp>

namespace attnbench::emu {

namespace context = boost::context;

Fiber::Fiber(Body body, size_t stack_bytes) : body_(std::move(body)) {
  self_ = context::fiber(std::allocator_arg, context::fixedsize_stack(stack_bytes),
                         [this](context::fiber&& caller) {
                           caller_ = std::move(caller);
                           try {
                             body_(*this);
                           } catch (const context::detail::forced_unwind&) {
                             throw;  // a suspended fiber being destroyed: Boost unwinds its stack
                           } catch (...) {
                             escaped_ = std::current_exception();
                           }
                           finished_ = true;
                           return std::move(caller_);
                         });
}

bool Fiber::resume() {
  if (finished_) return false;
  self_ = std::move(self_).resume();
  if (escaped_) {
    std::exception_ptr escaped = std::exchange(escaped_, nullptr);
    std::rethrow_exception(escaped);
  }
  return !finished_;
}

void Fiber::yield() { caller_ = std::move(caller_).resume(); }

}  // namespace attnbench::emu
