// Judging a stored run: the glue between the store and the detector (regression.h). Reads the
// run, its latest rerun, every series' history after the annotations that govern it and the
// kernel-wide aggregates' earlier states; runs the detector per device model; stores what it
// decided about every series (result_analysis rows, the one truth the CLI, the report and triage
// read) and the alerts worded from those decisions. Owns no rule of its own: every verdict,
// baseline and threshold comes from analyze_run.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/analysis/regression.h"
#include "harness/analysis/triage.h"
#include "harness/store/store.h"

namespace attnbench {

// One analysed run, as stored and printed.
struct RegressionReport {
  int64_t run_id = 0;
  int64_t rerun_id = 0;  // the rerun folded in (0: none)
  std::string suite;
  int results = 0;
  int measured = 0;  // passed or failed
  std::vector<AlertRecord> alerts;
  std::vector<AnalysisRecord> analyses;  // every series and kernel-wide aggregate judged
  std::vector<RunLevel> levels;
  std::vector<double> scatters;  // per level: how widely its series scattered around it
  std::vector<std::pair<std::string, int>> verdict_counts;  // performance verdicts
  std::vector<std::string> series;  // every series of the run (for JUnit)
  Triage triage;  // what a reader acts on, in order, and the gate's sentence (stored too)
};

// Judges every result of the run against its series' baseline (folding in the run's latest
// rerun), decides its triage and gate (failing on suspected regressions too when asked), stores
// the analysis rows, the alerts, the run's levels and the triage, and says what it found.
Result<RegressionReport> analyse_stored_run(Store& store, int64_t run_id,
                                            const DetectorOptions& options, bool fail_on_suspected);

// The peer a kernel-wide alert's aggregate was measured against (its group key, stored in the
// alert's details), empty when none: `attnbench rerun` re-measures the peer's shapes beside the
// kernel's, since the rerun's change is taken against the peer's level there too.
std::string peer_of_kernel_alert(const AlertRecord& alert);

}  // namespace attnbench
