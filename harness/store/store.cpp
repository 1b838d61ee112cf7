// The Store's runs, results and calibrations: opening (refuse a foreign or newer file before
// changing it, then configure and migrate), beginning a run, its devices, one transaction per
// result, finishing, loading a run back, listing runs, calibrations. Every write is one BEGIN
// IMMEDIATE transaction (retried while another process holds the write lock) and every value
// goes through a bound parameter. The history and regression queries are in
// history_queries.cpp, merging files in merge.cpp; rows.cpp maps records to rows.
#include "harness/store/store.h"

#include <map>

#include "harness/store/rows.h"
#include "harness/store/schema.h"
#include "harness/store/sqlite.h"

namespace attnbench {

using namespace sql;

namespace {

// The run's own row and its devices (ids in `device_ids`), inside the caller's snapshot if any.
Result<StoredRun> read_run_header(sqlite3* db, int64_t run_id) {
  StoredRun run;
  Statement runs(db, "SELECT * FROM runs WHERE id = ?");
  runs.bind(integer(run_id));
  if (!runs.next_row()) return runs.status() ? Status::Error("no such run") : runs.status();
  if (Status read = read_run(runs, run); !read) return read;
  Statement devices(db, "SELECT * FROM devices WHERE run_id = ? ORDER BY id");
  devices.bind(integer(run_id));
  while (devices.next_row()) {
    if (Status read = read_device(devices, run.devices.emplace_back()); !read) return read;
    run.device_ids.push_back(devices.get<int64_t>("id"));
  }
  if (Status read = devices.status(); !read) return read;
  return run;
}

}  // namespace

Result<std::unique_ptr<Store>> Store::open(const std::string& path) {
  Result<DatabaseHandle> db = connect(path);
  if (!db) return db.status();
  // Look before changing anything, so a newer or foreign file is left exactly as it was.
  const Result<int> found = read_schema_version(db->get(), path);
  if (!found) return found.status();
  int version = *found;
  if (version > kSchemaVersion) return newer_schema_error(path, version);
  if (Status configured = configure(db->get(), path); !configured) return configured;
  if (Status migrated = migrate(db->get(), path, kSchemaVersion, version); !migrated) {
    return migrated;
  }
  return std::unique_ptr<Store>(new Store(db->release(), path, version));
}

Status Store::create_at_version(const std::string& path, int version) {
  if (version < 1 || version > kSchemaVersion) {
    return Status::Error("create_at_version: version " + std::to_string(version) +
                         " is outside 1.." + std::to_string(kSchemaVersion));
  }
  Result<DatabaseHandle> db = connect(path);
  if (!db) return db.status();
  const Result<int> found = read_schema_version(db->get(), path);
  if (!found) return found.status();
  int existing = *found;
  if (existing != 0) {
    return Status::Error("create_at_version: " + path + " already has schema version " +
                         std::to_string(existing));
  }
  if (Status configured = configure(db->get(), path); !configured) return configured;
  return migrate(db->get(), path, version, existing);
}

Store::~Store() { sqlite3_close_v2(db_); }

int Store::schema_version() const { return schema_version_; }

Result<int64_t> Store::begin_run(const RunInfo& info) {
  const std::string context = path_ + ": cannot begin run " + info.uuid;
  StoredRun run;
  run.info = info;
  run.status = "incomplete";
  Transaction transaction(db_, Transaction::Kind::write);
  Status status = transaction.status();
  if (status) status = insert_row(db_, "runs", run_row(run));
  const int64_t run_id = sqlite3_last_insert_rowid(db_);
  if (status) status = transaction.commit();
  if (!status) return error_with(context, status.message);
  return run_id;
}

Result<int64_t> Store::add_device(int64_t run_id, const DeviceInfo& device) {
  const std::string context =
      path_ + ": cannot add device " + device.name + " to run " + std::to_string(run_id);
  Transaction transaction(db_, Transaction::Kind::write);
  Status status = transaction.status();
  if (status) status = insert_row(db_, "devices", device_row(run_id, device));
  const int64_t device_id = sqlite3_last_insert_rowid(db_);
  if (status) status = transaction.commit();
  if (!status) return error_with(context, status.message);
  return device_id;
}

Status Store::add_result(int64_t run_id, const ResultRecord& result) {
  const std::string context = path_ + ": cannot store the result of " + case_key(case_of(result)) +
                              " in run " + std::to_string(run_id);
  Transaction transaction(db_, Transaction::Kind::write);
  Status status = transaction.status();
  if (status) status = insert_result(db_, run_id, result).status();
  if (status) status = transaction.commit();
  return status ? status : error_with(context, status.message);
}

Status Store::finish_run(int64_t run_id, const std::string& protocol_json) {
  const std::string context = path_ + ": cannot finish run " + std::to_string(run_id);
  Transaction transaction(db_, Transaction::Kind::write);
  Status status = transaction.status();
  if (status) {
    Statement update(db_,
                     "UPDATE runs SET status = 'complete', "
                     "finished_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now'), "
                     "protocol_json = CASE WHEN ?1 = '' THEN protocol_json ELSE ?1 END "
                     "WHERE id = ?2");
    update.bind(text(protocol_json));
    update.bind(integer(run_id));
    status = update.execute();
  }
  if (status && sqlite3_changes(db_) != 1) status = Status::Error("no such run");
  if (status) status = transaction.commit();
  return status ? status : error_with(context, status.message);
}

Result<StoredRun> Store::load_run(int64_t run_id) {
  const std::string context = path_ + ": cannot load run " + std::to_string(run_id);
  auto fail = [&](const Status& cause) { return error_with(context, cause.message); };
  // One snapshot for all the queries, so a writer cannot add a result half-way through.
  Transaction transaction(db_, Transaction::Kind::read);
  if (!transaction.status()) return fail(transaction.status());

  Result<StoredRun> header = read_run_header(db_, run_id);
  if (!header) return fail(header.status());
  StoredRun run = std::move(*header);

  std::map<int64_t, StoredCase> cases;
  Statement case_rows(db_,
                      "SELECT * FROM cases WHERE id IN "
                      "(SELECT case_id FROM results WHERE run_id = ?)");
  case_rows.bind(integer(run_id));
  while (case_rows.next_row()) {
    StoredCase& stored = cases[case_rows.get<int64_t>("id")];
    if (Status read = read_case(case_rows, stored); !read) return fail(read);
  }
  if (!case_rows.status()) return fail(case_rows.status());

  std::map<int64_t, size_t> result_index;  // results.id -> position in run.results
  Statement results(db_, "SELECT * FROM results WHERE run_id = ? ORDER BY id");
  results.bind(integer(run_id));
  while (results.next_row()) {
    ResultRecord result;
    if (Status read = read_result(results, result); !read) return fail(read);
    const auto found = cases.find(results.get<int64_t>("case_id"));
    if (found == cases.end()) return fail(Status::Error("a result refers to a missing case"));
    result.kernel = found->second.kernel;
    result.problem = found->second.problem;
    result.distribution = found->second.distribution;
    result_index[results.get<int64_t>("id")] = run.results.size();
    run.result_ids.push_back(results.get<int64_t>("id"));
    run.results.push_back(std::move(result));
  }
  if (!results.status()) return fail(results.status());

  Statement samples(db_,
                    "SELECT samples.* FROM samples JOIN results ON samples.result_id = results.id "
                    "WHERE results.run_id = ? ORDER BY samples.id");
  samples.bind(integer(run_id));
  while (samples.next_row()) {
    const size_t index = result_index.at(samples.get<int64_t>("result_id"));
    if (Status read = read_sample(samples, run.results[index].samples.emplace_back()); !read) {
      return fail(read);
    }
  }
  if (!samples.status()) return fail(samples.status());
  if (Status committed = transaction.commit(); !committed) return fail(committed);
  return run;
}

Result<StoredRun> Store::load_run_header(int64_t run_id) {
  Result<StoredRun> run = read_run_header(db_, run_id);
  if (!run) {
    return error_with(path_ + ": cannot load run " + std::to_string(run_id), run.status().message);
  }
  return run;
}

Result<std::optional<int64_t>> Store::latest_run_id() {
  Statement latest(db_, "SELECT max(id) AS id FROM runs");
  std::optional<int64_t> run_id;
  if (latest.next_row() && !latest.is_null("id")) run_id = latest.get<int64_t>("id");
  if (Status read = latest.status(); !read) {
    return error_with(path_ + ": cannot find the latest run", read.message);
  }
  return run_id;
}

Result<std::vector<RunListEntry>> Store::list_runs(int limit) {
  Statement runs(db_,
                 "SELECT id, started_at, suite, status, "
                 "(SELECT count(*) FROM results WHERE results.run_id = runs.id) AS result_count "
                 "FROM runs ORDER BY id DESC LIMIT ?");
  runs.bind(integer(limit > 0 ? limit : -1));  // SQLite reads a negative LIMIT as no limit
  std::vector<RunListEntry> entries;
  while (runs.next_row()) {
    RunListEntry& entry = entries.emplace_back();
    runs.read("id", entry.id);
    runs.read("started_at", entry.started_at);
    runs.read("suite", entry.suite);
    runs.read("status", entry.status);
    runs.read("result_count", entry.result_count);
  }
  if (Status read = runs.status(); !read) {
    return error_with(path_ + ": cannot list runs", read.message);
  }
  return entries;
}

Status Store::add_calibration(const CalibrationRecord& calibration) {
  const std::string context = path_ + ": cannot store the " + calibration.kind + " " +
                              calibration.dtype + " calibration of " + calibration.device_uuid;
  Transaction transaction(db_, Transaction::Kind::write);
  Status status = transaction.status();
  if (status) status = insert_row(db_, "calibrations", calibration_row(calibration));
  if (status) status = transaction.commit();
  return status ? status : error_with(context, status.message);
}

Status Store::add_profile(const std::vector<ProfilePhaseRecord>& phases) {
  const std::string context =
      path_ + ": cannot store the profile of " + (phases.empty() ? "nothing" : phases[0].kernel);
  Transaction transaction(db_, Transaction::Kind::write);
  Status status = transaction.status();
  for (const ProfilePhaseRecord& phase : phases) {
    if (status) status = insert_row(db_, "profiles", profile_phase_row(phase));
  }
  if (status) status = transaction.commit();
  return status ? status : error_with(context, status.message);
}

Result<std::vector<ProfilePhaseRecord>> Store::load_profiles() {
  Statement all(db_, "SELECT * FROM profiles ORDER BY id");
  std::vector<ProfilePhaseRecord> phases;
  Status read;
  while (read && all.next_row()) read = read_profile_phase(all, phases.emplace_back());
  if (read) read = all.status();
  if (!read) return error_with(path_ + ": cannot read the profiles", read.message);
  return phases;
}

Result<std::vector<CalibrationRecord>> Store::latest_calibrations(const std::string& device_uuid) {
  Statement latest(db_,
                   "SELECT * FROM calibrations AS c WHERE c.device_uuid = ? AND c.id = "
                   "(SELECT n.id FROM calibrations AS n WHERE n.device_uuid = c.device_uuid "
                   "AND n.kind = c.kind AND n.dtype = c.dtype "
                   "ORDER BY n.measured_at DESC, n.id DESC LIMIT 1) "
                   "ORDER BY c.kind, c.dtype");
  latest.bind(text(device_uuid));
  std::vector<CalibrationRecord> calibrations;
  Status read;
  while (read && latest.next_row()) read = read_calibration(latest, calibrations.emplace_back());
  if (read) read = latest.status();
  if (!read) {
    return error_with(path_ + ": cannot read the calibrations of " + device_uuid, read.message);
  }
  return calibrations;
}

}  // namespace attnbench
