// The SQLite layer (sqlite.h): statements that bind every value and read columns by name,
// transactions, the retry on SQLITE_BUSY, and opening and configuring a connection. Nothing here
// knows a table of ours.
#include "harness/store/sqlite.h"

#include <filesystem>
#include <thread>

namespace attnbench::sql {

Statement::Statement(sqlite3* db, std::string_view sql) : db_(db) {
  if (sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr) !=
      SQLITE_OK) {
    fail();
  }
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(const SqlValue& value) {
  if (!stmt_) return *this;
  const int index = ++bound_;
  int rc = SQLITE_OK;
  if (const auto* number = std::get_if<int64_t>(&value)) {
    rc = sqlite3_bind_int64(stmt_, index, *number);
  } else if (const auto* floating = std::get_if<double>(&value)) {
    rc = sqlite3_bind_double(stmt_, index, *floating);
  } else if (const auto* characters = std::get_if<std::string>(&value)) {
    rc = sqlite3_bind_text64(stmt_, index, characters->data(), characters->size(), SQLITE_TRANSIENT,
                             SQLITE_UTF8);
  } else {
    rc = sqlite3_bind_null(stmt_, index);
  }
  if (rc != SQLITE_OK) fail();
  return *this;
}

bool Statement::next_row() {
  if (!stmt_ || !error_.empty()) return false;
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc != SQLITE_DONE) fail();
  return false;
}

void Statement::reset() {
  if (!stmt_) return;
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bound_ = 0;
}

bool Statement::is_null(const char* name) {
  const int index = index_of(name);
  return index < 0 || sqlite3_column_type(stmt_, index) == SQLITE_NULL;
}

void Statement::read(const char* name, double& field) {
  const int index = index_of(name);
  if (index < 0) return;
  field = sqlite3_column_type(stmt_, index) == SQLITE_NULL ? kNotMeasured
                                                           : sqlite3_column_double(stmt_, index);
}

void Statement::read(const char* name, std::string& field) {
  const int index = index_of(name);
  if (index < 0 || sqlite3_column_type(stmt_, index) == SQLITE_NULL) return;
  const auto* characters = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, index));
  field.assign(characters, static_cast<size_t>(sqlite3_column_bytes(stmt_, index)));
}

void Statement::fail() {
  if (!error_.empty()) return;
  error_code_ = sqlite3_errcode(db_);
  error_ = sqlite3_errmsg(db_);
}

int Statement::index_of(const char* name) {
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

Status insert_row(sqlite3* db, std::string_view table, const Row& row, std::string_view suffix) {
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

Transaction::Transaction(sqlite3* db, Kind kind) : db_(db) {
  status_ = execute_with_retry(db, kind == Kind::write ? "BEGIN IMMEDIATE" : "BEGIN");
  active_ = status_.ok;
}

Transaction::~Transaction() {
  if (active_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

Status Transaction::commit() {
  Status committed = execute_with_retry(db_, "COMMIT");
  if (committed) active_ = false;
  return committed;
}

Result<DatabaseHandle> connect(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code error;
    std::filesystem::create_directories(parent, error);
    if (error) {
      return Status::Error("cannot create the folder " + parent.string() + " for " + path + ": " +
                           error.message());
    }
  }
  sqlite3* raw = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  DatabaseHandle db(raw);
  if (rc != SQLITE_OK) {
    return error_with("cannot open the database " + path,
                      raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc));
  }
  sqlite3_busy_timeout(db.get(), kBusyTimeoutMs);
  return db;
}

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

}  // namespace attnbench::sql
