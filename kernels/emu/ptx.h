// The emulated bodies of the PTX instructions the in-house kernels use; the kernels reach them
// only through kernels/cuda/common/ptx.cuh, whose device bodies are the inline PTX. Each follows
// the PTX ISA's fragment layouts; what the ISA leaves to the hardware (the tensor cores'
// accumulation order and rounding, ex2.approx's error) is modeled as stated here and settled by
// the conformance test on a GPU (issue 14, item 7).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "kernels/emu/block.h"

namespace attnbench::emu {

// ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16: lane l gives the 16-byte row address
// of row l % 8 of matrix l / 8 (matrices < `matrices`); register i of lane l receives matrix i's
// row l / 4, elements 2 (l % 4) and + 1 (with .trans: column l / 4, rows 2 (l % 4) and + 1).
// Returns the rows of shared memory this lane's registers came from (for the race build).
struct RowsRead {
  static constexpr size_t kRowBytes = 16;
  std::array<const unsigned char*, 8> rows{};
  unsigned count = 0;
};
RowsRead ldmatrix(unsigned matrices, bool transposed, uint32_t address, uint32_t* fragment,
                  Site site);

// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32, D = A B + C in place.
// Accumulation: reference/tensor_core_sum.h, the model fitted on an H200.
void mma_m16n8k16(MmaInput input, float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                  Site site);

// ex2.approx.ftz.f32: a subnormal input counts as zero and a subnormal result is flushed to
// +0; otherwise the host's exp2f (the GPU's is within 2 ulp of it).
float ex2_approx_ftz(float x);

// Two cvt.rn.satfinite.e4m3x2.f32: x0..x3 rounded to e4m3 (to nearest even, saturating to
// +-448, NaN kept), x0 in the low byte: reference/formats.h's rounding, equal to CUDA's own
// __nv_cvt_float_to_fp8(..., __NV_SATFINITE, __NV_E4M3) (test_formats_vs_cuda); PtxConformance
// compares it with a GPU's cvt instruction (not yet run on one).
uint32_t pack_e4m3x4(float x0, float x1, float x2, float x3);

}  // namespace attnbench::emu
