#include "harness/core/series_key.h"

#include <vector>

namespace attnbench {

namespace {
constexpr char kSeparator = '|';
constexpr size_t kFields = 5;
// How shape_string (reference/problem.h) names a pass other than fwd: never the first field.
constexpr std::string_view kPassField = ",pass=";
}  // namespace

std::string SeriesKey::text() const {
  std::string key;
  for (const std::string* field : {&kernel, &shape, &distribution, &device, &build}) {
    if (!key.empty() || field != &kernel) key += kSeparator;
    key += *field;
  }
  return key;
}

SeriesKey SeriesKey::kernel_wide() const {
  const Pass of_series = pass();
  std::string shape_any(kAny);
  if (of_series != Pass::fwd) shape_any += std::string(kPassField) + std::string(pass_name(of_series));
  return {kernel, shape_any, std::string(kAny), device, build};
}

bool SeriesKey::is_kernel_wide() const {
  return shape == kAny || shape.rfind(std::string(kAny) + ",", 0) == 0;
}

Pass SeriesKey::pass() const {
  const size_t field = shape.find(kPassField);
  if (field == std::string::npos) return Pass::fwd;
  const size_t begin = field + kPassField.size();
  const size_t end = shape.find(',', begin);
  return parse_pass(std::string_view(shape).substr(begin, end - begin)).value_or(Pass::fwd);
}

std::string SeriesKey::case_label() const {
  return distribution == "normal" || distribution == kAny ? shape : shape + " dist=" + distribution;
}

std::string series_build(const EnvironmentInfo& env) { return env.build_type + " " + env.compiler; }

std::optional<SeriesKey> parse_series_key(std::string_view text) {
  std::vector<std::string> fields;
  size_t start = 0;
  for (size_t bar; (bar = text.find(kSeparator, start)) != std::string_view::npos; start = bar + 1) {
    fields.emplace_back(text.substr(start, bar - start));
  }
  fields.emplace_back(text.substr(start));
  if (fields.size() != kFields) return std::nullopt;
  return SeriesKey{fields[0], fields[1], fields[2], fields[3], fields[4]};
}

}  // namespace attnbench
