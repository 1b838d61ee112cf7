// The masks as the tests spell them: written from their definitions in reference/mask.h's
// comment (offset = seqlen_k - seqlen_q; a window side of -1 is unbounded) and from nothing
// else, so that visible_keys and the kernels are checked against an independent formulation.
#pragma once

#include <cstdint>

#include "reference/mask.h"

namespace attnbench {

// Whether query row i sees key j; key_length is its batch's valid key count (padding only).
inline bool mask_keeps(const Mask& mask, int64_t seqlen_q, int64_t seqlen_k, int64_t key_length,
                       int64_t i, int64_t j) {
  const int64_t offset = seqlen_k - seqlen_q;
  const int64_t left = mask.window_left, right = mask.window_right;
  switch (mask.kind) {
    case MaskKind::none:
      return true;
    case MaskKind::causal:
      return j <= i;
    case MaskKind::causal_br:
      return j <= i + offset;
    case MaskKind::window:
      return (left == -1 || i + offset - left <= j) && (right == -1 || j <= i + offset + right);
    case MaskKind::padding:
      return j < key_length;
  }
  return false;
}

}  // namespace attnbench
