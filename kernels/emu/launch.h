// The host side of the emulated device, as the CUDA runtime presents it to a plan: a stream
// (the seed its launches draw their schedules from), kernel launches that run the grid at once
// (an emulated launch is synchronous), the opt-in for dynamic shared memory, and the last error,
// where a report of the emulated block (block.h) becomes the launch's error with its one line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/emu/block.h"

namespace attnbench::emu {

// The device emu presents itself as: an sm_90 with an H100/H200's shared memory per block, and
// few SMs (a persistent grid's size), so that each CTA of a persistent kernel runs several blocks
// of the small problems emu checks.
inline constexpr int kComputeMajor = 9;
inline constexpr int kComputeMinor = 0;
inline constexpr int kDefaultDynamicSharedBytes = 48 * 1024;
inline constexpr int kMaxDynamicSharedBytesOptin = 227 * 1024;
inline constexpr unsigned kMaxThreadsPerBlock = 1024;
inline constexpr int kMultiProcessors = 4;

// One emulated launch as `attnbench profile` shows it: the kernel (its address; symbol_names.h
// names it), its configuration and its start and end on the host's steady clock.
struct LaunchRecord {
  const void* kernel = nullptr;
  Dim3 grid;
  Dim3 block;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

// What an emulated cudaStream_t points to. The executor makes one per case; each launch on it
// draws its seed from (seed, launch number), so a forward's schedules are replayed by the seed.
struct Stream {
  uint64_t seed = 0;
  uint64_t launches = 0;
  unsigned workers = 0;                   // OS threads for the blocks; 0: the host's cores
  std::vector<Allocation> global_memory;  // the case's buffers, for the bounds checks
  uint64_t schedule_hash = 0;             // of every launch since the seed was set
  std::string sanitizer_report;           // the whole text of the last report (sanitizer.h)
  std::vector<LaunchRecord>* recording = nullptr;  // when set, each launch appends its record
};

// Runs `thread_body` as every thread of a grid now; `kernel` identifies the kernel for its
// dynamic shared memory opt-in. A configuration CUDA would refuse, or a report of a block, is
// recorded as the last error (last_error()) and the launch returns false.
bool launch_kernel(Stream* stream, const void* kernel, Dim3 grid, Dim3 block, size_t shared_bytes,
                   const std::function<void()>& thread_body);

// cudaFuncSetAttribute(kernel, MaxDynamicSharedMemorySize, bytes): false above the device's limit.
bool set_max_dynamic_shared(const void* kernel, int bytes);

// The last error of this OS thread: taken() clears the code (cudaGetLastError), the message
// stays readable until the next error (cudaGetErrorString).
enum class ErrorCode : int { none = 0, invalid_value = 1, launch_failure = 719 };
ErrorCode take_last_error();
const std::string& last_error_message();
void set_last_error(ErrorCode code, std::string message);

}  // namespace attnbench::emu
