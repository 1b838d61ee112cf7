#include "harness/cli/tune_command.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "harness/analysis/mann_whitney.h"
#include "harness/cli/command_support.h"
#include "harness/core/progress.h"
#include "harness/store/store.h"
#include "kernels/registry.h"

namespace attnbench {
namespace {

// A margin counts when a one-sided Mann-Whitney test puts the fastest's repetitions below the
// default's at this level; otherwise tune says the difference is within the host's noise.
constexpr double kSignificance = 0.05;

// The kernels that publish variants, for the error that names what --kernel accepts.
std::string families_with_variants() {
  std::set<std::string> families;
  for (const Kernel& kernel : all_kernels()) {
    if (!kernel.variant_of.empty()) families.insert(kernel.variant_of);
  }
  std::string names;
  for (const std::string& family : families) names += (names.empty() ? "" : ", ") + family;
  return names;
}

Status check_family(const std::string& name) {
  const Kernel* kernel = find_kernel(name);
  const std::string accepted =
      "; accepted: a kernel with variants (" + families_with_variants() + ")";
  if (kernel == nullptr) return Status::Error("--kernel '" + name + "': unknown kernel" + accepted);
  if (!kernel->variant_of.empty()) {
    return Status::Error("--kernel '" + name + "' is a variant of " + kernel->variant_of +
                         "; give its family" + accepted);
  }
  if (variants_of(name).empty()) {
    return Status::Error("--kernel '" + name + "' has no variants" + accepted);
  }
  return Status::Ok();
}

// One shape on one device: the family kernel's result and its variants'.
struct ShapeResults {
  const ResultRecord* family = nullptr;
  std::vector<const ResultRecord*> variants;
};
using ShapeKey = std::tuple<std::string, std::string, std::string>;  // device, shape, distribution

std::map<ShapeKey, ShapeResults> by_shape(const StoredRun& run, const std::string& family) {
  std::map<ShapeKey, ShapeResults> shapes;
  for (const ResultRecord& r : run.results) {
    ShapeResults& shape = shapes[{r.device_name, shape_string(r.problem), r.distribution}];
    if (r.kernel == family) {
      shape.family = &r;
    } else {
      shape.variants.push_back(&r);
    }
  }
  return shapes;
}

bool timed_pass(const ResultRecord* r) {
  return r != nullptr && r->status == ResultStatus::passed && r->timing.timed;
}

// "cpu.flash[block_q=128,block_k=256] 1.10 ms, 10.9 % faster than the default
// (block_q=256,block_k=512, 1.22 ms)", or what kept a shape from a verdict.
std::string verdict(const std::string& family, const ShapeResults& shape) {
  std::vector<const ResultRecord*> all = shape.variants;
  if (shape.family != nullptr) all.insert(all.begin(), shape.family);
  const auto count = [&](ResultStatus status) {
    return std::count_if(all.begin(), all.end(),
                         [&](const ResultRecord* r) { return r->status == status; });
  };
  const auto passed = count(ResultStatus::passed);
  const auto skipped = count(ResultStatus::skipped);
  const std::string checked =
      std::to_string(passed) + " of " + std::to_string(all.size() - skipped) +
      " passed their check" +
      (skipped > 0 ? " (" + std::to_string(skipped) + " skipped: outside their tables)" : "");
  std::vector<const ResultRecord*> timed;
  std::copy_if(all.begin(), all.end(), std::back_inserter(timed), timed_pass);
  if (timed.empty()) {
    return checked + (passed == 0 ? "; nothing to compare"
                                  : "; none timed (the emulated device checks, it times nothing)");
  }
  const ResultRecord* best = *std::min_element(timed.begin(), timed.end(),
                                               [](const ResultRecord* a, const ResultRecord* b) {
                                                 return a->timing.median_s < b->timing.median_s;
                                               });
  const bool default_fastest = best == shape.family;
  const std::string line = checked + "; fastest " +
                           (default_fastest ? "the default, " + family : best->kernel) + ", " +
                           format_seconds(best->timing.median_s);
  if (!timed_pass(shape.family)) return line + " (the default was not timed)";
  const Kernel* kernel = find_kernel(family);
  const std::string choice =
      kernel && kernel->default_variant ? kernel->default_variant(shape.family->problem) : "";
  if (default_fastest) return choice.empty() ? line : line + " (" + choice + ")";
  // Whether the fastest's repetitions tend to be shorter than the default's, or the margin is
  // what the host's noise gives (two variants that compute the same tiles at a small shape).
  const std::vector<double> best_times = sample_times(best->samples);
  const std::vector<double> default_times = sample_times(shape.family->samples);
  const double p = mann_whitney_u(best_times, default_times).p_less;
  char margin[256];
  std::snprintf(margin, sizeof margin,
                ", %.1f %% faster than the default (%s%s); %s (p %.2g, %zu and %zu repetitions)",
                100.0 * (shape.family->timing.median_s / best->timing.median_s - 1.0),
                choice.empty() ? "" : (choice + ", ").c_str(),
                format_seconds(shape.family->timing.median_s).c_str(),
                p < kSignificance ? "significant" : "not significant: within the host's noise", p,
                best_times.size(), default_times.size());
  return line + margin;
}

}  // namespace

int tune_command(const TuneOptions& options, std::ostream& out, std::ostream& err) {
  if (Status s = check_family(options.kernel); !s) {
    err << "error: " << s.message << "\n";
    return kExitUsage;
  }
  RunOptions run = options.run;
  run.kernel_globs = {options.kernel, options.kernel + "[*]"};
  // Variants compared within a few percent: round-robin on every device that times (a GPU at its
  // power cap moves its clock between cases), unless --no-interleave says otherwise.
  run.interleave_gpus = run.interleave;
  std::unique_ptr<Store> store = open_store(run.db_path, err);
  if (!store) return kExitUsage;
  const Result<std::optional<int64_t>> before = store->latest_run_id();
  const int code = run_cases(run, out, err);
  const Result<std::optional<int64_t>> after = store->latest_run_id();
  if (!before || !after || !*after || *after == *before) return code;  // nothing was stored
  const Result<StoredRun> stored = store->load_run(**after);
  if (!stored) {
    err << "error: " << stored.status().message << "\n";
    return kExitUsage;
  }
  std::set<std::string> variants;  // a name, once: the emulated device lists a CUDA kernel again
  for (const Kernel* variant : variants_of(options.kernel)) variants.insert(variant->name);
  out << "\ntune " << options.kernel << " (run " << stored->id << ", " << variants.size()
      << (variants.size() == 1 ? " variant" : " variants") << " beside the default):\n";
  for (const auto& [key, shape] : by_shape(*stored, options.kernel)) {
    const auto& [device, shape_text, distribution] = key;
    out << "  " << shape_text << " dist=" << distribution << " on " << device << ": "
        << verdict(options.kernel, shape) << "\n";
  }
  return code;
}

}  // namespace attnbench
