#include "kernels/kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "reference/flops.h"

namespace attnbench {

namespace {

// Masks by kind, as tables list them: "window", not "window(L,R)".
template <typename T, typename Name>
std::string join(const std::vector<T>& items, Name name) {
  std::string text;
  for (const T& item : items) {
    if (!text.empty()) text += ", ";
    text += name(item);
  }
  return text;
}

template <typename T>
bool contains(const std::vector<T>& items, const T& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

// "3.2e11": short enough for a skip reason, exact enough to compare against the limit.
std::string format_flops(double flops) {
  if (flops <= 0) return "0";
  int exponent = static_cast<int>(std::floor(std::log10(flops)));
  double mantissa = flops / std::pow(10.0, exponent);
  if (std::round(mantissa * 10) >= 100) {  // 9.96e11 prints as 1.0e12, not 10.0e11
    mantissa /= 10;
    ++exponent;
  }
  char text[32];
  if (std::round(mantissa * 10) == std::round(mantissa) * 10) {
    std::snprintf(text, sizeof text, "%.0fe%d", std::round(mantissa), exponent);
  } else {
    std::snprintf(text, sizeof text, "%.1fe%d", mantissa, exponent);
  }
  return text;
}

// The size limit counts every (query, key) pair, mask or not: the CPU kernels that materialize
// scores do the whole matrix whatever the mask, so their time follows this count, and a kernel
// that skips masked tiles only finishes sooner than its limit promises.
// Every (query, key) pair of every sequence, masked or not: a varlen batch's own lengths.
double dense_flops(const Problem& problem) {
  double pairs = 0;
  for (int64_t b = 0; b < problem.batch; ++b) {
    pairs +=
        static_cast<double>(problem.query_length(b)) * static_cast<double>(problem.key_rows(b));
    if (!problem.is_varlen()) {
      pairs *= static_cast<double>(problem.batch);  // every sequence alike
      break;
    }
  }
  return flops_per_pair(problem) * static_cast<double>(problem.heads_q) * pairs;
}

// "192/128": a qk/v pair as lists and reasons spell it.
std::string pair_text(const HeadDimPair& pair) {
  return std::to_string(pair.qk) + "/" + std::to_string(pair.v);
}

std::string head_dims_text(const SupportTable& table) {
  std::string text = join(table.head_dims, [](int64_t dim) { return std::to_string(dim); });
  for (const HeadDimPair& pair : table.head_dim_pairs) text += ", " + pair_text(pair);
  return text;
}

// Empty when `dim` is one the table handles.
std::string head_dim_reason(const SupportTable& table, const char* what, int64_t dim) {
  if (!table.head_dims.empty()) {
    if (contains(table.head_dims, dim)) return {};
    return std::string(what) + " " + std::to_string(dim) + " not instantiated (" +
           head_dims_text(table) + ")";
  }
  if (table.max_head_dim > 0 && dim > table.max_head_dim) {
    return std::string(what) + " " + std::to_string(dim) + " above the maximum " +
           std::to_string(table.max_head_dim);
  }
  if (dim % table.head_dim_multiple != 0) {
    return std::string(what) + " " + std::to_string(dim) + " not a multiple of " +
           std::to_string(table.head_dim_multiple);
  }
  return {};
}

}  // namespace

std::string_view backend_name(Backend backend) {
  switch (backend) {
    case Backend::cpu:
      return "cpu";
    case Backend::cuda:
      return "cuda";
    case Backend::emu:
      return "emu";
  }
  return "?";
}

std::string unsupported_reason(const SupportTable& table, const Problem& problem) {
  const auto dtype_text = [](DType dtype) { return std::string(dtype_name(dtype)); };
  if (!contains(table.passes, problem.pass)) {
    return "pass " + std::string(pass_name(problem.pass)) + " not supported (" +
           join(table.passes, [](Pass pass) { return std::string(pass_name(pass)); }) +
           (problem.has_backward() ? "): the kernel has no backward" : ")");
  }
  if (problem.has_backward() && is_fp8(problem.input_dtype) && !table.fp8_backward) {
    return "backward with " + dtype_text(problem.input_dtype) + " inputs not supported";
  }
  if (!contains(table.input_dtypes, problem.input_dtype)) {
    return "dtype " + dtype_text(problem.input_dtype) + " not supported (" +
           join(table.input_dtypes, dtype_text) + ")";
  }
  const bool output_ok = problem.output_dtype == problem.input_dtype ||
                         (table.outputs_fp32 && problem.output_dtype == DType::f32);
  if (!output_ok) {
    return "output dtype " + dtype_text(problem.output_dtype) + " not supported for " +
           dtype_text(problem.input_dtype) + " input";
  }
  // Kernels round P the way default_p_dtype says (e4m3 for FP8 inputs, not at all otherwise).
  if (problem.p_dtype != default_p_dtype(problem.input_dtype)) {
    return "P dtype " + dtype_text(problem.p_dtype) + " not supported for " +
           dtype_text(problem.input_dtype) + " input (" +
           dtype_text(default_p_dtype(problem.input_dtype)) + ")";
  }
  const HeadDimPair problem_pair{problem.head_dim_qk, problem.head_dim_v};
  const bool instantiated_pair = contains(table.head_dim_pairs, problem_pair);
  if (problem.head_dim_v != problem.head_dim_qk && !table.head_dim_pairs.empty() &&
      !table.separate_v_dim && !instantiated_pair) {
    return "head dims " + pair_text(problem_pair) + " not instantiated (" + head_dims_text(table) +
           ")";
  }
  if (std::string reason = head_dim_reason(table, "head_dim", problem.head_dim_qk);
      !reason.empty() && !instantiated_pair) {
    return reason;
  }
  if (problem.has_backward() && !table.backward_head_dims.empty() &&
      !contains(table.backward_head_dims, problem.head_dim_qk)) {
    return "head_dim " + std::to_string(problem.head_dim_qk) +
           " not instantiated for the backward (" +
           join(table.backward_head_dims, [](int64_t dim) { return std::to_string(dim); }) + ")";
  }
  if (problem.head_dim_v != problem.head_dim_qk && !instantiated_pair) {
    if (!table.separate_v_dim) return "head_dim_v != head_dim_qk not supported";
    if (std::string reason = head_dim_reason(table, "head_dim_v", problem.head_dim_v);
        !reason.empty()) {
      return reason;
    }
  }
  if (!contains(table.masks, problem.mask.kind)) {
    return "mask " + std::string(mask_name(problem.mask.kind)) + " not supported (" +
           join(table.masks, [](MaskKind kind) { return std::string(mask_name(kind)); }) + ")";
  }
  if (!contains(table.layouts, problem.layout)) {
    const auto layout_text = [](Layout layout) { return std::string(layout_name(layout)); };
    return "layout " + layout_text(problem.layout) + " not supported (" +
           join(table.layouts, layout_text) + ")";
  }
  if (problem.is_paged() && !table.paged_kv) return "paged KV cache not supported";
  if (table.max_seqlen_q > 0 && problem.seqlen_q > table.max_seqlen_q) {
    return "seqlen_q " + std::to_string(problem.seqlen_q) + " not supported (up to " +
           std::to_string(table.max_seqlen_q) + " query rows per sequence: a decode kernel)";
  }
  if (problem.heads_q != problem.heads_kv && !table.gqa) return "GQA not supported";
  if (problem.fp8_scaling != Fp8Scaling::none &&
      !contains(table.fp8_scalings, problem.fp8_scaling)) {
    const auto scaling_text = [](Fp8Scaling s) { return std::string(fp8_scaling_name(s)); };
    return "fp8_scaling " + scaling_text(problem.fp8_scaling) + " not supported (" +
           join(table.fp8_scalings, scaling_text) + ")";
  }
  if (table.max_flops > 0 && dense_flops(problem) > table.max_flops) {
    return "problem too large for this kernel: " + format_flops(dense_flops(problem)) + " FLOP > " +
           format_flops(table.max_flops);
  }
  return {};
}

AttentionParams shape_params(const Problem& p) {
  const ProblemLayout layout = describe_layout(p);
  AttentionParams params{};
  params.q_batch_stride = layout.q.strides.batch;
  params.q_row_stride = layout.q.strides.seq;
  params.q_head_stride = layout.q.strides.head;
  params.k_batch_stride = layout.k.strides.batch;
  params.k_row_stride = layout.k.strides.seq;
  params.k_head_stride = layout.k.strides.head;
  params.v_batch_stride = layout.v.strides.batch;
  params.v_row_stride = layout.v.strides.seq;
  params.v_head_stride = layout.v.strides.head;
  params.out_batch_stride = layout.out.strides.batch;
  params.out_row_stride = layout.out.strides.seq;
  params.out_head_stride = layout.out.strides.head;
  params.batch = static_cast<int>(p.batch);
  params.heads_q = static_cast<int>(p.heads_q);
  params.heads_kv = static_cast<int>(p.heads_kv);
  params.seqlen_q = static_cast<int>(p.seqlen_q);
  params.seqlen_k = static_cast<int>(p.seqlen_k);
  params.head_dim_qk = static_cast<int>(p.head_dim_qk);
  params.head_dim_v = static_cast<int>(p.head_dim_v);
  params.heads_per_kv = static_cast<int>(p.heads_q / p.heads_kv);
  params.page_size = static_cast<int>(layout.k.page_size);
  params.pages_per_sequence = static_cast<int>(layout.k.pages_per_sequence);
  const double scale = p.softmax_scale();
  constexpr double kLog2e = 1.4426950408889634;
  params.scale = static_cast<float>(scale);
  params.scale_log2 = static_cast<float>(scale * kLog2e);
  params.mask = p.mask.kind;
  params.window_left = static_cast<int>(p.mask.window_left);
  params.window_right = static_cast<int>(p.mask.window_right);
  params.input_dtype = p.input_dtype;
  params.output_dtype = p.output_dtype;
  params.p_dtype = p.p_dtype;
  params.q_descale = params.k_descale = params.v_descale = params.out_scale = 1.0f;
  params.q_head_descales = params.k_head_descales = params.v_head_descales = nullptr;
  params.dout_batch_stride = layout.out.strides.batch;
  params.dout_row_stride = layout.out.strides.seq;
  params.dout_head_stride = layout.out.strides.head;
  params.dq_batch_stride = layout.dq.strides.batch;
  params.dq_row_stride = layout.dq.strides.seq;
  params.dq_head_stride = layout.dq.strides.head;
  params.dk_batch_stride = layout.dk.strides.batch;
  params.dk_row_stride = layout.dk.strides.seq;
  params.dk_head_stride = layout.dk.strides.head;
  params.dv_batch_stride = layout.dv.strides.batch;
  params.dv_row_stride = layout.dv.strides.seq;
  params.dv_head_stride = layout.dv.strides.head;
  params.grad_dtype = p.grad_dtype();
  params.pass = p.pass;
  return params;
}

std::string skip_reason(const Kernel& kernel, const Problem& problem) {
  if (!kernel.unavailable_reason.empty()) return kernel.unavailable_reason;
  return unsupported_reason(kernel.support, problem);
}

ResourceExpectation expected_resources(const Kernel& kernel, const Problem& problem) {
  return kernel.expected_resources ? kernel.expected_resources(problem) : ResourceExpectation{};
}

std::string describe_support(const SupportTable& table) {
  const auto dtype_text = [](DType dtype) { return std::string(dtype_name(dtype)); };
  std::ostringstream text;
  text << "dtypes: " << join(table.input_dtypes, dtype_text) << " (output "
       << (table.outputs_fp32 ? "in the input dtype or fp32" : "in the input dtype") << ")\n";
  text << "head dims: ";
  if (!table.head_dims.empty()) {
    text << head_dims_text(table);
  } else {
    text << "any";
    if (table.head_dim_multiple > 1) text << " multiple of " << table.head_dim_multiple;
    if (table.max_head_dim > 0) text << " up to " << table.max_head_dim;
  }
  if (table.separate_v_dim) {
    text << " (head_dim_v may differ)";
  } else {
    text << (table.head_dim_pairs.empty() ? " (head_dim_v = head_dim_qk)"
                                          : " (head_dim_v = head_dim_qk but in a pair qk/v)");
  }
  text << "\n";
  text << "masks: " << join(table.masks, [](MaskKind kind) {
    return std::string(mask_name(kind));
  }) << "\n";
  text << "layouts: " << join(table.layouts, [](Layout layout) {
    return std::string(layout_name(layout));
  }) << "\n";
  text << "GQA/MQA: " << (table.gqa ? "yes" : "no") << "\n";
  text << "paged KV cache: " << (table.paged_kv ? "yes" : "no") << "\n";
  if (table.max_seqlen_q > 0)
    text << "query rows per sequence: up to " << table.max_seqlen_q << "\n";
  text << "passes: " << join(table.passes, [](Pass pass) { return std::string(pass_name(pass)); });
  if (!table.backward_head_dims.empty()) {
    text << " (the backward at head dims "
         << join(table.backward_head_dims, [](int64_t dim) { return std::to_string(dim); }) << ")";
  }
  text << "\n";
  if (std::any_of(table.input_dtypes.begin(), table.input_dtypes.end(), is_fp8)) {
    text << "fp8 scaling of stored inputs: " << join(table.fp8_scalings, [](Fp8Scaling s) {
      return std::string(fp8_scaling_name(s));
    }) << "\n";
  }
  text << "archs: " << join(table.archs, [](const std::string& arch) { return arch; }) << "\n";
  if (table.max_flops > 0) {
    text << "size limit: " << format_flops(table.max_flops)
         << " FLOP (every query-key pair, masked or not)\n";
  }
  if (!table.notes.empty()) text << "notes: " << table.notes << "\n";
  return text.str();
}


Status run_pass(Plan& plan, Pass pass, const AttentionParams& params) {
  if (pass != Pass::bwd) {
    if (Status status = plan.run(params); !status) return status;
  }
  if (pass == Pass::fwd) return Status::Ok();
  return plan.run_backward(params);
}

}  // namespace attnbench
