// CUPTI's activity API for `attnbench profile` on a GPU (issue 17): every kernel, copy and fill the
// GPU ran, with its stream, and every CUDA runtime call the host made, with the correlation id
// that ties a call to its work, while a recording is on. libcupti is opened at run time, as NVML
// is: the toolkit's, or the one PyTorch's nvidia-cuda-cupti wheel brings (ci/gpucheck puts either
// on LD_LIBRARY_PATH); a host without it runs everything else and `profile` says why not.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "harness/measure/profile.h"
#include "reference/status.h"

namespace attnbench {

class CuptiTrace {
 public:
  // Null with the reason when libcupti cannot be opened, lacks a function, or is older than the
  // headers attnbench was built with (its records would not have the layout read here).
  static std::unique_ptr<CuptiTrace> load(std::string& absence_reason);
  ~CuptiTrace();
  CuptiTrace(const CuptiTrace&) = delete;
  CuptiTrace& operator=(const CuptiTrace&) = delete;

  // Enables the kinds recorded; everything the process launches from now on is recorded.
  Status start();
  // The clock of the records (ns), for the host's start and end of the forward.
  Result<int64_t> timestamp() const;
  // Flushes every buffer, disables the kinds, and returns what was recorded since start().
  Result<std::vector<Activity>> stop();

  struct Api;

 private:
  explicit CuptiTrace(std::unique_ptr<Api> api);
  std::unique_ptr<Api> api_;
};

// One CUPTI record (a CUpti_Activity*) as an activity: kernels (CONCURRENT_KERNEL), MEMCPY, MEMSET
// and RUNTIME; false for another kind. `runtime_name` names a runtime call by its callback id. A
// runtime call's track is its OS thread id, which stop() numbers 0, 1, ... in order of appearance.
bool activity_from_record(const void* record,
                          const std::function<std::string(uint32_t)>& runtime_name,
                          Activity& activity);

}  // namespace attnbench
