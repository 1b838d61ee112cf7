// The CPU kernels, one factory each; the registry lists them. All run on the host with OpenMP,
// deterministically, and take their scratch from the harness's allocator.
#pragma once

#include "kernels/cpu/flash_backward.h"
#include "kernels/kernel.h"

namespace attnbench {

// cpu.naive: plain loops, the whole score matrix per (batch, head); the baseline.
Kernel cpu_naive_kernel();
// cpu.masked_*: BLAS for Q K^T and P V over all keys; they differ in how the mask is applied.
Kernel cpu_masked_outofplace_kernel();
Kernel cpu_masked_inplace_kernel();
Kernel cpu_masked_fused_kernel();
// cpu.flash: tiled online softmax (FlashAttention-2 style) on BLAS tiles.
Kernel cpu_flash_kernel();
// cpu.flash with a planted backward bug (the test kernels test.cpu_flash_bwd_*; the name is set
// by the caller): none gives cpu.flash itself.
Kernel cpu_flash_kernel_with_backward_bug(cpu::FlashBackwardBug bug);
// cpu.flash's variants: its tile sizes fixed ("cpu.flash[block_q=128,block_k=256]", ...), the
// points of its tile sweep beside the default it picks (`attnbench tune`).
std::vector<Kernel> cpu_flash_variant_kernels();
// cpu.flash_fp8*: FlashAttention-3's FP8 recipe (reference/fp8_recipe.h) on fp16/bf16 inputs,
// quantized inside the forward: per-tensor scales, per-block, incoherent processing, both.
Kernel cpu_flash_fp8_kernel();
Kernel cpu_flash_fp8_block_kernel();
Kernel cpu_flash_fp8_incoherent_kernel();
Kernel cpu_flash_fp8_block_incoherent_kernel();
// Any recipe summing in fp32 (tensor_core_sum_bits 0) as a CPU kernel (the four above are four
// recipes; tests build others).
Kernel cpu_flash_fp8_recipe_kernel(const std::string& name, const std::string& summary,
                                   const Fp8Recipe& recipe);

}  // namespace attnbench
