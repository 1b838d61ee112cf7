#include "harness/measure/environment.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <random>

#include "harness/core/shell.h"

#if defined(ATTNBENCH_HAVE_CUDA)
#include "harness/measure/cuda/cuda_devices.h"
#include "kernels/cudnn/cudnn_versions.h"
#endif

extern "C" char* openblas_get_config(void);

namespace attnbench {

std::string command_output(const std::string& command) {
  std::array<char, 512> buffer{};
  std::string output;
  FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return output;
  while (fgets(buffer.data(), static_cast<int>(buffer.size()), pipe) != nullptr)
    output += buffer.data();
  pclose(pipe);
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  return output;
}

std::string now_utc_iso8601() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text.data();
}

std::string make_uuid() {
  std::random_device device;
  std::mt19937_64 rng(
      (static_cast<uint64_t>(device()) << 32) ^ device() ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  const uint64_t high = rng();
  const uint64_t low = rng();
  std::array<char, 40> text{};
  std::snprintf(text.data(), text.size(), "%08x-%04x-4%03x-%04x-%012llx",
                static_cast<unsigned>(high >> 32), static_cast<unsigned>((high >> 16) & 0xFFFF),
                static_cast<unsigned>(high & 0xFFF),
                static_cast<unsigned>(((low >> 48) & 0x3FFF) | 0x8000),
                static_cast<unsigned long long>(low & 0xFFFFFFFFFFFFull));
  return text.data();
}

namespace {

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

}  // namespace

std::string cpu_model_name() { return cpu_model(); }

EnvironmentInfo compiled_environment() {
  EnvironmentInfo env;
  env.build_type = ATTNBENCH_BUILD_TYPE;
  env.build_flags = ATTNBENCH_BUILD_FLAGS;
  env.compiler = ATTNBENCH_COMPILER;
  return env;
}

EnvironmentInfo capture_environment() {
  EnvironmentInfo env = compiled_environment();
  const std::string source = ATTNBENCH_SOURCE_DIR;
  // A copy of the tree without .git (a GPU host running a bundle) names its commit through
  // ATTNBENCH_GIT_SHA and ATTNBENCH_GIT_DIRTY (yes/no), as ci/gpu-check.sh sets them.
  const char* sha_override = std::getenv("ATTNBENCH_GIT_SHA");
  const char* dirty_override = std::getenv("ATTNBENCH_GIT_DIRTY");
  if (sha_override != nullptr && *sha_override != '\0') {
    env.git_sha = sha_override;
    env.git_dirty = dirty_override != nullptr && std::string(dirty_override) == "yes";
  } else {
    const std::string git = "git -C " + shell_quote(source);
    env.git_sha = command_output(git + " rev-parse HEAD");
    if (env.git_sha.empty()) env.git_sha = "unknown";
    env.git_dirty = !command_output(git + " status --porcelain --untracked-files=no").empty();
  }
  env.blas = openblas_get_config();
  std::array<char, 256> host{};
  gethostname(host.data(), host.size() - 1);
  env.host = host.data();
  env.cpu = cpu_model();
  utsname name{};
  if (uname(&name) == 0)
    env.os = std::string(name.sysname) + " " + name.release + " " + name.machine;
#if defined(ATTNBENCH_HAVE_CUDA)
  capture_cuda_versions(env);
  env.cudnn = "compiled " + cudnn_version_compiled() + ", loaded " + cudnn_version_loaded();
  env.cudnn_frontend = cudnn_frontend_version();
#endif
  return env;
}

}  // namespace attnbench
