#include "kernels/emu/launch.h"

#include <map>
#include <mutex>
#include <utility>

#include "kernels/cpu/phases.h"  // phase_clock_ns: the clock of `attnbench profile`
#include "kernels/emu/grid.h"
#include "kernels/emu/sanitizer.h"
#include "reference/random.h"

namespace attnbench::emu {

namespace {

thread_local ErrorCode t_last_error = ErrorCode::none;
thread_local std::string t_last_message;

std::mutex g_attributes_mutex;
std::map<const void*, int>& dynamic_shared_optins() {
  static std::map<const void*, int> optins;
  return optins;
}

int dynamic_shared_limit(const void* kernel) {
  std::lock_guard<std::mutex> lock(g_attributes_mutex);
  const auto found = dynamic_shared_optins().find(kernel);
  return found == dynamic_shared_optins().end() ? kDefaultDynamicSharedBytes : found->second;
}

// Appended piece by piece: g++ 12 warns (-Wrestrict, a false positive) on "(" + to_string(..).
std::string dim_text(const Dim3& d) {
  std::string text = "(";
  text += std::to_string(d.x);
  text += ',';
  text += std::to_string(d.y);
  text += ',';
  text += std::to_string(d.z);
  text += ')';
  return text;
}

}  // namespace

bool launch_kernel(Stream* stream, const void* kernel, Dim3 grid, Dim3 block, size_t shared_bytes,
                   const std::function<void()>& thread_body) {
  if (stream == nullptr) {
    set_last_error(ErrorCode::invalid_value, "emu: a launch needs the executor's emulated stream");
    return false;
  }
  if (block.count() == 0 || block.count() > kMaxThreadsPerBlock || grid.count() == 0) {
    set_last_error(ErrorCode::invalid_value, "emu: invalid launch configuration: grid " +
                                                 dim_text(grid) + ", block " + dim_text(block));
    return false;
  }
  const int limit = dynamic_shared_limit(kernel);
  if (shared_bytes > static_cast<size_t>(limit)) {
    std::string message = "emu: launch asks for ";
    message += std::to_string(shared_bytes);
    message += " bytes of dynamic shared memory; the kernel may use ";
    message += std::to_string(limit);
    message += " (cudaFuncSetAttribute opts in up to ";
    message += std::to_string(kMaxDynamicSharedBytesOptin);
    message += ")";
    set_last_error(ErrorCode::invalid_value, std::move(message));
    return false;
  }
  Launch launch;
  launch.grid_dim = grid;
  launch.block_dim = block;
  launch.dynamic_shared_bytes = shared_bytes;
  launch.seed = mix_seed(stream->seed, ++stream->launches);
  launch.workers = stream->workers;
  launch.global_memory = &stream->global_memory;
  std::string report;
  const int64_t start_ns = phase_clock_ns();
  try {
    stream->schedule_hash =
        (stream->schedule_hash ^ launch_grid(launch, thread_body)) * 0x100000001b3ull;
  } catch (const EmuError& error) {
    report = std::string("emu: ") + error.what();
  }
  if (stream->recording != nullptr) {
    stream->recording->push_back({kernel, grid, block, start_ns, phase_clock_ns()});
  }
  // A sanitizer's report outranks the emulator's: the block may only have stopped because of it.
  if (std::string line = sanitizer::take_report(&stream->global_memory); !line.empty()) {
    report = "emu (" + std::string(sanitizer_build_name()) + " build): " + line;
    stream->sanitizer_report = sanitizer::last_report_text();
  }
  if (report.empty()) return true;
  set_last_error(ErrorCode::launch_failure, std::move(report));
  return false;
}

bool set_max_dynamic_shared(const void* kernel, int bytes) {
  if (bytes < 0 || bytes > kMaxDynamicSharedBytesOptin) return false;
  std::lock_guard<std::mutex> lock(g_attributes_mutex);
  dynamic_shared_optins()[kernel] = bytes;
  return true;
}

ErrorCode take_last_error() { return std::exchange(t_last_error, ErrorCode::none); }
const std::string& last_error_message() { return t_last_message; }
void set_last_error(ErrorCode code, std::string message) {
  t_last_error = code;
  t_last_message = std::move(message);
}

}  // namespace attnbench::emu
