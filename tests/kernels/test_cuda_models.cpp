// The host-side models of the tier-1 CUDA kernels (cuda.naive, cuda.masked_*, cuda.flash1),
// checked without a GPU (label cpu):
//   - their support tables: the issue's table exactly, everything inside it accepted, the cases
//     outside it refused with a reason;
//   - the bytes models of the naive family against numbers worked out by hand, term by term;
//   - the scratch each plan asks for (quadratic in seqlen for the naive family, flat in seqlen_k
//     for flash1) and flash1's launch count;
//   - the tile-range arithmetic flash1 skips tiles with, against reference/mask.h row by row.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/common/visible_tiles.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/flash1.h"
#include "kernels/cuda/naive_family.h"
#include "kernels/registry.h"
#include "reference/flops.h"
#include "tests/support/problems.h"

namespace attnbench {
namespace {

using gpu::MaskStep;

std::vector<Kernel> tier1_kernels() {
  return {cuda_naive_kernel(), cuda_masked_outofplace_kernel(), cuda_masked_inplace_kernel(),
          cuda_masked_fused_kernel(), cuda_flash1_kernel()};
}

const std::vector<Mask> kEveryMask = {{MaskKind::none},          {MaskKind::causal},
                                      {MaskKind::causal_br},     {MaskKind::window, 8, 4},
                                      {MaskKind::window, -1, 0}, {MaskKind::window, 0, -1},
                                      {MaskKind::padding}};

// ---- support tables -----------------------------------------------------------------------------

TEST(CudaTier1Tables, AreTheIssuesTable) {
  for (const Kernel& kernel : tier1_kernels()) {
    SCOPED_TRACE(kernel.name);
    const SupportTable& table = kernel.support;
    EXPECT_EQ(kernel.backend, Backend::cuda);
    EXPECT_TRUE(kernel.deterministic);
    EXPECT_TRUE(kernel.returns_lse);
    EXPECT_EQ(table.input_dtypes, (std::vector<DType>{DType::f16, DType::bf16}));
    EXPECT_FALSE(table.outputs_fp32);
    if (kernel.name == "cuda.flash1") {  // its instantiations
      EXPECT_EQ(table.head_dims, (std::vector<int64_t>{64, 128}));
      EXPECT_FALSE(table.separate_v_dim);
    } else {  // the naive family: any even head dim up to 256 (issue 39)
      EXPECT_TRUE(table.head_dims.empty());
      EXPECT_EQ(table.max_head_dim, 256);
      EXPECT_EQ(table.head_dim_multiple, 2);
      EXPECT_TRUE(table.separate_v_dim);
    }
    EXPECT_EQ(table.masks,
              (std::vector<MaskKind>{MaskKind::none, MaskKind::causal, MaskKind::causal_br,
                                     MaskKind::window, MaskKind::padding}));
    EXPECT_EQ(table.layouts, (std::vector<Layout>{Layout::bshd, Layout::bhsd, Layout::qkv_packed}));
    EXPECT_TRUE(table.gqa);
    EXPECT_EQ(table.archs, (std::vector<std::string>{"sm_80", "sm_90"}));
    EXPECT_EQ(table.max_flops, 0) << "any seqlen: no size limit";
    EXPECT_TRUE(kernel.make_plan);
  }
}

TEST(CudaTier1Tables, AcceptEveryCaseInsideTheTable) {
  const std::vector<std::pair<int64_t, int64_t>> seqlens = {
      {1, 1}, {17, 17}, {113, 113}, {1023, 1023}, {113, 203}, {203, 113}, {1, 1023}, {16, 1023}};
  for (const Kernel& kernel : tier1_kernels()) {
    for (DType dtype : {DType::f16, DType::bf16}) {
      for (int64_t head_dim : {64, 128}) {
        for (const Mask& mask : kEveryMask) {
          for (const auto& [sq, sk] : seqlens) {
            for (int64_t heads_kv : {16, 2, 1}) {  // MHA, GQA 8:1, MQA
              for (Layout layout : {Layout::bshd, Layout::bhsd}) {
                const Problem problem =
                    make_problem(2, 16, heads_kv, sq, sk, head_dim, head_dim, mask, dtype, layout);
                EXPECT_EQ(unsupported_reason(kernel.support, problem), "")
                    << kernel.name << " " << shape_string(problem);
              }
            }
          }
        }
        const Problem packed = make_problem(2, 4, 4, 113, 113, head_dim, head_dim,
                                            {MaskKind::causal}, dtype, Layout::qkv_packed);
        EXPECT_EQ(unsupported_reason(kernel.support, packed), "") << kernel.name;
      }
    }
  }
}

TEST(CudaTier1Tables, RefuseWhatIsOutsideWithAReason) {
  const Problem base = make_problem(1, 2, 2, 64, 64, 64, 64, {MaskKind::none}, DType::bf16);
  for (const Kernel& kernel : tier1_kernels()) {
    SCOPED_TRACE(kernel.name);
    Problem fp32 = base;
    fp32.input_dtype = fp32.output_dtype = fp32.p_dtype = DType::f32;
    EXPECT_NE(unsupported_reason(kernel.support, fp32).find("dtype fp32"), std::string::npos);
    Problem split = base;
    split.head_dim_v = 128;
    if (kernel.name == "cuda.flash1") {
      for (int64_t head_dim : {32, 96, 256}) {
        Problem other = base;
        other.head_dim_qk = other.head_dim_v = head_dim;
        EXPECT_NE(unsupported_reason(kernel.support, other).find("not instantiated"),
                  std::string::npos);
      }
      EXPECT_NE(unsupported_reason(kernel.support, split), "");
    } else {
      for (int64_t head_dim : {2, 32, 80, 96, 192, 256}) {
        Problem other = base;
        other.head_dim_qk = other.head_dim_v = head_dim;
        EXPECT_EQ(unsupported_reason(kernel.support, other), "") << head_dim;
      }
      EXPECT_EQ(unsupported_reason(kernel.support, split), "");
      Problem odd = base;
      odd.head_dim_qk = odd.head_dim_v = 33;
      EXPECT_EQ(unsupported_reason(kernel.support, odd), "head_dim 33 not a multiple of 2");
      Problem wide = base;
      wide.head_dim_qk = wide.head_dim_v = 258;
      EXPECT_EQ(unsupported_reason(kernel.support, wide), "head_dim 258 above the maximum 256");
    }
    Problem fp32_out = base;
    fp32_out.output_dtype = DType::f32;
    EXPECT_NE(unsupported_reason(kernel.support, fp32_out).find("output dtype"), std::string::npos);
  }
}

TEST(CudaTier1Tables, AreAllInTheRegistry) {
  for (const Kernel& kernel : tier1_kernels()) {
    const Kernel* registered = find_kernel(kernel.name);
    ASSERT_NE(registered, nullptr) << kernel.name << " is not in kernels/registry.cpp";
    EXPECT_EQ(registered->summary, kernel.summary);
  }
  EXPECT_TRUE(find_kernel("cuda.naive")->bytes_moved);
  EXPECT_TRUE(find_kernel("cuda.masked_outofplace")->bytes_moved);
  EXPECT_TRUE(find_kernel("cuda.masked_inplace")->bytes_moved);
  EXPECT_TRUE(find_kernel("cuda.masked_fused")->bytes_moved);
}

// ---- bytes models -------------------------------------------------------------------------------

// b=2, hq=4, hkv=2 (GQA 2:1), sq=3, sk=5, d=64, bf16, causal (top-left: row i sees keys 0..i).
// By hand:
//   q   = 2 * 3 * 4 * 64 * 2 B = 3072      k = v = 2 * 5 * 2 * 64 * 2 B = 2560 each
//   out = 3072                             lse = 4 B * (2 * 4 pairs) * 3 rows = 96
//   S   = 8 pairs * 3 * 5 = 120 scores -> 480 B per full pass over S (or P)
//   visible = (1 + 2 + 3) per (batch, head) * 8 pairs = 48 -> 192 B; masked = 72 -> 288 B
TEST(NaiveBytesModel, CausalGqaByHand) {
  const Problem problem = make_problem(2, 4, 2, 3, 5, 64, 64, {MaskKind::causal}, DType::bf16);
  ASSERT_EQ(visible_pairs(problem) * problem.heads_q, 48);

  const gpu::NaiveBytes naive = gpu::naive_bytes(problem, MaskStep::in_scores);
  EXPECT_EQ(naive.q, 3072);
  EXPECT_EQ(naive.k, 2560);
  EXPECT_EQ(naive.v, 2560);
  EXPECT_EQ(naive.scores_write, 480);
  EXPECT_EQ(naive.mask_read, 0);
  EXPECT_EQ(naive.mask_write, 0);
  EXPECT_EQ(naive.softmax_read, 480);
  EXPECT_EQ(naive.softmax_write, 480);
  EXPECT_EQ(naive.lse, 96);
  EXPECT_EQ(naive.output_read, 480);
  EXPECT_EQ(naive.out, 3072);
  // 3072 + 2560 + 2560 + 480 + 480 + 480 + 96 + 480 + 3072
  EXPECT_EQ(naive.total(), 13280);

  const gpu::NaiveBytes outofplace = gpu::naive_bytes(problem, MaskStep::out_of_place);
  EXPECT_EQ(outofplace.mask_read, 480);   // every score read
  EXPECT_EQ(outofplace.mask_write, 480);  // the whole copy written
  EXPECT_EQ(outofplace.softmax_read, 480);
  EXPECT_EQ(outofplace.total(), 13280 + 960);

  const gpu::NaiveBytes inplace = gpu::naive_bytes(problem, MaskStep::in_place);
  EXPECT_EQ(inplace.mask_read, 0);     // a predicate of the indices: nothing to read
  EXPECT_EQ(inplace.mask_write, 288);  // -inf over the 72 masked scores only
  EXPECT_EQ(inplace.total(), 13280 + 288);

  const gpu::NaiveBytes fused = gpu::naive_bytes(problem, MaskStep::fused);
  EXPECT_EQ(fused.mask_write, 0);
  EXPECT_EQ(fused.softmax_read, 192);  // the visible scores only
  EXPECT_EQ(fused.softmax_write, 480);
  EXPECT_EQ(fused.total(), 13280 - 480 + 192);

  // What Kernel::bytes_moved reports, and so what the harness divides by the copy bandwidth.
  EXPECT_EQ(cuda_naive_kernel().bytes_moved(problem), 13280);
  EXPECT_EQ(cuda_masked_outofplace_kernel().bytes_moved(problem), 14240);
  EXPECT_EQ(cuda_masked_inplace_kernel().bytes_moved(problem), 13568);
  EXPECT_EQ(cuda_masked_fused_kernel().bytes_moved(problem), 12992);
}

// b=2, hq=hkv=2, sq=4, sk=6, d=128, fp16, padding: key lengths ((b+1) * 6) / 3 = 2 and 4.
//   q = out = 2 * 4 * 2 * 128 * 2 B = 4096     k = v = 2 * 6 * 2 * 128 * 2 B = 6144
//   S = 4 pairs * 4 * 6 = 96 scores -> 384 B   lse = 4 B * 4 pairs * 4 rows = 64
//   visible = 2 heads * 4 rows * (2 + 4) = 48 -> 192 B; masked = 48 -> 192 B
TEST(NaiveBytesModel, PaddingByHand) {
  const Problem problem = make_problem(2, 2, 2, 4, 6, 128, 128, {MaskKind::padding}, DType::f16);
  const double base = 4096 + 6144 + 6144 + 4096 + 64;
  EXPECT_EQ(cuda_naive_kernel().bytes_moved(problem), base + 4 * 384);
  EXPECT_EQ(cuda_masked_outofplace_kernel().bytes_moved(problem), base + 6 * 384);
  EXPECT_EQ(cuda_masked_inplace_kernel().bytes_moved(problem), base + 4 * 384 + 192);
  EXPECT_EQ(cuda_masked_fused_kernel().bytes_moved(problem), base + 3 * 384 + 192);
}

// Without a mask, in place writes nothing and fused reads everything: both equal cuda.naive,
// and out of place costs two extra passes over S. The order the study is about holds for every
// mask: fused <= naive <= in place < out of place.
TEST(NaiveBytesModel, OrderOfTheVariants) {
  const Problem open = make_problem(2, 16, 16, 4096, 4096, 128, 128, {MaskKind::none}, DType::bf16);
  const double naive = cuda_naive_kernel().bytes_moved(open);
  const double scores = 2.0 * 16 * 4096 * 4096 * 4;
  EXPECT_EQ(cuda_masked_inplace_kernel().bytes_moved(open), naive);
  EXPECT_EQ(cuda_masked_fused_kernel().bytes_moved(open), naive);
  EXPECT_EQ(cuda_masked_outofplace_kernel().bytes_moved(open), naive + 2 * scores);
  for (const Mask& mask : kEveryMask) {
    const Problem problem = make_problem(2, 8, 2, 1000, 1200, 64, 64, mask, DType::f16);
    const double fused = cuda_masked_fused_kernel().bytes_moved(problem);
    const double base = cuda_naive_kernel().bytes_moved(problem);
    const double inplace = cuda_masked_inplace_kernel().bytes_moved(problem);
    const double outofplace = cuda_masked_outofplace_kernel().bytes_moved(problem);
    EXPECT_LE(fused, base) << mask_name(mask);
    EXPECT_LE(base, inplace) << mask_name(mask);
    EXPECT_LT(inplace, outofplace) << mask_name(mask);
  }
}

// ---- scratch and launches -----------------------------------------------------------------------

TEST(CudaTier1Scratch, NaiveIsQuadraticFlash1IsFlatInSeqlenK) {
  const Problem small = make_problem(2, 8, 2, 1024, 1024, 128, 128, {MaskKind::none}, DType::bf16);
  Problem twice = small;
  twice.seqlen_q = twice.seqlen_k = 2048;
  const size_t scores = size_t{2} * 8 * 1024 * 1024 * 4;  // b*hq*sq*sk fp32
  EXPECT_EQ(gpu::naive_scratch_bytes(small, MaskStep::in_scores), scores);
  EXPECT_EQ(gpu::naive_scratch_bytes(small, MaskStep::in_place), scores);
  EXPECT_EQ(gpu::naive_scratch_bytes(small, MaskStep::fused), scores);
  EXPECT_EQ(gpu::naive_scratch_bytes(small, MaskStep::out_of_place), 2 * scores);
  EXPECT_EQ(gpu::naive_scratch_bytes(twice, MaskStep::in_scores), 4 * scores);

  // O (dv floats), l and m per (batch, head, query row).
  EXPECT_EQ(gpu::flash1::scratch_bytes(small), size_t{2} * 8 * 1024 * (128 + 2) * 4);
  Problem long_keys = small;
  long_keys.seqlen_k = 65536;
  EXPECT_EQ(gpu::flash1::scratch_bytes(long_keys), gpu::flash1::scratch_bytes(small));
  EXPECT_EQ(gpu::flash1::scratch_bytes(twice), 2 * gpu::flash1::scratch_bytes(small));
}

TEST(CudaTier1Scratch, Flash1LaunchesOncePerKeyBlock) {
  Problem problem = make_problem(1, 1, 1, 1, 1, 64, 64, {MaskKind::none}, DType::f16);
  for (const auto& [seqlen_k, launches] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {17, 1}, {64, 1}, {65, 2}, {113, 2}, {1023, 16}, {1024, 16}, {8192, 128}}) {
    problem.seqlen_k = seqlen_k;
    EXPECT_EQ(gpu::flash1::launch_count(problem), launches) << "seqlen_k " << seqlen_k;
  }
}

// What each kernel declares about a forward (stored with every result, read by gpu-check's
// claims): the numbers GPU-CLAIMS.md states, worked out by hand for one shape. A declaration that
// drifted from the plan's own scratch and launches fails here and on `emu`
// (EmuDevice.EveryInHouseKernelsStoredExpectationIsWhatTheDeviceMeasured).
TEST(CudaTier1Scratch, EachKernelDeclaresTheScratchAndLaunchesOfItsForward) {
  const Problem problem =
      make_problem(2, 8, 2, 256, 1000, 64, 64, {MaskKind::causal_br}, DType::bf16);
  const int64_t scores = int64_t{2} * 8 * 256 * 1000 * 4;  // b*hq*sq*sk fp32
  const int64_t flash1_state = int64_t{2} * 8 * 256 * (64 + 2) * 4;
  const std::vector<std::pair<Kernel, ResourceExpectation>> declared = {
      {cuda_naive_kernel(), {scores, 3}},
      {cuda_masked_outofplace_kernel(), {2 * scores, 4}},
      {cuda_masked_inplace_kernel(), {scores, 4}},
      {cuda_masked_fused_kernel(), {scores, 3}},
      {cuda_flash1_kernel(), {flash1_state, 16}},  // ceil(1000 / 64) key blocks
      {cuda_flash2_kernel(), {0, 1}},
      {cuda_flash3_kernel(), {0, 1}},
  };
  for (const auto& [kernel, expected] : declared) {
    SCOPED_TRACE(kernel.name);
    const ResourceExpectation found = expected_resources(kernel, problem);
    EXPECT_EQ(found.extra_memory_bytes, expected.extra_memory_bytes);
    EXPECT_EQ(found.launches, expected.launches);
  }
  // The FP8 forwards declare their passes' launches: on e4m3 the V^T layout pass and the forward
  // (none before a forward that transposes V itself); on 16-bit inputs also the amax and quantize
  // passes, or the one pass of block scales.
  Problem fp8 = make_problem(1, 2, 2, 128, 128, 128, 128, {MaskKind::none}, DType::e4m3);
  fp8.output_dtype = DType::e4m3;
  Problem bf16 = fp8;
  bf16.input_dtype = bf16.output_dtype = DType::bf16;
  EXPECT_EQ(expected_resources(cuda_flash3_fp8_kernel(), fp8).launches, 2);
  EXPECT_EQ(expected_resources(cuda_flash3_fp8_ws_transpose_kernel(), fp8).launches, 1);
  EXPECT_EQ(expected_resources(cuda_flash3_fp8_kernel(), bf16).launches, 4);
  EXPECT_EQ(expected_resources(cuda_flash3_fp8_block_kernel(), bf16).launches, 3);
  EXPECT_FALSE(expected_resources(cuda_flash3_fp8_kernel(), fp8).extra_memory_bytes)
      << "the passes' scratch is not declared";
  // A closed library's engine chooses its launches: nothing declared.
  EXPECT_FALSE(expected_resources(cuda_naive_cublas_kernel(), problem).launches);
}

// ---- tile ranges --------------------------------------------------------------------------------

struct TileCase {
  Mask mask;
  int64_t batch, seqlen_q, seqlen_k;
};

// For every 64-row block and 64-key tile: a tile some row of the block sees is never skipped, and
// where every row of the block sees a key (ranges that move by at most one key per row), a tile
// no row sees is skipped — the hull is the union.
TEST(VisibleTiles, HullCoversEveryVisibleKeyOfTheBlock) {
  const int64_t block = gpu::flash1::kBlockQ;
  const int64_t tile = gpu::flash1::kBlockK;
  std::vector<TileCase> cases;
  for (const Mask& mask : kEveryMask) {
    for (const auto& [sq, sk] : std::vector<std::pair<int64_t, int64_t>>{{1, 1},
                                                                         {17, 17},
                                                                         {113, 113},
                                                                         {113, 203},
                                                                         {203, 113},
                                                                         {64, 17},
                                                                         {16, 1023},
                                                                         {1023, 1023}}) {
      cases.push_back({mask, 3, sq, sk});
    }
  }
  cases.push_back({{MaskKind::window, 0, 0}, 1, 300, 300});
  cases.push_back({{MaskKind::window, 255, 0}, 1, 1023, 1023});
  for (const TileCase& c : cases) {
    Problem problem =
        make_problem(c.batch, 1, 1, c.seqlen_q, c.seqlen_k, 64, 64, c.mask, DType::f16);
    for (int64_t b = 0; b < c.batch; ++b) {
      const int64_t key_length = problem.key_length(b);
      for (int64_t row0 = 0; row0 < c.seqlen_q; row0 += block) {
        const int64_t row_end = std::min(row0 + block, c.seqlen_q);
        const KeyRange hull =
            gpu::visible_keys_of_rows(c.mask.kind, c.mask.window_left, c.mask.window_right, row0,
                                      row_end, c.seqlen_q, c.seqlen_k, key_length);
        bool every_row_sees_a_key = true;
        for (int64_t key0 = 0; key0 < c.seqlen_k; key0 += tile) {
          const int64_t key_end = std::min(key0 + tile, c.seqlen_k);
          bool seen = false;
          for (int64_t row = row0; row < row_end; ++row) {
            const KeyRange keys = problem.visible(b, row);
            every_row_sees_a_key &= keys.size() > 0;
            seen |= std::max(keys.begin, key0) < std::min(keys.end, key_end);
          }
          const bool kept = gpu::overlaps(hull, key0, key_end);
          SCOPED_TRACE(mask_name(c.mask) + " sq=" + std::to_string(c.seqlen_q) +
                       " sk=" + std::to_string(c.seqlen_k) + " b=" + std::to_string(b) + " rows " +
                       std::to_string(row0) + " keys " + std::to_string(key0));
          if (seen) {
            EXPECT_TRUE(kept) << "a tile with visible keys would be skipped";
          }
          if (every_row_sees_a_key && !seen) {
            EXPECT_FALSE(kept) << "a dead tile is visited";
          }
        }
      }
    }
  }
}

// Causal at 1023 x 1023: 16 x 16 tiles, the 120 strictly above the diagonal skipped.
TEST(VisibleTiles, CausalSkipsTheUpperTriangle) {
  const int64_t n = 1023;
  int64_t visited = 0;
  for (int64_t row0 = 0; row0 < n; row0 += gpu::flash1::kBlockQ) {
    const KeyRange hull = gpu::visible_keys_of_rows(
        MaskKind::causal, -1, -1, row0, std::min<int64_t>(row0 + gpu::flash1::kBlockQ, n), n, n, n);
    for (int64_t key0 = 0; key0 < n; key0 += gpu::flash1::kBlockK) {
      visited += gpu::overlaps(hull, key0, std::min<int64_t>(key0 + gpu::flash1::kBlockK, n));
    }
  }
  EXPECT_EQ(visited, 16 * 17 / 2);
  EXPECT_EQ(gpu::tile_count(n, 64), 16);
  EXPECT_EQ(gpu::tile_count(1024, 64), 16);
  EXPECT_EQ(gpu::tile_count(1025, 64), 17);
}

}  // namespace
}  // namespace attnbench
