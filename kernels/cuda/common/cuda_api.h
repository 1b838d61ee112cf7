// The one door from the in-house kernels and their plans to CUDA. nvcc and the host compiler of
// a GPU build see the toolkit's headers; a kernel compiled for the emulated device (ATTNBENCH_EMU,
// kernels/emu/) sees the same names backed by the emulator. Only kernels/cuda/common/ may
// include a CUDA header or test ATTNBENCH_EMU (tests/kernels/test_kernel_sources.cpp): every
// kernel is then the same source on both.
//
// Both builds of a kernel live in one attnbench binary, so everything a kernel file defines sits
// in `inline namespace ATTNBENCH_TARGET`: on_gpu for the GPU build, on_emu for the emulated one.
// Code inside either reads as before (the inline namespace is transparent); the registry names
// the two apart (attnbench::on_gpu::cuda_flash2_kernel, attnbench::on_emu::...).
#pragma once

#if defined(ATTNBENCH_EMU)
#include "kernels/emu/cuda_subset.h"
#define ATTNBENCH_TARGET on_emu
#else
#include <cuda.h>  // CUtensorMap and its enums (the driver's encoder is reached at run time)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#define ATTNBENCH_TARGET on_gpu
#endif
