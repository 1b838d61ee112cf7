// Checking every cuBLAS call, as cuda_check.h does for the runtime: a failed call becomes a Status
// naming the call, the file:line and cuBLAS's own words.
#pragma once

#include <cublas_v2.h>

#include <string>

#include "reference/status.h"

namespace attnbench {

inline Status cublas_status(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Status::Error(std::string(call) + " failed at " + file + ":" + std::to_string(line) +
                       ": " + cublasGetStatusName(status) + " (" + cublasGetStatusString(status) +
                       ")");
}

}  // namespace attnbench

// Returns the failure as a Status from the enclosing function.
#define ATTNBENCH_CUBLAS_TRY(call)                                     \
  do {                                                                 \
    ::attnbench::Status attnbench_status_ =                            \
        ::attnbench::cublas_status((call), #call, __FILE__, __LINE__); \
    if (!attnbench_status_.ok) return attnbench_status_;               \
  } while (0)
