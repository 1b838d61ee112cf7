// What cuDNN's fused attention accepts, as attnbench states it: the support tables of cudnn.sdpa
// and cudnn.sdpa_fp8, the limits those tables' fields cannot state, and how attnbench's masks map
// onto cuDNN's diagonal band. Plain C++ without cuDNN's headers, so the CPU tests check all of it.
//
// Sources (cuDNN backend 9.19 here, newer on GPU hosts): the SDPA support matrix of the cuDNN
// frontend docs ("Attention", written for backend 9.18.1) and the frontend's own checks
// (cudnn_frontend/node/sdpa_support_surface.h, 1.32.0), which encode the same rules per version:
//   fp16/bf16  sm_80+; head dims multiples of 8 up to 256 (sm_80 decode, seqlen_q = 1: up to 128);
//              d_qk != d_v only as 192/128 (Hopper's row of the matrix); MHA/GQA/MQA; any strides;
//              masks: causal (top-left or bottom-right diagonal), sliding window (left/right
//              bounds), padding (per-batch seq_len tensors); a bottom-right diagonal or a left
//              bound needs seqlen_q <= seqlen_k (without padding). The backward: the same, head
//              dims up to 128 on sm_80, Stats packed (b, h, s) below backend 9.26.
//   fp8 e4m3   sm_90+; head dims multiples of 16 up to 256; output FP8 on Hopper (fp16/bf16
//              outputs are Blackwell-only); masks: causal top-left and padding (bottom-right is
//              Blackwell-only); per-tensor descale/scale factors and amax outputs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kernels/kernel.h"

namespace attnbench {

enum class CudnnVariant : uint8_t { fp16_bf16, fp8 };

// cuDNN anchors the diagonal of a causal or banded mask at the top-left corner of the score
// matrix (query i's diagonal is key i) or at the bottom-right (key i + seqlen_k - seqlen_q).
enum class CudnnDiagonal : uint8_t { top_left, bottom_right };

// One of attnbench's masks as cuDNN's attributes, on the rows cuDNN is given.
struct CudnnMaskMapping {
  // Leading query rows that see no key (a bottom-right band when seqlen_q > seqlen_k): cuDNN gets
  // rows [skipped_rows, seqlen_q) only, as its docs advise ("virtually slice the Q tensor"), and
  // the adapter writes these rows itself (out 0, LSE -inf).
  int64_t skipped_rows = 0;
  CudnnDiagonal diagonal = CudnnDiagonal::top_left;
  std::optional<int64_t> left_bound;   // diagonal_band_left_bound
  std::optional<int64_t> right_bound;  // diagonal_band_right_bound (0: causal)
  bool padding = false;                // padding mask with seq_len_q / seq_len_kv tensors
};

// FlashAttention's window keeps keys j >= diagonal - L; cuDNN's left bound B masks the keys at or
// before diagonal - B, so it counts the diagonal itself: B = L + 1. Right bounds agree (R = R).
constexpr int64_t cudnn_left_bound(int64_t window_left) { return window_left + 1; }

// Fills `mapping` and returns "" when cuDNN can compute the problem's mask; otherwise the reason.
// causal_br is window(-1, 0); the rows above a bottom-right diagonal are sliced off first, so what
// reaches cuDNN has seqlen_q <= seqlen_k or a top-left diagonal (equal when the rows are square).
std::string map_mask(const Problem& problem, CudnnVariant variant, CudnnMaskMapping& mapping);

// Batches [0, n) whose padding leaves no key (padding_key_length rounds to 0): cuDNN skips them,
// so the adapter writes their rows.
int64_t batches_without_keys(const Problem& problem);

SupportTable cudnn_sdpa_support_table();
SupportTable cudnn_sdpa_fp8_support_table();
// cudnn.sdpa_fp8_quantized and cudnn.sdpa_fp8_incoherent: cuDNN's FP8 forward behind attnbench's
// passes on fp16/bf16 inputs (quantize Q, K, V to e4m3, dequantize the e4m3 output), at the head
// dim the passes are instantiated for; `incoherent` rotates Q and K first.
SupportTable cudnn_sdpa_fp8_quantized_support_table(bool incoherent);

// The limits the tables' fields cannot state: the one unequal head-dim pair, the sm_80 decode
// head dims, masks whose rows cuDNN cannot align, the arch. Empty when none applies; otherwise
// "unsupported: <reason>". `sm_version` is the device's (80, 90, ...), 0 when not known.
std::string cudnn_limits_reason(const Problem& problem, CudnnVariant variant, int sm_version);

}  // namespace attnbench
