// What one timed step of a case computes: the forward (out, LSE); the backward alone (dQ, dK,
// dV from the kernel's own forward outputs, computed before the timed region); or both as one
// training step. Its own header: kernels/params.h carries it too.
#pragma once

#include <cstdint>

namespace attnbench {

enum class Pass : uint8_t { fwd, bwd, fwd_bwd };

}  // namespace attnbench
