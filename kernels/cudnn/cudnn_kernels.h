// cuDNN's fused attention as kernels under test (cudnn_sdpa.cpp); the registry lists them.
#pragma once

#include <string>

#include "kernels/cudnn/cudnn_support.h"
#include "kernels/kernel.h"

namespace attnbench {

// cudnn.sdpa: fp16/bf16 in and out, every mask of DESIGN, GQA/MQA, head dims up to 256.
Kernel cudnn_sdpa_kernel();
// cudnn.sdpa_fp8: e4m3 in and out with per-tensor scale factors (Hopper); amax values in details().
Kernel cudnn_sdpa_fp8_kernel();

// Describes `problem`'s graph exactly as make_plan does and runs cudnn-frontend's validation for
// a device of `sm_version`, on the host: no GPU, no cuDNN handle. "" when cuDNN's frontend
// accepts it; otherwise the reason, "unsupported: ..." (attnbench's limits) or "cudnn: ..."
// (the frontend's own message).
std::string validate_graph_on_host(const Problem& problem, CudnnVariant variant, int sm_version);

}  // namespace attnbench
