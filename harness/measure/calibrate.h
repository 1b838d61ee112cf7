// The device's ceilings, measured (`attnbench calibrate`) and stored: on the CPU a 4096^3 fp32
// GEMM through the BLAS on all cores and a multi-threaded memory copy (bytes read + written).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "harness/measure/devices.h"
#include "harness/core/records.h"
#include "reference/status.h"

namespace attnbench {

constexpr int kCalibrationGemmSize = 4096;
constexpr int kCalibrationRepetitions = 5;
constexpr size_t kCalibrationCopyBytes = size_t{512} << 20;

// The device's ceilings: its GEMM FLOP/s per dtype and its copy bandwidth.
Result<std::vector<CalibrationRecord>> calibrate_device(const Device& device);

// The ceiling a result of `dtype` is compared with: the GEMM of that dtype, else fp32's (CPU
// kernels compute in fp32 whatever the storage dtype); NaN when not calibrated.
double peak_flops_for(const std::vector<CalibrationRecord>& calibrations, const std::string& dtype);
double peak_bandwidth(const std::vector<CalibrationRecord>& calibrations);

}  // namespace attnbench
