// The L2 flush between timed forwards (DESIGN, "Performance": every forward starts from a cold
// L2, as in a model where other layers ran in between).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "reference/status.h"

namespace attnbench {

// Reads `bytes` (at least 2x the L2) of `buffer` once, so whatever the previous forward left in
// the L2 is evicted, its dirty lines written back here, and every line left behind is clean.
// The earlier flush, a memset, left the L2 full of dirty lines that the timed kernel then paid
// to write back (~12 us on an H200, up to half of a 20-50 us forward). `buffer` must have been
// written once (its contents do not matter); `bytes` a multiple of 16.
Status flush_l2_by_reading(const void* buffer, size_t bytes, cudaStream_t stream);

}  // namespace attnbench
