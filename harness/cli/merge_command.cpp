// `attnbench merge`: databases from many runners into one (merging a run twice is a no-op).
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
#include "harness/cli/history.h"
#include "harness/cli/runner.h"
#include "harness/core/progress.h"
#include "harness/core/series_key.h"
#include "harness/core/statistics.h"
#include "harness/measure/devices.h"
#include "harness/suite/case_matrix.h"

namespace attnbench {

int merge_command(const std::vector<std::string>& sources, const std::string& into,
                  std::ostream& out, std::ostream& err) {
  if (sources.empty()) {
    err << "error: merge: give the databases to merge, then --into C.sqlite\n";
    return kExitUsage;
  }
  std::unique_ptr<Store> store = open_store(into, err);
  if (!store) return kExitUsage;
  MergeReport total;
  for (const std::string& source : sources) {
    const Result<MergeReport> merged = store->merge_from(source);
    if (!merged) {
      err << "error: " << merged.status().message << "\n";
      return kExitUsage;
    }
    const MergeReport& report = *merged;
    out << "merged " << source << ": " << report.runs_added << " runs added, "
        << report.runs_already_present << " already present, " << report.calibrations_added
        << " calibrations, " << report.annotations_added << " annotations, "
        << report.profiles_added << " profiles\n";
    total.runs_added += report.runs_added;
  }
  out << "merge: " << total.runs_added << " runs added to " << into << "\n";
  return kExitClean;
}

}  // namespace attnbench
