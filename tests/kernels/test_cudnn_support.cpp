// cudnn.sdpa, cudnn.sdpa_fp8 and cudnn.sdpa_fp8_quantized (and _incoherent) without a GPU: the
// mask mapping against visible_keys itself, the
// support tables' answers, cudnn-frontend's own validation of the graphs the adapter describes,
// and the version strings.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "kernels/cudnn/cudnn_kernels.h"
#include "kernels/cudnn/cudnn_support.h"
#include "kernels/cudnn/cudnn_versions.h"
#include "reference/mask.h"
#include "reference/problem.h"
#include "tests/support/problems.h"

namespace attnbench {
namespace {

constexpr int kAmpere = 80;
constexpr int kHopper = 90;

// What cuDNN keeps for one of the rows it is given, as its docs define the band: the diagonal
// of row r is key r (top-left) or r + seqlen_k - rows (bottom-right); the left bound B masks keys
// at or before diagonal - B, the right bound R keys beyond diagonal + R; padding keys from the
// batch's length on.
KeyRange cudnn_keeps(const CudnnMaskMapping& mapping, int64_t row, int64_t rows, int64_t seqlen_k,
                     int64_t key_length) {
  const int64_t diagonal =
      mapping.diagonal == CudnnDiagonal::top_left ? row : row + seqlen_k - rows;
  int64_t begin = 0;
  int64_t end = seqlen_k;
  if (mapping.left_bound) begin = std::max(begin, diagonal - *mapping.left_bound + 1);
  if (mapping.right_bound) end = std::min(end, diagonal + *mapping.right_bound + 1);
  if (mapping.padding) end = std::min(end, key_length);
  return {clamp_index(begin, 0, seqlen_k), clamp_index(end, 0, seqlen_k)};
}

std::vector<Mask> every_mask() {
  std::vector<Mask> masks = {{MaskKind::none, -1, -1},
                             {MaskKind::causal, -1, -1},
                             {MaskKind::causal_br, -1, -1},
                             {MaskKind::padding, -1, -1}};
  for (int64_t left : {-1, 0, 1, 4, 8}) {
    for (int64_t right : {-1, 0, 1, 4, 8}) masks.push_back({MaskKind::window, left, right});
  }
  return masks;
}

// Every row of every mask on every shape: the rows the adapter writes as empty see no key, and
// cuDNN's band over the remaining rows keeps exactly the reference's keys. Where the mapping
// declines, the reason is the one documented limit of each variant.
void check_mapping_reproduces_masks(CudnnVariant variant) {
  int declined = 0;
  int mapped = 0;
  for (int64_t sq : {1, 5, 17, 64}) {
    for (int64_t sk : {1, 5, 17, 64}) {
      for (const Mask& mask : every_mask()) {
        const Problem p = make_problem(3, 1, 1, sq, sk, 64, 64, mask);
        SCOPED_TRACE("sq=" + std::to_string(sq) + " sk=" + std::to_string(sk) +
                     " mask=" + mask_name(mask));
        CudnnMaskMapping mapping;
        const std::string reason = map_mask(p, variant, mapping);
        if (!reason.empty()) {
          ++declined;
          continue;
        }
        ++mapped;
        const int64_t rows = sq - mapping.skipped_rows;
        ASSERT_GE(rows, 0);
        if (variant == CudnnVariant::fp8) {
          EXPECT_EQ(mapping.diagonal, CudnnDiagonal::top_left);
          EXPECT_FALSE(mapping.left_bound.has_value());
          EXPECT_TRUE(!mapping.right_bound || *mapping.right_bound == 0);
        }
        // cuDNN's own rules: a bottom-right diagonal or a left bound only with rows <= keys.
        const bool needs_rows_within_keys =
            mapping.diagonal == CudnnDiagonal::bottom_right || mapping.left_bound.has_value();
        EXPECT_TRUE(!needs_rows_within_keys || rows <= sk);
        EXPECT_GE(mapping.left_bound.value_or(1), 1);
        EXPECT_GE(mapping.right_bound.value_or(0), 0);
        for (int64_t b = 0; b < p.batch; ++b) {
          for (int64_t i = 0; i < sq; ++i) {
            const KeyRange expected = p.visible(b, i);
            if (i < mapping.skipped_rows) {
              EXPECT_EQ(expected.size(), 0) << "row " << i << " written as empty sees keys";
              continue;
            }
            const KeyRange kept =
                cudnn_keeps(mapping, i - mapping.skipped_rows, rows, sk, p.key_length(b));
            EXPECT_EQ(kept.size(), expected.size()) << "batch " << b << " row " << i;
            if (expected.size() > 0) {
              EXPECT_EQ(kept.begin, expected.begin) << "batch " << b << " row " << i;
              EXPECT_EQ(kept.end, expected.end) << "batch " << b << " row " << i;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(mapped, 0);
  EXPECT_GT(declined, 0);  // both variants have documented limits inside this sweep
}

TEST(CudnnMaskMapping, ReproducesEveryMaskOnEveryShape) {
  check_mapping_reproduces_masks(CudnnVariant::fp16_bf16);
}

TEST(CudnnMaskMapping, Fp8UsesOnlyTheTopLeftCausalDiagonal) {
  check_mapping_reproduces_masks(CudnnVariant::fp8);
}

TEST(CudnnMaskMapping, WindowLeftBoundCountsTheDiagonal) {
  EXPECT_EQ(cudnn_left_bound(0), 1);  // window(0, 0): the diagonal alone
  EXPECT_EQ(cudnn_left_bound(255), 256);

  CudnnMaskMapping mapping;
  EXPECT_EQ(map_mask(parsed_shape("b=1,hq=1,s=17,d=64,dtype=bf16,mask=window(8,4)"),
                     CudnnVariant::fp16_bf16, mapping),
            "");
  EXPECT_EQ(mapping.diagonal, CudnnDiagonal::top_left);  // square: one diagonal
  EXPECT_EQ(mapping.left_bound, 9);
  EXPECT_EQ(mapping.right_bound, 4);
  EXPECT_EQ(mapping.skipped_rows, 0);

  // Decode against a long cache: the band sits at the bottom-right.
  EXPECT_EQ(map_mask(parsed_shape("b=2,hq=4,hkv=1,sq=1,sk=1023,d=64,dtype=bf16,mask=window(127,0)"),
                     CudnnVariant::fp16_bf16, mapping),
            "");
  EXPECT_EQ(mapping.diagonal, CudnnDiagonal::bottom_right);
  EXPECT_EQ(mapping.left_bound, 128);
  EXPECT_EQ(mapping.right_bound, 0);
}

TEST(CudnnMaskMapping, RowsAboveABottomRightDiagonalAreSlicedOff) {
  CudnnMaskMapping mapping;
  // causal_br with 203 queries on 113 keys: the first 90 rows see nothing.
  EXPECT_EQ(map_mask(parsed_shape("b=2,hq=2,sq=203,sk=113,d=64,dtype=fp16,mask=causal_br"),
                     CudnnVariant::fp16_bf16, mapping),
            "");
  EXPECT_EQ(mapping.skipped_rows, 90);
  EXPECT_EQ(mapping.diagonal, CudnnDiagonal::top_left);
  EXPECT_EQ(mapping.right_bound, 0);
  EXPECT_EQ(
      batches_without_keys(parsed_shape("b=2,hq=2,sq=203,sk=113,d=64,dtype=fp16,mask=causal_br")),
      0);

  // A left bound with more rows than keys is the one thing cuDNN's band cannot do.
  const std::string reason =
      map_mask(parsed_shape("b=2,hq=2,sq=203,sk=113,d=64,dtype=fp16,mask=window(32,8)"),
               CudnnVariant::fp16_bf16, mapping);
  EXPECT_NE(reason.find("left bound needs seqlen_q <= seqlen_k"), std::string::npos) << reason;
}

TEST(CudnnMaskMapping, PaddingFindsTheBatchesWithoutKeys) {
  // seqlen 1, batch 2: key lengths 1/3 and 2/3 round to 0.
  EXPECT_EQ(batches_without_keys(parsed_shape("b=2,hq=2,s=1,d=64,dtype=bf16,mask=padding")), 2);
  EXPECT_EQ(batches_without_keys(parsed_shape("b=2,hq=2,s=113,d=64,dtype=bf16,mask=padding")), 0);
  EXPECT_EQ(batches_without_keys(parsed_shape("b=2,hq=2,s=1,d=64,dtype=bf16,mask=causal")), 0);
}

// The table's generic answer first, then the limits its fields cannot state.
std::string answer(const Kernel& kernel, CudnnVariant variant, const std::string& shape,
                   int sm_version) {
  const Problem p = parsed_shape(shape);
  if (std::string reason = unsupported_reason(kernel.support, p); !reason.empty()) return reason;
  return cudnn_limits_reason(p, variant, sm_version);
}

TEST(CudnnSupportTable, AnswersRepresentativeProblems) {
  const Kernel sdpa = cudnn_sdpa_kernel();
  const auto half = [&sdpa](const std::string& shape, int sm = kHopper) {
    return answer(sdpa, CudnnVariant::fp16_bf16, shape, sm);
  };
  EXPECT_EQ(sdpa.name, "cudnn.sdpa");
  EXPECT_TRUE(sdpa.returns_lse);
  EXPECT_EQ(half("b=1,hq=16,s=8192,d=128,dtype=bf16"), "");
  EXPECT_EQ(half("b=1,hq=16,hkv=2,s=8192,d=128,dtype=fp16,mask=causal_br"), "");
  EXPECT_EQ(half("b=2,hq=2,s=113,d=96,dtype=bf16,layout=qkv_packed"), "");
  EXPECT_EQ(half("b=2,hq=2,s=113,d=256,dtype=bf16,layout=bhsd", kAmpere), "");
  EXPECT_EQ(half("b=1,hq=2,s=113,dqk=192,dv=128,dtype=bf16,mask=causal_br"), "");
  EXPECT_EQ(half("b=2,hq=2,sq=203,sk=113,d=64,dtype=bf16,mask=padding"), "");
  EXPECT_EQ(half("b=1,hq=2,sq=64,sk=17,d=64,dtype=bf16,mask=window(4,0)"), "");

  EXPECT_EQ(half("b=1,hq=2,s=113,d=64,dtype=fp32"), "dtype fp32 not supported (fp16, bf16)");
  EXPECT_NE(half("b=1,hq=2,s=113,d=100,dtype=bf16").find("head_dim 100 not instantiated"),
            std::string::npos);
  EXPECT_NE(half("b=1,hq=2,s=113,d=512,dtype=bf16").find("head_dim 512 not instantiated"),
            std::string::npos);
  EXPECT_EQ(half("b=1,hq=2,s=113,dqk=64,dv=128,dtype=bf16"),
            "unsupported: head_dim_qk 64 != head_dim_v 128: cuDNN has only 192/128");
  EXPECT_EQ(half("b=1,hq=2,s=113,dqk=192,dv=128,dtype=bf16", kAmpere),
            "unsupported: head dims 192/128 need sm_90 or newer in cuDNN");
  EXPECT_EQ(half("b=1,hq=2,sq=1,sk=1023,d=256,dtype=bf16", kAmpere),
            "unsupported: cuDNN's sm_80 decode (seqlen_q 1) takes head dims up to 128");
  EXPECT_EQ(half("b=1,hq=2,sq=1,sk=1023,d=256,dtype=bf16", kHopper), "");
  EXPECT_EQ(half("b=1,hq=2,s=113,d=64,dtype=bf16", 75),
            "unsupported: cuDNN's fp16/bf16 attention needs sm_80 or newer; device is sm_75");

  const Kernel fp8 = cudnn_sdpa_fp8_kernel();
  const auto eight = [&fp8](const std::string& shape, int sm = kHopper) {
    return answer(fp8, CudnnVariant::fp8, shape, sm);
  };
  EXPECT_EQ(fp8.name, "cudnn.sdpa_fp8");
  EXPECT_EQ(eight("b=1,hq=16,s=8192,d=128,dtype=e4m3,out=e4m3,fp8_scaling=per_tensor"), "");
  EXPECT_EQ(eight("b=2,hq=2,s=113,d=64,dtype=e4m3,out=e4m3,mask=causal_br"), "");
  EXPECT_EQ(eight("b=2,hq=2,sq=203,sk=113,d=64,dtype=e4m3,out=e4m3,mask=causal_br"), "");
  EXPECT_EQ(eight("b=1,hq=16,s=1024,d=128,dtype=e4m3,out=bf16"),
            "output dtype bf16 not supported for e4m3 input");
  EXPECT_NE(eight("b=1,hq=2,s=113,d=64,dtype=e4m3,out=e4m3,mask=window(8,0)").find("mask window"),
            std::string::npos);
  EXPECT_NE(eight("b=1,hq=2,s=113,d=72,dtype=e4m3,out=e4m3").find("head_dim 72 not instantiated"),
            std::string::npos);
  EXPECT_NE(eight("b=2,hq=2,sq=113,sk=203,d=128,dtype=e4m3,out=e4m3,mask=causal_br")
                .find("only on Blackwell"),
            std::string::npos);
  EXPECT_EQ(eight("b=1,hq=2,s=113,d=64,dtype=e4m3,out=e4m3", kAmpere),
            "unsupported: cuDNN's FP8 attention needs sm_90 or newer; device is sm_80");

  // cuDNN's FP8 forward behind the passes: 16-bit in and out at d 128, cuDNN's FP8 masks, and
  // judged by the envelope around a base with an e4m3 output (incoherent for _incoherent).
  for (const Kernel& quantized :
       {cudnn_sdpa_fp8_quantized_kernel(), cudnn_sdpa_fp8_incoherent_kernel()}) {
    SCOPED_TRACE(quantized.name);
    const auto passes = [&quantized](const std::string& shape, int sm = kHopper) {
      return answer(quantized, CudnnVariant::fp8, shape, sm);
    };
    EXPECT_EQ(passes("b=1,hq=16,s=8192,d=128,dtype=bf16"), "");
    EXPECT_EQ(passes("b=2,hq=4,hkv=1,sq=203,sk=113,d=128,dtype=fp16,mask=causal_br"), "");
    EXPECT_EQ(passes("b=2,hq=2,s=113,d=128,dtype=bf16,mask=padding,layout=qkv_packed"), "");
    EXPECT_EQ(passes("b=1,hq=2,s=113,d=128,dtype=e4m3,out=e4m3"),
              "dtype e4m3 not supported (fp16, bf16)");
    EXPECT_NE(passes("b=1,hq=2,s=113,d=64,dtype=bf16").find("head_dim 64 not instantiated (128)"),
              std::string::npos);
    EXPECT_NE(passes("b=1,hq=2,s=113,d=128,dtype=bf16,mask=window(8,0)").find("mask window"),
              std::string::npos);
    ASSERT_TRUE(quantized.fp8_envelope_base.has_value());
    EXPECT_FALSE(quantized.fp8_recipe.has_value()) << "cuDNN's recipe is closed";
    EXPECT_TRUE(quantized.fp8_envelope_base->e4m3_output);
    EXPECT_EQ(quantized.fp8_envelope_base->incoherent,
              quantized.name == "cudnn.sdpa_fp8_incoherent");
    EXPECT_EQ(quantized.correctness_suite, "hopper-fp8");
  }
}

// A frontend that asks the device for something even when told the SM version cannot validate
// on a machine without a GPU.
bool needed_a_gpu(const std::string& result) {
  return result.find("cuda_get_device") != std::string::npos ||
         result.find("CUDA driver") != std::string::npos;
}

// cudnn-frontend validates a graph on the host once it knows the target SM: the graphs the
// adapter describes for problems inside the tables pass its checks, and one outside them fails
// with the frontend's own words. (Lowering and planning need a device: the gpu tests do those.)
TEST(CudnnGraph, FrontendAcceptsTheGraphsInsideTheTables) {
  const std::vector<std::string> half_shapes = {
      "b=1,hq=16,s=8192,d=128,dtype=bf16",
      "b=2,hq=2,s=17,d=64,dtype=fp16,mask=causal",
      "b=2,hq=2,s=113,d=64,dtype=bf16,mask=window(8,4)",
      "b=2,hq=2,sq=113,sk=203,d=64,dtype=fp16,mask=causal_br",
      "b=2,hq=2,sq=203,sk=113,d=64,dtype=fp16,mask=causal_br",
      "b=2,hq=2,sq=203,sk=113,d=64,dtype=bf16,mask=causal",
      "b=1,hq=2,sq=64,sk=17,d=64,dtype=bf16,mask=window(0,0)",
      "b=2,hq=4,hkv=1,sq=1,sk=1023,d=64,dtype=bf16,mask=window(127,0)",
      "b=2,hq=2,sq=203,sk=113,d=64,dtype=bf16,mask=padding",
      "b=1,hq=16,hkv=2,s=113,d=64,dtype=bf16,mask=causal_br",
      "b=2,hq=2,s=113,d=64,dtype=fp16,layout=qkv_packed",
      "b=2,hq=2,s=113,d=256,dtype=bf16,layout=bhsd",
      "b=1,hq=2,s=113,dqk=192,dv=128,dtype=bf16,mask=causal_br",
  };
  for (const std::string& shape : half_shapes) {
    for (int sm : {kAmpere, kHopper}) {
      if (!cudnn_limits_reason(parsed_shape(shape), CudnnVariant::fp16_bf16, sm).empty()) continue;
      const std::string result =
          validate_graph_on_host(parsed_shape(shape), CudnnVariant::fp16_bf16, sm);
      if (needed_a_gpu(result)) GTEST_SKIP() << "this cudnn-frontend needs a GPU: " << result;
      EXPECT_EQ(result, "") << shape << " on sm_" << sm;
    }
  }
  // The backward graphs (cudnn.sdpa's and cudnn.sdpa_deterministic's) of the same shapes.
  for (const std::string& shape : half_shapes) {
    for (int sm : {kAmpere, kHopper}) {
      Problem backward = parsed_shape(shape);
      backward.pass = Pass::bwd;
      if (!cudnn_limits_reason(backward, CudnnVariant::fp16_bf16, sm).empty()) continue;
      const std::string result = validate_graph_on_host(backward, CudnnVariant::fp16_bf16, sm);
      if (needed_a_gpu(result)) GTEST_SKIP() << "this cudnn-frontend needs a GPU: " << result;
      EXPECT_EQ(result, "") << shape << ",pass=bwd on sm_" << sm;
    }
  }
  const std::vector<std::string> fp8_shapes = {
      "b=1,hq=16,s=1024,d=128,dtype=e4m3,out=e4m3,fp8_scaling=per_tensor",
      "b=2,hq=2,s=113,d=64,dtype=e4m3,out=e4m3,mask=causal_br",
      "b=2,hq=2,sq=203,sk=113,d=64,dtype=e4m3,out=e4m3,mask=causal_br",
      "b=2,hq=4,hkv=1,s=113,d=128,dtype=e4m3,out=e4m3,mask=padding,layout=bhsd",
  };
  for (const std::string& shape : fp8_shapes) {
    EXPECT_EQ(validate_graph_on_host(parsed_shape(shape), CudnnVariant::fp8, kHopper), "") << shape;
  }
  // cudnn.sdpa_fp8_quantized's graph: the quantize pass's packed e4m3 copies of 16-bit inputs in
  // any layout, an e4m3 output for the dequantize pass.
  const std::vector<std::string> quantized_shapes = {
      "b=1,hq=16,s=1024,d=128,dtype=bf16",
      "b=2,hq=4,hkv=1,sq=203,sk=113,d=128,dtype=fp16,mask=causal_br",
      "b=2,hq=2,s=113,d=128,dtype=bf16,mask=padding,layout=qkv_packed",
  };
  for (const std::string& shape : quantized_shapes) {
    EXPECT_EQ(validate_graph_on_host(parsed_shape(shape), CudnnVariant::fp8, kHopper,
                                     /*quantized=*/true),
              "")
        << shape;
  }
}

TEST(CudnnGraph, FrontendRefusesWhatTheTableExcludes) {
  // Head dim 72 is outside the FP8 table (multiples of 16); the frontend says so itself.
  const std::string result = validate_graph_on_host(
      parsed_shape("b=1,hq=2,s=113,d=72,dtype=e4m3,out=e4m3"), CudnnVariant::fp8, kHopper);
  if (needed_a_gpu(result)) GTEST_SKIP() << "this cudnn-frontend needs a GPU: " << result;
  EXPECT_EQ(result.rfind("cudnn: validate: ", 0), 0u) << result;
  EXPECT_NE(result.find("multiple of 16"), std::string::npos) << result;
}

TEST(CudnnVersions, AreDottedTriples) {
  const std::regex dotted(R"(\d+\.\d+\.\d+)");
  EXPECT_TRUE(std::regex_match(cudnn_version_compiled(), dotted)) << cudnn_version_compiled();
  EXPECT_TRUE(std::regex_match(cudnn_version_loaded(), dotted)) << cudnn_version_loaded();
  EXPECT_TRUE(std::regex_match(cudnn_frontend_version(), dotted)) << cudnn_frontend_version();
  // Compiled against cuDNN 9 and loading a cuDNN 9: the backend API is stable within a major.
  EXPECT_EQ(cudnn_version_compiled().substr(0, 2), "9.");
  EXPECT_EQ(cudnn_version_loaded().substr(0, 2), "9.");
}

}  // namespace
}  // namespace attnbench
