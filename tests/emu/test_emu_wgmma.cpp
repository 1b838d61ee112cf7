// wgmma.mma_async as kernels/cuda/common/ptx.cuh wraps it, run by the emulated device (issue 15,
// item 1). The operand tiles are put in shared memory the way a Hopper kernel puts them, by the
// TMA with the map's swizzle (2D boxes; 3D boxes for the interleaved layouts without swizzle),
// and described by kernels/cuda/common/wgmma_descriptor.h; the product every thread holds in
// its accumulators must equal A B (+ C), computed here from the matrices in global memory. Fresh
// small integers, so every sum is exact and a wrong element is a wrong layout. Then the
// asynchrony: NaN until the wait, the tiles read at the wait, and what the ISA leaves undefined
// reported in one line.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/common/ptx.cuh"
#include "kernels/cuda/common/shared.cuh"
#include "kernels/cuda/common/tma_map.h"
#include "kernels/cuda/common/wgmma_descriptor.h"
#include "reference/formats.h"
#include "tests/support/fresh_seed.h"

namespace attnbench {
namespace {

constexpr unsigned kThreads = 128;  // one warpgroup
constexpr int kRows = 64;           // m64

emu::Launch warpgroup(uint64_t seed, size_t shared_bytes) {
  emu::Launch launch;
  launch.block_dim = {kThreads, 1, 1};
  launch.seed = seed;
  launch.workers = 1;
  launch.dynamic_shared_bytes = shared_bytes;
  return launch;
}

// How an operand's elements are stored: 16-bit types as themselves, e4m3 (ptx::E4m3) as bytes.
template <typename Element>
struct Stored {
  using type = Element;
};
template <>
struct Stored<ptx::E4m3> {
  using type = uint8_t;
};
template <typename Element>
constexpr int kBytes = sizeof(typename Stored<Element>::type);
template <typename Element>
constexpr int kDepthStep = ptx::kWgmmaDepth<Element>;

template <typename Element>
typename Stored<Element>::type to_element(float value) {
  if constexpr (std::is_same_v<Element, __half>) {
    return __float2half_rn(value);
  } else if constexpr (std::is_same_v<Element, __nv_bfloat16>) {
    return __float2bfloat16_rn(value);
  } else {
    return float_to_e4m3_bits(value);
  }
}

template <typename Element>
constexpr DType dtype_of() {
  return std::is_same_v<Element, __half>          ? DType::f16
         : std::is_same_v<Element, __nv_bfloat16> ? DType::bf16
                                                  : DType::e4m3;
}

// A row-major matrix of small integers in global memory (16-byte aligned: new[] memory).
template <typename Element>
struct Matrix {
  int rows = 0;
  int cols = 0;
  std::vector<typename Stored<Element>::type> values;
  std::vector<float> exact;
  Matrix(int rows_, int cols_, std::mt19937& rng) : rows(rows_), cols(cols_) {
    for (int i = 0; i < rows * cols; ++i) {
      exact.push_back(static_cast<float>(static_cast<int>(rng() % 9) - 4));
      values.push_back(to_element<Element>(exact.back()));
    }
  }
  float at(int r, int c) const { return exact[static_cast<size_t>(r) * cols + c]; }
};

// How an operand tile is laid out in shared memory, and how the TMA puts it there.
struct Layout {
  int swizzle_bytes = 128;  // 0: the interleaved core matrices
  bool mn_major = false;    // B only: N contiguous (V as [key][d])
};

// The tensor map that lands `m` (a tile_rows x depth operand, stored K-major as rows x cols,
// or MN-major as depth x tile_rows) in `layout`, and what each k16 step's descriptor says.
template <typename Element>
struct OperandTile {
  std::vector<CUtensorMap> maps;  // one per box
  std::vector<std::array<int, 3>> box_coordinates;
  std::vector<uint32_t> box_offsets;  // bytes from the tile's start
  uint32_t bytes = 0;
  uint32_t leading_bytes = 0, stride_bytes = 0;
  std::function<uint32_t(int step)> step_offset;  // the k16 step's start, from the tile's
  bool three_dimensional = false;

  OperandTile(const Matrix<Element>& m, Layout layout) {
    constexpr int kElement = kBytes<Element>;
    constexpr int kChunk = 16 / kElement;               // elements in a core matrix's 16-byte row
    const int width = layout.swizzle_bytes / kElement;  // elements per swizzled row
    gpu::TensorMapSpec spec;
    spec.element = dtype_of<Element>();
    spec.base = m.values.data();
    spec.swizzle_bytes = layout.swizzle_bytes;
    const int64_t row_bytes = int64_t{m.cols} * kElement;
    bytes = static_cast<uint32_t>(m.rows * row_bytes);
    if (layout.swizzle_bytes == 0) {
      // 3D: (16 contiguous bytes, every row, the 16-byte chunks): core matrices of 8 x 16B.
      spec.rank = 3;
      three_dimensional = true;
      spec.dims = {kChunk, m.rows, m.cols / kChunk, 1};
      spec.stride_bytes = {kElement, row_bytes, 16, 0};
      spec.box = {kChunk, m.rows, m.cols / kChunk, 1};
      add_box(spec, {0, 0, 0}, 0);
      const uint32_t chunk_stride = static_cast<uint32_t>(m.rows * 16);
      if (!layout.mn_major) {          // rows = the M/N extent, cols = K
        leading_bytes = chunk_stride;  // the next 8 k
        stride_bytes = 128;            // the next 8 rows
        step_offset = [chunk_stride](int step) { return 2 * chunk_stride * step; };
      } else {                        // rows = K, cols = N
        leading_bytes = 128;          // the next 8 k
        stride_bytes = chunk_stride;  // the next 8 n
        step_offset = [](int step) { return 256u * static_cast<uint32_t>(step); };
      }
      return;
    }
    // 2D boxes `width` elements wide, side by side along the contiguous dimension.
    if (m.cols % width != 0) throw std::invalid_argument("the tile must span whole swizzle rows");
    spec.rank = 2;
    spec.dims = {m.cols, m.rows, 1, 1};
    spec.stride_bytes = {kElement, row_bytes, 0, 0};
    spec.box = {width, m.rows, 1, 1};
    const uint32_t box_bytes = static_cast<uint32_t>(m.rows * layout.swizzle_bytes);
    for (int c = 0; c < m.cols / width; ++c) add_box(spec, {c * width, 0, 0}, c * box_bytes);
    const uint32_t swizzle = static_cast<uint32_t>(layout.swizzle_bytes);
    stride_bytes = 8 * swizzle;
    if (!layout.mn_major) {
      step_offset = [=](int step) {
        const int k = kDepthStep<Element> * step;
        return static_cast<uint32_t>(k / width) * box_bytes +
               static_cast<uint32_t>(kElement * (k % width));
      };
    } else {
      leading_bytes = box_bytes;  // the next `width` n
      step_offset = [=](int step) { return 16u * swizzle * static_cast<uint32_t>(step); };
    }
  }

  void add_box(const gpu::TensorMapSpec& spec, std::array<int, 3> coordinates, uint32_t offset) {
    maps.emplace_back();
    const Status encoded = gpu::encode_tensor_map(spec, maps.back());
    if (!encoded) throw std::runtime_error(encoded.message);
    box_coordinates.push_back(coordinates);
    box_offsets.push_back(offset);
  }

  // Issued by one thread: every box, completing on `barrier`.
  void load(uint32_t tile, uint32_t barrier) const {
    for (size_t i = 0; i < maps.size(); ++i) {
      const auto& c = box_coordinates[i];
      if (three_dimensional) {
        ptx::tma_load_3d(tile + box_offsets[i], &maps[i], barrier, c[0], c[1], c[2]);
      } else {
        ptx::tma_load_2d(tile + box_offsets[i], &maps[i], barrier, c[0], c[1]);
      }
    }
  }

  uint64_t descriptor(uint32_t tile, int step, int swizzle_bytes) const {
    return gpu::encode_wgmma_descriptor({tile + step_offset(step), leading_bytes, stride_bytes,
                                         static_cast<uint32_t>(swizzle_bytes), 0});
  }
};

// This thread's A fragment for k-step `step` (mma.sync's layout, rows 16w.. of warp w): the 4
// bytes at row g (+ 8), k = 4 bytes' worth from (4 / element size) t, and the same half a step on.
template <typename Element>
void a_fragment(const Matrix<Element>& a, unsigned thread, int step, uint32_t (&fragment)[4]) {
  constexpr int kPerRegister = 4 / kBytes<Element>;
  const int row = 16 * static_cast<int>((thread / 32) % 4) + static_cast<int>(thread % 32) / 4;
  const int k = kDepthStep<Element> * step + kPerRegister * static_cast<int>(thread % 4);
  auto pack = [&](int r, int c) {
    uint32_t bits;
    std::memcpy(&bits, &a.values[static_cast<size_t>(r) * a.cols + c], sizeof bits);
    return bits;
  };
  constexpr int kHalf = kDepthStep<Element> / 2;
  fragment[0] = pack(row, k);
  fragment[1] = pack(row + 8, k);
  fragment[2] = pack(row, k + kHalf);
  fragment[3] = pack(row + 8, k + kHalf);
}

// Where accumulator i of `thread` sits in the 64 x N result.
std::pair<int, int> accumulator_position(unsigned thread, int i) {
  const int warp = static_cast<int>((thread / 32) % 4);
  const int lane = static_cast<int>(thread % 32);
  return {16 * warp + lane / 4 + 8 * ((i / 2) % 2), 8 * (i / 4) + 2 * (lane % 4) + i % 2};
}

struct Product {
  Layout a;  // swizzle_bytes < 0: A from registers
  Layout b;
  int depth = 16;           // K
  bool accumulate = false;  // onto a random C
};

// Runs D (+)= A B with `config` in one warpgroup and checks every accumulator of every thread.
template <int kN, typename Element, bool kTransposeB>
void check_product(const Product& config) {
  std::mt19937 rng(static_cast<uint32_t>(fresh_seed()));
  const Matrix<Element> a(kRows, config.depth, rng);
  const Matrix<Element> b_nk(kN, config.depth, rng);  // B as N x K (K-major)
  Matrix<Element> b_kn(config.depth, kN, rng);        // and as K x N (N-major), the same values
  for (int n = 0; n < kN; ++n) {
    for (int k = 0; k < config.depth; ++k) {
      b_kn.exact[static_cast<size_t>(k) * kN + n] = b_nk.at(n, k);
      b_kn.values[static_cast<size_t>(k) * kN + n] =
          b_nk.values[static_cast<size_t>(n) * config.depth + k];
    }
  }
  const bool a_in_registers = config.a.swizzle_bytes < 0;
  const OperandTile<Element> a_tile(a, a_in_registers ? Layout{32} : config.a);  // unused then
  const OperandTile<Element> b_tile(kTransposeB ? b_kn : b_nk, config.b);
  std::vector<float> c(static_cast<size_t>(kRows) * kN);
  for (auto& v : c) v = static_cast<float>(static_cast<int>(rng() % 201) - 100);
  std::vector<float> seen(c.size(), -1.0f);
  const uint64_t seed = fresh_seed();
  emu::launch_grid(warpgroup(seed, 2 * 1024 + a_tile.bytes + b_tile.bytes), [&] {
    ATTNBENCH_DYNAMIC_SHARED(shared, 16);
    ATTNBENCH_SHARED(uint64_t, barrier, 8);
    const uint32_t a_start = (ptx::shared_address(shared) + 1023) / 1024 * 1024;
    const uint32_t b_start = (a_start + a_tile.bytes + 1023) / 1024 * 1024;
    const uint32_t full = ptx::shared_address(&barrier);
    const unsigned t = threadIdx.x;
    if (t == 0) {
      ptx::mbarrier_init(full, 1);
      ptx::mbarrier_arrive_expect_tx(full, (a_in_registers ? 0 : a_tile.bytes) + b_tile.bytes);
      if (!a_in_registers) a_tile.load(a_start, full);
      b_tile.load(b_start, full);
    }
    __syncthreads();
    ptx::mbarrier_wait(full, 0);
    float d[kN / 2];
    for (int i = 0; i < kN / 2; ++i) {
      const auto [row, col] = accumulator_position(t, i);
      d[i] = c[static_cast<size_t>(row) * kN + col];
    }
    ptx::wgmma_fence();
    for (int step = 0; step < config.depth / kDepthStep<Element>; ++step) {
      const uint64_t b_desc = b_tile.descriptor(b_start, step, config.b.swizzle_bytes);
      const bool accumulate = config.accumulate || step > 0;
      if (a_in_registers) {
        uint32_t fragment[4];
        a_fragment(a, t, step, fragment);
        ptx::wgmma_rs<kN, Element, kTransposeB>(d, fragment, b_desc, accumulate);
        ptx::wgmma_commit();  // the fragment is this iteration's: wait before it goes
        ptx::wgmma_wait<0>();
        ptx::wgmma_fence();
      } else {
        const uint64_t a_desc = a_tile.descriptor(a_start, step, config.a.swizzle_bytes);
        ptx::wgmma_ss<kN, Element, kTransposeB>(d, a_desc, b_desc, accumulate);
      }
    }
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
    for (int i = 0; i < kN / 2; ++i) {
      const auto [row, col] = accumulator_position(t, i);
      seen[static_cast<size_t>(row) * kN + col] = d[i];
    }
  });
  for (int row = 0; row < kRows; ++row) {
    for (int col = 0; col < kN; ++col) {
      double expected = config.accumulate ? c[static_cast<size_t>(row) * kN + col] : 0.0;
      for (int k = 0; k < config.depth; ++k) expected += a.at(row, k) * b_nk.at(col, k);
      ASSERT_EQ(seen[static_cast<size_t>(row) * kN + col], expected)
          << "row " << row << ", column " << col << " (seed " << seed << ")";
    }
  }
}

TEST(EmuWgmma, DescriptorsRoundTripTheirFields) {
  std::mt19937 rng(static_cast<uint32_t>(fresh_seed()));
  auto field = [&](uint32_t bound) { return static_cast<uint32_t>(rng() % bound); };
  for (int i = 0; i < 1000; ++i) {
    const gpu::WgmmaOperand operand{field(0x3fff) << 4, field(0x3fff) << 4, field(0x3fff) << 4,
                                    32u << field(3), field(8)};
    const gpu::WgmmaOperand back =
        gpu::decode_wgmma_descriptor(gpu::encode_wgmma_descriptor(operand));
    EXPECT_EQ(back.start, operand.start);
    EXPECT_EQ(back.leading_bytes, operand.leading_bytes);
    EXPECT_EQ(back.stride_bytes, operand.stride_bytes);
    EXPECT_EQ(back.swizzle_bytes, operand.swizzle_bytes);
    EXPECT_EQ(back.base_offset, operand.base_offset);
  }
  // The ISA's swizzle codes: 1 = 128 bytes, 2 = 64, 3 = 32, 0 = none.
  EXPECT_EQ(gpu::encode_wgmma_descriptor({0, 0, 0, 128, 0}) >> 62, 1u);
  EXPECT_EQ(gpu::encode_wgmma_descriptor({0, 0, 0, 32, 0}) >> 62, 3u);
}

TEST(EmuWgmma, KMajorTilesInEverySwizzleMode) {
  for (const int swizzle : {128, 64, 32, 0}) {
    SCOPED_TRACE("swizzle " + std::to_string(swizzle));
    check_product<64, __nv_bfloat16, false>({{swizzle}, {swizzle}, 64, false});
  }
}

TEST(EmuWgmma, AccumulatesOntoC_Fp16_N128) {
  check_product<128, __half, false>({{128}, {128}, 64, true});
}

TEST(EmuWgmma, NMajorBAsVIsStoredInEverySwizzleMode) {
  for (const int swizzle : {128, 64, 32, 0}) {
    SCOPED_TRACE("swizzle " + std::to_string(swizzle));
    check_product<128, __nv_bfloat16, true>({{128}, {swizzle, true}, 64, true});
  }
}

TEST(EmuWgmma, AFromRegisters_N256) {
  check_product<256, __nv_bfloat16, false>({{-1}, {128}, 64, true});
  check_product<64, __half, true>({{-1}, {64, true}, 32, false});
}

// ---- e4m3 (m64nNk32): 32 bytes of a row per step, both operands K-major -----------------------

TEST(EmuWgmma, E4m3KMajorTilesInEverySwizzleMode) {
  for (const int swizzle : {128, 64, 32, 0}) {
    SCOPED_TRACE("swizzle " + std::to_string(swizzle));
    check_product<64, ptx::E4m3, false>({{swizzle}, {swizzle}, 128, false});
  }
}

TEST(EmuWgmma, E4m3AFromRegistersAndOntoC) {
  check_product<128, ptx::E4m3, false>({{-1}, {128}, 128, true});
  check_product<256, ptx::E4m3, false>({{64}, {64}, 64, true});
  check_product<64, ptx::E4m3, false>({{-1}, {0}, 64, true});
}

// The ISA has no transpose for FP8 (ptx.cuh refuses it at compile time; the emulator names it).
TEST(EmuWgmma, AnE4m3WgmmaWithAnNMajorBIsReported) {
  try {
    emu::launch_grid(warpgroup(fresh_seed(), 16384), [&] {
      float d[32] = {};
      emu::WgmmaOp op;
      op.input = emu::MmaInput::e4m3;
      op.n = 64;
      op.b_mn_major = true;
      op.d = d;
      ptx::wgmma_fence();
      emu::Block::current().wgmma_issue(op, {__FILE__, __LINE__});
    });
    FAIL() << "an N-major B for e4m3 must be reported";
  } catch (const emu::EmuError& report) {
    EXPECT_NE(std::string(report.what()).find("an e4m3 wgmma takes B K-major only"),
              std::string::npos)
        << report.what();
  }
}

// P's A fragment from fp32: each float rounded to e4m3 in its own byte, x0 lowest.
TEST(EmuPtx, PackE4m3x4RoundsEachValueIntoItsByte) {
  std::mt19937 rng(static_cast<uint32_t>(fresh_seed()));
  std::uniform_real_distribution<float> magnitude(-12.0f, 10.0f);
  for (int i = 0; i < 10000; ++i) {
    float x[4];
    for (float& v : x) v = std::exp2(magnitude(rng)) * ((rng() & 1) ? -1.0f : 1.0f);
    const uint32_t packed = ptx::pack_e4m3x4(x[0], x[1], x[2], x[3]);
    for (int b = 0; b < 4; ++b) {
      ASSERT_EQ((packed >> (8 * b)) & 0xffu, float_to_e4m3_bits(x[b])) << x[b];
    }
  }
  // Saturating (satfinite): beyond 448 gives 448 (0x7e), not NaN; NaN stays NaN (0x7f).
  EXPECT_EQ(ptx::pack_e4m3x4(1000.0f, -1e30f, std::nanf(""), 448.0f), 0x7e7ffe7eu);
}

// ---- asynchrony and what the ISA leaves undefined --------------------------------------------

// A one-step 64 x 64 x 16 product on tiles left as they are (NaN: never loaded); `between` runs
// after the issue and before the wait, `after` once the wait is done.
std::string report_of(const std::function<void(float (&)[32], uint32_t (&)[4])>& between,
                      bool fence = true, bool registers = false, unsigned threads = kThreads) {
  emu::Launch launch = warpgroup(fresh_seed(), 16384);
  launch.block_dim = {threads, 1, 1};
  try {
    emu::launch_grid(launch, [&] {
      ATTNBENCH_DYNAMIC_SHARED(shared, 16);
      const uint32_t tile = (ptx::shared_address(shared) + 1023) / 1024 * 1024;
      const uint64_t desc = gpu::encode_wgmma_descriptor({tile, 0, 1024, 128, 0});
      float d[32] = {};
      uint32_t a[4] = {threadIdx.x, 1, 2, 3};
      if (fence) ptx::wgmma_fence();
      if (registers) {
        ptx::wgmma_rs<64, __nv_bfloat16, false>(d, a, desc, true);
      } else {
        ptx::wgmma_ss<64, __nv_bfloat16, false>(d, desc, desc, true);
      }
      ptx::wgmma_commit();
      between(d, a);
      ptx::wgmma_wait<0>();
    });
  } catch (const emu::EmuError& report) {
    return report.what();
  }
  return "";
}

void expect_report(const std::string& report, const std::string& part) {
  EXPECT_NE(report.find(part), std::string::npos) << "the report: " << report;
}

TEST(EmuWgmma, AccumulatorsAreNaNUntilTheWait) {
  int in_flight = 0;
  EXPECT_EQ(report_of([&](float(&d)[32], uint32_t(&)[4]) {
              in_flight += std::bit_cast<uint32_t>(d[7]) == emu::kWgmmaInFlightBits;
            }),
            "");
  EXPECT_EQ(in_flight, static_cast<int>(kThreads));
}

TEST(EmuWgmma, WhatTheIsaLeavesUndefinedIsReported) {
  const auto nothing = [](float(&)[32], uint32_t(&)[4]) {};
  expect_report(report_of(nothing, false),
                "issues without wgmma.fence since its last commit_group");
  expect_report(report_of([](float(&d)[32], uint32_t(&)[4]) { d[3] = 1.0f; }),
                "wrote accumulator 3 of the wgmma.mma_async issued at");
  expect_report(report_of([](float(&)[32], uint32_t(&a)[4]) { a[2] = 7; }, true, true),
                "wrote the A registers of the wgmma.mma_async issued at");
  expect_report(report_of(nothing, true, false, 96), "are not whole warpgroups of 128");
  // A thread that never waits: its accumulators are never completed.
  emu::Launch launch = warpgroup(fresh_seed(), 16384);
  try {
    emu::launch_grid(launch, [&] {
      ATTNBENCH_DYNAMIC_SHARED(shared, 16);
      const uint32_t tile = (ptx::shared_address(shared) + 1023) / 1024 * 1024;
      const uint64_t desc = gpu::encode_wgmma_descriptor({tile, 0, 1024, 128, 0});
      float d[32] = {};
      ptx::wgmma_fence();
      ptx::wgmma_ss<64, __nv_bfloat16, false>(d, desc, desc, false);
      ptx::wgmma_commit();
    });
    FAIL() << "returning with a wgmma in flight must be reported";
  } catch (const emu::EmuError& report) {
    expect_report(report.what(), "returned with wgmma.mma_async in flight (1 committed groups");
  }
}

// A tile written by ordinary stores reaches the tensor cores only after fence.proxy.async: without
// it the wgmma is reported at its issue line; with it the same kernel computes.
TEST(EmuWgmma, ATileStoredWithoutFenceProxyAsyncIsReported) {
  for (const bool fenced : {false, true}) {
    SCOPED_TRACE(fenced ? "fenced" : "not fenced");
    std::string report;
    try {
      emu::launch_grid(warpgroup(fresh_seed(), 16384), [&] {
        ATTNBENCH_DYNAMIC_SHARED(shared, 16);
        const uint32_t tile = (ptx::shared_address(shared) + 1023) / 1024 * 1024;
        auto* elements = reinterpret_cast<__nv_bfloat16*>(
            emu::Block::current().shared_pointer(tile, 8192, {__FILE__, __LINE__}));
        for (unsigned i = threadIdx.x; i < 4096; i += kThreads) {
          elements[i] = __float2bfloat16_rn(2.0f);
        }
        if (fenced) ptx::fence_proxy_async();
        __syncthreads();
        const uint64_t desc = gpu::encode_wgmma_descriptor({tile, 0, 1024, 128, 0});
        float d[32];
        ptx::wgmma_fence();
        ptx::wgmma_ss<64, __nv_bfloat16, false>(d, desc, desc, false);
        ptx::wgmma_commit();
        ptx::wgmma_wait<0>();
        if (d[0] != 64.0f) throw std::runtime_error("wrong product " + std::to_string(d[0]));
      });
    } catch (const emu::EmuError& error) {
      report = error.what();
    }
    if (fenced) {
      EXPECT_EQ(report, "");
    } else {
      expect_report(report, "written by an ordinary store with no fence.proxy.async since");
      expect_report(report, "test_emu_wgmma.cpp:");
    }
  }
}

// The product reads the tiles at the wait: a stage overwritten between issue and wait changes it
// (on a GPU: a race with the tensor cores; the race build reports it). And wait_group 1 leaves
// the youngest group in flight.
TEST(EmuWgmma, TheTilesAreReadAtTheWaitAndWaitGroupLeavesTheYoungest) {
  const float value = static_cast<float>(1 + fresh_seed() % 7);
  std::vector<float> first(kThreads), second(kThreads);
  std::vector<int> second_in_flight(kThreads);
  constexpr unsigned kTileElements = 64 * 64;  // 64 rows of 128 bytes
  emu::launch_grid(warpgroup(fresh_seed(), 2 * kTileElements * 2), [&] {
    ATTNBENCH_DYNAMIC_SHARED(shared, 16);
    const uint32_t tile = (ptx::shared_address(shared) + 1023) / 1024 * 1024;
    auto* elements = reinterpret_cast<__nv_bfloat16*>(
        emu::Block::current().shared_pointer(tile, kTileElements * 2, {__FILE__, __LINE__}));
    for (unsigned i = threadIdx.x; i < kTileElements; i += kThreads) {
      elements[i] = __float2bfloat16_rn(1.0f);
    }
    ptx::fence_proxy_async();
    __syncthreads();
    const uint64_t desc = gpu::encode_wgmma_descriptor({tile, 0, 1024, 128, 0});
    float d1[32], d2[32];
    ptx::wgmma_fence();
    ptx::wgmma_ss<64, __nv_bfloat16, false>(d1, desc, desc, false);
    ptx::wgmma_commit();
    ptx::wgmma_fence();
    ptx::wgmma_ss<64, __nv_bfloat16, false>(d2, desc, desc, false);
    ptx::wgmma_commit();
    __syncthreads();
    for (unsigned i = threadIdx.x; i < kTileElements; i += kThreads) {
      elements[i] = __float2bfloat16_rn(value);  // the stage, overwritten before the wait
    }
    ptx::fence_proxy_async();
    __syncthreads();
    ptx::wgmma_wait<1>();
    first[threadIdx.x] = d1[0];
    second_in_flight[threadIdx.x] = std::bit_cast<uint32_t>(d2[0]) == emu::kWgmmaInFlightBits;
    ptx::wgmma_wait<0>();
    second[threadIdx.x] = d2[0];
  });
  for (unsigned t = 0; t < kThreads; ++t) {
    EXPECT_EQ(first[t], 16 * value * value) << "thread " << t;
    EXPECT_EQ(second_in_flight[t], 1) << "thread " << t;
    EXPECT_EQ(second[t], 16 * value * value) << "thread " << t;
  }
}

}  // namespace
}  // namespace attnbench
