#include "harness/suite/case_matrix.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <set>
#include <string_view>
#include <utility>

#include "kernels/registry.h"

namespace attnbench {

// ---- the selection flags
// -------------------------------------------------------------------------

Result<SuiteEntry> shape_entry(const std::string& text) {
  SuiteEntry entry;
  entry.kernel_globs = {"*"};
  Status status = parse_shape(text, entry.problem);
  if (status.ok) status = validate(entry.problem);
  if (!status.ok) return Status::Error("--shape '" + text + "': " + status.message);
  return entry;
}

Result<SuiteEntry> case_entry(const std::string& text) {
  SuiteEntry entry;
  const size_t first = text.find('|');
  const size_t last = text.rfind('|');
  Distribution distribution = Distribution::normal;
  if (first == std::string::npos || first == last || first == 0 ||
      !parse_distribution(text.substr(last + 1), distribution) ||
      !parse_shape(text.substr(first + 1, last - first - 1), entry.problem).ok) {
    return Status::Error("case '" + text + "': accepted: kernel|shape|distribution");
  }
  entry.kernel_globs = {text.substr(0, first)};
  entry.distribution = std::string(distribution_name(distribution));
  return entry;
}

Result<Suite> selection_suite(const std::string& suite, const std::vector<std::string>& shapes,
                              const std::string& distribution, const std::string& pass,
                              const std::vector<std::string>& cases, const std::string& nothing) {
  Suite selection;
  if (!suite.empty()) {
    Result<Suite> loaded = load_suite(suite);
    if (!loaded) return loaded.status();
    selection = std::move(*loaded);
  }
  Distribution shape_distribution = Distribution::normal;
  if (!distribution.empty() && !parse_distribution(distribution, shape_distribution)) {
    return Status::Error("--dist '" + distribution +
                         "': accepted: " + accepted_distribution_names());
  }
  const Result<std::vector<Pass>> passes = parse_pass_option(pass);
  if (!passes) return passes.status();
  if (!passes->empty()) {  // the suite's cases of those passes
    std::erase_if(selection.entries, [&](const SuiteEntry& entry) {
      return std::find(passes->begin(), passes->end(), entry.problem.pass) == passes->end();
    });
  }
  for (const std::string& text : shapes) {
    Result<SuiteEntry> entry = shape_entry(text);
    if (!entry) return entry.status();
    entry->distribution = std::string(distribution_name(shape_distribution));
    if (passes->empty()) {
      selection.entries.push_back(std::move(*entry));
      continue;
    }
    for (const Pass each : *passes) {  // the shape in each pass named
      SuiteEntry entry_in_pass = *entry;
      entry_in_pass.problem = in_pass(entry->problem, each);
      selection.entries.push_back(std::move(entry_in_pass));
    }
  }
  for (const std::string& text : cases) {
    Result<SuiteEntry> entry = case_entry(text);
    if (!entry) return entry.status();
    selection.entries.push_back(std::move(*entry));
  }
  if (suite.empty() && shapes.empty() && cases.empty()) return Status::Error(nothing);
  return selection;
}

Result<std::vector<Pass>> parse_pass_option(const std::string& text) {
  if (text.empty()) return std::vector<Pass>{};
  if (text == "all") return std::vector<Pass>(std::begin(kAllPasses), std::end(kAllPasses));
  std::vector<Pass> passes;
  for (size_t start = 0; start <= text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::optional<Pass> pass =
        parse_pass(std::string_view(text).substr(start, comma - start));
    if (!pass) {
      return Status::Error("--pass '" + text + "': accepted: " + accepted_pass_names() +
                           ", all, or a comma-separated list of passes");
    }
    if (std::find(passes.begin(), passes.end(), *pass) == passes.end()) passes.push_back(*pass);
    start = comma + 1;
  }
  return passes;
}

Result<std::optional<std::regex>> parse_case_filter(const std::string& text) {
  std::optional<std::regex> filter;
  if (text.empty()) return filter;
  try {
    filter.emplace(text, std::regex::extended);
  } catch (const std::regex_error& e) {
    return Status::Error("--filter '" + text + "' is not a valid regular expression: " + e.what());
  }
  return filter;
}

std::string kernel_names() {
  std::string names;
  for (const Kernel& k : all_kernels()) names += (names.empty() ? "" : ", ") + k.name;
  return names;
}

Status check_kernel_globs(const std::vector<std::string>& globs) {
  for (const std::string& glob : globs) {
    const auto& kernels = all_kernels();
    if (std::none_of(kernels.begin(), kernels.end(),
                     [&](const Kernel& k) { return kernel_selected(glob, k); })) {
      return Status::Error("--kernels: unknown kernel '" + glob + "'; accepted: " + kernel_names() +
                           " (globs allowed)");
    }
  }
  return Status::Ok();
}

Status load_selected_kernels(const Suite& suite, const std::vector<std::string>& kernel_globs,
                             const std::vector<std::string>& plugins) {
  std::vector<std::string> globs = kernel_globs;
  for (const SuiteEntry& entry : suite.entries) {
    globs.insert(globs.end(), entry.kernel_globs.begin(), entry.kernel_globs.end());
  }
  if (Status s = add_requested_kernels(plugins, globs); !s.ok) return s;
  return check_kernel_globs(kernel_globs);
}

namespace {

// A whole decimal integer, digits only (no sign, no spaces).
std::optional<int> parse_count(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text.front())) ||
      error != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

}  // namespace

Result<Shard> parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  const std::string_view view(text);
  const std::optional<int> index =
      slash == std::string::npos ? std::nullopt : parse_count(view.substr(0, slash));
  const std::optional<int> count =
      slash == std::string::npos ? std::nullopt : parse_count(view.substr(slash + 1));
  if (!index || !count || *count < 1 || *index < 1 || *index > *count) {
    return Status::Error("--shard '" + text + "': accepted: i/n with 1 <= i <= n, e.g. 2/4");
  }
  return Shard{*index, *count};
}

// ---- the steps
// -----------------------------------------------------------------------------------

namespace {

bool matches_any(const std::vector<std::string>& globs, const std::string& name) {
  return std::any_of(globs.begin(), globs.end(),
                     [&](const std::string& glob) { return glob_match(glob, name); });
}

// A suite entry names families; --kernels (kernel_selected) names kernels, variants only by name.
bool selected(const SuiteEntry& entry, const std::vector<std::string>& kernel_globs,
              const Kernel& kernel) {
  if (!matches_any(entry.kernel_globs, family_name(kernel))) return false;
  if (kernel_globs.empty()) return kernel.variant_of.empty();
  return std::any_of(kernel_globs.begin(), kernel_globs.end(),
                     [&](const std::string& glob) { return kernel_selected(glob, kernel); });
}

}  // namespace

std::vector<CaseSpec> expand_matrix(const Suite& suite,
                                    const std::vector<std::string>& kernel_globs,
                                    const std::vector<MatrixDevice>& devices) {
  std::vector<CaseSpec> cases;
  for (const SuiteEntry& entry : suite.entries) {
    Distribution distribution = Distribution::normal;
    parse_distribution(entry.distribution, distribution);  // the suite parser checked it
    const std::string shape = shape_string(entry.problem);
    // The passes of one shape share their inputs and the forward's reference: one group.
    const std::string inputs =
        inputs_shape(entry.problem) + "|" + std::string(distribution_name(distribution));
    for (const Kernel& kernel : all_kernels()) {
      if (!selected(entry, kernel_globs, kernel)) continue;
      for (size_t d = 0; d < devices.size(); ++d) {
        if (devices[d].backend != kernel.backend) continue;
        CaseSpec spec;
        spec.kernel = &kernel;
        spec.problem = entry.problem;
        spec.distribution = distribution;
        spec.device_index = d;
        spec.name = kernel.name + "/" + shape + "/" + std::string(distribution_name(distribution));
        spec.inputs = inputs;
        spec.group = devices[d].label + "|" + inputs;
        cases.push_back(std::move(spec));
      }
    }
  }
  return cases;
}

std::vector<CaseSpec> filter_cases(std::vector<CaseSpec> cases,
                                   const std::optional<std::regex>& filter) {
  if (filter) {
    std::erase_if(cases,
                  [&](const CaseSpec& spec) { return !std::regex_search(spec.name, *filter); });
  }
  return cases;
}

std::vector<CaseSpec> dedupe_cases(std::vector<CaseSpec> cases) {
  std::set<std::pair<size_t, std::string>> seen;
  std::erase_if(cases, [&](const CaseSpec& spec) {
    return !seen.insert({spec.device_index, spec.name}).second;
  });
  return cases;
}

std::vector<CaseSpec> order_by_group(std::vector<CaseSpec> cases) {
  std::map<std::string, size_t> first_position;
  for (size_t i = 0; i < cases.size(); ++i) first_position.emplace(cases[i].group, i);
  std::stable_sort(cases.begin(), cases.end(), [&](const CaseSpec& a, const CaseSpec& b) {
    return first_position.at(a.group) < first_position.at(b.group);
  });
  return cases;
}

std::vector<CaseSpec> shard_cases(std::vector<CaseSpec> cases, const Shard& shard) {
  std::map<std::string, int> shard_of;  // sorted: the same deal on every runner
  for (const CaseSpec& spec : cases) shard_of.emplace(spec.inputs, 0);
  int position = 0;
  for (auto& [inputs, index] : shard_of) index = position++ % shard.count + 1;
  std::erase_if(cases,
                [&](const CaseSpec& spec) { return shard_of.at(spec.inputs) != shard.index; });
  return cases;
}

std::vector<CaseSpec> expand_cases(const Suite& suite, const std::vector<std::string>& kernel_globs,
                                   const std::optional<std::regex>& filter,
                                   const std::vector<MatrixDevice>& devices) {
  return order_by_group(
      dedupe_cases(filter_cases(expand_matrix(suite, kernel_globs, devices), filter)));
}

}  // namespace attnbench
