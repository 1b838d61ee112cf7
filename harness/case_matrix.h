// The case matrix: a suite's entries x the registry's kernels x the devices, as a pure function
// (no store, no processes), shared by `attnbench run` and `attnbench plan` so that what is
// planned is exactly what runs.
#pragma once

#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "harness/inputs.h"
#include "harness/suite.h"
#include "kernels/kernel.h"

namespace attnbench {

// A device as the matrix sees it: which kernels run there and its label ("cpu", "cuda:0").
struct MatrixDevice {
  Backend backend = Backend::cpu;
  std::string label;
};

struct CaseSpec {
  const Kernel* kernel = nullptr;
  Problem problem;
  Distribution distribution = Distribution::normal;
  size_t device_index = 0;  // into the devices given to expand_cases
  std::string name;         // kernel/shape/distribution: the benchmark name, matched by --filter
  std::string group;        // device + shape + distribution: cases sharing inputs and reference
};

bool glob_match(const std::string& pattern, const std::string& text);

// --shape TEXT: a suite entry for every kernel, after parse_shape and validate; the message
// names the shape.
Status shape_entry(const std::string& text, SuiteEntry& entry);
// --filter: an extended regular expression on case names (none when `text` is empty).
Status parse_case_filter(const std::string& text, std::optional<std::regex>& filter);
// --kernels: every glob must name at least one kernel of the registry.
Status check_kernel_globs(const std::vector<std::string>& globs);
// The registry's kernel names, comma-separated, for messages.
std::string kernel_names();

// Every (entry, kernel, device) whose kernel is in the entry's globs and in `kernel_globs`
// (empty: all), runs on that device's backend and whose name matches `filter`, once each, in
// suite order with the cases of one group (same inputs and reference) back to back.
std::vector<CaseSpec> expand_cases(const Suite& suite, const std::vector<std::string>& kernel_globs,
                                   const std::optional<std::regex>& filter,
                                   const std::vector<MatrixDevice>& devices);

}  // namespace attnbench
