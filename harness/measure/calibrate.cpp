#include "harness/measure/calibrate.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include "harness/measure/environment.h"
#include "harness/core/statistics.h"
#if defined(ATTNBENCH_HAVE_CUDA)
#include "harness/measure/cuda/cuda_calibrate.h"
#endif

namespace attnbench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

CalibrationRecord cpu_gemm(const Device& device) {
  const int n = kCalibrationGemmSize;
  std::vector<float> a(static_cast<size_t>(n) * n), b(a.size()), c(a.size());
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (size_t i = 0; i < a.size(); ++i) a[i] = uniform(rng), b[i] = uniform(rng);
  auto gemm = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
  };
  gemm();  // warm-up: thread pool start, page faults on c
  std::vector<double> times;
  for (int r = 0; r < kCalibrationRepetitions; ++r) {
    const auto start = Clock::now();
    gemm();
    times.push_back(seconds_since(start));
  }
  const double flops = 2.0 * n * n * static_cast<double>(n);
  CalibrationRecord record;
  record.device_name = device.info.name;
  record.device_uuid = device.info.uuid;
  record.kind = "gemm";
  record.dtype = "fp32";
  // The best repetition is the ceiling: slower ones were disturbed, not a lower peak.
  record.value = flops / *std::min_element(times.begin(), times.end());
  record.details = "cblas_sgemm " + std::to_string(n) + "^3, " +
                   std::to_string(omp_get_max_threads()) + " threads, best of " +
                   std::to_string(kCalibrationRepetitions) + " (median " +
                   std::to_string(flops / median(times) / 1e9) + " GFLOP/s)";
  record.measured_at = now_utc_iso8601();
  return record;
}

CalibrationRecord cpu_copy(const Device& device) {
  const size_t count = kCalibrationCopyBytes / sizeof(float);
  std::vector<float> source(count), target(count);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < count; ++i)
    source[i] = static_cast<float>(i % 1021) + 1.0f, target[i] = 1.0f;
  auto copy = [&] {
#pragma omp parallel
    {
      const size_t threads = static_cast<size_t>(omp_get_num_threads());
      const size_t chunk = (count + threads - 1) / threads;
      const size_t begin = std::min(count, chunk * static_cast<size_t>(omp_get_thread_num()));
      const size_t end = std::min(count, begin + chunk);
      std::memcpy(target.data() + begin, source.data() + begin, (end - begin) * sizeof(float));
    }
  };
  copy();
  std::vector<double> times;
  for (int r = 0; r < kCalibrationRepetitions; ++r) {
    const auto start = Clock::now();
    copy();
    times.push_back(seconds_since(start));
  }
  CalibrationRecord record;
  record.device_name = device.info.name;
  record.device_uuid = device.info.uuid;
  record.kind = "copy";
  record.dtype = "bytes";
  // Bytes read plus bytes written, the same convention as a kernel's minimum traffic.
  record.value = 2.0 * static_cast<double>(kCalibrationCopyBytes) /
                 *std::min_element(times.begin(), times.end());
  record.details = "memcpy " + std::to_string(kCalibrationCopyBytes >> 20) + " MiB, " +
                   std::to_string(omp_get_max_threads()) + " threads, best of " +
                   std::to_string(kCalibrationRepetitions) + ", read+write bytes";
  record.measured_at = now_utc_iso8601();
  return record;
}

}  // namespace

Result<std::vector<CalibrationRecord>> calibrate_device(const Device& device) {
  std::vector<CalibrationRecord> records;
  if (device.backend == Backend::emu) return records;  // it measures nothing to compare against
  if (device.backend == Backend::cuda) {
#if defined(ATTNBENCH_HAVE_CUDA)
    if (Status calibrated = calibrate_cuda_device(device, records); !calibrated) return calibrated;
    return records;
#else
    return Status::Error("calibrating " + device.label() + " needs the CUDA backend");
#endif
  }
  records.push_back(cpu_gemm(device));
  records.push_back(cpu_copy(device));
  return records;
}

double peak_flops_for(const std::vector<CalibrationRecord>& calibrations,
                      const std::string& dtype) {
  double fp32 = kNotMeasured;
  for (const CalibrationRecord& c : calibrations) {
    if (c.kind != "gemm") continue;
    if (c.dtype == dtype) return c.value;
    if (c.dtype == "fp32") fp32 = c.value;
  }
  return fp32;
}

double peak_bandwidth(const std::vector<CalibrationRecord>& calibrations) {
  for (const CalibrationRecord& c : calibrations) {
    if (c.kind == "copy") return c.value;
  }
  return kNotMeasured;
}

}  // namespace attnbench
