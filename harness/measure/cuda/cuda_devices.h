// The GPUs a run can measure on, and the CUDA versions a run records. Safe where no driver or
// no GPU exists (the CI machine): the runtime is linked statically and NVML is loaded at run
// time, so these return what is missing instead of failing to start.
#pragma once

#include <string>
#include <vector>

#include "harness/measure/devices.h"
#include "harness/core/records.h"

namespace attnbench {

// Every GPU the CUDA runtime sees, in CUDA's ordinal order (CUDA_VISIBLE_DEVICES applies): name,
// UUID, SM version, SM count, memory, L2, max SM clock, and from NVML the power limit, ECC,
// persistence mode and driver; the rest in extra_json. Empty, with a one-line `absence_reason`,
// when there is no driver or no GPU. Never prints.
std::vector<Device> discover_cuda_devices(std::string& absence_reason);

// CUDA runtime and driver versions (cudaDriverGetVersion, plus NVML's driver string when NVML
// loads) into env.cuda_runtime and env.cuda_driver; cuBLASLt's loaded and compiled versions into
// env.cublas ("cuBLASLt 13.1.0 (compiled 13.1.0)"). cuDNN is recorded by kernels/cudnn/.
void capture_cuda_versions(EnvironmentInfo& env);

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" from the 16 bytes of a cudaUUID_t, as nvidia-smi
// and NVML spell it.
std::string format_gpu_uuid(const char (&bytes)[16]);

}  // namespace attnbench
