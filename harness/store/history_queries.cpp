// The Store's history and regression queries: which runs to analyse and compare, each series'
// history (its results with the run's level, the stored alerts' states and, from schema 6 on,
// the detector's whole analysis row), samples, levels, storing one run's analysis (alerts,
// levels, analysis rows, later verdicts on earlier runs) in one transaction, reading alerts and
// analysis rows back, and annotations. Every history query is a walk of a (series_key, run_id)
// index.
#include <algorithm>
#include <cmath>

#include "harness/core/series_key.h"
#include "harness/core/verdict.h"
#include "harness/store/rows.h"
#include "harness/store/sqlite.h"
#include "harness/store/store.h"

namespace attnbench {

using namespace sql;

namespace {

// Runs `query` and reads each row with `read`; on an error, the status says what `context`
// could not do.
template <typename Record, typename Read>
Result<std::vector<Record>> read_all(Statement& query, Read read, const std::string& context) {
  std::vector<Record> records;
  Status status;
  while (status && query.next_row()) status = read(query, records.emplace_back());
  if (status) status = query.status();
  if (!status) return error_with(context, status.message);
  return records;
}

Status read_analysis_row(Statement& row, AnalysisRecord& analysis) {
  return read_analysis(row, analysis);
}

// The analysis columns of a history row are named with this prefix (the join has its own
// run_id, level, chip_changed, ...).
constexpr std::string_view kAnalysisPrefix = "analysis_";

// The series' alert of one kind in the result's run, joined as `alias`. The kinds are our own
// closed set, spelled from verdict.h's names.
std::string alert_join(const std::string& alias, AlertKind kind) {
  const std::string& a = alias;
  return "LEFT JOIN alerts AS " + a + " ON " + a + ".run_id = r.run_id AND " + a +
         ".series_key = r.series_key AND " + a + ".kind = '" + std::string(alert_kind_name(kind)) +
         "' ";
}

// The columns every history query returns, in the names HistoryRow reads; the analysis row's
// columns carry kAnalysisPrefix.
const std::string& history_select() {
  static const std::string select =
      "SELECT r.run_id, r.id AS result_id, r.status, r.median_s, r.cv, r.sm_clock_mhz, "
      "r.max_abs_error, r.bound, r.device_name, d.uuid AS chip, l.level, "
      "p.state AS performance_state, p.since_run_id AS performance_since, "
      "p.change_fraction AS performance_change, "
      "p.chip_changed AS chip_changed, a.state AS accuracy_state, "
      "a.since_run_id AS accuracy_since, runs.started_at AS started_at, "
      "runs.git_sha AS git_sha, " +
      analysis_columns("x", kAnalysisPrefix) +
      " FROM results AS r JOIN runs ON runs.id = r.run_id "
      "LEFT JOIN devices AS d ON d.id = r.device_id "
      "LEFT JOIN run_levels AS l ON l.run_id = r.run_id AND l.device_name = r.device_name " +
      alert_join("p", AlertKind::performance) + alert_join("a", AlertKind::accuracy) +
      "LEFT JOIN result_analysis AS x ON x.run_id = r.run_id AND x.series_key = r.series_key ";
  return select;
}

Status read_history_row(Statement& row, HistoryRow& history) {
  row.read("run_id", history.run_id);
  row.read("result_id", history.result_id);
  row.read("median_s", history.median_s);
  row.read("cv", history.cv);
  row.read("sm_clock_mhz", history.sm_clock_mhz);
  row.read("max_abs_error", history.max_abs_error);
  row.read("bound", history.bound);
  row.read("performance_change", history.performance_change);
  row.read("device_name", history.device_name);
  row.read("chip", history.chip);
  row.read("level", history.level);
  row.read("performance_state", history.performance_state);
  row.read("performance_since", history.performance_since);
  row.read("chip_changed", history.chip_changed);
  row.read("accuracy_state", history.accuracy_state);
  row.read("accuracy_since", history.accuracy_since);
  row.read("started_at", history.started_at);
  row.read("git_sha", history.git_sha);
  const std::string status_name = row.get<std::string>("status");
  const std::optional<ResultStatus> status = parse_result_status(status_name);
  if (!status) return Status::Error("unknown result status '" + status_name + "'");
  history.status = *status;
  // The run_id of a joined analysis row is never NULL: NULL means there is none.
  if (!row.is_null((std::string(kAnalysisPrefix) + "run_id").c_str())) {
    AnalysisRecord& analysis = history.analysis.emplace();
    if (Status read = read_analysis(row, analysis, kAnalysisPrefix); !read) return read;
  }
  return row.status();
}

// A kernel alert is about the kernel-wide aggregate: its analysis row has that key.
std::string kernel_wide_key(const std::string& series_key) {
  const std::optional<SeriesKey> key = parse_series_key(series_key);
  return key ? key->kernel_wide().text() : series_key;
}

// A later verdict on an earlier run: its alert takes the state (an info now; the note appended
// to the message) and its analysis row the verdict (the note appended to the reason).
Status insert_triage(sqlite3* db, int64_t run_id, const StoredTriage& triage) {
  Status status = insert_row(db, "run_triage",
                             {{"run_id", integer(run_id)},
                              {"gate", text(triage.gate)},
                              {"fail_on", text(triage.fail_on)},
                              {"verdict", text(triage.verdict)},
                              {"groups_json", text(triage.groups_json)},
                              {"detectable_json", text(triage.detectable_json)}});
  return status ? status : error_with("its triage", status.message);
}

Status apply_later_verdict(sqlite3* db, const AlertStateChange& change) {
  Statement alert(db,
                  "UPDATE alerts SET state = ?, severity = ?, message = message || ? "
                  "WHERE run_id = ? AND series_key = ? AND kind = ?");
  alert.bind(text(verdict_name(change.state))).bind(text(severity_name(Severity::info)));
  alert.bind(text(change.note)).bind(integer(change.run_id)).bind(text(change.series_key));
  alert.bind(text(alert_kind_name(change.kind)));
  if (Status updated = alert.execute(); !updated) return updated;

  std::string verdict_column = "verdict";
  std::string key = change.series_key;
  switch (change.kind) {
    case AlertKind::performance:
      break;
    case AlertKind::accuracy:
      verdict_column = "accuracy_verdict";
      break;
    case AlertKind::kernel:
      key = kernel_wide_key(change.series_key);
      break;
    case AlertKind::status:
    case AlertKind::run:
      return Status::Ok();  // no verdict of the analysis row says these
  }
  Statement analysis(db, "UPDATE result_analysis SET " + verdict_column +
                             " = ?1, reason = CASE WHEN reason = '' THEN ltrim(?2, '; ') "
                             "ELSE reason || ?2 END WHERE run_id = ?3 AND series_key = ?4");
  analysis.bind(text(verdict_name(change.state))).bind(text(change.note));
  analysis.bind(integer(change.run_id)).bind(text(key));
  return analysis.execute();
}

// The query's one "id"; nullopt when it is NULL (no such row).
Result<std::optional<int64_t>> optional_id(Statement& query, const std::string& context) {
  std::optional<int64_t> found;
  if (query.next_row() && !query.is_null("id")) found = query.get<int64_t>("id");
  if (Status read = query.status(); !read) return error_with(context, read.message);
  return found;
}

}  // namespace

Result<std::optional<int64_t>> Store::latest_primary_run_id() {
  Statement latest(db_, "SELECT max(id) AS id FROM runs WHERE rerun_of IS NULL");
  return optional_id(latest, path_ + ": cannot find the latest run");
}

Result<std::vector<int64_t>> Store::unanalysed_runs() {
  Statement runs(db_,
                 "SELECT id FROM runs WHERE rerun_of IS NULL AND analysed_at IS NULL ORDER BY id");
  return read_all<int64_t>(
      runs,
      [](Statement& row, int64_t& id) {
        row.read("id", id);
        return row.status();
      },
      path_ + ": cannot list unanalysed runs");
}

Result<std::optional<int64_t>> Store::previous_comparable_run(int64_t run_id,
                                                              const std::string& selection) {
  Statement previous(db_,
                     "SELECT max(id) AS id FROM runs WHERE id < ? AND selection = ? AND "
                     "status = 'complete' AND rerun_of IS NULL");
  previous.bind(integer(run_id)).bind(text(selection));
  return optional_id(previous, path_ + ": cannot find the run before " + std::to_string(run_id));
}

Result<std::vector<std::pair<std::string, ResultStatus>>> Store::run_series(int64_t run_id) {
  Statement rows(db_, "SELECT series_key, status FROM results WHERE run_id = ? ORDER BY id");
  rows.bind(integer(run_id));
  return read_all<std::pair<std::string, ResultStatus>>(
      rows,
      [](Statement& row, std::pair<std::string, ResultStatus>& series) {
        const std::optional<ResultStatus> parsed =
            parse_result_status(row.get<std::string>("status"));
        series = {row.get<std::string>("series_key"), parsed.value_or(ResultStatus::error)};
        return row.status();
      },
      path_ + ": cannot read the results of run " + std::to_string(run_id));
}

Result<std::optional<int64_t>> Store::latest_rerun_of(int64_t run_id) {
  Statement rerun(db_, "SELECT max(id) AS id FROM runs WHERE rerun_of = ?");
  rerun.bind(integer(run_id));
  return optional_id(rerun, path_ + ": cannot find reruns of run " + std::to_string(run_id));
}

Result<std::map<std::string, std::vector<HistoryRow>>> Store::series_histories(
    const std::vector<std::string>& series_keys, int64_t before_run_id, int limit) {
  std::map<std::string, std::vector<HistoryRow>> histories;
  const std::string context = path_ + ": cannot read series history";
  // One snapshot for every series, and one compiled statement run once per series: each run
  // is one walk of the (series_key, run_id) index.
  Transaction transaction(db_, Transaction::Kind::read);
  if (!transaction.status()) return error_with(context, transaction.status().message);
  Statement query(db_, history_select() +
                           "WHERE r.series_key = ? AND r.run_id < ? AND runs.rerun_of IS NULL "
                           "ORDER BY r.run_id DESC LIMIT ?");
  for (const std::string& key : series_keys) {
    query.reset();
    query.bind(text(key)).bind(integer(before_run_id)).bind(integer(limit));
    Result<std::vector<HistoryRow>> rows = read_all<HistoryRow>(query, read_history_row, context);
    if (!rows) return rows.status();
    std::reverse(rows->begin(), rows->end());
    histories[key] = std::move(*rows);
  }
  if (Status committed = transaction.commit(); !committed) {
    return error_with(context, committed.message);
  }
  return histories;
}

Result<std::vector<HistoryRow>> Store::full_series_history(const std::string& series_key) {
  Statement query(
      db_, history_select() + "WHERE r.series_key = ? AND runs.rerun_of IS NULL ORDER BY r.run_id");
  query.bind(text(series_key));
  return read_all<HistoryRow>(query, read_history_row,
                              path_ + ": cannot read the history of " + series_key);
}

Result<std::vector<std::string>> Store::series_keys() {
  Statement keys(db_, "SELECT DISTINCT series_key FROM results ORDER BY series_key");
  return read_all<std::string>(
      keys,
      [](Statement& row, std::string& key) {
        row.read("series_key", key);
        return row.status();
      },
      path_ + ": cannot list series");
}

Result<std::vector<Sample>> Store::result_samples(int64_t result_id) {
  Statement samples(db_, "SELECT * FROM samples WHERE result_id = ? ORDER BY id");
  samples.bind(integer(result_id));
  return read_all<Sample>(
      samples, read_sample,
      path_ + ": cannot read the samples of result " + std::to_string(result_id));
}

Result<std::vector<RunLevel>> Store::run_levels(int64_t run_id) {
  Statement levels(db_, "SELECT * FROM run_levels WHERE run_id = ? ORDER BY device_name");
  levels.bind(integer(run_id));
  return read_all<RunLevel>(levels, read_level,
                            path_ + ": cannot read the levels of run " + std::to_string(run_id));
}

namespace {

// Each stored sample of the analysed result: suspect (1) when its SM clock lies below the
// series' limit, 0 above it; NULL where its clock or the limit is unknown (a re-analysis
// without a usual clock clears an earlier judgement).
Status mark_clock_suspects(sqlite3* db, const AnalysisRecord& analysis) {
  if (!std::isfinite(analysis.suspect_clock_below_mhz)) {
    return Statement(db, "UPDATE samples SET clock_suspect = NULL WHERE result_id = ?")
        .bind(integer(analysis.result_id))
        .execute();
  }
  return Statement(db,
                   "UPDATE samples SET clock_suspect = CASE WHEN sm_clock_mhz IS NULL THEN NULL "
                   "WHEN sm_clock_mhz < ? THEN 1 ELSE 0 END WHERE result_id = ?")
      .bind(real(analysis.suspect_clock_below_mhz))
      .bind(integer(analysis.result_id))
      .execute();
}

}  // namespace

Status Store::store_analysis(int64_t run_id, const std::vector<AlertRecord>& alerts,
                             const std::vector<RunLevel>& levels,
                             const std::vector<AnalysisRecord>& analyses,
                             const std::vector<AlertStateChange>& earlier,
                             const std::optional<StoredTriage>& triage) {
  const std::string context =
      path_ + ": cannot store the analysis of run " + std::to_string(run_id);
  Transaction transaction(db_, Transaction::Kind::write);
  Status status = transaction.status();
  for (const char* table : {"alerts", "run_levels", "result_analysis", "run_triage"}) {
    if (!status) break;
    status = Statement(db_, std::string("DELETE FROM ") + table + " WHERE run_id = ?")
                 .bind(integer(run_id))
                 .execute();
  }
  for (size_t i = 0; status && i < alerts.size(); ++i) {
    AlertRecord alert = alerts[i];
    alert.run_id = run_id;
    status = insert_row(db_, "alerts", alert_row(alert));
  }
  for (size_t i = 0; status && i < levels.size(); ++i) {
    status = insert_row(db_, "run_levels", level_row(run_id, levels[i]));
  }
  for (size_t i = 0; status && i < analyses.size(); ++i) {
    AnalysisRecord analysis = analyses[i];
    analysis.run_id = run_id;
    status = insert_row(db_, "result_analysis", analysis_row(analysis));
    if (status && analysis.result_id != 0) status = mark_clock_suspects(db_, analysis);
    if (!status) status = error_with("series " + analysis.series_key, status.message);
  }
  for (size_t i = 0; status && i < earlier.size(); ++i) {
    status = apply_later_verdict(db_, earlier[i]);
  }
  if (status && triage) status = insert_triage(db_, run_id, *triage);
  if (status) {
    Statement analysed(db_,
                       "UPDATE runs SET analysed_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now') "
                       "WHERE id = ?");
    analysed.bind(integer(run_id));
    status = analysed.execute();
    if (status && sqlite3_changes(db_) != 1) status = Status::Error("no such run");
  }
  if (status) status = transaction.commit();
  return status ? status : error_with(context, status.message);
}

Status Store::replace_triage(int64_t run_id, const StoredTriage& triage) {
  Transaction transaction(db_, Transaction::Kind::write);
  Status status = transaction.status();
  if (status) {
    status = Statement(db_, "DELETE FROM run_triage WHERE run_id = ?").bind(integer(run_id)).execute();
  }
  if (status) status = insert_triage(db_, run_id, triage);
  if (status) status = transaction.commit();
  return status ? status
                : error_with(path_ + ": cannot store the triage of run " + std::to_string(run_id),
                             status.message);
}

Result<std::optional<StoredTriage>> Store::run_triage(int64_t run_id) {
  Statement row(db_, "SELECT * FROM run_triage WHERE run_id = ?");
  row.bind(integer(run_id));
  if (!row.next_row()) {
    if (!row.status()) return error_with(path_ + ": cannot read the triage of run " + std::to_string(run_id), row.status().message);
    return std::nullopt;
  }
  return StoredTriage{row.get<std::string>("gate"), row.get<std::string>("fail_on"),
                      row.get<std::string>("verdict"), row.get<std::string>("groups_json"),
                      row.get<std::string>("detectable_json")};
}

Result<std::vector<AlertRecord>> Store::run_alerts(int64_t run_id) {
  Statement alerts(db_, "SELECT * FROM alerts WHERE run_id = ? ORDER BY id");
  alerts.bind(integer(run_id));
  return read_all<AlertRecord>(alerts, read_alert,
                               path_ + ": cannot read the alerts of run " + std::to_string(run_id));
}

Result<std::optional<AlertRecord>> Store::find_alert(int64_t run_id, const std::string& series_key,
                                                     AlertKind kind) {
  Statement alert(db_,
                  "SELECT * FROM alerts WHERE run_id = ? AND series_key = ? AND kind = ? "
                  "ORDER BY id DESC LIMIT 1");
  alert.bind(integer(run_id)).bind(text(series_key)).bind(text(alert_kind_name(kind)));
  Result<std::vector<AlertRecord>> found = read_all<AlertRecord>(
      alert, read_alert, path_ + ": cannot read an alert of run " + std::to_string(run_id));
  if (!found) return found.status();
  if (found->empty()) return std::nullopt;
  return std::move(found->front());
}

Result<std::vector<AnalysisRecord>> Store::run_analysis(int64_t run_id) {
  Statement rows(db_, "SELECT * FROM result_analysis WHERE run_id = ? ORDER BY series_key");
  rows.bind(integer(run_id));
  return read_all<AnalysisRecord>(
      rows, read_analysis_row,
      path_ + ": cannot read the analysis of run " + std::to_string(run_id));
}

Result<std::vector<AnalysisRecord>> Store::kernel_history(const std::string& group_key,
                                                          int64_t before_run_id, int limit) {
  Statement rows(db_,
                 "SELECT x.* FROM result_analysis AS x JOIN runs ON runs.id = x.run_id "
                 "WHERE x.series_key = ? AND x.run_id < ? AND runs.rerun_of IS NULL "
                 "ORDER BY x.run_id DESC LIMIT ?");
  // As series_histories: at most `limit` rows (SQLite reads a negative LIMIT as no limit).
  rows.bind(text(group_key)).bind(integer(before_run_id)).bind(integer(limit));
  return read_all<AnalysisRecord>(rows, read_analysis_row,
                                  path_ + ": cannot read the analysis history of " + group_key);
}

Status Store::add_annotations(const std::vector<AnnotationRecord>& annotations) {
  Transaction transaction(db_, Transaction::Kind::write);
  Status status = transaction.status();
  for (size_t i = 0; status && i < annotations.size(); ++i) {
    status = insert_row(db_, "annotations", annotation_row(annotations[i]));
  }
  if (status) status = transaction.commit();
  return status ? status : error_with(path_ + ": cannot store annotations", status.message);
}

Result<std::vector<AnnotationRecord>> Store::annotations() {
  Statement rows(db_, "SELECT * FROM annotations ORDER BY id");
  return read_all<AnnotationRecord>(rows, read_annotation, path_ + ": cannot read annotations");
}

}  // namespace attnbench
