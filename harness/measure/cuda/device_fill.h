// Random device data without cuRAND: calibration GEMMs need inputs that are never zero (a GEMM
// of zeros draws less power and runs faster than real work).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "reference/dtype.h"
#include "reference/status.h"

namespace attnbench {

// Fills `count` elements of `dtype` at `data` with values of magnitude in [0.25, 1) and random
// sign, from a hash of (seed, index): representable and non-zero in every dtype, e4m3 included.
Status fill_uniform_nonzero(void* data, DType dtype, size_t count, uint64_t seed,
                            cudaStream_t stream);

}  // namespace attnbench
