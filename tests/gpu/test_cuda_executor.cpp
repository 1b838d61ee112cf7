// The CUDA side of the harness (harness/measure/cuda/). CudaDevice.* need a GPU (ctest label
// gpu) and skip with the reason when there is none; they drive the executor with test plans whose
// forward is one small kernel (tests/gpu/cuda_test_kernels.cu), so what is judged is the
// executor: inputs on the device, poison, guards, launch counts, scratch, timing with clocks,
// energy, health.
// CudaHost.* (label cpu) run everywhere: discovery and the executor without a GPU, the NVML
// reason decoder, UUID text, version capture.
#include <cupti.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "harness/measure/cuda/cuda_calibrate.h"
#include "harness/measure/cuda/cuda_devices.h"
#include "harness/measure/cuda/cupti_trace.h"
#include "harness/measure/cuda/nvml.h"
#include "harness/measure/executor.h"
#include "harness/measure/timing.h"
#include "tests/gpu/cuda_test_kernels.h"
#include "tests/support/fresh_seed.h"

namespace attnbench {
namespace {

// Small enough to check byte for byte, odd enough (37 rows) that no size lines up by chance.
constexpr const char* kTinyShape = "b=2,hq=4,sq=37,sk=37,d=64,dtype=fp16";
constexpr unsigned char kPoisonByte = 0xFF;
// Far past any allocation: 1 TiB.
constexpr int64_t kFarAwayBytes = int64_t{1} << 40;

Status cuda_error(cudaError_t error) {
  return error == cudaSuccess ? Status::Ok() : Status::Error(cudaGetErrorString(error));
}

enum class Forward { copy_query, copy_query_and_one_past_end, write_nothing, write_far_away };

// A plan whose forward is one test kernel on the executor's stream; optionally holds scratch
// from the executor's allocator, as a real plan's workspace.
class TestPlan final : public Plan {
 public:
  TestPlan(const PlanContext& context, Forward forward, size_t scratch_bytes = 0)
      : stream_(static_cast<cudaStream_t>(context.stream)), forward_(forward) {
    if (scratch_bytes > 0) scratch_ = ScratchBuffer(context.scratch, scratch_bytes);
  }

  Status run(const AttentionParams& p) override {
    switch (forward_) {
      case Forward::copy_query:
      case Forward::copy_query_and_one_past_end: {
        test_kernels::CopyRows copy;
        copy.source = static_cast<const uint16_t*>(p.q);
        copy.target = static_cast<uint16_t*>(p.out);
        copy.batch = p.batch;
        copy.seqlen = p.seqlen_q;
        copy.heads = p.heads_q;
        copy.dim = p.head_dim_qk;
        copy.source_batch_stride = p.q_batch_stride;
        copy.source_row_stride = p.q_row_stride;
        copy.source_head_stride = p.q_head_stride;
        copy.target_batch_stride = p.out_batch_stride;
        copy.target_row_stride = p.out_row_stride;
        copy.target_head_stride = p.out_head_stride;
        copy.write_one_past_end = forward_ == Forward::copy_query_and_one_past_end;
        copy.target_elements = int64_t{p.batch} * p.seqlen_q * p.heads_q * p.head_dim_v;
        return cuda_error(test_kernels::launch_copy_rows(copy, stream_));
      }
      case Forward::write_nothing:
        return cuda_error(test_kernels::launch_write_nothing(stream_));
      case Forward::write_far_away:
        return cuda_error(test_kernels::launch_write_far_away(p.out, kFarAwayBytes, stream_));
    }
    return Status::Error("unknown test forward");
  }

  bool has_scratch() const { return static_cast<bool>(scratch_); }

 private:
  cudaStream_t stream_;
  Forward forward_;
  ScratchBuffer scratch_;
};

class CudaDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    devices_ = discover_cuda_devices(reason);
    if (devices_.empty()) GTEST_SKIP() << "no GPU: " << reason;
    Status status;
    executor_ = make_cuda_executor(0, status);
    ASSERT_TRUE(executor_) << status.message;
    ASSERT_TRUE(parse_shape(kTinyShape, problem_).ok);
    ASSERT_TRUE(make_inputs(problem_, Distribution::normal, fresh_seed(), inputs_).ok);
    const Status loaded = executor_->load_inputs(inputs_);
    ASSERT_TRUE(loaded.ok) << loaded.message;
  }

  std::unique_ptr<TestPlan> plan(Forward forward, size_t scratch_bytes = 0) {
    return std::make_unique<TestPlan>(executor_->plan_context(), forward, scratch_bytes);
  }

  std::vector<Device> devices_;
  std::unique_ptr<DeviceExecutor> executor_;
  Problem problem_;
  ProblemInputs inputs_;
};

TEST_F(CudaDevice, DiscoveryDescribesEveryGpu) {
  for (const Device& device : devices_) {
    EXPECT_EQ(device.backend, Backend::cuda);
    EXPECT_EQ(device.info.uuid.rfind("GPU-", 0), 0u) << device.info.uuid;
    EXPECT_EQ(device.info.uuid.size(), 40u) << device.info.uuid;
    EXPECT_GE(device.info.sm_version, 80);
    EXPECT_GT(device.info.sm_count, 0);
    EXPECT_GT(device.info.memory_bytes, 0);
    EXPECT_GT(device.info.l2_bytes, 0);
    EXPECT_GT(device.info.clock_mhz, 0);
    EXPECT_EQ(device.info.extra_json.front(), '{');
    EXPECT_EQ(device.info.extra_json.back(), '}');
  }
}

TEST_F(CudaDevice, RoundTripCopiesQueryIntoOutput) {
  auto copy = plan(Forward::copy_query);
  KernelOutputs outputs = make_outputs(inputs_, false);
  ASSERT_EQ(outputs.out.bytes(), inputs_.q_buffer.bytes());  // both dense bshd, same shape
  const Status status = executor_->run_checked(*copy, outputs, Pass::fwd);
  ASSERT_TRUE(status.ok) << status.message;
  EXPECT_TRUE(outputs.guards_ok);
  EXPECT_EQ(std::memcmp(outputs.out.data(), inputs_.q_buffer.data(), outputs.out.bytes()), 0);
  EXPECT_TRUE(executor_->healthy());
}

TEST_F(CudaDevice, UnwrittenOutputStaysPoisoned) {
  auto nothing = plan(Forward::write_nothing);
  KernelOutputs outputs = make_outputs(inputs_, false);
  ASSERT_TRUE(executor_->run_checked(*nothing, outputs, Pass::fwd).ok);
  const auto* bytes = static_cast<const unsigned char*>(outputs.out.data());
  for (size_t i = 0; i < outputs.out.bytes(); ++i) ASSERT_EQ(bytes[i], kPoisonByte) << "byte " << i;
}

TEST_F(CudaDevice, GuardsCatchOneElementPastTheEnd) {
  auto overflowing = plan(Forward::copy_query_and_one_past_end);
  KernelOutputs outputs = make_outputs(inputs_, false);
  ASSERT_TRUE(executor_->run_checked(*overflowing, outputs, Pass::fwd).ok);
  EXPECT_FALSE(outputs.guards_ok);
  // The guards are set again before every checked run: a good kernel afterwards passes.
  auto copy = plan(Forward::copy_query);
  KernelOutputs again = make_outputs(inputs_, false);
  ASSERT_TRUE(executor_->run_checked(*copy, again, Pass::fwd).ok);
  EXPECT_TRUE(again.guards_ok);
}

TEST_F(CudaDevice, LaunchCountOfOneKernelIsOne) {
  auto copy = plan(Forward::copy_query);
  KernelOutputs outputs = make_outputs(inputs_, false);
  Status status;
  EXPECT_EQ(executor_->count_launches(*copy, outputs, status), 1) << status.message;
  EXPECT_TRUE(status.ok) << status.message;
  // The stream left capture mode: forwards run on it as before.
  const Status run = executor_->run_checked(*copy, outputs, Pass::fwd);
  ASSERT_TRUE(run.ok) << run.message;
  EXPECT_EQ(std::memcmp(outputs.out.data(), inputs_.q_buffer.data(), outputs.out.bytes()), 0);
}

// `attnbench profile` on a GPU: CUPTI records the forward's one kernel, named as the breakdown
// shows it, on the executor's stream, inside the host's start and end; the runtime call that
// launched it carries the same correlation id; the event-timed forward is the breakdown's time.
TEST_F(CudaDevice, AProfiledForwardHoldsItsKernelAndTheCallThatLaunchedIt) {
  auto copy = plan(Forward::copy_query);
  KernelOutputs outputs = make_outputs(inputs_, false);
  // A GPU host without libcupti fails here rather than skips: gpu-check judges this test.
  Result<ForwardProfile> profile = executor_->profile_forward(*copy, outputs);
  ASSERT_TRUE(profile) << profile.status().message;
  EXPECT_EQ(profile->source, "CUPTI");
  EXPECT_GT(profile->forward_s, 0.0);
  std::vector<const Activity*> kernels, launches;
  for (const Activity& activity : profile->activities) {
    if (activity.kind == ActivityKind::kernel) kernels.push_back(&activity);
    if (activity.kind == ActivityKind::runtime && activity.name.rfind("cudaLaunchKernel", 0) == 0) {
      launches.push_back(&activity);
    }
  }
  ASSERT_EQ(kernels.size(), 1u) << "the L2 flush before the recording is not in it";
  EXPECT_EQ(kernels[0]->name, "copy_rows_kernel");
  EXPECT_GE(kernels[0]->start_ns, profile->start_ns);
  EXPECT_LE(kernels[0]->end_ns, profile->end_ns);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0]->correlation, kernels[0]->correlation);
  const ProfileBreakdown breakdown = breakdown_of(*profile);
  EXPECT_EQ(breakdown.tracks, 1);
  EXPECT_EQ(breakdown.phases.front().name, "copy_rows_kernel");
  // The output the recorded forward wrote is the kernel's.
  EXPECT_EQ(std::memcmp(outputs.out.data(), inputs_.q_buffer.data(), outputs.out.bytes()), 0);
}

TEST_F(CudaDevice, ScratchHighWaterMarkIsMeasured) {
  constexpr size_t kScratchBytes = size_t{3} << 20;
  executor_->reset_scratch_peak();
  {
    auto with_scratch = plan(Forward::copy_query, kScratchBytes);
    ASSERT_TRUE(with_scratch->has_scratch());
    KernelOutputs outputs = make_outputs(inputs_, false);
    ASSERT_TRUE(executor_->run_checked(*with_scratch, outputs, Pass::fwd).ok);
  }
  EXPECT_EQ(executor_->scratch_peak_bytes(), kScratchBytes);
  executor_->reset_scratch_peak();
  EXPECT_EQ(executor_->scratch_peak_bytes(), 0u);  // the plan gave its scratch back
  // Past the limit: refused, not attempted, and the device stays usable.
  EXPECT_EQ(executor_->scratch().allocate(size_t{1} << 62), nullptr);
  EXPECT_TRUE(executor_->healthy());
}

TEST_F(CudaDevice, TimedForwardsCarryClocksPerRepetition) {
  auto copy = plan(Forward::copy_query);
  KernelOutputs outputs = make_outputs(inputs_, false);
  TimedForward forward = executor_->timed_forward(*copy, outputs);
  std::string error;
  ASSERT_GT(forward(error), 0) << error;  // warm-up
  TimingPlan plan;
  plan.max_repetitions = plan.min_repetitions = 3;
  plan.iterations = 4;
  plan.budget_s = 10;
  int annotated = 0;
  TimingResult timing = time_case("cuda_executor_test", forward, plan, [&](Sample& sample) {
    executor_->annotate_sample(sample);
    ++annotated;
  });
  ASSERT_TRUE(timing.status.ok) << timing.status.message;
  ASSERT_EQ(timing.samples.size(), 3u);
  EXPECT_EQ(annotated, 3);  // NVML once per repetition, not once per forward
  EXPECT_EQ(timing.summary.forwards_timed, 12);
  for (const Sample& sample : timing.samples) {
    EXPECT_GT(sample.time_s, 0);
    EXPECT_TRUE(std::isfinite(sample.sm_clock_mhz)) << "repetition " << sample.repetition;
    EXPECT_GT(sample.sm_clock_mhz, 0);
    EXPECT_FALSE(sample.clock_reasons.empty());
  }
  EXPECT_NE(executor_->timer_name().find("cudaEvent"), std::string::npos);
}

TEST_F(CudaDevice, EnergyPerForwardComesFromALoopOfAtLeastOneSecond) {
  auto copy = plan(Forward::copy_query);
  KernelOutputs outputs = make_outputs(inputs_, false);
  Status status;
  const double joules = executor_->energy_per_forward(*copy, outputs, status);
  ASSERT_TRUE(status.ok) << status.message;
  EXPECT_TRUE(std::isfinite(joules));
  EXPECT_GT(joules, 0);
}

TEST_F(CudaDevice, CalibrationMeasuresGemmsAndCopy) {
  std::vector<CalibrationRecord> records;
  const Status status = calibrate_cuda_device(devices_.front(), records);
  ASSERT_TRUE(status.ok) << status.message;
  std::set<std::string> measured;
  for (const CalibrationRecord& record : records) {
    EXPECT_GT(record.value, 0) << record.kind << " " << record.dtype;
    EXPECT_EQ(record.device_uuid, devices_.front().info.uuid);
    EXPECT_FALSE(record.details.empty());
    measured.insert(record.kind + ":" + record.dtype);
  }
  EXPECT_TRUE(measured.count("gemm:fp16"));
  EXPECT_TRUE(measured.count("gemm:bf16"));
  if (devices_.front().info.sm_version >= 89) {
    EXPECT_TRUE(measured.count("gemm:e4m3"));
  }
  EXPECT_TRUE(measured.count("copy:bytes"));
}

// Last in this file: the sticky error it provokes leaves the process's CUDA context unusable
// (ctest runs each test in its own process; a plain run of the binary reaches this one last).
TEST_F(CudaDevice, IllegalAddressMakesTheExecutorUnhealthy) {
  auto faulting = plan(Forward::write_far_away);
  KernelOutputs outputs = make_outputs(inputs_, false);
  const Status status = executor_->run_checked(*faulting, outputs, Pass::fwd);
  EXPECT_FALSE(status.ok);
  EXPECT_NE(status.message.find("cudaErrorIllegalAddress"), std::string::npos) << status.message;
  EXPECT_FALSE(executor_->healthy());
}

TEST(CudaHost, DiscoveryWithoutGpuGivesOneLineReason) {
  std::string reason;
  const std::vector<Device> devices = discover_cuda_devices(reason);
  if (!devices.empty()) GTEST_SKIP() << "a GPU is present: this test is about machines without one";
  EXPECT_FALSE(reason.empty());
  EXPECT_EQ(reason.find('\n'), std::string::npos) << reason;
}

TEST(CudaHost, ExecutorWithoutGpuFailsWithAStatus) {
  std::string reason;
  if (!discover_cuda_devices(reason).empty()) GTEST_SKIP() << "a GPU is present";
  Status status;
  EXPECT_EQ(make_cuda_executor(0, status), nullptr);
  EXPECT_FALSE(status.ok);
  EXPECT_FALSE(status.message.empty());
}

TEST(CudaHost, ClockEventReasonsDecodeToNames) {
  EXPECT_EQ(describe_clock_event_reasons(0), "none");
  EXPECT_EQ(describe_clock_event_reasons(kClockEventSwPowerCap | kClockEventHwSlowdown),
            "sw_power_cap,hw_slowdown");
  EXPECT_EQ(describe_clock_event_reasons(kClockEventGpuIdle), "gpu_idle");
  EXPECT_EQ(describe_clock_event_reasons(kClockEventHwThermalSlowdown | 0x10000),
            "hw_thermal_slowdown,other_0x10000");
}

TEST(CudaHost, GpuUuidIsSpelledLikeNvidiaSmi) {
  char bytes[16];
  for (int i = 0; i < 16; ++i) bytes[i] = static_cast<char>(i * 17);
  EXPECT_EQ(format_gpu_uuid(bytes), "GPU-00112233-4455-6677-8899-aabbccddeeff");
}

TEST(CudaHost, VersionsAreRecordedWithOrWithoutDriver) {
  EnvironmentInfo env;
  env.blas = "OpenBLAS";
  capture_cuda_versions(env);
  EXPECT_FALSE(env.cuda_runtime.empty());
  EXPECT_FALSE(env.cuda_driver.empty());
  EXPECT_EQ(env.cublas.rfind("cuBLASLt ", 0), 0u) << env.cublas;
}

// CUPTI's records as the profile reads them, built by hand (no GPU): a kernel by its demangled
// short name on its stream, copies by direction, fills, runtime calls by callback name with the
// correlation id of their work; other kinds are left out.
TEST(CudaHost, CuptiRecordsBecomeActivities) {
  std::mt19937_64 rng(fresh_seed());
  const uint64_t start = rng() >> 8;
  const auto runtime_name = [](uint32_t cbid) { return "call " + std::to_string(cbid); };
  Activity activity;

  CUpti_ActivityKernel10 kernel{};
  kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  kernel.name = "_ZN9attnbench6detail14softmax_kernelEPKfPf";
  kernel.start = start;
  kernel.end = start + 1234;
  kernel.streamId = 7;
  kernel.correlationId = 99;
  ASSERT_TRUE(activity_from_record(&kernel, runtime_name, activity));
  EXPECT_EQ(activity.kind, ActivityKind::kernel);
  EXPECT_EQ(activity.name, "softmax_kernel");
  EXPECT_EQ(activity.detail, "attnbench::detail::softmax_kernel(float const*, float*)");
  EXPECT_EQ(activity.track, 7);
  EXPECT_EQ(activity.end_ns - activity.start_ns, 1234);
  EXPECT_EQ(activity.correlation, 99);

  CUpti_ActivityMemcpy6 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
  copy.bytes = 4096;
  copy.start = start;
  copy.end = start + 10;
  copy.streamId = 7;
  ASSERT_TRUE(activity_from_record(&copy, runtime_name, activity));
  EXPECT_EQ(activity.kind, ActivityKind::memcpy);
  EXPECT_EQ(activity.name, "memcpy DtoD");
  EXPECT_EQ(activity.detail, "4096 bytes");

  CUpti_ActivityMemset4 fill{};
  fill.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  fill.bytes = 64;
  fill.streamId = 3;
  ASSERT_TRUE(activity_from_record(&fill, runtime_name, activity));
  EXPECT_EQ(activity.kind, ActivityKind::memset);
  EXPECT_EQ(activity.track, 3);

  CUpti_ActivityAPI call{};
  call.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  call.cbid = 211;
  call.threadId = 4242;
  call.correlationId = 99;
  ASSERT_TRUE(activity_from_record(&call, runtime_name, activity));
  EXPECT_EQ(activity.kind, ActivityKind::runtime);
  EXPECT_EQ(activity.name, "call 211");
  EXPECT_EQ(activity.track, 4242) << "stop() numbers host threads; the record keeps the OS id";
  EXPECT_EQ(activity.correlation, 99);

  CUpti_Activity other{};
  other.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  EXPECT_FALSE(activity_from_record(&other, runtime_name, activity));
}

// Where libcupti loads (a toolkit on the library path) its clock runs forward; elsewhere the
// reason names the libraries tried, or the version found against the headers'.
TEST(CudaHost, CuptiLoadsOrSaysWhy) {
  std::string reason;
  const std::unique_ptr<CuptiTrace> trace = CuptiTrace::load(reason);
  if (!trace) {
    const bool names_what_failed = reason.find("libcupti.so.13") != std::string::npos ||
                                   reason.find("API version") != std::string::npos;
    EXPECT_TRUE(names_what_failed) << reason;
    return;
  }
  EXPECT_TRUE(reason.empty()) << reason;
  const Result<int64_t> first = trace->timestamp();
  const Result<int64_t> second = trace->timestamp();
  ASSERT_TRUE(first && second) << (first ? second.status() : first.status()).message;
  EXPECT_GT(*first, 0);
  EXPECT_GE(*second, *first);
}

TEST(CudaHost, MissingNvmlIsExplained) {
  std::string reason;
  if (Nvml::load(reason)) GTEST_SKIP() << "NVML is present";
  EXPECT_FALSE(reason.empty());
}

}  // namespace
}  // namespace attnbench
