#include "kernels/cudnn/cudnn_versions.h"

#include <cudnn.h>
#include <cudnn_frontend_version.h>

#include <cstddef>

namespace attnbench {

namespace {

// cuDNN 9 encodes its version as major * 10000 + minor * 100 + patch (91900 is 9.19.0).
constexpr size_t kMajorUnit = 10000;
constexpr size_t kMinorUnit = 100;

std::string dotted(size_t major, size_t minor, size_t patch) {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

}  // namespace

std::string cudnn_version_compiled() { return dotted(CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL); }

std::string cudnn_version_loaded() {
  const size_t version = cudnnGetVersion();
  return dotted(version / kMajorUnit, (version % kMajorUnit) / kMinorUnit, version % kMinorUnit);
}

std::string cudnn_frontend_version() {
  return dotted(CUDNN_FRONTEND_MAJOR_VERSION, CUDNN_FRONTEND_MINOR_VERSION,
                CUDNN_FRONTEND_PATCH_VERSION);
}

}  // namespace attnbench
