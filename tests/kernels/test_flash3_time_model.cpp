// cuda.flash3's host-side pieces (the attnbench_flash3_model library). Its time model
// (kernels/cuda/flash3/flash3_time_model.h): the counts per key tile, what each stage's schedule
// overlaps, the CTA scheduling, and the table of predictions the note and docs/hopper.md quote
// (not GPU measurements); the counts are pinned against the SASS in
// StaticCuda.Flash3TimeModelCountsAreTheSass. Its clock probe's records (flash3_probe.h) turned
// into clocks per key tile.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/flash3/flash3_probe.h"
#include "kernels/cuda/flash3/flash3_time_model.h"
#include "kernels/registry.h"
#include "reference/flops.h"
#include "tests/support/problems.h"

namespace attnbench::flash3 {
namespace {

// The figure shape: 16k tokens (batch 2 x seqlen 8192), 16 heads, d 128, bf16.
constexpr const char* kFigure = "b=2,hq=16,s=8192,d=128,dtype=bf16";

double tensor_ceiling(const HopperRates& rates) {
  return rates.sms * rates.clock_hz * rates.tensor_flops_per_clock * rates.gemm_efficiency;
}

TEST(Flash3TimeModel, CountsOneKeyTileOfEachStage) {
  // d 128: S is 8 HGMMA m64n128k16 (d / 16), P V 8 more (128 keys / 16); a thread holds 64 scores
  // of the 64 x 128 tile and 2 rows.
  const TileCost wg1 = tile_cost(Stage::wg1, 128);
  EXPECT_EQ(wg1.block_q, 64);
  EXPECT_EQ(wg1.consumers, 1);
  EXPECT_EQ(wg1.hgmma_per_consumer, 16);
  EXPECT_EQ(wg1.exp2_per_thread, 66);
  const TileCost ws = tile_cost(Stage::ws, 128);
  EXPECT_EQ(ws.block_q, 128);
  EXPECT_EQ(ws.consumers, 2);
  EXPECT_EQ(ws.hgmma_per_consumer, 16);
  // d 256 visits 64 keys per tile: 16 HGMMA for S, 4 for P V, 32 + 2 exponentials per thread.
  const TileCost d256 = tile_cost(Stage::overlapped, 256);
  EXPECT_EQ(d256.block_k, 64);
  EXPECT_EQ(d256.hgmma_per_consumer, 20);
  EXPECT_EQ(d256.exp2_per_thread, 34);
  // An S wgmma reads a 64 x 16 slice of Q (2 KiB) and a 128 x 16 slice of K (4 KiB); a P V wgmma
  // a 16 x 128 slice of V (4 KiB): 80 KiB per consumer and tile at d 128.
  EXPECT_DOUBLE_EQ(ws.shared_bytes, 2 * (8 * (2048.0 + 4096.0) + 8 * 4096.0));
  EXPECT_DOUBLE_EQ(ws.shared_bytes_per_hgmma(), 5120.0);
  EXPECT_THROW(tile_cost(Stage::wg1, 64), std::invalid_argument);
  EXPECT_THROW(tile_cost(Stage::overlapped, 72), std::invalid_argument);   // not whole k16 steps
  EXPECT_THROW(tile_cost(Stage::overlapped, 320), std::invalid_argument);  // past wgmma's N
  EXPECT_THROW(tile_cost(Stage::overlapped, {128, 192}), std::invalid_argument);  // O wider than Q
}

// d 80 and 96 sit in 128-wide rows: S steps through d itself (5 and 6 HGMMA), P V runs at N = 128
// (8 HGMMA, its FLOPs and V's bytes those of d 128); 192/128 is 12 S steps over 128 keys and a
// P V of d 128.
TEST(Flash3TimeModel, CountsTheHeadDimsModelsShip) {
  const TileCost d128 = tile_cost(Stage::overlapped, 128);
  const TileCost d80 = tile_cost(Stage::overlapped, 80);
  EXPECT_EQ(d80.block_k, 128);
  EXPECT_EQ(d80.hgmma_per_consumer, 5 + 8);
  EXPECT_EQ(d80.exp2_per_thread, d128.exp2_per_thread);
  EXPECT_EQ(d80.fp32_per_thread, d128.fp32_per_thread);  // O is 128 columns wide
  EXPECT_DOUBLE_EQ(d80.tensor_clocks, d128.tensor_clocks * (80 + 128) / 256.0);
  EXPECT_DOUBLE_EQ(d80.shared_bytes, 2 * (5 * (2048.0 + 4096.0) + 8 * 4096.0));
  EXPECT_EQ(tile_cost(Stage::overlapped, 96).hgmma_per_consumer, 6 + 8);
  const TileCost mla = tile_cost(Stage::overlapped, {192, 128});
  EXPECT_EQ(mla.block_k, 128);
  EXPECT_EQ(mla.hgmma_per_consumer, 12 + 8);
  EXPECT_DOUBLE_EQ(mla.tensor_clocks, d128.tensor_clocks * (192 + 128) / 256.0);
}

TEST(Flash3TimeModel, EachScheduleOverlapsWhatItShould) {
  for (const int d : {64, 128, 256}) {
    const TileCost ws = tile_cost(Stage::ws, d);
    const TileCost pingpong = tile_cost(Stage::pingpong, d);
    const TileCost overlapped = tile_cost(Stage::overlapped, d);
    const double matrix = std::max(ws.tensor_clocks, ws.shared_clocks);
    const double softmax_sm = std::max(ws.exp2_clocks, ws.fp32_clocks);
    const double softmax_chain = (ws.exp2_clocks + ws.fp32_clocks) / ws.consumers;
    SCOPED_TRACE("d " + std::to_string(d));
    // In step, the products and the softmax one after the other.
    EXPECT_DOUBLE_EQ(ws.tile_clocks, matrix + std::max(softmax_sm, softmax_chain));
    // Taking turns can hide the softmax, never the products, nor the SM's softmax pipes.
    EXPECT_LT(pingpong.tile_clocks, ws.tile_clocks);
    EXPECT_GE(pingpong.tile_clocks, std::max(matrix, softmax_sm));
    EXPECT_LE(overlapped.tile_clocks, pingpong.tile_clocks);
    EXPECT_GE(overlapped.tile_clocks, std::max(matrix, softmax_sm));
  }
  // At d 64 the products are short beside the softmax: only the overlap inside a warpgroup brings
  // the tile down to the tensor cores' time.
  const TileCost pingpong64 = tile_cost(Stage::pingpong, 64);
  const TileCost overlapped64 = tile_cost(Stage::overlapped, 64);
  EXPECT_GT(pingpong64.tile_clocks, pingpong64.tensor_clocks);
  EXPECT_LT(overlapped64.tile_clocks, pingpong64.tile_clocks);
}

TEST(Flash3TimeModel, CtasFillTheSmsInWaves) {
  const HopperRates rates;
  // One query block per head (one K/V head: HBM is no bound): 132 equal CTAs take one wave, 133
  // two.
  const Problem one_wave = parsed_shape("b=1,hq=132,hkv=1,sq=128,sk=8192,d=128,dtype=bf16");
  const Problem two_waves = parsed_shape("b=1,hq=133,hkv=1,sq=128,sk=8192,d=128,dtype=bf16");
  const Prediction first = predict(Stage::overlapped, one_wave);
  const Prediction second = predict(Stage::overlapped, two_waves);
  EXPECT_EQ(first.ctas, 132);
  EXPECT_DOUBLE_EQ(first.seconds, 64 * first.tile.tile_clocks / rates.clock_hz);
  EXPECT_DOUBLE_EQ(second.seconds, 2 * first.seconds);
  // Never faster than the tensor cores at the measured GEMM efficiency, nor than HBM.
  for (const Stage stage : {Stage::wg1, Stage::ws, Stage::pingpong, Stage::overlapped}) {
    const Prediction figure = predict(stage, parsed_shape(kFigure));
    EXPECT_LE(figure.flops_per_s, tensor_ceiling(rates) * (1 + 1e-12));
  }
  const Problem tiny = parsed_shape("b=1,hq=1,s=64,d=128,dtype=bf16");
  EXPECT_GE(predict(Stage::overlapped, tiny).seconds,
            attention_bytes(tiny) / rates.copy_bytes_per_s);
}

TEST(Flash3TimeModel, CausalSkipsTheMaskedTilesAndStartsTheLongBlocksFirst) {
  const Problem full = parsed_shape("b=1,hq=16,s=16384,d=128,dtype=bf16");
  Problem causal = full;
  causal.mask.kind = MaskKind::causal;
  const Prediction whole = predict(Stage::overlapped, full);
  const Prediction half = predict(Stage::overlapped, causal);
  // Half the key tiles (plus the diagonal's: 129 / 256 of them), scheduled longest first so the
  // short blocks fill the last wave, where the full tiles leave 2048 / 132 = 15.5 waves to round
  // up: about half the time, and the same rate within the diagonal's share.
  EXPECT_GT(half.seconds, 0.45 * whole.seconds);
  EXPECT_LT(half.seconds, 0.55 * whole.seconds);
  EXPECT_GT(half.flops_per_s, 0.9 * whole.flops_per_s);
}

// The registry's flash3 kernels carry the model as their prediction, stage by stage.
TEST(Flash3TimeModel, IsTheKernelsPrediction) {
  const Problem figure = parsed_shape(kFigure);
  const std::pair<const char*, Stage> stages[] = {{"cuda.flash3_wg1", Stage::wg1},
                                                  {"cuda.flash3_ws", Stage::ws},
                                                  {"cuda.flash3_pingpong", Stage::pingpong},
                                                  {"cuda.flash3", Stage::overlapped}};
  for (const auto& [name, stage] : stages) {
    const Kernel* kernel = find_kernel(name);
    ASSERT_NE(kernel, nullptr) << name;
    ASSERT_TRUE(kernel->predicted_seconds) << name;
    EXPECT_DOUBLE_EQ(kernel->predicted_seconds(figure), predict(stage, figure).seconds) << name;
  }
  // A variant on other key tiles is priced at its own (47 tiles of 176 where 64 of 128 were).
  const Kernel* wide = find_kernel("cuda.flash3[stages=2,block_n=176]");
  ASSERT_NE(wide, nullptr);
  const Prediction wide_tiles = predict(Stage::overlapped, figure, 176);
  EXPECT_EQ(wide_tiles.tile.block_k, 176);
  EXPECT_DOUBLE_EQ(wide->predicted_seconds(figure), wide_tiles.seconds);
  EXPECT_NE(wide_tiles.seconds, predict(Stage::overlapped, figure).seconds);
}

// The table the note and docs/hopper.md quote: a model, not a measurement.
TEST(Flash3TimeModel, PrintsThePredictedTable) {
  const struct {
    const char* kernel;
    Stage stage;
    int d;
  } rows[] = {
      {"cuda.flash3_wg1", Stage::wg1, 128},           {"cuda.flash3_ws", Stage::ws, 128},
      {"cuda.flash3_pingpong", Stage::pingpong, 128}, {"cuda.flash3", Stage::overlapped, 64},
      {"cuda.flash3", Stage::overlapped, 128},        {"cuda.flash3", Stage::overlapped, 256}};
  std::printf("[ model ] %-21s %4s %6s %7s %8s %6s %6s %7s %7s %8s  %s\n", "kernel", "d", "HGMMA",
              "EX2/thr", "B/HGMMA", "tensor", "exp2", "fp32", "tile", "TFLOP/s", "bound");
  std::printf("[ model ] %-21s %4s %6s %7s %8s %6s %6s %7s %7s %8s\n", "", "", "/tile", "/tile",
              "(smem)", "clk", "clk", "clk", "clk", "");
  for (const auto& row : rows) {
    Problem problem = parsed_shape(kFigure);
    problem.head_dim_qk = problem.head_dim_v = row.d;
    const Prediction p = predict(row.stage, problem);
    const TileCost& t = p.tile;
    std::printf("[ model ] %-21s %4d %6d %7d %8.0f %6.0f %6.0f %7.0f %7.0f %8.0f  %s\n", row.kernel,
                row.d, t.consumers * t.hgmma_per_consumer, t.exp2_per_thread,
                t.shared_bytes_per_hgmma(), t.tensor_clocks, t.exp2_clocks, t.fp32_clocks,
                t.tile_clocks, p.flops_per_s / 1e12, t.bound.c_str());
    EXPECT_GT(p.flops_per_s, 0);
  }
}

// The probe's details: each wait's clocks summed over the warpgroups that ran a mainloop, divided
// by their key tiles; a record with no tile (a block whose keys are all masked) counts for nothing.
TEST(Flash3ClockProbe, DetailsAreClocksPerKeyTileOverTheWarpgroupsThatRan) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_int_distribution<uint64_t> tiles(1, 64), clocks(0, 1 << 20);
  std::vector<ProbeRecord> records(6);
  uint64_t key_tiles = 0;
  uint64_t sums[kProbeEvents] = {};
  for (ProbeRecord& record : records) {
    record.key_tiles = tiles(rng);
    key_tiles += record.key_tiles;
    for (int event = 0; event < kProbeEvents; ++event) {
      record.clocks[event] = clocks(rng);
      sums[event] += record.clocks[event];
    }
  }
  records.push_back(ProbeRecord{});  // no mainloop
  const nlohmann::json details = nlohmann::json::parse(probe_details(records));
  const nlohmann::json& probe = details.at("clock_probe");
  EXPECT_EQ(probe.at("warpgroups"), 6);
  EXPECT_EQ(probe.at("key_tiles"), key_tiles);
  for (int event = 0; event < kProbeEvents; ++event) {
    EXPECT_DOUBLE_EQ(probe.at("per_tile").at(probe_event_name(event)).get<double>(),
                     static_cast<double>(sums[event]) / static_cast<double>(key_tiles))
        << probe_event_name(event);
  }
}

}  // namespace
}  // namespace attnbench::flash3
