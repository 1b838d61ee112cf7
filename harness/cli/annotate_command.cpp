// `attnbench annotate`: record an expected change, a baseline reset or an ignore for series,
// with its reason and the first run it governs.
#include "harness/cli/history.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
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
#include "harness/core/verdict.h"
#include "harness/measure/devices.h"
#include "harness/suite/case_matrix.h"

namespace attnbench {

namespace {
constexpr int64_t kNoRunLimit = std::numeric_limits<int64_t>::max();
}  // namespace

int annotate_command(const std::string& db_path, const AnnotateOptions& options,
                     std::ostream& out, std::ostream& err) {
  if (std::find(std::begin(kAnnotationKinds), std::end(kAnnotationKinds), options.kind) ==
      std::end(kAnnotationKinds)) {
    err << "error: annotate --kind '" << options.kind << "': accepted:";
    for (std::string_view kind : kAnnotationKinds) {
      err << (kind == kAnnotationKinds[0] ? " " : ", ") << kind;
    }
    err << "\n";
    return kExitUsage;
  }
  if (options.reason.empty()) {
    err << "error: annotate: --reason TEXT is required (it is kept and shown with every alert)\n";
    return kExitUsage;
  }
  if (options.series.empty() == options.kernel_glob.empty()) {
    err << "error: annotate: give --series KEY or --kernel GLOB [--shape GLOB], not both\n";
    return kExitUsage;
  }
  std::unique_ptr<Store> store = open_store(db_path, err);
  if (!store) return kExitUsage;
  const Result<std::vector<std::string>> found_keys = store->series_keys();
  if (!found_keys) {
    err << "error: " << found_keys.status().message << "\n";
    return kExitUsage;
  }
  const std::vector<std::string>& known = *found_keys;
  std::vector<std::string> keys;
  if (!options.series.empty()) {
    for (const std::string& key : options.series) {
      const bool is_group = key.find("|*|*|") != std::string::npos;
      if (!is_group && !std::binary_search(known.begin(), known.end(), key)) {
        err << "error: annotate --series '" << key << "': no such series in " << db_path
            << " (see `attnbench history --kernel GLOB`)\n";
        return kExitUsage;
      }
      keys.push_back(key);
    }
  } else {
    const std::string shape_glob = options.shape_glob.empty() ? "*" : options.shape_glob;
    std::set<std::string> groups;
    for (const std::string& key : known) {
      if (!glob_match(options.kernel_glob, kernel_of_series_key(key))) continue;
      std::string shape = shape_of_series_key(key);
      shape = shape.substr(0, shape.find(" dist="));
      if (!glob_match(shape_glob, shape)) continue;
      keys.push_back(key);
      if (shape_glob == "*") groups.insert(group_key(key));
    }
    keys.insert(keys.end(), groups.begin(), groups.end());
    if (keys.empty()) {
      err << "error: annotate: no series matches --kernel '" << options.kernel_glob << "' --shape '"
          << shape_glob << "' in " << db_path << "\n";
      return kExitUsage;
    }
  }
  std::optional<int64_t> from_run;
  if (!options.run_text.empty()) {
    from_run = resolve_run(*store, options.run_text, "annotate --run", err);
    if (!from_run) return kExitUsage;
  }
  // Default: each series' newest run (a kernel-wide key: the newest run of any of its shapes).
  std::map<std::string, int64_t> newest;
  if (!from_run) {
    const auto histories = store->series_histories(known, kNoRunLimit, 1);
    if (!histories) {
      err << "error: " << histories.status().message << "\n";
      return kExitUsage;
    }
    for (const auto& [key, rows] : *histories) {
      if (rows.empty()) continue;
      newest[key] = rows.back().run_id;
      int64_t& group = newest[group_key(key)];
      group = std::max(group, rows.back().run_id);
    }
  }
  std::vector<AnnotationRecord> records;
  for (const std::string& key : keys) {
    AnnotationRecord record;
    record.series_key = key;
    record.kind = options.kind;
    record.reason = options.reason;
    record.from_run_id = from_run ? *from_run : newest[key];
    records.push_back(record);
  }
  if (Status added = store->add_annotations(records); !added) {
    err << "error: " << added.message << "\n";
    return kExitUsage;
  }
  for (const AnnotationRecord& r : records) {
    out << "annotated " << r.kind << " from run " << r.from_run_id << ": " << r.series_key << "\n";
  }
  out << records.size() << " series annotated: " << options.reason << "\n";
  return kExitClean;
}

}  // namespace attnbench
