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

// ---- the key tiles of one query block (cuda.flash2, cuda.flash3) ----

// The key tiles a query block visits, and the keys that no row of the block masks.
struct BlockKeyTiles {
  int64_t first_tile = 0;  // [first_tile, end_tile): tiles holding a visible key for some row
  int64_t end_tile = 0;    // empty when no row of the block sees any key
  // Keys in [full_begin, full_end) are visible to every row of the block: a tile inside it needs
  // no per-element mask. Empty (full_begin >= full_end) when some row sees nothing.
  int64_t full_begin = 0;
  int64_t full_end = 0;

  ATTNBENCH_HOST_DEVICE constexpr int64_t tiles() const {
    return end_tile > first_tile ? end_tile - first_tile : 0;
  }
  // Whether the tile starting at key `first_key` holds a key some row of the block masks (or a
  // key past seqlen_k, which full_end never exceeds).
  ATTNBENCH_HOST_DEVICE constexpr bool needs_mask(int64_t first_key, int block_k) const {
    return !(first_key >= full_begin && first_key + block_k <= full_end);
  }
};

// Rows [first_row, last_row] (inclusive, all < seqlen_q) of one (batch, head). Every mask of
// reference/mask.h keeps one contiguous range per row whose begin and end never decrease as the
// row grows, so the union of the rows' ranges lies in [begin(first_row), end(last_row)) and their
// intersection is [begin(last_row), end(first_row)). Tiles outside the union are skipped:
// that is how causal and window masks save their work.
ATTNBENCH_HOST_DEVICE constexpr BlockKeyTiles block_key_tiles(MaskKind mask, int64_t window_left,
                                                              int64_t window_right,
                                                              int64_t first_row, int64_t last_row,
                                                              int64_t seqlen_q, int64_t seqlen_k,
                                                              int64_t key_length, int block_k) {
  const KeyRange first =
      visible_keys(mask, window_left, window_right, first_row, seqlen_q, seqlen_k, key_length);
  const KeyRange last =
      visible_keys(mask, window_left, window_right, last_row, seqlen_q, seqlen_k, key_length);
  BlockKeyTiles tiles;
  tiles.full_begin = last.begin;
  tiles.full_end = first.end;
  if (last.end > first.begin) {
    tiles.first_tile = first.begin / block_k;
    tiles.end_tile = (last.end + block_k - 1) / block_k;
  }
  return tiles;
}

// ---- the query rows of one key block (cuda.flash2's backward) ----

// Query rows [begin, end) that see a key of [first_key, end_key): with both ends of a row's
// range non-decreasing in the row, the rows whose range ends after first_key are a suffix and
// those whose range begins before end_key a prefix; their intersection holds every row that
// sees such a key, and possibly rows that see none at all (begin == end), which kernels mask.
struct RowRange {
  int64_t begin = 0;
  int64_t end = 0;
};

ATTNBENCH_HOST_DEVICE constexpr RowRange key_block_rows(MaskKind mask, int64_t window_left,
                                                        int64_t window_right, int64_t first_key,
                                                        int64_t end_key, int64_t seqlen_q,
                                                        int64_t seqlen_k, int64_t key_length) {
  RowRange rows{seqlen_q, seqlen_q};
  // Binary searches for the first row whose range ends after first_key, then for the first row
  // whose range begins at or after end_key: each condition turns true once as the row grows.
  for (int search = 0; search < 2; ++search) {
    int64_t low = 0, high = seqlen_q;
    while (low < high) {
      const int64_t middle = low + (high - low) / 2;
      const KeyRange keys =
          visible_keys(mask, window_left, window_right, middle, seqlen_q, seqlen_k, key_length);
      if (search == 0 ? keys.end > first_key : keys.begin >= end_key) {
        high = middle;
      } else {
        low = middle + 1;
      }
    }
    (search == 0 ? rows.begin : rows.end) = low;
  }
  if (rows.end < rows.begin) rows.end = rows.begin;
  return rows;
}

}  // namespace attnbench::gpu
