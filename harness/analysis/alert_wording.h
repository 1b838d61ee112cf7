// How an alert reads to people: one line per decision, worded from what the detector decided
// (never deciding anything itself), and what differs between a baseline run's environment and
// the run judged.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/analysis/regression.h"
#include "harness/store/store.h"

namespace attnbench {

std::string signed_percent(double fraction);  // "+3.1 %", "-" when not finite
std::string plain_percent(double fraction);   // "3.1 %"
std::string short_sha(const std::string& sha);  // the first 10 hex digits of a commit

// An alert's message says what was found, never which case: the alert's series key names it,
// and every reader (the CLI, the summaries, the report) shows the case beside the message.
std::string performance_message(const SeriesAnalysis& verdict, int64_t run_id);
std::string accuracy_message(const SeriesAnalysis& verdict, double candidate_error,
                             const DetectorOptions& options);
// A failure or a status change; `result` is null when the series is missing from the run.
std::string status_message(const SeriesAnalysis& verdict, const ResultRecord* result,
                           const std::vector<SeriesPoint>& history);
// The aggregate's median change and why it stands where it does (its shapes are the triage's).
std::string kernel_message(const GroupAnalysis& group, int64_t run_id);
std::string unusual_run_message(const std::string& device, const RunAnalysis& analysis);
std::string fewer_cases_message(int64_t run_id, size_t results, int64_t previous_run_id,
                                size_t previous_results, bool complete);

// What differs between the baseline run's environment and this one's, for one device model: the
// chip, every environment_entries field, the device's clock, power limit, threads, SM version and
// count, ECC and persistence mode, and `clock` (clock_difference: the series' SM clock against
// its usual, empty when within tolerance); then the commits and the baseline run. Stored with
// every alert and every analysed series (result_analysis.environment), which readers show as it is.
std::string environment_difference(const StoredRun& baseline, const StoredRun& current,
                                   const std::string& device_name, const std::string& base_chip,
                                   const std::string& chip, const std::string& clock = {});

}  // namespace attnbench
