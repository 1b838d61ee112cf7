// Which keys a block of query rows can see, for kernels that skip whole key tiles. Shared by host
// and device code (the host tests pin it against visible_keys row by row).
//
// Why a block needs only its first and last row: for every mask of reference/mask.h both ends of
// a row's visible range are non-decreasing in the query index (causal, causal_br and window move
// right with the row; none and padding do not move), and begin <= end after clamping. So the
// visible keys of rows [row_begin, row_end) all lie inside [begin(first row), end(last row)): a
// key tile that misses this hull has no visible key in any of the rows. The hull may hold a key
// that no row sees (rows with empty ranges), so kernels still mask element by element inside a
// tile they do not skip.
#pragma once

#include <cstdint>

#include "reference/mask.h"

namespace attnbench::gpu {

// Hull of the visible keys of query rows [row_begin, row_end); {0, 0} when there is no row.
ATTNBENCH_HOST_DEVICE constexpr KeyRange visible_keys_of_rows(MaskKind kind, int64_t window_left,
                                                              int64_t window_right,
                                                              int64_t row_begin, int64_t row_end,
                                                              int64_t seqlen_q, int64_t seqlen_k,
                                                              int64_t key_length) {
  if (row_begin >= row_end) return {0, 0};
  const KeyRange first =
      visible_keys(kind, window_left, window_right, row_begin, seqlen_q, seqlen_k, key_length);
  const KeyRange last =
      visible_keys(kind, window_left, window_right, row_end - 1, seqlen_q, seqlen_k, key_length);
  return {first.begin, last.end};
}

// Whether keys [key_begin, key_end) meet `keys`.
ATTNBENCH_HOST_DEVICE constexpr bool overlaps(KeyRange keys, int64_t key_begin, int64_t key_end) {
  const int64_t begin = keys.begin > key_begin ? keys.begin : key_begin;
  const int64_t end = keys.end < key_end ? keys.end : key_end;
  return begin < end;
}

// Tiles of `tile` elements covering `count`: the last one may be partial.
ATTNBENCH_HOST_DEVICE constexpr int64_t tile_count(int64_t count, int64_t tile) {
  return (count + tile - 1) / tile;
}

}  // namespace attnbench::gpu
