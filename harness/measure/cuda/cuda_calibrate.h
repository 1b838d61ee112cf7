// A GPU's ceilings, measured (`attnbench calibrate`): cuBLASLt GEMMs of kGpuGemmSize^3 in fp16,
// bf16 and fp8 e4m3 (fp32 compute), and a device-to-device copy of kGpuCopyBytes. Results are
// compared with the ceiling of their own dtype.
#pragma once

#include <cstddef>
#include <vector>

#include "harness/measure/devices.h"
#include "harness/core/records.h"
#include "reference/status.h"

namespace attnbench {

// 8192^3: large enough that every tile schedule fills an H200 and the GEMM is compute bound.
constexpr int kGpuGemmSize = 8192;
// 1 GiB: more than 10x any L2, so the copy streams from and to HBM.
constexpr size_t kGpuCopyBytes = size_t{1} << 30;

// Binds the calling thread to the device (cudaSetDevice) and appends one record per dtype
// ("fp16", "bf16", and "e4m3" on sm_89 and newer, kind "gemm", FLOP/s) and one copy record
// (kind "copy", dtype "bytes", bytes read + written per second). Details name the shape, the
// cuBLASLt algorithm and the repetitions.
Status calibrate_cuda_device(const Device& device, std::vector<CalibrationRecord>& records);

}  // namespace attnbench
