// Merging another database into this one (`attnbench merge`): every run of the source whose
// uuid this file lacks, with its devices, results, samples, alerts, levels and analysis rows,
// each run in one transaction; then the calibrations and annotations this file lacks. Ids are
// remapped: a reference to a run that is in this file (merged now or before, found by uuid) or
// to a result merged with its run takes the id here; any other reference becomes NULL.
// Merging the same file again changes nothing.
#include <algorithm>
#include <ctime>
#include <filesystem>
#include <map>

#include "harness/store/rows.h"
#include "harness/store/sqlite.h"
#include "harness/store/store.h"

namespace attnbench {

using namespace sql;

namespace {

std::string now_text() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

// Source ids -> ids here; 0 (NULL) for an id that was not merged.
int64_t mapped(const std::map<int64_t, int64_t>& ids, int64_t source_id) {
  const auto found = ids.find(source_id);
  return found == ids.end() ? 0 : found->second;
}

// What a source run brings besides its own rows.
struct RunAnalysis {
  std::vector<AlertRecord> alerts;
  std::vector<RunLevel> levels;
  std::vector<AnalysisRecord> analyses;
};

// Writes one source run here, its ids remapped; the caller holds the write transaction.
// `run_ids` gains the run's new id.
Status insert_merged_run(sqlite3* db, const std::string& source_path, const StoredRun& source_run,
                         const RunAnalysis& analysis, std::map<int64_t, int64_t>& run_ids) {
  StoredRun header = source_run;
  if (header.info.merged_from.empty()) header.info.merged_from = source_path + " at " + now_text();
  header.info.rerun_of = mapped(run_ids, source_run.info.rerun_of);
  // Its alerts came from the source's history; it is judged again against this file's.
  header.analysed_at.clear();
  Status status = insert_row(db, "runs", run_row(header));
  const int64_t run_id = sqlite3_last_insert_rowid(db);
  run_ids[source_run.id] = run_id;

  std::map<int64_t, int64_t> device_ids;
  for (size_t i = 0; status && i < source_run.devices.size(); ++i) {
    status = insert_row(db, "devices", device_row(run_id, source_run.devices[i]));
    device_ids[source_run.device_ids[i]] = sqlite3_last_insert_rowid(db);
  }
  std::map<int64_t, int64_t> result_ids;
  for (size_t i = 0; status && i < source_run.results.size(); ++i) {
    ResultRecord result = source_run.results[i];
    result.device_id = mapped(device_ids, result.device_id);
    const Result<int64_t> result_id = insert_result(db, run_id, result);
    status = result_id.status();
    if (result_id) result_ids[source_run.result_ids[i]] = *result_id;
  }
  for (size_t i = 0; status && i < analysis.alerts.size(); ++i) {
    AlertRecord alert = analysis.alerts[i];
    alert.run_id = run_id;
    alert.since_run_id = mapped(run_ids, alert.since_run_id);
    status = insert_row(db, "alerts", alert_row(alert));
  }
  for (size_t i = 0; status && i < analysis.levels.size(); ++i) {
    status = insert_row(db, "run_levels", level_row(run_id, analysis.levels[i]));
  }
  for (size_t i = 0; status && i < analysis.analyses.size(); ++i) {
    AnalysisRecord row = analysis.analyses[i];
    row.run_id = run_id;
    row.result_id = mapped(result_ids, row.result_id);
    row.baseline_run_id = mapped(run_ids, row.baseline_run_id);
    row.history_from_run_id = mapped(run_ids, row.history_from_run_id);
    row.since_run_id = mapped(run_ids, row.since_run_id);
    status = insert_row(db, "result_analysis", analysis_row(row));
  }
  return status;
}

}  // namespace

Result<MergeReport> Store::merge_from(const std::string& source_path) {
  MergeReport report;
  std::error_code error;
  if (!std::filesystem::is_regular_file(source_path, error)) {
    return Status::Error("merge: " + source_path + " is not a file");
  }
  if (std::filesystem::equivalent(source_path, path_, error)) {
    return Status::Error("merge: " + source_path + " is the database being merged into");
  }
  Result<std::unique_ptr<Store>> opened = Store::open(source_path);
  if (!opened) return opened.status();
  const std::unique_ptr<Store> source = std::move(*opened);
  const std::string context = path_ + ": cannot merge " + source_path;

  // Source run ids -> ids here, by uuid, for reruns, alerts' and analyses' runs, annotations.
  std::map<int64_t, int64_t> run_ids;
  auto find_here = [&](const std::string& uuid) -> std::optional<int64_t> {
    Statement find(db_, "SELECT id FROM runs WHERE uuid = ?");
    find.bind(text(uuid));
    if (find.next_row()) return find.get<int64_t>("id");
    return std::nullopt;
  };

  Result<std::vector<RunListEntry>> entries = source->list_runs(0);
  if (!entries) return entries.status();
  std::reverse(entries->begin(), entries->end());  // oldest first, so reruns find their run
  for (const RunListEntry& entry : *entries) {
    const Result<StoredRun> run = source->load_run(entry.id);
    if (!run) return run.status();
    if (std::optional<int64_t> here = find_here(run->info.uuid)) {
      run_ids[entry.id] = *here;
      ++report.runs_already_present;
      continue;
    }
    Result<std::vector<AlertRecord>> alerts = source->run_alerts(entry.id);
    if (!alerts) return alerts.status();
    Result<std::vector<RunLevel>> levels = source->run_levels(entry.id);
    if (!levels) return levels.status();
    Result<std::vector<AnalysisRecord>> analyses = source->run_analysis(entry.id);
    if (!analyses) return analyses.status();
    const RunAnalysis analysis{std::move(*alerts), std::move(*levels), std::move(*analyses)};

    Transaction transaction(db_, Transaction::Kind::write);
    Status status = transaction.status();
    if (status) status = insert_merged_run(db_, source_path, *run, analysis, run_ids);
    if (status) status = transaction.commit();
    if (!status) return error_with(context, "run " + run->info.uuid + ": " + status.message);
    ++report.runs_added;
  }

  // Calibrations, annotations and profiles this file lacks (same values, same time).
  Transaction transaction(db_, Transaction::Kind::write);
  Status status = transaction.status();
  Statement calibrations(source->db_, "SELECT * FROM calibrations ORDER BY id");
  while (status && calibrations.next_row()) {
    CalibrationRecord calibration;
    status = read_calibration(calibrations, calibration);
    if (!status) break;
    Statement exists(db_,
                     "SELECT count(*) AS n FROM calibrations WHERE device_uuid = ? AND kind = ? "
                     "AND dtype = ? AND measured_at = ? AND details = ? AND value IS ?");
    exists.bind(text(calibration.device_uuid)).bind(text(calibration.kind));
    exists.bind(text(calibration.dtype)).bind(text(calibration.measured_at));
    exists.bind(text(calibration.details)).bind(real(calibration.value));
    if (exists.next_row() && exists.get<int64_t>("n") == 0) {
      status = insert_row(db_, "calibrations", calibration_row(calibration));
      ++report.calibrations_added;
    }
    if (status) status = exists.status();
  }
  if (status) status = calibrations.status();
  std::vector<AnnotationRecord> annotations;
  if (status) {
    Result<std::vector<AnnotationRecord>> read = source->annotations();
    status = read.status();
    if (read) annotations = std::move(*read);
  }
  for (size_t i = 0; status && i < annotations.size(); ++i) {
    AnnotationRecord annotation = annotations[i];
    Statement exists(db_,
                     "SELECT count(*) AS n FROM annotations WHERE series_key = ? AND kind = ? "
                     "AND reason = ? AND created_at = ?");
    exists.bind(text(annotation.series_key)).bind(text(annotation.kind));
    exists.bind(text(annotation.reason)).bind(text(annotation.created_at));
    if (exists.next_row() && exists.get<int64_t>("n") == 0) {
      annotation.from_run_id = mapped(run_ids, annotation.from_run_id);
      status = insert_row(db_, "annotations", annotation_row(annotation));
      ++report.annotations_added;
    }
    if (status) status = exists.status();
  }
  std::vector<ProfilePhaseRecord> phases;
  if (status) {
    Result<std::vector<ProfilePhaseRecord>> read = source->load_profiles();
    status = read.status();
    if (read) phases = std::move(*read);
  }
  // Profiles this file lacks: each profile's rows, by its profile_id.
  std::string checked_id;
  bool copy_profile = false;
  for (size_t i = 0; status && i < phases.size(); ++i) {
    if (phases[i].profile_id != checked_id) {
      checked_id = phases[i].profile_id;
      Statement exists(db_, "SELECT count(*) AS n FROM profiles WHERE profile_id = ?");
      exists.bind(text(checked_id));
      copy_profile = exists.next_row() && exists.get<int64_t>("n") == 0;
      status = exists.status();
      report.profiles_added += copy_profile ? 1 : 0;
    }
    if (status && copy_profile) status = insert_row(db_, "profiles", profile_phase_row(phases[i]));
  }
  if (status) status = transaction.commit();
  if (!status) return error_with(context, status.message);
  return report;
}

}  // namespace attnbench
