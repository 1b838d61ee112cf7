// An FP8 attention recipe (issue 16): how a kernel turns fp16/bf16 Q, K, V into e4m3 and computes
// attention with them, FlashAttention-3's FP8 forward as the paper describes it. One truth for
// three users: cpu.flash_fp8 runs it, the checker's low-precision result emulates the recipe of
// the kernel it judges, and the fp8_accuracy study compares recipes.
//
// The recipe, in order:
//   1. incoherent processing (optional): Q and K, each row of head_dim d, multiplied by
//      (1/sqrt(d)) H diag(s), H the d x d Hadamard matrix and s random signs from a stored seed,
//      the same for Q and K, in double (exact up to the final scaling). Q K^T is unchanged; an
//      outlier channel is spread over all d channels. V is not rotated.
//   2. quantization: each group of values (the whole tensor, one (batch, head), or one block of
//      block_rows tokens of one head) gets scale 1 / descale, is rounded to e4m3 (saturating) and
//      keeps its descale amax / 448 (fp8_descale, reference/fp8_scale.h).
//   3. scores s = (q_e4m3 . k_e4m3) * descale_q * descale_k * softmax scale: the e4m3 products
//      are exact, their sum fp32's (a host kernel) or the FP8 tensor cores' (tensor_core_sum_bits).
//   4. keys in tiles of key_tile (forward or reverse order), an online softmax: m = running max
//      over the tiles so far; P = 2^((s - m) log2 e + p_max_offset), so the row's largest P is
//      2^offset and P uses e4m3's range (FlashAttention-3's max offset); the row sum l takes P
//      unrounded; P rounded to e4m3 multiplies V's e4m3 values (descaled per group), accumulated
//      in fp32 or on the FP8 tensor cores (tensor_core_sum_bits: 32 keys a step into O, V's
//      descale last; per-block scales: each tile's sums added to O in fp32 times its descale);
//      O and l rescaled by 2^((m_old - m) log2 e) when the max grows.
//   5. out = O / l, rounded to the output dtype; LSE = m + ln(l) - offset ln 2. With e4m3_output
//      and a 16-bit output dtype, out is rounded to e4m3 at V's scale first (times
//      fp8_output_scale(descale_v), rounded, divided back): a forward that writes e4m3 alone,
//      dequantized after it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference/attention.h"
#include "reference/problem.h"

namespace attnbench {

struct Fp8Recipe {
  Fp8Scaling scaling = Fp8Scaling::per_tensor;  // per_tensor, per_head or per_block
  int64_t block_rows = 64;                      // per_block: tokens of one head per scale
  bool incoherent = false;                      // step 1
  uint64_t sign_seed = 0x5eed5eed5eed5eedull;   // s of step 1
  int64_t key_tile = 128;                       // step 4
  bool reverse_keys = false;                    // step 4: last tile first
  int p_max_offset = 8;                         // step 4: P's largest value is 2^8
  // Steps 3 and 4's sums (Q K^T and P V): 0 adds the products in fp32, one at a time; a kernel on
  // Hopper's FP8 tensor cores adds them 32 at a time, each step keeping this many bits below its
  // largest term (tensor_core_sum, kFp8TensorCoreBits). That moves a score by a few units of
  // 2^-13 of its largest product, which on outlier inputs (one product dwarfs the rest of its
  // row) is more than the checker's term for unmodeled accumulators allows the LSE; and O, summed
  // over every key of a long row, keeps 13 bits below its own size.
  int tensor_core_sum_bits = 0;
  // The recipe's three roundings to e4m3: step 2's on Q and K, step 2's on V, step 4's on P.
  // Every kernel's recipe keeps all three; the accuracy study turns two off to measure each one's
  // share of the error (a value not rounded keeps its scaled float).
  bool round_qk = true;
  bool round_v = true;
  bool round_p = true;
  // Step 5: the forward writes e4m3 at V's scale, dequantized to the output dtype afterwards
  // (cuDNN's FP8 forward on Hopper writes FP8 only: cudnn.sdpa_fp8_quantized). Per-tensor only.
  bool e4m3_output = false;
  bool operator==(const Fp8Recipe&) const = default;
};

// The recipes an opaque FP8 kernel (cuDNN's, whose tile size and key order are not published)
// may follow: `base` (what the kernel does publish: its scales, incoherent processing, its e4m3
// output) at 64- and 128-key tiles, forward and reverse key order, P offset 2^8 (cuDNN's
// scale_s = 256), scores summed as the FP8 tensor cores do (kFp8TensorCoreBits). The checker
// judges such a kernel by the widest of them.
std::vector<Fp8Recipe> opaque_fp8_recipes(const Fp8Recipe& base = {});

// One line naming the recipe ("per-block 64 scales, incoherent, 128-key tiles, P offset 2^8").
std::string describe(const Fp8Recipe& recipe);

// Why the recipe cannot run `problem` ("" when it can): fp16/bf16 inputs, a power-of-two head_dim
// for incoherent processing; or e4m3 inputs taken as stored (steps 1 and 2 already done, with
// their descales per tensor or per head), for a per-tensor recipe without incoherent processing
// that rounds Q, K and V.
std::string fp8_recipe_limits(const Fp8Recipe& recipe, const Problem& problem);

// One input tensor after steps 1 and 2: e4m3 bits in the placement's layout, and a descale per
// group (group_of gives a (batch, seq, head)'s group).
struct QuantizedTensor {
  std::vector<uint8_t> bits;    // indexed as the input buffer it came from
  std::vector<float> values;    // the bits' e4m3 values (not descaled), indexed as `bits`
  std::vector<float> descales;  // per group
  Fp8Scaling scaling = Fp8Scaling::per_tensor;
  int64_t block_rows = 64;
  int64_t heads = 1;
  int64_t seqlen = 1;
  int64_t group_of(int64_t b, int64_t s, int64_t h) const;
};

// Step 1 on one row (its length a power of two): (1/sqrt(d)) H diag(s) x in double, the
// butterflies of stage h = 1, 2, 4, ... taking x[j] + x[j + h] and x[j] - x[j + h] (a GPU pass
// that keeps this order and precision gets the same bits: cuda.flash3_fp8_incoherent).
void incoherent_rotation(std::vector<double>& row, uint64_t sign_seed);
// s of step 1: whether channel `channel` is negated; and the final scaling 1 / sqrt(d).
bool incoherent_sign_negative(uint64_t sign_seed, int64_t channel);
double incoherent_rotation_norm(int64_t d);

// Steps 1 and 2 for Q, K and V of `problem` (the views' dtypes fp16/bf16); e4m3 views are taken
// as stored, with their descales.
struct QuantizedInputs {
  QuantizedTensor q, k, v;
  ProblemLayout layout;
};
QuantizedInputs quantize_inputs(const Fp8Recipe& recipe, const Problem& problem,
                                const AttentionInputs& inputs);

// Step 3's sum of one score's `dim` e4m3 products, as `tensor_core_sum_bits` says (0: fp32).
float fp8_score_sum(const float* q, const float* k, int64_t dim, int tensor_core_sum_bits);

// Step 4, one score at a time, as every user of the recipe computes it (the kernels and the
// checker's rows must agree to the bit on these): P's exponent x = (s - m) log2 e + offset; the
// rescale 2^((m_old - m) log2 e) of O and l when the running max grows (0 from -inf); P's e4m3
// value 2^x before P @ V; and step 5's LSE, m + ln(l) - offset ln 2.
float fp8_p_exponent(float score, float row_max, int p_max_offset);
float fp8_rescale(float old_max, float new_max);
float fp8_p(float x);
float fp8_lse(float row_max, float row_sum, int p_max_offset);
// Step 5's e4m3 output: whether the recipe takes it on an output of `output_dtype` (a 16-bit one;
// an FP8 output is rounded once, at out_scale), and one value as the forward stores it at
// `output_scale` (fp8_output_scale of V's descale) and the dequantize pass reads it back.
bool fp8_output_through_e4m3(const Fp8Recipe& recipe, DType output_dtype);
float fp8_e4m3_output(float value, float output_scale);

// Steps 3 to 5 for one query row (h a query head): out_row gets head_dim_v floats (before the
// output rounding when round_output is false; an FP8 output rounded as value * out_scale and
// descaled back, as lowp_row does), *lse the natural-log LSE.
void fp8_recipe_row(const Fp8Recipe& recipe, const Problem& problem, const QuantizedInputs& inputs,
                    int64_t b, int64_t h, int64_t query, float* out_row, float* lse,
                    bool round_output = true, float out_scale = 1.0f);

}  // namespace attnbench
