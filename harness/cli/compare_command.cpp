// `attnbench compare`: per case change between two runs, with a Mann-Whitney test of their
// repetitions, and each kernel's geometric mean.
#include "harness/cli/history.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "harness/analysis/alert_wording.h"
#include "harness/cli/ci_reports.h"
#include "harness/cli/command_support.h"
#include "harness/cli/runner.h"
#include "harness/core/progress.h"
#include "harness/core/series_key.h"
#include "harness/core/statistics.h"
#include "harness/measure/devices.h"
#include "harness/suite/case_matrix.h"

namespace attnbench {

int compare_command(const std::string& db_path, const std::string& run_a, const std::string& run_b,
                    const DetectorOptions& options, std::ostream& out, std::ostream& err) {
  std::unique_ptr<Store> store = open_store(db_path, err);
  if (!store) return kExitUsage;
  const std::optional<int64_t> id_a = resolve_run(*store, run_a, "compare RUN_A", err);
  if (!id_a) return kExitUsage;
  const std::optional<int64_t> id_b = resolve_run(*store, run_b, "compare RUN_B", err);
  if (!id_b) return kExitUsage;
  const Result<StoredRun> a = store->load_run(*id_a);
  if (!a) {
    err << "error: " << a.status().message << "\n";
    return kExitUsage;
  }
  const Result<StoredRun> b = store->load_run(*id_b);
  if (!b) {
    err << "error: " << b.status().message << "\n";
    return kExitUsage;
  }
  // Cases match by kernel, shape, distribution and device model.
  auto case_key = [](const ResultRecord& r) {
    return r.kernel + "|" + shape_string(r.problem) + "|" + r.distribution + "|" + r.device_name;
  };
  std::map<std::string, const ResultRecord*> in_a, in_b;
  std::vector<std::string> order;
  for (const ResultRecord& r : a->results) {
    if (in_a.emplace(case_key(r), &r).second) order.push_back(case_key(r));
  }
  for (const ResultRecord& r : b->results) {
    if (in_b.emplace(case_key(r), &r).second && !in_a.count(case_key(r))) order.push_back(case_key(r));
  }
  std::map<std::string, std::vector<double>> log_ratios;  // per kernel
  std::map<std::string, int> verdicts;
  out << "compare run " << *id_a << " -> run " << *id_b << " (change = B / A - 1; verdict: more than "
      << plain_percent(options.min_change) << " and Mann-Whitney p < " << options.mann_whitney_alpha
      << ")\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-22s %-60s %12s %12s %9s %9s  %s\n", "kernel", "shape", "A",
                "B", "change", "p", "verdict");
  out << line;
  for (const std::string& key : order) {
    const ResultRecord* ra = in_a.count(key) ? in_a[key] : nullptr;
    const ResultRecord* rb = in_b.count(key) ? in_b[key] : nullptr;
    const ResultRecord& any = ra ? *ra : *rb;
    const std::string shape =
        shape_string(any.problem) + (any.distribution == "normal" ? "" : " dist=" + any.distribution);
    std::string verdict;
    double change = kNotMeasured;
    double p = kNotMeasured;
    if (!ra || !rb) {
      verdict = ra ? "only in A" : "only in B";
    } else if (ra->status != rb->status) {
      verdict = std::string(result_status_name(ra->status)) + " -> " + std::string(result_status_name(rb->status));
    } else if (!ra->timing.timed || !rb->timing.timed) {
      verdict = std::string(result_status_name(rb->status));
    } else {
      change = rb->timing.median_s / ra->timing.median_s - 1;
      log_ratios[any.kernel].push_back(std::log(rb->timing.median_s / ra->timing.median_s));
      const MannWhitneyResult test = mann_whitney_u(sample_times(rb->samples), sample_times(ra->samples));
      p = test.p_two_sided;
      const bool significant = std::isfinite(p) && p < options.mann_whitney_alpha;
      verdict = change > options.min_change && significant      ? "slower"
                : -change > options.min_change && significant ? "faster"
                                                               : "same";
    }
    ++verdicts[verdict];
    std::snprintf(line, sizeof line, "%-22s %-60s %12s %12s %9s %9s  %s\n", any.kernel.c_str(),
                  shape.c_str(),
                  ra && ra->timing.timed ? format_seconds(ra->timing.median_s).c_str() : "-",
                  rb && rb->timing.timed ? format_seconds(rb->timing.median_s).c_str() : "-",
                  signed_percent(change).c_str(),
                  std::isfinite(p) ? scientific(p).c_str() : "-", verdict.c_str());
    out << line;
  }
  out << "\ngeometric mean of B / A per kernel:\n";
  for (const auto& [kernel, logs] : log_ratios) {
    std::snprintf(line, sizeof line, "  %-22s %s over %zu cases\n", kernel.c_str(),
                  signed_percent(std::exp(mean(logs)) - 1).c_str(), logs.size());
    out << line;
  }
  out << "verdicts:";
  for (const auto& [verdict, count] : verdicts) out << " " << count << " " << verdict << ",";
  out << "\n";
  return kExitClean;
}

}  // namespace attnbench
