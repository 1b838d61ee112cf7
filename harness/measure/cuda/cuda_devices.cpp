#include "harness/measure/cuda/cuda_devices.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "harness/measure/cuda/nvml.h"

namespace attnbench {
namespace {

constexpr double kKilohertzPerMegahertz = 1000.0;

// 13000 -> "13.0", 12080 -> "12.8": CUDA's major * 1000 + minor * 10.
std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// 130100 -> "13.1.0": cuBLAS's major * 10000 + minor * 100 + patch.
std::string cublas_version_text(size_t version) {
  return std::to_string(version / 10000) + "." + std::to_string(version % 10000 / 100) + "." +
         std::to_string(version % 100);
}

// What DeviceInfo has no field for, for the environment record and `list devices`.
std::string extra_json(const cudaDeviceProp& prop, const std::string& pci_bus_id,
                       double memory_clock_mhz, const std::string& nvml_note) {
  nlohmann::json extra = {
      {"pci_bus_id", pci_bus_id},
      {"compute_capability", std::to_string(prop.major) + "." + std::to_string(prop.minor)},
      {"memory_clock_mhz", memory_clock_mhz},
      {"memory_bus_width_bits", prop.memoryBusWidth},
      {"shared_memory_per_sm", prop.sharedMemPerMultiprocessor},
      {"shared_memory_per_block_optin", prop.sharedMemPerBlockOptin},
      {"registers_per_sm", prop.regsPerMultiprocessor},
      {"max_threads_per_sm", prop.maxThreadsPerMultiProcessor},
      {"persisting_l2_max_bytes", prop.persistingL2CacheMaxSize},
      {"multi_gpu_board", prop.isMultiGpuBoard != 0},
      {"mps", prop.mpsEnabled != 0}};
  if (!nvml_note.empty()) extra["nvml"] = nvml_note;
  // A driver string that is not UTF-8 is replaced, not thrown on.
  return extra.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string format_gpu_uuid(const char (&bytes)[16]) {
  std::array<char, 48> text{};
  const auto* b = reinterpret_cast<const unsigned char*>(bytes);
  std::snprintf(text.data(), text.size(),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return text.data();
}

std::vector<Device> discover_cuda_devices(std::string& absence_reason) {
  absence_reason.clear();
  int count = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess) {
    absence_reason =
        error == cudaErrorInsufficientDriver
            ? std::string("no CUDA driver: cudaGetDeviceCount returned ") + cudaGetErrorName(error)
            : std::string("cudaGetDeviceCount returned ") + cudaGetErrorName(error) + " (" +
                  cudaGetErrorString(error) + ")";
    cudaGetLastError();
    return {};
  }
  if (count == 0) {
    absence_reason = "the CUDA driver reports no GPU (check CUDA_VISIBLE_DEVICES)";
    return {};
  }

  std::string nvml_absence;
  const std::unique_ptr<Nvml> nvml = Nvml::load(nvml_absence);
  std::vector<Device> devices;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    cudaDeviceProp prop{};
    if (const cudaError_t error = cudaGetDeviceProperties(&prop, ordinal); error != cudaSuccess) {
      absence_reason = "cudaGetDeviceProperties(" + std::to_string(ordinal) + ") returned " +
                       cudaGetErrorName(error);
      cudaGetLastError();
      return {};
    }
    std::array<char, 32> pci_bus_id{};
    if (cudaDeviceGetPCIBusId(pci_bus_id.data(), static_cast<int>(pci_bus_id.size()), ordinal) !=
        cudaSuccess) {
      pci_bus_id[0] = '\0';
      cudaGetLastError();
    }
    int clock_khz = 0;
    int memory_clock_khz = 0;
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, ordinal) != cudaSuccess ||
        cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, ordinal) !=
            cudaSuccess) {
      cudaGetLastError();
    }

    Device device;
    device.backend = Backend::cuda;
    DeviceInfo& info = device.info;
    info.kind = "cuda";
    info.ordinal = ordinal;
    info.name = prop.name;
    info.uuid = format_gpu_uuid(prop.uuid.bytes);
    info.sm_version = prop.major * 10 + prop.minor;
    info.sm_count = prop.multiProcessorCount;
    info.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    info.l2_bytes = prop.l2CacheSize;
    info.clock_mhz = clock_khz / kKilohertzPerMegahertz;
    info.ecc = prop.ECCEnabled;

    std::string nvml_note = nvml_absence;
    if (nvml) {
      const NvmlDevice handle = nvml->find_device(info.uuid, pci_bus_id.data());
      if (handle == nullptr) {
        nvml_note = "NVML does not know " + info.uuid + " (a MIG instance?)";
      } else {
        if (auto mhz = nvml->max_sm_clock_mhz(handle)) info.clock_mhz = *mhz;
        if (auto watts = nvml->power_limit_watts(handle)) info.power_limit_w = *watts;
        if (auto ecc = nvml->ecc_enabled(handle)) info.ecc = *ecc ? 1 : 0;
        if (auto persistence = nvml->persistence_enabled(handle))
          info.persistence = *persistence ? 1 : 0;
      }
    }
    info.extra_json =
        extra_json(prop, pci_bus_id.data(), memory_clock_khz / kKilohertzPerMegahertz, nvml_note);
    devices.push_back(std::move(device));
  }
  return devices;
}

void capture_cuda_versions(EnvironmentInfo& env) {
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) {
    env.cuda_runtime = cuda_version_text(runtime) + " (static cudart)";
  }
  // The highest CUDA version the installed driver supports; 0 without a driver.
  int driver = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  cudaGetLastError();
  std::string nvml_absence;
  const std::unique_ptr<Nvml> nvml = Nvml::load(nvml_absence);
  const std::string driver_version = nvml ? nvml->driver_version() : std::string();
  if (driver == 0) {
    env.cuda_driver = "none";
  } else {
    env.cuda_driver = (driver_version.empty() ? std::string() : driver_version + " ") + "(CUDA " +
                      cuda_version_text(driver) + ")";
  }
  const std::string cublas = "cuBLASLt " + cublas_version_text(cublasLtGetVersion()) +
                             " (compiled " + cublas_version_text(CUBLAS_VERSION) + ")";
  env.cublas = cublas;
}

}  // namespace attnbench
