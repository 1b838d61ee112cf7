// NVTX ranges around every case and phase, so Nsight users see the structure in their own
// tools. A no-op without the CUDA backend.
#pragma once

#include <string>

#if defined(ATTNBENCH_HAVE_CUDA)
#include <nvtx3/nvToolsExt.h>
#endif

namespace attnbench {

class NvtxRange {
 public:
#if defined(ATTNBENCH_HAVE_CUDA)
  explicit NvtxRange(const std::string& name) { nvtxRangePushA(name.c_str()); }
  ~NvtxRange() { nvtxRangePop(); }
#else
  explicit NvtxRange(const std::string&) {}
#endif
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace attnbench
