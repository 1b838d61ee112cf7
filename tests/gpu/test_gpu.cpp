// The GPU side, proven on a GPU (label `gpu`; every test skips with the reason when there is
// none, so CI without a GPU passes them as skipped):
//   - every GPU kernel (cuda.*, cudnn.*) over the `ctest` suite, through the same path as
//     `attnbench check`: inside its support table a kernel must pass every case; a skip must be
//     what the table excludes or a limit the kernel states, never cuDNN refusing a case;
//   - the timer: one cudnn.sdpa case timed by the harness (CUDA events, L2 flushed, median of
//     the stored samples) agrees within 5 % with a host-clock loop of back-to-back forwards
//     synchronized once (DESIGN, "Performance");
//   - the L2 flush leaves clean lines: a probe that touches no memory takes the same time with
//     and without the flush before it;
//   - isolation: a kernel that writes out of bounds is recorded as crashed with the CUDA error,
//     and the good kernel's cases, before and after it, still pass.
// gpu-check.sh runs these from a bundle built elsewhere: ATTNBENCH_CLI and ATTNBENCH_SUITES_DIR
// in the environment say where attnbench and the suites are there.
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "harness/cli/runner.h"
#include "harness/measure/devices.h"
#include "harness/measure/executor.h"
#include "harness/measure/inputs.h"
#include "harness/store/store.h"
#include "kernels/registry.h"
#include "tests/support/command.h"
#include "tests/support/kernel_names.h"
#include "tests/support/scratch_directory.h"
#include "tests/support/stored_runs.h"
#include "tests/test_kernels/test_kernels.h"

namespace attnbench {
namespace {

std::string cli_path() {
  const char* from_environment = std::getenv("ATTNBENCH_CLI");
  if (from_environment != nullptr && *from_environment != '\0') return from_environment;
  return ATTNBENCH_CLI;
}

// The GPUs the harness sees; empty with `reason` set when there is none.
std::vector<Device> gpus(std::string& reason) {
  std::vector<Device> found;
  for (const Device& device : discover_devices()) {
    if (device.backend == Backend::cuda) found.push_back(device);
  }
  if (found.empty()) reason = "no GPU: " + gpu_absence_reason();
  return found;
}

#define SKIP_WITHOUT_GPU()                                          \
  do {                                                              \
    std::string no_gpu_reason;                                      \
    if (gpus(no_gpu_reason).empty()) GTEST_SKIP() << no_gpu_reason; \
  } while (0)

// "sm_90a" or "sm_90" covers a device of compute capability 9.0, "sm_80" one of 8.0.
bool table_covers_device(const SupportTable& table, int sm_version) {
  return std::any_of(table.archs.begin(), table.archs.end(), [&](const std::string& arch) {
    return arch.rfind("sm_", 0) == 0 && std::atoi(arch.c_str() + 3) == sm_version;
  });
}

// ---- every GPU kernel over the ctest suite ----------------------------------------------------

// How a plan declines a problem for a limit the kernel's table states in its notes (cuDNN's
// single unequal head-dim pair, say), as opposed to cuDNN refusing ("cudnn: ...").
constexpr const char* kStatedLimitPrefix = "unsupported: ";
// Proof that the suite reached the kernel at all, not only its skips.
constexpr int kMinPassedCases = 10;

// One kernel's share of the ctest suite. cudnn.sdpa builds a graph per shape (up to a second
// each, ~110 shapes): its cases are split into shards, separate ctest tests that run in
// parallel, so no single test approaches its time limit (whole shapes per shard, `run --shard`).
// cudnn.sdpa_fp8 has 17 shapes: one test.
struct KernelShard {
  std::string kernel;
  int shard = 1;
  int shards = 1;
};
constexpr int kCudnnShards = 4;
void PrintTo(const KernelShard& shard, std::ostream* out) {
  *out << shard.kernel << " shard " << shard.shard << "/" << shard.shards;
}

class GpuCtestSuite : public ::testing::TestWithParam<KernelShard> {};

TEST_P(GpuCtestSuite, EveryCaseInsideTheTablePasses) {
  std::string no_gpu_reason;
  const std::vector<Device> devices = gpus(no_gpu_reason);
  if (devices.empty()) GTEST_SKIP() << no_gpu_reason;
  const Kernel* kernel = find_kernel(GetParam().kernel);
  ASSERT_NE(kernel, nullptr);
  if (std::none_of(devices.begin(), devices.end(), [&](const Device& d) {
        return table_covers_device(kernel->support, d.info.sm_version);
      })) {
    GTEST_SKIP() << "sm_" << devices.front().info.sm_version << " is outside " << kernel->name
                 << "'s architectures";
  }

  const ScratchDirectory directory("attnbench_gpu");
  RunOptions options;
  options.suite = kernel->correctness_suite;
  options.kernel_globs = {kernel->name};
  if (GetParam().shards > 1)
    options.shard = std::to_string(GetParam().shard) + "/" + std::to_string(GetParam().shards);
  options.devices = "gpu";
  options.check_only = true;  // fresh random inputs: no seed
  options.pass = "fwd";  // the backward's GPU checks are gpu-check's figures and gpu-smoke steps
  options.require_gpu = true;
  options.db_path = directory.file("ctest.sqlite");
  options.worker_command = {cli_path()};
  // A kernel that has never run on a GPU may crash or hang on every case: its first failure
  // stops it (the breaker), and gpu-check shortens the watchdog for a budgeted run.
  options.breaker = true;
  if (const char* timeout = std::getenv("ATTNBENCH_GPU_TEST_CASE_TIMEOUT")) {
    options.case_timeout_seconds = std::max(1, std::atoi(timeout));
  }
  std::ostringstream out, err;
  EXPECT_EQ(run_cases(options, out, err), kExitClean) << err.str() << out.str();

  const Result<StoredRun> run = load_latest_run(options.db_path);
  ASSERT_TRUE(run) << run.status().message;
  EXPECT_EQ(run->status, "complete");
  int passed = 0;
  int stated_limits = 0;
  for (const ResultRecord& r : run->results) {
    SCOPED_TRACE(r.kernel + " " + shape_string(r.problem) + " " + r.distribution + " on " +
                 r.device_name);
    EXPECT_EQ(r.kernel, kernel->name);
    if (r.status == ResultStatus::skipped) {
      // Allowed: what the table's fields exclude (the harness skips before planning, with the
      // table's reason), or a limit the kernel states in its table's notes (its plan declines
      // with "unsupported: ..."). Not allowed: cuDNN refusing a case its documentation covers
      // ("cudnn: ..."), running out of memory on these small shapes, or any other surprise: a
      // hole in the table.
      const std::string excluded = unsupported_reason(kernel->support, r.problem);
      const bool stated_limit = r.message.rfind(kStatedLimitPrefix, 0) == 0;
      if (!excluded.empty()) {
        EXPECT_NE(r.message.find(excluded), std::string::npos) << r.message;
      } else {
        EXPECT_TRUE(stated_limit) << "skipped inside the kernel's support table: " << r.message;
        stated_limits += stated_limit;
      }
      continue;
    }
    expect_passed(r, kernel->deterministic);
    ++passed;
  }
  // The FP8 kernel has the fewest: the suite's 17 e4m3 problems, split over its shards.
  EXPECT_GE(passed, kMinPassedCases / GetParam().shards)
      << "the ctest suite should exercise every GPU kernel";
  RecordProperty("passed", passed);
  RecordProperty("skipped_for_stated_limits", stated_limits);
}

std::vector<KernelShard> gpu_kernel_shards() {
  std::vector<KernelShard> shards;
  for (const Kernel& kernel : all_kernels()) {
    if (kernel.backend != Backend::cuda || kernel.name.rfind("test.", 0) == 0) continue;
    if (!kernel.variant_of.empty()) continue;  // `attnbench tune` and the experiment run them
    // The forward's suite: a kernel of backward passes only (cudnn.sdpa_deterministic) has none.
    const auto& passes = kernel.support.passes;
    if (std::find(passes.begin(), passes.end(), Pass::fwd) == passes.end()) continue;
    const int count = kernel.name == "cudnn.sdpa" ? kCudnnShards : 1;
    for (int shard = 1; shard <= count; ++shard) shards.push_back({kernel.name, shard, count});
  }
  return shards;
}

// Without the CUDA backend there is no GPU kernel to instantiate the suite with.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(GpuCtestSuite);
// Test names: cudnn_sdpa_shard1of4, cuda_flash2 (gpu-check's claims match on these).
INSTANTIATE_TEST_SUITE_P(GpuKernels, GpuCtestSuite, ::testing::ValuesIn(gpu_kernel_shards()),
                         [](const ::testing::TestParamInfo<KernelShard>& param_info) {
                           const KernelShard& shard = param_info.param;
                           std::string name = test_name_part(shard.kernel);
                           if (shard.shards > 1)
                             name += "_shard" + std::to_string(shard.shard) + "of" +
                                     std::to_string(shard.shards);
                           return name;
                         });

// ---- the timer cross-check --------------------------------------------------------------------

// FlashAttention's benchmark convention at seqlen 4096: 16k tokens (batch 4), model dim 2048.
// About 0.5 TFLOP per forward: a millisecond or so on an H200, long enough that launch gaps
// vanish in the back-to-back loop and short enough for many repetitions.
constexpr const char* kTimerShape = "b=4,hq=16,s=4096,d=128,dtype=bf16";
constexpr double kTimerTolerance = 0.05;   // DESIGN: the two timers agree within 5 %
constexpr double kHostLoopSeconds = 0.25;  // per trial: host clock resolution is irrelevant
constexpr int kHostLoopTrials = 5;
constexpr int kWarmupForwards = 10;

// Device memory straight from cudaMalloc: this side of the check shares nothing with the
// harness's executor.
class PlainDeviceScratch final : public ScratchAllocator {
 public:
  ~PlainDeviceScratch() override {
    for (void* pointer : live_) cudaFree(pointer);
  }
  void* allocate(size_t bytes) override {
    void* pointer = nullptr;
    if (cudaMalloc(&pointer, std::max<size_t>(bytes, 1)) != cudaSuccess) return nullptr;
    live_.push_back(pointer);
    return pointer;
  }
  void deallocate(void* pointer) override {
    live_.erase(std::remove(live_.begin(), live_.end(), pointer), live_.end());
    cudaFree(pointer);
  }

 private:
  std::vector<void*> live_;
};

#define ASSERT_CUDA(call)                                                                  \
  do {                                                                                     \
    const cudaError_t cuda_error = (call);                                                 \
    ASSERT_EQ(cuda_error, cudaSuccess) << #call << ": " << cudaGetErrorString(cuda_error); \
  } while (0)

// A device copy of a host buffer (null for an empty one: k and v of a packed layout).
void upload(PlainDeviceScratch& memory, const void* host, size_t bytes, const void*& device) {
  device = nullptr;
  if (bytes == 0) return;
  void* copy = memory.allocate(bytes);
  ASSERT_NE(copy, nullptr) << "cudaMalloc of " << bytes << " bytes";
  ASSERT_CUDA(cudaMemcpy(copy, host, bytes, cudaMemcpyHostToDevice));
  device = copy;
}

// Seconds per forward of `kernel` on GPU 0, from back-to-back forwards on one stream with one
// synchronization per trial, timed by the host clock; the median of the trials.
void host_clock_forward_seconds(const Kernel& kernel, const Problem& problem,
                                double expected_seconds, double& seconds) {
  ASSERT_CUDA(cudaSetDevice(0));
  ProblemInputs inputs;
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("input seed " + std::to_string(seed));
  const Status made = make_inputs(problem, Distribution::normal, seed, inputs);
  ASSERT_TRUE(made.ok) << made.message;

  PlainDeviceScratch memory;
  InputPointers pointers;
  ASSERT_NO_FATAL_FAILURE(
      upload(memory, inputs.q_buffer.data(), inputs.q_buffer.bytes(), pointers.q_buffer));
  ASSERT_NO_FATAL_FAILURE(
      upload(memory, inputs.k_buffer.data(), inputs.k_buffer.bytes(), pointers.k_buffer));
  ASSERT_NO_FATAL_FAILURE(
      upload(memory, inputs.v_buffer.data(), inputs.v_buffer.bytes(), pointers.v_buffer));
  const void* key_lengths = nullptr;
  ASSERT_NO_FATAL_FAILURE(upload(memory, inputs.key_lengths.data(),
                                 inputs.key_lengths.size() * sizeof(int), key_lengths));
  pointers.key_lengths = static_cast<const int*>(key_lengths);
  void* out = memory.allocate(static_cast<size_t>(inputs.layout.out_elements) *
                              dtype_size(problem.output_dtype));
  ASSERT_NE(out, nullptr);
  // As the harness times it: with the LSE written when the kernel returns one.
  float* lse = nullptr;
  if (kernel.returns_lse) {
    lse = static_cast<float*>(
        memory.allocate(static_cast<size_t>(inputs.layout.lse_elements) * sizeof(float)));
    ASSERT_NE(lse, nullptr);
  }
  ASSERT_CUDA(cudaDeviceSynchronize());

  cudaStream_t raw_stream = nullptr;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&raw_stream, cudaStreamNonBlocking));
  const std::unique_ptr<CUstream_st, decltype(&cudaStreamDestroy)> owned_stream(raw_stream,
                                                                                &cudaStreamDestroy);
  cudaStream_t stream = owned_stream.get();
  PlainDeviceScratch scratch;
  Result<std::unique_ptr<Plan>> planned =
      kernel.make_plan(problem, PlanContext{scratch, stream, 0});
  ASSERT_TRUE(planned) << planned.status().message;
  const std::unique_ptr<Plan> plan = std::move(*planned);
  const AttentionParams params = make_params(inputs, pointers, out, lse, /*out_scale=*/1.0f);

  for (int i = 0; i < kWarmupForwards; ++i) {
    const Status warmup = plan->run(params);
    ASSERT_TRUE(warmup.ok) << warmup.message;
  }
  ASSERT_CUDA(cudaStreamSynchronize(stream));

  const int forwards =
      std::max(10, static_cast<int>(std::ceil(kHostLoopSeconds / expected_seconds)));
  std::vector<double> trials;
  for (int trial = 0; trial < kHostLoopTrials; ++trial) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < forwards; ++i) {
      const Status run = plan->run(params);
      ASSERT_TRUE(run.ok) << run.message;
    }
    ASSERT_CUDA(cudaStreamSynchronize(stream));
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    trials.push_back(elapsed.count() / forwards);
  }
  std::sort(trials.begin(), trials.end());
  seconds = trials[trials.size() / 2];
}

TEST(GpuTimer, HarnessAgreesWithAHostClockLoopWithin5Percent) {
  SKIP_WITHOUT_GPU();
  const Kernel* kernel = find_kernel("cudnn.sdpa");
  ASSERT_NE(kernel, nullptr) << "cudnn.sdpa is not in the registry";
  Problem problem;
  const Status parsed = parse_shape(kTimerShape, problem);
  ASSERT_TRUE(parsed.ok) << parsed.message;

  const ScratchDirectory directory("attnbench_gpu");
  RunOptions options;
  options.shapes = {kTimerShape};
  options.kernel_globs = {kernel->name};
  options.devices = "0";
  options.require_gpu = true;
  options.repetitions = 20;
  options.max_case_seconds = 3;
  options.db_path = directory.file("timer.sqlite");
  options.worker_command = {cli_path()};
  std::ostringstream out, err;
  ASSERT_EQ(run_cases(options, out, err), kExitClean) << err.str() << out.str();
  const Result<StoredRun> run = load_latest_run(options.db_path);
  ASSERT_TRUE(run) << run.status().message;
  ASSERT_EQ(run->results.size(), 1u);
  const ResultRecord& result = run->results.front();
  ASSERT_EQ(result.status, ResultStatus::passed) << result.message;
  ASSERT_TRUE(result.timing.timed);
  const double harness_seconds = result.timing.median_s;
  ASSERT_GT(harness_seconds, 0);

  double host_seconds = 0;
  host_clock_forward_seconds(*kernel, problem, harness_seconds, host_seconds);
  if (HasFatalFailure()) return;

  const double difference = std::abs(host_seconds - harness_seconds) / harness_seconds;
  RecordProperty("shape", kTimerShape);
  RecordProperty("harness_median_us", std::to_string(harness_seconds * 1e6));
  RecordProperty("host_loop_us", std::to_string(host_seconds * 1e6));
  RecordProperty("difference_percent", std::to_string(difference * 100));
  EXPECT_LE(difference, kTimerTolerance)
      << "harness (cudaEvent, L2 flushed) " << harness_seconds * 1e6 << " us vs host clock loop "
      << host_seconds * 1e6 << " us per forward";
}

// ---- the L2 flush bills nothing to the next kernel ---------------------------------------------
// A probe that touches no global memory (a clock64 spin of about 5 us: 10,000 cycles at an
// H200's 1,980 MHz boost clock) must take the same time whether the harness's flush or an
// equally long spin that touches no memory ran just before it: a flush that left dirty lines in
// the L2 (the old memset) or was still draining when the start event fired billed that work to
// whatever the events timed next. Both arms keep the stream busy when the start event is
// recorded, so neither pays the probe's launch latency inside its events. The time after a
// memset of the same buffer is recorded beside them (not judged: the first GPU run tells).
constexpr long long kSpinCycles = 10'000;
// About the flush's time: 2x a 60 MB L2 read at ~4 TB/s is ~30 us, ~60,000 cycles.
constexpr long long kFlushLikeSpinCycles = 60'000;
constexpr int kSpinForwards = 200;  // each way, interleaved so clock drift hits both alike
constexpr double kFlushTolerance = 0.10;
constexpr const char* kProbeInputsShape =
    "b=1,hq=1,s=64,d=64,dtype=bf16";  // the executor wants inputs

// Event time of `probe` enqueued right after `before` (which runs outside the events).
double probe_seconds_after(const std::function<void()>& before, Plan& probe, cudaStream_t stream,
                           cudaEvent_t start, cudaEvent_t stop) {
  before();
  EXPECT_EQ(cudaEventRecord(start, stream), cudaSuccess);
  EXPECT_TRUE(probe.run(AttentionParams{}).ok);
  EXPECT_EQ(cudaEventRecord(stop, stream), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(stop), cudaSuccess);
  float milliseconds = 0;
  EXPECT_EQ(cudaEventElapsedTime(&milliseconds, start, stop), cudaSuccess);
  return milliseconds * 1e-3;
}

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

TEST(GpuTimer, L2FlushDoesNotBillTheNextKernel) {
  SKIP_WITHOUT_GPU();
  Status status;
  std::unique_ptr<DeviceExecutor> executor = make_cuda_executor(0, status);
  ASSERT_TRUE(executor) << status.message;
  Problem problem;
  ASSERT_TRUE(parse_shape(kProbeInputsShape, problem).ok);
  ProblemInputs inputs;
  std::random_device seed_source;
  status = make_inputs(problem, Distribution::normal, seed_source(), inputs);
  ASSERT_TRUE(status.ok) << status.message;
  status = executor->load_inputs(inputs);
  ASSERT_TRUE(status.ok) << status.message;
  std::unique_ptr<Plan> probe = make_clock_spin_plan(kSpinCycles, executor->plan_context());
  std::unique_ptr<Plan> flush_like =
      make_clock_spin_plan(kFlushLikeSpinCycles, executor->plan_context());
  KernelOutputs outputs = make_outputs(inputs, false);
  TimedForward flushed = executor->timed_forward(*probe, outputs);
  std::string error;
  ASSERT_GT(flushed(error), 0) << error;  // warm-up: module load

  const auto stream = static_cast<cudaStream_t>(executor->plan_context().stream);
  cudaDeviceProp prop{};
  ASSERT_CUDA(cudaGetDeviceProperties(&prop, 0));
  const size_t memset_bytes = 2 * static_cast<size_t>(prop.l2CacheSize);
  void* memset_buffer = nullptr;
  ASSERT_CUDA(cudaMalloc(&memset_buffer, memset_bytes));
  cudaEvent_t start = nullptr, stop = nullptr;
  ASSERT_CUDA(cudaEventCreate(&start));
  ASSERT_CUDA(cudaEventCreate(&stop));
  std::vector<double> with_flush, after_spin, after_memset;
  for (int i = 0; i < kSpinForwards; ++i) {
    const double seconds = flushed(error);
    ASSERT_GT(seconds, 0) << error;
    with_flush.push_back(seconds);
    after_spin.push_back(probe_seconds_after(
        [&] { EXPECT_TRUE(flush_like->run(AttentionParams{}).ok); }, *probe, stream, start, stop));
    after_memset.push_back(probe_seconds_after(
        [&] {
          EXPECT_EQ(cudaMemsetAsync(memset_buffer, i & 0xFF, memset_bytes, stream), cudaSuccess);
        },
        *probe, stream, start, stop));
    if (HasFailure()) break;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(memset_buffer);
  const double flushed_s = median_of(with_flush);
  const double unflushed_s = median_of(after_spin);
  const double difference = std::abs(flushed_s - unflushed_s) / unflushed_s;
  RecordProperty("flushed_us", std::to_string(flushed_s * 1e6));
  RecordProperty("unflushed_us", std::to_string(unflushed_s * 1e6));
  RecordProperty("after_memset_us", std::to_string(median_of(after_memset) * 1e6));
  RecordProperty("difference_percent", std::to_string(difference * 100));
  EXPECT_LE(difference, kFlushTolerance)
      << "clock64 probe: " << flushed_s * 1e6 << " us after the flush, " << unflushed_s * 1e6
      << " us after a spin as long, " << median_of(after_memset) * 1e6 << " us after a memset";
}

// ---- isolation on the GPU ---------------------------------------------------------------------

CommandResult run_cli(const std::string& environment, const std::string& arguments) {
  return run_shell(environment + " '" + cli_path() + "' " + arguments);
}

// Two shapes, so whatever the order of kernels within a shape, a good case runs after the
// crash, on a fresh worker.
TEST(GpuIsolation, OutOfBoundsWriteIsCrashedAndTheGoodKernelStillPasses) {
  SKIP_WITHOUT_GPU();
  const ScratchDirectory directory("attnbench_gpu");
  const std::string db = directory.file("isolation.sqlite");
  const CommandResult result =
      run_cli("ATTNBENCH_TEST_KERNELS=1",
              "run --shape b=1,hq=2,s=128,d=64,dtype=bf16 --shape b=2,hq=4,s=256,d=64,dtype=bf16 "
              "--kernels test.cuda_oob_write,cuda.naive_cublas --devices gpu --require-gpu "
              "--repetitions 3 --max-case-seconds 0.2 --db '" +
                  db + "'");
  EXPECT_EQ(result.exit_code, kExitFailures) << result.output;

  const Result<StoredRun> run = load_latest_run(db);
  ASSERT_TRUE(run) << run.status().message;
  EXPECT_EQ(run->status, "complete");
  const std::regex names_cuda_error(
      "cudaError[A-Za-z]+|illegal memory access|illegal address|unspecified launch failure");
  int crashed = 0, passed = 0;
  for (const ResultRecord& r : run->results) {
    SCOPED_TRACE(r.kernel + " " + shape_string(r.problem));
    if (r.kernel == "test.cuda_oob_write") {
      EXPECT_EQ(r.status, ResultStatus::crashed) << r.message;
      EXPECT_TRUE(std::regex_search(r.message, names_cuda_error)) << r.message;
      crashed += r.status == ResultStatus::crashed;
    } else {
      EXPECT_EQ(r.kernel, "cuda.naive_cublas");
      EXPECT_EQ(r.status, ResultStatus::passed) << r.message;
      EXPECT_TRUE(r.timing.timed);
      passed += r.status == ResultStatus::passed;
    }
  }
  EXPECT_EQ(crashed, 2) << result.output;
  EXPECT_EQ(passed, 2) << result.output;
}

}  // namespace
}  // namespace attnbench
