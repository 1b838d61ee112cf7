#include "harness/core/series_key.h"

#include <vector>

namespace attnbench {

namespace {
constexpr char kSeparator = '|';
constexpr size_t kFields = 5;
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
  return {kernel, std::string(kAny), std::string(kAny), device, build};
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
