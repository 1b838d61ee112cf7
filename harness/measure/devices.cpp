#include "harness/measure/devices.h"

#include <omp.h>
#include <unistd.h>

#include <array>
#include <sstream>

#include "harness/measure/environment.h"
#if defined(ATTNBENCH_HAVE_CUDA)
#include "harness/measure/cuda/cuda_devices.h"
#endif

namespace attnbench {

std::string Device::label() const {
  switch (backend) {
    case Backend::cpu: return "cpu";
    case Backend::emu: return "emu";
    case Backend::cuda: break;
  }
  return "cuda:" + std::to_string(info.ordinal);
}

std::vector<Device> discover_devices() {
  Device cpu;
  cpu.backend = Backend::cpu;
  cpu.info.kind = "cpu";
  cpu.info.ordinal = 0;
  cpu.info.name = cpu_model_name();
  std::array<char, 256> host{};
  gethostname(host.data(), host.size() - 1);
  // A CPU's "chip" is the machine it runs on: the host name tells runs on different machines apart.
  cpu.info.uuid = std::string("cpu:") + host.data();
  cpu.info.threads = omp_get_max_threads();
  cpu.info.memory_bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  cpu.info.l2_bytes = l2 > 0 ? l2 : 0;
  cpu.info.extra_json = "{}";  // a CPU has nothing beyond the columns; the column stays JSON
  // The emulated device: the in-house CUDA kernels' own source on this CPU (kernels/emu/).
  Device emu;
  emu.backend = Backend::emu;
  emu.info = cpu.info;
  emu.info.kind = kEmuDeviceKind;
  emu.info.name = "attnbench emu (CUDA sm_90 rules, correctness only) on " + cpu.info.name;
  emu.info.uuid = std::string("emu:") + host.data();
  std::vector<Device> devices = {cpu, emu};
#if defined(ATTNBENCH_HAVE_CUDA)
  std::string reason;
  for (Device& gpu : discover_cuda_devices(reason)) devices.push_back(std::move(gpu));
#endif
  return devices;
}

std::string gpu_absence_reason() {
#if defined(ATTNBENCH_HAVE_CUDA)
  std::string reason;
  if (!discover_cuda_devices(reason).empty()) return "";
  return reason;
#else
  return "this attnbench was built without the CUDA backend (configure with -DATTNBENCH_CUDA=ON "
         "where nvcc is installed)";
#endif
}

Result<std::vector<Device>> select_devices(const std::string& spec,
                                           const std::vector<Device>& found) {
  std::vector<Device> selected;
  auto add = [&selected](const Device& device) {
    for (const Device& d : selected) {
      if (d.label() == device.label()) return;
    }
    selected.push_back(device);
  };
  std::string found_labels;
  for (const Device& d : found) found_labels += (found_labels.empty() ? "" : ", ") + d.label();
  std::stringstream stream(spec);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (item == "all") {
      // Every device that measures: the emulated one checks correctness only and is asked by name.
      for (const Device& d : found) {
        if (d.backend != Backend::emu) add(d);
      }
    } else if (item == "emu") {
      for (const Device& d : found) {
        if (d.backend == Backend::emu) add(d);
      }
    } else if (item == "cpu") {
      for (const Device& d : found) {
        if (d.backend == Backend::cpu) add(d);
      }
    } else if (item == "gpu" || item == "cuda") {
      bool any = false;
      for (const Device& d : found) {
        if (d.backend == Backend::cuda) add(d), any = true;
      }
      if (!any)
        return Status::Error("--devices " + spec + ": no GPU found (" + gpu_absence_reason() + ")");
    } else {
      bool matched = false;
      for (const Device& d : found) {
        if (d.backend == Backend::cuda &&
            (item == std::to_string(d.info.ordinal) || item == d.label())) {
          add(d), matched = true;
        }
      }
      if (!matched) {
        return Status::Error("--devices: unknown device '" + item +
                             "'; accepted: all, cpu, emu, gpu, or GPU ordinals; found: " + found_labels);
      }
    }
  }
  if (selected.empty())
    return Status::Error("--devices '" + spec + "' selects no device; found: " + found_labels);
  return selected;
}

}  // namespace attnbench
