// The SQLite store: one file, WAL mode, a schema_version table and forward migrations; an older
// binary refuses a newer file. Parameterized statements only. One transaction per result, so a
// run that dies part-way keeps every finished result; a run is 'incomplete' until finish_run
// marks it 'complete'. Several processes may write one file (busy timeout + retries); one Store
// (one connection) is used by one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/core/records.h"
#include "harness/core/verdict.h"
#include "reference/status.h"

struct sqlite3;

namespace attnbench {

// Version 1: runs, devices, cases, results, samples, calibrations.
// Version 2: annotations, alerts and the (series_key, run_id) index for history queries.
// Version 3: results.details_json; the library versions of a run.
// Version 4: regression analysis (alert states, run levels, annotations' first run, each
// result's SM clock) and runs from many machines (selection, shard, rerun, merge provenance).
// Version 5: what timing a result cost and why it stopped.
// Version 6: result_analysis (the detector's whole judgement of every series it analysed) and
// alert kinds, states and severities under CHECK constraints.
constexpr int kSchemaVersion = 15;

struct StoredRun {
  int64_t id = 0;
  RunInfo info;
  std::string status;  // "incomplete" or "complete"
  std::string finished_at;
  std::string analysed_at;  // when `attnbench regressions` last judged it; empty: never
  std::vector<DeviceInfo> devices;
  std::vector<int64_t> device_ids;    // devices.id of each device, same order
  std::vector<ResultRecord> results;  // in insertion order, with samples
  std::vector<int64_t> result_ids;    // results.id of each result, same order
};

// What the detector decided about one series (or one kernel's aggregate) of an analysed run,
// stored in result_analysis: the one truth that `history`, `regressions`, the report and triage
// read. NaN / 0 where the detector had nothing (too little history, a missing series).
struct AnalysisRecord {
  int64_t run_id = 0;
  std::string series_key;   // SeriesKey text; kernel-wide: shape and distribution "*"
  bool kernel_wide = false;
  int64_t result_id = 0;    // 0: missing from the run, or an aggregate
  Verdict verdict = Verdict::insufficient_history;  // performance
  Verdict accuracy_verdict = Verdict::ok;
  double center_s = kNotMeasured;  // the baseline's level-free median (series only)
  double spread_s = kNotMeasured;
  double threshold = kNotMeasured;  // relative: 0.03 = a trip needs 3 %
  double change = kNotMeasured;     // level-free, relative to center: +0.10 = 10 % slower
  double level = kNotMeasured;      // the run's level (log) the change was measured against
  double rerun_change = kNotMeasured;
  int baseline_runs = 0;
  int64_t baseline_run_id = 0;      // the baseline's representative run (environment diffs)
  int64_t history_from_run_id = 0;  // the baseline starts here (reset, expected change); 0: all
  int64_t since_run_id = 0;         // the first run of an open suspicion or regression
  bool chip_changed = false;
  std::string status_change;  // "passed -> crashed"; empty when none
  std::string reason;         // why ambiguous, suspected only, confirmed, ...
  std::string awaiting;       // what would settle a suspected aggregate; empty otherwise
  std::string annotation;     // the annotation covering it, with its reason
  int detector_version = kDetectorVersion;
  // What differs from its baseline run's environment, the series' clock included
  // (environment_difference); empty without a baseline run. Schema 10.
  std::string environment;
  int noisy = -1;  // its repetitions too noisy to compare (too_noisy): 1, 0; -1 not judged
  // The smallest slowdown the gate would confirm it for within one and within three nightlies
  // (harness/analysis/detectable.h), relative; NaN: blind there, or not analysed so. Schema 13.
  double detectable_1 = kNotMeasured;
  double detectable_3 = kNotMeasured;
  // The SM clock below which each of its stored samples is marked suspect (samples.clock_suspect,
  // written with the row); NaN: its samples are not judged. Not a column.
  double suspect_clock_below_mhz = kNotMeasured;
};

// What the triage of an analysed run decided (harness/analysis/triage.h), stored in run_triage:
// the gate, its one sentence, and the rows a reader acts on, in order, as JSON.
struct StoredTriage {
  std::string gate;     // failed, passed, nothing_measured
  std::string fail_on;  // confirmed, suspected: the policy the gate was decided under
  std::string verdict;  // one sentence
  std::string groups_json = "[]";
  // What the gate can see of each kernel, and the target it was held to (schema 13):
  // triage_sight_json (harness/analysis/triage.h).
  std::string detectable_json = "{}";
};

// One result of a series as the regression analysis reads it: the result's summary, its
// run's level and what earlier analyses concluded about it.
struct HistoryRow {
  int64_t run_id = 0;
  int64_t result_id = 0;
  ResultStatus status = ResultStatus::error;
  double median_s = kNotMeasured;
  double cv = kNotMeasured;
  double sm_clock_mhz = kNotMeasured;
  double max_abs_error = kNotMeasured;
  double bound = kNotMeasured;
  std::string device_name;
  std::string chip;            // the device's UUID
  double level = kNotMeasured; // the run's level on that device model; NaN: never computed
  std::string performance_state;  // the stored alert's state; empty: none (ok)
  int64_t performance_since = 0;
  double performance_change = kNotMeasured;
  bool chip_changed = false;
  std::string accuracy_state;
  int64_t accuracy_since = 0;
  std::string started_at;  // the run's
  std::string git_sha;
  std::optional<AnalysisRecord> analysis;  // nullopt: the run was never analysed (schema >= 6)
};

// An alert of the regression analysis. kind: performance, accuracy, status, kernel (a whole
// kernel's aggregate), run (a run-wide finding such as fewer cases).
struct AlertRecord {
  int64_t id = 0;
  int64_t run_id = 0;
  std::string series_key;
  AlertKind kind = AlertKind::run;
  std::string state;  // a verdict name, a result status, "missing" or "fewer_cases" (CHECKed)
  Severity severity = Severity::info;
  std::string message;   // one line for people
  int64_t since_run_id = 0;
  double change = kNotMeasured;  // relative: +0.10 = 10 % slower
  std::string environment;       // what differs from the baseline's environment
  std::string annotation;        // the annotation covering it, with its reason
  bool chip_changed = false;
  std::string details_json = "{}";
  std::string created_at;
};

// A later verdict on an earlier run's alert (a suspicion the next run did not repeat).
struct AlertStateChange {
  int64_t run_id = 0;
  std::string series_key;
  AlertKind kind = AlertKind::performance;
  Verdict state = Verdict::outlier;
  std::string note;  // appended to the message
};

struct RunLevel {
  std::string device_name;
  double level = 0;  // log of the run's common speed factor on that device model
  int series_count = 0;
};

struct AnnotationRecord {
  int64_t id = 0;
  std::string series_key;
  std::string kind;  // expected_change, baseline_reset, ignore
  std::string reason;
  int64_t from_run_id = 0;  // the first run it governs
  std::string created_at;
};

struct MergeReport {
  int runs_added = 0;
  int runs_already_present = 0;
  int calibrations_added = 0;
  int annotations_added = 0;
  int profiles_added = 0;  // profiled forwards (`attnbench profile`), each once by profile_id
};

struct RunListEntry {
  int64_t id = 0;
  std::string started_at;
  std::string suite;
  std::string status;
  int64_t result_count = 0;
};

class Store {
 public:
  // Opens or creates the file (and its parent folder), migrates an older schema forward,
  // refuses a newer one: "results/x.sqlite has schema version 3; this attnbench reads up to 2".
  static Result<std::unique_ptr<Store>> open(const std::string& path);
  // Test hook: creates a new database at an older schema version (1..kSchemaVersion), as an
  // older attnbench would have, so the migration path can be exercised.
  static Status create_at_version(const std::string& path, int version);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Status 'incomplete'; the uuid must be new to the file. The new run's id.
  Result<int64_t> begin_run(const RunInfo& info);
  // The new device row's id.
  Result<int64_t> add_device(int64_t run_id, const DeviceInfo& device);
  // One transaction: the case (shared by every result of the same kernel, problem and
  // distribution), the result and its samples. result.device_id 0 means no device row.
  Status add_result(int64_t run_id, const ResultRecord& result);
  // Marks 'complete' and sets finished_at; a non-empty `protocol_json` replaces the run's (what
  // was learnt while running: the timer each device used).
  Status finish_run(int64_t run_id, const std::string& protocol_json = "");

  // An error status when the run does not exist.
  Result<StoredRun> load_run(int64_t run_id);
  // The run's own row and its devices, without results.
  Result<StoredRun> load_run_header(int64_t run_id);
  // The newest run by id, complete or not; nullopt when the file has none.
  Result<std::optional<int64_t>> latest_run_id();
  // Newest first; limit <= 0 lists every run.
  Result<std::vector<RunListEntry>> list_runs(int limit);

  Status add_calibration(const CalibrationRecord& calibration);
  // Newest calibration (by measured_at, then insertion) of each (kind, dtype) for a device,
  // ordered by kind and dtype.
  Result<std::vector<CalibrationRecord>> latest_calibrations(const std::string& device_uuid);
  // One profiled forward's phases (`attnbench profile`), in one transaction.
  Status add_profile(const std::vector<ProfilePhaseRecord>& phases);
  // Every stored profile phase, oldest profile first, each profile's phases in stored order.
  Result<std::vector<ProfilePhaseRecord>> load_profiles();

  // ---- history and regression analysis (schema 4) ----------------------------------------
  // The newest run that is not a rerun; nullopt when there is none.
  Result<std::optional<int64_t>> latest_primary_run_id();
  // Runs that are not reruns and were never analysed, oldest first.
  Result<std::vector<int64_t>> unanalysed_runs();
  // The newest complete run before `run_id` with the same selection that is not a rerun;
  // nullopt when there is none.
  Result<std::optional<int64_t>> previous_comparable_run(int64_t run_id,
                                                         const std::string& selection);
  // Every result's series key and status in a run, in insertion order (no samples).
  Result<std::vector<std::pair<std::string, ResultStatus>>> run_series(int64_t run_id);
  // The newest run that re-measured `run_id`'s suspects; nullopt when there is none.
  Result<std::optional<int64_t>> latest_rerun_of(int64_t run_id);
  // Per series key: its results in runs before `before_run_id` that are not reruns, oldest
  // first, at most `limit` (the newest ones).
  Result<std::map<std::string, std::vector<HistoryRow>>> series_histories(
      const std::vector<std::string>& series_keys, int64_t before_run_id, int limit);
  // Every result of one series, oldest first (reruns left out).
  Result<std::vector<HistoryRow>> full_series_history(const std::string& series_key);
  // Every series key in the file, sorted.
  Result<std::vector<std::string>> series_keys();
  Result<std::vector<Sample>> result_samples(int64_t result_id);
  Result<std::vector<RunLevel>> run_levels(int64_t run_id);

  // One transaction: replaces the run's alerts, levels and analysis rows, applies the later
  // verdicts on earlier runs' alerts and analysis rows, and marks the run analysed.
  Status store_analysis(int64_t run_id, const std::vector<AlertRecord>& alerts,
                        const std::vector<RunLevel>& levels,
                        const std::vector<AnalysisRecord>& analyses,
                        const std::vector<AlertStateChange>& earlier,
                        const std::optional<StoredTriage>& triage = std::nullopt);  // nullopt: none
  // The stored triage of a run; nullopt when it was never analysed (or before schema 8).
  Result<std::optional<StoredTriage>> run_triage(int64_t run_id);
  // Replaces a run's triage: a later run's analysis changed the state of its alerts.
  Status replace_triage(int64_t run_id, const StoredTriage& triage);
  Result<std::vector<AlertRecord>> run_alerts(int64_t run_id);
  // The alert of one series and kind in one run; nullopt when there is none.
  Result<std::optional<AlertRecord>> find_alert(int64_t run_id, const std::string& series_key,
                                                AlertKind kind);
  // The run's analysis rows (series and kernel-wide), by series key; empty when never analysed.
  Result<std::vector<AnalysisRecord>> run_analysis(int64_t run_id);
  // One kernel-wide aggregate's analysis rows before `before_run_id` (newest first, at most
  // `limit`): what the detector concluded about it at each earlier run.
  Result<std::vector<AnalysisRecord>> kernel_history(const std::string& group_key,
                                                     int64_t before_run_id, int limit);

  Status add_annotations(const std::vector<AnnotationRecord>& annotations);
  Result<std::vector<AnnotationRecord>> annotations();  // oldest first

  // Copies every run of `source` whose uuid this file lacks (with its devices, results,
  // samples, alerts and levels), the calibrations and annotations it lacks; each run in one
  // transaction. Merging the same file again changes nothing. What was added.
  Result<MergeReport> merge_from(const std::string& source);

  int schema_version() const;
  const std::string& path() const { return path_; }

 private:
  Store(sqlite3* db, std::string path, int schema_version)
      : db_(db), path_(std::move(path)), schema_version_(schema_version) {}
  sqlite3* db_ = nullptr;
  std::string path_;
  int schema_version_ = 0;
};

}  // namespace attnbench
