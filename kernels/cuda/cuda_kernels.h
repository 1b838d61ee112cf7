// The in-house CUDA kernels, one factory each; the registry lists them.
#pragma once

#include <vector>

#include "kernels/cuda/common/kernel_backend.h"
#include "kernels/kernel.h"

namespace attnbench {
inline namespace ATTNBENCH_TARGET {

// cuda.naive_cublas: attention as eager framework code computes it — scores and output through
// cuBLAS batched GEMMs, a softmax kernel between them, the whole score matrix in memory.
Kernel cuda_naive_cublas_kernel();

// cuda.naive: three plain CUDA kernels (scores masked as written, softmax, P V), no cuBLAS, the
// fp32 score matrix in memory. cuda.masked_*: the same with unmasked scores and the mask applied
// by a separate out-of-place pass, a separate in-place pass, or inside the softmax kernel
// (naive.cu, masked.cu; plans and bytes models in naive_family.cpp).
Kernel cuda_naive_kernel();
Kernel cuda_masked_outofplace_kernel();
Kernel cuda_masked_inplace_kernel();
Kernel cuda_masked_fused_kernel();

// cuda.flash1: FlashAttention-1 on CUDA cores, one launch per K/V block, O, l and m in device
// memory between blocks (flash1.cuh).
Kernel cuda_flash1_kernel();

// cuda.flash2: the FlashAttention-2 forward on tensor cores (mma.sync m16n8k16, ldmatrix,
// cp.async pipeline, swizzled shared memory), head dims 64/128/256 (kernels/cuda/flash2/), and
// its backward at 64/128 with dQ added by fp32 atomics; cuda.flash2_deterministic, the same
// backward with dQ added per split in a fixed order.
Kernel cuda_flash2_kernel();
Kernel cuda_flash2_deterministic_kernel();

// cuda.flash3_*: the FlashAttention-3 forward on Hopper (sm_90a: TMA, wgmma, mbarriers), one
// entry per stage (kernels/cuda/flash3/): flash3_wg1, one warpgroup; flash3_ws, a producer and
// two consumer warpgroups; flash3_pingpong, the consumers taking turns on the tensor cores.
Kernel cuda_flash3_wg1_kernel();
Kernel cuda_flash3_ws_kernel();
Kernel cuda_flash3_pingpong_kernel();
// cuda.flash3: all of it (ping-pong and the softmax overlapped with P V), head dims 64/128/256,
// fp16 and bf16.
Kernel cuda_flash3_kernel();
// cuda.flash3's variants (d 128, bf16), for `attnbench tune`: cuda.flash3[stages=2] on rings of
// 2 stages, [stages=2,block_n=176] on key tiles of 176, [pingpong=off] without the turns,
// [probe=clock64] with its waits timed, [rescale=after_pv] with O rescaled after the wait.
std::vector<Kernel> cuda_flash3_variant_kernels();
// cuda.flash3_fp8: FlashAttention-3's FP8 forward (e4m3 in and out with per-tensor descales, or
// fp16/bf16 quantized by its own passes; V^T by a layout pass), its first stage: one warpgroup,
// d 128 (issue 16). Its variants on fp16/bf16: _incoherent rotates Q and K first, _block scales
// per block of 128 tokens, _block_incoherent does both.
Kernel cuda_flash3_fp8_kernel();
Kernel cuda_flash3_fp8_ws_kernel();            // its warp-specialized stage
Kernel cuda_flash3_fp8_ws_transpose_kernel();  // the same, V transposed in the kernel
Kernel cuda_flash3_fp8_incoherent_kernel();
Kernel cuda_flash3_fp8_block_kernel();
Kernel cuda_flash3_fp8_block_incoherent_kernel();

// cuda.flash_decode: split-KV decode (FlashDecoding): up to 16 query rows per sequence against a
// long cache, the keys split across blocks with an LSE per split and a combine; GQA groups packed
// in one block; varlen batches and paged caches (kernels/cuda/flash_decode/). Its variant
// cuda.flash_decode[splits=1] runs the keys in one split: the unsplit kernel beside it.
Kernel cuda_flash_decode_kernel();
Kernel cuda_flash_decode_unsplit_kernel();

// The in-house CUDA kernels, the one list of them: the registry takes it from the GPU build
// (kernels/registry.cpp) and the emulated device from its own build of the same sources
// (kernels/emu/emu_kernels.cpp), each in its ATTNBENCH_TARGET namespace. cuda.naive_cublas and
// the cuDNN kernels are not in it: built on closed libraries, they have no source to emulate.
inline std::vector<Kernel> in_house_cuda_kernels() {
  std::vector<Kernel> kernels = {
      cuda_naive_kernel(),
      cuda_masked_outofplace_kernel(),
      cuda_masked_inplace_kernel(),
      cuda_masked_fused_kernel(),
      cuda_flash1_kernel(),
      cuda_flash2_kernel(),
      cuda_flash2_deterministic_kernel(),
      cuda_flash3_wg1_kernel(),
      cuda_flash3_ws_kernel(),
      cuda_flash3_pingpong_kernel(),
      cuda_flash3_kernel(),
  };
  const std::vector<Kernel> variants = cuda_flash3_variant_kernels();  // beside their family
  kernels.insert(kernels.end(), variants.begin(), variants.end());
  kernels.insert(kernels.end(), {
                                    cuda_flash3_fp8_kernel(),
                                    cuda_flash3_fp8_ws_kernel(),
                                    cuda_flash3_fp8_ws_transpose_kernel(),
                                    cuda_flash3_fp8_incoherent_kernel(),
                                    cuda_flash3_fp8_block_kernel(),
                                    cuda_flash3_fp8_block_incoherent_kernel(),
                                    cuda_flash_decode_kernel(),
                                    cuda_flash_decode_unsplit_kernel(),
                                });
  return kernels;
}

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench
