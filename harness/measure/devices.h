// The devices a run can measure on: the CPU always; CUDA GPUs arrive with the GPU backend.
#pragma once

#include <string>
#include <vector>

#include "harness/core/records.h"
#include "kernels/kernel.h"
#include "reference/status.h"

namespace attnbench {

struct Device {
  Backend backend = Backend::cpu;
  DeviceInfo info;
  std::string label() const;  // "cpu", "emu", "cuda:0"
};

std::vector<Device> discover_devices();

// spec: "all" (every device found that measures: not emu), "cpu", "emu" (the emulated device),
// "gpu" (every GPU), or GPU ordinals "0,1", and "cpu,0" mixes. An unknown device is an error naming what was found.
Result<std::vector<Device>> select_devices(const std::string& spec,
                                           const std::vector<Device>& found);

// Why there is no GPU, for --require-gpu errors and `list devices`.
std::string gpu_absence_reason();

}  // namespace attnbench
