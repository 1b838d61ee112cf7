// The case matrix: a suite's entries x the registry's kernels x the devices, as pure functions
// (no store, no processes), shared by `attnbench run` and `attnbench plan` so that what is
// planned is exactly what runs. The steps, in the order select_cases applies them:
//
//   expand_matrix  every (entry, kernel, device) the globs and backends allow, in suite order
//   filter_cases   --filter, a regex on case names
//   dedupe_cases   a case named twice on one device (two entries, one problem) runs once
//   order_by_group the cases sharing inputs and reference (one group) back to back
//   shard_cases    --shard i/n: whole input groups dealt to n runners
#pragma once

#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "harness/core/records.h"
#include "harness/suite/suite.h"
#include "kernels/kernel.h"
#include "kernels/registry.h"

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
  size_t device_index = 0;  // into the devices given to expand_matrix
  std::string name;         // kernel/shape/distribution: the benchmark name, matched by --filter
  // shape|distribution (the shape's forward: every pass of it shares the inputs): what the inputs
  // and the forward's reference depend on.
  std::string inputs;
  std::string group;  // device|inputs: cases sharing inputs on one device
};

// ---- the selection flags
// -------------------------------------------------------------------------

// --shape TEXT: a suite entry for every kernel, after parse_shape and validate; the message
// names the shape.
Result<SuiteEntry> shape_entry(const std::string& text);
// An exact case "kernel|shape|distribution" (`attnbench rerun`): an entry for that kernel only.
Result<SuiteEntry> case_entry(const std::string& text);
// The selection flags as one suite: --suite's entries (by name or path), then each --shape with
// the --dist distribution (checked: the message lists the accepted names; empty: normal), then
// each exact --case. `nothing` is the message when none is given ("nothing to run: ...").
Result<Suite> selection_suite(const std::string& suite, const std::vector<std::string>& shapes,
                              const std::string& distribution, const std::string& pass,
                              const std::vector<std::string>& cases, const std::string& nothing);
// --pass fwd|bwd|fwd_bwd|all, or a comma-separated list (fwd,bwd): the passes named (empty for an
// empty text); the message says what is accepted.
Result<std::vector<Pass>> parse_pass_option(const std::string& text);
// --filter: an extended regular expression on case names (nullopt when `text` is empty).
Result<std::optional<std::regex>> parse_case_filter(const std::string& text);
// --kernels: every glob must name at least one kernel of the registry.
Status check_kernel_globs(const std::vector<std::string>& globs);
// Adds the kernels from outside the build that a selection names (the --plugin libraries, the
// py:module:function kernels and shipped torch.* peers of --kernels and of the suite's
// entries) to the registry, then check_kernel_globs(kernel_globs). Before expand_cases.
Status load_selected_kernels(const Suite& suite, const std::vector<std::string>& kernel_globs,
                             const std::vector<std::string>& plugins);
// The registry's kernel names, comma-separated, for messages.
std::string kernel_names();

// --shard i/n: this runner's share, 1 <= index <= count. The default is the whole matrix.
struct Shard {
  int index = 1;
  int count = 1;
};
// Parses "i/n"; the message says what is accepted.
Result<Shard> parse_shard(const std::string& text);

// ---- the steps
// -----------------------------------------------------------------------------------

// Every (entry, kernel, device) whose kernel is in the entry's globs and in `kernel_globs`
// (empty: all) and runs on that device's backend: entries in suite order, then kernels in
// registry order, then devices in the order given. Nothing removed, nothing reordered.
std::vector<CaseSpec> expand_matrix(const Suite& suite,
                                    const std::vector<std::string>& kernel_globs,
                                    const std::vector<MatrixDevice>& devices);
// The cases whose name the filter finds (std::regex_search); all of them without a filter.
std::vector<CaseSpec> filter_cases(std::vector<CaseSpec> cases,
                                   const std::optional<std::regex>& filter);
// The first of the cases with the same name on the same device; order kept.
std::vector<CaseSpec> dedupe_cases(std::vector<CaseSpec> cases);
// Stable: groups in the order of their first case, the cases of one group back to back in
// their order, so inputs and the reference are made once per group.
std::vector<CaseSpec> order_by_group(std::vector<CaseSpec> cases);
// This shard's cases, order kept. Whole input groups (shape and distribution, every device) go
// to one shard: their cases share inputs and the reference. Groups are dealt round-robin in
// sorted order, independent of the devices, so every runner of a job computes the same split
// and the n shards together hold every case exactly once.
std::vector<CaseSpec> shard_cases(std::vector<CaseSpec> cases, const Shard& shard);

// The steps composed: expand, filter, dedupe, order (what `plan` prices and `run` runs).
std::vector<CaseSpec> expand_cases(const Suite& suite, const std::vector<std::string>& kernel_globs,
                                   const std::optional<std::regex>& filter,
                                   const std::vector<MatrixDevice>& devices);

}  // namespace attnbench
