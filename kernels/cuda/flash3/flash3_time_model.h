// cuda.flash3's time model: what one forward of each stage should take on an H200, before any GPU
// has run it (issue 15, item 7). Host code, no CUDA.
//
// From the instructions one key tile costs a CTA — HGMMA and MUFU.EX2 per tile as the sm_90a SASS
// holds them (StaticCuda.Flash3TimeModelCountsAreTheSass pins both), the float work of the softmax
// counted from its source, the bytes wgmma reads from shared memory — and the H200's published
// per-SM rates, each stage's schedule decides which of them overlap. A throughput model: it says
// how fast the stage would run if every unit were fed, and which unit bounds it. Latencies (a
// wgmma batch's, a TMA load's, a barrier hand-off's) are not modeled, so on the first GPU run the
// gap between the measured median and predicted_s is what they cost.
#pragma once

#include <cstdint>
#include <string>

#include "reference/problem.h"

namespace attnbench::flash3 {

// The stages, in the order each adds its step.
enum class Stage {
  wg1,         // cuda.flash3_wg1: one warpgroup; its softmax and its wgmma take turns
  ws,          // cuda.flash3_ws: two consumer warpgroups, in step (no overlap is arranged)
  pingpong,    // cuda.flash3_pingpong: one consumer's softmax under the other's wgmma
  overlapped,  // cuda.flash3: ping-pong, and each consumer's softmax under its own P V
};

// Whether `stage` writes its output through shared memory and a TMA store (its plan encodes the
// output's map), or straight from registers.
constexpr bool stores_output_with_tma(Stage stage) { return stage == Stage::overlapped; }

// The H200's rates per SM and clock. Published: 132 SMs; dense fp16/bf16 tensor-core FLOPs 989.4
// TFLOP/s, that is 4096 per SM per clock at 1.83 GHz; MUFU (ex2) 16 and fp32 add/multiply/FMA 128
// results per SM per clock (CUDA C++ Programming Guide, arithmetic instruction throughput,
// compute capability 9.0); shared memory 128 bytes per SM per clock. Measured on the lent H200
// (GPU-CLAIMS.md): a bf16 GEMM reached 790 TFLOP/s (cuBLAS), so the tensor cores are taken at
// 790 / 989.4 of their peak, and a device copy moved 4.3 TB/s.
struct HopperRates {
  int sms = 132;
  double clock_hz = 1.83e9;
  double tensor_flops_per_clock = 4096;
  double gemm_efficiency = 790.0 / 989.4;
  double exp2_per_clock = 16;
  double fp32_per_clock = 128;
  double shared_bytes_per_clock = 128;
  double copy_bytes_per_s = 4.3e12;
};

// One CTA's full key tile (no mask) of a stage at one head dim: the instruction counts, the
// clocks each unit needs for them, and the tile's clocks under the stage's schedule.
struct TileCost {
  int block_q = 0;    // query rows of the CTA
  int block_k = 0;    // keys per tile
  int consumers = 0;  // warpgroups issuing wgmma
  // Per consumer warpgroup: d_qk / 16 HGMMA m64n<block_k>k16 for S, block_k / 16 m64n<w>k16 for
  // P V, w being d_v's row width (128 at d 80 and 96).
  int hgmma_per_consumer = 0;
  // Per consumer thread: one ex2 per score it holds (block_k / 2) and one per row it owns (2),
  // the running max's rescale factor.
  int exp2_per_thread = 0;
  // Per consumer thread, counted from flash3_softmax.cuh: per score a max, a scale-and-subtract
  // FMA, a sum and half a pack to 16 bits (3.5); per output element one rescale (w / 2); per row
  // the quad reductions and the running statistics (10 each, 2 rows).
  int fp32_per_thread = 0;
  double shared_bytes = 0;  // what the tile's wgmma read from shared memory (Q, K, V)
  double tensor_clocks = 0;
  double exp2_clocks = 0;
  double fp32_clocks = 0;
  double shared_clocks = 0;
  double tile_clocks = 0;  // under the stage's schedule
  std::string bound;       // the term that sets tile_clocks: "tensor cores", "softmax", ...

  double shared_bytes_per_hgmma() const { return shared_bytes / (consumers * hgmma_per_consumer); }
};

// The head dims a tile is built for: d_qk and d_v (one number: both).
struct HeadDims {
  int qk;
  int v;
  HeadDims(int head_dim) : qk(head_dim), v(head_dim) {}  // NOLINT: a plain d reads as d/d
  HeadDims(int head_dim_qk, int head_dim_v) : qk(head_dim_qk), v(head_dim_v) {}
};

// `block_k`: keys per tile where a variant changes the stage's own (0: the stage's). Any head dims
// the tiles take (flash3_traits.h's takes_head_dims; std::invalid_argument otherwise), P V priced
// at d_v's row width.
TileCost tile_cost(Stage stage, HeadDims head_dims, int block_k = 0, const HopperRates& rates = {});

struct Prediction {
  double seconds = 0;
  double flops_per_s = 0;  // attention_flops(problem) / seconds
  int64_t ctas = 0;
  double waves = 0;  // CTAs over the SMs (one CTA per SM: shared memory or registers are full)
  TileCost tile;
};

// One forward of `stage` on `problem` (its head dims as tile_cost takes them): the CTAs in launch
// order, each taken by the SM that frees first (the hardware's block scheduler, one CTA per SM),
// each costing its visible key tiles at tile_clocks; never below the HBM time of reading Q, K, V
// and writing O once.
Prediction predict(Stage stage, const Problem& problem, int block_k = 0,
                   const HopperRates& rates = {});

}  // namespace attnbench::flash3
