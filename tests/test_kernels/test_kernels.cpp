// Kernels that fail on purpose, so tests can prove a crash or a hang costs one case, not the run.
#include "tests/test_kernels/test_kernels.h"

#include "kernels/cpu/cpu_kernels.h"

#include <chrono>
#include <csignal>
#include <functional>
#include <cstdlib>
#include <thread>

namespace attnbench {
namespace {

enum class Failure { segfault, hang, abort };

class FailingPlan : public Plan {
 public:
  explicit FailingPlan(Failure failure) : failure_(failure) {}
  Status run(const AttentionParams& params) override {
    switch (failure_) {
      case Failure::segfault: {
        // A write through a pointer that is certainly not mapped, as a kernel bug would do.
        volatile float* unmapped = nullptr;
        unmapped[params.batch] = 1.0f;
        break;
      }
      case Failure::hang:
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
      case Failure::abort:
        std::abort();
    }
    return Status::Ok();
  }

 private:
  Failure failure_;
};

class SlowedPlan : public Plan {
 public:
  SlowedPlan(std::unique_ptr<Plan> inner, double fraction)
      : inner_(std::move(inner)), fraction_(fraction) {}
  Status run(const AttentionParams& params) override {
    return slowed([&] { return inner_->run(params); });
  }
  Status run_backward(const AttentionParams& params) override {
    return slowed([&] { return inner_->run_backward(params); });
  }
  std::string details() const override { return inner_->details(); }

 private:
  template <typename Step>
  Status slowed(Step step) {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    Status status = step();
    const auto extra = std::chrono::duration_cast<Clock::duration>((Clock::now() - start) * fraction_);
    const Clock::time_point end = Clock::now() + extra;
    // Spin rather than sleep: a sleep rounds up to the scheduler's tick.
    while (Clock::now() < end) {
    }
    return status;
  }

  std::unique_ptr<Plan> inner_;
  double fraction_;
};

// cpu.flash's output, then a fixed sleep: a forward whose time is the sleep, which a busy
// hyperthread sibling does not stretch the way it stretches compute (2x on this project's CI).
class SleepingPlan : public Plan {
 public:
  SleepingPlan(std::unique_ptr<Plan> inner, std::chrono::microseconds sleep)
      : inner_(std::move(inner)), sleep_(sleep) {}
  Status run(const AttentionParams& params) override {
    Status status = inner_->run(params);
    std::this_thread::sleep_for(sleep_);
    return status;
  }

 private:
  std::unique_ptr<Plan> inner_;
  std::chrono::microseconds sleep_;
};

Kernel failing_kernel(const char* name, const char* summary, Failure failure) {
  Kernel kernel;
  kernel.name = name;
  kernel.summary = summary;
  kernel.backend = Backend::cpu;
  kernel.support.input_dtypes = {DType::f32, DType::f16, DType::bf16};
  kernel.support.max_head_dim = 256;
  kernel.support.separate_v_dim = true;
  kernel.support.masks = {MaskKind::none, MaskKind::causal, MaskKind::causal_br, MaskKind::window,
                          MaskKind::padding};
  kernel.support.layouts = {Layout::bshd, Layout::bhsd, Layout::qkv_packed};
  kernel.support.archs = {"cpu"};
  kernel.support.notes = "test only: fails on purpose";
  kernel.make_plan = [failure](const Problem&,
                               const PlanContext&) -> Result<std::unique_ptr<Plan>> {
    return std::make_unique<FailingPlan>(failure);
  };
  return kernel;
}

// The same kernel, each of its plans wrapped by `wrap`.
Kernel with_wrapped_plans(Kernel kernel,
                          std::function<std::unique_ptr<Plan>(std::unique_ptr<Plan>)> wrap) {
  auto make_plan = kernel.make_plan;
  kernel.make_plan = [make_plan, wrap](
                         const Problem& problem,
                         const PlanContext& context) -> Result<std::unique_ptr<Plan>> {
    Result<std::unique_ptr<Plan>> inner = make_plan(problem, context);
    if (!inner) return inner;
    return wrap(std::move(*inner));
  };
  return kernel;
}

}  // namespace

std::vector<Kernel> isolation_test_kernels() {
  std::vector<Kernel> kernels = {
      failing_kernel("test.cpu_segfault", "writes through a null pointer (SIGSEGV)", Failure::segfault),
      failing_kernel("test.cpu_hang", "never returns", Failure::hang),
      failing_kernel("test.cpu_abort", "calls abort() (SIGABRT)", Failure::abort),
  };
  Kernel sleeping = with_wrapped_plans(cpu_flash_kernel(), [](std::unique_ptr<Plan> inner) {
    return std::unique_ptr<Plan>(
        std::make_unique<SleepingPlan>(std::move(inner), std::chrono::microseconds(2000)));
  });
  sleeping.name = "test.cpu_flash_sleeps";
  sleeping.summary = "cpu.flash, then sleeps 2 ms: a timing steady on a busy host";
  sleeping.support.notes = "test only: for real-timing tests of the regression gate";
  sleeping.support.passes = {Pass::fwd};
  kernels.push_back(std::move(sleeping));
#if defined(ATTNBENCH_HAVE_CUDA)
  kernels.push_back(cuda_oob_write_test_kernel());
#endif
  return kernels;
}

std::vector<Kernel> planted_cpu_backward_kernels() {
  using cpu::FlashBackwardBug;
  const std::tuple<const char*, const char*, FlashBackwardBug> bugs[] = {
      {"test.cpu_flash_bwd_no_delta", "D = rowsum(dO * O) left out of dS", FlashBackwardBug::no_delta},
      {"test.cpu_flash_bwd_no_softmax_scale", "dQ and dK without the softmax scale",
       FlashBackwardBug::no_softmax_scale},
      {"test.cpu_flash_bwd_gqa_not_summed", "dK and dV from the group's last query head only",
       FlashBackwardBug::gqa_not_summed},
      {"test.cpu_flash_bwd_last_key_block_skipped", "the last block of keys never visited",
       FlashBackwardBug::last_key_block_skipped},
  };
  std::vector<Kernel> kernels;
  for (const auto& [name, summary, bug] : bugs) {
    Kernel kernel = cpu_flash_kernel_with_backward_bug(bug);
    kernel.name = name;
    kernel.summary = std::string("cpu.flash with a planted backward bug: ") + summary;
    kernels.push_back(std::move(kernel));
  }
  return kernels;
}

Kernel with_injected_slowdown(Kernel kernel, double fraction) {
  return with_wrapped_plans(std::move(kernel), [fraction](std::unique_ptr<Plan> inner) {
    return std::unique_ptr<Plan>(std::make_unique<SlowedPlan>(std::move(inner), fraction));
  });
}

}  // namespace attnbench
