// Static checks of the CUDA kernel library, read off its fatbinaries with cuobjdump (PyPI's
// nvidia-cuda-cuobjdump, so they run on any build machine, with or without a GPU):
//   - every kernel carries SASS for sm_80 and sm_90a and compute_80 PTX (so a newer GPU can JIT
//     it), i.e. nobody dropped an architecture from a target's CUDA_ARCHITECTURES;
//   - no kernel has a stack frame: register spills and run-time-indexed arrays land there (this
//     covers every kernel of the library: flash1's, flash2's and the naive family's alike);
//   - cuda.flash2's kernels run on tensor cores: their SASS for sm_80 and sm_90a holds HMMA
//     (mma.sync) and LDSM (ldmatrix), counted per kernel with cuobjdump --dump-sass (which needs
//     nvdisasm, PyPI's nvidia-cuda-nvdisasm).
// Negative controls prove that the checks can fail: tests/gpu/static/sm80_only_control.cu (built
// for sm_80 alone, with one kernel that needs a stack frame) for the first two, and
// tests/gpu/static/no_tensor_core_control.cu (a tile product without mma or ldmatrix) for the
// third.
#include <cxxabi.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/cuda/flash2/flash2_traits.h"
#include "kernels/cuda/flash3/flash3_probe.h"
#include "kernels/cuda/flash3/flash3_time_model.h"
#include "kernels/cuda/flash3/flash3_traits.h"
#include "tests/support/command.h"
#include "tests/support/scratch_directory.h"

namespace attnbench {
namespace {

// What the library must carry for each kernel: SASS per real architecture, PTX for the oldest
// one (the driver compiles it for GPUs newer than every SASS).
const std::vector<std::string> kRequiredSass = {"sm_80", "sm_90a"};
const std::string kRequiredPtx = "sm_80";

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
  std::map<std::string, int> registers;    // per SASS arch: REG
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
      code[{member, function}].registers[arch] = std::atoi(line.c_str() + line.find("REG:") + 4);
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
    const CommandResult result = run_shell("'" + cuobjdump + "' " + listing + " '" + library + "'");
    if (result.exit_code != 0) {
      error = cuobjdump + " " + listing + " " + library + " failed: " + result.output;
      return {};
    }
    if (std::string(listing) == "--dump-ptx")
      parse_ptx(result.output, code);
    else
      parse_resource_usage(result.output, code);
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

// The one stack frame allowed, and its ceiling: cuda.flash2's backward key-block kernel at d 128
// holds dK and dV (128 registers a thread), P^T (32) and a part of dP^T (8) in its MMA loop, and
// ptxas keeps the rest there too; about a dozen values of its prologue (the key block's query
// tiles, each key's visible rows) live in local memory, 44-48 bytes as nvcc 13.0 builds it,
// reloaded once per query tile (about 10 loads against 256 HMMA), none in the MMA chain
// (cuobjdump -sass, 2026-12-06). The ceiling catches it growing; every other kernel has none.
struct AllowedFrame {
  const char* name_part;
  int max_bytes;
};
constexpr AllowedFrame kAllowedFrames[] = {{"flash2_backward_main<128,", 64}};

int allowed_stack_bytes(const std::string& name) {
  for (const AllowedFrame& allowed : kAllowedFrames) {
    if (name.find(allowed.name_part) != std::string::npos) return allowed.max_bytes;
  }
  return 0;
}

std::vector<std::string> stack_frames(const DeviceCode& code) {
  std::vector<std::string> frames;
  for (const auto& [key, function] : code) {
    for (const auto& [arch, bytes] : function.stack_bytes) {
      if (bytes > allowed_stack_bytes(demangle(key.second))) {
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

// ---- SASS: the instructions of each kernel
// -------------------------------------------------------

// Instruction counts per opcode ("HMMA" for HMMA.16816.F32.BF16), per SASS arch, per function.
// MUFU (the multi-function unit) is counted by operation as well: "MUFU.EX2" beside "MUFU".
using OpcodeCounts = std::map<std::string, int>;
using SassCode = std::map<std::pair<std::string, std::string>,   // (member, function)
                          std::map<std::string, OpcodeCounts>>;  // arch -> counts

// The instruction of one cuobjdump --dump-sass instruction line, its operands included and its
// predicate guard and ';' left out ("HMMA.16816.F32.BF16 R84, R20, R16, RZ" of
// "        /*0150*/   @!P0 HMMA.16816.F32.BF16 R84, R20, R16, RZ ;   /* 0x... */"), or "" for
// anything else (headers, and the second line of each instruction: "/* 0x000fe2... */").
std::string sass_instruction(const std::string& line) {
  const size_t open = line.find_first_not_of(" \t");
  if (open == std::string::npos || line.compare(open, 2, "/*") != 0) return {};
  const size_t close = line.find("*/", open + 2);
  if (close == std::string::npos || close == open + 2) return {};
  for (size_t i = open + 2; i < close; ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(line[i]))) return {};  // an encoding line
  }
  std::string text = line.substr(close + 2, line.find(';', close) - close - 2);
  text = text.substr(std::min(text.size(), text.find_first_not_of(" \t")));
  if (!text.empty() && text[0] == '@') text = text.substr(text.find(' ') + 1);  // the guard
  return text.substr(0, text.find_last_not_of(" \t") + 1);
}

// "HMMA.16816.F32.BF16" of "HMMA.16816.F32.BF16 R84, R20, R16, RZ".
std::string opcode_of(const std::string& instruction) {
  return instruction.substr(0, instruction.find(' '));
}
// "HMMA" of "HMMA.16816.F32.BF16", and "MUFU.EX2" of "MUFU.EX2" (empty for other opcodes).
std::string base_opcode(const std::string& opcode) { return opcode.substr(0, opcode.find('.')); }
std::string mufu_operation(const std::string& opcode) {
  if (base_opcode(opcode) != "MUFU") return {};
  return opcode.substr(0, opcode.find('.', 5));
}

// The instructions of each function in listing order, per SASS arch.
using SassListing = std::map<std::pair<std::string, std::string>,  // (member, function)
                             std::map<std::string, std::vector<std::string>>>;  // arch -> code

// cuobjdump --dump-sass: "member" lines, "arch = sm_XX", "Function : NAME", then instructions.
SassListing parse_sass_listing(const std::string& text) {
  SassListing listing;
  std::istringstream lines(text);
  std::string line, member = "(object)", arch, function;
  while (std::getline(lines, line)) {
    if (read_member(line, member)) {
      function.clear();
      continue;
    }
    if (read_arch(line, arch)) {
      function.clear();
      continue;
    }
    const size_t at = line.find("Function : ");
    if (at != std::string::npos) {
      function = line.substr(at + 11);
      function = function.substr(0, function.find_first_of(" \t"));
      listing[{member, function}][arch];  // listed even if it had no instruction
      continue;
    }
    if (function.empty()) continue;
    const std::string instruction = sass_instruction(line);
    if (!instruction.empty()) listing[{member, function}][arch].push_back(instruction);
  }
  return listing;
}

void parse_sass(const std::string& text, SassCode& code) {
  for (const auto& [key, per_arch] : parse_sass_listing(text)) {
    for (const auto& [arch, instructions] : per_arch) {
      OpcodeCounts& counts = code[key][arch];
      for (const std::string& instruction : instructions) {
        const std::string opcode = opcode_of(instruction);
        ++counts[base_opcode(opcode)];
        if (const std::string operation = mufu_operation(opcode); !operation.empty()) {
          ++counts[operation];
        }
      }
    }
  }
}

// The opcodes a tensor-core attention kernel must use: mma.sync and ldmatrix.
const std::vector<std::string> kTensorCoreOpcodes = {"HMMA", "LDSM"};

// One line per kernel whose demangled name contains `kernel_name` and whose SASS for a required
// arch lacks one of `opcodes` (or lacks that arch), e.g. "flash2_hdim64_fp16.cu.o:
// void attnbench::flash2::on_gpu::flash2_forward<64, __half>(...): no HMMA in its sm_80 SASS".
// `matched` counts the kernels the name selected.
std::vector<std::string> missing_opcodes(const SassCode& code, const std::string& kernel_name,
                                         const std::vector<std::string>& opcodes, int& matched) {
  std::vector<std::string> missing;
  matched = 0;
  for (const auto& [key, per_arch] : code) {
    const std::string name = demangle(key.second);
    if (name.find(kernel_name) == std::string::npos) continue;
    ++matched;
    for (const std::string& arch : kRequiredSass) {
      const auto counts = per_arch.find(arch);
      if (counts == per_arch.end()) {
        missing.push_back(key.first + ": " + name + ": no " + arch + " SASS");
        continue;
      }
      for (const std::string& opcode : opcodes) {
        const auto count = counts->second.find(opcode);
        if (count == counts->second.end() || count->second == 0)
          missing.push_back(key.first + ": " + name + ": no " + opcode + " in its " + arch +
                            " SASS");
      }
    }
  }
  return missing;
}

int opcode_count(const OpcodeCounts& counts, const std::string& opcode) {
  const auto found = counts.find(opcode);
  return found == counts.end() ? 0 : found->second;
}

int instruction_count(const OpcodeCounts& counts) {
  int total = 0;
  for (const auto& [opcode, count] : counts) {
    if (opcode.find('.') == std::string::npos) total += count;  // MUFU.EX2 is in MUFU's count
  }
  return total;
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

  SassCode read_sass(const std::string& library) {
    SassCode code;
    parse_sass(dump_sass(library), code);
    return code;
  }
  SassListing read_sass_listing(const std::string& library) {
    return parse_sass_listing(dump_sass(library));
  }

  // cuobjdump --dump-sass of a library or an object file; it runs nvdisasm, found through
  // NVDISASM_PATH (its folder). A library's listing (34 MB for the kernel library) is written once
  // beside it, as LIBRARY.sass, and read by every test after the first: three tests read each
  // library, each in its own process, and the disassembly took 30 s of CPU each on 2 cores. The
  // listing is remade when the library is newer; a lock keeps two tests that start together from
  // disassembling twice.
  std::string dump_sass(const std::string& library) {
    const std::string listing = library + ".sass";
    const int lock = ::open((listing + ".lock").c_str(), O_CREAT | O_RDWR, 0644);
    if (lock >= 0) ::flock(lock, LOCK_EX);
    std::string text = up_to_date(listing, library) ? read_file(listing) : std::string();
    if (text.empty()) {
      text = disassemble(library);
      write_listing(listing, text);
    }
    if (lock >= 0) ::close(lock);  // releases the lock
    return text;
  }

  std::string disassemble(const std::string& library) {
#if defined(ATTNBENCH_NVDISASM)
    const std::string nvdisasm = ATTNBENCH_NVDISASM;
#else
    const std::string nvdisasm;
#endif
    if (nvdisasm.empty()) {
      ADD_FAILURE() << "nvdisasm was not found at configure time (cuobjdump needs it for "
                       "--dump-sass): ci/install-deps.sh installs PyPI's nvidia-cuda-nvdisasm; "
                       "install it and reconfigure (or pass -DATTNBENCH_NVDISASM=PATH)";
      return {};
    }
    const std::string folder = nvdisasm.substr(0, nvdisasm.rfind('/'));
    const CommandResult result =
        run_shell("NVDISASM_PATH='" + folder + "' PATH='" + folder + "':\"$PATH\" '" + cuobjdump_ +
                  "' --dump-sass '" + library + "'");
    EXPECT_EQ(result.exit_code, 0) << "cuobjdump --dump-sass " << library << ": " << result.output;
    return result.exit_code == 0 ? result.output : std::string();
  }

  static bool up_to_date(const std::string& listing, const std::string& library) {
    std::error_code error;
    const auto listed = std::filesystem::last_write_time(listing, error);
    if (error) return false;
    const auto built = std::filesystem::last_write_time(library, error);
    return !error && listed >= built;
  }

  static std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }

  // Written whole under another name, then renamed: a reader never sees half a listing.
  static void write_listing(const std::string& listing, const std::string& text) {
    if (text.empty()) return;
    const std::string partial = listing + ".partial";
    std::ofstream(partial, std::ios::binary) << text;
    std::error_code error;
    std::filesystem::rename(partial, listing, error);
  }

  std::string cuobjdump_;
};

#if defined(ATTNBENCH_CUDA_KERNEL_LIBRARY)
constexpr const char* kKernelLibrary = ATTNBENCH_CUDA_KERNEL_LIBRARY;
constexpr const char* kControlLibrary = ATTNBENCH_STATIC_CONTROL_LIBRARY;
constexpr const char* kNoMmaControlLibrary = ATTNBENCH_NO_MMA_CONTROL_LIBRARY;
#else
constexpr const char* kKernelLibrary = "";
constexpr const char* kControlLibrary = "";
constexpr const char* kNoMmaControlLibrary = "";
#endif

// cuda.flash2's kernels, by demangled name: head dims 64, 80, 96, 128, 192/128, 256 x fp16, bf16.
constexpr const char* kFlash2Kernel = "attnbench::flash2::on_gpu::flash2_forward<";
constexpr int kFlash2Instantiations = 12;
// cuda.flash1's kernels, by demangled name: head dims 64, 128 x fp16, bf16.
constexpr const char* kFlash1Kernel = "flash1::on_gpu::detail::flash1_kv_block_kernel<";
constexpr int kFlash1Instantiations = 4;
// The kernels the spill test names on their own (the stack-frame test covers every kernel too).
const std::vector<std::string> kFlashKernelNames = {"flash1", "flash2"};

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

// The flash kernels by name, with their register counts: no spills, no stack frame, on every SASS
// arch; flash1's four and flash2's twelve instantiations must be among them (so the test cannot
// pass on nothing).
TEST_F(StaticCuda, FlashKernelsHaveNoSpills) {
  const DeviceCode code = read(kKernelLibrary);
  int flash1_kernels = 0;
  int flash2_kernels = 0;
  for (const auto& [key, function] : code) {
    const std::string name = demangle(key.second);
    const bool flash = std::any_of(
        kFlashKernelNames.begin(), kFlashKernelNames.end(), [&](const std::string& part) {
          return name.find(part) != std::string::npos || key.first.find(part) != std::string::npos;
        });
    if (!flash || function.sass_archs.empty()) continue;
    flash1_kernels += name.find(kFlash1Kernel) != std::string::npos;
    flash2_kernels += name.find(kFlash2Kernel) != std::string::npos;
    for (const std::string& arch : kRequiredSass) {
      const auto stack = function.stack_bytes.find(arch);
      ASSERT_NE(stack, function.stack_bytes.end()) << name << ": no " << arch << " SASS";
      EXPECT_LE(stack->second, allowed_stack_bytes(name))
          << key.first << ": " << name << ": " << stack->second
          << " bytes of stack/local memory (spills) on " << arch;
      const int registers = function.registers.count(arch) ? function.registers.at(arch) : 0;
      std::printf("[ resources ] %-24s %-7s REG %3d  STACK %d  %s\n", key.first.c_str(),
                  arch.c_str(), registers, stack->second, name.c_str());
    }
  }
  EXPECT_EQ(flash1_kernels, kFlash1Instantiations)
      << "cuda.flash1's kernels were not found in " << kKernelLibrary;
  EXPECT_EQ(flash2_kernels, kFlash2Instantiations)
      << "cuda.flash2's kernels were not found in " << kKernelLibrary;
}

// flash2 on tensor cores: every instantiation's SASS for sm_80 and sm_90a holds mma.sync (HMMA)
// and ldmatrix (LDSM). The counts per kernel are printed for the record.
TEST_F(StaticCuda, Flash2UsesTensorCoresAndLdmatrix) {
  const SassCode code = read_sass(kKernelLibrary);
  int matched = 0;
  const std::vector<std::string> missing =
      missing_opcodes(code, kFlash2Kernel, kTensorCoreOpcodes, matched);
  EXPECT_EQ(matched, kFlash2Instantiations)
      << "cuda.flash2's kernels were not found in the SASS of " << kKernelLibrary;
  EXPECT_TRUE(missing.empty()) << "flash2 kernels off the tensor cores:\n" << join_lines(missing);
  for (const auto& [key, per_arch] : code) {
    const std::string name = demangle(key.second);
    if (name.find(kFlash2Kernel) == std::string::npos) continue;
    for (const auto& [arch, counts] : per_arch) {
      std::printf("[ sass ] %-24s %-7s HMMA %4d  LDSM %4d  instructions %5d\n", key.first.c_str(),
                  arch.c_str(), opcode_count(counts, "HMMA"), opcode_count(counts, "LDSM"),
                  instruction_count(counts));
      RecordProperty(key.first + "." + arch + ".HMMA", opcode_count(counts, "HMMA"));
      RecordProperty(key.first + "." + arch + ".LDSM", opcode_count(counts, "LDSM"));
    }
  }
}

// cuda.flash2's backward key-block kernel: its mma.sync count per query tile, from the model of
// its five products (flash2_backward_kernel.cuh): S^T and dP^T over the head dim's k-steps times
// the tile's 8-query columns, dV and dK over the tile's query k-steps times the dim's 8-wide
// columns, and one pair of dQ's dim tiles over the block's key k-steps (its loop is kept rolled:
// unrolled, ptxas hoisted every K fragment into spills). 136 at d 64 and 264 at d 128, on both
// archs and both ways of adding dQ: a product dropped or duplicated shows here without a GPU.
template <int HeadDim>
int flash2_backward_hmma() {
  using T = flash2::BackwardTraits<HeadDim>;
  return 2 * T::kDimSteps * T::kQueryTiles + 2 * T::kQuerySteps * T::kDimTiles + 2 * T::kKeySteps;
}

TEST_F(StaticCuda, Flash2BackwardHmmaCountsMatchTheModel) {
  const SassCode code = read_sass(kKernelLibrary);
  int checked = 0;
  for (const auto& [key, per_arch] : code) {
    const std::string name = demangle(key.second);
    if (name.find("flash2_backward_main<") == std::string::npos) continue;
    const int expected = name.find("flash2_backward_main<128,") != std::string::npos
                             ? flash2_backward_hmma<128>()
                             : flash2_backward_hmma<64>();
    for (const std::string& arch : kRequiredSass) {
      ASSERT_TRUE(per_arch.count(arch)) << name << ": no " << arch << " SASS";
      EXPECT_EQ(opcode_count(per_arch.at(arch), "HMMA"), expected) << name << " on " << arch;
      ++checked;
    }
  }
  // d 64 and 128, fp16 and bf16, atomic and per-split dQ, on sm_80 and sm_90a.
  EXPECT_EQ(checked, 2 * 2 * 2 * static_cast<int>(kRequiredSass.size()))
      << "cuda.flash2's backward kernels were not found in the SASS of " << kKernelLibrary;
}

// cuda.flash2's forward: its mma.sync count per key tile, from the model of its two products
// (flash2_kernel.cuh's loop is unrolled over one tile): S = Q K^T over the head dim's k-steps times
// the tile's 8-key columns, O += P V over the tile's key k-steps times d_v's 8-wide columns. 64 at
// d 64, 80 at d 80, 96 at d 96, 128 at d 128 and 256 (32-key tiles), 80 at 192/128: a product
// that drops d 80's last k-step or runs d 96's padding shows here.
template <int HeadDim, int HeadDimV>
int flash2_forward_hmma() {
  using T = flash2::Traits<HeadDim, HeadDimV>;
  return T::kDimSteps * T::kKeyTiles + T::kKeySteps * T::kDimTiles;
}

TEST_F(StaticCuda, Flash2ForwardHmmaCountsMatchTheModel) {
  const std::vector<std::pair<std::string, int>> expected = {
      {"flash2_forward<64, 64,", flash2_forward_hmma<64, 64>()},
      {"flash2_forward<80, 80,", flash2_forward_hmma<80, 80>()},
      {"flash2_forward<96, 96,", flash2_forward_hmma<96, 96>()},
      {"flash2_forward<128, 128,", flash2_forward_hmma<128, 128>()},
      {"flash2_forward<192, 128,", flash2_forward_hmma<192, 128>()},
      {"flash2_forward<256, 256,", flash2_forward_hmma<256, 256>()},
  };
  const SassCode code = read_sass(kKernelLibrary);
  int checked = 0;
  for (const auto& [key, per_arch] : code) {
    const std::string name = demangle(key.second);
    if (name.find(kFlash2Kernel) == std::string::npos) continue;
    const auto model = std::find_if(expected.begin(), expected.end(), [&](const auto& entry) {
      return name.find(entry.first) != std::string::npos;
    });
    ASSERT_NE(model, expected.end()) << name << ": no model for its head dims";
    for (const std::string& arch : kRequiredSass) {
      ASSERT_TRUE(per_arch.count(arch)) << name << ": no " << arch << " SASS";
      EXPECT_EQ(opcode_count(per_arch.at(arch), "HMMA"), model->second) << name << " on " << arch;
      ++checked;
    }
  }
  EXPECT_EQ(checked, kFlash2Instantiations * static_cast<int>(kRequiredSass.size()))
      << "cuda.flash2's kernels were not found in the SASS of " << kKernelLibrary;
}

// The control's tile product is plain FMA work on shared memory: the same check must report it on
// both architectures, for both opcodes — and the parse must have seen its instructions (FFMA),
// so the failure is the check's, not an empty listing's.
TEST_F(StaticCuda, NegativeControlFailsTheTensorCoreCheck) {
  const SassCode code = read_sass(kNoMmaControlLibrary);
  int matched = 0;
  const std::vector<std::string> missing = missing_opcodes(
      code, "attnbench::static_control::plain_tile_product", kTensorCoreOpcodes, matched);
  ASSERT_EQ(matched, 1) << "the control's kernel was not found in " << kNoMmaControlLibrary;
  EXPECT_EQ(missing.size(), kRequiredSass.size() * kTensorCoreOpcodes.size())
      << join_lines(missing);
  for (const std::string& arch : kRequiredSass) {
    for (const std::string& opcode : kTensorCoreOpcodes) {
      const std::string expected = "no " + opcode + " in its " + arch + " SASS";
      EXPECT_TRUE(std::any_of(
          missing.begin(), missing.end(),
          [&](const std::string& line) { return line.find(expected) != std::string::npos; }))
          << "expected \"" << expected << "\" in:\n"
          << join_lines(missing);
    }
  }
  for (const auto& [key, per_arch] : code) {
    for (const std::string& arch : kRequiredSass) {
      ASSERT_TRUE(per_arch.count(arch)) << "the control has no " << arch << " SASS";
      EXPECT_GT(opcode_count(per_arch.at(arch), "FFMA"), 0)
          << "the SASS parse saw no FFMA in the control's " << arch << " code";
    }
  }
}

// ---- the Hopper kernels (cuda.flash3's stages): sm_90a only ------------------------------------

#if defined(ATTNBENCH_HOPPER_KERNEL_LIBRARY)
constexpr const char* kHopperLibrary = ATTNBENCH_HOPPER_KERNEL_LIBRARY;
#else
constexpr const char* kHopperLibrary = "";
#endif

// What a Hopper attention kernel's sm_90a SASS must hold: `hgmma` HGMMA (wgmma) instructions
// and `exp2` MUFU.EX2 (the softmax's exponentials: one per thread and score, one per row), no
// HMMA (mma.sync: Ampere's path), UTMALDG (TMA loads) and SYNCS (mbarrier operations). One line
// per finding, naming the kernel. exp2 < 0: not checked.
struct HopperExpectation {
  std::string kernel;  // part of the demangled name
  int hgmma;
  bool rebalances_registers;  // setmaxnreg: USETMAXREG
  int exp2 = -1;
  bool stores_through_tma = false;  // the output by TMA store: UTMASTG
};

std::vector<std::string> hopper_findings(const SassCode& code, const HopperExpectation& expected,
                                         int& matched) {
  std::vector<std::string> findings;
  matched = 0;
  for (const auto& [key, per_arch] : code) {
    const std::string name = demangle(key.second);
    if (name.find(expected.kernel) == std::string::npos) continue;
    ++matched;
    const auto counts = per_arch.find("sm_90a");
    if (counts == per_arch.end()) {
      findings.push_back(name + ": no sm_90a SASS");
      continue;
    }
    const int hgmma = opcode_count(counts->second, "HGMMA");
    if (hgmma != expected.hgmma) {
      findings.push_back(name + ": " + std::to_string(hgmma) + " HGMMA, expected " +
                         std::to_string(expected.hgmma));
    }
    const int exp2 = opcode_count(counts->second, "MUFU.EX2");
    if (expected.exp2 >= 0 && exp2 != expected.exp2) {
      findings.push_back(name + ": " + std::to_string(exp2) + " MUFU.EX2, expected " +
                         std::to_string(expected.exp2));
    }
    if (opcode_count(counts->second, "HMMA") != 0) findings.push_back(name + ": HMMA (mma.sync)");
    if (expected.rebalances_registers && opcode_count(counts->second, "USETMAXREG") == 0) {
      findings.push_back(name + ": no USETMAXREG (setmaxnreg)");
    }
    if (expected.stores_through_tma && opcode_count(counts->second, "UTMASTG") == 0) {
      findings.push_back(name + ": no UTMASTG (the output's TMA store)");
    }
    for (const char* opcode : {"UTMALDG", "SYNCS"}) {
      if (opcode_count(counts->second, opcode) == 0) {
        findings.push_back(name + ": no " + std::string(opcode));
      }
    }
  }
  return findings;
}

// The flash3 kernels as the time model counts them (flash3_time_model.h): one key tile of a
// consumer warpgroup is hgmma_per_consumer HGMMA (d / 16 for S, block_k / 16 for P V) and
// exp2_per_thread MUFU.EX2, and the loop body is one copy of it, except cuda.flash3's and its
// variants' (Schedule 2 to 4): its first turn (S alone) and last (P V alone) are written out beside
// the full turn, so the function holds the tile twice. _ws and the later stages rebalance their
// registers; cuda.flash3 stores its output with TMA.
struct Flash3Kernel {
  std::string kernel;
  flash3::Stage stage;
  flash3::HeadDims head_dims;
  int tile_copies;
  int block_k = 0;  // keys per tile where a variant changes the stage's (0: the stage's own)
};

// cuda.flash3_ws's kernel as nvcc's demangler spells it: (d_qk, d_v, element, Schedule, stages,
// keys per tile, Grid).
std::string ws_forward(flash3::HeadDims head_dims, const std::string& element, int schedule,
                       int stages, int block_k, int grid = 0) {
  return "flash3_ws_forward<" + std::to_string(head_dims.qk) + ", " + std::to_string(head_dims.v) +
         ", " + element + ", (attnbench::flash3::on_gpu::Schedule)" + std::to_string(schedule) +
         ", " + std::to_string(stages) + ", " + std::to_string(block_k) +
         ", (attnbench::flash3::on_gpu::Grid)" + std::to_string(grid) + ">";
}

const std::vector<Flash3Kernel> kFlash3Kernels = {
    {"flash3::on_gpu::flash3_wg1_forward<128, __nv_bfloat16>", flash3::Stage::wg1, 128, 1},
    {ws_forward(128, "__nv_bfloat16", 0, 3, 128), flash3::Stage::ws, 128, 1},
    {ws_forward(128, "__nv_bfloat16", 1, 3, 128), flash3::Stage::pingpong, 128, 1},
    {ws_forward(64, "__half", 2, 6, 128), flash3::Stage::overlapped, 64, 2},
    {ws_forward(64, "__nv_bfloat16", 2, 6, 128), flash3::Stage::overlapped, 64, 2},
    // d 80 and 96 in 128-wide rows (S d / 16 HGMMA, P V at N = 128), 192/128 on 2 stages
    {ws_forward(80, "__half", 2, 3, 128), flash3::Stage::overlapped, 80, 2},
    {ws_forward(80, "__nv_bfloat16", 2, 3, 128), flash3::Stage::overlapped, 80, 2},
    {ws_forward(96, "__half", 2, 3, 128), flash3::Stage::overlapped, 96, 2},
    {ws_forward(96, "__nv_bfloat16", 2, 3, 128), flash3::Stage::overlapped, 96, 2},
    {ws_forward({192, 128}, "__half", 2, 2, 128), flash3::Stage::overlapped, {192, 128}, 2},
    {ws_forward({192, 128}, "__nv_bfloat16", 2, 2, 128), flash3::Stage::overlapped, {192, 128}, 2},
    {ws_forward(128, "__half", 2, 3, 128), flash3::Stage::overlapped, 128, 2},
    {ws_forward(128, "__nv_bfloat16", 2, 3, 128), flash3::Stage::overlapped, 128, 2},
    {ws_forward(256, "__half", 2, 2, 64), flash3::Stage::overlapped, 256, 2},
    {ws_forward(256, "__nv_bfloat16", 2, 2, 64), flash3::Stage::overlapped, 256, 2},
    // cuda.flash3's variants: [stages=2] on 2-stage rings, [rescale=after_pv], [pingpong=off],
    // [stages=2,block_n=176] (its S one HGMMA of N = 176 per 16 of d, its P V 11 of 128)
    {ws_forward(128, "__nv_bfloat16", 2, 2, 128), flash3::Stage::overlapped, 128, 2},
    {ws_forward(128, "__nv_bfloat16", 3, 3, 128), flash3::Stage::overlapped, 128, 2},
    {ws_forward(128, "__nv_bfloat16", 4, 3, 128), flash3::Stage::overlapped, 128, 2},
    {ws_forward(128, "__nv_bfloat16", 2, 2, 176), flash3::Stage::overlapped, 128, 2, 176},
    // cuda.flash3[probe=clock64]: the default with its waits timed
    {ws_forward(128, "__nv_bfloat16", 5, 3, 128), flash3::Stage::overlapped, 128, 2},
    // cuda.flash3[persistent=on]: the default on a persistent grid (its blocks in a loop)
    {ws_forward(128, "__nv_bfloat16", 2, 3, 128, 1), flash3::Stage::overlapped, 128, 2},
};

HopperExpectation expectation_of(const Flash3Kernel& kernel) {
  const flash3::TileCost tile = flash3::tile_cost(kernel.stage, kernel.head_dims, kernel.block_k);
  return {kernel.kernel, kernel.tile_copies * tile.hgmma_per_consumer,
          kernel.stage != flash3::Stage::wg1, kernel.tile_copies * tile.exp2_per_thread,
          flash3::stores_output_with_tma(kernel.stage)};
}

TEST_F(StaticCuda, Flash3StagesUseWgmmaTmaAndMbarriersWithoutSpills) {
  const SassCode code = read_sass(kHopperLibrary);
  for (const Flash3Kernel& kernel : kFlash3Kernels) {
    const HopperExpectation expected = expectation_of(kernel);
    int matched = 0;
    const std::vector<std::string> findings = hopper_findings(code, expected, matched);
    EXPECT_EQ(matched, 1) << expected.kernel << " not found in the SASS of " << kHopperLibrary;
    EXPECT_TRUE(findings.empty()) << join_lines(findings);
  }
  for (const auto& [key, per_arch] : code) {
    for (const auto& [arch, counts] : per_arch) {
      std::printf(
          "[ sass ] %-32s %-7s HGMMA %3d  MUFU.EX2 %3d  UTMALDG %3d  SYNCS %3d  instructions %5d\n",
          key.first.c_str(), arch.c_str(), opcode_count(counts, "HGMMA"),
          opcode_count(counts, "MUFU.EX2"), opcode_count(counts, "UTMALDG"),
          opcode_count(counts, "SYNCS"), instruction_count(counts));
    }
  }
  const DeviceCode resources = read(kHopperLibrary);
  EXPECT_GT(kernel_count(resources), 0u) << "no kernel found in " << kHopperLibrary;
  // The warp-specialized kernels' launch registers, which the time model's one CTA per SM and
  // setmaxnreg's split rest on.
  int warp_specialized = 0;
  for (const auto& [key, function] : resources) {
    if (demangle(key.second).find("flash3_ws_forward") == std::string::npos) continue;
    ++warp_specialized;
    const auto registers = function.registers.find("sm_90a");
    ASSERT_NE(registers, function.registers.end()) << key.second;
    EXPECT_EQ(registers->second, flash3::WsTraits<128>::kLaunchRegisters) << key.second;
  }
  EXPECT_EQ(warp_specialized, 20);  // ws, pingpong, cuda.flash3's twelve and its six variants
  const std::vector<std::string> frames = stack_frames(resources);
  EXPECT_TRUE(frames.empty()) << "register spills or local arrays:\n" << join_lines(frames);
}

// ---- cuda.flash3's softmax under its own P V ---------------------------------------------------
// cuda.flash3 (and its variants, and the FP8 warp-specialized stages) claims intra-warpgroup
// overlap: in a full turn the exponentials of S(j) run while the tensor cores compute O +=
// P(j-1) V(j-1). Whether they do is ptxas's choice, read off the SASS: the MUFU.EX2 between a P V
// batch's last HGMMA or QGMMA (A from registers: "HGMMA... R24, R164, gdesc..") and the wait that
// completes it ("WARPGROUP.DEPBAR.LE gsb0, 0x0"), in turns where S was waited for alone in
// between ("gsb0, 0x1": a full turn). The listing is followed in order: a loop's back edge falls
// through to the wait after the loop, which is where the first wait of the next turn stands too.
// One count per full turn in the listing.
// An HGMMA (16-bit) or QGMMA (e4m3) whose A is a register.
bool is_output_product(const std::string& instruction) {
  const std::string opcode = base_opcode(opcode_of(instruction));
  if (opcode != "HGMMA" && opcode != "QGMMA") return false;
  std::istringstream operands(instruction.substr(instruction.find(' ') + 1));
  std::string accumulator, a;
  operands >> accumulator >> a;
  return a.size() > 1 && a[0] == 'R' && std::isdigit(static_cast<unsigned char>(a[1]));
}

std::vector<int> exp2_under_output_product(const std::vector<std::string>& instructions) {
  std::vector<int> full_turns;
  bool in_flight = false, scores_waited = false;
  int exp2 = 0;
  for (const std::string& instruction : instructions) {
    if (is_output_product(instruction) && instruction.find("gsb0") != std::string::npos) {
      in_flight = true;  // the batch's last HGMMA
      scores_waited = false;
      exp2 = 0;
    } else if (in_flight && instruction.rfind("WARPGROUP.DEPBAR.LE gsb0, 0x0", 0) == 0) {
      if (scores_waited) full_turns.push_back(exp2);
      in_flight = false;
    } else if (in_flight && instruction.rfind("WARPGROUP.DEPBAR.LE gsb0, 0x1", 0) == 0) {
      scores_waited = true;
    } else if (in_flight && opcode_of(instruction) == "MUFU.EX2") {
      ++exp2;
    }
  }
  return full_turns;
}

// The threshold is the whole tile: a thread's exponentials of one turn (flash3::tile_cost: 64 of
// scores and 2 of rescale factors at 128 keys a tile, 34 at 64). A turn's exponentials take the
// multi-function unit about as long as its P V takes the tensor cores (d 128: 128 threads x 66
// MUFU.EX2 at 16 a clock, 528 clocks, against 2 x 64 x 128 x 128 FLOPs at about 4096 a clock,
// 512), so every one left outside the overlap adds its time to the turn. One line per finding.
std::vector<std::string> overlap_findings(const SassListing& listing, const Flash3Kernel& kernel,
                                          int& matched) {
  std::vector<std::string> findings;
  matched = 0;
  const int required =
      flash3::tile_cost(kernel.stage, kernel.head_dims, kernel.block_k).exp2_per_thread;
  for (const auto& [key, per_arch] : listing) {
    const std::string name = demangle(key.second);
    if (name.find(kernel.kernel) == std::string::npos) continue;
    ++matched;
    const auto code = per_arch.find("sm_90a");
    if (code == per_arch.end()) {
      findings.push_back(name + ": no sm_90a SASS");
      continue;
    }
    const std::vector<int> turns = exp2_under_output_product(code->second);
    if (turns.empty()) findings.push_back(name + ": no full turn (S waited for under a P V)");
    for (const int exp2 : turns) {
      std::printf("[ overlap ] %-64s MUFU.EX2 under P V: %3d of %d\n", kernel.kernel.c_str(), exp2,
                  required);
      if (exp2 < required) {
        findings.push_back(name + ": " + std::to_string(exp2) + " MUFU.EX2 under its P V, " +
                           "expected the tile's " + std::to_string(required));
      }
    }
  }
  return findings;
}

// The negative control in the same listing: cuda.flash3_pingpong (no overlap claimed: it waits
// for S and P V together) has no full turn.
TEST_F(StaticCuda, Flash3SoftmaxRunsUnderItsOwnOutputProduct) {
  const SassListing listing = read_sass_listing(kHopperLibrary);
  int overlapping = 0;
  for (const Flash3Kernel& kernel : kFlash3Kernels) {
    if (kernel.stage != flash3::Stage::overlapped) continue;
    ++overlapping;
    int matched = 0;
    const std::vector<std::string> findings = overlap_findings(listing, kernel, matched);
    EXPECT_EQ(matched, 1) << kernel.kernel << " not found in the SASS of " << kHopperLibrary;
    EXPECT_TRUE(findings.empty()) << join_lines(findings);
  }
  EXPECT_EQ(overlapping, 18);  // cuda.flash3 at its six head dims x fp16, bf16; its six variants
  // The FP8 warp-specialized stages claim it too (QGMMA; 64 exponentials of scores and 2 of
  // rescale factors a tile, as at 16 bits).
  for (const char* fp8 : {"flash3_fp8_ws_forward<128, unsigned char, false, false>",
                          "flash3_fp8_ws_forward<128, unsigned char, false, true>"}) {
    int matched = 0;
    const std::vector<std::string> findings =
        overlap_findings(listing, {fp8, flash3::Stage::overlapped, 128, 2}, matched);
    EXPECT_EQ(matched, 1) << fp8 << " not found in the SASS of " << kHopperLibrary;
    EXPECT_TRUE(findings.empty()) << join_lines(findings);
  }

  const Flash3Kernel pingpong = kFlash3Kernels[2];
  ASSERT_EQ(pingpong.stage, flash3::Stage::pingpong);
  int matched = 0;
  const std::vector<std::string> findings = overlap_findings(listing, pingpong, matched);
  EXPECT_EQ(matched, 1);
  ASSERT_EQ(findings.size(), 1u) << join_lines(findings);
  EXPECT_NE(findings[0].find("no full turn"), std::string::npos) << findings[0];
}

// cuda.flash3[probe=clock64] (Schedule 5) reads the SM's clock (CS2R from SR_CLOCKLO) around its
// waits: at least twice for each wait it times and once for its mainloop's start and end. No other
// Hopper kernel reads it: the probe's reads, which pin the scheduler, cost the measured kernels
// nothing.
TEST_F(StaticCuda, OnlyTheFlash3ClockProbeReadsTheClock) {
  const SassListing listing = read_sass_listing(kHopperLibrary);
  int probes = 0;
  for (const auto& [key, per_arch] : listing) {
    const auto code = per_arch.find("sm_90a");
    if (code == per_arch.end()) continue;
    const std::string name = demangle(key.second);
    const auto reads =
        std::count_if(code->second.begin(), code->second.end(), [](const std::string& instruction) {
          return instruction.find("SR_CLOCKLO") != std::string::npos;
        });
    if (name.find("(attnbench::flash3::on_gpu::Schedule)5") != std::string::npos) {
      ++probes;
      std::printf("[ probe ] %s: %d clock reads\n", name.c_str(), static_cast<int>(reads));
      EXPECT_GE(reads, 2 * (flash3::kProbeEvents - 1) + 2) << name;
    } else {
      EXPECT_EQ(reads, 0) << name << " reads the clock";
    }
  }
  EXPECT_EQ(probes, 1);
}

// The negative control that matters: cuda.flash3 with its P V wait moved from the top of the next
// turn back to the end of this one, in the softmax's basic block (the code before the check
// existed), compiled here for sm_90a and never run: ptxas hoists the wait above the exponentials.
TEST_F(StaticCuda, NegativeControlFlash3WithItsWaitInTheSoftmaxBlockFailsTheOverlapCheck) {
#if !defined(ATTNBENCH_NVCC)
  GTEST_SKIP() << "the CUDA backend is not built: no nvcc to compile the control";
#else
  const std::string root = ATTNBENCH_SOURCE_DIR;
  std::ifstream source(root + "/kernels/cuda/flash3/flash3_ws_kernel.cuh");
  std::string kernel_text((std::istreambuf_iterator<char>(source)), {});
  const std::pair<std::string, std::string> edits[] = {
      {"    finish_output(turn);\n    wait_k(turn);", "    wait_k(turn);"},
      {"    scores_to_probabilities(turn);\n  }",
       "    scores_to_probabilities(turn);\n    finish_output(turn + 1);\n  }"}};
  for (const auto& [from, to] : edits) {
    const size_t at = kernel_text.find(from);
    ASSERT_NE(at, std::string::npos) << "the control's edit no longer matches:\n" << from;
    ASSERT_EQ(kernel_text.find(from, at + 1), std::string::npos) << "matches twice:\n" << from;
    kernel_text.replace(at, from.size(), to);
  }
  const ScratchDirectory dir("attnbench_overlap_control");
  dir.write("flash3_ws_kernel.cuh", kernel_text);
  const std::string control = dir.write(
      "control.cu", "#include \"" + dir.file("flash3_ws_kernel.cuh") +
                        "\"\nnamespace attnbench::flash3 {\ninline namespace ATTNBENCH_TARGET {\n"
                        "template Status launch_flash3<128, DType::bf16>(const Flash3Params&, "
                        "cudaStream_t);\n}\n}\n");
  const std::string object = dir.file("control.o");  // a fatbinary, listed as the library's are
  const CommandResult compiled = run_shell("'" + std::string(ATTNBENCH_NVCC) +
                                           "' -std=c++20 -gencode "
                                           "arch=compute_90a,code=sm_90a -c -I'" +
                                           root + "' -o '" + object + "' '" + control + "' 2>&1");
  ASSERT_EQ(compiled.exit_code, 0) << compiled.output;
  const Flash3Kernel overlapped = {ws_forward(128, "__nv_bfloat16", 2, 3, 128),
                                   flash3::Stage::overlapped, 128, 2};
  int matched = 0;
  const std::vector<std::string> findings =
      overlap_findings(read_sass_listing(object), overlapped, matched);
  EXPECT_EQ(matched, 1);
  ASSERT_EQ(findings.size(), 1u) << join_lines(findings);
  EXPECT_NE(findings[0].find("MUFU.EX2 under its P V, expected the tile's 66"), std::string::npos)
      << findings[0];
#endif
}

// cuda.flash3_fp8 and its warp-specialized stage cuda.flash3_fp8_ws (issue 16): e4m3 wgmma is
// QGMMA in SASS (k32): per key tile d / 32 for S and 128 / 32 for P V, and MUFU.EX2 once per score
// of the thread's 64 and once per row for the rescale; P packed to e4m3 by F2FP; TMA loads and
// mbarriers; no HGMMA or HMMA; one copy of the tile in the loop; in cuda.flash3_fp8's five
// instantiations (e4m3 out; fp16 and bf16 out with per-tensor or per-block descales) and
// cuda.flash3_fp8_ws's and cuda.flash3_fp8_ws_transpose's one each (e4m3; the second's producer
// transposes V in shared memory). The warp-specialized ones launch with WsTraits' registers
// (one CTA of 384 threads per SM, the split setmaxnreg rests on). Their stack:
// NoKernelHasAStackFrame and the check above.
constexpr int kRowsPerThreadFp8 = 2;  // a thread's rows of a wgmma m64 accumulator

TEST_F(StaticCuda, Flash3Fp8UsesQgmmaOnE4m3) {
  const SassCode code = read_sass(kHopperLibrary);
  constexpr int kHeadDim = 128, kBlockK = 128, kStep = 32;
  // The warp-specialized stages write the tile out twice (first turn S alone, last P V alone,
  // beside the full turn: their softmax runs under their own P V).
  const std::tuple<const char*, int, int> stages[] = {{"flash3_fp8_forward<128,", 5, 1},
                                                      {"flash3_fp8_ws_forward<128,", 2, 2}};
  for (const auto& [stage, instantiations, copies] : stages) {
    int matched = 0;
    for (const auto& [key, per_arch] : code) {
      const std::string name = demangle(key.second);
      if (name.find(stage) == std::string::npos) continue;
      ++matched;
      const auto counts = per_arch.find("sm_90a");
      ASSERT_NE(counts, per_arch.end()) << name << ": no sm_90a SASS";
      const OpcodeCounts& c = counts->second;
      EXPECT_EQ(opcode_count(c, "QGMMA"), copies * (kHeadDim / kStep + kBlockK / kStep)) << name;
      EXPECT_EQ(opcode_count(c, "MUFU.EX2"), copies * (kBlockK / 2 + kRowsPerThreadFp8)) << name;
      EXPECT_EQ(opcode_count(c, "HGMMA"), 0) << name;
      EXPECT_EQ(opcode_count(c, "HMMA"), 0) << name;
      for (const char* opcode : {"F2FP", "UTMALDG", "SYNCS"}) {
        EXPECT_GT(opcode_count(c, opcode), 0) << name << ": no " << opcode;
      }
    }
    EXPECT_EQ(matched, instantiations)
        << stage << " out, scales> in the SASS of " << kHopperLibrary;
  }
  const DeviceCode resources = read(kHopperLibrary);
  int warp_specialized = 0;
  for (const auto& [key, function] : resources) {
    if (demangle(key.second).find("flash3_fp8_ws_forward") == std::string::npos) continue;
    ++warp_specialized;
    const auto registers = function.registers.find("sm_90a");
    ASSERT_NE(registers, function.registers.end()) << key.second;
    EXPECT_EQ(registers->second, flash3::WsTraits<128>::kLaunchRegisters) << key.second;
  }
  EXPECT_EQ(warp_specialized, 2);  // cuda.flash3_fp8_ws and cuda.flash3_fp8_ws_transpose
}

// The negative control: cuda.flash2 (mma.sync, ldmatrix, cp.async) held to flash3's expectation
// fails it on each of its six kernels, for each reason.
TEST_F(StaticCuda, NegativeControlFlash2FailsTheHopperCheck) {
  const SassCode code = read_sass(kKernelLibrary);
  int matched = 0;
  const std::vector<std::string> findings =
      hopper_findings(code, {kFlash2Kernel, 16, true, 66, true}, matched);
  ASSERT_EQ(matched, kFlash2Instantiations) << join_lines(findings);
  for (const std::string reason : {"0 HGMMA, expected 16", "MUFU.EX2, expected 66",
                                   ": HMMA (mma.sync)", "no UTMALDG", "no SYNCS", "no UTMASTG"}) {
    const auto count = std::count_if(
        findings.begin(), findings.end(),
        [&](const std::string& line) { return line.find(reason) != std::string::npos; });
    EXPECT_EQ(count, kFlash2Instantiations) << reason << " in:\n" << join_lines(findings);
  }
}

// ptxas reports a serialized wgmma pipeline only as "info"; ci/ptxas-guard.sh, the Hopper
// kernels' compiler launcher, fails the compile on it. The control writes an accumulator between
// two wgmma of one batch, which makes ptxas serialize them: the guard must fail and say why.
TEST(PtxasGuard, FailsTheCompileOfASerializedWgmmaPipeline) {
#if !defined(ATTNBENCH_NVCC)
  GTEST_SKIP() << "the CUDA backend is not built: no nvcc to run";
#else
  const std::string root = ATTNBENCH_SOURCE_DIR;
  const std::string compile = "'" + root + "/ci/ptxas-guard.sh' '" + std::string(ATTNBENCH_NVCC) +
                              "' -std=c++20 -gencode arch=compute_90a,code=sm_90a -I'" + root +
                              "' -c -o /dev/null '" + root + "/tests/gpu/static/";
  const CommandResult serialized = run_shell(compile + "wgmma_serialized_control.cu' 2>&1");
  EXPECT_NE(serialized.exit_code, 0) << serialized.output;
  EXPECT_NE(serialized.output.find("wgmma.mma_async instructions are serialized"),
            std::string::npos)
      << serialized.output;
  EXPECT_NE(serialized.output.find("ptxas-guard: ptxas serialized wgmma"), std::string::npos)
      << serialized.output;
#endif
}

}  // namespace
}  // namespace attnbench
