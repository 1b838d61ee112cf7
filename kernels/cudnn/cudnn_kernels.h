// cuDNN's fused attention as kernels under test (cudnn_sdpa.cpp); the registry lists them.
#pragma once

#include <string>

#include "kernels/cudnn/cudnn_support.h"
#include "kernels/kernel.h"

namespace attnbench {

// cudnn.sdpa: fp16/bf16 in and out, every mask of DESIGN, GQA/MQA, head dims up to 256; its
// backward through cudnn-frontend's SDPA backward graph (not deterministic: atomics).
Kernel cudnn_sdpa_kernel();
// cudnn.sdpa_deterministic: the same backward with cuDNN's deterministic algorithm (bwd, fwd_bwd).
Kernel cudnn_sdpa_deterministic_kernel();
// cudnn.sdpa_fp8: e4m3 in and out with per-tensor scale factors (Hopper); amax values in details().
Kernel cudnn_sdpa_fp8_kernel();
// cudnn.sdpa_fp8_quantized and cudnn.sdpa_fp8_incoherent: cudnn.sdpa_fp8 behind the quantize pass
// cuda.flash3_fp8 and cuda.flash3_fp8_incoherent take on fp16/bf16 inputs (flash3_fp8_launch.h),
// and a pass dequantizing cuDNN's e4m3 output to the input dtype, all in the timed forward: the
// in-house 16-bit FP8 series' peers. d 128.
Kernel cudnn_sdpa_fp8_quantized_kernel();
Kernel cudnn_sdpa_fp8_incoherent_kernel();

// Describes `problem`'s graph exactly as make_plan does (for its e4m3 copies when `quantized`;
// with its backward graphs, atomic and deterministic, when its pass has a backward) and runs
// cudnn-frontend's validation for a device of `sm_version`, on the host: no GPU, no cuDNN
// handle. "" when cuDNN's frontend accepts it; otherwise the reason, "unsupported: ..."
// (attnbench's limits) or "cudnn: ..." (the frontend's own message).
std::string validate_graph_on_host(const Problem& problem, CudnnVariant variant, int sm_version,
                                   bool quantized = false);

}  // namespace attnbench
