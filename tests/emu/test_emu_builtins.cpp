// A kernel written as CUDA source (the built-ins, a barrier-separated tree in shared memory, a
// warp-shuffle tail, atomicAdd), compiled by the host compiler against the emulated device and
// launched over a grid: it sums right, and the same kernel with one barrier left out is caught
// by at least one of 8 schedules, as a missing barrier on a GPU is wrong only some of the time.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/emu/cuda_builtins.h"

namespace attnbench::emu {
namespace {

constexpr unsigned kThreads = 256;

template <bool kBarrierInTheTree>
__global__ void block_sum(const float* in, float* total, int n) {
  auto* tile = static_cast<float*>(ATTNBENCH_EMU_BLOCK.dynamic_shared());
  const unsigned t = threadIdx.x;
  const unsigned i = blockIdx.x * blockDim.x + t;
  tile[t] = i < static_cast<unsigned>(n) ? in[i] : 0.0f;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half >= warpSize; half /= 2) {
    if (t < half) tile[t] += tile[t + half];
    if (kBarrierInTheTree) __syncthreads();
  }
  if (t < warpSize) {
    float sum = tile[t];
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
    if (t == 0) atomicAdd(total, sum);
  }
}

template <bool kBarrierInTheTree>
float run_block_sum(const std::vector<float>& in, uint64_t seed) {
  Launch launch;
  launch.grid_dim = {static_cast<unsigned>((in.size() + kThreads - 1) / kThreads), 1, 1};
  launch.block_dim = {kThreads, 1, 1};
  launch.dynamic_shared_bytes = kThreads * sizeof(float);
  launch.seed = seed;
  float total = 0;
  launch_grid(launch, [&] { block_sum<kBarrierInTheTree>(in.data(), &total, static_cast<int>(in.size())); });
  return total;
}

TEST(EmuBuiltins, ACudaStyleKernelSumsRightAndAMissingBarrierIsCaught) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<float> value(0.5f, 1.5f);  // positive: a lost term shows
  std::vector<float> in(kThreads * 6 + 1 + rng() % kThreads);
  double expected = 0;
  for (float& x : in) expected += x = value(rng);
  const uint64_t base = rng();
  SCOPED_TRACE("seeds from " + std::to_string(base));
  EXPECT_NEAR(run_block_sum<true>(in, base), expected, 1e-4 * expected);
  int caught = 0;
  for (uint64_t s = 0; s < 8; ++s) {
    caught += std::fabs(run_block_sum<false>(in, base + s) - expected) > 1e-3 * expected;
  }
  EXPECT_GE(caught, 1) << "no schedule exposed the missing barrier";
}

TEST(EmuBuiltins, BarriersCarryTheKernelsSourceLine) {
  Launch launch;
  launch.grid_dim = {1, 1, 1};
  launch.block_dim = {64, 1, 1};
  try {
    launch_grid(launch, [] {
      if (threadIdx.x < 32) __syncthreads();
    });
    ADD_FAILURE() << "a barrier half the block skipped was not reported";
  } catch (const EmuError& e) {
    EXPECT_NE(std::string(e.what()).find("__syncthreads at test_emu_builtins.cpp:"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace attnbench::emu
