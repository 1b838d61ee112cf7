// Checking every CUDA call: a failed call becomes a Status naming the call, the file:line and
// CUDA's own message, so the harness records it (a sticky error also poisons the worker, which
// the parent then replaces).
#pragma once

#include "kernels/cuda/common/cuda_api.h"

#include <string>

#include "reference/status.h"

namespace attnbench {
inline namespace ATTNBENCH_TARGET {

inline Status cuda_status(cudaError_t error, const char* call, const char* file, int line) {
  if (error == cudaSuccess) return Status::Ok();
  return Status::Error(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                       cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")");
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench

// Returns the failure as a Status from the enclosing function.
#define ATTNBENCH_CUDA_TRY(call)                                                    \
  do {                                                                              \
    ::attnbench::Status attnbench_status_ =                                         \
        ::attnbench::cuda_status((call), #call, __FILE__, __LINE__);                \
    if (!attnbench_status_.ok) return attnbench_status_;                            \
  } while (0)

// After a launch: the launch error (bad configuration) now, not at the next sync.
#define ATTNBENCH_CUDA_TRY_LAUNCH() ATTNBENCH_CUDA_TRY(cudaGetLastError())
