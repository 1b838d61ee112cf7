// Static checks of the CUDA kernel library, read off its fatbinaries with cuobjdump (PyPI's
// nvidia-cuda-cuobjdump, so they run on any build machine, with or without a GPU):
//   - every kernel carries SASS for sm_80 and sm_90a and compute_80 PTX (so a newer GPU can JIT
//     it), i.e. nobody dropped an architecture from a target's CUDA_ARCHITECTURES;
//   - no kernel has a stack frame: register spills and run-time-indexed arrays land there.
// A negative control (tests/static/sm80_only_control.cu, built for sm_80 alone, with one kernel
// that needs a stack frame) proves that both checks can fail.
#include <cxxabi.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace attnbench {
namespace {

// What the library must carry for each kernel: SASS per real architecture, PTX for the oldest
// one (the driver compiles it for GPUs newer than every SASS).
const std::vector<std::string> kRequiredSass = {"sm_80", "sm_90a"};
const std::string kRequiredPtx = "sm_80";

struct CommandOutput {
  int exit_code = -1;
  std::string text;
};

CommandOutput run_command(const std::string& command) {
  CommandOutput output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return output;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) output.text.append(buffer, n);
  const int status = pclose(pipe);
  output.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
}

std::string demangle(const std::string& name) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> readable(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && readable ? std::string(readable.get()) : name;
}

// The device code of a static library, per archive member (object file) and function.
struct Function {
  std::set<std::string> sass_archs;  // "sm_80", "sm_90a", ...
  std::set<std::string> ptx_archs;   // the virtual architecture, as cuobjdump names it ("sm_80")
  std::map<std::string, int> stack_bytes;  // per SASS arch: STACK + LOCAL
  bool kernel = false;  // a __global__ function (".entry" in PTX, or any function with SASS)
};
using DeviceCode = std::map<std::pair<std::string, std::string>, Function>;  // (member, name)

// Value of "key = value" and "member <path>:<object>:" lines of cuobjdump's listings.
bool read_arch(const std::string& line, std::string& arch) {
  if (line.rfind("arch = ", 0) != 0) return false;
  arch = line.substr(7);
  return true;
}
bool read_member(const std::string& line, std::string& member) {
  if (line.rfind("member ", 0) != 0) return false;
  member = line.substr(7);
  if (!member.empty() && member.back() == ':') member.pop_back();
  const size_t object = member.rfind(':');  // "/path/libx.a:file.cu.o" -> "file.cu.o"
  if (object != std::string::npos) member = member.substr(object + 1);
  return true;
}

// cuobjdump --dump-resource-usage: per SASS arch, "Function NAME:" then a line of resources.
void parse_resource_usage(const std::string& text, DeviceCode& code) {
  std::istringstream lines(text);
  std::string line, member = "(object)", arch, function;
  bool in_sass = false;
  while (std::getline(lines, line)) {
    if (read_member(line, member)) continue;
    if (line.rfind("Fatbin elf code", 0) == 0) in_sass = true;
    if (line.rfind("Fatbin ptx code", 0) == 0) in_sass = false;
    if (read_arch(line, arch)) continue;
    const size_t at = line.find("Function ");
    if (in_sass && at != std::string::npos && !line.empty() && line.back() == ':') {
      function = line.substr(at + 9, line.size() - at - 10);
      code[{member, function}].sass_archs.insert(arch);
      code[{member, function}].kernel = true;
      continue;
    }
    if (in_sass && !function.empty() && line.find("REG:") != std::string::npos) {
      int stack = 0;
      for (const char* key : {"STACK:", "LOCAL:"}) {
        const size_t k = line.find(key);
        if (k != std::string::npos) stack += std::atoi(line.c_str() + k + std::string(key).size());
      }
      code[{member, function}].stack_bytes[arch] = stack;
      function.clear();
    }
  }
}

// cuobjdump --dump-ptx: per PTX arch, the kernels (".entry NAME(") and functions (".func").
void parse_ptx(const std::string& text, DeviceCode& code) {
  std::istringstream lines(text);
  std::string line, member = "(object)", arch;
  bool in_ptx = false;
  while (std::getline(lines, line)) {
    if (read_member(line, member)) continue;
    if (line.rfind("Fatbin ptx code", 0) == 0) in_ptx = true;
    if (line.rfind("Fatbin elf code", 0) == 0) in_ptx = false;
    if (read_arch(line, arch)) continue;
    if (!in_ptx) continue;
    for (const char* directive : {".entry ", ".func "}) {
      const size_t at = line.find(directive);
      if (at == std::string::npos) continue;
      std::string name = line.substr(at + std::string(directive).size());
      // ".func (.param .b32 ret) name(" names its return value first.
      if (!name.empty() && name[0] == '(') name = name.substr(name.find(')') + 1);
      name = name.substr(name.find_first_not_of(' '));
      name = name.substr(0, name.find_first_of("( \t"));
      // PTX declarations of functions defined elsewhere (".extern .func") are no code here.
      if (line.find(".extern") != std::string::npos) continue;
      Function& function = code[{member, name}];
      function.ptx_archs.insert(arch);
      function.kernel |= std::string(directive) == ".entry ";
    }
  }
}

// Reads a library's device code; an empty map with `error` set when cuobjdump failed.
DeviceCode read_device_code(const std::string& cuobjdump, const std::string& library,
                            std::string& error) {
  DeviceCode code;
  for (const char* listing : {"--dump-resource-usage", "--dump-ptx"}) {
    const CommandOutput output =
        run_command("'" + cuobjdump + "' " + listing + " '" + library + "'");
    if (output.exit_code != 0) {
      error = cuobjdump + " " + listing + " " + library + " failed: " + output.text;
      return {};
    }
    if (std::string(listing) == "--dump-ptx")
      parse_ptx(output.text, code);
    else
      parse_resource_usage(output.text, code);
  }
  return code;
}

// One line per kernel and missing build, e.g. "naive_cublas.cu.o: softmax_kernel(...): no
// sm_90a SASS". Device functions that exist only in PTX (inlined into every SASS) do not count.
std::vector<std::string> missing_architectures(const DeviceCode& code) {
  std::vector<std::string> missing;
  for (const auto& [key, function] : code) {
    if (!function.kernel) continue;
    const std::string where = key.first + ": " + demangle(key.second) + ": ";
    for (const std::string& arch : kRequiredSass) {
      if (!function.sass_archs.count(arch)) missing.push_back(where + "no " + arch + " SASS");
    }
    if (!function.ptx_archs.count(kRequiredPtx))
      missing.push_back(where + "no compute_" + kRequiredPtx.substr(3) + " PTX");
  }
  return missing;
}

std::vector<std::string> stack_frames(const DeviceCode& code) {
  std::vector<std::string> frames;
  for (const auto& [key, function] : code) {
    for (const auto& [arch, bytes] : function.stack_bytes) {
      if (bytes > 0) {
        frames.push_back(key.first + ": " + demangle(key.second) + ": " + std::to_string(bytes) +
                         " bytes of stack/local memory on " + arch);
      }
    }
  }
  return frames;
}

std::string join_lines(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += "  " + line + "\n";
  return text;
}

size_t kernel_count(const DeviceCode& code) {
  size_t count = 0;
  for (const auto& [key, function] : code) count += function.sass_archs.empty() ? 0 : 1;
  return count;
}

class StaticCuda : public ::testing::Test {
 protected:
  void SetUp() override {
#if !defined(ATTNBENCH_CUDA_KERNEL_LIBRARY)
    GTEST_SKIP() << "the CUDA backend is not built (no nvcc at configure time, or "
                    "-DATTNBENCH_CUDA=OFF): there is no device code to check";
#else
    cuobjdump_ = ATTNBENCH_CUOBJDUMP;
    ASSERT_FALSE(cuobjdump_.empty())
        << "cuobjdump was not found at configure time: ci/install-deps.sh installs PyPI's "
           "nvidia-cuda-cuobjdump; install it and reconfigure (or pass -DATTNBENCH_CUOBJDUMP=PATH)";
#endif
  }

  DeviceCode read(const std::string& library) {
    std::string error;
    DeviceCode code = read_device_code(cuobjdump_, library, error);
    EXPECT_TRUE(error.empty()) << error;
    return code;
  }

  std::string cuobjdump_;
};

#if defined(ATTNBENCH_CUDA_KERNEL_LIBRARY)
constexpr const char* kKernelLibrary = ATTNBENCH_CUDA_KERNEL_LIBRARY;
constexpr const char* kControlLibrary = ATTNBENCH_STATIC_CONTROL_LIBRARY;
#else
constexpr const char* kKernelLibrary = "";
constexpr const char* kControlLibrary = "";
#endif

TEST_F(StaticCuda, EveryKernelCarriesSm80AndSm90aSassAndCompute80Ptx) {
  const DeviceCode code = read(kKernelLibrary);
  EXPECT_GT(kernel_count(code), 0u) << "no kernel found in " << kKernelLibrary;
  const std::vector<std::string> missing = missing_architectures(code);
  EXPECT_TRUE(missing.empty()) << kKernelLibrary << " lacks builds:\n" << join_lines(missing);
}

TEST_F(StaticCuda, NoKernelHasAStackFrame) {
  const DeviceCode code = read(kKernelLibrary);
  EXPECT_GT(kernel_count(code), 0u) << "no kernel found in " << kKernelLibrary;
  const std::vector<std::string> frames = stack_frames(code);
  EXPECT_TRUE(frames.empty()) << "register spills or local arrays (see -Xptxas -v):\n"
                              << join_lines(frames);
}

// The control has two kernels, built for sm_80 (SASS and PTX) only: the check must name the
// missing sm_90a SASS of each, and nothing else.
TEST_F(StaticCuda, NegativeControlReportsTheMissingSm90a) {
  const DeviceCode code = read(kControlLibrary);
  ASSERT_EQ(kernel_count(code), 2u)
      << "the control's kernels were not found in " << kControlLibrary;
  const std::vector<std::string> missing = missing_architectures(code);
  ASSERT_EQ(missing.size(), 2u) << join_lines(missing);
  for (const std::string& line : missing) {
    EXPECT_NE(line.find("no sm_90a SASS"), std::string::npos) << line;
    EXPECT_NE(line.find("attnbench::static_control::"), std::string::npos) << line;
  }
}

TEST_F(StaticCuda, NegativeControlReportsItsStackFrame) {
  const DeviceCode code = read(kControlLibrary);
  const std::vector<std::string> frames = stack_frames(code);
  ASSERT_EQ(frames.size(), 1u) << join_lines(frames);
  EXPECT_NE(frames[0].find("local_array_kernel"), std::string::npos) << frames[0];
  EXPECT_NE(frames[0].find("on sm_80"), std::string::npos) << frames[0];
}

}  // namespace
}  // namespace attnbench
