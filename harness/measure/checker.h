// The checker of DESIGN: an exact fp64 reference on a sample of query rows (every (batch, head)
// pair, first and last rows, rows at tile boundaries, random rows; all rows when the problem is
// small), FlashAttention's rule max|out - ref| <= 2 * max|out_lowp - ref| + atol, NaN/Inf
// counts over the whole output, poisoned outputs (every element must be written), canaries,
// and bit-for-bit repeatability for deterministic kernels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "harness/measure/inputs.h"
#include "harness/core/records.h"
#include "kernels/kernel.h"
#include "reference/fp8_recipe.h"

namespace attnbench {

struct RowIndex {
  int64_t b = 0;
  int64_t h = 0;  // query head
  int64_t query = 0;
};

// Reference values for the sampled rows of one problem's inputs, shared by every kernel that
// runs on them; the lowp rows depend on the problem's dtypes, and on a kernel's own FP8 recipe
// where it has one (with_recipe).
struct ReferenceRows {
  std::vector<RowIndex> rows;
  bool all_rows = false;
  std::vector<double> ref;      // (rows, head_dim_v)
  std::vector<double> ref_lse;  // (rows,)
  std::vector<float> lowp;      // (rows, head_dim_v)
  std::vector<float> lowp_lse;  // (rows,)
  double lowp_error = 0;        // max |lowp - ref|
  double lowp_lse_error = 0;    // max |lowp_lse - ref_lse| over rows with visible keys
  double atol = 0;              // 2 * max rounding_error_term(output dtype, ref) + noise terms
  double fp8_score_error = 0;   // FP8 inputs: how far the tensor cores' narrow sums move a score
};

// Rows whose reference is cheaper than this many multiply-adds are all checked.
constexpr double kFullCheckWork = 1 << 27;

std::vector<RowIndex> select_rows(const Problem& problem, uint64_t seed, bool& all_rows);
ReferenceRows compute_reference(const ProblemInputs& inputs, uint64_t seed, float out_scale);
// `reference`'s fp64 rows with the low-precision rows and the bound of a kernel's own FP8 recipe
// (reference/fp8_recipe.h) in place of lowp_row's.
ReferenceRows with_recipe(const ReferenceRows& reference, const ProblemInputs& inputs,
                          const Fp8Recipe& recipe);

// Which low-precision rows judge a kernel (one truth for the case runner and the tests):
//   own_recipe  a kernel that declares its FP8 recipe (Kernel::fp8_recipe): that recipe's rows;
//   envelope    a kernel with a closed recipe (Kernel::fp8_envelope_base: cuDNN's, whose tiles and
//               key order are not published), or any kernel without a recipe on e4m3 inputs: the
//               widest of the plain lowp rows and opaque_fp8_recipes(envelope_base_for)' rows;
//   plain       any other: compute_reference's lowp rows.
enum class LowpModel { plain, own_recipe, envelope };
LowpModel lowp_model_for(const Kernel& kernel, const Problem& problem);
// The base of the envelope that judges `kernel` (its fp8_envelope_base, else the default recipe).
Fp8Recipe envelope_base_for(const Kernel& kernel);
// `reference` with the envelope's bound: its lowp and LSE errors the largest over the recipes
// modeled around `base` and the plain rows (the lowp rows kept are the plain ones).
ReferenceRows with_envelope(const ReferenceRows& reference, const ProblemInputs& inputs,
                            const Fp8Recipe& base = {});

// Buffers one kernel writes: the output in its dtype, and fp32 LSE when the kernel returns it;
// for a problem with a backward, dQ, dK and dV in the gradient dtype (ProblemLayout's dq, dk, dv).
struct KernelOutputs {
  GuardedBuffer out;
  GuardedBuffer lse;
  bool has_lse = false;
  GuardedBuffer dq, dk, dv;
  bool has_gradients = false;
  // Guard regions around device copies intact (set by the CUDA executor; the host buffers'
  // own canaries are checked too).
  bool guards_ok = true;
};
KernelOutputs make_outputs(const ProblemInputs& inputs, bool with_lse);
// Poisons (NaN) what a step of `pass` writes: out and LSE in a forward, dQ, dK and dV in a
// backward. What a backward reads (the forward's out and LSE) is left as it is.
void poison_outputs(const Problem& problem, Pass pass, KernelOutputs& outputs);
// The parameters of a step on the host: the inputs' host buffers and those of `outputs`.
AttentionParams host_params(const ProblemInputs& inputs, KernelOutputs& outputs);

// Compares one poisoned-then-written output against the reference rows. `failure` gets a
// one-line reason when the check fails, empty when it passes.
CheckSummary compare_output(const ProblemInputs& inputs, const ReferenceRows& reference,
                            const KernelOutputs& outputs, std::string& failure);


}  // namespace attnbench
