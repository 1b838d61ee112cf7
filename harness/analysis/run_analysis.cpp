#include "harness/analysis/run_analysis.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <tuple>

#include "harness/analysis/alert_wording.h"
#include "harness/core/series_key.h"
#include "harness/core/statistics.h"

namespace attnbench {

namespace {

// The details field of a kernel-wide alert that names its peer (peer_of_kernel_alert).
constexpr const char* kPeerDetail = "peer";

// How many earlier runs a kernel-wide aggregate looks back past ambiguous ones for its prior.
constexpr int kGroupPriorLookback = 5;

// ---- annotations ------------------------------------------------------------------------------

// The annotations that govern a series at a run.
struct Coverage {
  int64_t history_from = 0;  // the baseline starts here (a reset or an older expected change)
  const AnnotationRecord* ignore = nullptr;
  const AnnotationRecord* expected_here = nullptr;  // an expected change at this very run
  const AnnotationRecord* reset_here = nullptr;

  std::string text() const {
    const AnnotationRecord* a = ignore ? ignore : (expected_here ? expected_here : reset_here);
    if (a == nullptr) return {};
    return a->kind + " from run " + std::to_string(a->from_run_id) + ": " + a->reason;
  }
  bool covers() const { return ignore != nullptr || expected_here != nullptr || reset_here != nullptr; }
};

Coverage coverage_of(const std::vector<AnnotationRecord>& annotations, const std::string& key,
                     int64_t run_id) {
  Coverage coverage;
  for (const AnnotationRecord& a : annotations) {
    if (a.series_key != key || a.from_run_id > run_id) continue;
    if (a.kind == kIgnore) {
      coverage.ignore = &a;
    } else if (a.kind == kExpectedChange && a.from_run_id == run_id) {
      coverage.expected_here = &a;
    } else if (a.kind == kExpectedChange || a.kind == kBaselineReset) {
      if (a.kind == kBaselineReset && a.from_run_id == run_id) coverage.reset_here = &a;
      coverage.history_from = std::max(coverage.history_from, a.from_run_id);
    }
  }
  return coverage;
}

// Confirmed regressions gate the job; suspicions and unclear trips are warnings; an annotated
// series only informs.
Severity severity_for(Verdict state, bool covered) {
  if (covered) return Severity::info;
  switch (state) {
    case Verdict::confirmed:
      return Severity::error;
    case Verdict::suspected:
    case Verdict::ambiguous:
      return Severity::warning;
    default:
      return Severity::info;
  }
}

// ---- store rows -> detector points -------------------------------------------------------------

// Errors relative to the case's bound: fresh random inputs move both together.
double relative_error(double max_abs_error, double bound) {
  return std::isfinite(bound) && bound > 0 ? max_abs_error / bound : max_abs_error;
}

Verdict verdict_or_ok(const std::string& text) { return parse_verdict(text).value_or(Verdict::ok); }

// A stored result with what the analysis of its run concluded: the stored analysis row where
// there is one, else (a run analysed before schema 6) its alerts.
SeriesPoint point_from_history(const HistoryRow& row) {
  SeriesPoint point;
  point.run_id = row.run_id;
  point.status = row.status;
  point.median_s = row.median_s;
  point.cv = row.cv;
  point.clock_mhz = row.sm_clock_mhz;
  point.error = relative_error(row.max_abs_error, row.bound);
  point.level = std::isfinite(row.level) ? row.level : 0;
  point.chip = row.chip;
  if (row.analysis) {
    const AnalysisRecord& analysis = *row.analysis;
    point.state = analysis.verdict;
    point.since_run_id = analysis.since_run_id;
    point.change = analysis.change;
    point.chip_changed = analysis.chip_changed;
    point.accuracy_state = analysis.accuracy_verdict;
    point.accuracy_since_run_id = row.accuracy_since;  // the accuracy alert's
  } else {
    point.state = verdict_or_ok(row.performance_state);
    point.since_run_id = row.performance_since;
    point.change = row.performance_change;
    point.chip_changed = row.chip_changed;
    point.accuracy_state = verdict_or_ok(row.accuracy_state);
    point.accuracy_since_run_id = row.accuracy_since;
  }
  return point;
}

const DeviceInfo* device_of(const StoredRun& run, int64_t device_id) {
  for (size_t i = 0; i < run.device_ids.size(); ++i) {
    if (run.device_ids[i] == device_id) return &run.devices[i];
  }
  return nullptr;
}

SeriesPoint point_from_result(const StoredRun& run, const ResultRecord& result) {
  SeriesPoint point;
  point.run_id = run.id;
  point.status = result.status;
  point.median_s = result.timing.timed ? result.timing.median_s : kNotMeasured;
  point.cv = result.timing.cv;
  point.clock_mhz = median_sample_clock(result.samples);
  point.error = result.check.checked ? relative_error(result.check.max_abs_error, result.check.bound)
                                     : kNotMeasured;
  if (const DeviceInfo* device = device_of(run, result.device_id)) point.chip = device->uuid;
  return point;
}

// NaN stays out of JSON (null), as it stays out of the database.
nlohmann::json json_number(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

// ---- the analysis of one stored run ------------------------------------------------------------

// One series of the run (or one the previous comparable run had and this one lacks).
struct SeriesSlot {
  std::string device;
  size_t index = 0;              // into its device's inputs
  std::vector<HistoryRow> rows;  // the history used (after annotations)
  Coverage coverage;
  const ResultRecord* result = nullptr;  // null: missing from the run
  int64_t result_id = 0;
};

class StoredRunAnalysis {
 public:
  StoredRunAnalysis(Store& store, int64_t run_id, const DetectorOptions& options,
                    bool fail_on_suspected)
      : store_(store), run_id_(run_id), options_(options), fail_on_suspected_(fail_on_suspected) {}

  Result<RegressionReport> analyse() {
    if (Status loaded = load_runs(); !loaded) return loaded;
    if (Status collected = collect_series(); !collected) return collected;
    if (Status built = build_inputs(); !built) return built;
    std::map<std::string, int> verdict_counts;
    for (auto& [device, inputs] : inputs_) {
      Result<std::map<std::string, GroupPrior>> priors = group_priors(inputs);
      if (!priors) return priors.status();
      const RunAnalysis analysis = analyze_run(inputs, *priors, options_);
      record_run_level(device, analysis);
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (inputs[i].candidate) {
          ++verdict_counts[std::string(verdict_name(analysis.series[i].performance.state))];
        }
        record_series(inputs[i], analysis.series[i]);
      }
      for (const GroupAnalysis& group : analysis.groups) record_group(device, inputs, analysis, group);
    }
    for (const auto& [name, count] : verdict_counts) report_.verdict_counts.emplace_back(name, count);
    report_.triage = build_triage(run_id_, report_.measured, report_.alerts, report_.analyses,
                                  fail_on_suspected_, detect_target());
    Status stored = store_.store_analysis(run_id_, report_.alerts, report_.levels, report_.analyses,
                                          earlier_, stored_triage(report_.triage));
    if (!stored) return stored;
    if (Status refreshed = refresh_earlier_triages(); !refreshed) return refreshed;
    return std::move(report_);
  }

 private:
  // This run's verdicts changed earlier runs' alerts (a suspicion not repeated is an outlier):
  // their triages are decided again from their alerts as they now stand, under their own policy.
  Status refresh_earlier_triages() {
    std::set<int64_t> runs;
    for (const AlertStateChange& change : earlier_) runs.insert(change.run_id);
    for (int64_t run : runs) {
      const Result<std::optional<StoredTriage>> stored = store_.run_triage(run);
      if (!stored) return stored.status();
      if (!*stored) continue;  // analysed before schema 8: it has none to refresh
      const Result<std::vector<AlertRecord>> alerts = store_.run_alerts(run);
      if (!alerts) return alerts.status();
      const Result<std::vector<AnalysisRecord>> analyses = store_.run_analysis(run);
      if (!analyses) return analyses.status();
      const auto series = store_.run_series(run);
      if (!series) return series.status();
      int measured = 0;
      for (const auto& [key, status] : *series) {
        measured += was_measured(status);
      }
      const Triage triage = build_triage(run, measured, *alerts, *analyses,
                                         (*stored)->fail_on == "suspected",
                                         stored_detect_target(**stored));
      if (Status replaced = store_.replace_triage(run, stored_triage(triage)); !replaced) return replaced;
    }
    return Status::Ok();
  }

  // What the gate should see within three nightlies: --detect-target, else the suite's (stored
  // in the run's protocol), else the default.
  double detect_target() const {
    if (options_.detect_target > 0) return options_.detect_target;
    const double suite = protocol_number(run_->info, "detect_target");
    return suite > 0 ? suite : kDefaultDetectTarget;
  }

  // The run, and the latest rerun of its suspects, which is folded in.
  Status load_runs() {
    Result<StoredRun> run = store_.load_run(run_id_);
    if (!run) return run.status();
    run_ = std::move(*run);
    if (run_->info.rerun_of != 0) {
      const std::string original = std::to_string(run_->info.rerun_of);
      return Status::Error("run " + std::to_string(run_id_) + " is a rerun of run " + original +
                           ": analyse run " + original + " (its reruns are folded in)");
    }
    report_.run_id = run_id_;
    report_.suite = run_->info.suite;
    report_.results = static_cast<int>(run_->results.size());
    for (const ResultRecord& r : run_->results) {
      report_.measured += was_measured(r.status);
    }
    const Result<std::optional<int64_t>> rerun_id = store_.latest_rerun_of(run_id_);
    if (!rerun_id) return rerun_id.status();
    if (*rerun_id) {
      Result<StoredRun> rerun = store_.load_run(**rerun_id);
      if (!rerun) return rerun.status();
      rerun_ = std::move(*rerun);
      report_.rerun_id = **rerun_id;
    }
    return Status::Ok();
  }

  // The run's series, and those the previous run of the same selection had and this one lacks.
  Status collect_series() {
    for (size_t i = 0; i < run_->results.size(); ++i) {
      if (result_index_.emplace(run_->results[i].series_key, i).second) {
        keys_.push_back(run_->results[i].series_key);
      }
    }
    report_.series = keys_;
    if (run_->info.selection.empty()) return Status::Ok();
    const Result<std::optional<int64_t>> previous =
        store_.previous_comparable_run(run_id_, run_->info.selection);
    if (!previous) return previous.status();
    if (!*previous) return Status::Ok();
    const auto found_series = store_.run_series(**previous);
    if (!found_series) return found_series.status();
    const std::vector<std::pair<std::string, ResultStatus>>& previous_series = *found_series;
    for (const auto& [key, result_status] : previous_series) {
      if (result_status == ResultStatus::passed && !result_index_.count(key)) keys_.push_back(key);
    }
    if (previous_series.size() > run_->results.size()) {
      AlertRecord fewer;
      fewer.kind = AlertKind::run;
      fewer.state = "fewer_cases";
      fewer.severity = Severity::warning;
      fewer.message = fewer_cases_message(run_id_, run_->results.size(), **previous,
                                          previous_series.size(), run_->status == "complete");
      report_.alerts.push_back(fewer);
    }
    return Status::Ok();
  }

  // The detector's inputs per device model (a run's level is a property of one kind of device):
  // each series' history since the annotation that restarts it, the candidate, its rerun.
  Status build_inputs() {
    auto histories = store_.series_histories(keys_, run_id_, options_.max_history);
    if (!histories) return histories.status();
    Result<std::vector<AnnotationRecord>> annotations = store_.annotations();
    if (!annotations) return annotations.status();
    annotations_ = std::move(*annotations);
    std::map<std::string, size_t> rerun_index;
    if (rerun_) {
      for (size_t i = 0; i < rerun_->results.size(); ++i) {
        rerun_index.emplace(rerun_->results[i].series_key, i);
      }
    }
    for (const std::string& key : keys_) {
      SeriesSlot slot;
      slot.coverage = coverage_of(annotations_, key, run_id_);
      SeriesInput input;
      input.key = key;
      input.group = group_key(key);
      for (const HistoryRow& row : (*histories)[key]) {
        if (row.run_id < slot.coverage.history_from) continue;
        slot.rows.push_back(row);
        input.history.push_back(point_from_history(row));
      }
      if (const auto found = result_index_.find(key); found != result_index_.end()) {
        slot.result = &run_->results[found->second];
        slot.result_id = run_->result_ids[found->second];
        slot.device = slot.result->device_name;
        input.candidate = point_from_result(*run_, *slot.result);
        const DeviceInfo* device = device_of(*run_, slot.result->device_id);
        input.host_timed = device != nullptr && device->kind == "cpu";
      } else {
        const std::optional<SeriesKey> parts = parse_series_key(key);
        slot.device = parts ? parts->device : "";
      }
      if (const auto again = rerun_index.find(key); again != rerun_index.end()) {
        if (Status added = add_rerun(rerun_->results[again->second], slot, input); !added) return added;
      }
      std::vector<SeriesInput>& device_inputs = inputs_[slot.device];
      slot.index = device_inputs.size();
      device_inputs.push_back(std::move(input));
      slots_.emplace(key, std::move(slot));
    }
    return Status::Ok();
  }

  // A rerun's result, and the repetitions of the baseline run it is tested against.
  Status add_rerun(const ResultRecord& repeated, const SeriesSlot& slot, SeriesInput& input) {
    input.rerun = point_from_result(*rerun_, repeated);
    input.rerun_samples = sample_times(repeated.samples);
    const Baseline baseline = compute_baseline(input.history, options_);
    if (baseline.points.empty()) return Status::Ok();
    const Result<std::vector<Sample>> samples =
        store_.result_samples(slot.rows[baseline.representative].result_id);
    if (!samples) return samples.status();
    input.baseline_samples = sample_times(*samples);
    input.baseline_samples_level = input.history[baseline.representative].level;
    return Status::Ok();
  }

  // The kernel-wide aggregates' states at their previous clear runs: a run left ambiguous (a
  // busy host) neither confirms nor breaks a suspicion, as for single series. Runs where an
  // aggregate tripped are set aside from its baseline.
  Result<std::map<std::string, GroupPrior>> group_priors(const std::vector<SeriesInput>& inputs) {
    std::map<std::string, std::set<int64_t>> runs_of_group;
    for (const SeriesInput& input : inputs) {
      for (const SeriesPoint& point : input.history) runs_of_group[input.group].insert(point.run_id);
    }
    std::map<std::string, GroupPrior> priors;
    for (const auto& [group, runs] : runs_of_group) {
      Result<std::map<int64_t, StoredGroupState>> states = stored_group_states(group, runs);
      if (!states) return states.status();
      priors[group] = prior_from(runs, *states);
    }
    return priors;
  }

  struct StoredGroupState {
    Verdict state = Verdict::ok;
    int64_t since_run_id = 0;
    bool chip_changed = false;
  };

  // What the analyses of the group's earlier runs concluded: the stored analysis rows, else (a
  // run analysed before schema 6) the kernel-wide alert; ok when neither.
  Result<std::map<int64_t, StoredGroupState>> stored_group_states(const std::string& group,
                                                                  const std::set<int64_t>& runs) {
    std::map<int64_t, StoredGroupState> states;
    const Result<std::vector<AnalysisRecord>> rows =
        store_.kernel_history(group, run_id_, static_cast<int>(runs.size()));
    if (!rows) return rows.status();
    for (const AnalysisRecord& row : *rows) {
      states[row.run_id] = {row.verdict, row.since_run_id, row.chip_changed};
    }
    for (int64_t run : runs) {
      if (states.count(run)) continue;
      const Result<std::optional<AlertRecord>> found =
          store_.find_alert(run, group, AlertKind::kernel);
      if (!found) return found.status();
      if (const std::optional<AlertRecord>& alert = *found) {
        states[run] = {verdict_or_ok(alert->state), alert->since_run_id, alert->chip_changed};
      }
    }
    return states;
  }

  static GroupPrior prior_from(const std::set<int64_t>& runs,
                               const std::map<int64_t, StoredGroupState>& states) {
    GroupPrior prior;
    std::vector<int64_t> unclear_runs;
    bool prior_found = false;
    int looked = 0;
    for (auto earlier = runs.rbegin(); earlier != runs.rend(); ++earlier) {
      const auto found = states.find(*earlier);
      const StoredGroupState stored = found == states.end() ? StoredGroupState{} : found->second;
      if (stored.state == Verdict::outlier || stored.state == Verdict::confirmed ||
          (stored.state == Verdict::suspected && !stored.chip_changed)) {
        prior.set_aside_runs.insert(*earlier);
      }
      if (stored.state == Verdict::ambiguous) unclear_runs.push_back(*earlier);
      if (prior_found || looked++ >= kGroupPriorLookback || stored.state == Verdict::ambiguous) continue;
      prior_found = true;
      prior.state = stored.state == Verdict::insufficient_history ? Verdict::ok : stored.state;
      prior.since_run_id = stored.since_run_id;
      prior.chip_changed = stored.chip_changed;
      prior.run_id = *earlier;
    }
    // An unclear run is kept (busy hosts teach how the kernel feels one), unless it came during
    // the open suspicion: then it is likely the slowdown itself, seen on a busy day.
    if (prior.state == Verdict::suspected || prior.state == Verdict::confirmed) {
      for (int64_t unclear : unclear_runs) {
        if (unclear >= prior.since_run_id) prior.set_aside_runs.insert(unclear);
      }
    }
    return prior;
  }

  void record_run_level(const std::string& device, const RunAnalysis& analysis) {
    if (!device.empty()) report_.levels.push_back({device, analysis.level, analysis.level_series});
    report_.scatters.push_back(analysis.scatter);
    if (std::fabs(std::exp(analysis.level) - 1) <= options_.level_tolerance &&
        !(analysis.scatter > options_.max_scatter)) {
      return;
    }
    AlertRecord shifted;
    shifted.kind = AlertKind::run;
    shifted.series_key = run_finding_key(device);
    shifted.state = std::string(verdict_name(Verdict::ambiguous));
    shifted.severity = Severity::warning;
    shifted.change = std::exp(analysis.level) - 1;
    shifted.message = unusual_run_message(device, analysis);
    report_.alerts.push_back(shifted);
  }

  // The environment difference against the baseline's representative run, the candidate's SM
  // clock against the series' usual one included.
  std::string environment_of(const SeriesInput& input, const SeriesSlot& slot,
                             const Baseline& baseline) {
    if (baseline.points.empty() || !input.candidate) return {};
    const HistoryRow& base_row = slot.rows[baseline.representative];
    const StoredRun* base = header(base_row.run_id);
    return base ? environment_difference(*base, *run_, slot.device, base_row.chip,
                                         input.candidate->chip,
                                         clock_difference(*input.candidate, baseline, options_))
                : std::string();
  }

  const StoredRun* header(int64_t id) {
    auto found = headers_.find(id);
    if (found == headers_.end()) {
      // Best effort: a baseline run always exists, and should its header not load, the alert
      // names no environment (empty environment text) rather than the analysis failing over a
      // description; the error itself is dropped here on purpose.
      Result<StoredRun> loaded = store_.load_run_header(id);
      std::optional<StoredRun> run;
      if (loaded) run = std::move(*loaded);
      found = headers_.emplace(id, std::move(run)).first;
    }
    return found->second ? &*found->second : nullptr;
  }

  void record_series(const SeriesInput& input, const SeriesAnalysis& verdict) {
    const SeriesSlot& slot = slots_.at(input.key);
    const std::string environment = environment_of(input, slot, verdict.baseline);
    report_.analyses.push_back(analysis_row(input, slot, verdict, environment));
    auto make_alert = [&](AlertKind kind, std::string state, Verdict severity_state) {
      AlertRecord alert;
      alert.series_key = input.key;
      alert.kind = kind;
      alert.state = std::move(state);
      alert.severity = severity_for(severity_state, slot.coverage.covers());
      alert.environment = environment;
      alert.annotation = slot.coverage.text();
      return alert;
    };
    const PerformanceJudgement& perf = verdict.performance;
    if (perf.state != Verdict::ok && perf.state != Verdict::insufficient_history) {
      AlertRecord alert = make_alert(AlertKind::performance, std::string(verdict_name(perf.state)), perf.state);
      alert.since_run_id = perf.since_run_id;
      alert.change = perf.trip.change;
      alert.chip_changed = perf.chip_changed;
      alert.message = performance_message(verdict, run_id_);
      alert.details_json = performance_details(input, verdict).dump();
      report_.alerts.push_back(alert);
    }
    if (perf.previous_reverted && !input.history.empty()) {
      earlier_.push_back({input.history.back().run_id, input.key, AlertKind::performance,
                          Verdict::outlier,
                          "; not repeated by run " + std::to_string(run_id_) + ": an outlier"});
    }
    const AccuracyJudgement& accuracy = verdict.accuracy;
    if (accuracy.state != Verdict::ok) {
      AlertRecord alert = make_alert(AlertKind::accuracy, std::string(verdict_name(accuracy.state)), accuracy.state);
      alert.since_run_id = accuracy.since_run_id;
      alert.change = accuracy.ratio;
      alert.message = accuracy_message(verdict, input.candidate->error, options_);
      report_.alerts.push_back(alert);
    }
    if (accuracy.previous_reverted && !input.history.empty()) {
      earlier_.push_back({input.history.back().run_id, input.key, AlertKind::accuracy,
                          Verdict::outlier, "; not repeated by run " + std::to_string(run_id_)});
    }
    // Failures and status changes: facts, not estimates.
    const ResultRecord* result = slot.result;
    const bool failure = result != nullptr && result->status != ResultStatus::passed &&
                         result->status != ResultStatus::skipped;
    if (failure || !verdict.status_change.empty()) {
      AlertRecord alert = make_alert(
          AlertKind::status, result ? std::string(result_status_name(result->status)) : "missing",
          Verdict::confirmed);
      alert.message = status_message(verdict, result, input.history);
      report_.alerts.push_back(alert);
    }
  }

  AnalysisRecord analysis_row(const SeriesInput& input, const SeriesSlot& slot,
                              const SeriesAnalysis& verdict, const std::string& environment) const {
    const Baseline& baseline = verdict.baseline;
    const PerformanceJudgement& perf = verdict.performance;
    AnalysisRecord row;
    row.run_id = run_id_;
    row.series_key = input.key;
    row.result_id = slot.result_id;
    row.verdict = perf.state;
    row.accuracy_verdict = verdict.accuracy.state;
    row.center_s = baseline.center;
    row.spread_s = baseline.spread;
    row.threshold = perf.trip.threshold;
    row.change = perf.trip.change;
    row.level = input.candidate ? input.candidate->level : kNotMeasured;
    row.rerun_change = perf.rerun_trip.change;
    row.baseline_runs = static_cast<int>(baseline.points.size());
    row.baseline_run_id = baseline.points.empty() ? 0 : slot.rows[baseline.representative].run_id;
    row.history_from_run_id = slot.coverage.history_from;
    row.since_run_id = perf.since_run_id;
    row.chip_changed = perf.chip_changed;
    row.status_change = verdict.status_change;
    row.reason = perf.reason;
    row.annotation = slot.coverage.text();
    // The conditions of the result, judged here once so that no reader judges them again.
    row.environment = environment;
    if (input.candidate) {
      if (const std::optional<bool> noisy = too_noisy(*input.candidate, baseline, options_)) {
        row.noisy = *noisy ? 1 : 0;
      }
    }
    row.suspect_clock_below_mhz = suspect_clock_below(baseline, options_);
    row.detectable_1 = perf.detectable.within_one;
    row.detectable_3 = perf.detectable.within_three;
    return row;
  }

  static nlohmann::json performance_details(const SeriesInput& input, const SeriesAnalysis& verdict) {
    const PerformanceJudgement& perf = verdict.performance;
    const std::optional<MannWhitneyResult>& mw = perf.mann_whitney;
    return {{"center_s", json_number(verdict.baseline.center)},
            {"spread_s", json_number(verdict.baseline.spread)},
            {"threshold", json_number(perf.trip.threshold)},
            {"median_s", json_number(input.candidate->median_s)},
            {"level", json_number(input.candidate->level)},
            {"baseline_runs", verdict.baseline.points.size()},
            {"rerun_change", json_number(perf.rerun_trip.change)},
            {"mann_whitney_u", json_number(mw ? mw->u : kNotMeasured)},
            {"mann_whitney_p", json_number(mw ? mw->p_greater : kNotMeasured)},
            {"reason", perf.reason}};
  }

  void record_group(const std::string& device, const std::vector<SeriesInput>& inputs,
                    const RunAnalysis& analysis, const GroupAnalysis& group) {
    if (group.previous_reverted) {
      earlier_.push_back({group.previous_run_id, group.group, AlertKind::kernel, Verdict::outlier,
                          "; not repeated by run " + std::to_string(run_id_)});
    }
    const Coverage group_coverage = coverage_of(annotations_, group.group, run_id_);
    report_.analyses.push_back(group_row(group, group_coverage));
    AnalysisRecord& row = report_.analyses.back();
    if (const StoredRun* base = header(row.baseline_run_id)) {
      row.environment = environment_difference(*base, *run_, device, "", "");
    }
    if (group.state == Verdict::ok || group.state == Verdict::insufficient_history) return;
    // Covered when every shape judged is (or the aggregate itself is).
    int shapes = 0;
    bool covered = true;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].group != group.group || !inputs[i].candidate) continue;
      if (!std::isfinite(analysis.series[i].performance.trip.change)) continue;
      ++shapes;
      covered = covered && slots_.at(inputs[i].key).coverage.covers();
    }
    covered = (covered && shapes > 0) || group_coverage.covers();
    AlertRecord alert;
    alert.series_key = group.group;
    alert.kind = AlertKind::kernel;
    alert.state = std::string(verdict_name(group.state));
    alert.severity = severity_for(group.state, covered);
    alert.since_run_id = group.since_run_id;
    alert.change = group.trip.change;
    alert.chip_changed = group.chip_changed;
    alert.annotation = group_coverage.text();
    alert.message = kernel_message(group, run_id_);
    alert.environment = row.environment;
    alert.details_json = nlohmann::json{{"members", group.members},
                                        {"spread", json_number(group.spread)},
                                        {"load_sensitivity", json_number(group.load_sensitivity)},
                                        {"threshold", json_number(group.trip.threshold)},
                                        {"rerun_change", json_number(group.rerun_trip.change)},
                                        {kPeerDetail, group.peer}}
                             .dump();
    report_.alerts.push_back(alert);
  }

  AnalysisRecord group_row(const GroupAnalysis& group, const Coverage& coverage) const {
    AnalysisRecord row;
    row.run_id = run_id_;
    row.series_key = group.group;
    row.kernel_wide = true;
    row.verdict = group.state;
    row.threshold = group.trip.threshold;
    row.change = group.trip.change;
    row.level = group.reference_level;
    row.rerun_change = group.rerun_trip.change;
    row.since_run_id = group.since_run_id;
    row.chip_changed = group.chip_changed;
    row.reason = group.reason;
    row.awaiting = group.awaiting;
    row.annotation = coverage.text();
    row.baseline_run_id = shared_baseline_run(group.group);
    row.detectable_1 = group.detectable.within_one;
    row.detectable_3 = group.detectable.within_three;
    return row;
  }

  // An aggregate is judged against its whole history, not one run: the run its environment is
  // compared with is the baseline run most of its shapes share (the newest among equals).
  int64_t shared_baseline_run(const std::string& group) const {
    std::map<int64_t, int> shapes_per_run;
    for (const AnalysisRecord& row : report_.analyses) {
      if (!row.kernel_wide && row.baseline_run_id != 0 && group_key(row.series_key) == group) {
        ++shapes_per_run[row.baseline_run_id];
      }
    }
    int64_t shared = 0;
    int most = 0;
    for (const auto& [run, shapes] : shapes_per_run) {
      if (shapes >= most) std::tie(shared, most) = std::tie(run, shapes);
    }
    return shared;
  }

  Store& store_;
  const int64_t run_id_;
  const DetectorOptions& options_;
  const bool fail_on_suspected_;
  std::optional<StoredRun> run_;
  std::optional<StoredRun> rerun_;
  std::map<std::string, size_t> result_index_;
  std::vector<std::string> keys_;  // the run's series, then the missing ones
  std::vector<AnnotationRecord> annotations_;
  std::map<std::string, std::vector<SeriesInput>> inputs_;  // by device model
  std::map<std::string, SeriesSlot> slots_;
  std::map<int64_t, std::optional<StoredRun>> headers_;  // baseline runs, for environments
  std::vector<AlertStateChange> earlier_;
  RegressionReport report_;
};

}  // namespace

Result<RegressionReport> analyse_stored_run(Store& store, int64_t run_id,
                                            const DetectorOptions& options, bool fail_on_suspected) {
  return StoredRunAnalysis(store, run_id, options, fail_on_suspected).analyse();
}

std::string peer_of_kernel_alert(const AlertRecord& alert) {
  if (alert.kind != AlertKind::kernel || alert.details_json.empty()) return "";
  const nlohmann::json details = nlohmann::json::parse(alert.details_json, nullptr, false);
  if (!details.is_object() || !details.contains(kPeerDetail) || !details[kPeerDetail].is_string())
    return "";
  return details[kPeerDetail].get<std::string>();
}

}  // namespace attnbench
