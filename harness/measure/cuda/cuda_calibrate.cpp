// GPU calibration: the ceilings a kernel's TFLOP/s and GB/s are divided by.
//   GEMM: cuBLASLt D = A^T B (the TN layout cuBLASLt requires for FP8, used for every dtype so
//   the three differ only in dtype), M = N = K = kGpuGemmSize, fp32 compute; fp16 and bf16 write
//   their own dtype, e4m3 writes bf16 with per-tensor scale pointers and fast accumulation (no
//   periodic promotion: the same MMA accumulation FP8 attention kernels use). The first
//   kAlgorithmsTried heuristic candidates are each warmed up and timed; the best wins.
//   Copy: cudaMemcpyAsync device to device of kGpuCopyBytes; bytes read + written per second.
// Each repetition is a run of back-to-back operations timed by events on one stream, so the
// clocks settle to what sustained work gets (the power cap), as in a timed attention case; the
// best repetition is the ceiling, the median goes into the details.
#include "harness/measure/cuda/cuda_calibrate.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <sstream>
#include <type_traits>

#include "harness/measure/cuda/device_fill.h"
#include "harness/measure/cuda/device_memory.h"
#include "harness/measure/environment.h"
#include "harness/core/statistics.h"
#include "kernels/cuda/common/cuda_check.h"

namespace attnbench {
namespace {

constexpr int kWarmupOperations = 10;
constexpr int kRepetitions = 5;
constexpr int kGemmsPerRepetition = 20;  // about 30 ms of bf16 work on an H200
constexpr int kCopiesPerRepetition = 10;
constexpr int kHeuristicsRequested = 8;
constexpr int kAlgorithmsTried = 3;
// cuBLASLt's recommended workspace on Hopper; Ampere kernels need less.
constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;
constexpr int kFp8MinimumSmVersion = 89;  // FP8 tensor cores arrived with Ada and Hopper
constexpr uint64_t kFillSeed = 0x5EEDCA11B;
constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;

Status cublas_status(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Status::Error(std::string(call) + " failed at " + file + ":" + std::to_string(line) +
                       ": " + cublasLtGetStatusName(status) + " (" +
                       cublasLtGetStatusString(status) + ")");
}

#define ATTNBENCH_CUBLAS_TRY(call)                                                            \
  do {                                                                                        \
    ::attnbench::Status attnbench_status_ = cublas_status((call), #call, __FILE__, __LINE__); \
    if (!attnbench_status_.ok) return attnbench_status_;                                      \
  } while (0)

// Owners of cuBLASLt's opaque objects: each destroyed by its own cublasLt*Destroy.
template <typename Handle, cublasStatus_t (*kDestroy)(Handle)>
struct LtDestroy {
  void operator()(Handle handle) const { kDestroy(handle); }
};
template <typename Handle, cublasStatus_t (*kDestroy)(Handle)>
using LtOwner = std::unique_ptr<std::remove_pointer_t<Handle>, LtDestroy<Handle, kDestroy>>;
using LtHandle = LtOwner<cublasLtHandle_t, cublasLtDestroy>;
using LtMatmulDesc = LtOwner<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using LtLayout = LtOwner<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using LtPreference = LtOwner<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

// A stream and two events, destroyed together.
struct TimingStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  TimingStream() = default;
  TimingStream(const TimingStream&) = delete;
  TimingStream& operator=(const TimingStream&) = delete;
  ~TimingStream() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  Status create() {
    ATTNBENCH_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    ATTNBENCH_CUDA_TRY(cudaEventCreate(&start));
    ATTNBENCH_CUDA_TRY(cudaEventCreate(&stop));
    return Status::Ok();
  }
};

// Seconds per operation of each repetition, after kWarmupOperations untimed ones.
Status time_repetitions(const std::function<Status()>& operation, int per_repetition,
                        TimingStream& timing, std::vector<double>& seconds_per_operation) {
  for (int i = 0; i < kWarmupOperations; ++i) {
    if (Status s = operation(); !s.ok) return s;
  }
  ATTNBENCH_CUDA_TRY(cudaStreamSynchronize(timing.stream));
  seconds_per_operation.clear();
  for (int r = 0; r < kRepetitions; ++r) {
    ATTNBENCH_CUDA_TRY(cudaEventRecord(timing.start, timing.stream));
    for (int i = 0; i < per_repetition; ++i) {
      if (Status s = operation(); !s.ok) return s;
    }
    ATTNBENCH_CUDA_TRY(cudaEventRecord(timing.stop, timing.stream));
    ATTNBENCH_CUDA_TRY(cudaEventSynchronize(timing.stop));
    float milliseconds = 0;
    ATTNBENCH_CUDA_TRY(cudaEventElapsedTime(&milliseconds, timing.start, timing.stop));
    seconds_per_operation.push_back(milliseconds * 1e-3 / per_repetition);
  }
  return Status::Ok();
}

struct GemmDtype {
  DType input;
  cudaDataType_t cuda_input;
  cudaDataType_t cuda_output;
  const char* output_name;
  bool fp8;
};

struct GemmBuffers {
  DeviceMemory a, b, d, workspace, scale;
};

std::string describe_algorithm(const cublasLtMatmulAlgo_t& algo) {
  int id = -1;
  uint32_t tile = 0;
  uint32_t stages = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, nullptr);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile,
                                       nullptr);
  cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages,
                                       sizeof stages, nullptr);
  return "algo " + std::to_string(id) + " tile " + std::to_string(tile) + " stages " +
         std::to_string(stages);
}

Status measure_gemm(const Device& device, const GemmDtype& dtype, cublasLtHandle_t handle,
                    GemmBuffers& buffers, TimingStream& timing, CalibrationRecord& record) {
  const int64_t n = kGpuGemmSize;
  const size_t elements = static_cast<size_t>(n) * static_cast<size_t>(n);
  if (Status s =
          fill_uniform_nonzero(buffers.a.data(), dtype.input, elements, kFillSeed, timing.stream);
      !s.ok) {
    return s;
  }
  if (Status s = fill_uniform_nonzero(buffers.b.data(), dtype.input, elements, kFillSeed + 1,
                                      timing.stream);
      !s.ok) {
    return s;
  }

  cublasLtMatmulDesc_t raw_desc = nullptr;
  ATTNBENCH_CUBLAS_TRY(cublasLtMatmulDescCreate(&raw_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const LtMatmulDesc desc(raw_desc);
  const cublasOperation_t transpose = CUBLAS_OP_T;
  const cublasOperation_t no_transpose = CUBLAS_OP_N;
  ATTNBENCH_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_TRANSA,
                                                      &transpose, sizeof transpose));
  ATTNBENCH_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(desc.get(), CUBLASLT_MATMUL_DESC_TRANSB,
                                                      &no_transpose, sizeof no_transpose));
  if (dtype.fp8) {
    const void* scale = buffers.scale.data();
    ATTNBENCH_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(
        desc.get(), CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale, sizeof scale));
    ATTNBENCH_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(
        desc.get(), CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale, sizeof scale));
    const int8_t fast_accumulation = 1;
    ATTNBENCH_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(
        desc.get(), CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accumulation, sizeof fast_accumulation));
  }
  // Column-major: A is stored K x M (transposed by the op), B K x N, C = D M x N.
  cublasLtMatrixLayout_t raw_a = nullptr;
  cublasLtMatrixLayout_t raw_b = nullptr;
  cublasLtMatrixLayout_t raw_d = nullptr;
  ATTNBENCH_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&raw_a, dtype.cuda_input, n, n, n));
  const LtLayout layout_a(raw_a);
  ATTNBENCH_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&raw_b, dtype.cuda_input, n, n, n));
  const LtLayout layout_b(raw_b);
  ATTNBENCH_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&raw_d, dtype.cuda_output, n, n, n));
  const LtLayout layout_d(raw_d);

  cublasLtMatmulPreference_t raw_preference = nullptr;
  ATTNBENCH_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&raw_preference));
  const LtPreference preference(raw_preference);
  const size_t workspace_bytes = buffers.workspace.bytes();
  ATTNBENCH_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(
      preference.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
      sizeof workspace_bytes));
  std::vector<cublasLtMatmulHeuristicResult_t> candidates(kHeuristicsRequested);
  int found = 0;
  ATTNBENCH_CUBLAS_TRY(cublasLtMatmulAlgoGetHeuristic(
      handle, desc.get(), layout_a.get(), layout_b.get(), layout_d.get(), layout_d.get(),
      preference.get(), kHeuristicsRequested, candidates.data(), &found));
  if (found == 0) {
    return Status::Error("cuBLASLt offers no algorithm for a " +
                         std::string(dtype_name(dtype.input)) + " GEMM on " + device.info.name);
  }

  const float alpha = 1.0f;
  const float beta = 0.0f;
  const double flops =
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  double best_seconds = 0;
  double best_median = 0;
  int best_index = -1;
  for (int i = 0; i < std::min(found, kAlgorithmsTried); ++i) {
    const cublasLtMatmulAlgo_t& algo = candidates[static_cast<size_t>(i)].algo;
    auto gemm = [&]() -> Status {
      ATTNBENCH_CUBLAS_TRY(cublasLtMatmul(
          handle, desc.get(), &alpha, buffers.a.data(), layout_a.get(), buffers.b.data(),
          layout_b.get(), &beta, buffers.d.data(), layout_d.get(), buffers.d.data(), layout_d.get(),
          &algo, buffers.workspace.data(), workspace_bytes, timing.stream));
      return Status::Ok();
    };
    std::vector<double> seconds;
    if (Status s = time_repetitions(gemm, kGemmsPerRepetition, timing, seconds); !s.ok) return s;
    const double fastest = *std::min_element(seconds.begin(), seconds.end());
    if (best_index < 0 || fastest < best_seconds) {
      best_seconds = fastest;
      best_median = median(seconds);
      best_index = i;
    }
  }

  std::ostringstream details;
  details.precision(4);
  details << "cuBLASLt TN " << n << "^3, " << dtype_name(dtype.input) << " in, "
          << dtype.output_name << " out, fp32 compute"
          << (dtype.fp8 ? ", per-tensor scales, fast accumulation" : "") << ", "
          << describe_algorithm(candidates[static_cast<size_t>(best_index)].algo)
          << " (best of the first " << std::min(found, kAlgorithmsTried) << " of " << found
          << " heuristic candidates), best of " << kRepetitions << " repetitions x "
          << kGemmsPerRepetition << " GEMMs (median " << flops / best_median / kTera << " TFLOP/s)";
  record.device_name = device.info.name;
  record.device_uuid = device.info.uuid;
  record.kind = "gemm";
  record.dtype = std::string(dtype_name(dtype.input));
  record.value = flops / best_seconds;
  record.details = details.str();
  record.measured_at = now_utc_iso8601();
  return Status::Ok();
}

Status calibrate_gemms(const Device& device, TimingStream& timing,
                       std::vector<CalibrationRecord>& records) {
  cublasLtHandle_t raw_handle = nullptr;
  ATTNBENCH_CUBLAS_TRY(cublasLtCreate(&raw_handle));
  const LtHandle handle(raw_handle);

  const size_t elements = static_cast<size_t>(kGpuGemmSize) * kGpuGemmSize;
  const size_t widest_element = dtype_size(DType::bf16);  // inputs and outputs are at most 16 bit
  GemmBuffers buffers;
  if (Status s = buffers.a.resize(elements * widest_element); !s.ok) return s;
  if (Status s = buffers.b.resize(elements * widest_element); !s.ok) return s;
  if (Status s = buffers.d.resize(elements * widest_element); !s.ok) return s;
  if (Status s = buffers.workspace.resize(kGemmWorkspaceBytes); !s.ok) return s;
  if (Status s = buffers.scale.resize(sizeof(float)); !s.ok) return s;
  const float unit_scale = 1.0f;
  ATTNBENCH_CUDA_TRY(cudaMemcpyAsync(buffers.scale.data(), &unit_scale, sizeof unit_scale,
                                     cudaMemcpyHostToDevice, timing.stream));

  std::vector<GemmDtype> dtypes = {
      {DType::f16, CUDA_R_16F, CUDA_R_16F, "fp16", false},
      {DType::bf16, CUDA_R_16BF, CUDA_R_16BF, "bf16", false},
  };
  if (device.info.sm_version >= kFp8MinimumSmVersion) {
    dtypes.push_back({DType::e4m3, CUDA_R_8F_E4M3, CUDA_R_16BF, "bf16", true});
  }
  for (const GemmDtype& dtype : dtypes) {
    CalibrationRecord record;
    if (Status s = measure_gemm(device, dtype, handle.get(), buffers, timing, record); !s.ok)
      return s;
    records.push_back(record);
  }
  return Status::Ok();
}

Status calibrate_copy(const Device& device, TimingStream& timing,
                      std::vector<CalibrationRecord>& records) {
  DeviceMemory source;
  DeviceMemory target;
  if (Status s = source.resize(kGpuCopyBytes); !s.ok) return s;
  if (Status s = target.resize(kGpuCopyBytes); !s.ok) return s;
  ATTNBENCH_CUDA_TRY(cudaMemsetAsync(source.data(), 0x3C, kGpuCopyBytes, timing.stream));
  auto copy = [&]() -> Status {
    ATTNBENCH_CUDA_TRY(cudaMemcpyAsync(target.data(), source.data(), kGpuCopyBytes,
                                       cudaMemcpyDeviceToDevice, timing.stream));
    return Status::Ok();
  };
  std::vector<double> seconds;
  if (Status s = time_repetitions(copy, kCopiesPerRepetition, timing, seconds); !s.ok) return s;
  // Bytes read plus bytes written, the convention of a kernel's minimum traffic.
  const double bytes = 2.0 * static_cast<double>(kGpuCopyBytes);
  std::ostringstream details;
  details.precision(4);
  details << "cudaMemcpyAsync device to device, " << (kGpuCopyBytes >> 20) << " MiB, best of "
          << kRepetitions << " repetitions x " << kCopiesPerRepetition
          << " copies, read+write bytes (median " << bytes / median(seconds) / kGiga << " GB/s)";
  CalibrationRecord record;
  record.device_name = device.info.name;
  record.device_uuid = device.info.uuid;
  record.kind = "copy";
  record.dtype = "bytes";
  record.value = bytes / *std::min_element(seconds.begin(), seconds.end());
  record.details = details.str();
  record.measured_at = now_utc_iso8601();
  records.push_back(record);
  return Status::Ok();
}

}  // namespace

Status calibrate_cuda_device(const Device& device, std::vector<CalibrationRecord>& records) {
  ATTNBENCH_CUDA_TRY(cudaSetDevice(device.info.ordinal));
  TimingStream timing;
  if (Status s = timing.create(); !s.ok) return s;
  if (Status s = calibrate_gemms(device, timing, records); !s.ok) return s;
  return calibrate_copy(device, timing, records);
}

}  // namespace attnbench
