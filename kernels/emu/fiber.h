// The emulated device's unit of execution: one CUDA thread of an emulated block runs as a fiber,
// a user-space context on its block's OS thread, switched without a system call. Boost.Context
// does a switch in about 7 ns on the build host; swapcontext, which enters the kernel to save
// the signal mask, takes about 270 ns (tests/emu/test_emu_fiber.cpp measures both), and a block
// of flash2 switches millions of times per forward. Under a sanitizer build each switch is also
// announced to it (sanitizer.h): to ThreadSanitizer as a switch of fibers that implies no
// synchronization, to AddressSanitizer as a switch of stacks.
#pragma once

#include <boost/context/fiber.hpp>
#include <cstddef>
#include <exception>
#include <functional>
#include <string>

#include "kernels/emu/sanitizer.h"

namespace attnbench::emu {

class Fiber {
 public:
  using Body = std::function<void(Fiber& self)>;
  static constexpr size_t kDefaultStackBytes = 64 * 1024;

  // `name` is what a sanitizer's report calls the fiber ("block (0,0,0) thread 5").
  explicit Fiber(Body body, const std::string& name = "fiber",
                 size_t stack_bytes = kDefaultStackBytes);
  ~Fiber();
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;

  // Runs the fiber until its body yields or returns; false once the body has returned. An
  // exception the body let escape is rethrown here, in the resumer.
  bool resume();
  // From inside the body: back to whoever resumed it; returns when it is resumed again.
  void yield();
  bool finished() const { return finished_; }

 private:
  boost::context::fiber enter(boost::context::fiber&& caller);

  Body body_;
  boost::context::fiber self_;    // the fiber, while it is not running
  boost::context::fiber caller_;  // the resumer, while the fiber runs
  bool finished_ = false;
  std::exception_ptr escaped_;
  // The sanitizers' view: the fiber and its resumer as TSan fibers, their stacks and ASan's fake
  // stacks (the fiber's while it is suspended, the resumer's while it runs).
  void* tsan_self_ = nullptr;
  void* tsan_caller_ = nullptr;
  sanitizer::Stack stack_;
  sanitizer::Stack caller_stack_;
  void* fake_stack_ = nullptr;
  void* caller_fake_stack_ = nullptr;
};

}  // namespace attnbench::emu
