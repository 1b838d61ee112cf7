// Suite files: TOML text -> the expanded list of (kernel globs, problem, distribution).
//
// Each [[matrix]] block is the cartesian product of its axes. The product is taken in one fixed
// order, outermost first, whatever order the file lists the keys in (the last axis varies
// fastest), so a block reads shape by shape and, inside one shape, dtype by dtype, mask by mask:
//
//   batch | tokens, heads_q, heads_kv | gqa, seqlen | seqlen_q, seqlen_k,
//   head_dim | head_dim_qk, head_dim_v, dtype, out_dtype, p_dtype, fp8_scaling, mask, layout,
//   varlen, page_size, scale, distribution, passes, dout
//
// varlen (reference/varlen.h: "uniform", "list(120,37,512)") makes a block's cases varlen
// batches, layout thd unless the block names a layout; seqlen is then the longest sequence, and a
// list without batch or tokens sets the batch to its length. page_size puts K and V in a paged
// cache of pages that many keys long (docs/serving.md).
//
// dout (the backward's upstream gradient) applies to the bwd and fwd_bwd cases; a block's
// forwards keep dO normal (Problem in_pass), so dout = ["normal", "small"] beside
// passes = ["fwd", "bwd"] asks for one forward and two backwards.
//
// Blocks follow in file order; an entry equal to an earlier one (same globs, problem and
// distribution) is dropped, so the first block that asks for a case decides its place.
//
// Every error is one line naming the file, the line and the field. toml++ throws on syntax
// errors in this build; the exception is caught here and never crosses the API.
#include "harness/suite/suite.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "harness/core/records.h"

namespace attnbench {
namespace {

constexpr std::string_view kTopLevelFields[] = {"name",   "description",   "repetitions",
                                                "max_case_seconds", "energy", "detect_target",
                                                "interleave_gpus", "matrix"};

// Also the expansion order of the axes (everything after "kernels"), outermost first.
constexpr std::string_view kMatrixFields[] = {
    "kernels", "batch",     "tokens",   "heads_q",      "heads_kv",    "gqa",
    "seqlen",  "seqlen_q",  "seqlen_k", "head_dim",     "head_dim_qk", "head_dim_v",
    "dtype",   "out_dtype", "p_dtype",  "fp8_scaling",  "mask",        "layout",
    "varlen",  "page_size", "scale",    "distribution", "passes",      "dout"};

// Pairs of keys that say the same thing two ways: a block may give one of each pair.
constexpr std::pair<std::string_view, std::string_view> kConflictingFields[] = {
    {"batch", "tokens"},    {"heads_kv", "gqa"},         {"seqlen", "seqlen_q"},
    {"seqlen", "seqlen_k"}, {"head_dim", "head_dim_qk"}, {"head_dim", "head_dim_v"}};

// A typo in an axis can multiply a block into millions of cases; refuse that plainly.
constexpr size_t kMaxCasesPerBlock = 100000;

// Overrides the compiled-in suites directory (tests, installed copies).
constexpr const char* kSuitesDirectoryVariable = "ATTNBENCH_SUITES_DIR";
constexpr std::string_view kSuiteExtension = ".toml";

template <typename Range>
std::string join(const Range& items) {
  std::string text;
  for (const auto& item : items) {
    if (!text.empty()) text += ", ";
    text += item;
  }
  return text;
}

template <typename Range>
bool contains(const Range& items, std::string_view wanted) {
  return std::find(std::begin(items), std::end(items), wanted) != std::end(items);
}

int line_of(const toml::node& node) { return static_cast<int>(node.source().begin.line); }

// "string 'big'", "integer 3", "array": what a value is, for type errors.
std::string describe(const toml::node& node) {
  std::ostringstream text;
  text << node.type();
  node.visit([&text](const auto& value) {
    if constexpr (toml::is_value<decltype(value)>) text << ' ' << value;
  });
  return text.str();
}

// toml++'s descriptions are one line today; keep it so if that changes.
std::string single_line(std::string_view text) {
  std::string line(text);
  std::replace(line.begin(), line.end(), '\n', ' ');
  return line;
}

// Builds "file:line: message" errors.
class ErrorSink {
 public:
  explicit ErrorSink(const std::string& source) : source_(source) {}
  Status at(int line, std::string_view message) const {
    return Status::Error(source_ + ":" + std::to_string(line) + ": " + std::string(message));
  }
  Status field(const toml::node& node, std::string_view field, std::string_view message) const {
    return at(line_of(node), "field '" + std::string(field) + "': " + std::string(message));
  }

 private:
  const std::string& source_;
};

// One problem while the axes are being applied; BlockParser::finish completes it.
struct Draft {
  Problem problem;
  std::optional<int64_t> tokens;
  std::optional<int64_t> heads_kv;
  std::optional<int64_t> gqa;
  std::optional<int64_t> head_dim_v;
  std::optional<DType> output_dtype;
  std::optional<DType> p_dtype;
  std::string distribution = "normal";
};
using Setter = std::function<void(Draft&)>;
using Axis = std::vector<Setter>;

struct IntegerField {
  std::string_view name;
  void (*apply)(Draft&, int64_t);
};
constexpr IntegerField kIntegerFields[] = {
    {"batch", [](Draft& d, int64_t v) { d.problem.batch = v; }},
    {"tokens", [](Draft& d, int64_t v) { d.tokens = v; }},
    {"heads_q", [](Draft& d, int64_t v) { d.problem.heads_q = v; }},
    {"heads_kv", [](Draft& d, int64_t v) { d.heads_kv = v; }},
    {"gqa", [](Draft& d, int64_t v) { d.gqa = v; }},
    {"seqlen", [](Draft& d, int64_t v) { d.problem.seqlen_q = d.problem.seqlen_k = v; }},
    {"seqlen_q", [](Draft& d, int64_t v) { d.problem.seqlen_q = v; }},
    {"seqlen_k", [](Draft& d, int64_t v) { d.problem.seqlen_k = v; }},
    {"head_dim", [](Draft& d, int64_t v) { d.problem.head_dim_qk = v; }},
    {"head_dim_qk", [](Draft& d, int64_t v) { d.problem.head_dim_qk = v; }},
    {"head_dim_v", [](Draft& d, int64_t v) { d.head_dim_v = v; }},
    {"page_size", [](Draft& d, int64_t v) { d.problem.page_size = v; }},
};

// A string axis: `parse` gives the setter for one value or nothing when the value is unknown.
struct ChoiceField {
  std::string_view name;
  std::string_view noun;  // "unknown <noun> 'x'"
  std::optional<Setter> (*parse)(std::string_view text);
  std::string (*accepted)();
};

std::optional<Setter> parse_input_dtype(std::string_view text) {
  const auto dtype = parse_dtype(text);
  if (!dtype) return std::nullopt;
  return [value = *dtype](Draft& d) { d.problem.input_dtype = value; };
}
std::optional<Setter> parse_output_dtype(std::string_view text) {
  const auto dtype = parse_dtype(text);
  if (!dtype) return std::nullopt;
  return [value = *dtype](Draft& d) { d.output_dtype = value; };
}
std::optional<Setter> parse_p_dtype(std::string_view text) {
  const auto dtype = parse_dtype(text);
  if (!dtype) return std::nullopt;
  return [value = *dtype](Draft& d) { d.p_dtype = value; };
}
std::optional<Setter> parse_scaling(std::string_view text) {
  const auto scaling = parse_fp8_scaling(text);
  if (!scaling) return std::nullopt;
  return [value = *scaling](Draft& d) { d.problem.fp8_scaling = value; };
}
std::optional<Setter> parse_mask_value(std::string_view text) {
  const auto mask = parse_mask(text);
  if (!mask) return std::nullopt;
  return [value = *mask](Draft& d) { d.problem.mask = value; };
}
std::optional<Setter> parse_layout_value(std::string_view text) {
  const auto layout = parse_layout(text);
  if (!layout) return std::nullopt;
  return [value = *layout](Draft& d) { d.problem.layout = value; };
}
std::optional<Setter> parse_varlen_value(std::string_view text) {
  auto varlen = parse_varlen(text);
  if (!varlen) return std::nullopt;
  return [value = std::move(*varlen)](Draft& d) { d.problem.varlen = value; };
}
std::optional<Setter> parse_distribution(std::string_view text) {
  if (!contains(distribution_names(), text)) return std::nullopt;
  return [value = std::string(text)](Draft& d) { d.distribution = value; };
}

std::optional<Setter> parse_pass_value(std::string_view text) {
  const auto pass = parse_pass(text);
  if (!pass) return std::nullopt;
  return [value = *pass](Draft& d) { d.problem.pass = value; };
}

std::optional<Setter> parse_dout_value(std::string_view text) {
  const auto dout = parse_upstream_gradient(text);
  if (!dout) return std::nullopt;
  return [value = *dout](Draft& d) { d.problem.dout = value; };
}

constexpr ChoiceField kChoiceFields[] = {
    {"dtype", "dtype", parse_input_dtype, accepted_dtype_names},
    {"out_dtype", "dtype", parse_output_dtype, accepted_dtype_names},
    {"p_dtype", "dtype", parse_p_dtype, accepted_dtype_names},
    {"fp8_scaling", "fp8 scaling", parse_scaling, accepted_fp8_scaling_names},
    {"mask", "mask", parse_mask_value, accepted_mask_names},
    {"layout", "layout", parse_layout_value, accepted_layout_names},
    {"varlen", "varlen", parse_varlen_value, accepted_varlen_names},
    {"distribution", "distribution", parse_distribution, accepted_distribution_names},
    {"passes", "pass", parse_pass_value, accepted_pass_names},
    {"dout", "upstream gradient", parse_dout_value, accepted_upstream_gradient_names},
};

// Reads one [[matrix]] block: its kernel globs and the product of its axes.
class BlockParser {
 public:
  BlockParser(const toml::table& block, int block_line, const ErrorSink& errors)
      : block_(block), block_line_(block_line), errors_(errors) {}

  Status parse(std::vector<std::string>& kernel_globs, std::vector<Draft>& drafts) {
    if (Status status = check_fields(); !status) return status;
    if (Status status = read_kernels(kernel_globs); !status) return status;
    std::vector<Axis> axes;
    for (const std::string_view field : kMatrixFields) {
      if (field == "kernels" || !block_.contains(field)) continue;
      Axis axis;
      if (Status status = read_axis(field, *block_.get(field), axis); !status) return status;
      axes.push_back(std::move(axis));
    }
    return expand(axes, drafts);
  }

  // Applies the defaults and the derived fields (tokens, gqa) to one expanded draft.
  Status finish(Draft& draft) const {
    Problem& problem = draft.problem;
    if (draft.tokens) problem.batch = std::max<int64_t>(1, *draft.tokens / problem.seqlen_k);
    problem.heads_kv = draft.heads_kv.value_or(problem.heads_q);
    if (problem.is_varlen() && !block_.contains("layout")) problem.layout = Layout::thd;
    const bool batch_given = block_.contains("batch") || block_.contains("tokens");
    if (problem.varlen.kind == VarlenKind::list && !batch_given) {
      problem.batch = static_cast<int64_t>(problem.varlen.query_lengths.size());
    }
    if (draft.gqa) {
      if (problem.heads_q % *draft.gqa != 0) {
        return errors_.field(*block_.get("gqa"), "gqa",
                             std::to_string(*draft.gqa) + " does not divide heads_q " +
                                 std::to_string(problem.heads_q));
      }
      problem.heads_kv = problem.heads_q / *draft.gqa;
    }
    problem.head_dim_v = draft.head_dim_v.value_or(problem.head_dim_qk);
    problem.output_dtype = draft.output_dtype.value_or(default_output_dtype(problem.input_dtype));
    problem.p_dtype = draft.p_dtype.value_or(default_p_dtype(problem.input_dtype));
    problem = in_pass(problem, problem.pass);  // a forward draws no dO
    if (Status status = validate(problem); !status) {
      return errors_.at(block_line_,
                        "[[matrix]] case " + shape_string(problem) + ": " + status.message);
    }
    return Status::Ok();
  }

 private:
  Status check_fields() const {
    for (const auto& [key, value] : block_) {
      if (!contains(kMatrixFields, key.str())) {
        return errors_.at(line_of(value), "unknown field '" + std::string(key.str()) +
                                              "' in [[matrix]]; accepted: " + join(kMatrixFields));
      }
    }
    for (const auto& [first, second] : kConflictingFields) {
      const toml::node* first_node = block_.get(first);
      const toml::node* second_node = block_.get(second);
      if (first_node == nullptr || second_node == nullptr) continue;
      const bool second_is_later = line_of(*second_node) >= line_of(*first_node);
      const toml::node& later = second_is_later ? *second_node : *first_node;
      const std::string_view later_name = second_is_later ? second : first;
      const std::string_view earlier_name = second_is_later ? first : second;
      return errors_.field(later, later_name,
                           "conflicts with '" + std::string(earlier_name) + "'; give one of them");
    }
    if (!block_.contains("seqlen") &&
        !(block_.contains("seqlen_q") && block_.contains("seqlen_k"))) {
      return errors_.at(block_line_,
                        "[[matrix]] needs field 'seqlen' (or both 'seqlen_q' and 'seqlen_k')");
    }
    return Status::Ok();
  }

  // The values of a key: its elements when it is an array, else the key itself.
  Status values_of(const toml::node& node, std::string_view field,
                   std::vector<const toml::node*>& values) const {
    values.clear();
    if (const toml::array* array = node.as_array()) {
      if (array->empty()) {
        return errors_.field(node, field, "empty array; an empty axis makes an empty matrix");
      }
      for (const toml::node& element : *array) values.push_back(&element);
    } else {
      values.push_back(&node);
    }
    return Status::Ok();
  }

  Status read_kernels(std::vector<std::string>& kernel_globs) const {
    const toml::node* node = block_.get("kernels");
    if (node == nullptr) {
      return errors_.at(block_line_, "[[matrix]] needs field 'kernels' (globs over kernel names)");
    }
    std::vector<const toml::node*> values;
    if (Status status = values_of(*node, "kernels", values); !status) return status;
    kernel_globs.clear();
    for (const toml::node* value : values) {
      const std::optional<std::string> glob = value->value<std::string>();
      if (!value->is_string() || !glob || glob->empty()) {
        return errors_.field(
            *value, "kernels",
            "expected a glob or an array of globs (non-empty strings), got " + describe(*value));
      }
      kernel_globs.push_back(*glob);
    }
    return Status::Ok();
  }

  Status read_axis(std::string_view field, const toml::node& node, Axis& axis) const {
    std::vector<const toml::node*> values;
    if (Status status = values_of(node, field, values); !status) return status;
    for (const IntegerField& integer_field : kIntegerFields) {
      if (integer_field.name == field) return read_integers(integer_field, values, axis);
    }
    for (const ChoiceField& choice_field : kChoiceFields) {
      if (choice_field.name == field) return read_choices(choice_field, values, axis);
    }
    return read_scales(values, axis);  // "scale" is the one remaining axis
  }

  Status read_integers(const IntegerField& field, const std::vector<const toml::node*>& values,
                       Axis& axis) const {
    for (const toml::node* value : values) {
      if (!value->is_integer()) {
        return errors_.field(
            *value, field.name,
            "expected an integer or an array of integers, got " + describe(*value));
      }
      const int64_t number = **value->as_integer();
      if (number < 1) {
        return errors_.field(*value, field.name,
                             std::to_string(number) + " is out of range; must be at least 1");
      }
      axis.push_back([apply = field.apply, number](Draft& d) { apply(d, number); });
    }
    return Status::Ok();
  }

  Status read_choices(const ChoiceField& field, const std::vector<const toml::node*>& values,
                      Axis& axis) const {
    for (const toml::node* value : values) {
      if (!value->is_string()) {
        return errors_.field(*value, field.name,
                             "expected a string or an array of strings, got " + describe(*value));
      }
      const std::string& text = **value->as_string();
      std::optional<Setter> setter = field.parse(text);
      if (!setter) {
        return errors_.field(*value, field.name,
                             "unknown " + std::string(field.noun) + " '" + text +
                                 "'; accepted: " + field.accepted());
      }
      axis.push_back(std::move(*setter));
    }
    return Status::Ok();
  }

  Status read_scales(const std::vector<const toml::node*>& values, Axis& axis) const {
    for (const toml::node* value : values) {
      if (!value->is_number()) {
        return errors_.field(*value, "scale",
                             "expected a number or an array of numbers, got " + describe(*value));
      }
      const double scale = *value->value<double>();
      if (!std::isfinite(scale) || scale <= 0) {
        return errors_.field(*value, "scale",
                             describe(*value) + " is out of range; must be a finite number > 0");
      }
      axis.push_back([scale](Draft& d) { d.problem.scale = scale; });
    }
    return Status::Ok();
  }

  // Cartesian product: the first axis is the outermost loop.
  Status expand(const std::vector<Axis>& axes, std::vector<Draft>& drafts) const {
    size_t count = 1;
    for (const Axis& axis : axes) {
      count *= axis.size();
      if (count > kMaxCasesPerBlock) {
        return errors_.at(block_line_, "[[matrix]] expands to more than " +
                                           std::to_string(kMaxCasesPerBlock) + " cases");
      }
    }
    drafts.assign(1, Draft{});
    for (const Axis& axis : axes) {
      std::vector<Draft> next;
      next.reserve(drafts.size() * axis.size());
      for (const Draft& draft : drafts) {
        for (const Setter& set : axis) {
          next.push_back(draft);
          set(next.back());
        }
      }
      drafts = std::move(next);
    }
    return Status::Ok();
  }

  const toml::table& block_;
  int block_line_;
  const ErrorSink& errors_;
};

size_t entry_hash(const SuiteEntry& entry) {
  const Problem& p = entry.problem;
  size_t hash = std::hash<std::string>{}(entry.distribution);
  const auto mix = [&hash](size_t value) {
    // boost::hash_combine's constant (the golden ratio's fraction bits) spreads nearby values.
    constexpr size_t kGoldenRatioBits = 0x9e3779b97f4a7c15ULL;
    hash ^= value + kGoldenRatioBits + (hash << 6) + (hash >> 2);
  };
  for (const std::string& glob : entry.kernel_globs) mix(std::hash<std::string>{}(glob));
  for (const int64_t field : {p.batch, p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k, p.head_dim_qk,
                              p.head_dim_v, p.mask.window_left, p.mask.window_right}) {
    mix(std::hash<int64_t>{}(field));
  }
  for (const int field : {static_cast<int>(p.input_dtype), static_cast<int>(p.output_dtype),
                          static_cast<int>(p.p_dtype), static_cast<int>(p.fp8_scaling),
                          static_cast<int>(p.mask.kind), static_cast<int>(p.layout)}) {
    mix(std::hash<int>{}(field));
  }
  mix(std::hash<double>{}(p.scale));
  return hash;
}

bool same_case(const SuiteEntry& a, const SuiteEntry& b) {
  return a.kernel_globs == b.kernel_globs && a.problem == b.problem &&
         a.distribution == b.distribution;
}

// Adds entries, dropping any equal to one already present.
class EntryList {
 public:
  explicit EntryList(std::vector<SuiteEntry>& entries) : entries_(entries) {}
  void add(SuiteEntry entry) {
    const size_t hash = entry_hash(entry);
    const auto [first, last] = by_hash_.equal_range(hash);
    for (auto it = first; it != last; ++it) {
      if (same_case(entries_[it->second], entry)) return;
    }
    by_hash_.emplace(hash, entries_.size());
    entries_.push_back(std::move(entry));
  }

 private:
  std::vector<SuiteEntry>& entries_;
  std::unordered_multimap<size_t, size_t> by_hash_;
};

Status read_string(const toml::node& node, std::string_view field, std::string& out,
                   const ErrorSink& errors) {
  if (!node.is_string()) {
    return errors.field(node, field, "expected a string, got " + describe(node));
  }
  out = **node.as_string();
  return Status::Ok();
}

Status read_settings(const toml::table& root, Suite& suite, const ErrorSink& errors) {
  for (const auto& [key, value] : root) {
    if (!contains(kTopLevelFields, key.str())) {
      return errors.at(line_of(value), "unknown field '" + std::string(key.str()) +
                                           "'; accepted: " + join(kTopLevelFields));
    }
  }
  if (const toml::node* node = root.get("name")) {
    if (Status status = read_string(*node, "name", suite.name, errors); !status) return status;
  }
  if (const toml::node* node = root.get("description")) {
    if (Status status = read_string(*node, "description", suite.description, errors); !status) {
      return status;
    }
  }
  if (const toml::node* node = root.get("repetitions")) {
    if (!node->is_integer() || **node->as_integer() < 1) {
      return errors.field(*node, "repetitions",
                          "expected an integer of at least 1, got " + describe(*node));
    }
    suite.repetitions =
        static_cast<int>(std::min<int64_t>(**node->as_integer(), std::numeric_limits<int>::max()));
  }
  if (const toml::node* node = root.get("max_case_seconds")) {
    const std::optional<double> seconds = node->value<double>();
    if (!node->is_number() || !seconds || !std::isfinite(*seconds) || *seconds <= 0) {
      return errors.field(*node, "max_case_seconds",
                          "expected a number > 0, got " + describe(*node));
    }
    suite.max_case_seconds = *seconds;
  }
  if (const toml::node* node = root.get("detect_target")) {
    const std::optional<double> percent = node->value<double>();
    if (!node->is_number() || !percent || !std::isfinite(*percent) || *percent <= 0 ||
        *percent > 100) {
      return errors.field(*node, "detect_target",
                          "expected a percentage > 0 and <= 100, got " + describe(*node));
    }
    suite.detect_target = *percent / 100;
  }
  if (const toml::node* node = root.get("energy")) {
    if (!node->is_boolean()) {
      return errors.field(*node, "energy", "expected true or false, got " + describe(*node));
    }
    suite.measure_energy = **node->as_boolean();
  }
  if (const toml::node* node = root.get("interleave_gpus")) {
    if (!node->is_boolean()) {
      return errors.field(*node, "interleave_gpus",
                          "expected true or false, got " + describe(*node));
    }
    suite.interleave_gpus = **node->as_boolean();
  }
  return Status::Ok();
}

Status read_matrix(const toml::table& root, Suite& suite, const ErrorSink& errors) {
  const toml::node* matrix = root.get("matrix");
  if (matrix == nullptr) {
    return errors.at(1, "no [[matrix]] blocks; a suite needs at least one");
  }
  const toml::array* blocks = matrix->as_array();
  if (blocks == nullptr || !blocks->is_array_of_tables() || blocks->empty()) {
    return errors.field(
        *matrix, "matrix",
        "expected [[matrix]] blocks (an array of tables), got " + describe(*matrix));
  }
  EntryList entries(suite.entries);
  for (const toml::node& block_node : *blocks) {
    const int block_line = line_of(block_node);
    BlockParser block(*block_node.as_table(), block_line, errors);
    std::vector<std::string> kernel_globs;
    std::vector<Draft> drafts;
    if (Status status = block.parse(kernel_globs, drafts); !status) return status;
    for (Draft& draft : drafts) {
      if (Status status = block.finish(draft); !status) return status;
      entries.add({kernel_globs, draft.problem, draft.distribution, block_line});
    }
  }
  return Status::Ok();
}

bool looks_like_path(std::string_view text) {
  return text.find('/') != std::string_view::npos || text.ends_with(kSuiteExtension);
}

Result<std::string> read_file(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    return Status::Error(
        "cannot read suite file '" + path +
        "': " + (std::filesystem::exists(path, error) ? "not a regular file" : "no such file"));
  }
  std::ifstream file(path, std::ios::binary);
  std::ostringstream contents;
  contents << file.rdbuf();
  if (!file) return Status::Error("cannot read suite file '" + path + "'");
  return contents.str();
}

// Suite files in the suites directory, sorted by name.
std::vector<std::filesystem::path> suite_files() {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  for (const auto& item : std::filesystem::directory_iterator(suites_directory(), error)) {
    if (item.is_regular_file(error) && item.path().extension() == kSuiteExtension) {
      files.push_back(item.path());
    }
  }
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a.stem() < b.stem(); });
  return files;
}

}  // namespace

const std::vector<std::string>& distribution_names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const Distribution distribution : kDistributions) {
      names.emplace_back(distribution_name(distribution));
    }
    return names;
  }();
  return kNames;
}

Result<Suite> parse_suite(std::string_view text, const std::string& source) {
  const ErrorSink errors(source);
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& error) {
    return errors.at(static_cast<int>(error.source().begin.line),
                     "TOML syntax error: " + single_line(error.description()));
  }
  Suite parsed;
  parsed.path = source;
  parsed.name = std::filesystem::path(source).stem().string();
  if (Status status = read_settings(root, parsed, errors); !status) return status;
  if (Status status = read_matrix(root, parsed, errors); !status) return status;
  return parsed;
}

Result<Suite> load_suite(const std::string& name_or_path) {
  std::string path = name_or_path;
  if (!looks_like_path(name_or_path)) {
    path = suites_directory() + "/" + name_or_path + std::string(kSuiteExtension);
    std::error_code error;
    if (!std::filesystem::is_regular_file(path, error)) {
      std::vector<std::string> names;
      for (const auto& [name, description] : list_suites()) names.push_back(name);
      const std::string available = names.empty() ? "none in " + suites_directory() : join(names);
      return Status::Error("unknown suite '" + name_or_path + "'; available: " + available +
                           " (or a path to a .toml file)");
    }
  }
  const Result<std::string> text = read_file(path);
  if (!text) return text.status();
  return parse_suite(*text, path);
}

std::string suites_directory() {
  const char* directory = std::getenv(kSuitesDirectoryVariable);
  if (directory != nullptr && *directory != '\0') return directory;
  return ATTNBENCH_SOURCE_DIR "/suites";
}

std::vector<std::pair<std::string, std::string>> list_suites() {
  std::vector<std::pair<std::string, std::string>> suites;
  for (const std::filesystem::path& file : suite_files()) {
    // Only the description is read, so one broken file does not hide the others.
    std::string description;
    if (const Result<std::string> text = read_file(file.string()); !text) {
      description = "(unreadable: " + text.status().message + ")";
    } else {
      try {
        const toml::table root = toml::parse(*text, file.string());
        description = root["description"].value_or(std::string());
      } catch (const toml::parse_error& error) {
        description = "(unreadable: TOML syntax error on line " +
                      std::to_string(error.source().begin.line) + ")";
      }
    }
    suites.emplace_back(file.stem().string(), std::move(description));
  }
  return suites;
}

}  // namespace attnbench
