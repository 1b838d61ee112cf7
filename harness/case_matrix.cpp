#include "harness/case_matrix.h"

#include <fnmatch.h>

#include <algorithm>
#include <map>
#include <set>

#include "kernels/registry.h"

namespace attnbench {

bool glob_match(const std::string& pattern, const std::string& text) {
  return fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

Status shape_entry(const std::string& text, SuiteEntry& entry) {
  entry.kernel_globs = {"*"};
  Status status = parse_shape(text, entry.problem);
  if (status.ok) status = validate(entry.problem);
  return status.ok ? status : Status::Error("--shape '" + text + "': " + status.message);
}

Status parse_case_filter(const std::string& text, std::optional<std::regex>& filter) {
  filter.reset();
  if (text.empty()) return Status::Ok();
  try {
    filter.emplace(text, std::regex::extended);
  } catch (const std::regex_error& e) {
    return Status::Error("--filter '" + text + "' is not a valid regular expression: " + e.what());
  }
  return Status::Ok();
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
                     [&](const Kernel& k) { return glob_match(glob, k.name); })) {
      return Status::Error("--kernels: unknown kernel '" + glob + "'; accepted: " + kernel_names() +
                           " (globs allowed)");
    }
  }
  return Status::Ok();
}

namespace {

bool matches_any(const std::vector<std::string>& globs, const std::string& name) {
  return std::any_of(globs.begin(), globs.end(),
                     [&](const std::string& glob) { return glob_match(glob, name); });
}

// Cases sharing inputs run back to back, so inputs and the reference are made once per group.
void order_by_group(std::vector<CaseSpec>& cases) {
  std::map<std::string, size_t> first_position;
  for (size_t i = 0; i < cases.size(); ++i) first_position.emplace(cases[i].group, i);
  std::stable_sort(cases.begin(), cases.end(), [&](const CaseSpec& a, const CaseSpec& b) {
    return first_position[a.group] < first_position[b.group];
  });
}

}  // namespace

std::vector<CaseSpec> expand_cases(const Suite& suite, const std::vector<std::string>& kernel_globs,
                                   const std::optional<std::regex>& filter,
                                   const std::vector<MatrixDevice>& devices) {
  std::vector<CaseSpec> cases;
  std::set<std::string> seen;
  for (const SuiteEntry& entry : suite.entries) {
    Distribution distribution = Distribution::normal;
    parse_distribution(entry.distribution, distribution);
    const std::string shape = shape_string(entry.problem);
    const std::string distribution_text(distribution_name(distribution));
    for (const Kernel& kernel : all_kernels()) {
      if (!matches_any(entry.kernel_globs, kernel.name)) continue;
      if (!kernel_globs.empty() && !matches_any(kernel_globs, kernel.name)) continue;
      for (size_t d = 0; d < devices.size(); ++d) {
        if (devices[d].backend != kernel.backend) continue;
        CaseSpec spec;
        spec.kernel = &kernel;
        spec.problem = entry.problem;
        spec.distribution = distribution;
        spec.device_index = d;
        spec.name = kernel.name + "/" + shape + "/" + distribution_text;
        spec.group = devices[d].label + "|" + shape + "|" + distribution_text;
        if (filter && !std::regex_search(spec.name, *filter)) continue;
        if (!seen.insert(devices[d].label + "|" + spec.name).second) continue;
        cases.push_back(spec);
      }
    }
  }
  order_by_group(cases);
  return cases;
}

}  // namespace attnbench
