// The emulated TMA (issue 15, item 1): the swizzle modes as address arithmetic, a box read at a
// coordinate with the elements outside the tensor filled, and cp.async.bulk.tensor in a block:
// the destination NaN from issue, the box landing with the map's swizzle and counting its bytes
// down on the mbarrier its consumers wait for; and the store back, read at its wait.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/emu/block.h"
#include "kernels/emu/tma.h"

namespace attnbench::emu {
namespace {

#define HERE (Site{__FILE__, __LINE__})

TEST(EmuTma, SwizzlesPermuteTheSixteenByteChunksOfEachRowByTheRowIndex) {
  // 128B: chunk c of 128-byte row r (within a 1024-byte pattern) goes to chunk c ^ (r % 8).
  for (uint32_t row = 0; row < 8; ++row) {
    for (uint32_t chunk = 0; chunk < 8; ++chunk) {
      const uint32_t address = 2048 + row * 128 + chunk * 16 + 5;
      EXPECT_EQ(swizzled_address(address, Swizzle::bytes128),
                2048 + row * 128 + ((chunk ^ row) * 16) + 5);
      EXPECT_EQ(swizzled_address(address, Swizzle::bytes64),
                2048 + row * 128 + ((chunk ^ (row % 4)) * 16) + 5);
      EXPECT_EQ(swizzled_address(address, Swizzle::bytes32),
                2048 + row * 128 + ((chunk ^ (row % 2)) * 16) + 5);
      EXPECT_EQ(swizzled_address(address, Swizzle::none), address);
    }
  }
  // The absolute bits decide: 128 bytes further is the next row's pattern.
  EXPECT_NE(swizzled_address(16, Swizzle::bytes128),
            swizzled_address(128 + 16, Swizzle::bytes128) - 128);
}

TensorMap map_2d(const std::vector<uint16_t>& tensor, uint64_t width, uint64_t height,
                 uint32_t box_width, uint32_t box_height) {
  TensorMap map;
  map.rank = 2;
  map.element_bytes = 2;
  map.base = tensor.data();
  map.dims = {width, height, 1, 1};
  map.stride_bytes = {2, width * 2, 0, 0};
  map.box = {box_width, box_height, 1, 1};
  return map;
}

TEST(EmuTma, ABoxPastTheTensorsEdgeIsFilled) {
  std::mt19937 rng(std::random_device{}());
  std::vector<uint16_t> tensor(10 * 7);
  for (auto& v : tensor) v = static_cast<uint16_t>(1 + rng() % 60000);  // never the fill
  TensorMap map = map_2d(tensor, 10, 7, 8, 4);
  size_t reads = 0;
  const auto box = gather_box(map, {6, 5, 0, 0}, [&](const void*, size_t) { ++reads; });
  ASSERT_EQ(box.size(), 8u * 4 * 2);
  for (uint32_t y = 0; y < 4; ++y) {
    for (uint32_t x = 0; x < 8; ++x) {
      uint16_t value;
      std::memcpy(&value, &box[(y * 8 + x) * 2], 2);
      const bool inside = 6 + x < 10 && 5 + y < 7;
      EXPECT_EQ(value, inside ? tensor[(5 + y) * 10 + 6 + x] : 0) << x << "," << y;
    }
  }
  EXPECT_EQ(reads, 4u * 2);  // only the 4 x 2 elements inside are read
  map.fill_nan = true;
  const auto nan_box = gather_box(map, {-2, 0, 0, 0}, [](const void*, size_t) {});
  EXPECT_EQ(nan_box[0], 0xff);  // x = -2: outside, NaN-filled
}

Block::Shape block_with_shared(unsigned threads, size_t bytes) {
  Block::Shape shape;
  shape.block_dim = {threads, 1, 1};
  shape.dynamic_shared_bytes = bytes;
  return shape;
}

// One producer issues a 64 x 8 box (128-byte rows, 128B swizzle) into a 1024-aligned tile; the
// consumers read it unswizzled after waiting on the barrier: the box's values, whatever the seed.
TEST(EmuTma, ABoxLandsSwizzledAndCompletesItsBarrier) {
  std::mt19937 rng(std::random_device{}());
  std::vector<uint16_t> tensor(64 * 8);
  for (auto& v : tensor) v = static_cast<uint16_t>(1 + rng() % 60000);
  TensorMap map = map_2d(tensor, 64, 8, 64, 8);
  map.swizzle = Swizzle::bytes128;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    Block block(block_with_shared(64, 4096), seed);
    std::vector<uint16_t> seen(64 * 8, 0);
    int nan_before_wait = 0;
    block.run([&] {
      Block& b = Block::current();
      auto* shared = static_cast<unsigned char*>(b.dynamic_shared());
      const uint32_t base = b.shared_address(shared, HERE);
      const uint32_t tile = (base + 1024 + 1023) / 1024 * 1024;  // 1024-aligned, as 128B needs
      const uint32_t barrier = tile - 8;
      const unsigned t = b.linear_thread();
      if (t == 0) {
        b.mbarrier_init(barrier, 1, HERE);
        b.mbarrier_arrive(barrier, 64 * 8 * 2, HERE);
        b.tma_load(map, {0, 0, 0, 0}, tile, barrier, HERE);
        uint16_t first;
        std::memcpy(&first, b.shared_pointer(tile, 2, HERE), 2);
        nan_before_wait = first == 0xffff;
      }
      b.sync_threads(HERE);
      b.mbarrier_wait_parity(barrier, 0, HERE);
      const unsigned row = t / 8;  // 8 threads a row, each its own 8 columns
      for (unsigned x = t % 8; x < 64; x += 8) {
        const uint32_t logical = tile + row * 128 + x * 2;
        std::memcpy(&seen[row * 64 + x],
                    b.shared_pointer(swizzled_address(logical, Swizzle::bytes128), 2, HERE), 2);
      }
    });
    EXPECT_EQ(nan_before_wait, 1) << "seed " << seed << ": in flight, the box is NaN";
    EXPECT_EQ(seen, tensor) << "seed " << seed;
  }
}

TEST(EmuTma, AMisalignedDestinationIsReported) {
  std::vector<uint16_t> tensor(64 * 8, 1);
  const TensorMap map = map_2d(tensor, 64, 8, 64, 8);
  Block block(block_with_shared(32, 4096), 1);
  try {
    block.run([&] {
      Block& b = Block::current();
      const uint32_t base = b.shared_address(b.dynamic_shared(), HERE);
      const uint32_t tile = (base + 127) / 128 * 128 + 16;
      if (b.linear_thread() == 0) {
        b.mbarrier_init(tile + 2048, 1, HERE);
        b.tma_load(map, {0, 0, 0, 0}, tile, tile + 2048, HERE);
      }
    });
    FAIL() << "a destination off 128 bytes must be reported";
  } catch (const EmuError& report) {
    EXPECT_NE(std::string(report.what()).find("must be 128-byte aligned"), std::string::npos)
        << report.what();
  }
}

// The hardware's rule, found by PtxConformance's ladder on an H200: the box's inner start must lie
// on 16 bytes. A load 3 bf16 elements in is reported; 8 in (and 8 before the tensor) are not.
TEST(EmuTma, ABoxStartingOffSixteenBytesIsReported) {
  std::mt19937 rng(std::random_device{}());
  std::vector<uint16_t> tensor(64 * 8);
  for (auto& v : tensor) v = static_cast<uint16_t>(1 + rng() % 60000);
  const TensorMap map = map_2d(tensor, 64, 8, 64, 8);
  for (const int32_t x : {3, 8, -8, -45}) {
    Block block(block_with_shared(32, 4096), 1);
    std::string reported;
    try {
      block.run([&] {
        Block& b = Block::current();
        const uint32_t base = b.shared_address(b.dynamic_shared(), HERE);
        const uint32_t tile = (base + 127) / 128 * 128;
        if (b.linear_thread() != 0) return;
        b.mbarrier_init(tile + 2048, 1, HERE);
        b.mbarrier_arrive(tile + 2048, 64 * 8 * 2, HERE);
        b.tma_load(map, {x, 0, 0, 0}, tile, tile + 2048, HERE);
        b.mbarrier_wait_parity(tile + 2048, 0, HERE);
      });
    } catch (const EmuError& report) {
      reported = report.what();
    }
    const bool aligned = x % 8 == 0;
    EXPECT_EQ(reported.empty(), aligned) << "x " << x << ": " << reported;
    if (!aligned) {
      EXPECT_NE(reported.find("not a multiple of 16"), std::string::npos) << reported;
    }
  }
}

// TMA stores: a 64 x 8 box written swizzled in shared memory by 64 threads, fenced, stored by one
// thread at a corner that hangs over the tensor's edge: the inside lands, the rest of the tensor
// is untouched. The source is read at the wait, so a write after the store's issue and before its
// wait is what gets stored.
struct StoreRun {
  bool fence = true;
  bool wait = true;
  bool overwrite_before_wait = false;
};

std::vector<uint16_t> run_store(const StoreRun& how, const std::vector<uint16_t>& values,
                                std::vector<uint16_t> tensor, int x, int y) {
  TensorMap map = map_2d(tensor, 80, 12, 64, 8);
  map.swizzle = Swizzle::bytes128;
  Block block(block_with_shared(64, 4096), 7);
  block.run([&] {
    Block& b = Block::current();
    auto* shared = static_cast<unsigned char*>(b.dynamic_shared());
    const uint32_t base = b.shared_address(shared, HERE);
    const uint32_t tile = (base + 1023) / 1024 * 1024;
    const unsigned t = b.linear_thread();
    const unsigned row = t / 8;  // 8 threads a row, each its own 8 columns
    for (unsigned column = t % 8; column < 64; column += 8) {
      const uint32_t at = swizzled_address(tile + row * 128 + column * 2, Swizzle::bytes128);
      std::memcpy(b.shared_pointer(at, 2, HERE), &values[row * 64 + column], 2);
    }
    if (how.fence) b.fence_proxy_async(HERE);
    b.sync_threads(HERE);
    if (t != 0) return;
    b.tma_store(map, {x, y, 0, 0}, tile, HERE);
    b.bulk_commit();
    if (how.overwrite_before_wait) std::memset(b.shared_pointer(tile, 2, HERE), 0, 2);
    if (how.overwrite_before_wait) b.fence_proxy_async(HERE);
    if (how.wait) b.bulk_wait(0, HERE);
  });
  return tensor;
}

TEST(EmuTma, AStoredBoxLandsInsideTheTensorOnly) {
  std::mt19937 rng(std::random_device{}());
  std::vector<uint16_t> values(64 * 8), tensor(80 * 12);
  for (auto& v : values) v = static_cast<uint16_t>(1 + rng() % 60000);
  for (auto& v : tensor) v = static_cast<uint16_t>(1 + rng() % 60000);
  const std::vector<uint16_t> stored = run_store({}, values, tensor, 40, 7);  // 40 + 64 > 80
  for (int yy = 0; yy < 12; ++yy) {
    for (int xx = 0; xx < 80; ++xx) {
      const bool in_box = xx >= 40 && yy >= 7 && yy < 15;
      const uint16_t expected =
          in_box ? values[static_cast<size_t>((yy - 7) * 64 + xx - 40)] : tensor[yy * 80 + xx];
      ASSERT_EQ(stored[static_cast<size_t>(yy * 80 + xx)], expected) << xx << "," << yy;
    }
  }
  // Shared memory reused between the store's issue and its wait: the wait reads it then.
  StoreRun early;
  early.overwrite_before_wait = true;
  const std::vector<uint16_t> reused = run_store(early, values, tensor, 0, 0);
  EXPECT_EQ(reused[0], 0);
  EXPECT_EQ(reused[1], values[1]);
}

TEST(EmuTma, AStoreWithoutItsFenceOrItsWaitIsReported) {
  std::vector<uint16_t> values(64 * 8, 0x3c00), tensor(80 * 12, 0);
  StoreRun unfenced;
  unfenced.fence = false;
  try {
    run_store(unfenced, values, tensor, 0, 0);
    FAIL() << "a store reading ordinary stores with no fence.proxy.async must be reported";
  } catch (const EmuError& report) {
    EXPECT_NE(std::string(report.what()).find("no fence.proxy.async"), std::string::npos)
        << report.what();
  }
  StoreRun unwaited;
  unwaited.wait = false;
  try {
    run_store(unwaited, values, tensor, 0, 0);
    FAIL() << "a thread returning with a store it never waited for must be reported";
  } catch (const EmuError& report) {
    EXPECT_NE(std::string(report.what()).find("never waited for"), std::string::npos)
        << report.what();
  }
}

}  // namespace
}  // namespace attnbench::emu
