// The thin layer over SQLite's C API that the rest of the store is written in: a value
// (SqlValue: NULL, integer, real or text; an unmeasured NaN double becomes NULL), a row to insert
// (named columns, every value bound, never formatted into SQL), a prepared Statement whose result
// columns are read by name, a Transaction that rolls back unless committed (writers take the lock
// up front with BEGIN IMMEDIATE), the retry on SQLITE_BUSY that lets several processes share one
// file, and opening and configuring a connection (WAL, synchronous=NORMAL, foreign keys).
#pragma once

#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "harness/core/records.h"
#include "reference/status.h"

namespace attnbench::sql {

// How long one statement waits on another process's lock before SQLite reports SQLITE_BUSY.
// A result's transaction takes milliseconds; ten seconds covers a slow disk and a checkpoint.
constexpr int kBusyTimeoutMs = 10'000;
// BEGIN IMMEDIATE may still report SQLITE_BUSY (the timeout ran out, or SQLite declined to
// wait, as it does during WAL recovery); it is retried with short pauses for this long.
constexpr auto kBusyRetryBudget = std::chrono::seconds(60);
constexpr auto kBusyRetryPause = std::chrono::milliseconds(5);

using SqlValue = std::variant<std::nullptr_t, int64_t, double, std::string>;

inline SqlValue null() { return nullptr; }
inline SqlValue integer(int64_t value) { return value; }
// NaN (not measured) is stored as NULL.
inline SqlValue real(double value) {
  return std::isnan(value) ? SqlValue(nullptr) : SqlValue(value);
}
inline SqlValue text(std::string_view value) { return std::string(value); }
// Ids start at 1; 0 means "none" and is stored as NULL.
inline SqlValue id_or_null(int64_t id) { return id == 0 ? null() : integer(id); }

struct Column {
  const char* name;
  SqlValue value;
};
using Row = std::vector<Column>;

[[nodiscard]] inline Status error_with(const std::string& context, const std::string& message) {
  return Status::Error(context + ": " + message);
}

// One prepared statement. Parameters are bound in order; result columns are read by name.
// The first error (prepare, bind, step, unknown column) is kept and reported by status().
class Statement {
 public:
  Statement(sqlite3* db, std::string_view sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(const SqlValue& value);
  // True while a row is available; false at the end and on error.
  bool next_row();
  // Runs a statement that returns no rows (INSERT, UPDATE, DELETE).
  [[nodiscard]] Status execute() {
    next_row();
    return status();
  }
  [[nodiscard]] Status status() const {
    return error_.empty() ? Status::Ok() : Status::Error(error_);
  }
  int error_code() const { return error_code_; }
  // Ready to run again with new parameters (the same compiled statement).
  void reset();

  bool is_null(const char* name);

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
  void read(const char* name, double& field);
  void read(const char* name, std::string& field);
  template <typename T>
  T get(const char* name) {
    T value{};
    read(name, value);
    return value;
  }

 private:
  void fail();
  int index_of(const char* name);

  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int bound_ = 0;
  std::map<std::string, int, std::less<>> columns_;
  std::string error_;
  int error_code_ = SQLITE_OK;
};

// INSERT INTO table (a, b, ...) VALUES (?, ?, ...) [suffix]; only the column names are
// formatted into the SQL, every value is bound.
[[nodiscard]] Status insert_row(sqlite3* db, std::string_view table, const Row& row,
                                std::string_view suffix = {});

bool is_busy(int rc);
// Runs SQL without values (BEGIN, COMMIT, pragmas, migrations), retrying while the database is
// busy.
[[nodiscard]] Status execute_with_retry(sqlite3* db, const char* sql);

// A transaction that rolls back unless committed. Writers take the write lock up front (BEGIN
// IMMEDIATE), so two processes never deadlock upgrading read locks; readers get a snapshot.
class Transaction {
 public:
  enum class Kind { read, write };
  Transaction(sqlite3* db, Kind kind);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  const Status& status() const { return status_; }
  [[nodiscard]] Status commit();

 private:
  sqlite3* db_;
  Status status_;
  bool active_ = false;
};

struct CloseDatabase {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using DatabaseHandle = std::unique_ptr<sqlite3, CloseDatabase>;

// Opens (creating the file and its parent folder) with the busy timeout set; nothing else yet,
// so a file that turns out foreign or newer is left exactly as it was.
Result<DatabaseHandle> connect(const std::string& path);
// Connection settings. WAL lets readers run beside a writer; synchronous=NORMAL in WAL mode
// keeps every committed transaction through a process crash (only a power cut can lose the
// last ones) without an fsync per result.
[[nodiscard]] Status configure(sqlite3* db, const std::string& path);

}  // namespace attnbench::sql
