// A series: one kernel on one problem with one input distribution, on one device model, with one
// build. Its key is how the store, the detector and the report name it; this is the one place
// that builds a key and takes one apart ("kernel|shape|distribution|device|build").
// Kernel-wide aggregates use "*" for the shape and the distribution, one per pass: the shape "*"
// for the forward (as before the pass existed), "*,pass=bwd" and "*,pass=fwd_bwd" for the others,
// so a backward's slowdown is never averaged with its forward's.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "harness/core/records.h"
#include "reference/problem.h"

namespace attnbench {

struct SeriesKey {
  std::string kernel;
  std::string shape;         // reference/problem.h's shape_string
  std::string distribution;  // normal, large_logits, outliers
  std::string device;        // device model, e.g. "NVIDIA H200"
  std::string build;         // build type, compiler and version

  static constexpr std::string_view kAny = "*";

  std::string text() const;
  // The kernel-wide aggregate this series belongs to: same kernel, pass, device and build.
  SeriesKey kernel_wide() const;
  bool is_kernel_wide() const;
  // The pass the shape names (its "pass=" field, as shape_string writes it); fwd without one.
  Pass pass() const;
  // "<shape>" or "<shape> dist=<distribution>": how a case is named to people.
  std::string case_label() const;
  bool operator==(const SeriesKey&) const = default;
};

// A series' build part: the build type and compiler a run was measured with ("Release GNU 12.2.0").
std::string series_build(const EnvironmentInfo& env);

// nullopt unless `text` has exactly five fields separated by '|'.
std::optional<SeriesKey> parse_series_key(std::string_view text);

}  // namespace attnbench
