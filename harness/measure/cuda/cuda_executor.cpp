// The CUDA executor (harness/measure/executor.h): one per worker process and GPU. It owns
//   - a dedicated non-blocking stream: every plan enqueues there and nothing else runs on it;
//   - device copies of the current inputs (q, k, v, the key lengths, a backward's dO);
//   - the outputs on the device between guard regions, poisoned with NaN before each checked
//     run, the guards compared after it;
//   - the tracking device allocator plans take their scratch from (extra memory, measured);
//   - an L2 flush buffer of kL2FlushMultiple x L2, read before each timed forward, outside the
//     events, so every forward starts from a cold L2 as in a real model, with clean lines
//     (harness/measure/cuda/l2_flush.h: a write flush left dirty lines the forward paid to write back);
//   - NVML for the SM clock and clock-event reasons once per timed repetition, and the energy
//     counter around a hot loop of back-to-back forwards.
// Health: a failed call is followed by a probe (clear the last error, synchronize the stream);
// a sticky error (illegal address, launch failure) fails the probe and the executor reports
// itself unhealthy, so the worker exits and the parent starts a fresh one.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "harness/core/nvtx.h"
#include "harness/measure/cuda/cuda_devices.h"
#include "harness/measure/cuda/cupti_trace.h"
#include "harness/measure/cuda/device_allocator.h"
#include "harness/measure/cuda/device_memory.h"
#include "harness/measure/cuda/l2_flush.h"
#include "harness/measure/cuda/nvml.h"
#include "harness/measure/executor.h"
#include "kernels/cuda/common/cuda_check.h"

namespace attnbench {
namespace {

using Clock = std::chrono::steady_clock;

// Guard regions before and after each device output: a kernel that runs a tile or a row past
// either end lands in them. 64 KiB also keeps the output 256-byte aligned inside the allocation.
constexpr size_t kGuardBytes = size_t{64} << 10;
constexpr unsigned char kGuardByte = 0xA5;  // the host canaries' byte (GuardedBuffer)
// All-ones bytes are NaN in fp32, fp16, bf16, e4m3 and e5m2: an element the kernel never
// writes stays NaN and the checker counts it.
constexpr unsigned char kPoisonByte = 0xFF;
// Reading twice the L2's size evicts everything a previous forward left there (DESIGN).
constexpr int kL2FlushMultiple = 2;
// The flush buffer holds this byte everywhere (l2_flush.cu relies on one repeated byte) and is
// read in 16-byte vectors.
constexpr unsigned char kFlushByte = 0x5A;
constexpr size_t kFlushAlignment = 16;
// Plans may take this fraction of the GPU's memory as scratch; the rest stays for the inputs,
// outputs, flush buffer, library handles and the CUDA context, so a plan that asks too much is
// refused (skipped, out of memory) instead of starving the harness.
constexpr double kScratchFractionOfMemory = 0.75;
// The output scale FP8 outputs are stored with; the same 1 as the CPU executor and the
// reference (checker.h's compute_reference), until ProblemInputs carries one.
constexpr float kOutputScale = 1.0f;
// Energy loop: a few synchronized forwards size the chunks, then chunks of about
// kEnergyChunkSeconds run back to back until kEnergyLoopSeconds have passed. One sync per chunk
// keeps the host from queueing far ahead of the clock while costing microseconds per chunk.
constexpr int kEnergyProbeForwards = 3;
constexpr double kEnergyChunkSeconds = 0.1;
constexpr double kMillijoulesPerJoule = 1000.0;
constexpr double kSecondsPerMillisecond = 1e-3;

// A device output between two guard regions: [guard | data | guard].
class GuardedDeviceBuffer {
 public:
  // Keeps the allocation when the size is unchanged (the outputs of one case are all alike).
  Status resize(size_t bytes) {
    if (bytes == bytes_ && memory_.data() != nullptr) return Status::Ok();
    const Status status = memory_.resize(bytes + 2 * kGuardBytes);
    bytes_ = status.ok ? bytes : 0;
    return status;
  }
  void* data() const { return memory_.data() + kGuardBytes; }
  size_t bytes() const { return bytes_; }

  // Guards set, data poisoned.
  Status arm(cudaStream_t stream) {
    ATTNBENCH_CUDA_TRY(cudaMemsetAsync(memory_.data(), kGuardByte, kGuardBytes, stream));
    ATTNBENCH_CUDA_TRY(cudaMemsetAsync(data(), kPoisonByte, bytes_, stream));
    ATTNBENCH_CUDA_TRY(
        cudaMemsetAsync(memory_.data() + kGuardBytes + bytes_, kGuardByte, kGuardBytes, stream));
    return Status::Ok();
  }
  // Enqueues the copies of the data into `host` and of the guards into this buffer's host copy;
  // valid once the stream is synchronized.
  Status copy_back(void* host, cudaStream_t stream) {
    guards_.resize(2 * kGuardBytes);
    ATTNBENCH_CUDA_TRY(cudaMemcpyAsync(host, data(), bytes_, cudaMemcpyDeviceToHost, stream));
    ATTNBENCH_CUDA_TRY(cudaMemcpyAsync(guards_.data(), memory_.data(), kGuardBytes,
                                       cudaMemcpyDeviceToHost, stream));
    ATTNBENCH_CUDA_TRY(cudaMemcpyAsync(guards_.data() + kGuardBytes,
                                       memory_.data() + kGuardBytes + bytes_, kGuardBytes,
                                       cudaMemcpyDeviceToHost, stream));
    return Status::Ok();
  }
  bool guards_intact() const {
    return std::all_of(guards_.begin(), guards_.end(),
                       [](unsigned char byte) { return byte == kGuardByte; });
  }

 private:
  DeviceMemory memory_;
  size_t bytes_ = 0;
  std::vector<unsigned char> guards_;
};

// Kernel nodes of a captured graph, child graphs included. Conditional nodes (none of our
// kernels uses them) would hide their bodies: their launch count depends on the data.
Status count_kernel_nodes(cudaGraph_t graph, int& kernels) {
  size_t count = 0;
  ATTNBENCH_CUDA_TRY(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0) ATTNBENCH_CUDA_TRY(cudaGraphGetNodes(graph, nodes.data(), &count));
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    ATTNBENCH_CUDA_TRY(cudaGraphNodeGetType(node, &type));
    if (type == cudaGraphNodeTypeKernel) {
      ++kernels;
    } else if (type == cudaGraphNodeTypeGraph) {
      cudaGraph_t child = nullptr;
      ATTNBENCH_CUDA_TRY(cudaGraphChildGraphNodeGetGraph(node, &child));
      if (Status s = count_kernel_nodes(child, kernels); !s.ok) return s;
    }
  }
  return Status::Ok();
}

class CudaExecutor final : public DeviceExecutor {
 public:
  CudaExecutor(int device, const cudaDeviceProp& prop)
      : device_(device),
        l2_bytes_(static_cast<size_t>(prop.l2CacheSize)),
        uuid_(format_gpu_uuid(prop.uuid.bytes)),
        scratch_(static_cast<size_t>(kScratchFractionOfMemory *
                                     static_cast<double>(prop.totalGlobalMem))) {}

  ~CudaExecutor() override {
    if (start_ != nullptr) cudaEventDestroy(start_);
    if (stop_ != nullptr) cudaEventDestroy(stop_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Stream, events, flush buffer, NVML: everything that does not depend on the case.
  Status start() {
    ATTNBENCH_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    ATTNBENCH_CUDA_TRY(cudaEventCreate(&start_));
    ATTNBENCH_CUDA_TRY(cudaEventCreate(&stop_));
    const size_t flush_bytes =
        std::max<size_t>(kL2FlushMultiple * l2_bytes_, size_t{1} << 20) / kFlushAlignment * kFlushAlignment;
    if (Status s = flush_.resize(flush_bytes); !s.ok) return s;
    ATTNBENCH_CUDA_TRY(cudaMemsetAsync(flush_.data(), kFlushByte, flush_.bytes(), stream_));
    ATTNBENCH_CUDA_TRY(cudaStreamSynchronize(stream_));
    nvml_ = Nvml::load(nvml_absence_);
    if (nvml_) {
      std::array<char, 32> pci_bus_id{};
      if (cudaDeviceGetPCIBusId(pci_bus_id.data(), static_cast<int>(pci_bus_id.size()), device_) !=
          cudaSuccess) {
        pci_bus_id[0] = '\0';
        cudaGetLastError();
      }
      nvml_device_ = nvml_->find_device(uuid_, pci_bus_id.data());
      if (nvml_device_ == nullptr) nvml_absence_ = "NVML does not know " + uuid_;
    }
    return Status::Ok();
  }

  Status load_inputs(const ProblemInputs& inputs) override {
    NvtxRange range("load");
    inputs_ = nullptr;
    const Status status = copy_inputs(inputs);
    if (!status.ok) {
      probe_health();
      return status;
    }
    inputs_ = &inputs;
    return status;
  }

  ScratchAllocator& scratch() override { return scratch_; }
  void reset_scratch_peak() override { scratch_.reset_peak(); }
  size_t scratch_peak_bytes() const override { return scratch_.peak_bytes(); }
  PlanContext plan_context() override { return PlanContext{scratch_, stream_, device_}; }

  Status run_checked(Plan& plan, KernelOutputs& outputs, Pass pass) override {
    const Status status = run_checked_once(plan, outputs, pass);
    if (!status.ok) probe_health();
    return status;
  }

  TimedForward timed_forward(Plan& plan, KernelOutputs& outputs) override {
    Status prepared = prepare_outputs(outputs);
    if (!prepared.ok) probe_health();
    const AttentionParams params = device_params(outputs);
    return [this, &plan, params, prepared](std::string& error) -> double {
      double seconds = -1;
      Status status = prepared;
      if (status.ok) status = time_one_forward(plan, params, seconds);
      if (!status.ok) {
        probe_health();
        error = status.message;
        return -1;
      }
      return seconds;
    };
  }

  // CUPTI's activities of one forward timed as timed_forward times it: the L2 flushed first, and
  // waited for, so the flush stays out of the recording.
  Result<ForwardProfile> profile_forward(Plan& plan, KernelOutputs& outputs) override {
    if (!cupti_ && cupti_absence_.empty()) cupti_ = CuptiTrace::load(cupti_absence_);
    if (!cupti_) return Status::Error(cupti_absence_);
    ForwardProfile profile;
    profile.source = "CUPTI";
    Status status = prepare_outputs(outputs);
    if (status.ok) status = record_forward(plan, device_params(outputs), profile);
    if (!status.ok) {
      probe_health();
      return status;
    }
    return profile;
  }

  // Read right after the repetition's last forward, while the clocks still describe it.
  void annotate_sample(Sample& sample) override {
    if (nvml_device_ == nullptr) return;
    if (auto mhz = nvml_->sm_clock_mhz(nvml_device_)) sample.sm_clock_mhz = *mhz;
    // "GPU idle" would describe the moment of reading, after the work, not the repetition.
    if (auto reasons = nvml_->clock_event_reasons(nvml_device_))
      sample.clock_reasons = describe_clock_event_reasons(*reasons & ~kClockEventGpuIdle);
  }

  int count_launches(Plan& plan, KernelOutputs& outputs, Status& status) override {
    NvtxRange range("launches");
    int kernels = -1;
    status = capture_and_count(plan, outputs, kernels);
    if (!status.ok) probe_health();
    return status.ok ? kernels : -1;
  }

  double energy_per_forward(Plan& plan, KernelOutputs& outputs, Status& status) override {
    if (nvml_device_ == nullptr) {
      status = Status::Error("no energy counter: " + nvml_absence_);
      return kNotMeasured;
    }
    if (!nvml_->total_energy_mj(nvml_device_)) {
      status = Status::Error("no energy counter: NVML reports no total energy for " + uuid_);
      return kNotMeasured;
    }
    double joules = kNotMeasured;
    status = measure_energy(plan, outputs, joules);
    if (!status.ok) probe_health();
    return status.ok ? joules : kNotMeasured;
  }

  std::string timer_name() const override {
    return "cudaEvent on a dedicated stream, L2 flushed by reading 2x L2 before each forward";
  }

  Backend backend() const override { return Backend::cuda; }
  bool healthy() const override { return healthy_; }

 private:
  // After a failure: non-sticky errors (an allocation that failed, a refused capture) are
  // cleared and the stream still synchronizes; a sticky one fails the synchronize for good.
  void probe_health() {
    cudaGetLastError();
    if (cudaStreamSynchronize(stream_) != cudaSuccess) healthy_ = false;
    cudaGetLastError();
  }

  Status unhealthy_error() const {
    return Status::Error("the CUDA context is unusable after an earlier sticky error on " + uuid_);
  }

  Status usable() const {
    if (!healthy_) return unhealthy_error();
    if (inputs_ == nullptr) return Status::Error("no inputs loaded on " + uuid_);
    return Status::Ok();
  }

  Status copy_inputs(const ProblemInputs& inputs) {
    if (!healthy_) return unhealthy_error();
    const bool packed = inputs.k_buffer.bytes() == 0;  // k and v live in the q buffer
    if (Status s = copy_to_device(inputs.q_buffer.data(), inputs.q_buffer.bytes(), q_); !s.ok)
      return s;
    if (!packed) {
      if (Status s = copy_to_device(inputs.k_buffer.data(), inputs.k_buffer.bytes(), k_); !s.ok)
        return s;
      if (Status s = copy_to_device(inputs.v_buffer.data(), inputs.v_buffer.bytes(), v_); !s.ok)
        return s;
    } else {
      k_.release();
      v_.release();
    }
    if (inputs.problem.has_backward()) {
      if (Status s = copy_to_device(inputs.dout_buffer.data(), inputs.dout_buffer.bytes(), dout_);
          !s.ok) {
        return s;
      }
    } else {
      dout_.release();
    }
    if (Status s = copy_to_device(inputs.key_lengths.data(),
                                  inputs.key_lengths.size() * sizeof(int), key_lengths_);
        !s.ok) {
      return s;
    }
    // The index arrays of varlen batches and paged caches: one copy each, where the case has one.
    const std::pair<const std::vector<int>*, DeviceMemory*> indices[] = {
        {&inputs.cu_seqlens, &cu_seqlens_}, {&inputs.page_table, &page_table_}};
    for (const auto& [host, device] : indices) {
      if (host->empty()) continue;
      if (Status s = copy_to_device(host->data(), host->size() * sizeof(int), *device); !s.ok) {
        return s;
      }
    }
    const float* head_descales[3] = {nullptr, nullptr, nullptr};  // q, k, v (per_head FP8)
    const std::vector<float>* host_descales[3] = {&inputs.q_head_descales,
                                                  &inputs.k_head_descales,
                                                  &inputs.v_head_descales};
    for (int t = 0; t < 3; ++t) {
      if (host_descales[t]->empty()) continue;
      if (Status s = copy_to_device(host_descales[t]->data(),
                                    host_descales[t]->size() * sizeof(float), head_descales_[t]);
          !s.ok) {
        return s;
      }
      head_descales[t] = reinterpret_cast<const float*>(head_descales_[t].data());
    }
    ATTNBENCH_CUDA_TRY(cudaStreamSynchronize(stream_));
    device_inputs_.q_head_descales = head_descales[0];
    device_inputs_.k_head_descales = head_descales[1];
    device_inputs_.v_head_descales = head_descales[2];
    device_inputs_.q_buffer = q_.data();
    device_inputs_.k_buffer = packed ? q_.data() : k_.data();
    device_inputs_.v_buffer = packed ? q_.data() : v_.data();
    device_inputs_.key_lengths = reinterpret_cast<const int*>(key_lengths_.data());
    device_inputs_.cu_seqlens =
        inputs.cu_seqlens.empty() ? nullptr : reinterpret_cast<const int*>(cu_seqlens_.data());
    device_inputs_.page_table =
        inputs.page_table.empty() ? nullptr : reinterpret_cast<const int*>(page_table_.data());
    device_inputs_.dout = inputs.problem.has_backward() ? dout_.data() : nullptr;
    return Status::Ok();
  }

  Status copy_to_device(const void* host, size_t bytes, DeviceMemory& device) {
    if (Status s = device.resize(std::max<size_t>(bytes, 1)); !s.ok) return s;
    ATTNBENCH_CUDA_TRY(
        cudaMemcpyAsync(device.data(), host, bytes, cudaMemcpyHostToDevice, stream_));
    return Status::Ok();
  }

  Status prepare_outputs(const KernelOutputs& outputs) {
    if (Status s = usable(); !s.ok) return s;
    if (Status s = out_.resize(outputs.out.bytes()); !s.ok) return s;
    if (outputs.has_lse) {
      if (Status s = lse_.resize(outputs.lse.bytes()); !s.ok) return s;
    }
    if (!outputs.has_gradients) return Status::Ok();
    if (Status s = dq_.resize(outputs.dq.bytes()); !s.ok) return s;
    if (Status s = dk_.resize(outputs.dk.bytes()); !s.ok) return s;
    return dv_.resize(outputs.dv.bytes());
  }

  AttentionParams device_params(const KernelOutputs& outputs) const {
    if (inputs_ == nullptr) return AttentionParams{};
    const GradientPointers gradients =
        outputs.has_gradients ? GradientPointers{dq_.data(), dk_.data(), dv_.data()}
                              : GradientPointers{};
    return make_params(*inputs_, device_inputs_, out_.data(),
                       outputs.has_lse ? static_cast<float*>(lse_.data()) : nullptr, kOutputScale,
                       gradients);
  }

  // The device buffers a step of `pass` writes: out and LSE in a forward, the gradients in a
  // backward; paired with their host copies in `outputs`.
  std::vector<std::pair<GuardedDeviceBuffer*, GuardedBuffer*>> written_buffers(
      KernelOutputs& outputs, Pass pass) {
    std::vector<std::pair<GuardedDeviceBuffer*, GuardedBuffer*>> written;
    if (pass != Pass::bwd) {
      written.emplace_back(&out_, &outputs.out);
      if (outputs.has_lse) written.emplace_back(&lse_, &outputs.lse);
    }
    if (pass != Pass::fwd && outputs.has_gradients) {
      written.emplace_back(&dq_, &outputs.dq);
      written.emplace_back(&dk_, &outputs.dk);
      written.emplace_back(&dv_, &outputs.dv);
    }
    return written;
  }

  Status run_checked_once(Plan& plan, KernelOutputs& outputs, Pass pass) {
    if (Status s = prepare_outputs(outputs); !s.ok) return s;
    const auto written = written_buffers(outputs, pass);
    for (const auto& [device, host] : written) {
      if (Status s = device->arm(stream_); !s.ok) return s;
    }
    if (Status s = run_pass(plan, pass, device_params(outputs)); !s.ok) return s;
    ATTNBENCH_CUDA_TRY(cudaGetLastError());
    // The step's own errors (an illegal address) surface here, before any copy is attempted.
    ATTNBENCH_CUDA_TRY(cudaStreamSynchronize(stream_));
    for (const auto& [device, host] : written) {
      if (Status s = device->copy_back(host->data(), stream_); !s.ok) return s;
    }
    ATTNBENCH_CUDA_TRY(cudaStreamSynchronize(stream_));
    outputs.guards_ok = std::all_of(written.begin(), written.end(), [](const auto& buffers) {
      return buffers.first->guards_intact();
    });
    return Status::Ok();
  }

  // flush | start event | forward | stop event: the flush runs while the host enqueues the
  // forward, so the forward's launches are usually queued before the start event fires.
  Status time_one_forward(Plan& plan, const AttentionParams& params, double& seconds) {
    if (!healthy_) return unhealthy_error();
    if (Status s = flush_l2_by_reading(flush_.data(), flush_.bytes(), stream_); !s.ok) return s;
    return forward_between_events(plan, params, seconds);
  }

  // One forward between the two events, waited for: its seconds as the events measure them.
  Status forward_between_events(Plan& plan, const AttentionParams& params, double& seconds) {
    ATTNBENCH_CUDA_TRY(cudaEventRecord(start_, stream_));
    if (Status s = run_pass(plan, inputs_->problem.pass, params); !s.ok) return s;
    ATTNBENCH_CUDA_TRY(cudaGetLastError());
    ATTNBENCH_CUDA_TRY(cudaEventRecord(stop_, stream_));
    ATTNBENCH_CUDA_TRY(cudaEventSynchronize(stop_));
    float milliseconds = 0;
    ATTNBENCH_CUDA_TRY(cudaEventElapsedTime(&milliseconds, start_, stop_));
    seconds = milliseconds * kSecondsPerMillisecond;
    return Status::Ok();
  }

  Status record_forward(Plan& plan, const AttentionParams& params, ForwardProfile& profile) {
    if (!healthy_) return unhealthy_error();
    if (Status s = flush_l2_by_reading(flush_.data(), flush_.bytes(), stream_); !s.ok) return s;
    ATTNBENCH_CUDA_TRY(cudaStreamSynchronize(stream_));
    if (Status s = cupti_->start(); !s.ok) return s;
    const Result<int64_t> start = cupti_->timestamp();
    const Status ran = forward_between_events(plan, params, profile.forward_s);
    const Result<int64_t> end = cupti_->timestamp();
    Result<std::vector<Activity>> activities = cupti_->stop();  // whatever the forward did
    if (!ran.ok) return ran;
    if (!start) return start.status();
    if (!end) return end.status();
    if (!activities) return activities.status();
    profile.start_ns = *start;
    profile.end_ns = *end;
    profile.activities = std::move(*activities);
    return Status::Ok();
  }

  // Captures one forward into a CUDA graph (nothing runs) and counts its kernel nodes. The
  // capture is thread-local: a forward that calls a synchronizing API is refused, not half
  // captured. The stream leaves capture mode whatever happens.
  Status capture_and_count(Plan& plan, KernelOutputs& outputs, int& kernels) {
    if (Status s = prepare_outputs(outputs); !s.ok) return s;
    const AttentionParams params = device_params(outputs);
    ATTNBENCH_CUDA_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    const Status run_status = run_pass(plan, inputs_->problem.pass, params);
    cudaGraph_t graph = nullptr;
    const cudaError_t end_error = cudaStreamEndCapture(stream_, &graph);
    if (!run_status.ok || end_error != cudaSuccess) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      return Status::Error(
          "one forward could not be captured into a CUDA graph: " +
          (run_status.ok
               ? cuda_status(end_error, "cudaStreamEndCapture", __FILE__, __LINE__).message
               : run_status.message));
    }
    kernels = 0;
    const Status counted = count_kernel_nodes(graph, kernels);
    cudaGraphDestroy(graph);
    return counted;
  }

  Status measure_energy(Plan& plan, KernelOutputs& outputs, double& joules_per_forward) {
    if (Status s = prepare_outputs(outputs); !s.ok) return s;
    const AttentionParams params = device_params(outputs);
    auto enqueue = [&](int64_t forwards) -> Status {
      for (int64_t i = 0; i < forwards; ++i) {
        if (Status s = run_pass(plan, inputs_->problem.pass, params); !s.ok) return s;
      }
      ATTNBENCH_CUDA_TRY(cudaGetLastError());
      return Status::Ok();
    };

    ATTNBENCH_CUDA_TRY(cudaEventRecord(start_, stream_));
    if (Status s = enqueue(kEnergyProbeForwards); !s.ok) return s;
    ATTNBENCH_CUDA_TRY(cudaEventRecord(stop_, stream_));
    ATTNBENCH_CUDA_TRY(cudaEventSynchronize(stop_));
    float probe_ms = 0;
    ATTNBENCH_CUDA_TRY(cudaEventElapsedTime(&probe_ms, start_, stop_));
    const double forward_seconds =
        std::max(1e-7, probe_ms * kSecondsPerMillisecond / kEnergyProbeForwards);
    const auto chunk =
        std::max<int64_t>(1, static_cast<int64_t>(kEnergyChunkSeconds / forward_seconds));

    const std::optional<uint64_t> before = nvml_->total_energy_mj(nvml_device_);
    const auto loop_start = Clock::now();
    int64_t forwards = 0;
    double elapsed = 0;
    while (elapsed < kEnergyLoopSeconds) {
      if (Status s = enqueue(chunk); !s.ok) return s;
      ATTNBENCH_CUDA_TRY(cudaStreamSynchronize(stream_));
      forwards += chunk;
      elapsed = std::chrono::duration<double>(Clock::now() - loop_start).count();
    }
    const std::optional<uint64_t> after = nvml_->total_energy_mj(nvml_device_);
    if (!before || !after || *after <= *before) {
      return Status::Error("NVML's energy counter did not advance over " + std::to_string(elapsed) +
                           " s of forwards on " + uuid_);
    }
    joules_per_forward = static_cast<double>(*after - *before) / kMillijoulesPerJoule /
                         static_cast<double>(forwards);
    return Status::Ok();
  }

  const int device_;
  const size_t l2_bytes_;
  const std::string uuid_;
  DeviceAllocator scratch_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
  DeviceMemory flush_;
  DeviceMemory q_, k_, v_, key_lengths_, cu_seqlens_, page_table_, dout_;
  DeviceMemory head_descales_[3];  // q, k, v: per_head FP8 descales
  GuardedDeviceBuffer out_, lse_;
  GuardedDeviceBuffer dq_, dk_, dv_;  // the backward's gradients
  const ProblemInputs* inputs_ = nullptr;
  InputPointers device_inputs_;
  std::unique_ptr<Nvml> nvml_;
  NvmlDevice nvml_device_ = nullptr;
  std::string nvml_absence_;
  std::unique_ptr<CuptiTrace> cupti_;  // opened by the first profiled forward
  std::string cupti_absence_;
  bool healthy_ = true;
};

}  // namespace

std::unique_ptr<DeviceExecutor> make_cuda_executor(int device, Status& status) {
  status = Status::Ok();
  cudaDeviceProp prop{};
  if (cudaError_t error = cudaSetDevice(device); error != cudaSuccess) {
    status = cuda_status(error, "cudaSetDevice", __FILE__, __LINE__);
    return nullptr;
  }
  if (cudaError_t error = cudaGetDeviceProperties(&prop, device); error != cudaSuccess) {
    status = cuda_status(error, "cudaGetDeviceProperties", __FILE__, __LINE__);
    return nullptr;
  }
  auto executor = std::make_unique<CudaExecutor>(device, prop);
  status = executor->start();
  if (!status.ok) return nullptr;
  return executor;
}

}  // namespace attnbench
