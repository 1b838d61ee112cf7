// cuda.flash2's host-checkable parts (label cpu, no GPU needed): the tile shapes of every head
// dim, the key tiles a query block visits (block_key_tiles, which the kernel uses to skip fully
// masked tiles and to leave interior tiles unmasked) checked against reference/mask.h row by row
// over every mask and awkward shape, and the kernel's support table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/flash2/flash2_traits.h"
#include "kernels/registry.h"
#include "reference/mask.h"
#include "reference/problem.h"
#include "tests/support/problems.h"

namespace attnbench {
namespace {

using flash2::block_key_tiles;
using flash2::BlockKeyTiles;

// ---- tile shapes --------------------------------------------------------------------------------

template <int HeadDim>
void expect_sound_shape() {
  using T = flash2::Traits<HeadDim>;
  SCOPED_TRACE("head dim " + std::to_string(HeadDim));
  EXPECT_EQ(T::kBlockQ, T::kWarps * flash2::kRowsPerWarp);
  EXPECT_LE(T::kThreads, 1024);
  EXPECT_GE(T::kStages, 2);
  EXPECT_LE(T::kSharedBytes, flash2::kSm80MaxSharedBytes);
  // The output is staged through the Q tile: it must hold kBlockQ rows of HeadDim elements.
  EXPECT_GE(T::kQTileElements, static_cast<size_t>(T::kBlockQ) * HeadDim);
  EXPECT_EQ(T::kSharedBytes, (static_cast<size_t>(T::kBlockQ) * HeadDim +
                              2 * static_cast<size_t>(T::kStages) * T::kBlockK * HeadDim) *
                                 flash2::kElementBytes);
}

TEST(Flash2Traits, EveryHeadDimHasASoundTiling) {
  expect_sound_shape<64>();
  expect_sound_shape<128>();
  expect_sound_shape<256>();
}

// The pipeline's wait counts: Q waits behind the kStages - 1 prologue tiles, tile t behind the
// kStages - 2 tiles issued after it.
TEST(Flash2Traits, PipelineWaitCounts) {
  EXPECT_EQ(flash2::Traits<128>::kPendingWhenQReady, flash2::Traits<128>::kStages - 1);
  EXPECT_EQ(flash2::Traits<128>::kPendingWhenTileReady, flash2::Traits<128>::kStages - 2);
  EXPECT_EQ(flash2::Traits<64>::kPendingWhenTileReady, flash2::Traits<64>::kStages - 2);
}

// ---- key tiles of a query block, against reference/mask.h -------------------------------------

struct Case {
  MaskKind mask;
  int64_t window_left, window_right;
  int64_t seqlen_q, seqlen_k;
  int64_t key_length;  // padding's; seqlen_k otherwise
};

std::string describe(const Case& c, int block_q, int block_k) {
  return "mask " + mask_name({c.mask, c.window_left, c.window_right}) + " sq " +
         std::to_string(c.seqlen_q) + " sk " + std::to_string(c.seqlen_k) + " key_length " +
         std::to_string(c.key_length) + " Br " + std::to_string(block_q) + " Bc " +
         std::to_string(block_k);
}

std::vector<Case> all_cases() {
  const std::vector<std::pair<int64_t, int64_t>> lengths = {
      {1, 1},    {17, 17},   {113, 113},   {113, 203}, {203, 113}, {64, 17},
      {1, 1023}, {16, 1023}, {1023, 1023}, {300, 64},  {128, 128}, {256, 512}};
  const std::vector<std::pair<int64_t, int64_t>> windows = {
      {8, 4}, {32, 8}, {4, 0}, {-1, 0}, {0, 0}, {255, 0}, {127, 0}, {0, -1}, {-1, -1}, {3, 70}};
  std::vector<Case> cases;
  for (const auto& [sq, sk] : lengths) {
    for (MaskKind kind : {MaskKind::none, MaskKind::causal, MaskKind::causal_br}) {
      cases.push_back({kind, -1, -1, sq, sk, sk});
    }
    for (const auto& [left, right] : windows) {
      cases.push_back({MaskKind::window, left, right, sq, sk, sk});
    }
    for (int64_t batch = 0; batch < 3; ++batch) {  // padding lengths as the harness makes them
      cases.push_back({MaskKind::padding, -1, -1, sq, sk, padding_key_length(batch, 3, sk)});
    }
  }
  return cases;
}

KeyRange row_keys(const Case& c, int64_t row) {
  return visible_keys(c.mask, c.window_left, c.window_right, row, c.seqlen_q, c.seqlen_k,
                      c.key_length);
}

// For every block of every case: each visible (row, key) lies in a visited tile; the first and
// last visited tiles hold a visible key (nothing fully masked is visited at either end); a block
// that visits nothing has no visible key; and a tile the kernel leaves unmasked is fully visible
// to every row of the block and lies below seqlen_k.
void check_blocks(const Case& c, int block_q, int block_k) {
  SCOPED_TRACE(describe(c, block_q, block_k));
  for (int64_t first_row = 0; first_row < c.seqlen_q; first_row += block_q) {
    const int64_t last_row = std::min(first_row + block_q, c.seqlen_q) - 1;
    const BlockKeyTiles tiles =
        block_key_tiles(c.mask, c.window_left, c.window_right, first_row, last_row, c.seqlen_q,
                        c.seqlen_k, c.key_length, block_k);
    SCOPED_TRACE("rows " + std::to_string(first_row) + ".." + std::to_string(last_row));
    const int64_t visited_begin = tiles.first_tile * block_k;
    const int64_t visited_end = tiles.end_tile * block_k;
    bool any_visible = false;
    bool first_tile_used = false;
    bool last_tile_used = false;
    for (int64_t row = first_row; row <= last_row; ++row) {
      const KeyRange keys = row_keys(c, row);
      if (keys.size() == 0) continue;
      any_visible = true;
      ASSERT_GT(tiles.tiles(), 0) << "row " << row << " sees keys but no tile is visited";
      EXPECT_GE(keys.begin, visited_begin) << "row " << row;
      EXPECT_LE(keys.end, visited_end) << "row " << row;
      first_tile_used |= keys.begin < visited_begin + block_k;
      last_tile_used |= keys.end > visited_end - block_k;
    }
    if (!any_visible) {
      EXPECT_EQ(tiles.tiles(), 0) << "a block with no visible key visits tiles";
      continue;
    }
    EXPECT_TRUE(first_tile_used) << "the first visited tile is fully masked";
    EXPECT_TRUE(last_tile_used) << "the last visited tile is fully masked";
    for (int64_t tile = tiles.first_tile; tile < tiles.end_tile; ++tile) {
      const int64_t first_key = tile * block_k;
      if (tiles.needs_mask(first_key, block_k)) continue;
      EXPECT_LE(first_key + block_k, c.seqlen_k) << "an unmasked tile reaches past seqlen_k";
      for (int64_t row = first_row; row <= last_row; ++row) {
        const KeyRange keys = row_keys(c, row);
        EXPECT_TRUE(keys.begin <= first_key && first_key + block_k <= keys.end)
            << "tile " << tile << " is left unmasked but row " << row << " sees only ["
            << keys.begin << ", " << keys.end << ")";
      }
    }
  }
}

TEST(Flash2KeyTiles, EveryMaskAndShapeAgreesWithTheReference) {
  for (const Case& c : all_cases()) {
    for (int block_k : {flash2::Traits<64>::kBlockK, flash2::Traits<256>::kBlockK}) {
      check_blocks(c, flash2::Traits<128>::kBlockQ, block_k);
    }
  }
}

// Causal skipping, counted: seqlen 1024, Br 128, Bc 64 — block m sees keys [0, 128 (m + 1)), so
// it visits 2 (m + 1) tiles: 72 of the dense 128, and only the diagonal tiles need a mask.
TEST(Flash2KeyTiles, CausalVisitsOnlyTheLowerTriangle) {
  constexpr int kBlockQ = 128;
  constexpr int kBlockK = 64;
  constexpr int64_t kSeqlen = 1024;
  int64_t visited = 0;
  int64_t masked = 0;
  for (int64_t first_row = 0; first_row < kSeqlen; first_row += kBlockQ) {
    const BlockKeyTiles tiles =
        block_key_tiles(MaskKind::causal, -1, -1, first_row, first_row + kBlockQ - 1, kSeqlen,
                        kSeqlen, kSeqlen, kBlockK);
    EXPECT_EQ(tiles.first_tile, 0);
    EXPECT_EQ(tiles.end_tile, 2 * (first_row / kBlockQ + 1));
    visited += tiles.tiles();
    for (int64_t tile = tiles.first_tile; tile < tiles.end_tile; ++tile) {
      masked += tiles.needs_mask(tile * kBlockK, kBlockK);
    }
  }
  EXPECT_EQ(visited, 72);
  EXPECT_EQ(masked, 2 * (kSeqlen / kBlockQ));  // the two tiles on each block's diagonal
}

// No mask and seqlen_k a multiple of the tile: nothing is masked anywhere; a ragged seqlen_k
// masks only the last tile.
TEST(Flash2KeyTiles, OnlyTheTailTileIsMaskedWithoutAMask) {
  for (int64_t seqlen_k : {int64_t{512}, int64_t{500}}) {
    const BlockKeyTiles tiles =
        block_key_tiles(MaskKind::none, -1, -1, 0, 127, 256, seqlen_k, seqlen_k, 64);
    ASSERT_EQ(tiles.tiles(), 8);
    for (int64_t tile = 0; tile < 8; ++tile) {
      const bool tail = (tile + 1) * 64 > seqlen_k;
      EXPECT_EQ(tiles.needs_mask(tile * 64, 64), tail)
          << "seqlen_k " << seqlen_k << " tile " << tile;
    }
  }
}

// ---- the support table --------------------------------------------------------------------------

#if defined(ATTNBENCH_HAVE_CUDA)
// ---- the backward: query rows of a key block, against reference/mask.h ------------------------

// For every key block of every case: each row that sees a key of the block lies in the range
// key_block_rows gives, and the range's first and last rows see one (nothing fully masked is
// visited at either end) or see nothing at all (a row with an empty range, which the kernel
// masks); a block no row sees gives an empty range.
TEST(Flash2BackwardRows, EveryMaskAndShapeAgreesWithTheReference) {
  constexpr int kBlockK = flash2::BackwardTraits<64>::kBlockK;
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(describe(c, 0, kBlockK));
    for (int64_t first_key = 0; first_key < c.seqlen_k; first_key += kBlockK) {
      const int64_t end_key = std::min(first_key + kBlockK, c.seqlen_k);
      const gpu::RowRange rows =
          gpu::key_block_rows(c.mask, c.window_left, c.window_right, first_key, end_key,
                              c.seqlen_q, c.seqlen_k, c.key_length);
      SCOPED_TRACE("keys " + std::to_string(first_key) + ".." + std::to_string(end_key));
      auto sees_the_block = [&](int64_t row) {
        const KeyRange keys = row_keys(c, row);
        return std::max(keys.begin, first_key) < std::min(keys.end, end_key);
      };
      for (int64_t row = 0; row < c.seqlen_q; ++row) {
        if (sees_the_block(row)) {
          EXPECT_TRUE(rows.begin <= row && row < rows.end) << "row " << row << " is left out";
        }
      }
      for (const int64_t end_row : {rows.begin, rows.end - 1}) {
        if (rows.end <= rows.begin) break;
        EXPECT_TRUE(sees_the_block(end_row) || row_keys(c, end_row).size() == 0)
            << "row " << end_row << " is visited but masked out of the block";
      }
    }
  }
}

TEST(Flash2BackwardTraits, TheTilesFitAndEachWarpOwnsSixteenKeys) {
  using T64 = flash2::BackwardTraits<64>;
  using T128 = flash2::BackwardTraits<128>;
  EXPECT_EQ(T64::kWarps * flash2::kRowsPerWarp, T64::kBlockK);
  EXPECT_EQ(T128::kSharedBytes, (2 + 2 * 2) * 64 * 128 * 2 + 64 * 64 * 2 + 2 * 2 * 64 * 4);
  EXPECT_LE(T128::kSharedBytes, flash2::kSm80MaxSharedBytes);
}

TEST(Flash2SupportTable, CoversTheIssueTable) {
  const Kernel* kernel = find_kernel("cuda.flash2");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->backend, Backend::cuda);
  EXPECT_TRUE(kernel->deterministic);
  EXPECT_TRUE(kernel->returns_lse);
  Problem problem = make_problem(2, 16, 2, 113, 203, 64, 64, {});
  for (DType dtype : {DType::f16, DType::bf16}) {
    for (const auto& [dim, dim_v] :
         {std::pair{64, 64}, {80, 80}, {96, 96}, {128, 128}, {192, 128}, {256, 256}}) {
      for (MaskKind mask : {MaskKind::none, MaskKind::causal, MaskKind::causal_br, MaskKind::window,
                            MaskKind::padding}) {
        for (Layout layout : {Layout::bshd, Layout::bhsd}) {
          problem.input_dtype = problem.output_dtype = dtype;
          problem.p_dtype = default_p_dtype(dtype);
          problem.head_dim_qk = dim;
          problem.head_dim_v = dim_v;
          problem.mask = {mask, mask == MaskKind::window ? 32 : -1,
                          mask == MaskKind::window ? 8 : -1};
          problem.layout = layout;
          EXPECT_EQ(unsupported_reason(kernel->support, problem), "") << shape_string(problem);
        }
      }
    }
  }
  // Head dims outside the instantiations are named with the list, a pair included.
  problem.head_dim_qk = problem.head_dim_v = 112;
  EXPECT_EQ(unsupported_reason(kernel->support, problem),
            "head_dim 112 not instantiated (64, 80, 96, 128, 256, 192/128)");
  problem.head_dim_qk = 192;
  problem.head_dim_v = 192;
  EXPECT_NE(unsupported_reason(kernel->support, problem), "");
  problem.head_dim_v = 64;
  EXPECT_EQ(unsupported_reason(kernel->support, problem),
            "head dims 192/64 not instantiated (64, 80, 96, 128, 256, 192/128)");
  problem.head_dim_qk = problem.head_dim_v = 64;
  problem.head_dim_qk = problem.head_dim_v = 64;
  problem.input_dtype = problem.output_dtype = DType::f32;
  problem.p_dtype = default_p_dtype(DType::f32);
  EXPECT_NE(unsupported_reason(kernel->support, problem), "");
}
#endif

}  // namespace
}  // namespace attnbench
