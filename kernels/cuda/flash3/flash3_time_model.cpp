#include "kernels/cuda/flash3/flash3_time_model.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/common/visible_tiles.h"
#include "kernels/cuda/flash3/flash3_traits.h"
#include "reference/flops.h"

namespace attnbench::flash3 {
namespace {

// One CTA per SM for every stage: flash3_wg1's tiles take 145 KiB of the SM's 228 KiB of shared
// memory; the warp-specialized kernels' 384 threads take 384 x kLaunchRegisters = 64512 of its
// 65536 registers (their tiles alone would let two CTAs in at d = 64; StaticCuda pins the
// register count in the SASS).
static_assert(2 * Wg1Traits<128>::kSharedBytes > 228 * 1024, "flash3_wg1: one CTA per SM");
static_assert(2 * WsTraits<128>::kThreads * WsTraits<128>::kLaunchRegisters > 65536,
              "the warp-specialized kernels: one CTA per SM");

struct TileShapeOf {
  int block_q;
  int block_k;
  int consumers;
};

template <typename Traits>
TileShapeOf shape_of(int consumers) {
  return {Traits::kBlockQ, Traits::kBlockK, consumers};
}

TileShapeOf stage_shape(Stage stage, HeadDims d) {
  if (stage == Stage::wg1) {
    if (d.qk != 128 || d.v != 128) {
      throw std::invalid_argument("cuda.flash3_wg1 is built at d = 128 only");
    }
    return shape_of<Wg1Traits<128>>(1);
  }
  if (!takes_head_dims(d.qk, d.v)) {
    throw std::invalid_argument(
        "cuda.flash3 takes d_qk a multiple of 16 up to 256 and d_v a multiple of 16 whose row "
        "width (d_v rounded up to 64) is 64, 128 or 256 and no wider than d_qk's, not " +
        std::to_string(d.qk) + "/" + std::to_string(d.v));
  }
  // Every warp-specialized instantiation shares the CTA (WsTraits); d_v sets the keys per tile.
  return {WsTraits<128>::kBlockQ, ws_block_k(d.v), WsTraits<128>::kConsumers};
}

// The instruction counts and the clocks each unit needs for them, before any schedule.
TileCost count_tile(const TileShapeOf& shape, HeadDims d, const HopperRates& rates) {
  const int v_width = row_width(d.v);  // P V's N
  TileCost tile;
  tile.block_q = shape.block_q;
  tile.block_k = shape.block_k;
  tile.consumers = shape.consumers;
  const int scores_per_thread = shape.block_k / 2;  // a 64 x block_k tile over 128 threads
  tile.hgmma_per_consumer = d.qk / kWgmmaK + shape.block_k / kWgmmaK;
  tile.exp2_per_thread = scores_per_thread + kRowsPerThread;
  tile.fp32_per_thread = (7 * scores_per_thread) / 2 + v_width / 2 + 10 * kRowsPerThread;

  const double threads = static_cast<double>(shape.consumers) * kWarpgroupThreads;
  const double flops =
      shape.consumers * 2.0 * kWgmmaM * shape.block_k * (d.qk + v_width);    // S and P V
  const double q_slice = kWgmmaM * kWgmmaK * kElementBytes;                  // A of an S wgmma
  const double k_slice = static_cast<double>(shape.block_k) * kWgmmaK * kElementBytes;
  const double v_slice = static_cast<double>(kWgmmaK) * v_width * kElementBytes;  // B of a P V
  tile.shared_bytes = shape.consumers * ((d.qk / kWgmmaK) * (q_slice + k_slice) +
                                         (shape.block_k / kWgmmaK) * v_slice);
  tile.tensor_clocks = flops / (rates.tensor_flops_per_clock * rates.gemm_efficiency);
  tile.exp2_clocks = threads * tile.exp2_per_thread / rates.exp2_per_clock;
  tile.fp32_clocks = threads * tile.fp32_per_thread / rates.fp32_per_clock;
  tile.shared_clocks = tile.shared_bytes / rates.shared_bytes_per_clock;
  return tile;
}

// The stage's schedule: which of the units' clocks add and which overlap. The softmax's two
// pipes (MUFU for ex2, the FMA pipe for the rest) work side by side across warps, so all
// consumers' softmax takes at least the busier pipe's clocks (softmax_sm); one consumer's own
// softmax runs its instructions in order, at the whole SM's rates when it runs alone
// (softmax_chain). The tensor cores serve one wgmma batch at a time.
void schedule(Stage stage, TileCost& tile) {
  const double matrix = std::max(tile.tensor_clocks, tile.shared_clocks);
  const std::string matrix_unit =
      tile.tensor_clocks >= tile.shared_clocks ? "tensor cores" : "shared memory";
  const double c = tile.consumers;
  const double softmax_sm = std::max(tile.exp2_clocks, tile.fp32_clocks);
  const double softmax_chain = (tile.exp2_clocks + tile.fp32_clocks) / c;
  if (stage == Stage::wg1 || stage == Stage::ws) {
    // The consumers run in step: the products, then the softmax, nothing under either.
    tile.tile_clocks = matrix + std::max(softmax_sm, softmax_chain);
    tile.bound = matrix_unit + " then softmax, in turn";
    return;
  }
  // A consumer's own work in a tile, in order: ping-pong, its products then its softmax (the other
  // consumer's turn runs under the softmax); overlapped, its S, then its softmax under its P V.
  const double chain = stage == Stage::pingpong
                           ? matrix / c + softmax_chain
                           : matrix / (2 * c) + std::max(softmax_chain, matrix / (2 * c));
  tile.tile_clocks = std::max({matrix, softmax_sm, chain});
  tile.bound = tile.tile_clocks == matrix       ? matrix_unit
               : tile.tile_clocks == softmax_sm ? "the softmax's pipes (MUFU / FMA)"
                                                : "each consumer's own chain (wgmma, then softmax)";
}

}  // namespace

TileCost tile_cost(Stage stage, HeadDims head_dims, int block_k, const HopperRates& rates) {
  TileShapeOf shape = stage_shape(stage, head_dims);
  if (block_k != 0) shape.block_k = block_k;
  TileCost tile = count_tile(shape, head_dims, rates);
  schedule(stage, tile);
  return tile;
}

Prediction predict(Stage stage, const Problem& problem, int block_k, const HopperRates& rates) {
  Prediction prediction;
  prediction.tile = tile_cost(
      stage, {static_cast<int>(problem.head_dim_qk), static_cast<int>(problem.head_dim_v)}, block_k,
      rates);
  const TileCost& tile = prediction.tile;
  const int64_t m_blocks = gpu::tile_count(problem.seqlen_q, tile.block_q);
  prediction.ctas = m_blocks * problem.heads_q * problem.batch;
  prediction.waves = static_cast<double>(prediction.ctas) / rates.sms;

  // The CTAs in launch order (flash3_scheduler.cuh: batch, then head, then the query blocks
  // last-first), each to the SM that frees first.
  std::priority_queue<double, std::vector<double>, std::greater<>> sm_free_at;
  for (int sm = 0; sm < rates.sms; ++sm) sm_free_at.push(0);
  std::vector<double> block_clocks(static_cast<size_t>(m_blocks));
  for (int64_t b = 0; b < problem.batch; ++b) {
    if (b == 0 || problem.mask.kind == MaskKind::padding) {  // only padding differs by batch
      for (int64_t m = 0; m < m_blocks; ++m) {
        const int64_t first_row = m * tile.block_q;
        const int64_t last_row = std::min(first_row + tile.block_q, problem.seqlen_q) - 1;
        const gpu::BlockKeyTiles keys = gpu::block_key_tiles(
            problem.mask.kind, problem.mask.window_left, problem.mask.window_right, first_row,
            last_row, problem.seqlen_q, problem.seqlen_k, problem.key_length(b), tile.block_k);
        block_clocks[static_cast<size_t>(m)] = static_cast<double>(keys.tiles()) * tile.tile_clocks;
      }
    }
    for (int64_t head = 0; head < problem.heads_q; ++head) {
      for (int64_t m = m_blocks - 1; m >= 0; --m) {
        const double start = sm_free_at.top();
        sm_free_at.pop();
        sm_free_at.push(start + block_clocks[static_cast<size_t>(m)]);
      }
    }
  }
  double makespan = 0;
  while (!sm_free_at.empty()) {
    makespan = std::max(makespan, sm_free_at.top());
    sm_free_at.pop();
  }
  prediction.seconds =
      std::max(makespan / rates.clock_hz, attention_bytes(problem) / rates.copy_bytes_per_s);
  prediction.flops_per_s = attention_flops(problem) / prediction.seconds;
  return prediction;
}

}  // namespace attnbench::flash3
