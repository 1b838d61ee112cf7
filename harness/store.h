// The SQLite store: one file, WAL mode, a schema_version table and forward migrations; an older
// binary refuses a newer file. Parameterized statements only. One transaction per result, so a
// run that dies part-way keeps every finished result; a run is 'incomplete' until finish_run
// marks it 'complete'. Several processes may write one file (busy timeout + retries); one Store
// (one connection) is used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "harness/records.h"
#include "reference/status.h"

struct sqlite3;

namespace attnbench {

// Version 1: runs, devices, cases, results, samples, calibrations.
// Version 2: annotations, alerts and the (series_key, run_id) index for history queries.
constexpr int kSchemaVersion = 3;

struct StoredRun {
  int64_t id = 0;
  RunInfo info;
  std::string status;  // "incomplete" or "complete"
  std::string finished_at;
  std::vector<DeviceInfo> devices;
  std::vector<ResultRecord> results;  // in insertion order, with samples
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
  static std::unique_ptr<Store> open(const std::string& path, Status& status);
  // Test hook: creates a new database at an older schema version (1..kSchemaVersion), as an
  // older attnbench would have, so the migration path can be exercised.
  static Status create_at_version(const std::string& path, int version);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Status 'incomplete'; the uuid must be new to the file.
  int64_t begin_run(const RunInfo& info, Status& status);
  int64_t add_device(int64_t run_id, const DeviceInfo& device, Status& status);
  // One transaction: the case (shared by every result of the same kernel, problem and
  // distribution), the result and its samples. result.device_id 0 means no device row.
  Status add_result(int64_t run_id, const ResultRecord& result);
  Status finish_run(int64_t run_id);  // marks 'complete' and sets finished_at

  // nullopt with an error status when the run does not exist.
  std::optional<StoredRun> load_run(int64_t run_id, Status& status);
  // The newest run by id, complete or not; nullopt (status ok) when the file has none.
  std::optional<int64_t> latest_run_id(Status& status);
  // Newest first; limit <= 0 lists every run.
  std::vector<RunListEntry> list_runs(int limit, Status& status);

  Status add_calibration(const CalibrationRecord& calibration);
  // Newest calibration (by measured_at, then insertion) of each (kind, dtype) for a device,
  // ordered by kind and dtype.
  std::vector<CalibrationRecord> latest_calibrations(const std::string& device_uuid,
                                                     Status& status);

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
