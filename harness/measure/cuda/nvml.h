// NVML, the driver's management library, loaded at run time with dlopen("libnvidia-ml.so.1"):
// the toolkit here ships no nvml.h, and attnbench must start (and run CPU cases) where no driver
// exists. Only the entry points the harness uses are declared, with the NVML C ABI's types. The
// harness reads from it the SM clock and clock-event reasons per timed forward, the energy
// counter around the energy loop, and the power limit, ECC and persistence mode of each GPU.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace attnbench {

// NVML's device handle (nvmlDevice_t: an opaque pointer owned by NVML).
using NvmlDevice = struct NvmlDeviceOpaque*;

// Clock-event reason bits (nvmlClocksEventReason*, formerly nvmlClocksThrottleReason*).
constexpr uint64_t kClockEventGpuIdle = 0x1;
constexpr uint64_t kClockEventApplicationsClocksSetting = 0x2;
constexpr uint64_t kClockEventSwPowerCap = 0x4;
constexpr uint64_t kClockEventHwSlowdown = 0x8;
constexpr uint64_t kClockEventSyncBoost = 0x10;
constexpr uint64_t kClockEventSwThermalSlowdown = 0x20;
constexpr uint64_t kClockEventHwThermalSlowdown = 0x40;
constexpr uint64_t kClockEventHwPowerBrakeSlowdown = 0x80;
constexpr uint64_t kClockEventDisplayClockSetting = 0x100;

class Nvml {
 public:
  // Loads the library and initializes NVML; null, with a one-line reason, when either fails.
  static std::unique_ptr<Nvml> load(std::string& absence_reason);
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  // The GPU with this UUID ("GPU-...", as nvidia-smi prints it), else the one at this PCI bus id
  // ("0000:3b:00.0"); null when neither is known to NVML (a MIG instance, for one).
  NvmlDevice find_device(const std::string& uuid, const std::string& pci_bus_id) const;

  // Each is empty when the entry point is missing from the loaded library or the GPU does not
  // support the query.
  std::optional<unsigned> sm_clock_mhz(NvmlDevice device) const;
  std::optional<unsigned> max_sm_clock_mhz(NvmlDevice device) const;
  std::optional<uint64_t> clock_event_reasons(NvmlDevice device) const;  // kClockEvent* bits
  std::optional<uint64_t> total_energy_mj(NvmlDevice device) const;      // since the driver loaded
  std::optional<double> power_limit_watts(NvmlDevice device) const;
  std::optional<bool> ecc_enabled(NvmlDevice device) const;
  std::optional<bool> persistence_enabled(NvmlDevice device) const;
  std::string driver_version() const;  // "580.95.05"; empty when unknown

 private:
  struct Api;
  Nvml(void* library, std::unique_ptr<Api> api);
  void* library_;
  std::unique_ptr<Api> api_;
};

// "sw_power_cap,hw_slowdown" for a kClockEvent* mask; "none" for 0; unknown bits as hex.
std::string describe_clock_event_reasons(uint64_t reasons);

}  // namespace attnbench
