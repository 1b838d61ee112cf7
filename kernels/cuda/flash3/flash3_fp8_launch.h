// cuda.flash3_fp8's shapes and launch function (kernels/cuda/flash3/flash3_fp8_kernel.cuh), for
// the plan (flash3_fp8.cpp) and the tests: host code, no device code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/common/cuda_api.h"
#include "kernels/cuda/flash3/flash3_launch.h"
#include "kernels/cuda/flash3/flash3_traits.h"
#include "kernels/kernel.h"
#include "reference/mask.h"  // ATTNBENCH_HOST_DEVICE
#include "reference/status.h"

namespace attnbench::flash3 {

// One e4m3 wgmma k-step: 32 elements, 32 bytes of a K-major row.
constexpr int kFp8StepElements = 32;
constexpr int kFp8StepBytes = 32;
// P is scaled by 2^8 before its rounding to e4m3 (the recipe's p_max_offset 8): its largest
// value 256, inside e4m3's 448; the output divides it out.
constexpr int kFp8PMaxOffset = 8;
constexpr float kFp8PScale = static_cast<float>(1 << kFp8PMaxOffset);

// The FP8 tiles of a CTA of kBlockQ query rows, 128 keys a tile, kStages stages: Q is d / 128 boxes
// of kBlockQ rows x 128 bytes, K d / 128 boxes of 128 rows, V^T one box of d rows x 128 keys, and,
// for a forward that transposes V itself (TransposesV), V as stored, a key tile of 128 rows x d;
// each region starts 1024-aligned (their sizes are multiples of 1024).
template <int HeadDim_, int BlockQ, int Stages = 2, bool TransposesV = false>
struct Fp8TileShape {
  static constexpr int kHeadDim = HeadDim_;
  static constexpr int kBlockQ = BlockQ;
  static constexpr int kBlockK = 128;
  static constexpr int kStages = Stages;
  static constexpr int kBoxes = kHeadDim / kSwizzleBytes;  // 128-byte boxes across d
  static constexpr uint32_t kQBytes = kBlockQ * kHeadDim;
  static constexpr uint32_t kKBytes = kBlockK * kHeadDim;
  static constexpr uint32_t kVtBytes = kHeadDim * kBlockK;
  static constexpr bool kTransposesV = TransposesV;
  static constexpr uint32_t kVBytes = TransposesV ? kBlockK * kHeadDim : 0;
  static constexpr size_t kSharedBytes =
      kTileAlignment + kQBytes + kStages * (size_t{kKBytes} + kVtBytes + kVBytes);

  static_assert(kHeadDim == 128, "instantiated at d = 128: one 128-byte box across d");
  static_assert(kBlockK * 1 == kSwizzleBytes, "a V^T row of one tile is one 128-byte swizzled row");
  static_assert(kSharedBytes <= kSharedBytesPerBlock, "the tiles fit an H100/H200's 227 KiB");
};

// The most FP8 stages (K, V^T, and V as stored where the forward transposes it) that fit beside a
// Q tile of `block_q` rows: 6 at d 128 for cuda.flash3_fp8_ws, 4 when it transposes V itself.
constexpr int fp8_stages_that_fit(int head_dim, int block_q, bool transposes_v) {
  const size_t stage_bytes = static_cast<size_t>(128 * head_dim) * (transposes_v ? 3 : 2);
  return static_cast<int>((kSharedBytesPerBlock - kTileAlignment -
                           static_cast<size_t>(block_q * head_dim)) /
                          stage_bytes);
}

// cuda.flash3_fp8: one warpgroup, 64 query rows.
template <int HeadDim>
struct Fp8Traits : Fp8TileShape<HeadDim, kWgmmaM> {
  static constexpr int kThreads = kWarpgroupThreads;
};

// cuda.flash3_fp8_ws, warp-specialized as cuda.flash3_ws (flash3_traits.h's WsTraits, whose
// register split it takes): a producer warpgroup issuing every TMA load, two consumer warpgroups
// of 64 query rows each (128 per CTA), K and V^T in rings of their own with "full" and "empty"
// mbarriers, as many stages as shared memory holds.
// TransposesV (cuda.flash3_fp8_ws_transpose): V comes as stored, a ring stage of its own, and the
// producer warpgroup writes each tile's V^T itself; no layout pass.
template <int HeadDim, bool TransposesV = false>
struct Fp8WsTraits
    : Fp8TileShape<HeadDim, 2 * kWgmmaM, fp8_stages_that_fit(HeadDim, 2 * kWgmmaM, TransposesV),
                   TransposesV> {
  using Shape = Fp8TileShape<HeadDim, 2 * kWgmmaM,
                             fp8_stages_that_fit(HeadDim, 2 * kWgmmaM, TransposesV), TransposesV>;
  static constexpr int kConsumers = 2;
  static constexpr int kConsumerThreads = kConsumers * kWarpgroupThreads;
  static constexpr int kThreads = kWarpgroupThreads + kConsumerThreads;
  // A transposing producer holds a tile's words and addresses: 32 registers, which leaves the
  // consumers their 240 (128 x 32 + 256 x 240 = 65536).
  static constexpr int kProducerRegisters =
      TransposesV ? 32 : WsTraits<HeadDim>::kProducerRegisters;
  static constexpr int kConsumerRegisters = WsTraits<HeadDim>::kConsumerRegisters;
  static_assert(kConsumers * kWgmmaM == Fp8WsTraits::kBlockQ, "each consumer owns 64 query rows");
  static_assert(kWarpgroupThreads * kProducerRegisters + kConsumerThreads * kConsumerRegisters <=
                    65536,
                "the register file holds the rebalanced warpgroups");
};
template <int HeadDim>
using Fp8WsTransposeTraits = Fp8WsTraits<HeadDim, true>;

// The key in V^T's column a (0..31) of each 32 keys: the S accumulator that P's e4m3 A fragment
// holds at column a (flash3_fp8_kernel.cuh). a = [a4 t1 t0 i1 i0] -> key [a4 i1 t1 t0 i0].
ATTNBENCH_HOST_DEVICE constexpr int v_key_of_column(int a) {
  return (a & 16) | ((a & 2) << 2) | (((a >> 2) & 3) << 1) | (a & 1);
}

// V^T's keys per (batch, head_kv, d) row: seqlen_k rounded up to whole tiles.
inline int64_t fp8_keys_padded(int64_t seqlen_k) {
  return (seqlen_k + Fp8Traits<128>::kBlockK - 1) / Fp8Traits<128>::kBlockK *
         Fp8Traits<128>::kBlockK;
}

// The passes before the forward on 16-bit inputs (cuda.flash3_fp8 at fp16/bf16 and its
// variants). Per-tensor scales: the amax pass writes one partial maximum per block and tensor,
// the quantize passes reduce them to Q's, K's and V's descales. Per-block scales: one block per
// scale group finds the group's amax and quantizes it.
constexpr int kAmaxBlocks = 128;
constexpr int kPassThreads = 256;
// Per-block scales: tokens of one head per descale (FlashAttention-3's block quantization), one
// key tile, so each tile of K and V has one descale.
constexpr int kFp8BlockRows = 128;

// The inputs the passes read, as blockIdx.y numbers them.
enum Fp8Tensor : int { kTensorQ = 0, kTensorK = 1, kTensorV = 2 };

// Where each (batch, token, head) of Q, K and V finds its descale in Fp8PassArgs::descales: one per
// tensor (block_rows 0: index `tensor`), or per block of block_rows tokens of one head, Q's groups
// first, then K's, then V's, each in reference/fp8_recipe.h's group_of order.
struct Fp8ScaleGroups {
  int block_rows = 0;
  int64_t batch = 1, heads_q = 1, heads_kv = 1, seqlen_q = 1, seqlen_k = 1;

  ATTNBENCH_HOST_DEVICE int64_t blocks(int64_t tokens) const {
    return (tokens + block_rows - 1) / block_rows;
  }
  ATTNBENCH_HOST_DEVICE int64_t count(int tensor) const {
    if (block_rows == 0) return 1;
    return tensor == kTensorQ ? batch * heads_q * blocks(seqlen_q)
                              : batch * heads_kv * blocks(seqlen_k);
  }
  ATTNBENCH_HOST_DEVICE int64_t first(int tensor) const {
    if (block_rows == 0) return tensor;
    return tensor == kTensorQ ? 0 : count(kTensorQ) + (tensor == kTensorV ? count(kTensorK) : 0);
  }
  ATTNBENCH_HOST_DEVICE int64_t total() const { return first(kTensorV) + count(kTensorV); }
  ATTNBENCH_HOST_DEVICE int64_t index(int tensor, int64_t b, int64_t token, int64_t head) const {
    if (block_rows == 0) return tensor;
    const int64_t heads = tensor == kTensorQ ? heads_q : heads_kv;
    const int64_t tokens = tensor == kTensorQ ? seqlen_q : seqlen_k;
    return first(tensor) + (b * heads + head) * blocks(tokens) + token / block_rows;
  }
};

// What one FP8 forward writes besides the output, all in the plan's scratch: V^T always; for
// 16-bit inputs also Q and K in e4m3 and the descales (the forward reads them there).
struct Fp8PassArgs {
  uint8_t* vt = nullptr;  // (batch, head_kv, d, keys_padded), v_key_of_column's order
  int keys_padded = 0;
  uint8_t* q = nullptr;            // (batch, seqlen_q, heads_q, d) e4m3, packed; 16-bit inputs
  uint8_t* k = nullptr;            // (batch, seqlen_k, heads_kv, d) e4m3, packed; 16-bit inputs
  float* amax_partials = nullptr;  // kAmaxBlocks each for Q, K, V; 16-bit, per-tensor scales
  float* descales = nullptr;       // amax / 448 of each of `groups`; 16-bit inputs
  float* v_inverses = nullptr;     // 1 / descale of V's groups; 16-bit, per-block scales
  // launch_fp8_quantize's V, for a forward that takes V as it is (cuDNN's): packed as q and k, and
  // the scale its e4m3 output is stored at (fp8_output_scale of V's descale).
  uint8_t* v = nullptr;
  float* output_scale = nullptr;
  Fp8ScaleGroups groups;
  // The recipe's step 1 on Q and K (reference/fp8_recipe.h): channel c negated where bit c of
  // sign_bits is set, then the Hadamard butterflies in double, then rotation_norm = 1 / sqrt(d).
  bool incoherent = false;
  uint32_t sign_bits[4] = {};
  double rotation_norm = 0.0;
};

// The recipe's step 1 as the passes take it: channel c of Q and K negated where bit c of
// sign_bits is set (the stored-seed signs s), then the butterflies, then 1 / sqrt(d).
inline void set_incoherent_rotation(Fp8PassArgs& args, uint64_t sign_seed, int64_t head_dim) {
  args.incoherent = true;
  for (int64_t channel = 0; channel < head_dim; ++channel) {
    if (incoherent_sign_negative(sign_seed, channel)) {
      args.sign_bits[channel / 32] |= 1u << (channel % 32);
    }
  }
  args.rotation_norm = incoherent_rotation_norm(head_dim);
}

inline namespace ATTNBENCH_TARGET {

// One forward: on e4m3 inputs the layout pass (V into V^T), on 16-bit inputs the passes finding
// the descales and quantizing Q, K into e4m3, V into e4m3 V^T, then the kernel. params' q_map and
// k_map view the e4m3 Q and K (the inputs, or buffers.q and buffers.k), v_map V^T.
template <int HeadDim, DType kInput>
Status launch_flash3_fp8(const Flash3Params& params, const Fp8PassArgs& buffers,
                         cudaStream_t stream);
extern template Status launch_flash3_fp8<128, DType::e4m3>(const Flash3Params&, const Fp8PassArgs&,
                                                           cudaStream_t);
extern template Status launch_flash3_fp8<128, DType::f16>(const Flash3Params&, const Fp8PassArgs&,
                                                          cudaStream_t);
extern template Status launch_flash3_fp8<128, DType::bf16>(const Flash3Params&, const Fp8PassArgs&,
                                                           cudaStream_t);

// cuda.flash3_fp8_ws: the same passes, then the warp-specialized forward
// (flash3_fp8_ws_kernel.cuh); instantiated for e4m3 inputs, the figure's case (16-bit inputs take
// the same passes either way).
template <int HeadDim, DType kInput>
Status launch_flash3_fp8_ws(const Flash3Params& params, const Fp8PassArgs& buffers,
                            cudaStream_t stream);
extern template Status launch_flash3_fp8_ws<128, DType::e4m3>(const Flash3Params&,
                                                              const Fp8PassArgs&, cudaStream_t);

// cuda.flash3_fp8_ws_transpose: cuda.flash3_fp8_ws with V^T written by its producer warpgroup from
// V as stored, tile by tile in shared memory: no pass before the forward. e4m3 inputs.
template <int HeadDim, DType kInput>
Status launch_flash3_fp8_ws_transpose(const Flash3Params& params, const Fp8PassArgs& buffers,
                                      cudaStream_t stream);
extern template Status launch_flash3_fp8_ws_transpose<128, DType::e4m3>(const Flash3Params&,
                                                                        const Fp8PassArgs&,
                                                                        cudaStream_t);

// cudnn.sdpa_fp8_quantized's passes around cuDNN's FP8 forward (kernels/cudnn/cudnn_sdpa.cpp),
// instantiated at d 128 for fp16 and bf16 (fp8_quantize_hdim128.cu). Before it, the amax pass and
// the quantize pass: Q, K and V packed in e4m3 (buffers.q, .k, .v; Q and K rotated where
// buffers.incoherent), their per-tensor descales (buffers.descales) and the output scale
// (buffers.output_scale). After it, the dequantize pass: cuDNN's e4m3 output, packed (batch,
// seqlen_q, heads_q, d) and stored times *output_scale, into params' output in kOutput.
template <int HeadDim, DType kInput>
Status launch_fp8_quantize(const AttentionParams& params, const Fp8PassArgs& buffers,
                           cudaStream_t stream);
template <int HeadDim, DType kOutput>
Status launch_fp8_dequantize_output(const AttentionParams& params, const uint8_t* stored,
                                    const float* output_scale, cudaStream_t stream);
extern template Status launch_fp8_quantize<128, DType::f16>(const AttentionParams&,
                                                            const Fp8PassArgs&, cudaStream_t);
extern template Status launch_fp8_quantize<128, DType::bf16>(const AttentionParams&,
                                                             const Fp8PassArgs&, cudaStream_t);
extern template Status launch_fp8_dequantize_output<128, DType::f16>(const AttentionParams&,
                                                                     const uint8_t*, const float*,
                                                                     cudaStream_t);
extern template Status launch_fp8_dequantize_output<128, DType::bf16>(const AttentionParams&,
                                                                      const uint8_t*, const float*,
                                                                      cudaStream_t);

using Fp8LaunchFunction = Status (*)(const Flash3Params&, const Fp8PassArgs&, cudaStream_t);

// One (head dim, input dtype) the entry dispatches to (gpu::find_instantiation's shape), with its
// forward's query rows per CTA (the Q map's box) and shared memory.
struct Fp8Instantiation {
  int64_t head_dim;
  DType dtype;
  Fp8LaunchFunction launch;
  int block_q;
  size_t shared_bytes;
  // The forward reads V as stored and transposes it itself (params' v_map views V, not V^T).
  bool transposes_v = false;
};

// The instantiation of a forward of Traits' shape at `dtype`: its head dim, query rows per CTA,
// shared memory and V layout, all read off Traits.
template <typename Traits>
Fp8Instantiation fp8_instantiation(DType dtype, Fp8LaunchFunction launch) {
  Fp8Instantiation instantiation{Traits::kHeadDim, dtype, launch, Traits::kBlockQ,
                                 Traits::kSharedBytes};
  instantiation.transposes_v = Traits::kTransposesV;
  return instantiation;
}

// The recipe every cuda.flash3_fp8 series computes: 128-key tiles in order, P's offset 2^8;
// per-tensor scales, or per-block (kFp8BlockRows tokens of one head); incoherent processing where
// asked.
Fp8Recipe flash3_fp8_recipe(bool incoherent, bool block_scales);

// The Kernel entry of an FP8 forward following `recipe` over its instantiations at d 128:
// cuda.flash3_fp8's and cuda.flash3_fp8_incoherent's, and the planted-bug variants'
// (tests/test_kernels/planted/planted_bugs.cmake).
Kernel flash3_fp8_kernel_entry(std::string name, std::string summary, const Fp8Recipe& recipe,
                               std::vector<Fp8Instantiation> instantiations);

}  // namespace ATTNBENCH_TARGET
}  // namespace attnbench::flash3
