#include "reference/problem.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <functional>
#include <initializer_list>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "reference/enum_names.h"
#include "reference/random.h"

namespace attnbench {
namespace {

// Kernels receive shapes as int (kernels/params.h), so every dimension must fit one.
constexpr int64_t kMaxDimension = std::numeric_limits<int32_t>::max();
constexpr int64_t kUnboundedWindow = -1;
// The number of tensors a qkv_packed buffer holds per (batch, seq) position: q, k and v.
constexpr int64_t kPackedTensors = 3;

constexpr std::array<Layout, 4> kAllLayouts = {Layout::bshd, Layout::bhsd, Layout::qkv_packed,
                                               Layout::thd};
constexpr std::array<Fp8Scaling, 4> kAllFp8Scalings = {Fp8Scaling::none, Fp8Scaling::per_tensor,
                                                       Fp8Scaling::per_head, Fp8Scaling::per_block};
constexpr std::string_view kShapeKeys =
    "b, hq, hkv, sq, sk, s, d, dqk, dv, dtype, out, p, fp8_scaling, mask, layout, scale, pass, "
    "dout, varlen, page";

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t");
  return text.substr(first, last - first + 1);
}

// Built by appending: GCC 12 reports a false -Wrestrict for "'" + std::string(...) at -O3.
std::string quoted(std::string_view text) {
  std::string result = "'";
  result += text;
  result += '\'';
  return result;
}

std::string format_double(double value) {
  std::array<char, 64> buffer{};
  const auto result = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  return std::string(buffer.data(), result.ptr);
}

std::string dimension_range() { return "1 .. " + std::to_string(kMaxDimension); }

// Splits on commas that are not inside parentheses: window(L,R) holds one.
std::vector<std::string_view> split_top_level(std::string_view text) {
  std::vector<std::string_view> items;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '(') ++depth;
    if (text[i] == ')' && depth > 0) --depth;
    if (text[i] == ',' && depth == 0) {
      items.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  items.push_back(text.substr(start));
  return items;
}

// Everything --shape can say, before defaults are filled in. Explicit fields win over the
// shorthands (sq over s, dqk over d), so the order of the keys never matters.
struct ShapeFields {
  std::optional<int64_t> b, hq, hkv, sq, sk, s, d, dqk, dv, page;
  std::optional<DType> dtype, out, p;
  std::optional<Fp8Scaling> fp8_scaling;
  std::optional<Mask> mask;
  std::optional<Layout> layout;
  std::optional<double> scale;
  std::optional<Pass> pass;
  std::optional<UpstreamGradient> dout;
  std::optional<Varlen> varlen;
};

template <typename T>
Status set_once(std::string_view key, std::optional<T>& field, T value) {
  if (field) return Status::Error("key " + quoted(key) + " given twice in --shape");
  field = value;
  return Status::Ok();
}

Status set_integer(std::string_view key, std::string_view value, std::optional<int64_t>& field) {
  int64_t parsed = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (error != std::errc() || end != value.data() + value.size()) {
    return Status::Error(std::string(key) + " " + quoted(value) + ": accepted an integer in " +
                         dimension_range());
  }
  return set_once(key, field, parsed);
}

Status set_dtype(std::string_view key, std::string_view value, std::optional<DType>& field) {
  const auto dtype = parse_dtype(value);
  if (!dtype) {
    return Status::Error(std::string(key) + " " + quoted(value) + ": accepted " +
                         accepted_dtype_names());
  }
  return set_once(key, field, *dtype);
}

Status set_field(std::string_view key, std::string_view value, ShapeFields& fields) {
  if (key == "b") return set_integer(key, value, fields.b);
  if (key == "hq") return set_integer(key, value, fields.hq);
  if (key == "hkv") return set_integer(key, value, fields.hkv);
  if (key == "sq") return set_integer(key, value, fields.sq);
  if (key == "sk") return set_integer(key, value, fields.sk);
  if (key == "s") return set_integer(key, value, fields.s);
  if (key == "d") return set_integer(key, value, fields.d);
  if (key == "dqk") return set_integer(key, value, fields.dqk);
  if (key == "dv") return set_integer(key, value, fields.dv);
  if (key == "page") return set_integer(key, value, fields.page);
  if (key == "dtype") return set_dtype(key, value, fields.dtype);
  if (key == "out") return set_dtype(key, value, fields.out);
  if (key == "p") return set_dtype(key, value, fields.p);
  if (key == "fp8_scaling") {
    const auto scaling = parse_fp8_scaling(value);
    if (!scaling) {
      return Status::Error("fp8_scaling " + quoted(value) + ": accepted " +
                           accepted_fp8_scaling_names());
    }
    return set_once(key, fields.fp8_scaling, *scaling);
  }
  if (key == "mask") {
    const auto mask = parse_mask(value);
    if (!mask)
      return Status::Error("mask " + quoted(value) + ": accepted " + accepted_mask_names());
    return set_once(key, fields.mask, *mask);
  }
  if (key == "layout") {
    const auto layout = parse_layout(value);
    if (!layout) {
      return Status::Error("layout " + quoted(value) + ": accepted " + accepted_layout_names());
    }
    return set_once(key, fields.layout, *layout);
  }
  if (key == "pass") {
    const auto pass = parse_pass(value);
    if (!pass) return Status::Error("pass " + quoted(value) + ": accepted " + accepted_pass_names());
    return set_once(key, fields.pass, *pass);
  }
  if (key == "dout") {
    const auto dout = parse_upstream_gradient(value);
    if (!dout) {
      return Status::Error("dout " + quoted(value) + ": accepted " +
                           accepted_upstream_gradient_names());
    }
    return set_once(key, fields.dout, *dout);
  }
  if (key == "varlen") {
    auto varlen = parse_varlen(value);
    if (!varlen)
      return Status::Error("varlen " + quoted(value) + ": accepted " + accepted_varlen_names());
    return set_once(key, fields.varlen, std::move(*varlen));
  }
  if (key == "scale") {
    double scale = 0;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), scale);
    if (error != std::errc() || end != value.data() + value.size()) {
      return Status::Error("scale " + quoted(value) +
                           ": accepted 0 (the default 1/sqrt(dqk)) or a finite positive number");
    }
    return set_once(key, fields.scale, scale);
  }
  return Status::Error("unknown key " + quoted(key) +
                       " in --shape; accepted: " + std::string(kShapeKeys));
}

// The layout a problem has when its shape names none: thd for a varlen batch, bshd otherwise.
Layout default_layout(const Varlen& varlen) {
  return varlen.kind == VarlenKind::none ? Layout::bshd : Layout::thd;
}

// A listed varlen batch says how many sequences there are and how long the longest is.
int64_t longest(const std::vector<int64_t>& lengths) {
  return std::max<int64_t>(1,
                           lengths.empty() ? 1 : *std::max_element(lengths.begin(), lengths.end()));
}

Problem problem_from_fields(const ShapeFields& fields) {
  Problem problem;
  problem.varlen = fields.varlen.value_or(problem.varlen);
  if (problem.varlen.kind == VarlenKind::list) {
    problem.batch = static_cast<int64_t>(problem.varlen.query_lengths.size());
    problem.seqlen_q = longest(problem.varlen.query_lengths);
    problem.seqlen_k = longest(problem.varlen.key_lengths);
  }
  problem.batch = fields.b.value_or(problem.batch);
  problem.heads_q = fields.hq.value_or(problem.heads_q);
  problem.heads_kv = fields.hkv.value_or(problem.heads_q);
  problem.seqlen_q = fields.sq.value_or(fields.s.value_or(problem.seqlen_q));
  problem.seqlen_k = fields.sk.value_or(fields.s.value_or(problem.seqlen_k));
  problem.head_dim_qk = fields.dqk.value_or(fields.d.value_or(problem.head_dim_qk));
  problem.head_dim_v = fields.dv.value_or(fields.d.value_or(problem.head_dim_v));
  problem.input_dtype = fields.dtype.value_or(problem.input_dtype);
  problem.output_dtype = fields.out.value_or(default_output_dtype(problem.input_dtype));
  problem.p_dtype = fields.p.value_or(default_p_dtype(problem.input_dtype));
  problem.fp8_scaling = fields.fp8_scaling.value_or(problem.fp8_scaling);
  problem.mask = fields.mask.value_or(problem.mask);
  problem.layout = fields.layout.value_or(default_layout(problem.varlen));
  problem.scale = fields.scale.value_or(problem.scale);
  problem.pass = fields.pass.value_or(problem.pass);
  problem.dout = fields.dout.value_or(problem.dout);
  problem.page_size = fields.page.value_or(problem.page_size);
  return problem;
}

Status check_dimension(std::string_view field, std::string_view key, int64_t value) {
  if (value >= 1 && value <= kMaxDimension) return Status::Ok();
  return Status::Error(std::string(field) + " (" + std::string(key) +
                       ") = " + std::to_string(value) + ": accepted " + dimension_range());
}

Status check_window_bound(std::string_view side, int64_t value) {
  if (value >= kUnboundedWindow && value <= kMaxDimension) return Status::Ok();
  return Status::Error("mask window " + std::string(side) + " = " + std::to_string(value) +
                       ": accepted -1 (unbounded) .. " + std::to_string(kMaxDimension));
}

// Product of positive factors, or nullopt when it does not fit int64.
std::optional<int64_t> checked_product(std::initializer_list<int64_t> factors) {
  int64_t product = 1;
  for (int64_t factor : factors) {
    if (__builtin_mul_overflow(product, factor, &product)) return std::nullopt;
  }
  return product;
}

Status check_packed_shapes(const Problem& problem) {
  const auto mismatch = [](std::string_view what, std::string_view first_key, int64_t first,
                           std::string_view second_key, int64_t second) {
    return Status::Error("layout qkv_packed needs equal " + std::string(what) + " for q, k and v" +
                         " (" + std::string(first_key) + " = " + std::to_string(first) + ", " +
                         std::string(second_key) + " = " + std::to_string(second) + ")");
  };
  if (problem.seqlen_q != problem.seqlen_k) {
    return mismatch("sequence lengths", "sq", problem.seqlen_q, "sk", problem.seqlen_k);
  }
  if (problem.heads_q != problem.heads_kv) {
    return mismatch("head counts", "hq", problem.heads_q, "hkv", problem.heads_kv);
  }
  if (problem.head_dim_qk != problem.head_dim_v) {
    return mismatch("head dims", "dqk", problem.head_dim_qk, "dv", problem.head_dim_v);
  }
  return Status::Ok();
}

// A placement by strides and a first element alone (no sequence starts, no pages).
TensorPlacement strided(Strides strides, int64_t offset) {
  TensorPlacement placement;
  placement.strides = strides;
  placement.offset = offset;
  return placement;
}

// Layout thd: the rows of sequence b start at starts[b] (cu_seqlens).
TensorPlacement thd_placement(const std::vector<int64_t>& starts, int64_t heads, int64_t head_dim) {
  TensorPlacement placement = strided({.batch = 0, .seq = heads * head_dim, .head = head_dim}, 0);
  placement.sequence_starts = starts;
  return placement;
}

// The first row of each sequence and, last, the total: FlashAttention's cu_seqlens.
std::vector<int64_t> sequence_starts(int64_t batch, const std::function<int64_t(int64_t)>& length) {
  std::vector<int64_t> starts(static_cast<size_t>(batch) + 1, 0);
  for (int64_t b = 0; b < batch; ++b) {
    starts[static_cast<size_t>(b) + 1] = starts[static_cast<size_t>(b)] + length(b);
  }
  return starts;
}

// The pool's pages in a fixed shuffled order: a paged kernel must follow the page table, as a
// serving engine's cache hands pages out in whatever order they were freed.
std::vector<int64_t> shuffled_pages(int64_t count) {
  std::vector<int64_t> pages(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) pages[static_cast<size_t>(i)] = i;
  Xoshiro256 rng(mix_seed(0x5041474544ull, static_cast<uint64_t>(count)));  // "PAGED"
  for (int64_t i = count - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(pages[static_cast<size_t>(i)], pages[static_cast<size_t>(j)]);
  }
  return pages;
}

// K and V of a paged problem: each sequence's pages, taken from the shuffled pool in order;
// the table's unused entries (a sequence with fewer pages than the longest) are -1.
void page_the_cache(const Problem& p, ProblemLayout& layout) {
  int64_t pages_per_sequence = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    pages_per_sequence = std::max(pages_per_sequence, p.pages_of(b));
    layout.cache_pages += p.pages_of(b);
  }
  const std::vector<int64_t> pool = shuffled_pages(layout.cache_pages);
  std::vector<int64_t> table(static_cast<size_t>(p.batch * pages_per_sequence), -1);
  size_t next = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t page = 0; page < p.pages_of(b); ++page) {
      table[static_cast<size_t>(b * pages_per_sequence + page)] = pool[next++];
    }
  }
  for (TensorPlacement* placement : {&layout.k, &layout.v}) {
    placement->strides.batch = 0;
    placement->offset = 0;
    placement->page_table = table;
    placement->page_size = p.page_size;
    placement->pages_per_sequence = pages_per_sequence;
  }
  const int64_t pool_rows = layout.cache_pages * p.page_size;
  layout.k_buffer_elements = pool_rows * p.heads_kv * p.head_dim_qk;
  layout.v_buffer_elements = pool_rows * p.heads_kv * p.head_dim_v;
}

Status check_paged(const Problem& problem) {
  const std::string named = "page=" + std::to_string(problem.page_size);
  if (problem.layout != Layout::bshd && problem.layout != Layout::thd) {
    return Status::Error(named + " with layout " + std::string(layout_name(problem.layout)) +
                         ": a paged cache keeps k and v rows in pages of their own; accepted "
                         "layouts bshd, thd");
  }
  if (problem.has_backward()) {
    return Status::Error(
        named + " with pass " + std::string(pass_name(problem.pass)) +
        ": a paged cache is read by a forward (decode, prefill); accepted pass fwd");
  }
  return Status::Ok();
}

Status check_varlen(const Problem& problem) {
  const std::string named = "varlen=" + varlen_name(problem.varlen);
  if (problem.layout != Layout::thd) {
    return Status::Error(named + " with layout " + std::string(layout_name(problem.layout)) +
                         ": a varlen batch is packed; accepted layout thd");
  }
  if (problem.mask.kind == MaskKind::padding) {
    return Status::Error(named +
                         " with mask padding: a varlen batch gives each sequence its key "
                         "length already; accepted masks none, causal, causal_br, window");
  }
  if (problem.has_backward()) {
    return Status::Error(named + " with pass " + std::string(pass_name(problem.pass)) +
                         ": the backward's reference takes dense batches only; accepted pass fwd");
  }
  if (problem.varlen.kind != VarlenKind::list) return Status::Ok();
  const auto& queries = problem.varlen.query_lengths;
  const auto& keys = problem.varlen.key_lengths;
  if (static_cast<int64_t>(queries.size()) != problem.batch) {
    return Status::Error(named + " lists " + std::to_string(queries.size()) +
                         " sequences with b = " + std::to_string(problem.batch) +
                         ": accepted one length per sequence");
  }
  for (size_t b = 0; b < queries.size(); ++b) {
    if (queries[b] > problem.seqlen_q || keys[b] > problem.seqlen_k) {
      return Status::Error(
          named + ": sequence " + std::to_string(b) + " (" + std::to_string(queries[b]) + ":" +
          std::to_string(keys[b]) + ") is longer than sq = " + std::to_string(problem.seqlen_q) +
          " or sk = " + std::to_string(problem.seqlen_k) + "; accepted lengths up to sq and sk");
    }
  }
  return Status::Ok();
}

TensorPlacement bshd_placement(int64_t seqlen, int64_t heads, int64_t head_dim) {
  return strided({.batch = seqlen * heads * head_dim, .seq = heads * head_dim, .head = head_dim},
                 0);
}

TensorPlacement bhsd_placement(int64_t seqlen, int64_t heads, int64_t head_dim) {
  return strided({.batch = heads * seqlen * head_dim, .seq = head_dim, .head = seqlen * head_dim},
                 0);
}

}  // namespace

double Problem::softmax_scale() const {
  return scale != 0 ? scale : 1.0 / std::sqrt(static_cast<double>(head_dim_qk));
}

int64_t Problem::query_length(int64_t b) const {
  switch (varlen.kind) {
    case VarlenKind::none:
      return seqlen_q;
    case VarlenKind::uniform:
      return uniform_length(b, seqlen_q);
    case VarlenKind::list:
      return varlen.query_lengths[static_cast<size_t>(b)];
  }
  return seqlen_q;
}

int64_t Problem::key_length(int64_t b) const {
  switch (varlen.kind) {
    case VarlenKind::none:
      return mask.kind == MaskKind::padding ? padding_key_length(b, batch, seqlen_k) : seqlen_k;
    case VarlenKind::uniform:
      return uniform_length(b, seqlen_k);
    case VarlenKind::list:
      return varlen.key_lengths[static_cast<size_t>(b)];
  }
  return seqlen_k;
}

KeyRange Problem::visible(int64_t b, int64_t query) const {
  // A varlen sequence is a problem of its own lengths; padding keeps the batch's seqlen_k.
  const int64_t keys = key_length(b);
  return visible_keys(mask.kind, mask.window_left, mask.window_right, query,
                      is_varlen() ? query_length(b) : seqlen_q, is_varlen() ? keys : seqlen_k,
                      keys);
}

ProblemLayout describe_layout(const Problem& problem) {
  const Problem& p = problem;
  ProblemLayout layout;
  layout.q_buffer_elements = p.batch * p.seqlen_q * p.heads_q * p.head_dim_qk;
  layout.k_buffer_elements = p.batch * p.seqlen_k * p.heads_kv * p.head_dim_qk;
  layout.v_buffer_elements = p.batch * p.seqlen_k * p.heads_kv * p.head_dim_v;
  layout.out_elements = p.batch * p.seqlen_q * p.heads_q * p.head_dim_v;
  layout.lse_elements = p.batch * p.heads_q * p.seqlen_q;
  layout.dq_elements = layout.q_buffer_elements;
  layout.dk_elements = layout.k_buffer_elements;
  layout.dv_elements = layout.v_buffer_elements;
  layout.dq = bshd_placement(p.seqlen_q, p.heads_q, p.head_dim_qk);
  layout.dk = bshd_placement(p.seqlen_k, p.heads_kv, p.head_dim_qk);
  layout.dv = bshd_placement(p.seqlen_k, p.heads_kv, p.head_dim_v);
  switch (p.layout) {
    case Layout::bshd:
      layout.q = bshd_placement(p.seqlen_q, p.heads_q, p.head_dim_qk);
      layout.k = bshd_placement(p.seqlen_k, p.heads_kv, p.head_dim_qk);
      layout.v = bshd_placement(p.seqlen_k, p.heads_kv, p.head_dim_v);
      layout.out = bshd_placement(p.seqlen_q, p.heads_q, p.head_dim_v);
      break;
    case Layout::bhsd:
      layout.q = bhsd_placement(p.seqlen_q, p.heads_q, p.head_dim_qk);
      layout.k = bhsd_placement(p.seqlen_k, p.heads_kv, p.head_dim_qk);
      layout.v = bhsd_placement(p.seqlen_k, p.heads_kv, p.head_dim_v);
      layout.out = bhsd_placement(p.seqlen_q, p.heads_q, p.head_dim_v);
      break;
    case Layout::thd: {
      const auto queries = sequence_starts(p.batch, [&p](int64_t b) { return p.query_length(b); });
      const auto keys = sequence_starts(p.batch, [&p](int64_t b) { return p.key_length(b); });
      const int64_t total_q = queries.back(), total_k = keys.back();
      layout.q = thd_placement(queries, p.heads_q, p.head_dim_qk);
      layout.k = thd_placement(keys, p.heads_kv, p.head_dim_qk);
      layout.v = thd_placement(keys, p.heads_kv, p.head_dim_v);
      layout.out = thd_placement(queries, p.heads_q, p.head_dim_v);
      layout.q_buffer_elements = total_q * p.heads_q * p.head_dim_qk;
      layout.k_buffer_elements = total_k * p.heads_kv * p.head_dim_qk;
      layout.v_buffer_elements = total_k * p.heads_kv * p.head_dim_v;
      layout.out_elements = total_q * p.heads_q * p.head_dim_v;
      break;
    }
    case Layout::qkv_packed: {
      // (batch, seq, 3, heads, dim): validate() guarantees q, k and v have one shape.
      const int64_t tensor_row = p.heads_q * p.head_dim_qk;
      const Strides packed{.batch = p.seqlen_q * kPackedTensors * tensor_row,
                           .seq = kPackedTensors * tensor_row,
                           .head = p.head_dim_qk};
      layout.q = strided(packed, 0);
      layout.k = strided(packed, tensor_row);
      layout.v = strided(packed, 2 * tensor_row);
      layout.out = bshd_placement(p.seqlen_q, p.heads_q, p.head_dim_v);
      layout.q_buffer_elements = kPackedTensors * layout.q_buffer_elements;
      layout.k_buffer_elements = 0;
      layout.v_buffer_elements = 0;
      break;
    }
  }
  if (p.is_paged()) page_the_cache(p, layout);
  return layout;
}

Status validate(const Problem& problem) {
  const std::array<std::tuple<std::string_view, std::string_view, int64_t>, 7> dimensions = {{
      {"batch", "b", problem.batch},
      {"heads_q", "hq", problem.heads_q},
      {"heads_kv", "hkv", problem.heads_kv},
      {"seqlen_q", "sq", problem.seqlen_q},
      {"seqlen_k", "sk", problem.seqlen_k},
      {"head_dim_qk", "dqk", problem.head_dim_qk},
      {"head_dim_v", "dv", problem.head_dim_v},
  }};
  for (const auto& [field, key, value] : dimensions) {
    if (Status status = check_dimension(field, key, value); !status) return status;
  }
  if (problem.heads_q % problem.heads_kv != 0) {
    return Status::Error("heads_q (hq) = " + std::to_string(problem.heads_q) +
                         " is not a multiple of heads_kv (hkv) = " +
                         std::to_string(problem.heads_kv) + ": GQA/MQA needs hq % hkv == 0");
  }
  if (!std::isfinite(problem.scale) || problem.scale < 0) {
    return Status::Error("scale = " + format_double(problem.scale) +
                         ": accepted 0 (the default 1/sqrt(head_dim_qk)) or a finite positive "
                         "number");
  }
  if (problem.mask.kind == MaskKind::window) {
    if (Status status = check_window_bound("left", problem.mask.window_left); !status) {
      return status;
    }
    if (Status status = check_window_bound("right", problem.mask.window_right); !status) {
      return status;
    }
  } else if (problem.mask.window_left != kUnboundedWindow ||
             problem.mask.window_right != kUnboundedWindow) {
    // Bounds on another mask would change nothing but the series key.
    return Status::Error("mask " + mask_name(problem.mask) + " has window bounds (" +
                         std::to_string(problem.mask.window_left) + ", " +
                         std::to_string(problem.mask.window_right) +
                         "): accepted only on window(L,R)");
  }
  if (problem.fp8_scaling != Fp8Scaling::none && !is_fp8(problem.input_dtype)) {
    return Status::Error("fp8_scaling = " + std::string(fp8_scaling_name(problem.fp8_scaling)) +
                         " with dtype = " + std::string(dtype_name(problem.input_dtype)) +
                         ": accepted only with an FP8 input dtype (e4m3, e5m2)");
  }
  if (problem.layout == Layout::qkv_packed) {
    if (Status status = check_packed_shapes(problem); !status) return status;
  }
  if (problem.page_size < 0 || problem.page_size > kMaxDimension) {
    return Status::Error("page (page_size) = " + std::to_string(problem.page_size) +
                         ": accepted 0 (K and V contiguous) or 1 .. " +
                         std::to_string(kMaxDimension));
  }
  if (problem.is_paged()) {
    if (Status status = check_paged(problem); !status) return status;
  }
  if (problem.is_varlen()) {
    if (Status status = check_varlen(problem); !status) return status;
  } else if (problem.layout == Layout::thd) {
    return Status::Error(
        "layout thd without varlen: thd packs a varlen batch; accepted with "
        "varlen=uniform or varlen=list(...)");
  }
  if (!problem.has_backward() && problem.dout != UpstreamGradient::normal) {
    // A forward draws no dO: the field would change nothing but the series key.
    return Status::Error("dout = " + std::string(upstream_gradient_name(problem.dout)) +
                         " with pass = fwd: accepted only with pass bwd or fwd_bwd");
  }
  const int64_t packed_factor = problem.layout == Layout::qkv_packed ? kPackedTensors : 1;
  const bool fits =
      checked_product(
          {problem.batch, problem.seqlen_q, problem.heads_q, problem.head_dim_qk, packed_factor}) &&
      checked_product({problem.batch, problem.seqlen_k, problem.heads_kv,
                       std::max(problem.head_dim_qk, problem.head_dim_v)}) &&
      checked_product({problem.batch, problem.seqlen_q, problem.heads_q, problem.head_dim_v});
  if (!fits) {
    return Status::Error("problem " + shape_string(problem) +
                         " has more elements in one tensor than an int64 index can address");
  }
  return Status::Ok();
}

std::string shape_string(const Problem& problem) {
  std::string text = "b=" + std::to_string(problem.batch);
  text += ",hq=" + std::to_string(problem.heads_q);
  text += ",hkv=" + std::to_string(problem.heads_kv);
  text += ",sq=" + std::to_string(problem.seqlen_q);
  text += ",sk=" + std::to_string(problem.seqlen_k);
  text += ",d=" + std::to_string(problem.head_dim_qk);
  if (problem.head_dim_v != problem.head_dim_qk) {
    text += ",dv=" + std::to_string(problem.head_dim_v);
  }
  text += ",dtype=" + std::string(dtype_name(problem.input_dtype));
  if (problem.output_dtype != default_output_dtype(problem.input_dtype)) {
    text += ",out=" + std::string(dtype_name(problem.output_dtype));
  }
  if (problem.p_dtype != default_p_dtype(problem.input_dtype)) {
    text += ",p=" + std::string(dtype_name(problem.p_dtype));
  }
  if (problem.fp8_scaling != Fp8Scaling::none) {
    text += ",fp8_scaling=" + std::string(fp8_scaling_name(problem.fp8_scaling));
  }
  if (problem.mask.kind != MaskKind::none) text += ",mask=" + mask_name(problem.mask);
  if (problem.is_varlen()) text += ",varlen=" + varlen_name(problem.varlen);
  if (problem.is_paged()) text += ",page=" + std::to_string(problem.page_size);
  if (problem.layout != default_layout(problem.varlen)) {
    text += ",layout=" + std::string(layout_name(problem.layout));
  }
  if (problem.scale != 0) text += ",scale=" + format_double(problem.scale);
  if (problem.pass != Pass::fwd) text += ",pass=" + std::string(pass_name(problem.pass));
  if (problem.dout != UpstreamGradient::normal) {
    text += ",dout=" + std::string(upstream_gradient_name(problem.dout));
  }
  return text;
}

Problem in_pass(Problem problem, Pass pass) {
  problem.pass = pass;
  if (pass == Pass::fwd) problem.dout = UpstreamGradient::normal;
  return problem;
}

std::string inputs_shape(const Problem& problem) { return shape_string(in_pass(problem, Pass::fwd)); }

Status parse_shape(std::string_view text, Problem& problem) {
  if (trim(text).empty()) {
    return Status::Error("empty --shape; expected key=value pairs such as " +
                         shape_string(Problem{}));
  }
  ShapeFields fields;
  for (std::string_view item : split_top_level(text)) {
    const std::string_view trimmed = trim(item);
    const auto equals = trimmed.find('=');
    if (equals == std::string_view::npos) {
      return Status::Error(quoted(trimmed) + " in --shape is not key=value; accepted keys: " +
                           std::string(kShapeKeys));
    }
    const Status status =
        set_field(trim(trimmed.substr(0, equals)), trim(trimmed.substr(equals + 1)), fields);
    if (!status) return status;
  }
  const Problem parsed = problem_from_fields(fields);
  if (Status status = validate(parsed); !status) return status;
  problem = parsed;
  return Status::Ok();
}

DType default_output_dtype(DType input_dtype) {
  return is_fp8(input_dtype) ? DType::bf16 : input_dtype;
}

DType default_p_dtype(DType input_dtype) { return is_fp8(input_dtype) ? DType::e4m3 : DType::f32; }

std::string_view layout_name(Layout layout) {
  switch (layout) {
    case Layout::bshd:
      return "bshd";
    case Layout::bhsd:
      return "bhsd";
    case Layout::qkv_packed:
      return "qkv_packed";
    case Layout::thd:
      return "thd";
  }
  return "unknown";
}

std::optional<Layout> parse_layout(std::string_view text) {
  return parse_enum_name(kAllLayouts, text, layout_name);
}

std::string accepted_layout_names() { return join_enum_names(kAllLayouts, layout_name); }

std::string_view fp8_scaling_name(Fp8Scaling scaling) {
  switch (scaling) {
    case Fp8Scaling::none:
      return "none";
    case Fp8Scaling::per_tensor:
      return "per_tensor";
    case Fp8Scaling::per_head:
      return "per_head";
    case Fp8Scaling::per_block:
      return "per_block";
  }
  return "unknown";
}

std::string_view pass_name(Pass pass) {
  switch (pass) {
    case Pass::fwd:
      return "fwd";
    case Pass::bwd:
      return "bwd";
    case Pass::fwd_bwd:
      return "fwd_bwd";
  }
  return "unknown";
}

std::optional<Pass> parse_pass(std::string_view text) {
  return parse_enum_name(kAllPasses, text, pass_name);
}

std::string accepted_pass_names() { return join_enum_names(kAllPasses, pass_name); }

std::string_view upstream_gradient_name(UpstreamGradient dout) {
  switch (dout) {
    case UpstreamGradient::normal:
      return "normal";
    case UpstreamGradient::small:
      return "small";
    case UpstreamGradient::outliers:
      return "outliers";
  }
  return "unknown";
}

std::optional<UpstreamGradient> parse_upstream_gradient(std::string_view text) {
  return parse_enum_name(kAllUpstreamGradients, text, upstream_gradient_name);
}

std::string accepted_upstream_gradient_names() {
  return join_enum_names(kAllUpstreamGradients, upstream_gradient_name);
}

std::optional<Fp8Scaling> parse_fp8_scaling(std::string_view text) {
  return parse_enum_name(kAllFp8Scalings, text, fp8_scaling_name);
}

std::string accepted_fp8_scaling_names() {
  return join_enum_names(kAllFp8Scalings, fp8_scaling_name);
}

}  // namespace attnbench
