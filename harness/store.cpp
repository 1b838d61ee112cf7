// The SQLite store. Every write is one BEGIN IMMEDIATE transaction (retried while another
// process holds the write lock), every value goes through a bound parameter, and rows are read
// back by column name so the reading code does not depend on column order.
#include "harness/store.h"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <ctime>
#include <concepts>
#include <filesystem>
#include <map>
#include <string_view>
#include <thread>
#include <variant>

#include "harness/statistics.h"

namespace attnbench {

namespace {

// How long one statement waits on another process's lock before SQLite reports SQLITE_BUSY.
// A result's transaction takes milliseconds; ten seconds covers a slow disk and a checkpoint.
constexpr int kBusyTimeoutMs = 10'000;
// BEGIN IMMEDIATE may still report SQLITE_BUSY (the timeout ran out, or SQLite declined to
// wait, as it does during WAL recovery); it is retried with short pauses for this long.
constexpr auto kBusyRetryBudget = std::chrono::seconds(60);
constexpr auto kBusyRetryPause = std::chrono::milliseconds(5);

// Forward migrations: kMigrations[i] takes a database from version i to version i + 1. A step
// that has been released never changes; a schema change is a new step and a new kSchemaVersion.
// Timestamps are ISO 8601 UTC text; doubles that were not measured (NaN) are stored as NULL.
constexpr std::array<const char*, kSchemaVersion> kMigrations = {
    // Version 1: the core tables.
    R"sql(
CREATE TABLE schema_version (version INTEGER NOT NULL);

CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  uuid TEXT NOT NULL UNIQUE,
  started_at TEXT NOT NULL,
  finished_at TEXT,
  status TEXT NOT NULL CHECK (status IN ('incomplete', 'complete')),
  suite TEXT NOT NULL,
  command TEXT NOT NULL,
  protocol_json TEXT NOT NULL,
  git_sha TEXT NOT NULL,
  git_dirty INTEGER NOT NULL,
  build_type TEXT NOT NULL,
  build_flags TEXT NOT NULL,
  compiler TEXT NOT NULL,
  cuda_runtime TEXT NOT NULL,
  cuda_driver TEXT NOT NULL,
  cudnn TEXT NOT NULL,
  blas TEXT NOT NULL,
  host TEXT NOT NULL,
  cpu TEXT NOT NULL,
  os TEXT NOT NULL
);

CREATE TABLE devices (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs (id),
  kind TEXT NOT NULL,
  ordinal INTEGER NOT NULL,
  name TEXT NOT NULL,
  uuid TEXT NOT NULL,
  sm_version INTEGER,
  sm_count INTEGER,
  threads INTEGER,
  memory_bytes INTEGER,
  l2_bytes INTEGER,
  clock_mhz REAL,
  power_limit_w REAL,
  ecc INTEGER,
  persistence INTEGER,
  extra_json TEXT
);
CREATE INDEX devices_by_run ON devices (run_id);

-- One row per (kernel, problem, distribution); enumerations as their canonical names.
CREATE TABLE cases (
  id INTEGER PRIMARY KEY,
  case_key TEXT NOT NULL UNIQUE,
  kernel TEXT NOT NULL,
  batch INTEGER NOT NULL,
  heads_q INTEGER NOT NULL,
  heads_kv INTEGER NOT NULL,
  seqlen_q INTEGER NOT NULL,
  seqlen_k INTEGER NOT NULL,
  head_dim_qk INTEGER NOT NULL,
  head_dim_v INTEGER NOT NULL,
  input_dtype TEXT NOT NULL,
  output_dtype TEXT NOT NULL,
  p_dtype TEXT NOT NULL,
  fp8_scaling TEXT NOT NULL,
  mask_kind TEXT NOT NULL,
  window_left INTEGER NOT NULL,
  window_right INTEGER NOT NULL,
  layout TEXT NOT NULL,
  scale REAL NOT NULL,
  distribution TEXT NOT NULL
);

CREATE TABLE results (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs (id),
  case_id INTEGER NOT NULL REFERENCES cases (id),
  device_id INTEGER REFERENCES devices (id),
  device_name TEXT,
  series_key TEXT NOT NULL,
  status TEXT NOT NULL
    CHECK (status IN ('passed', 'failed', 'skipped', 'crashed', 'timeout', 'error')),
  message TEXT NOT NULL,
  seed INTEGER NOT NULL,  -- the uint64 seed's two's complement bit pattern
  checked INTEGER,
  max_abs_error REAL,
  lowp_error REAL,
  atol REAL,
  bound REAL,
  rel_l2 REAL,
  rmse REAL,
  nan_count INTEGER,
  inf_count INTEGER,
  rows_checked INTEGER,
  rows_total INTEGER,
  lse_max_error REAL,
  canaries_ok INTEGER,
  repeatable INTEGER,
  timed INTEGER,
  median_s REAL,
  mean_s REAL,
  min_s REAL,
  max_s REAL,
  stddev_s REAL,
  cv REAL,
  repetitions INTEGER,
  iterations_per_repetition INTEGER,
  flops REAL,
  bytes REAL,
  flops_per_s REAL,
  bytes_per_s REAL,
  fraction_of_peak_flops REAL,
  fraction_of_peak_bandwidth REAL,
  extra_memory_bytes INTEGER,
  launches INTEGER,
  energy_j REAL,
  predicted_s REAL,
  repro TEXT,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
CREATE INDEX results_by_run ON results (run_id);

CREATE TABLE samples (
  id INTEGER PRIMARY KEY,
  result_id INTEGER NOT NULL REFERENCES results (id),
  repetition INTEGER NOT NULL,
  time_s REAL,
  iterations INTEGER,
  sm_clock_mhz REAL,
  clock_reasons TEXT
);
CREATE INDEX samples_by_result ON samples (result_id);

CREATE TABLE calibrations (
  id INTEGER PRIMARY KEY,
  device_name TEXT NOT NULL,
  device_uuid TEXT NOT NULL,
  kind TEXT NOT NULL,
  dtype TEXT NOT NULL,
  value REAL,
  details TEXT NOT NULL,
  measured_at TEXT NOT NULL
);
CREATE INDEX calibrations_by_device ON calibrations (device_uuid, kind, dtype, measured_at);
)sql",
    // Version 2: regression bookkeeping and the index behind every history query.
    R"sql(
-- Expected changes and baseline resets, per series.
CREATE TABLE annotations (
  id INTEGER PRIMARY KEY,
  series_key TEXT NOT NULL,
  kind TEXT NOT NULL,
  reason TEXT NOT NULL,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
CREATE INDEX annotations_by_series ON annotations (series_key);

CREATE TABLE alerts (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs (id),
  series_key TEXT NOT NULL,
  kind TEXT NOT NULL,
  severity TEXT NOT NULL,
  message TEXT NOT NULL,
  details_json TEXT NOT NULL DEFAULT '{}',
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
CREATE INDEX alerts_by_run ON alerts (run_id);

CREATE INDEX results_by_series ON results (series_key, run_id);
)sql",
    // Version 3: the GPU backend: what a kernel reports about its run (FP8 amax, the engine
    // chosen) and the library versions of a run (cuDNN compiled and loaded, frontend, cuBLAS).
    R"sql(
ALTER TABLE results ADD COLUMN details_json TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN cudnn_frontend TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN cublas TEXT NOT NULL DEFAULT '';
)sql",
    // Version 4: regression analysis, and runs measured on many machines then merged.
    R"sql(
-- What a run asked for, so runs of the same job compare case for case; the run whose suspects a
-- rerun re-measured; the database a merged run came from; when it was last analysed.
ALTER TABLE runs ADD COLUMN selection TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN shard TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN rerun_of INTEGER REFERENCES runs (id);
ALTER TABLE runs ADD COLUMN merged_from TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN analysed_at TEXT;
CREATE INDEX runs_by_rerun ON runs (rerun_of);

-- The median SM clock of a result's repetitions: history queries need it without the samples.
ALTER TABLE results ADD COLUMN sm_clock_mhz REAL;

-- An alert's verdict (ok, suspected, confirmed, ...), since when, by how much, what differs
-- from the baseline's environment and the annotation that covers it.
ALTER TABLE alerts ADD COLUMN state TEXT NOT NULL DEFAULT '';
ALTER TABLE alerts ADD COLUMN since_run_id INTEGER;
ALTER TABLE alerts ADD COLUMN change_fraction REAL;
ALTER TABLE alerts ADD COLUMN environment TEXT NOT NULL DEFAULT '';
ALTER TABLE alerts ADD COLUMN annotation TEXT NOT NULL DEFAULT '';
ALTER TABLE alerts ADD COLUMN chip_changed INTEGER NOT NULL DEFAULT 0;
CREATE INDEX alerts_by_series ON alerts (series_key, run_id);

-- The first run an annotation governs.
ALTER TABLE annotations ADD COLUMN from_run_id INTEGER;

-- A run's level per device model: the log of the speed factor all its series shared.
CREATE TABLE run_levels (
  run_id INTEGER NOT NULL REFERENCES runs (id),
  device_name TEXT NOT NULL,
  level REAL NOT NULL,
  series_count INTEGER NOT NULL,
  PRIMARY KEY (run_id, device_name)
);
)sql",
    // Version 5: what timing a result cost and why it stopped (issue 11: timing plans in
    // wall-clock time, repetitions that stop once the samples are stable).
    R"sql(
ALTER TABLE results ADD COLUMN forwards_timed INTEGER;
ALTER TABLE results ADD COLUMN timing_wall_s REAL;
ALTER TABLE results ADD COLUMN timing_stop TEXT
  CHECK (timing_stop IS NULL OR timing_stop IN ('stable', 'repetitions', 'budget'));
)sql",
};

// ---- values and statements ---------------------------------------------------------------------

using SqlValue = std::variant<std::nullptr_t, int64_t, double, std::string>;

SqlValue integer(int64_t value) { return value; }
SqlValue real(double value) { return std::isnan(value) ? SqlValue(nullptr) : SqlValue(value); }
SqlValue text(std::string_view value) { return std::string(value); }

struct Column {
  const char* name;
  SqlValue value;
};
using Row = std::vector<Column>;

Status error_with(const std::string& context, const std::string& message) {
  return Status::Error(context + ": " + message);
}

// One prepared statement. Parameters are bound in order; result columns are read by name.
// The first error (prepare, bind, step, unknown column) is kept and reported by status().
class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr) !=
        SQLITE_OK) {
      fail();
    }
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(const SqlValue& value) {
    if (!stmt_) return *this;
    const int index = ++bound_;
    int rc = SQLITE_OK;
    if (const auto* number = std::get_if<int64_t>(&value)) {
      rc = sqlite3_bind_int64(stmt_, index, *number);
    } else if (const auto* floating = std::get_if<double>(&value)) {
      rc = sqlite3_bind_double(stmt_, index, *floating);
    } else if (const auto* characters = std::get_if<std::string>(&value)) {
      rc = sqlite3_bind_text64(stmt_, index, characters->data(), characters->size(),
                               SQLITE_TRANSIENT, SQLITE_UTF8);
    } else {
      rc = sqlite3_bind_null(stmt_, index);
    }
    if (rc != SQLITE_OK) fail();
    return *this;
  }

  // True while a row is available; false at the end and on error.
  bool next_row() {
    if (!stmt_ || !error_.empty()) return false;
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) fail();
    return false;
  }

  // Runs a statement that returns no rows (INSERT, UPDATE, DELETE).
  Status execute() {
    next_row();
    return status();
  }

  Status status() const { return error_.empty() ? Status::Ok() : Status::Error(error_); }
  int error_code() const { return error_code_; }

  // Ready to run again with new parameters (the same compiled statement).
  void reset() {
    if (!stmt_) return;
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    bound_ = 0;
  }

  bool is_null(const char* name) {
    const int index = index_of(name);
    return index < 0 || sqlite3_column_type(stmt_, index) == SQLITE_NULL;
  }

  // NULL leaves an integer, bool or text field at its default; a NULL double reads as NaN.
  template <std::integral T>
  void read(const char* name, T& field) {
    const int index = index_of(name);
    if (index >= 0 && sqlite3_column_type(stmt_, index) != SQLITE_NULL) {
      field = static_cast<T>(sqlite3_column_int64(stmt_, index));
    }
  }
  void read(const char* name, bool& field) {
    int64_t value = field ? 1 : 0;
    read(name, value);
    field = value != 0;
  }
  void read(const char* name, double& field) {
    const int index = index_of(name);
    if (index < 0) return;
    field = sqlite3_column_type(stmt_, index) == SQLITE_NULL ? kNotMeasured
                                                             : sqlite3_column_double(stmt_, index);
  }
  void read(const char* name, std::string& field) {
    const int index = index_of(name);
    if (index < 0 || sqlite3_column_type(stmt_, index) == SQLITE_NULL) return;
    const auto* characters = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, index));
    field.assign(characters, static_cast<size_t>(sqlite3_column_bytes(stmt_, index)));
  }
  template <typename T>
  T get(const char* name) {
    T value{};
    read(name, value);
    return value;
  }

 private:
  void fail() {
    if (!error_.empty()) return;
    error_code_ = sqlite3_errcode(db_);
    error_ = sqlite3_errmsg(db_);
  }

  int index_of(const char* name) {
    if (columns_.empty()) {
      for (int i = 0; i < sqlite3_column_count(stmt_); ++i) {
        columns_.emplace(sqlite3_column_name(stmt_, i), i);
      }
    }
    const auto found = columns_.find(name);
    if (found != columns_.end()) return found->second;
    if (error_.empty()) error_ = std::string("no column '") + name + "' in the query's result";
    return -1;
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int bound_ = 0;
  std::map<std::string, int, std::less<>> columns_;
  std::string error_;
  int error_code_ = SQLITE_OK;
};

// INSERT INTO table (a, b, ...) VALUES (?, ?, ...) [suffix]; only the column names are
// formatted into the SQL, every value is bound.
Status insert_row(sqlite3* db, std::string_view table, const Row& row,
                  std::string_view suffix = {}) {
  std::string names;
  std::string placeholders;
  for (const Column& column : row) {
    if (!names.empty()) {
      names += ", ";
      placeholders += ", ";
    }
    names += column.name;
    placeholders += '?';
  }
  std::string sql = "INSERT INTO ";
  sql.append(table).append(" (").append(names).append(") VALUES (").append(placeholders);
  sql.append(")").append(suffix);
  Statement insert(db, sql);
  for (const Column& column : row) insert.bind(column.value);
  return insert.execute();
}

bool is_busy(int rc) { return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED; }

// Runs SQL without values (BEGIN, COMMIT, pragmas, migrations), retrying while the database is
// busy.
Status execute_with_retry(sqlite3* db, const char* sql) {
  const auto deadline = std::chrono::steady_clock::now() + kBusyRetryBudget;
  for (;;) {
    const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return Status::Ok();
    if (!is_busy(rc) || std::chrono::steady_clock::now() >= deadline) {
      return Status::Error(sqlite3_errmsg(db));
    }
    std::this_thread::sleep_for(kBusyRetryPause);
  }
}

// A transaction that rolls back unless committed. Writers take the write lock up front (BEGIN
// IMMEDIATE), so two processes never deadlock upgrading read locks; readers get a snapshot.
class Transaction {
 public:
  enum class Kind { read, write };
  Transaction(sqlite3* db, Kind kind) : db_(db) {
    status_ = execute_with_retry(db, kind == Kind::write ? "BEGIN IMMEDIATE" : "BEGIN");
    active_ = status_.ok;
  }
  ~Transaction() {
    if (active_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  const Status& status() const { return status_; }
  Status commit() {
    Status committed = execute_with_retry(db_, "COMMIT");
    if (committed) active_ = false;
    return committed;
  }

 private:
  sqlite3* db_;
  Status status_;
  bool active_ = false;
};

// ---- opening and migrating -----------------------------------------------------------------

struct CloseDatabase {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using DatabaseHandle = std::unique_ptr<sqlite3, CloseDatabase>;

DatabaseHandle connect(const std::string& path, Status& status) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code error;
    std::filesystem::create_directories(parent, error);
    if (error) {
      status = Status::Error("cannot create the folder " + parent.string() + " for " + path + ": " +
                             error.message());
      return nullptr;
    }
  }
  sqlite3* raw = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  DatabaseHandle db(raw);
  if (rc != SQLITE_OK) {
    status = error_with("cannot open the database " + path,
                        raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc));
    return nullptr;
  }
  sqlite3_busy_timeout(db.get(), kBusyTimeoutMs);
  status = Status::Ok();
  return db;
}

Status newer_schema_error(const std::string& path, int version) {
  return Status::Error(path + " has schema version " + std::to_string(version) +
                       "; this attnbench reads up to " + std::to_string(kSchemaVersion));
}

// 0 for an empty file. Refuses files that are not SQLite, or SQLite but not ours.
Status read_schema_version(sqlite3* db, const std::string& path, int& version) {
  version = 0;
  // SQLite's own tables (sqlite_stat1 after an ANALYZE, ...) say nothing about who wrote the file.
  Statement tables(
      db,
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' "
      "ESCAPE '\\'");
  bool has_version_table = false;
  bool has_other_tables = false;
  while (tables.next_row()) {
    if (tables.get<std::string>("name") == "schema_version") {
      has_version_table = true;
    } else {
      has_other_tables = true;
    }
  }
  if (!tables.status()) {
    if (tables.error_code() == SQLITE_NOTADB) {
      return Status::Error(path + " is not an attnbench database (not a SQLite file)");
    }
    return error_with("cannot read the schema of " + path, tables.status().message);
  }
  if (!has_version_table) {
    if (!has_other_tables) return Status::Ok();
    return Status::Error(path +
                         " is a SQLite database without a schema_version table, not an "
                         "attnbench database");
  }
  Statement rows(db, "SELECT version FROM schema_version");
  int row_count = 0;
  while (rows.next_row()) {
    rows.read("version", version);
    ++row_count;
  }
  if (!rows.status()) {
    return error_with("cannot read the schema version of " + path, rows.status().message);
  }
  if (row_count != 1) {
    return Status::Error(path + " has a damaged schema_version table (" +
                         std::to_string(row_count) + " rows, expected 1)");
  }
  return Status::Ok();
}

// Connection settings. WAL lets readers run beside a writer; synchronous=NORMAL in WAL mode
// keeps every committed transaction through a process crash (only a power cut can lose the
// last ones) without an fsync per result.
Status configure(sqlite3* db, const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + kBusyRetryBudget;
  std::string mode;
  for (;;) {
    Statement journal(db, "PRAGMA journal_mode = WAL");
    if (journal.next_row()) journal.read("journal_mode", mode);
    if (journal.status()) break;
    if (!is_busy(journal.error_code()) || std::chrono::steady_clock::now() >= deadline) {
      return error_with("cannot switch " + path + " to WAL mode", journal.status().message);
    }
    std::this_thread::sleep_for(kBusyRetryPause);
  }
  if (mode != "wal") {
    return Status::Error("cannot switch " + path + " to WAL mode (the journal mode is '" + mode +
                         "'); is it on a file system without shared memory?");
  }
  for (const char* pragma : {"PRAGMA synchronous = NORMAL", "PRAGMA foreign_keys = ON"}) {
    if (Status set = execute_with_retry(db, pragma); !set) {
      return error_with("cannot configure " + path, set.message);
    }
  }
  return Status::Ok();
}

// Brings the file to `target` (<= kSchemaVersion) inside one write transaction; the version
// is read again under the lock because another process may have migrated it meanwhile.
Status migrate(sqlite3* db, const std::string& path, int target, int& version) {
  Transaction transaction(db, Transaction::Kind::write);
  if (!transaction.status()) {
    return error_with("cannot lock " + path + " to check its schema", transaction.status().message);
  }
  if (Status read = read_schema_version(db, path, version); !read) return read;
  if (version > kSchemaVersion) return newer_schema_error(path, version);
  if (version >= target) return transaction.commit();
  for (int step = version; step < target; ++step) {
    if (Status applied = execute_with_retry(db, kMigrations[step]); !applied) {
      return error_with(
          path + ": migration to schema version " + std::to_string(step + 1) + " failed",
          applied.message);
    }
  }
  Status recorded = Statement(db, "DELETE FROM schema_version").execute();
  if (recorded) recorded = insert_row(db, "schema_version", {{"version", integer(target)}});
  if (recorded) recorded = transaction.commit();
  if (!recorded) return error_with("cannot record the schema version of " + path, recorded.message);
  version = target;
  return Status::Ok();
}

// ---- rows <-> records ----------------------------------------------------------------------

// Unique per (kernel, problem, distribution): shape_string prints every field that differs from
// its default.
std::string case_key(const ResultRecord& result) {
  return result.kernel + "|" + shape_string(result.problem) + "|" + result.distribution;
}

// The mask's kind without window bounds: "window" rather than "window(2,0)"; the bounds have
// columns of their own.
std::string mask_kind_name(MaskKind kind) {
  const std::string name = mask_name(Mask{kind});
  return name.substr(0, name.find('('));
}

std::optional<MaskKind> parse_mask_kind(std::string_view text) {
  constexpr std::array kMaskKinds = {MaskKind::none, MaskKind::causal, MaskKind::causal_br,
                                     MaskKind::window, MaskKind::padding};
  for (MaskKind kind : kMaskKinds) {
    if (mask_kind_name(kind) == text) return kind;
  }
  return std::nullopt;
}

Row run_row(const RunInfo& info) {
  const EnvironmentInfo& env = info.env;
  return {{"uuid", text(info.uuid)},
          {"started_at", text(info.started_at)},
          {"status", text("incomplete")},
          {"suite", text(info.suite)},
          {"command", text(info.command)},
          {"protocol_json", text(info.protocol_json)},
          {"git_sha", text(env.git_sha)},
          {"git_dirty", integer(env.git_dirty)},
          {"build_type", text(env.build_type)},
          {"build_flags", text(env.build_flags)},
          {"compiler", text(env.compiler)},
          {"cuda_runtime", text(env.cuda_runtime)},
          {"cuda_driver", text(env.cuda_driver)},
          {"cudnn", text(env.cudnn)},
          {"cudnn_frontend", text(env.cudnn_frontend)},
          {"cublas", text(env.cublas)},
          {"blas", text(env.blas)},
          {"host", text(env.host)},
          {"cpu", text(env.cpu)},
          {"os", text(env.os)},
          {"selection", text(info.selection)},
          {"shard", text(info.shard)},
          {"rerun_of", info.rerun_of == 0 ? SqlValue(nullptr) : integer(info.rerun_of)},
          {"merged_from", text(info.merged_from)}};
}

RunInfo read_run_info(Statement& row) {
  RunInfo info;
  row.read("uuid", info.uuid);
  row.read("started_at", info.started_at);
  row.read("suite", info.suite);
  row.read("command", info.command);
  row.read("protocol_json", info.protocol_json);
  EnvironmentInfo& env = info.env;
  row.read("git_sha", env.git_sha);
  row.read("git_dirty", env.git_dirty);
  row.read("build_type", env.build_type);
  row.read("build_flags", env.build_flags);
  row.read("compiler", env.compiler);
  row.read("cuda_runtime", env.cuda_runtime);
  row.read("cuda_driver", env.cuda_driver);
  row.read("cudnn", env.cudnn);
  row.read("cudnn_frontend", env.cudnn_frontend);
  row.read("cublas", env.cublas);
  row.read("blas", env.blas);
  row.read("host", env.host);
  row.read("cpu", env.cpu);
  row.read("os", env.os);
  row.read("selection", info.selection);
  row.read("shard", info.shard);
  row.read("rerun_of", info.rerun_of);
  row.read("merged_from", info.merged_from);
  return info;
}

Row device_row(int64_t run_id, const DeviceInfo& device) {
  return {{"run_id", integer(run_id)},
          {"kind", text(device.kind)},
          {"ordinal", integer(device.ordinal)},
          {"name", text(device.name)},
          {"uuid", text(device.uuid)},
          {"sm_version", integer(device.sm_version)},
          {"sm_count", integer(device.sm_count)},
          {"threads", integer(device.threads)},
          {"memory_bytes", integer(device.memory_bytes)},
          {"l2_bytes", integer(device.l2_bytes)},
          {"clock_mhz", real(device.clock_mhz)},
          {"power_limit_w", real(device.power_limit_w)},
          {"ecc", integer(device.ecc)},
          {"persistence", integer(device.persistence)},
          {"extra_json", text(device.extra_json)}};
}

DeviceInfo read_device(Statement& row) {
  DeviceInfo device;
  row.read("kind", device.kind);
  row.read("ordinal", device.ordinal);
  row.read("name", device.name);
  row.read("uuid", device.uuid);
  row.read("sm_version", device.sm_version);
  row.read("sm_count", device.sm_count);
  row.read("threads", device.threads);
  row.read("memory_bytes", device.memory_bytes);
  row.read("l2_bytes", device.l2_bytes);
  row.read("clock_mhz", device.clock_mhz);
  row.read("power_limit_w", device.power_limit_w);
  row.read("ecc", device.ecc);
  row.read("persistence", device.persistence);
  row.read("extra_json", device.extra_json);
  return device;
}

Row case_row(const std::string& key, const ResultRecord& result) {
  const Problem& problem = result.problem;
  return {{"case_key", text(key)},
          {"kernel", text(result.kernel)},
          {"batch", integer(problem.batch)},
          {"heads_q", integer(problem.heads_q)},
          {"heads_kv", integer(problem.heads_kv)},
          {"seqlen_q", integer(problem.seqlen_q)},
          {"seqlen_k", integer(problem.seqlen_k)},
          {"head_dim_qk", integer(problem.head_dim_qk)},
          {"head_dim_v", integer(problem.head_dim_v)},
          {"input_dtype", text(dtype_name(problem.input_dtype))},
          {"output_dtype", text(dtype_name(problem.output_dtype))},
          {"p_dtype", text(dtype_name(problem.p_dtype))},
          {"fp8_scaling", text(fp8_scaling_name(problem.fp8_scaling))},
          {"mask_kind", text(mask_kind_name(problem.mask.kind))},
          {"window_left", integer(problem.mask.window_left)},
          {"window_right", integer(problem.mask.window_right)},
          {"layout", text(layout_name(problem.layout))},
          {"scale", real(problem.scale)},
          {"distribution", text(result.distribution)}};
}

struct StoredCase {
  std::string kernel;
  Problem problem;
  std::string distribution;
};

// Rebuilds a case from its columns; the message names the column whose value is unknown.
Status read_case(Statement& row, StoredCase& stored) {
  row.read("kernel", stored.kernel);
  row.read("distribution", stored.distribution);
  Problem& problem = stored.problem;
  row.read("batch", problem.batch);
  row.read("heads_q", problem.heads_q);
  row.read("heads_kv", problem.heads_kv);
  row.read("seqlen_q", problem.seqlen_q);
  row.read("seqlen_k", problem.seqlen_k);
  row.read("head_dim_qk", problem.head_dim_qk);
  row.read("head_dim_v", problem.head_dim_v);
  row.read("scale", problem.scale);

  auto unknown = [&](const char* column) {
    return Status::Error("case " + row.get<std::string>("case_key") + " has an unknown " + column +
                         " '" + row.get<std::string>(column) + "'");
  };
  const auto dtype_of = [&](const char* column, DType& dtype) {
    const std::optional<DType> parsed = parse_dtype(row.get<std::string>(column));
    if (parsed) dtype = *parsed;
    return parsed.has_value();
  };
  if (!dtype_of("input_dtype", problem.input_dtype)) return unknown("input_dtype");
  if (!dtype_of("output_dtype", problem.output_dtype)) return unknown("output_dtype");
  if (!dtype_of("p_dtype", problem.p_dtype)) return unknown("p_dtype");
  const std::optional<Fp8Scaling> scaling = parse_fp8_scaling(row.get<std::string>("fp8_scaling"));
  if (!scaling) return unknown("fp8_scaling");
  problem.fp8_scaling = *scaling;
  const std::optional<MaskKind> mask_kind = parse_mask_kind(row.get<std::string>("mask_kind"));
  if (!mask_kind) return unknown("mask_kind");
  problem.mask.kind = *mask_kind;
  row.read("window_left", problem.mask.window_left);
  row.read("window_right", problem.mask.window_right);
  const std::optional<Layout> layout = parse_layout(row.get<std::string>("layout"));
  if (!layout) return unknown("layout");
  problem.layout = *layout;
  return row.status();
}

// The median SM clock of the repetitions that recorded one; NaN when none did.
double median_clock(const std::vector<Sample>& samples) {
  std::vector<double> clocks;
  for (const Sample& sample : samples) {
    if (std::isfinite(sample.sm_clock_mhz)) clocks.push_back(sample.sm_clock_mhz);
  }
  return clocks.empty() ? kNotMeasured : median(std::move(clocks));
}

Row result_row(int64_t run_id, int64_t case_id, const ResultRecord& result) {
  const CheckSummary& check = result.check;
  const TimingSummary& timing = result.timing;
  return {
      {"run_id", integer(run_id)},
      {"case_id", integer(case_id)},
      // Device ids start at 1; 0 means the result belongs to no device row.
      {"device_id", result.device_id == 0 ? SqlValue(nullptr) : integer(result.device_id)},
      {"device_name", text(result.device_name)},
      {"series_key", text(result.series_key)},
      {"status", text(result_status_name(result.status))},
      {"message", text(result.message)},
      {"seed", integer(static_cast<int64_t>(result.seed))},
      {"checked", integer(check.checked)},
      {"max_abs_error", real(check.max_abs_error)},
      {"lowp_error", real(check.lowp_error)},
      {"atol", real(check.atol)},
      {"bound", real(check.bound)},
      {"rel_l2", real(check.rel_l2)},
      {"rmse", real(check.rmse)},
      {"nan_count", integer(check.nan_count)},
      {"inf_count", integer(check.inf_count)},
      {"rows_checked", integer(check.rows_checked)},
      {"rows_total", integer(check.rows_total)},
      {"lse_max_error", real(check.lse_max_error)},
      {"canaries_ok", integer(check.canaries_ok)},
      {"repeatable", integer(check.repeatable)},
      {"timed", integer(timing.timed)},
      {"median_s", real(timing.median_s)},
      {"mean_s", real(timing.mean_s)},
      {"min_s", real(timing.min_s)},
      {"max_s", real(timing.max_s)},
      {"stddev_s", real(timing.stddev_s)},
      {"cv", real(timing.cv)},
      {"repetitions", integer(timing.repetitions)},
      {"iterations_per_repetition", integer(timing.iterations_per_repetition)},
      {"forwards_timed", timing.timed ? integer(timing.forwards_timed) : SqlValue(nullptr)},
      {"timing_wall_s", real(timing.wall_s)},
      {"timing_stop", timing.stop ? text(timing_stop_name(*timing.stop)) : SqlValue(nullptr)},
      {"flops", real(result.flops)},
      {"bytes", real(result.bytes)},
      {"flops_per_s", real(result.flops_per_s)},
      {"bytes_per_s", real(result.bytes_per_s)},
      {"fraction_of_peak_flops", real(result.fraction_of_peak_flops)},
      {"fraction_of_peak_bandwidth", real(result.fraction_of_peak_bandwidth)},
      {"extra_memory_bytes", integer(result.extra_memory_bytes)},
      {"launches", integer(result.launches)},
      {"energy_j", real(result.energy_j)},
      {"predicted_s", real(result.predicted_s)},
      {"repro", text(result.repro)},
      {"details_json", text(result.details_json)},
      {"sm_clock_mhz", real(median_clock(result.samples))},
  };
}

// Everything but the case's columns and the samples.
Status read_result(Statement& row, ResultRecord& result) {
  row.read("device_id", result.device_id);
  row.read("device_name", result.device_name);
  row.read("series_key", result.series_key);
  row.read("message", result.message);
  row.read("seed", result.seed);
  CheckSummary& check = result.check;
  row.read("checked", check.checked);
  row.read("max_abs_error", check.max_abs_error);
  row.read("lowp_error", check.lowp_error);
  row.read("atol", check.atol);
  row.read("bound", check.bound);
  row.read("rel_l2", check.rel_l2);
  row.read("rmse", check.rmse);
  row.read("nan_count", check.nan_count);
  row.read("inf_count", check.inf_count);
  row.read("rows_checked", check.rows_checked);
  row.read("rows_total", check.rows_total);
  row.read("lse_max_error", check.lse_max_error);
  row.read("canaries_ok", check.canaries_ok);
  row.read("repeatable", check.repeatable);
  TimingSummary& timing = result.timing;
  row.read("timed", timing.timed);
  row.read("median_s", timing.median_s);
  row.read("mean_s", timing.mean_s);
  row.read("min_s", timing.min_s);
  row.read("max_s", timing.max_s);
  row.read("stddev_s", timing.stddev_s);
  row.read("cv", timing.cv);
  row.read("repetitions", timing.repetitions);
  row.read("iterations_per_repetition", timing.iterations_per_repetition);
  row.read("forwards_timed", timing.forwards_timed);
  row.read("timing_wall_s", timing.wall_s);
  if (!row.is_null("timing_stop")) {
    const std::string stop = row.get<std::string>("timing_stop");
    timing.stop = parse_timing_stop(stop);
    if (!timing.stop) return Status::Error("unknown timing stop '" + stop + "'");
  }
  row.read("flops", result.flops);
  row.read("bytes", result.bytes);
  row.read("flops_per_s", result.flops_per_s);
  row.read("bytes_per_s", result.bytes_per_s);
  row.read("fraction_of_peak_flops", result.fraction_of_peak_flops);
  row.read("fraction_of_peak_bandwidth", result.fraction_of_peak_bandwidth);
  row.read("extra_memory_bytes", result.extra_memory_bytes);
  row.read("launches", result.launches);
  row.read("energy_j", result.energy_j);
  row.read("predicted_s", result.predicted_s);
  row.read("repro", result.repro);
  row.read("details_json", result.details_json);
  const std::string status_name = row.get<std::string>("status");
  const std::optional<ResultStatus> status = parse_result_status(status_name);
  if (!status) return Status::Error("unknown result status '" + status_name + "'");
  result.status = *status;
  return row.status();
}

Row sample_row(int64_t result_id, const Sample& sample) {
  return {{"result_id", integer(result_id)},
          {"repetition", integer(sample.repetition)},
          {"time_s", real(sample.time_s)},
          {"iterations", integer(sample.iterations)},
          {"sm_clock_mhz", real(sample.sm_clock_mhz)},
          {"clock_reasons", text(sample.clock_reasons)}};
}

Sample read_sample(Statement& row) {
  Sample sample;
  row.read("repetition", sample.repetition);
  row.read("time_s", sample.time_s);
  row.read("iterations", sample.iterations);
  row.read("sm_clock_mhz", sample.sm_clock_mhz);
  row.read("clock_reasons", sample.clock_reasons);
  return sample;
}

Row calibration_row(const CalibrationRecord& calibration) {
  return {{"device_name", text(calibration.device_name)},
          {"device_uuid", text(calibration.device_uuid)},
          {"kind", text(calibration.kind)},
          {"dtype", text(calibration.dtype)},
          {"value", real(calibration.value)},
          {"details", text(calibration.details)},
          {"measured_at", text(calibration.measured_at)}};
}

CalibrationRecord read_calibration(Statement& row) {
  CalibrationRecord calibration;
  row.read("device_name", calibration.device_name);
  row.read("device_uuid", calibration.device_uuid);
  row.read("kind", calibration.kind);
  row.read("dtype", calibration.dtype);
  row.read("value", calibration.value);
  row.read("details", calibration.details);
  row.read("measured_at", calibration.measured_at);
  return calibration;
}

// Finds the case row of a result, inserting it when new, and makes sure the stored case is this
// very problem (a key that mapped two problems to one row would mislabel history).
Status find_or_add_case(sqlite3* db, const ResultRecord& result, int64_t& case_id) {
  const std::string key = case_key(result);
  if (Status added =
          insert_row(db, "cases", case_row(key, result), " ON CONFLICT (case_key) DO NOTHING");
      !added) {
    return added;
  }
  Statement select(db, "SELECT * FROM cases WHERE case_key = ?");
  select.bind(text(key));
  if (!select.next_row()) {
    return select.status() ? Status::Error("case " + key + " is missing after its insert")
                           : select.status();
  }
  select.read("id", case_id);
  StoredCase stored;
  if (Status read = read_case(select, stored); !read) return read;
  if (stored.kernel != result.kernel || !(stored.problem == result.problem) ||
      stored.distribution != result.distribution) {
    return Status::Error("case key " + key + " already names a different problem");
  }
  return Status::Ok();
}

}  // namespace

// ---- Store -------------------------------------------------------------------------------------

std::unique_ptr<Store> Store::open(const std::string& path, Status& status) {
  DatabaseHandle db = connect(path, status);
  if (!db) return nullptr;
  // Look before changing anything, so a newer or foreign file is left exactly as it was.
  int version = 0;
  status = read_schema_version(db.get(), path, version);
  if (status && version > kSchemaVersion) status = newer_schema_error(path, version);
  if (status) status = configure(db.get(), path);
  if (status) status = migrate(db.get(), path, kSchemaVersion, version);
  if (!status) return nullptr;
  return std::unique_ptr<Store>(new Store(db.release(), path, version));
}

Status Store::create_at_version(const std::string& path, int version) {
  if (version < 1 || version > kSchemaVersion) {
    return Status::Error("create_at_version: version " + std::to_string(version) +
                         " is outside 1.." + std::to_string(kSchemaVersion));
  }
  Status status;
  DatabaseHandle db = connect(path, status);
  if (!db) return status;
  int existing = 0;
  if (Status read = read_schema_version(db.get(), path, existing); !read) return read;
  if (existing != 0) {
    return Status::Error("create_at_version: " + path + " already has schema version " +
                         std::to_string(existing));
  }
  if (Status configured = configure(db.get(), path); !configured) return configured;
  return migrate(db.get(), path, version, existing);
}

Store::~Store() { sqlite3_close_v2(db_); }

int Store::schema_version() const { return schema_version_; }

int64_t Store::begin_run(const RunInfo& info, Status& status) {
  const std::string context = path_ + ": cannot begin run " + info.uuid;
  Transaction transaction(db_, Transaction::Kind::write);
  status = transaction.status();
  if (status) status = insert_row(db_, "runs", run_row(info));
  const int64_t run_id = sqlite3_last_insert_rowid(db_);
  if (status) status = transaction.commit();
  if (!status) {
    status = error_with(context, status.message);
    return 0;
  }
  return run_id;
}

int64_t Store::add_device(int64_t run_id, const DeviceInfo& device, Status& status) {
  const std::string context =
      path_ + ": cannot add device " + device.name + " to run " + std::to_string(run_id);
  Transaction transaction(db_, Transaction::Kind::write);
  status = transaction.status();
  if (status) status = insert_row(db_, "devices", device_row(run_id, device));
  const int64_t device_id = sqlite3_last_insert_rowid(db_);
  if (status) status = transaction.commit();
  if (!status) {
    status = error_with(context, status.message);
    return 0;
  }
  return device_id;
}

Status Store::add_result(int64_t run_id, const ResultRecord& result) {
  const std::string context = path_ + ": cannot store the result of " + case_key(result) +
                              " in run " + std::to_string(run_id);
  Transaction transaction(db_, Transaction::Kind::write);
  Status status = transaction.status();
  int64_t case_id = 0;
  if (status) status = find_or_add_case(db_, result, case_id);
  if (status) status = insert_row(db_, "results", result_row(run_id, case_id, result));
  const int64_t result_id = sqlite3_last_insert_rowid(db_);
  for (size_t i = 0; status && i < result.samples.size(); ++i) {
    status = insert_row(db_, "samples", sample_row(result_id, result.samples[i]));
  }
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

std::optional<StoredRun> Store::load_run(int64_t run_id, Status& status) {
  const std::string context = path_ + ": cannot load run " + std::to_string(run_id);
  auto fail = [&](const Status& cause) {
    status = error_with(context, cause.message);
    return std::nullopt;
  };
  // One snapshot for all the queries, so a writer cannot add a result half-way through.
  Transaction transaction(db_, Transaction::Kind::read);
  if (!transaction.status()) return fail(transaction.status());

  StoredRun run;
  run.id = run_id;
  Statement runs(db_, "SELECT * FROM runs WHERE id = ?");
  runs.bind(integer(run_id));
  if (!runs.next_row()) return fail(runs.status() ? Status::Error("no such run") : runs.status());
  run.info = read_run_info(runs);
  runs.read("status", run.status);
  runs.read("finished_at", run.finished_at);
  runs.read("analysed_at", run.analysed_at);
  if (!runs.status()) return fail(runs.status());

  Statement devices(db_, "SELECT * FROM devices WHERE run_id = ? ORDER BY id");
  devices.bind(integer(run_id));
  while (devices.next_row()) {
    run.devices.push_back(read_device(devices));
    run.device_ids.push_back(devices.get<int64_t>("id"));
  }
  if (!devices.status()) return fail(devices.status());

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
    run.results[index].samples.push_back(read_sample(samples));
  }
  if (!samples.status()) return fail(samples.status());
  if (Status committed = transaction.commit(); !committed) return fail(committed);
  status = Status::Ok();
  return run;
}

std::optional<StoredRun> Store::load_run_header(int64_t run_id, Status& status) {
  const std::string context = path_ + ": cannot load run " + std::to_string(run_id);
  Statement runs(db_, "SELECT * FROM runs WHERE id = ?");
  runs.bind(integer(run_id));
  if (!runs.next_row()) {
    status = error_with(context, runs.status() ? "no such run" : runs.status().message);
    return std::nullopt;
  }
  StoredRun run;
  run.id = run_id;
  run.info = read_run_info(runs);
  runs.read("status", run.status);
  runs.read("finished_at", run.finished_at);
  runs.read("analysed_at", run.analysed_at);
  Statement devices(db_, "SELECT * FROM devices WHERE run_id = ? ORDER BY id");
  devices.bind(integer(run_id));
  while (devices.next_row()) {
    run.devices.push_back(read_device(devices));
    run.device_ids.push_back(devices.get<int64_t>("id"));
  }
  status = runs.status() ? devices.status() : runs.status();
  if (!status) {
    status = error_with(context, status.message);
    return std::nullopt;
  }
  return run;
}

std::optional<int64_t> Store::latest_run_id(Status& status) {
  Statement latest(db_, "SELECT max(id) AS id FROM runs");
  std::optional<int64_t> run_id;
  if (latest.next_row() && !latest.is_null("id")) run_id = latest.get<int64_t>("id");
  status = latest.status();
  if (!status) status = error_with(path_ + ": cannot find the latest run", status.message);
  return status ? run_id : std::nullopt;
}

std::vector<RunListEntry> Store::list_runs(int limit, Status& status) {
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
  status = runs.status();
  if (!status) {
    status = error_with(path_ + ": cannot list runs", status.message);
    entries.clear();
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

std::vector<CalibrationRecord> Store::latest_calibrations(const std::string& device_uuid,
                                                          Status& status) {
  Statement latest(db_,
                   "SELECT * FROM calibrations AS c WHERE c.device_uuid = ? AND c.id = "
                   "(SELECT n.id FROM calibrations AS n WHERE n.device_uuid = c.device_uuid "
                   "AND n.kind = c.kind AND n.dtype = c.dtype "
                   "ORDER BY n.measured_at DESC, n.id DESC LIMIT 1) "
                   "ORDER BY c.kind, c.dtype");
  latest.bind(text(device_uuid));
  std::vector<CalibrationRecord> calibrations;
  while (latest.next_row()) calibrations.push_back(read_calibration(latest));
  status = latest.status();
  if (!status) {
    status = error_with(path_ + ": cannot read the calibrations of " + device_uuid, status.message);
    calibrations.clear();
  }
  return calibrations;
}

// ---- history and regression analysis -----------------------------------------------------------

namespace {

Row alert_row(int64_t run_id, const AlertRecord& alert) {
  return {{"run_id", integer(run_id)},
          {"series_key", text(alert.series_key)},
          {"kind", text(alert.kind)},
          {"severity", text(alert.severity)},
          {"message", text(alert.message)},
          {"details_json", text(alert.details_json.empty() ? "{}" : alert.details_json)},
          {"state", text(alert.state)},
          {"since_run_id", alert.since_run_id == 0 ? SqlValue(nullptr) : integer(alert.since_run_id)},
          {"change_fraction", real(alert.change)},
          {"environment", text(alert.environment)},
          {"annotation", text(alert.annotation)},
          {"chip_changed", integer(alert.chip_changed)}};
}

AlertRecord read_alert(Statement& row) {
  AlertRecord alert;
  row.read("id", alert.id);
  row.read("run_id", alert.run_id);
  row.read("series_key", alert.series_key);
  row.read("kind", alert.kind);
  row.read("severity", alert.severity);
  row.read("message", alert.message);
  row.read("details_json", alert.details_json);
  row.read("state", alert.state);
  row.read("since_run_id", alert.since_run_id);
  row.read("change_fraction", alert.change);
  row.read("environment", alert.environment);
  row.read("annotation", alert.annotation);
  row.read("chip_changed", alert.chip_changed);
  row.read("created_at", alert.created_at);
  return alert;
}

// The columns every history query returns, in the names HistoryRow reads.
constexpr const char* kHistorySelect =
    "SELECT r.run_id, r.id AS result_id, r.status, r.median_s, r.cv, r.sm_clock_mhz, "
    "r.max_abs_error, r.bound, r.device_name, d.uuid AS chip, l.level, "
    "p.state AS performance_state, p.since_run_id AS performance_since, "
    "p.change_fraction AS performance_change, "
    "p.chip_changed AS chip_changed, a.state AS accuracy_state, "
    "a.since_run_id AS accuracy_since, runs.started_at AS started_at, runs.git_sha AS git_sha "
    "FROM results AS r JOIN runs ON runs.id = r.run_id "
    "LEFT JOIN devices AS d ON d.id = r.device_id "
    "LEFT JOIN run_levels AS l ON l.run_id = r.run_id AND l.device_name = r.device_name "
    "LEFT JOIN alerts AS p ON p.run_id = r.run_id AND p.series_key = r.series_key "
    "AND p.kind = 'performance' "
    "LEFT JOIN alerts AS a ON a.run_id = r.run_id AND a.series_key = r.series_key "
    "AND a.kind = 'accuracy' ";

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
  return row.status();
}

std::string now_text() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace

std::optional<int64_t> Store::latest_primary_run_id(Status& status) {
  Statement latest(db_, "SELECT max(id) AS id FROM runs WHERE rerun_of IS NULL");
  std::optional<int64_t> run_id;
  if (latest.next_row() && !latest.is_null("id")) run_id = latest.get<int64_t>("id");
  status = latest.status();
  if (!status) status = error_with(path_ + ": cannot find the latest run", status.message);
  return status ? run_id : std::nullopt;
}

std::vector<int64_t> Store::unanalysed_runs(Status& status) {
  Statement runs(db_,
                 "SELECT id FROM runs WHERE rerun_of IS NULL AND analysed_at IS NULL ORDER BY id");
  std::vector<int64_t> ids;
  while (runs.next_row()) ids.push_back(runs.get<int64_t>("id"));
  status = runs.status();
  if (!status) status = error_with(path_ + ": cannot list unanalysed runs", status.message);
  return ids;
}

std::optional<int64_t> Store::previous_comparable_run(int64_t run_id, const std::string& selection,
                                                      Status& status) {
  Statement previous(db_,
                     "SELECT max(id) AS id FROM runs WHERE id < ? AND selection = ? AND "
                     "status = 'complete' AND rerun_of IS NULL");
  previous.bind(integer(run_id)).bind(text(selection));
  std::optional<int64_t> found;
  if (previous.next_row() && !previous.is_null("id")) found = previous.get<int64_t>("id");
  status = previous.status();
  if (!status) status = error_with(path_ + ": cannot find the run before " + std::to_string(run_id), status.message);
  return status ? found : std::nullopt;
}

std::vector<std::pair<std::string, ResultStatus>> Store::run_series(int64_t run_id, Status& status) {
  Statement rows(db_, "SELECT series_key, status FROM results WHERE run_id = ? ORDER BY id");
  rows.bind(integer(run_id));
  std::vector<std::pair<std::string, ResultStatus>> series;
  while (rows.next_row()) {
    const std::optional<ResultStatus> parsed = parse_result_status(rows.get<std::string>("status"));
    series.emplace_back(rows.get<std::string>("series_key"), parsed.value_or(ResultStatus::error));
  }
  status = rows.status();
  if (!status) {
    status = error_with(path_ + ": cannot read the results of run " + std::to_string(run_id), status.message);
    series.clear();
  }
  return series;
}

std::optional<int64_t> Store::latest_rerun_of(int64_t run_id, Status& status) {
  Statement rerun(db_, "SELECT max(id) AS id FROM runs WHERE rerun_of = ?");
  rerun.bind(integer(run_id));
  std::optional<int64_t> found;
  if (rerun.next_row() && !rerun.is_null("id")) found = rerun.get<int64_t>("id");
  status = rerun.status();
  if (!status) status = error_with(path_ + ": cannot find reruns of run " + std::to_string(run_id), status.message);
  return status ? found : std::nullopt;
}

std::map<std::string, std::vector<HistoryRow>> Store::series_histories(
    const std::vector<std::string>& series_keys, int64_t before_run_id, int limit,
    Status& status) {
  std::map<std::string, std::vector<HistoryRow>> histories;
  const std::string context = path_ + ": cannot read series history";
  // One snapshot for every series, and one compiled statement run once per series: each run
  // is one walk of the (series_key, run_id) index.
  Transaction transaction(db_, Transaction::Kind::read);
  status = transaction.status();
  if (!status) {
    status = error_with(context, status.message);
    return {};
  }
  Statement query(db_, std::string(kHistorySelect) +
                           "WHERE r.series_key = ? AND r.run_id < ? AND runs.rerun_of IS NULL "
                           "ORDER BY r.run_id DESC LIMIT ?");
  for (const std::string& key : series_keys) {
    query.reset();
    query.bind(text(key)).bind(integer(before_run_id)).bind(integer(limit));
    std::vector<HistoryRow>& rows = histories[key];
    while (query.next_row()) {
      HistoryRow& row = rows.emplace_back();
      if (Status read = read_history_row(query, row); !read) {
        status = error_with(context, read.message);
        return {};
      }
    }
    if (!query.status()) break;
    std::reverse(rows.begin(), rows.end());
  }
  status = query.status();
  if (status) status = transaction.commit();
  if (!status) {
    status = error_with(context, status.message);
    return {};
  }
  return histories;
}

std::vector<HistoryRow> Store::full_series_history(const std::string& series_key, Status& status) {
  Statement query(db_, std::string(kHistorySelect) +
                           "WHERE r.series_key = ? AND runs.rerun_of IS NULL ORDER BY r.run_id");
  query.bind(text(series_key));
  std::vector<HistoryRow> rows;
  while (query.next_row()) {
    HistoryRow& row = rows.emplace_back();
    if (Status read = read_history_row(query, row); !read) {
      status = error_with(path_ + ": cannot read the history of " + series_key, read.message);
      return {};
    }
  }
  status = query.status();
  if (!status) {
    status = error_with(path_ + ": cannot read the history of " + series_key, status.message);
    rows.clear();
  }
  return rows;
}

std::vector<std::string> Store::series_keys(Status& status) {
  Statement keys(db_, "SELECT DISTINCT series_key FROM results ORDER BY series_key");
  std::vector<std::string> found;
  while (keys.next_row()) found.push_back(keys.get<std::string>("series_key"));
  status = keys.status();
  if (!status) {
    status = error_with(path_ + ": cannot list series", status.message);
    found.clear();
  }
  return found;
}

std::vector<Sample> Store::result_samples(int64_t result_id, Status& status) {
  Statement samples(db_, "SELECT * FROM samples WHERE result_id = ? ORDER BY id");
  samples.bind(integer(result_id));
  std::vector<Sample> found;
  while (samples.next_row()) found.push_back(read_sample(samples));
  status = samples.status();
  if (!status) {
    status = error_with(path_ + ": cannot read the samples of result " + std::to_string(result_id),
                        status.message);
    found.clear();
  }
  return found;
}

std::vector<RunLevel> Store::run_levels(int64_t run_id, Status& status) {
  Statement levels(db_, "SELECT * FROM run_levels WHERE run_id = ? ORDER BY device_name");
  levels.bind(integer(run_id));
  std::vector<RunLevel> found;
  while (levels.next_row()) {
    RunLevel& level = found.emplace_back();
    levels.read("device_name", level.device_name);
    levels.read("level", level.level);
    levels.read("series_count", level.series_count);
  }
  status = levels.status();
  if (!status) {
    status = error_with(path_ + ": cannot read the levels of run " + std::to_string(run_id),
                        status.message);
    found.clear();
  }
  return found;
}

Status Store::store_analysis(int64_t run_id, const std::vector<AlertRecord>& alerts,
                             const std::vector<RunLevel>& levels,
                             const std::vector<AlertStateChange>& earlier) {
  const std::string context = path_ + ": cannot store the analysis of run " + std::to_string(run_id);
  Transaction transaction(db_, Transaction::Kind::write);
  Status status = transaction.status();
  if (status) status = Statement(db_, "DELETE FROM alerts WHERE run_id = ?").bind(integer(run_id)).execute();
  if (status) status = Statement(db_, "DELETE FROM run_levels WHERE run_id = ?").bind(integer(run_id)).execute();
  for (size_t i = 0; status && i < alerts.size(); ++i) {
    status = insert_row(db_, "alerts", alert_row(run_id, alerts[i]));
  }
  for (size_t i = 0; status && i < levels.size(); ++i) {
    status = insert_row(db_, "run_levels",
                        {{"run_id", integer(run_id)},
                         {"device_name", text(levels[i].device_name)},
                         {"level", real(levels[i].level)},
                         {"series_count", integer(levels[i].series_count)}});
  }
  for (size_t i = 0; status && i < earlier.size(); ++i) {
    const AlertStateChange& change = earlier[i];
    Statement update(db_,
                     "UPDATE alerts SET state = ?, severity = 'info', message = message || ? "
                     "WHERE run_id = ? AND series_key = ? AND kind = ?");
    update.bind(text(change.state)).bind(text(change.note)).bind(integer(change.run_id));
    update.bind(text(change.series_key)).bind(text(change.kind));
    status = update.execute();
  }
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

std::vector<AlertRecord> Store::run_alerts(int64_t run_id, Status& status) {
  Statement alerts(db_, "SELECT * FROM alerts WHERE run_id = ? ORDER BY id");
  alerts.bind(integer(run_id));
  std::vector<AlertRecord> found;
  while (alerts.next_row()) found.push_back(read_alert(alerts));
  status = alerts.status();
  if (!status) {
    status = error_with(path_ + ": cannot read the alerts of run " + std::to_string(run_id),
                        status.message);
    found.clear();
  }
  return found;
}

std::optional<AlertRecord> Store::find_alert(int64_t run_id, const std::string& series_key,
                                             const std::string& kind, Status& status) {
  Statement alert(db_,
                  "SELECT * FROM alerts WHERE run_id = ? AND series_key = ? AND kind = ? "
                  "ORDER BY id DESC LIMIT 1");
  alert.bind(integer(run_id)).bind(text(series_key)).bind(text(kind));
  std::optional<AlertRecord> found;
  if (alert.next_row()) found = read_alert(alert);
  status = alert.status();
  if (!status) {
    status = error_with(path_ + ": cannot read an alert of run " + std::to_string(run_id), status.message);
    return std::nullopt;
  }
  return found;
}

Status Store::add_annotations(const std::vector<AnnotationRecord>& annotations) {
  Transaction transaction(db_, Transaction::Kind::write);
  Status status = transaction.status();
  for (size_t i = 0; status && i < annotations.size(); ++i) {
    const AnnotationRecord& annotation = annotations[i];
    Row row = {{"series_key", text(annotation.series_key)},
               {"kind", text(annotation.kind)},
               {"reason", text(annotation.reason)},
               {"from_run_id", annotation.from_run_id == 0 ? SqlValue(nullptr)
                                                           : integer(annotation.from_run_id)}};
    if (!annotation.created_at.empty()) row.push_back({"created_at", text(annotation.created_at)});
    status = insert_row(db_, "annotations", row);
  }
  if (status) status = transaction.commit();
  return status ? status : error_with(path_ + ": cannot store annotations", status.message);
}

std::vector<AnnotationRecord> Store::annotations(Status& status) {
  Statement rows(db_, "SELECT * FROM annotations ORDER BY id");
  std::vector<AnnotationRecord> found;
  while (rows.next_row()) {
    AnnotationRecord& annotation = found.emplace_back();
    rows.read("id", annotation.id);
    rows.read("series_key", annotation.series_key);
    rows.read("kind", annotation.kind);
    rows.read("reason", annotation.reason);
    rows.read("from_run_id", annotation.from_run_id);
    rows.read("created_at", annotation.created_at);
  }
  status = rows.status();
  if (!status) {
    status = error_with(path_ + ": cannot read annotations", status.message);
    found.clear();
  }
  return found;
}

Status Store::merge_from(const std::string& source_path, MergeReport& report) {
  report = MergeReport{};
  std::error_code error;
  if (!std::filesystem::is_regular_file(source_path, error)) {
    return Status::Error("merge: " + source_path + " is not a file");
  }
  if (std::filesystem::equivalent(source_path, path_, error)) {
    return Status::Error("merge: " + source_path + " is the database being merged into");
  }
  Status status;
  std::unique_ptr<Store> source = Store::open(source_path, status);
  if (!source) return status;
  const std::string context = path_ + ": cannot merge " + source_path;

  // Source run ids -> ids here, by uuid, for reruns, alerts' "since" and annotations.
  std::map<int64_t, int64_t> run_ids;
  auto find_here = [&](const std::string& uuid) -> std::optional<int64_t> {
    Statement find(db_, "SELECT id FROM runs WHERE uuid = ?");
    find.bind(text(uuid));
    if (find.next_row()) return find.get<int64_t>("id");
    return std::nullopt;
  };
  auto mapped = [&](int64_t source_id) -> SqlValue {
    const auto found = run_ids.find(source_id);
    return found == run_ids.end() ? SqlValue(nullptr) : integer(found->second);
  };

  std::vector<RunListEntry> entries = source->list_runs(0, status);
  if (!status) return status;
  std::reverse(entries.begin(), entries.end());  // oldest first, so reruns find their run
  for (const RunListEntry& entry : entries) {
    std::optional<StoredRun> run = source->load_run(entry.id, status);
    if (!run) return status;
    if (std::optional<int64_t> here = find_here(run->info.uuid)) {
      run_ids[entry.id] = *here;
      ++report.runs_already_present;
      continue;
    }
    const std::vector<AlertRecord> alerts = source->run_alerts(entry.id, status);
    if (!status) return status;
    const std::vector<RunLevel> levels = source->run_levels(entry.id, status);
    if (!status) return status;

    Transaction transaction(db_, Transaction::Kind::write);
    status = transaction.status();
    RunInfo info = run->info;
    if (info.merged_from.empty()) info.merged_from = source_path + " at " + now_text();
    Row row = run_row(info);
    for (Column& column : row) {
      if (std::string_view(column.name) == "status") column.value = text(run->status);
      if (std::string_view(column.name) == "rerun_of") {
        column.value = info.rerun_of == 0 ? SqlValue(nullptr) : mapped(info.rerun_of);
      }
    }
    row.push_back({"finished_at", run->finished_at.empty() ? SqlValue(nullptr) : text(run->finished_at)});
    // Its alerts came from the source's history; it is judged again against this file's.
    row.push_back({"analysed_at", SqlValue(nullptr)});
    if (status) status = insert_row(db_, "runs", row);
    const int64_t run_id = sqlite3_last_insert_rowid(db_);
    std::map<int64_t, int64_t> device_ids;
    for (size_t i = 0; status && i < run->devices.size(); ++i) {
      status = insert_row(db_, "devices", device_row(run_id, run->devices[i]));
      device_ids[run->device_ids[i]] = sqlite3_last_insert_rowid(db_);
    }
    for (size_t i = 0; status && i < run->results.size(); ++i) {
      ResultRecord& result = run->results[i];
      const auto device = device_ids.find(result.device_id);
      result.device_id = device == device_ids.end() ? 0 : device->second;
      int64_t case_id = 0;
      status = find_or_add_case(db_, result, case_id);
      if (status) status = insert_row(db_, "results", result_row(run_id, case_id, result));
      const int64_t result_id = sqlite3_last_insert_rowid(db_);
      for (size_t k = 0; status && k < result.samples.size(); ++k) {
        status = insert_row(db_, "samples", sample_row(result_id, result.samples[k]));
      }
    }
    run_ids[entry.id] = run_id;
    for (size_t i = 0; status && i < alerts.size(); ++i) {
      Row alert = alert_row(run_id, alerts[i]);
      for (Column& column : alert) {
        if (std::string_view(column.name) == "since_run_id" && alerts[i].since_run_id != 0) {
          column.value = mapped(alerts[i].since_run_id);
        }
      }
      status = insert_row(db_, "alerts", alert);
    }
    for (size_t i = 0; status && i < levels.size(); ++i) {
      status = insert_row(db_, "run_levels",
                          {{"run_id", integer(run_id)},
                           {"device_name", text(levels[i].device_name)},
                           {"level", real(levels[i].level)},
                           {"series_count", integer(levels[i].series_count)}});
    }
    if (status) status = transaction.commit();
    if (!status) return error_with(context, "run " + run->info.uuid + ": " + status.message);
    ++report.runs_added;
  }

  // Calibrations and annotations this file lacks (same values, same time).
  Transaction transaction(db_, Transaction::Kind::write);
  status = transaction.status();
  Statement calibrations(source->db_, "SELECT * FROM calibrations ORDER BY id");
  while (status && calibrations.next_row()) {
    const CalibrationRecord calibration = read_calibration(calibrations);
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
  const std::vector<AnnotationRecord> annotations = source->annotations(status);
  for (size_t i = 0; status && i < annotations.size(); ++i) {
    const AnnotationRecord& annotation = annotations[i];
    Statement exists(db_,
                     "SELECT count(*) AS n FROM annotations WHERE series_key = ? AND kind = ? "
                     "AND reason = ? AND created_at = ?");
    exists.bind(text(annotation.series_key)).bind(text(annotation.kind));
    exists.bind(text(annotation.reason)).bind(text(annotation.created_at));
    if (exists.next_row() && exists.get<int64_t>("n") == 0) {
      status = insert_row(db_, "annotations",
                          {{"series_key", text(annotation.series_key)},
                           {"kind", text(annotation.kind)},
                           {"reason", text(annotation.reason)},
                           {"from_run_id", annotation.from_run_id == 0 ? SqlValue(nullptr)
                                                                       : mapped(annotation.from_run_id)},
                           {"created_at", text(annotation.created_at)}});
      ++report.annotations_added;
    }
    if (status) status = exists.status();
  }
  if (status) status = transaction.commit();
  return status ? status : error_with(context, status.message);
}

}  // namespace attnbench
