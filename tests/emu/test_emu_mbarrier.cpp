// Hopper's synchronization as kernels/cuda/common/ptx.cuh wraps it, run by the emulated device
// (issue 15, item 1): mbarrier phases that complete on arrivals and transaction bytes, waits by
// phase parity, a producer/consumer ring through full and empty barriers, elect.sync choosing
// one lane by the seed; what the ISA leaves undefined reported in one line (an uninitialized
// barrier, an arrival too many, a phase whose bytes never land: a deadlock with its state).
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/cuda/common/ptx.cuh"
#include "kernels/cuda/common/shared.cuh"
#include "kernels/cuda/common/tma_map.h"
#include "tests/support/fresh_seed.h"

namespace attnbench {
namespace {

emu::Launch one_block(unsigned threads, uint64_t seed) {
  emu::Launch launch;
  launch.block_dim = {threads, 1, 1};
  launch.seed = seed;
  launch.workers = 1;
  return launch;
}

std::string report_of(unsigned threads, const std::function<void()>& body) {
  try {
    emu::launch_grid(one_block(threads, fresh_seed()), body);
  } catch (const emu::EmuError& report) {
    return report.what();
  }
  return "";
}

// Stands for a TMA copy landing: `bytes` of the phase's transactions arrive.
void complete_transaction(uint32_t barrier, uint32_t bytes) {
  emu::Block::current().mbarrier_complete_tx(barrier, bytes, {__FILE__, __LINE__});
}

// Warp 0 produces into a ring of two slots; warps 1-3 consume. full[s] (one arrival, with the
// slot's bytes expected) tells the consumers a slot is filled; empty[s] (96 arrivals) tells the
// producer they are done with it. Eight rounds: every slot refilled three times.
TEST(EmuMbarrier, AProducerAndItsConsumersShareARingOfSlots) {
  constexpr int kRounds = 8;
  constexpr unsigned kConsumers = 96;
  const int base = static_cast<int>(fresh_seed() % 1000);
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    std::array<std::array<int, kRounds>, 128> seen{};
    emu::launch_grid(one_block(128, seed), [&] {
      struct Ring {
        uint64_t full[2];
        uint64_t empty[2];
        int slot[2][4];
      };
      ATTNBENCH_SHARED(Ring, ring, 16);
      const unsigned t = threadIdx.x;
      if (t == 0) {
        for (int s = 0; s < 2; ++s) {
          ptx::mbarrier_init(ptx::shared_address(&ring.full[s]), 1);
          ptx::mbarrier_init(ptx::shared_address(&ring.empty[s]), kConsumers);
        }
        ptx::fence_mbarrier_init();
      }
      __syncthreads();
      for (int round = 0; round < kRounds; ++round) {
        const int s = round % 2;
        const unsigned phase = static_cast<unsigned>(round / 2) % 2;
        const uint32_t full = ptx::shared_address(&ring.full[s]);
        const uint32_t empty = ptx::shared_address(&ring.empty[s]);
        if (t < 32) {
          if (round >= 2) ptx::mbarrier_wait(empty, phase ^ 1);  // the consumers freed it
          if (ptx::elect_one()) {
            ptx::mbarrier_arrive_expect_tx(full, sizeof ring.slot[s]);
            for (int i = 0; i < 4; ++i) ring.slot[s][i] = base + 10 * round + i;
            complete_transaction(full, sizeof ring.slot[s]);
          }
        } else {
          ptx::mbarrier_wait(full, phase);
          seen[t][static_cast<size_t>(round)] = ring.slot[s][t % 4];
          ptx::mbarrier_arrive(empty);
        }
      }
    });
    for (unsigned t = 32; t < 128; ++t) {
      for (int round = 0; round < kRounds; ++round) {
        ASSERT_EQ(seen[t][static_cast<size_t>(round)], base + 10 * round + static_cast<int>(t % 4))
            << "seed " << seed << ", thread " << t << ", round " << round;
      }
    }
  }
}

TEST(EmuMbarrier, AWaitReturnsOnceThePhaseOfItsParityHasCompleted) {
  const std::string report = report_of(32, [] {
    ATTNBENCH_SHARED(uint64_t, barrier, 8);
    const uint32_t address = ptx::shared_address(&barrier);
    if (threadIdx.x == 0) ptx::mbarrier_init(address, 1);
    __syncwarp();
    if (threadIdx.x != 0) return;
    ptx::mbarrier_arrive(address);  // phase 0 completes
    ptx::mbarrier_wait(address, 0);
    ptx::mbarrier_arrive(address);  // phase 1 completes
    ptx::mbarrier_wait(address, 1);
    ptx::mbarrier_wait(address, 0);  // phase 2 is running: waits for ever
  });
  EXPECT_NE(report.find("deadlock"), std::string::npos) << report;
  EXPECT_NE(report.find("mbarrier.try_wait.parity 0 at"), std::string::npos) << report;
  EXPECT_NE(report.find("phase 2, 1 of 1 arrivals"), std::string::npos) << report;
}

TEST(EmuMbarrier, BytesThatNeverLandAreADeadlockWithTheBarriersState) {
  const std::string report = report_of(64, [] {
    ATTNBENCH_SHARED(uint64_t, barrier, 8);
    const uint32_t address = ptx::shared_address(&barrier);
    if (threadIdx.x == 0) ptx::mbarrier_init(address, 1);
    __syncthreads();
    if (threadIdx.x == 0) ptx::mbarrier_arrive_expect_tx(address, 4096);  // no copy follows
    ptx::mbarrier_wait(address, 0);
  });
  EXPECT_NE(report.find("deadlock"), std::string::npos) << report;
  EXPECT_NE(report.find("threads 0-63 mbarrier.try_wait.parity 0"), std::string::npos) << report;
  EXPECT_NE(report.find("0 of 1 arrivals and 4096 transaction bytes missing"), std::string::npos)
      << report;
}

TEST(EmuMbarrier, AnArrivalBeyondTheCountIsReported) {
  const std::string report = report_of(32, [] {
    ATTNBENCH_SHARED(uint64_t, barrier, 8);
    const uint32_t address = ptx::shared_address(&barrier);
    if (threadIdx.x != 0) return;
    ptx::mbarrier_init(address, 2);
    ptx::mbarrier_arrive_expect_tx(address, 16);  // the phase also waits for 16 bytes
    ptx::mbarrier_arrive(address);
    ptx::mbarrier_arrive(address);  // a third arrival into a phase counting two
  });
  EXPECT_NE(report.find("arrives once more than the barrier's count"), std::string::npos) << report;
}

TEST(EmuMbarrier, ABarrierNobodyInitializedIsReported) {
  const std::string report = report_of(32, [] {
    ATTNBENCH_SHARED(uint64_t, barrier, 8);
    ptx::mbarrier_arrive(ptx::shared_address(&barrier));
  });
  EXPECT_NE(report.find("uses an mbarrier nobody initialized"), std::string::npos) << report;
}

TEST(EmuMbarrier, ElectChoosesOneLaneOfEachWarpByTheSeed) {
  std::set<unsigned> chosen;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    std::array<int, 64> elected{};
    emu::launch_grid(one_block(64, seed), [&] { elected[threadIdx.x] = ptx::elect_one() ? 1 : 0; });
    for (unsigned warp = 0; warp < 2; ++warp) {
      int count = 0;
      for (unsigned lane = 0; lane < 32; ++lane) {
        count += elected[warp * 32 + lane];
        if (elected[warp * 32 + lane] != 0) chosen.insert(lane);
      }
      EXPECT_EQ(count, 1) << "seed " << seed << ", warp " << warp;
    }
  }
  EXPECT_GE(chosen.size(), 2u) << "the seed, not a fixed lane, chooses";
}

// ---- tensor maps and cp.async.bulk.tensor through the wrappers ------------------------------

gpu::TensorMapSpec spec_2d(const std::vector<__nv_bfloat16>& tensor, int64_t width,
                           int64_t height) {
  gpu::TensorMapSpec spec;
  spec.element = DType::bf16;
  spec.rank = 2;
  spec.base = tensor.data();
  spec.dims = {width, height, 1, 1};
  spec.stride_bytes = {2, width * 2, 0, 0};
  spec.box = {64, 16, 1, 1};
  spec.swizzle_bytes = 128;
  return spec;
}

TEST(EmuTensorMap, TheIsasRulesAreCheckedWithTheirReason) {
  const std::vector<__nv_bfloat16> tensor(128 * 40);  // new[] memory: 16-byte aligned
  gpu::TensorMapSpec spec = spec_2d(tensor, 128, 40);
  EXPECT_TRUE(gpu::check_tensor_map(spec)) << gpu::check_tensor_map(spec).message;
  gpu::TensorMapSpec wide = spec;
  wide.box[0] = 128;  // 256 bytes: more than the 128-byte swizzle's span
  EXPECT_NE(gpu::check_tensor_map(wide).message.find("must fit the swizzle's span (128)"),
            std::string::npos);
  gpu::TensorMapSpec odd_stride = spec;
  odd_stride.stride_bytes[1] = 250;
  EXPECT_NE(gpu::check_tensor_map(odd_stride).message.find("multiples of 16 bytes"),
            std::string::npos);
  gpu::TensorMapSpec big_box = spec;
  big_box.box[1] = 257;
  EXPECT_NE(gpu::check_tensor_map(big_box).message.find("1 to 256"), std::string::npos);
}

// A warpgroup-sized block loads a 64 x 16 tile of a 104 x 40 tensor (the tile at x=64 runs past
// the edge: zeros) through a map encoded as a plan would, waits on the barrier, and reads back
// through the 128-byte swizzle.
TEST(EmuTensorMap, ATileLoadedThroughTheWrapperArrivesWhereTheSwizzleSays) {
  constexpr int64_t kWidth = 104, kHeight = 40;  // rows of 208 bytes: 16-byte multiples
  std::mt19937 rng(std::random_device{}());
  std::vector<__nv_bfloat16> tensor(kWidth * kHeight);
  for (auto& v : tensor) v = __float2bfloat16_rn(static_cast<float>(rng() % 2000) - 1000.0f);
  CUtensorMap map;
  const Status encoded = gpu::encode_tensor_map(spec_2d(tensor, kWidth, kHeight), map);
  ASSERT_TRUE(encoded) << encoded.message;
  // 32 seeds: the box lands at each of the issuer's early sync points, its own wait included.
  for (uint64_t seed = 1; seed <= 32; ++seed) {
    emu::Launch launch = one_block(128, seed);
    launch.dynamic_shared_bytes = 64 * 16 * 2 + 2048;
    std::vector<float> seen(64 * 16, -1.0f);
    emu::launch_grid(launch, [&] {
      ATTNBENCH_DYNAMIC_SHARED(shared, 16);
      ATTNBENCH_SHARED(uint64_t, barrier, 8);
      const uint32_t base = ptx::shared_address(shared);
      const uint32_t tile = (base + 1023) / 1024 * 1024;
      const uint32_t full = ptx::shared_address(&barrier);
      if (threadIdx.x == 0) ptx::mbarrier_init(full, 1);
      __syncthreads();
      if (threadIdx.x < 32 && ptx::elect_one()) {
        ptx::mbarrier_arrive_expect_tx(full, 64 * 16 * 2);
        ptx::tma_load_2d(tile, &map, full, 64, 24);
      }
      ptx::mbarrier_wait(full, 0);
      for (unsigned i = threadIdx.x; i < 64 * 16; i += 128) {
        const uint32_t logical = tile + i * 2;  // row i / 64 of 128 bytes
        const uint32_t physical = emu::swizzled_address(logical, emu::Swizzle::bytes128);
        const auto* element = reinterpret_cast<const __nv_bfloat16*>(
            emu::Block::current().shared_pointer(physical, 2, {__FILE__, __LINE__}));
        seen[i] = __bfloat162float(*element);
      }
    });
    for (int y = 0; y < 16; ++y) {
      for (int x = 0; x < 64; ++x) {
        const int64_t gx = 64 + x, gy = 24 + y;
        const float expected =
            gx < kWidth && gy < kHeight ? __bfloat162float(tensor[gy * kWidth + gx]) : 0.0f;
        ASSERT_EQ(seen[y * 64 + x], expected) << "seed " << seed << ": " << x << "," << y;
      }
    }
  }
}

}  // namespace
}  // namespace attnbench
