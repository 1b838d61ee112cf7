// Exact attention on the host, one query row at a time. Each output row depends only on its
// own query row, so checking a sample of rows is exact where it looks.
#pragma once

#include <cstdint>

#include "reference/fp8_scale.h"
#include "reference/problem.h"

namespace attnbench {

// A read-only view of one input tensor as the harness stores it: values in `dtype` at
// `placement` inside `data`; the real value is stored value * descale (FP8; 1 otherwise), or with
// per-head descales (fp8_scaling per_head) stored value * head_descales[b * heads + h].
struct TensorView {
  DType dtype = DType::f32;
  const void* data = nullptr;
  TensorPlacement placement;
  float descale = 1.0f;
  const float* head_descales = nullptr;  // (batch, heads), or null
  int64_t heads = 0;                     // of this tensor, to index head_descales
  float descale_of(int64_t b, int64_t h) const {
    return head_descales != nullptr ? head_descales[head_descale_index(b, h, heads)] : descale;
  }
  float at(int64_t b, int64_t s, int64_t h, int64_t d) const;  // real value, as float
};

struct AttentionInputs {
  TensorView q, k, v;
  TensorView dout;  // the backward's upstream gradient, placed like out; data null in a forward
};

// The key/value head that query head h reads: GQA groups heads_q / heads_kv consecutive query
// heads onto one kv head (MQA: heads_kv = 1).
int64_t kv_head_of(const Problem& problem, int64_t h);
// Elements (b, s, h, 0 .. dim) of a view as real values (descaled).
void load_row(const TensorView& view, int64_t b, int64_t s, int64_t h, int64_t dim, float* row);

// fp64 reference: out_row has head_dim_v values; *lse gets the natural-log LSE of the scaled
// scores (-inf for a row with no visible key, whose output is 0). h indexes query heads.
void reference_row(const Problem& problem, const AttentionInputs& inputs, int64_t b, int64_t h,
                   int64_t query, double* out_row, double* lse);

// The same attention at a kernel's precision, for the tolerance rule: the quantized inputs,
// scores and softmax in fp32, P rounded to problem.p_dtype before P @ V (fp32 accumulation),
// the output rounded to problem.output_dtype (scaled by out_scale and descaled back for FP8
// outputs), returned as float.
void lowp_row(const Problem& problem, const AttentionInputs& inputs, float out_scale, int64_t b,
              int64_t h, int64_t query, float* out_row, float* lse);

}  // namespace attnbench
