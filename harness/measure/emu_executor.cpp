// The emulated device's executor: host buffers and the tracking host allocator, as the CPU's,
// plus the emulated stream the in-house CUDA kernels launch on (kernels/emu/launch.h). It times
// nothing: an emulated forward says whether the kernel is right, not how fast it is. Each
// checked run draws a new schedule seed, so the checker's two runs (its determinism check) run
// the threads in two different orders; the seeds are stored with the result.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <omp.h>
#include <string>
#include <utility>
#include <vector>

#include "harness/measure/executor.h"
#include "harness/measure/tracking_allocator.h"
#include "kernels/cpu/phases.h"
#include "kernels/emu/launch.h"
#include "kernels/emu/sanitizer.h"
#include "kernels/emu/symbol_names.h"

namespace attnbench {
namespace {

constexpr uint64_t kDefaultSeed = 0x5eed;

// The bounds build (AddressSanitizer): the guard regions of the case's buffers are poisoned
// while the kernel runs, so a plain load or store into one is reported where it happens.
class PoisonedGuards {
 public:
  explicit PoisonedGuards(std::vector<const GuardedBuffer*> buffers)
      : buffers_(std::move(buffers)) {
    for (const GuardedBuffer* buffer : buffers_) {
      emu::sanitizer::poison(buffer->guard_before(), GuardedBuffer::kCanaryBytes);
      emu::sanitizer::poison(buffer->guard_after(), GuardedBuffer::kCanaryBytes);
    }
  }
  ~PoisonedGuards() {
    for (const GuardedBuffer* buffer : buffers_) {
      emu::sanitizer::unpoison(buffer->guard_before(), GuardedBuffer::kCanaryBytes);
      emu::sanitizer::unpoison(buffer->guard_after(), GuardedBuffer::kCanaryBytes);
    }
  }
  PoisonedGuards(const PoisonedGuards&) = delete;
  PoisonedGuards& operator=(const PoisonedGuards&) = delete;

 private:
  std::vector<const GuardedBuffer*> buffers_;
};

class EmuExecutor final : public DeviceExecutor {
 public:
  // The blocks run on as many OS threads as the CPU device uses (OMP_NUM_THREADS, else the
  // cores), so one setting keeps a run, or parallel tests, from oversubscribing the host.
  EmuExecutor(size_t scratch_limit, uint64_t seed) : scratch_(scratch_limit), seed_(seed) {
    stream_.workers = static_cast<unsigned>(std::max(1, omp_get_max_threads()));
  }

  Status load_inputs(const ProblemInputs& inputs) override {
    inputs_ = &inputs;
    seeds_.clear();
    schedule_hashes_.clear();
    sanitizer_report_.clear();
    return Status::Ok();
  }

  // The case's buffers the emulated copy instructions (cp.async, TMA) check their reads against:
  // the inputs, the key lengths, the outputs (their canaries outside) and the plans' scratch.
  // Kernels read the per-head descale arrays with plain loads, which no bounds check sees.
  void register_buffers(KernelOutputs& outputs) {
    std::vector<emu::Allocation>& memory = stream_.global_memory;
    memory.clear();
    memory.push_back({inputs_->q_buffer.data(), inputs_->q_buffer.bytes(), "q"});
    if (inputs_->k_buffer.bytes() > 0)
      memory.push_back({inputs_->k_buffer.data(), inputs_->k_buffer.bytes(), "k"});
    if (inputs_->v_buffer.bytes() > 0)
      memory.push_back({inputs_->v_buffer.data(), inputs_->v_buffer.bytes(), "v"});
    memory.push_back(
        {inputs_->key_lengths.data(), inputs_->key_lengths.size() * sizeof(int), "key_lengths"});
    if (!inputs_->cu_seqlens.empty()) {
      memory.push_back(
          {inputs_->cu_seqlens.data(), inputs_->cu_seqlens.size() * sizeof(int), "cu_seqlens"});
    }
    if (!inputs_->page_table.empty()) {
      memory.push_back(
          {inputs_->page_table.data(), inputs_->page_table.size() * sizeof(int), "page_table"});
    }
    memory.push_back({outputs.out.data(), outputs.out.bytes(), "out"});
    if (outputs.has_lse) memory.push_back({outputs.lse.data(), outputs.lse.bytes(), "lse"});
    if (outputs.has_gradients) {
      memory.push_back({inputs_->dout_buffer.data(), inputs_->dout_buffer.bytes(), "dout"});
      memory.push_back({outputs.dq.data(), outputs.dq.bytes(), "dq"});
      memory.push_back({outputs.dk.data(), outputs.dk.bytes(), "dk"});
      memory.push_back({outputs.dv.data(), outputs.dv.bytes(), "dv"});
    }
    scratch_.for_each_live([&](const void* pointer, size_t bytes) {
      memory.push_back({pointer, bytes, "scratch"});
    });
  }

  ScratchAllocator& scratch() override { return scratch_; }
  void reset_scratch_peak() override { scratch_.reset_peak(); }
  size_t scratch_peak_bytes() const override { return scratch_.peak_bytes(); }
  PlanContext plan_context() override { return PlanContext{scratch_, &stream_, 0}; }
  Backend backend() const override { return Backend::emu; }
  bool measures_time() const override { return false; }

  Status run_checked(Plan& plan, KernelOutputs& outputs, Pass pass) override {
    poison_outputs(inputs_->problem, pass, outputs);
    stream_.seed = mix_seed(seed_, runs_++);
    stream_.launches = 0;
    stream_.schedule_hash = 0;
    seeds_.push_back(stream_.seed);
    register_buffers(outputs);
    stream_.sanitizer_report.clear();
    const PoisonedGuards guards(guarded_buffers(outputs));
    const Status status = run_pass(plan, pass, host_params(*inputs_, outputs));
    schedule_hashes_.push_back(stream_.schedule_hash);
    if (!stream_.sanitizer_report.empty()) sanitizer_report_ = stream_.sanitizer_report;
    return status;
  }

  std::vector<const GuardedBuffer*> guarded_buffers(const KernelOutputs& outputs) const {
    std::vector<const GuardedBuffer*> buffers = {&inputs_->q_buffer, &inputs_->k_buffer,
                                                 &inputs_->v_buffer, &outputs.out};
    if (outputs.has_lse) buffers.push_back(&outputs.lse);
    if (outputs.has_gradients) {
      buffers.insert(buffers.end(),
                     {&inputs_->dout_buffer, &outputs.dq, &outputs.dk, &outputs.dv});
    }
    std::erase_if(buffers, [](const GuardedBuffer* b) { return b->guard_before() == nullptr; });
    return buffers;
  }

  TimedForward timed_forward(Plan&, KernelOutputs&) override {
    return [](std::string& error) -> double {
      error = "the emulated device measures no time";
      return -1;
    };
  }
  void annotate_sample(Sample&) override {}
  // The kernels the last checked forward launched on the emulated stream: a GPU's captured
  // graph holds the same launches (the in-house kernels' own source, launched the same way).
  int count_launches(Plan&, KernelOutputs&, Status&) override {
    return static_cast<int>(stream_.launches);
  }

  // Each emulated launch of one checked run, named from the symbol table: which kernels a
  // forward launches, in order. Its times are the emulator's, not a GPU's.
  Result<ForwardProfile> profile_forward(Plan& plan, KernelOutputs& outputs) override {
    std::vector<emu::LaunchRecord> launches;
    ForwardProfile profile;
    profile.source = "emulated launches";
    profile.start_ns = phase_clock_ns();
    Status status;
    {
      // Unset however the forward ends (a kernel may throw): the stream outlives `launches`.
      const std::unique_ptr<emu::Stream, void (*)(emu::Stream*)> recording(
          &stream_, [](emu::Stream* stream) { stream->recording = nullptr; });
      stream_.recording = &launches;
      status = run_checked(plan, outputs, inputs_->problem.pass);
    }
    profile.end_ns = phase_clock_ns();
    if (!status.ok) return status;
    profile.forward_s = static_cast<double>(profile.end_ns - profile.start_ns) * 1e-9;
    for (const emu::LaunchRecord& launch : launches) {
      Activity activity;
      activity.kind = ActivityKind::kernel;
      const std::string symbol = emu::symbol_name(launch.kernel);
      activity.detail = symbol.empty() ? "a kernel the symbol table does not name"
                                       : demangled_name(symbol.c_str());
      activity.name = symbol.empty() ? "kernel" : short_kernel_name(activity.detail);
      activity.start_ns = launch.start_ns;
      activity.end_ns = launch.end_ns;
      profile.activities.push_back(std::move(activity));
    }
    return profile;
  }
  double energy_per_forward(Plan&, KernelOutputs&, Status& status) override {
    status = Status::Error("the emulated device measures no energy");
    return kNotMeasured;
  }
  std::string timer_name() const override { return "none (emulated device: correctness only)"; }

  std::string run_details() const override {
    nlohmann::json details;
    details["emu_schedule_seeds"] = seeds_;
    details["emu_schedule_hashes"] = schedule_hashes_;
    details["emu_build"] = emu::sanitizer_build_name();
    if (!sanitizer_report_.empty()) details["emu_sanitizer_report"] = sanitizer_report_;
    return details.dump();
  }

 private:
  TrackingHostAllocator scratch_;
  emu::Stream stream_;
  uint64_t seed_;
  uint64_t runs_ = 0;
  std::vector<uint64_t> seeds_;            // of this case's checked runs
  std::vector<uint64_t> schedule_hashes_;  // the orders the threads ran in, per checked run
  std::string sanitizer_report_;           // the whole text of this case's report, if any
  const ProblemInputs* inputs_ = nullptr;
};

}  // namespace

std::unique_ptr<DeviceExecutor> make_emu_executor(size_t scratch_limit_bytes) {
  uint64_t seed = kDefaultSeed;
  if (const char* text = std::getenv("ATTNBENCH_EMU_SEED"); text != nullptr && *text != '\0') {
    seed = std::strtoull(text, nullptr, 0);
  }
  return std::make_unique<EmuExecutor>(scratch_limit_bytes, seed);
}

}  // namespace attnbench
