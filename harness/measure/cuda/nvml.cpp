#include "harness/measure/cuda/nvml.h"

#include <array>
#include <cstdio>

#include "harness/measure/cuda/shared_library.h"

namespace attnbench {
namespace {

// The NVML C ABI, as far as it is used here. nvmlReturn_t, nvmlClockType_t and
// nvmlEnableState_t are C enums: int-sized.
using NvmlReturn = int;
constexpr NvmlReturn kNvmlSuccess = 0;                 // NVML_SUCCESS
constexpr int kNvmlClockSm = 1;                        // NVML_CLOCK_SM
constexpr int kNvmlFeatureEnabled = 1;                 // NVML_FEATURE_ENABLED
constexpr unsigned kNvmlDriverVersionBufferSize = 80;  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
constexpr double kMilliwattsPerWatt = 1000.0;

}  // namespace

struct Nvml::Api {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*handle_by_uuid)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*handle_by_pci_bus_id)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*clock_info)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*max_clock_info)(NvmlDevice, int, unsigned*) = nullptr;
  NvmlReturn (*clock_event_reasons)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*total_energy)(NvmlDevice, unsigned long long*) = nullptr;
  NvmlReturn (*power_limit)(NvmlDevice, unsigned*) = nullptr;
  NvmlReturn (*ecc_mode)(NvmlDevice, int*, int*) = nullptr;
  NvmlReturn (*persistence_mode)(NvmlDevice, int*) = nullptr;
  NvmlReturn (*driver_version)(char*, unsigned) = nullptr;
};

std::unique_ptr<Nvml> Nvml::load(std::string& absence_reason) {
  std::string tried;
  void* library = open_first_library({"libnvidia-ml.so.1"}, tried);
  if (library == nullptr) {
    absence_reason = "NVML not loadable: " + tried;
    return nullptr;
  }
  auto api = std::make_unique<Api>();
  api->init = lookup_symbol<decltype(api->init)>(library, "nvmlInit_v2");
  api->shutdown = lookup_symbol<decltype(api->shutdown)>(library, "nvmlShutdown");
  api->error_string = lookup_symbol<decltype(api->error_string)>(library, "nvmlErrorString");
  api->handle_by_uuid =
      lookup_symbol<decltype(api->handle_by_uuid)>(library, "nvmlDeviceGetHandleByUUID");
  api->handle_by_pci_bus_id = lookup_symbol<decltype(api->handle_by_pci_bus_id)>(
      library, "nvmlDeviceGetHandleByPciBusId_v2");
  api->clock_info = lookup_symbol<decltype(api->clock_info)>(library, "nvmlDeviceGetClockInfo");
  api->max_clock_info =
      lookup_symbol<decltype(api->max_clock_info)>(library, "nvmlDeviceGetMaxClockInfo");
  // Renamed in driver 535 ("throttle" became "event"); older drivers have only the old name.
  api->clock_event_reasons = lookup_symbol<decltype(api->clock_event_reasons)>(
      library, "nvmlDeviceGetCurrentClocksEventReasons");
  if (api->clock_event_reasons == nullptr) {
    api->clock_event_reasons = lookup_symbol<decltype(api->clock_event_reasons)>(
        library, "nvmlDeviceGetCurrentClocksThrottleReasons");
  }
  api->total_energy =
      lookup_symbol<decltype(api->total_energy)>(library, "nvmlDeviceGetTotalEnergyConsumption");
  api->power_limit =
      lookup_symbol<decltype(api->power_limit)>(library, "nvmlDeviceGetPowerManagementLimit");
  api->ecc_mode = lookup_symbol<decltype(api->ecc_mode)>(library, "nvmlDeviceGetEccMode");
  api->persistence_mode =
      lookup_symbol<decltype(api->persistence_mode)>(library, "nvmlDeviceGetPersistenceMode");
  api->driver_version =
      lookup_symbol<decltype(api->driver_version)>(library, "nvmlSystemGetDriverVersion");

  if (api->init == nullptr || api->shutdown == nullptr || api->handle_by_uuid == nullptr) {
    dlclose(library);
    absence_reason = "NVML too old: nvmlInit_v2, nvmlShutdown or nvmlDeviceGetHandleByUUID missing";
    return nullptr;
  }
  if (const NvmlReturn result = api->init(); result != kNvmlSuccess) {
    absence_reason = "nvmlInit_v2 returned " + std::to_string(result);
    if (api->error_string != nullptr)
      absence_reason += std::string(" (") + api->error_string(result) + ")";
    dlclose(library);
    return nullptr;
  }
  return std::unique_ptr<Nvml>(new Nvml(library, std::move(api)));
}

Nvml::Nvml(void* library, std::unique_ptr<Api> api) : library_(library), api_(std::move(api)) {}

Nvml::~Nvml() {
  api_->shutdown();
  dlclose(library_);
}

NvmlDevice Nvml::find_device(const std::string& uuid, const std::string& pci_bus_id) const {
  NvmlDevice device = nullptr;
  if (!uuid.empty() && api_->handle_by_uuid(uuid.c_str(), &device) == kNvmlSuccess) return device;
  if (!pci_bus_id.empty() && api_->handle_by_pci_bus_id != nullptr &&
      api_->handle_by_pci_bus_id(pci_bus_id.c_str(), &device) == kNvmlSuccess) {
    return device;
  }
  return nullptr;
}

std::optional<unsigned> Nvml::sm_clock_mhz(NvmlDevice device) const {
  unsigned mhz = 0;
  if (device == nullptr || api_->clock_info == nullptr ||
      api_->clock_info(device, kNvmlClockSm, &mhz) != kNvmlSuccess) {
    return std::nullopt;
  }
  return mhz;
}

std::optional<unsigned> Nvml::max_sm_clock_mhz(NvmlDevice device) const {
  unsigned mhz = 0;
  if (device == nullptr || api_->max_clock_info == nullptr ||
      api_->max_clock_info(device, kNvmlClockSm, &mhz) != kNvmlSuccess) {
    return std::nullopt;
  }
  return mhz;
}

std::optional<uint64_t> Nvml::clock_event_reasons(NvmlDevice device) const {
  unsigned long long reasons = 0;
  if (device == nullptr || api_->clock_event_reasons == nullptr ||
      api_->clock_event_reasons(device, &reasons) != kNvmlSuccess) {
    return std::nullopt;
  }
  return static_cast<uint64_t>(reasons);
}

std::optional<uint64_t> Nvml::total_energy_mj(NvmlDevice device) const {
  unsigned long long millijoules = 0;
  if (device == nullptr || api_->total_energy == nullptr ||
      api_->total_energy(device, &millijoules) != kNvmlSuccess) {
    return std::nullopt;
  }
  return static_cast<uint64_t>(millijoules);
}

std::optional<double> Nvml::power_limit_watts(NvmlDevice device) const {
  unsigned milliwatts = 0;
  if (device == nullptr || api_->power_limit == nullptr ||
      api_->power_limit(device, &milliwatts) != kNvmlSuccess) {
    return std::nullopt;
  }
  return milliwatts / kMilliwattsPerWatt;
}

std::optional<bool> Nvml::ecc_enabled(NvmlDevice device) const {
  int current = 0;
  int pending = 0;
  if (device == nullptr || api_->ecc_mode == nullptr ||
      api_->ecc_mode(device, &current, &pending) != kNvmlSuccess) {
    return std::nullopt;
  }
  return current == kNvmlFeatureEnabled;
}

std::optional<bool> Nvml::persistence_enabled(NvmlDevice device) const {
  int mode = 0;
  if (device == nullptr || api_->persistence_mode == nullptr ||
      api_->persistence_mode(device, &mode) != kNvmlSuccess) {
    return std::nullopt;
  }
  return mode == kNvmlFeatureEnabled;
}

std::string Nvml::driver_version() const {
  std::array<char, kNvmlDriverVersionBufferSize> version{};
  if (api_->driver_version == nullptr ||
      api_->driver_version(version.data(), kNvmlDriverVersionBufferSize) != kNvmlSuccess) {
    return {};
  }
  return version.data();
}

std::string describe_clock_event_reasons(uint64_t reasons) {
  if (reasons == 0) return "none";
  static constexpr std::array<std::pair<uint64_t, const char*>, 9> kNames = {{
      {kClockEventGpuIdle, "gpu_idle"},
      {kClockEventApplicationsClocksSetting, "applications_clocks"},
      {kClockEventSwPowerCap, "sw_power_cap"},
      {kClockEventHwSlowdown, "hw_slowdown"},
      {kClockEventSyncBoost, "sync_boost"},
      {kClockEventSwThermalSlowdown, "sw_thermal_slowdown"},
      {kClockEventHwThermalSlowdown, "hw_thermal_slowdown"},
      {kClockEventHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
      {kClockEventDisplayClockSetting, "display_clock_setting"},
  }};
  std::string text;
  uint64_t unknown = reasons;
  for (const auto& [bit, name] : kNames) {
    if ((reasons & bit) == 0) continue;
    if (!text.empty()) text += ',';
    text += name;
    unknown &= ~bit;
  }
  if (unknown != 0) {
    std::array<char, 32> hex{};
    std::snprintf(hex.data(), hex.size(), "0x%llx", static_cast<unsigned long long>(unknown));
    if (!text.empty()) text += ',';
    text += "other_";
    text += hex.data();
  }
  return text;
}

}  // namespace attnbench
