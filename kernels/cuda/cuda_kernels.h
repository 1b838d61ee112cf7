// The in-house CUDA kernels, one factory each; the registry lists them.
#pragma once

#include "kernels/kernel.h"

namespace attnbench {

// cuda.naive_cublas: attention as eager framework code computes it — scores and output through
// cuBLAS batched GEMMs, a softmax kernel between them, the whole score matrix in memory.
Kernel cuda_naive_cublas_kernel();

}  // namespace attnbench
