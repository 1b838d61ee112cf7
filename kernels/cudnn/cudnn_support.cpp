#include "kernels/cudnn/cudnn_support.h"

#include <algorithm>
#include <string>
#include <vector>

namespace attnbench {

namespace {

constexpr int64_t kMaxHeadDim = 256;
// Head dims step by the 16 bytes cuDNN's kernels load per vector: 8 fp16/bf16 or 16 fp8 elements.
constexpr int64_t kHalfHeadDimStep = 8;
constexpr int64_t kFp8HeadDimStep = 16;
// The FP8 passes before and after cuDNN's forward on 16-bit inputs (flash3_fp8_launch.h) are
// instantiated at d 128.
constexpr int64_t kQuantizedHeadDim = 128;
// The one unequal pair cuDNN documents (DeepSeek's MLA shapes), on Hopper and newer.
constexpr int64_t kWideQkHeadDim = 192;
constexpr int64_t kNarrowVHeadDim = 128;
constexpr int kAmpereSm = 80;
constexpr int kHopperSm = 90;
// cuDNN's decode engines on sm_80 (seqlen_q = 1) stop at head dim 128.
constexpr int64_t kAmpereDecodeMaxHeadDim = 128;

std::vector<int64_t> head_dims_by(int64_t step) {
  std::vector<int64_t> dims;
  for (int64_t dim = step; dim <= kMaxHeadDim; dim += step) dims.push_back(dim);
  return dims;
}

// A band of keys around the bottom-right diagonal (causal_br is (-1, 0)); -1 is unbounded.
std::string map_band(const Problem& problem, int64_t left, int64_t right, CudnnVariant variant,
                     CudnnMaskMapping& mapping) {
  if (left < 0 && right < 0) return {};  // no bound at all: every key
  const int64_t sq = problem.seqlen_q;
  const int64_t sk = problem.seqlen_k;
  // Row i's band ends at key i + (sk - sq) + right: negative for the first sq - sk - right rows.
  mapping.skipped_rows = right >= 0 ? std::max<int64_t>(0, sq - sk - right) : 0;
  const int64_t rows = sq - mapping.skipped_rows;
  const int64_t offset = sk - rows;  // where the bottom-right diagonal starts for those rows
  if (offset >= 0) {
    if (variant == CudnnVariant::fp8) {
      if (left >= 0) return "cuDNN's FP8 attention has no sliding window";
      if (offset + right != 0) {
        return "causal_br with seqlen_q < seqlen_k needs a bottom-right diagonal, which cuDNN's "
               "FP8 attention has only on Blackwell";
      }
      mapping.right_bound = 0;
      return {};
    }
    // A square block of rows has one diagonal; top-left is cuDNN's common causal path.
    mapping.diagonal = offset == 0 ? CudnnDiagonal::top_left : CudnnDiagonal::bottom_right;
    if (left >= 0) mapping.left_bound = cudnn_left_bound(left);
    if (right >= 0) mapping.right_bound = right;
    return {};
  }
  // More rows than keys remain: right > 0 with seqlen_q > seqlen_k, or no right bound.
  if (left >= 0) {
    return "a window with a left bound needs seqlen_q <= seqlen_k in cuDNN (here " +
           std::to_string(rows) + " rows see keys, " + std::to_string(sk) + " keys)";
  }
  // Only a right bound: anchored top-left, row i keeps j <= i + offset + right (>= 0 here).
  const int64_t right_bound = offset + right;
  if (variant == CudnnVariant::fp8 && right_bound != 0) {
    return "cuDNN's FP8 attention has only the causal band (right bound 0)";
  }
  mapping.right_bound = right_bound;
  return {};
}

std::string unsupported(const std::string& reason) { return "unsupported: " + reason; }

}  // namespace

std::string map_mask(const Problem& problem, CudnnVariant variant, CudnnMaskMapping& mapping) {
  mapping = CudnnMaskMapping{};
  switch (problem.mask.kind) {
    case MaskKind::none:
      return {};
    case MaskKind::causal:
      mapping.right_bound = 0;
      return {};
    case MaskKind::causal_br:
      return map_band(problem, -1, 0, variant, mapping);
    case MaskKind::window:
      return map_band(problem, problem.mask.window_left, problem.mask.window_right, variant,
                      mapping);
    case MaskKind::padding:
      mapping.padding = true;
      return {};
  }
  return "unknown mask";
}

int64_t batches_without_keys(const Problem& problem) {
  if (problem.mask.kind != MaskKind::padding) return 0;
  int64_t count = 0;
  while (count < problem.batch && problem.key_length(count) == 0) ++count;
  return count;
}

SupportTable cudnn_sdpa_support_table() {
  SupportTable table;
  table.input_dtypes = {DType::f16, DType::bf16};
  table.head_dims = head_dims_by(kHalfHeadDimStep);
  table.separate_v_dim = true;
  table.masks = {MaskKind::none, MaskKind::causal, MaskKind::causal_br, MaskKind::window,
                 MaskKind::padding};
  table.layouts = {Layout::bshd, Layout::bhsd, Layout::qkv_packed};
  table.gqa = true;
  table.archs = {"sm_80", "sm_90"};
  table.notes =
      "cuDNN's limits: head_dim_qk != head_dim_v only as 192/128 on sm_90; sm_80 decode "
      "(seqlen_q 1) up to head dim 128; a window with a left bound needs seqlen_q <= seqlen_k "
      "once the rows above the band are dropped; window left L maps to cuDNN's left bound L + 1";
  return table;
}

SupportTable cudnn_sdpa_fp8_support_table() {
  SupportTable table;
  table.input_dtypes = {DType::e4m3};
  table.head_dims = head_dims_by(kFp8HeadDimStep);
  table.separate_v_dim = true;
  table.masks = {MaskKind::none, MaskKind::causal, MaskKind::causal_br, MaskKind::padding};
  table.layouts = {Layout::bshd, Layout::bhsd, Layout::qkv_packed};
  table.gqa = true;
  table.archs = {"sm_90"};
  table.notes =
      "e4m3 in and out (cuDNN writes FP8 on Hopper), per-tensor descales, P scaled by 256; "
      "cuDNN's limits: head_dim_qk != head_dim_v only as 192/128; causal_br only with "
      "seqlen_q >= seqlen_k (Hopper's FP8 attention has the top-left diagonal alone)";
  return table;
}

SupportTable cudnn_sdpa_fp8_quantized_support_table(bool incoherent) {
  SupportTable table = cudnn_sdpa_fp8_support_table();
  table.input_dtypes = {DType::f16, DType::bf16};
  table.head_dims = {kQuantizedHeadDim};
  table.separate_v_dim = false;
  table.notes =
      std::string(
          "fp16/bf16 in and out; the timed forward includes attnbench's passes: an amax "
          "pass, a pass ") +
      (incoherent ? "rotating Q and K by (1/sqrt(d)) H diag(s) and quantizing Q, K and V"
                  : "quantizing Q, K and V") +
      " to packed e4m3 (per-tensor scales), cuDNN's FP8 forward (P scaled by 256, its e4m3 output "
      "at V's scale), and a pass dequantizing that output; d 128 (the passes' instantiation); "
      "cuDNN's limits as cudnn.sdpa_fp8's: causal_br only with seqlen_q >= seqlen_k";
  return table;
}

std::string cudnn_limits_reason(const Problem& problem, CudnnVariant variant, int sm_version) {
  const bool known_arch = sm_version > 0;
  const int minimum_sm = variant == CudnnVariant::fp8 ? kHopperSm : kAmpereSm;
  if (known_arch && sm_version < minimum_sm) {
    return unsupported(std::string("cuDNN's ") +
                       (variant == CudnnVariant::fp8 ? "FP8" : "fp16/bf16") +
                       " attention needs sm_" + std::to_string(minimum_sm) +
                       " or newer; device is sm_" + std::to_string(sm_version));
  }
  const int64_t dqk = problem.head_dim_qk;
  const int64_t dv = problem.head_dim_v;
  if (dqk != dv) {
    if (dqk != kWideQkHeadDim || dv != kNarrowVHeadDim) {
      return unsupported("head_dim_qk " + std::to_string(dqk) + " != head_dim_v " +
                         std::to_string(dv) + ": cuDNN has only 192/128");
    }
    if (known_arch && sm_version < kHopperSm) {
      return unsupported("head dims 192/128 need sm_90 or newer in cuDNN");
    }
  }
  if (variant == CudnnVariant::fp16_bf16 && known_arch && sm_version < kHopperSm &&
      problem.seqlen_q == 1 && std::max(dqk, dv) > kAmpereDecodeMaxHeadDim) {
    return unsupported("cuDNN's sm_80 decode (seqlen_q 1) takes head dims up to 128");
  }
  // The frontend's own check (host validation, cudnn-frontend 1.x, backend 9.19).
  if (problem.has_backward() && known_arch && sm_version < kHopperSm &&
      std::max(dqk, dv) > kAmpereDecodeMaxHeadDim) {
    return unsupported("cuDNN's backward on sm_80 takes head dims up to 128");
  }
  CudnnMaskMapping mapping;
  if (std::string reason = map_mask(problem, variant, mapping); !reason.empty()) {
    return unsupported(reason);
  }
  return {};
}

}  // namespace attnbench
