// The SQLite store: every field survives a round trip, migrations keep data, a newer or foreign
// file is refused untouched, concurrent writers lose nothing, a killed writer leaves every
// committed result behind; the regression analysis' rows (alerts, levels, result_analysis) round
// trip, take later verdicts, ride along history rows and merges; the schema's CHECK lists are the
// C++ enumerations' names and schema.cpp's table list is the schema. Records are random: every
// field gets a value its default could not hide, NaNs included.
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "gtest/gtest.h"
#include "harness/core/records.h"
#include "harness/core/series_key.h"
#include "harness/core/verdict.h"
#include "harness/store/store.h"
#include "tests/support/problems.h"
#include "tests/support/result_support.h"
#include "tests/support/same_records.h"
#include "tests/support/scratch_directory.h"

namespace attnbench {
namespace {

namespace fs = std::filesystem;
using Rng = std::mt19937_64;

// ---- random records ----------------------------------------------------------------------------

// Pieces of text that break naive SQL quoting, plus multi-byte UTF-8.
constexpr std::string_view kTextPieces[] = {
    "a", "Z", "7",  " ",  "_", "'", "\"", ";",         "--",
    "%", "?", "\\", "\n", "µ", "é", "→",  "{\"k\":1}", "'); DROP TABLE runs; --"};

std::string random_text(Rng& rng) {
  std::uniform_int_distribution<size_t> length(1, 12);
  std::uniform_int_distribution<size_t> piece(0, std::size(kTextPieces) - 1);
  std::string text;
  for (size_t n = length(rng); n > 0; --n) text += kTextPieces[piece(rng)];
  return text;
}

bool random_bool(Rng& rng) { return std::bernoulli_distribution(0.5)(rng); }

int64_t random_int64(Rng& rng) { return static_cast<int64_t>(rng()); }

int random_int(Rng& rng) {
  return std::uniform_int_distribution<int>(std::numeric_limits<int>::min(),
                                            std::numeric_limits<int>::max())(rng);
}

// Any finite double of either sign across a wide range of exponents; sometimes NaN (stored as
// NULL) or infinity.
double random_double(Rng& rng) {
  constexpr double kNaNProbability = 0.25;
  constexpr double kInfinityProbability = 0.05;
  constexpr int kMaxExponent = 80;
  const double draw = std::uniform_real_distribution<double>(0, 1)(rng);
  if (draw < kNaNProbability) return kNotMeasured;
  if (draw < kNaNProbability + kInfinityProbability) {
    return std::numeric_limits<double>::infinity();
  }
  const double mantissa = std::uniform_real_distribution<double>(0.5, 1)(rng);
  const int exponent = std::uniform_int_distribution<int>(-kMaxExponent, kMaxExponent)(rng);
  return (random_bool(rng) ? 1 : -1) * std::ldexp(mantissa, exponent);
}

constexpr std::array kResultStatuses = {ResultStatus::passed,  ResultStatus::failed,
                                        ResultStatus::skipped, ResultStatus::crashed,
                                        ResultStatus::timeout, ResultStatus::error};
constexpr std::array<std::string_view, 3> kDistributions = {"normal", "large_logits", "outliers"};
constexpr std::array<std::string_view, 4> kKernels = {"cpu.naive", "cpu.flash", "cuda.flash2",
                                                      "cudnn.sdpa"};

Sample random_sample(Rng& rng, int repetition) {
  Sample sample;
  sample.repetition = repetition;
  sample.time_s = random_double(rng);
  sample.iterations = random_int64(rng);
  sample.sm_clock_mhz = random_double(rng);
  sample.clock_reasons = random_text(rng);
  return sample;
}

ResultRecord random_result(Rng& rng, int64_t device_id) {
  constexpr int kMaxSamples = 6;
  ResultRecord result;
  result.kernel = std::string(pick(rng, kKernels));
  result.problem = random_problem(rng);
  result.distribution = std::string(pick(rng, kDistributions));
  result.seed = rng();
  result.device_id = device_id;
  result.device_name = random_text(rng);
  result.series_key = random_text(rng);
  result.status = pick(rng, kResultStatuses);
  result.message = random_text(rng);
  CheckSummary& check = result.check;
  check.checked = random_bool(rng);
  check.max_abs_error = random_double(rng);
  check.lowp_error = random_double(rng);
  check.atol = random_double(rng);
  check.bound = random_double(rng);
  check.rel_l2 = random_double(rng);
  check.rmse = random_double(rng);
  check.nan_count = random_int64(rng);
  check.inf_count = random_int64(rng);
  check.rows_checked = random_int64(rng);
  check.rows_total = random_int64(rng);
  check.lse_max_error = random_double(rng);
  check.canaries_ok = random_bool(rng);
  check.repeatable = random_bool(rng);
  TimingSummary& timing = result.timing;
  timing.timed = random_bool(rng);
  timing.median_s = random_double(rng);
  timing.mean_s = random_double(rng);
  timing.min_s = random_double(rng);
  timing.max_s = random_double(rng);
  timing.stddev_s = random_double(rng);
  timing.cv = random_double(rng);
  timing.repetitions = random_int(rng);
  timing.iterations_per_repetition = random_int64(rng);
  timing.forwards_timed = timing.timed ? random_int64(rng) : 0;  // stored only for timed results
  timing.wall_s = random_double(rng);
  const int stop = std::uniform_int_distribution<int>(-1, 2)(rng);
  if (stop >= 0) timing.stop = static_cast<TimingStop>(stop);
  const int sample_count = std::uniform_int_distribution<int>(0, kMaxSamples)(rng);
  for (int repetition = 0; repetition < sample_count; ++repetition) {
    result.samples.push_back(random_sample(rng, repetition));
  }
  result.flops = random_double(rng);
  result.bytes = random_double(rng);
  result.flops_per_s = random_double(rng);
  result.bytes_per_s = random_double(rng);
  result.fraction_of_peak_flops = random_double(rng);
  result.fraction_of_peak_bandwidth = random_double(rng);
  result.extra_memory_bytes = random_int64(rng);
  result.launches = random_int(rng);
  result.energy_j = random_double(rng);
  result.predicted_s = random_double(rng);
  result.repro = random_text(rng);
  result.details_json = random_text(rng);
  return result;
}

RunInfo random_run_info(Rng& rng) {
  RunInfo info;
  info.uuid = std::to_string(rng()) + "-" + std::to_string(rng());
  info.started_at = "2025-12-0" + std::to_string(rng() % 9 + 1) + "T12:00:00Z";
  info.suite = random_text(rng);
  info.command = random_text(rng);
  info.protocol_json = random_text(rng);
  EnvironmentInfo& env = info.env;
  env.git_sha = random_text(rng);
  env.git_dirty = random_bool(rng);
  env.build_type = random_text(rng);
  env.build_flags = random_text(rng);
  env.compiler = random_text(rng);
  env.cuda_runtime = random_text(rng);
  env.cuda_driver = random_text(rng);
  env.cudnn = random_text(rng);
  env.cudnn_frontend = random_text(rng);
  env.cublas = random_text(rng);
  env.blas = random_text(rng);
  env.host = random_text(rng);
  env.cpu = random_text(rng);
  env.os = random_text(rng);
  info.selection = random_text(rng);
  info.shard = random_text(rng);
  info.merged_from = random_text(rng);
  return info;
}

DeviceInfo random_device(Rng& rng, std::string kind, int ordinal) {
  DeviceInfo device;
  device.kind = std::move(kind);
  device.ordinal = ordinal;
  device.name = random_text(rng);
  device.uuid = random_text(rng);
  device.sm_version = random_int(rng);
  device.sm_count = random_int(rng);
  device.threads = random_int(rng);
  device.memory_bytes = random_int64(rng);
  device.l2_bytes = random_int64(rng);
  device.clock_mhz = random_double(rng);
  device.power_limit_w = random_double(rng);
  device.ecc = random_int(rng);
  device.persistence = random_int(rng);
  device.extra_json = random_text(rng);
  return device;
}

// Every name of an enumeration, in order: its values are 0, 1, ... up to the first one its name
// function does not know ("unknown"). Read from the C++ so that a new value is seen at once.
template <typename Enum>
std::vector<std::string> enum_names(std::string_view (*name)(Enum)) {
  std::vector<std::string> names;
  for (int value = 0; value <= std::numeric_limits<uint8_t>::max(); ++value) {
    const std::string_view spelled = name(static_cast<Enum>(value));
    if (spelled == "unknown") break;
    names.emplace_back(spelled);
  }
  return names;
}

template <typename Enum>
Enum random_enum(Rng& rng, std::string_view (*name)(Enum)) {
  const size_t count = enum_names(name).size();
  return static_cast<Enum>(std::uniform_int_distribution<size_t>(0, count - 1)(rng));
}

// A series key whose five parts are random text (no '|', so it parses back).
SeriesKey random_series_key(Rng& rng) {
  return {random_text(rng), random_text(rng), random_text(rng), random_text(rng),
          random_text(rng)};
}

// Every field random; ids 0 (NULL) half the time; `result_id` is given (it must name a result).
AnalysisRecord random_analysis(Rng& rng, std::string series_key, bool kernel_wide,
                               int64_t result_id) {
  auto some_id = [&] { return random_bool(rng) ? 0 : random_int64(rng) | 1; };
  AnalysisRecord analysis;
  analysis.series_key = std::move(series_key);
  analysis.kernel_wide = kernel_wide;
  analysis.result_id = result_id;
  analysis.verdict = random_enum(rng, verdict_name);
  analysis.accuracy_verdict = random_enum(rng, verdict_name);
  analysis.center_s = random_double(rng);
  analysis.spread_s = random_double(rng);
  analysis.threshold = random_double(rng);
  analysis.change = random_double(rng);
  analysis.level = random_double(rng);
  analysis.rerun_change = random_double(rng);
  analysis.baseline_runs = random_int(rng);
  analysis.baseline_run_id = some_id();
  analysis.history_from_run_id = some_id();
  analysis.since_run_id = some_id();
  analysis.chip_changed = random_bool(rng);
  analysis.status_change = random_bool(rng) ? "" : random_text(rng);
  analysis.reason = random_text(rng);
  analysis.annotation = random_bool(rng) ? "" : random_text(rng);
  analysis.detector_version = random_int(rng);
  return analysis;
}

// ---- comparisons -------------------------------------------------------------------------------

// EXPECT_SAME_FIELD, EXPECT_SAME_DOUBLE and the comparison of a measurement (check, timing,
// samples): tests/support/same_records.h, shared with the worker protocol's tests.

void expect_same_run_info(const RunInfo& expected, const RunInfo& actual) {
  EXPECT_SAME_FIELD(expected, actual, uuid);
  EXPECT_SAME_FIELD(expected, actual, started_at);
  EXPECT_SAME_FIELD(expected, actual, suite);
  EXPECT_SAME_FIELD(expected, actual, command);
  EXPECT_SAME_FIELD(expected, actual, protocol_json);
  EXPECT_SAME_FIELD(expected, actual, env.git_sha);
  EXPECT_SAME_FIELD(expected, actual, env.git_dirty);
  EXPECT_SAME_FIELD(expected, actual, env.build_type);
  EXPECT_SAME_FIELD(expected, actual, env.build_flags);
  EXPECT_SAME_FIELD(expected, actual, env.compiler);
  EXPECT_SAME_FIELD(expected, actual, env.cuda_runtime);
  EXPECT_SAME_FIELD(expected, actual, env.cuda_driver);
  EXPECT_SAME_FIELD(expected, actual, env.cudnn);
  EXPECT_SAME_FIELD(expected, actual, env.cudnn_frontend);
  EXPECT_SAME_FIELD(expected, actual, env.cublas);
  EXPECT_SAME_FIELD(expected, actual, env.blas);
  EXPECT_SAME_FIELD(expected, actual, env.host);
  EXPECT_SAME_FIELD(expected, actual, env.cpu);
  EXPECT_SAME_FIELD(expected, actual, env.os);
  EXPECT_SAME_FIELD(expected, actual, selection);
  EXPECT_SAME_FIELD(expected, actual, shard);
  EXPECT_SAME_FIELD(expected, actual, rerun_of);
  EXPECT_SAME_FIELD(expected, actual, merged_from);
}

void expect_same_device(const DeviceInfo& expected, const DeviceInfo& actual) {
  EXPECT_SAME_FIELD(expected, actual, kind);
  EXPECT_SAME_FIELD(expected, actual, ordinal);
  EXPECT_SAME_FIELD(expected, actual, name);
  EXPECT_SAME_FIELD(expected, actual, uuid);
  EXPECT_SAME_FIELD(expected, actual, sm_version);
  EXPECT_SAME_FIELD(expected, actual, sm_count);
  EXPECT_SAME_FIELD(expected, actual, threads);
  EXPECT_SAME_FIELD(expected, actual, memory_bytes);
  EXPECT_SAME_FIELD(expected, actual, l2_bytes);
  EXPECT_SAME_DOUBLE(expected, actual, clock_mhz);
  EXPECT_SAME_DOUBLE(expected, actual, power_limit_w);
  EXPECT_SAME_FIELD(expected, actual, ecc);
  EXPECT_SAME_FIELD(expected, actual, persistence);
  EXPECT_SAME_FIELD(expected, actual, extra_json);
}

void expect_same_result(const ResultRecord& expected, const ResultRecord& actual) {
  EXPECT_SAME_FIELD(expected, actual, kernel);
  EXPECT_TRUE(expected.problem == actual.problem)
      << shape_string(expected.problem) << " came back as " << shape_string(actual.problem);
  EXPECT_SAME_FIELD(expected, actual, distribution);
  EXPECT_SAME_FIELD(expected, actual, seed);
  EXPECT_SAME_FIELD(expected, actual, device_id);
  EXPECT_SAME_FIELD(expected, actual, device_name);
  EXPECT_SAME_FIELD(expected, actual, series_key);
  EXPECT_SAME_FIELD(expected, actual, status);
  EXPECT_SAME_FIELD(expected, actual, message);
  expect_same_measurement(expected, actual);
  EXPECT_SAME_DOUBLE(expected, actual, flops);
  EXPECT_SAME_DOUBLE(expected, actual, bytes);
  EXPECT_SAME_DOUBLE(expected, actual, flops_per_s);
  EXPECT_SAME_DOUBLE(expected, actual, bytes_per_s);
  EXPECT_SAME_DOUBLE(expected, actual, fraction_of_peak_flops);
  EXPECT_SAME_DOUBLE(expected, actual, fraction_of_peak_bandwidth);
  EXPECT_SAME_DOUBLE(expected, actual, predicted_s);
  EXPECT_SAME_FIELD(expected, actual, repro);
}

void expect_same_results(const std::vector<ResultRecord>& expected,
                         const std::vector<ResultRecord>& actual) {
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE("result " + std::to_string(i));
    expect_same_result(expected[i], actual[i]);
  }
}

void expect_same_calibration(const CalibrationRecord& expected, const CalibrationRecord& actual) {
  EXPECT_SAME_FIELD(expected, actual, device_name);
  EXPECT_SAME_FIELD(expected, actual, device_uuid);
  EXPECT_SAME_FIELD(expected, actual, kind);
  EXPECT_SAME_FIELD(expected, actual, dtype);
  EXPECT_SAME_DOUBLE(expected, actual, value);
  EXPECT_SAME_FIELD(expected, actual, details);
  EXPECT_SAME_FIELD(expected, actual, measured_at);
}

void expect_same_analysis(const AnalysisRecord& expected, const AnalysisRecord& actual) {
  EXPECT_SAME_FIELD(expected, actual, run_id);
  EXPECT_SAME_FIELD(expected, actual, series_key);
  EXPECT_SAME_FIELD(expected, actual, kernel_wide);
  EXPECT_SAME_FIELD(expected, actual, result_id);
  EXPECT_SAME_FIELD(expected, actual, verdict);
  EXPECT_SAME_FIELD(expected, actual, accuracy_verdict);
  EXPECT_SAME_DOUBLE(expected, actual, center_s);
  EXPECT_SAME_DOUBLE(expected, actual, spread_s);
  EXPECT_SAME_DOUBLE(expected, actual, threshold);
  EXPECT_SAME_DOUBLE(expected, actual, change);
  EXPECT_SAME_DOUBLE(expected, actual, level);
  EXPECT_SAME_DOUBLE(expected, actual, rerun_change);
  EXPECT_SAME_FIELD(expected, actual, baseline_runs);
  EXPECT_SAME_FIELD(expected, actual, baseline_run_id);
  EXPECT_SAME_FIELD(expected, actual, history_from_run_id);
  EXPECT_SAME_FIELD(expected, actual, since_run_id);
  EXPECT_SAME_FIELD(expected, actual, chip_changed);
  EXPECT_SAME_FIELD(expected, actual, status_change);
  EXPECT_SAME_FIELD(expected, actual, reason);
  EXPECT_SAME_FIELD(expected, actual, annotation);
  EXPECT_SAME_FIELD(expected, actual, detector_version);
}

// ---- direct access to the file -------------------------------------------------------------

// Plain SQLite on the file, for what the Store API does not show (tables, versions, counts) and
// for writing files as an older or newer attnbench would have.
class RawDatabase {
 public:
  using Value = std::variant<int64_t, double, std::string>;

  explicit RawDatabase(const fs::path& path) {
    EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, nullptr), SQLITE_OK)
        << path;
    sqlite3_busy_timeout(db_, kBusyTimeoutMs);
  }
  ~RawDatabase() { sqlite3_close_v2(db_); }
  RawDatabase(const RawDatabase&) = delete;
  RawDatabase& operator=(const RawDatabase&) = delete;

  sqlite3* handle() { return db_; }

  // Runs one statement with bound values; returns its first column of the first row as text
  // ("" when it returns no row).
  std::string query(const std::string& sql, const std::vector<Value>& values = {}) {
    sqlite3_stmt* statement = prepare(sql, values);
    std::string first;
    const int rc = sqlite3_step(statement);
    if (rc == SQLITE_ROW && sqlite3_column_type(statement, 0) != SQLITE_NULL) {
      first = reinterpret_cast<const char*>(sqlite3_column_text(statement, 0));
    }
    EXPECT_TRUE(rc == SQLITE_ROW || rc == SQLITE_DONE) << sql << ": " << sqlite3_errmsg(db_);
    sqlite3_finalize(statement);
    return first;
  }
  // Runs SQL that may fail (a CHECK); returns SQLite's result code.
  int execute(const std::string& sql) {
    return sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  }
  // Every row of a query, each as its columns' text (NULL as "NULL").
  std::vector<std::vector<std::string>> rows(const std::string& sql,
                                             const std::vector<Value>& values = {}) {
    sqlite3_stmt* statement = prepare(sql, values);
    std::vector<std::vector<std::string>> found;
    while (sqlite3_step(statement) == SQLITE_ROW) {
      std::vector<std::string>& row = found.emplace_back();
      for (int column = 0; column < sqlite3_column_count(statement); ++column) {
        row.push_back(sqlite3_column_type(statement, column) == SQLITE_NULL
                          ? "NULL"
                          : reinterpret_cast<const char*>(sqlite3_column_text(statement, column)));
      }
    }
    sqlite3_finalize(statement);
    return found;
  }
  int64_t count(const std::string& table) {
    return std::stoll(query("SELECT count(*) FROM " + table));
  }
  bool has_object(const std::string& type, const std::string& name) {
    return query("SELECT count(*) FROM sqlite_master WHERE type = ? AND name = ?", {type, name}) ==
           "1";
  }

 private:
  sqlite3_stmt* prepare(const std::string& sql, const std::vector<Value>& values) {
    sqlite3_stmt* statement = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &statement, nullptr), SQLITE_OK)
        << sql << ": " << sqlite3_errmsg(db_);
    for (size_t i = 0; i < values.size(); ++i) {
      const int index = static_cast<int>(i) + 1;
      if (const auto* number = std::get_if<int64_t>(&values[i])) {
        sqlite3_bind_int64(statement, index, *number);
      } else if (const auto* floating = std::get_if<double>(&values[i])) {
        sqlite3_bind_double(statement, index, *floating);
      } else {
        const std::string& text = std::get<std::string>(values[i]);
        sqlite3_bind_text(statement, index, text.c_str(), static_cast<int>(text.size()),
                          SQLITE_TRANSIENT);
      }
    }
    return statement;
  }

  static constexpr int kBusyTimeoutMs = 10'000;
  sqlite3* db_ = nullptr;
};

std::string read_bytes(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

// ---- the fixture -------------------------------------------------------------------------------

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = std::random_device{}();
    rng_.seed(seed_);
  }

  std::string seed_trace() const { return "random seed " + std::to_string(seed_); }
  std::string path(const std::string& name) const { return directory_.file(name); }

  std::unique_ptr<Store> open_store(const std::string& file) {
    Result<std::unique_ptr<Store>> store = Store::open(file);
    EXPECT_TRUE(store.ok()) << store.status().message;
    return store ? std::move(*store) : nullptr;
  }

  StoredRun load(Store& store, int64_t run_id) {
    Result<StoredRun> run = store.load_run(run_id);
    EXPECT_TRUE(run.ok()) << run.status().message;
    return run ? std::move(*run) : StoredRun{};
  }

  uint64_t seed_ = 0;
  Rng rng_;
  const ScratchDirectory directory_{"attnbench_test_store"};
};

// A forked child reports through its exit code only: gtest's assertions belong to the parent.
[[noreturn]] void exit_child(const Status& status) {
  if (!status) std::fprintf(stderr, "child %d: %s\n", getpid(), status.message.c_str());
  _exit(status ? 0 : 1);
}

// ---- tests -------------------------------------------------------------------------------------

TEST(ResultStatusNames, RoundTripAndRefuseOthers) {
  const std::map<ResultStatus, std::string> expected = {
      {ResultStatus::passed, "passed"},   {ResultStatus::failed, "failed"},
      {ResultStatus::skipped, "skipped"}, {ResultStatus::crashed, "crashed"},
      {ResultStatus::timeout, "timeout"}, {ResultStatus::error, "error"}};
  for (const auto& [status, name] : expected) {
    EXPECT_EQ(result_status_name(status), name);
    EXPECT_EQ(parse_result_status(name), status) << name;
  }
  for (std::string_view other : {"", "pass", "PASSED", "passed "}) {
    EXPECT_FALSE(parse_result_status(other).has_value()) << "'" << other << "'";
  }
}

TEST_F(StoreTest, RoundTripKeepsEveryFieldAcrossReopen) {
  SCOPED_TRACE(seed_trace());
  // The parent folders do not exist yet: open creates them.
  const std::string file = path("nested/deeper/results.sqlite");
  std::unique_ptr<Store> store = open_store(file);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), kSchemaVersion);
  EXPECT_EQ(store->path(), file);

  const RunInfo info = random_run_info(rng_);
  const int64_t run_id = value_of(store->begin_run(info));
  const std::vector<DeviceInfo> devices = {random_device(rng_, "cpu", 0),
                                           random_device(rng_, "cuda", 1)};
  std::vector<int64_t> device_ids;
  for (const DeviceInfo& device : devices) {
    device_ids.push_back(value_of(store->add_device(run_id, device)));
  }

  // Every status at least once, both devices, and a result tied to no device row.
  std::vector<ResultRecord> results;
  for (size_t i = 0; i < 3 * kResultStatuses.size(); ++i) {
    results.push_back(random_result(rng_, device_ids[i % device_ids.size()]));
    results.back().status = kResultStatuses[i % kResultStatuses.size()];
  }
  results.push_back(random_result(rng_, 0));
  // The same case measured again shares its case row.
  ResultRecord repeat = random_result(rng_, device_ids[0]);
  repeat.kernel = results[0].kernel;
  repeat.problem = results[0].problem;
  repeat.distribution = results[0].distribution;
  results.push_back(repeat);
  for (const ResultRecord& result : results) {
    ASSERT_TRUE(store->add_result(run_id, result).ok);
  }

  StoredRun unfinished = load(*store, run_id);
  EXPECT_EQ(unfinished.status, "incomplete");
  EXPECT_EQ(unfinished.finished_at, "");
  ASSERT_TRUE(store->finish_run(run_id).ok);

  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(pass == 0 ? "open" : "reopened");
    const StoredRun run = load(*store, run_id);
    EXPECT_EQ(run.id, run_id);
    EXPECT_EQ(run.status, "complete");
    EXPECT_FALSE(run.finished_at.empty());
    expect_same_run_info(info, run.info);
    ASSERT_EQ(run.devices.size(), devices.size());
    for (size_t i = 0; i < devices.size(); ++i) expect_same_device(devices[i], run.devices[i]);
    expect_same_results(results, run.results);
    store.reset();
    store = open_store(file);
    ASSERT_NE(store, nullptr);
  }
  store.reset();

  RawDatabase raw(file);
  EXPECT_EQ(raw.count("cases"), static_cast<int64_t>(results.size()) - 1);
  EXPECT_EQ(raw.query("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.count("runs"), 1) << "the SQL-looking text must stay data";
}

TEST_F(StoreTest, FailedResultRollsBackItsCase) {
  SCOPED_TRACE(seed_trace());
  const std::string file = path("rollback.sqlite");
  std::unique_ptr<Store> store = open_store(file);
  ASSERT_NE(store, nullptr);
  const int64_t run_id = value_of(store->begin_run(random_run_info(rng_)));

  // The case row is written first; the missing run then fails the result's foreign key.
  const Status missing_run = store->add_result(run_id + 1, random_result(rng_, 0));
  EXPECT_FALSE(missing_run.ok);
  EXPECT_NE(missing_run.message.find(file), std::string::npos) << missing_run.message;
  // A status outside the enumeration fails the CHECK constraint.
  ResultRecord bad_status = random_result(rng_, 0);
  bad_status.status = static_cast<ResultStatus>(kResultStatuses.size());
  EXPECT_FALSE(store->add_result(run_id, bad_status).ok);
  // A device that does not exist fails the foreign key.
  EXPECT_FALSE(store->add_result(run_id, random_result(rng_, 1)).ok);
  EXPECT_FALSE(store->finish_run(run_id + 1).ok);

  // Still writable: nothing was left locked.
  const ResultRecord good = random_result(rng_, 0);
  ASSERT_TRUE(store->add_result(run_id, good).ok);
  expect_same_results({good}, load(*store, run_id).results);
  store.reset();

  RawDatabase raw(file);
  EXPECT_EQ(raw.count("cases"), 1);
  EXPECT_EQ(raw.count("results"), 1);
  EXPECT_EQ(raw.count("samples"), static_cast<int64_t>(good.samples.size()));
}

TEST_F(StoreTest, DuplicateRunUuidIsRefused) {
  SCOPED_TRACE(seed_trace());
  std::unique_ptr<Store> store = open_store(path("uuid.sqlite"));
  ASSERT_NE(store, nullptr);
  const RunInfo info = random_run_info(rng_);
  const Result<int64_t> first = store->begin_run(info);
  ASSERT_TRUE(first.ok()) << first.status().message;
  const Result<int64_t> again = store->begin_run(info);
  EXPECT_FALSE(again.ok());
  EXPECT_NE(again.status().message.find(info.uuid), std::string::npos) << again.status().message;
}

TEST_F(StoreTest, MigrationFromVersion1KeepsDataAndReachesTheCurrentVersion) {
  SCOPED_TRACE(seed_trace());
  const std::string file = path("old/v1.sqlite");
  ASSERT_TRUE(Store::create_at_version(file, 1).ok);
  EXPECT_FALSE(Store::create_at_version(file, 1).ok) << "the file exists already";
  EXPECT_FALSE(Store::create_at_version(path("v0.sqlite"), 0).ok);
  EXPECT_FALSE(Store::create_at_version(path("vnext.sqlite"), kSchemaVersion + 1).ok);

  // Rows as attnbench 1 wrote them, through its version-1 columns (later columns default).
  RunInfo info = random_run_info(rng_);
  info.env.cudnn_frontend.clear();
  info.env.cublas.clear();
  info.selection.clear();
  info.shard.clear();
  info.merged_from.clear();
  ResultRecord result = random_result(rng_, 0);
  result.problem.mask = Mask{MaskKind::window, 3, 0};
  result.problem = in_pass(result.problem, Pass::fwd);  // every case before version 11 is a forward
  // ... and dense and contiguous before versions 14 and 15.
  result.problem.varlen = {};
  result.problem.page_size = 0;
  if (result.problem.layout == Layout::thd) result.problem.layout = Layout::bshd;
  const Sample sample = random_sample(rng_, 0);
  result.samples = {sample};
  {
    RawDatabase raw(file);
    EXPECT_EQ(raw.query("SELECT version FROM schema_version"), "1");
    EXPECT_FALSE(raw.has_object("table", "annotations"));
    EXPECT_FALSE(raw.has_object("table", "alerts"));
    EXPECT_FALSE(raw.has_object("index", "results_by_series"));
    const EnvironmentInfo& env = info.env;
    raw.query(
        "INSERT INTO runs (id, uuid, started_at, status, suite, command, protocol_json, git_sha, "
        "git_dirty, build_type, build_flags, compiler, cuda_runtime, cuda_driver, cudnn, blas, "
        "host, cpu, os) VALUES (1, ?, ?, 'incomplete', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
        "?)",
        {info.uuid, info.started_at, info.suite, info.command, info.protocol_json, env.git_sha,
         int64_t{env.git_dirty}, env.build_type, env.build_flags, env.compiler, env.cuda_runtime,
         env.cuda_driver, env.cudnn, env.blas, env.host, env.cpu, env.os});
    const Problem& p = result.problem;
    raw.query(
        "INSERT INTO cases (id, case_key, kernel, batch, heads_q, heads_kv, seqlen_q, seqlen_k, "
        "head_dim_qk, head_dim_v, input_dtype, output_dtype, p_dtype, fp8_scaling, mask_kind, "
        "window_left, window_right, layout, scale, distribution) VALUES (7, ?, ?, ?, ?, ?, ?, ?, "
        "?, ?, ?, ?, ?, ?, 'window', 3, 0, ?, ?, ?)",
        {result.kernel + "|" + shape_string(p) + "|" + result.distribution, result.kernel, p.batch,
         p.heads_q, p.heads_kv, p.seqlen_q, p.seqlen_k, p.head_dim_qk, p.head_dim_v,
         std::string(dtype_name(p.input_dtype)), std::string(dtype_name(p.output_dtype)),
         std::string(dtype_name(p.p_dtype)), std::string(fp8_scaling_name(p.fp8_scaling)),
         std::string(layout_name(p.layout)), p.scale, result.distribution});
    raw.query(
        "INSERT INTO results (id, run_id, case_id, series_key, status, message, seed) "
        "VALUES (5, 1, 7, ?, ?, ?, ?)",
        {result.series_key, std::string(result_status_name(result.status)), result.message,
         static_cast<int64_t>(result.seed)});
    raw.query(
        "INSERT INTO samples (result_id, repetition, time_s, iterations, sm_clock_mhz, "
        "clock_reasons) VALUES (5, 0, ?, ?, ?, ?)",
        {std::isnan(sample.time_s) ? 1.0 : sample.time_s, sample.iterations,
         std::isnan(sample.sm_clock_mhz) ? 2.0 : sample.sm_clock_mhz, sample.clock_reasons});
    result.samples[0].time_s = std::isnan(sample.time_s) ? 1.0 : sample.time_s;
    result.samples[0].sm_clock_mhz = std::isnan(sample.sm_clock_mhz) ? 2.0 : sample.sm_clock_mhz;
  }

  std::unique_ptr<Store> store = open_store(file);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), kSchemaVersion);
  const StoredRun run = load(*store, 1);
  expect_same_run_info(info, run.info);
  EXPECT_EQ(run.status, "incomplete");
  ASSERT_EQ(run.results.size(), 1u);
  const ResultRecord& loaded = run.results[0];
  EXPECT_EQ(loaded.kernel, result.kernel);
  EXPECT_TRUE(loaded.problem == result.problem) << shape_string(loaded.problem);
  EXPECT_EQ(loaded.distribution, result.distribution);
  EXPECT_EQ(loaded.series_key, result.series_key);
  EXPECT_EQ(loaded.status, result.status);
  EXPECT_EQ(loaded.message, result.message);
  EXPECT_EQ(loaded.seed, result.seed);
  ASSERT_EQ(loaded.samples.size(), 1u);
  expect_same_sample(result.samples[0], loaded.samples[0]);
  // The migrated file takes new results, into the old case row when the case is the same.
  ResultRecord again = random_result(rng_, 0);
  again.kernel = result.kernel;
  again.problem = result.problem;
  again.distribution = result.distribution;
  ASSERT_TRUE(store->add_result(1, again).ok);
  ASSERT_TRUE(store->finish_run(1).ok);
  store.reset();

  RawDatabase raw(file);
  EXPECT_EQ(raw.query("SELECT version FROM schema_version"), std::to_string(kSchemaVersion));
  // Version 11: the old case reads as a forward.
  EXPECT_EQ(raw.query("SELECT pass FROM cases WHERE id = 7"), "fwd");
  // Version 12: ... and draws no dO.
  EXPECT_EQ(raw.query("SELECT dout FROM cases WHERE id = 7"), "normal");
  EXPECT_TRUE(raw.has_object("table", "annotations"));
  EXPECT_TRUE(raw.has_object("table", "alerts"));
  EXPECT_TRUE(raw.has_object("index", "results_by_series"));
  // Version 4: the regression analysis' tables and columns.
  EXPECT_TRUE(raw.has_object("table", "run_levels"));
  EXPECT_TRUE(raw.has_object("index", "alerts_by_series"));
  EXPECT_TRUE(raw.has_object("index", "runs_by_rerun"));
  EXPECT_EQ(raw.query("SELECT count(*) FROM pragma_table_info('alerts') WHERE name IN "
                      "('state', 'since_run_id', 'change_fraction', 'environment', 'annotation', "
                      "'chip_changed')"),
            "6");
  EXPECT_EQ(raw.query("SELECT count(*) FROM pragma_table_info('runs') WHERE name IN "
                      "('selection', 'shard', 'rerun_of', 'merged_from', 'analysed_at')"),
            "5");
  EXPECT_EQ(raw.query("SELECT selection || shard || merged_from FROM runs WHERE id = 1"), "");
  // Version 5: what timing cost and why it stopped; the version-1 result reads as unknown.
  EXPECT_EQ(raw.query("SELECT count(*) FROM pragma_table_info('results') WHERE name IN "
                      "('forwards_timed', 'timing_wall_s', 'timing_stop')"),
            "3");
  EXPECT_EQ(raw.query("SELECT timing_stop IS NULL AND timing_wall_s IS NULL FROM results WHERE id = 5"), "1");
  EXPECT_EQ(raw.count("cases"), 1);
  EXPECT_EQ(raw.count("results"), 2);
  EXPECT_EQ(raw.query("SELECT count(*) FROM schema_version"), "1");
}

TEST_F(StoreTest, NewerSchemaIsRefusedAndTheFileLeftUntouched) {
  SCOPED_TRACE(seed_trace());
  const std::string file = path("newer.sqlite");
  {
    std::unique_ptr<Store> store = open_store(file);
    ASSERT_NE(store, nullptr);
    const int64_t run_id = value_of(store->begin_run(random_run_info(rng_)));
    ASSERT_TRUE(store->add_result(run_id, random_result(rng_, 0)).ok);
  }
  const int newer = kSchemaVersion + 1;
  {
    RawDatabase raw(file);
    raw.query("UPDATE schema_version SET version = ?", {int64_t{newer}});
  }
  ASSERT_FALSE(fs::exists(file + "-wal")) << "the last connection folds the WAL back";
  const std::string before = read_bytes(file);

  const Result<std::unique_ptr<Store>> refused = Store::open(file);
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message,
            file + " has schema version " + std::to_string(newer) +
                "; this attnbench reads up to " + std::to_string(kSchemaVersion));
  EXPECT_EQ(read_bytes(file), before) << "a refused file must not change";
  RawDatabase raw(file);
  EXPECT_EQ(raw.query("SELECT version FROM schema_version"), std::to_string(newer));
}

TEST_F(StoreTest, FilesThatAreNotAttnbenchDatabasesAreRefusedUntouched) {
  SCOPED_TRACE(seed_trace());
  const std::string junk_file = path("junk.sqlite");
  std::string junk;
  constexpr size_t kJunkBytes = 4096;
  std::uniform_int_distribution<int> printable(' ', '~');
  for (size_t i = 0; i < kJunkBytes; ++i) junk += static_cast<char>(printable(rng_));
  std::ofstream(junk_file, std::ios::binary) << junk;

  const Result<std::unique_ptr<Store>> junk_refused = Store::open(junk_file);
  EXPECT_FALSE(junk_refused.ok());
  EXPECT_EQ(junk_refused.status().message,
            junk_file + " is not an attnbench database (not a SQLite file)");
  EXPECT_EQ(read_bytes(junk_file), junk);

  // A SQLite file that some other program wrote.
  const std::string foreign_file = path("foreign.sqlite");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(foreign_file.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE measurements (x REAL)", nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
  }
  const std::string foreign_before = read_bytes(foreign_file);
  const Result<std::unique_ptr<Store>> foreign_refused = Store::open(foreign_file);
  EXPECT_FALSE(foreign_refused.ok());
  const std::string& message = foreign_refused.status().message;
  EXPECT_NE(message.find(foreign_file), std::string::npos) << message;
  EXPECT_NE(message.find("not an attnbench database"), std::string::npos) << message;
  EXPECT_EQ(read_bytes(foreign_file), foreign_before);
}

TEST_F(StoreTest, ConcurrentWritersLoseNothing) {
  SCOPED_TRACE(seed_trace());
  constexpr int kWriters = 2;
  constexpr int kResultsPerWriter = 200;
  // Both writers also race to create the file and its schema.
  const std::string file = path("concurrent.sqlite");
  auto writer_seed = [&](int writer) { return seed_ + 1 + static_cast<uint64_t>(writer); };
  auto writer_uuid = [&](int writer) { return "writer-" + std::to_string(writer); };

  int start_pipe[2];
  ASSERT_EQ(pipe(start_pipe), 0);
  std::fflush(nullptr);
  std::vector<pid_t> children;
  for (int writer = 0; writer < kWriters; ++writer) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      close(start_pipe[1]);
      char go = 0;
      if (read(start_pipe[0], &go, 1) != 1) exit_child(Status::Error("no start signal"));
      Rng rng(writer_seed(writer));
      Result<std::unique_ptr<Store>> opened = Store::open(file);
      if (!opened) exit_child(opened.status());
      Store& store = **opened;
      RunInfo info = random_run_info(rng);
      info.uuid = writer_uuid(writer);
      const Result<int64_t> run_id = store.begin_run(info);
      if (!run_id) exit_child(run_id.status());
      const Result<int64_t> device_id = store.add_device(*run_id, random_device(rng, "cpu", 0));
      if (!device_id) exit_child(device_id.status());
      Status status;
      for (int i = 0; i < kResultsPerWriter && status; ++i) {
        status = store.add_result(*run_id, random_result(rng, *device_id));
      }
      if (status) status = store.finish_run(*run_id);
      exit_child(status);
    }
    children.push_back(child);
  }
  close(start_pipe[0]);
  const std::string go(kWriters, 'g');
  ASSERT_EQ(write(start_pipe[1], go.data(), go.size()), static_cast<ssize_t>(go.size()));
  close(start_pipe[1]);
  for (pid_t child : children) {
    int wait_status = 0;
    ASSERT_EQ(waitpid(child, &wait_status, 0), child);
    EXPECT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0)
        << "writer " << child << " failed; its message is on stderr";
  }

  std::unique_ptr<Store> store = open_store(file);
  ASSERT_NE(store, nullptr);
  const std::vector<RunListEntry> runs = value_of(store->list_runs(0));
  ASSERT_EQ(runs.size(), static_cast<size_t>(kWriters));
  for (const RunListEntry& entry : runs) {
    EXPECT_EQ(entry.status, "complete");
    EXPECT_EQ(entry.result_count, kResultsPerWriter);
    StoredRun run = load(*store, entry.id);
    const int writer = run.info.uuid == writer_uuid(0) ? 0 : 1;
    ASSERT_EQ(run.info.uuid, writer_uuid(writer));
    // Regenerate what the writer drew, in the same order, to compare every field.
    Rng rng(writer_seed(writer));
    RunInfo info = random_run_info(rng);
    info.uuid = writer_uuid(writer);
    expect_same_run_info(info, run.info);
    const DeviceInfo device = random_device(rng, "cpu", 0);
    ASSERT_EQ(run.devices.size(), 1u);
    expect_same_device(device, run.devices[0]);
    ASSERT_FALSE(run.results.empty());
    const int64_t device_id = run.results[0].device_id;
    EXPECT_GT(device_id, 0);
    std::vector<ResultRecord> expected;
    for (int i = 0; i < kResultsPerWriter; ++i) expected.push_back(random_result(rng, device_id));
    expect_same_results(expected, run.results);
  }
}

TEST_F(StoreTest, WriterWaitsForAnotherWritersLock) {
  SCOPED_TRACE(seed_trace());
  const std::string file = path("waits.sqlite");
  std::unique_ptr<Store> store = open_store(file);
  ASSERT_NE(store, nullptr);
  const int64_t run_id = value_of(store->begin_run(random_run_info(rng_)));

  // Another writer holds the write lock for a while, then commits.
  constexpr auto kHold = std::chrono::milliseconds(300);
  RawDatabase other(file);
  ASSERT_EQ(sqlite3_exec(other.handle(), "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  const auto start = std::chrono::steady_clock::now();  // before the hold begins
  std::thread holder([&] {
    std::this_thread::sleep_for(kHold);
    sqlite3_exec(other.handle(), "COMMIT", nullptr, nullptr, nullptr);
  });
  const ResultRecord result = random_result(rng_, 0);
  const Status added = store->add_result(run_id, result);
  const auto waited = std::chrono::steady_clock::now() - start;
  holder.join();
  ASSERT_TRUE(added.ok) << added.message;
  EXPECT_GE(waited, kHold) << "the result cannot have been written while the lock was held";
  expect_same_results({result}, load(*store, run_id).results);
}

TEST_F(StoreTest, KilledWriterLeavesCommittedResultsAndAnIncompleteRun) {
  SCOPED_TRACE(seed_trace());
  const std::string file = path("killed.sqlite");
  const int committed = std::uniform_int_distribution<int>(5, 30)(rng_);
  const uint64_t child_seed = rng_();
  std::fflush(nullptr);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Rng rng(child_seed);
    Result<std::unique_ptr<Store>> opened = Store::open(file);
    if (!opened) exit_child(opened.status());
    Store& store = **opened;
    const Result<int64_t> run_id = store.begin_run(random_run_info(rng));
    if (!run_id) exit_child(run_id.status());
    Status status;
    for (int i = 0; i < committed && status; ++i) {
      status = store.add_result(*run_id, random_result(rng, 0));
    }
    if (!status) exit_child(status);
    // Die in the middle of a write transaction, holding the write lock.
    sqlite3* raw = nullptr;
    sqlite3_open(file.c_str(), &raw);
    sqlite3_exec(raw, "BEGIN IMMEDIATE; DELETE FROM samples; DELETE FROM results;", nullptr,
                 nullptr, nullptr);
    raise(SIGKILL);
  }
  int wait_status = 0;
  ASSERT_EQ(waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL)
      << "the child must die by SIGKILL, not exit (status " << wait_status << ")";

  {
    RawDatabase raw(file);
    EXPECT_EQ(raw.query("PRAGMA integrity_check"), "ok");
  }
  std::unique_ptr<Store> store = open_store(file);
  ASSERT_NE(store, nullptr);
  const std::optional<int64_t> run_id = value_of(store->latest_run_id());
  ASSERT_TRUE(run_id.has_value());
  const StoredRun run = load(*store, *run_id);
  EXPECT_EQ(run.status, "incomplete");
  EXPECT_EQ(run.finished_at, "");
  Rng rng(child_seed);
  expect_same_run_info(random_run_info(rng), run.info);
  std::vector<ResultRecord> expected;
  for (int i = 0; i < committed; ++i) expected.push_back(random_result(rng, 0));
  expect_same_results(expected, run.results);
  // The dead writer's lock is gone.
  EXPECT_TRUE(store->add_result(*run_id, random_result(rng_, 0)).ok);
  EXPECT_TRUE(store->finish_run(*run_id).ok);
}

TEST_F(StoreTest, LatestRunListRunsAndLatestCalibrations) {
  SCOPED_TRACE(seed_trace());
  std::unique_ptr<Store> store = open_store(path("history.sqlite"));
  ASSERT_NE(store, nullptr);
  EXPECT_FALSE(value_of(store->latest_run_id()).has_value());
  EXPECT_TRUE(value_of(store->list_runs(0)).empty());

  constexpr int kRuns = 5;
  constexpr int kMaxResultsPerRun = 4;
  std::vector<RunListEntry> expected;  // oldest first
  for (int i = 0; i < kRuns; ++i) {
    const RunInfo info = random_run_info(rng_);
    RunListEntry entry;
    entry.id = value_of(store->begin_run(info));
    entry.started_at = info.started_at;
    entry.suite = info.suite;
    entry.result_count = std::uniform_int_distribution<int>(0, kMaxResultsPerRun)(rng_);
    for (int r = 0; r < entry.result_count; ++r) {
      ASSERT_TRUE(store->add_result(entry.id, random_result(rng_, 0)).ok);
    }
    entry.status = random_bool(rng_) ? "complete" : "incomplete";
    if (entry.status == "complete") {
      ASSERT_TRUE(store->finish_run(entry.id).ok);
    }
    expected.push_back(entry);
  }
  EXPECT_EQ(value_of(store->latest_run_id()), expected.back().id);
  std::reverse(expected.begin(), expected.end());  // newest first, as list_runs answers

  for (int limit : {0, 2, kRuns + 3}) {
    SCOPED_TRACE("limit " + std::to_string(limit));
    const std::vector<RunListEntry> listed = value_of(store->list_runs(limit));
    const size_t want = limit > 0 ? std::min<size_t>(limit, kRuns) : kRuns;
    ASSERT_EQ(listed.size(), want);
    for (size_t i = 0; i < want; ++i) {
      EXPECT_SAME_FIELD(expected[i], listed[i], id);
      EXPECT_SAME_FIELD(expected[i], listed[i], started_at);
      EXPECT_SAME_FIELD(expected[i], listed[i], suite);
      EXPECT_SAME_FIELD(expected[i], listed[i], status);
      EXPECT_SAME_FIELD(expected[i], listed[i], result_count);
    }
  }
  EXPECT_FALSE(store->load_run(expected.front().id + 1).ok());

  // Several measurements of each (kind, dtype) on two devices, stored in random order.
  const std::array<std::pair<std::string, std::string>, 5> kinds = {
      {{"copy", "bytes"}, {"gemm", "bf16"}, {"gemm", "e4m3"}, {"gemm", "fp16"}, {"gemm", "fp32"}}};
  constexpr int kMeasurementsEach = 3;
  const std::array<std::string, 2> device_uuids = {"GPU-" + random_text(rng_),
                                                   "GPU-" + random_text(rng_) + "-other"};
  std::vector<CalibrationRecord> calibrations;
  std::map<std::string, std::vector<CalibrationRecord>> newest;  // uuid -> by (kind, dtype)
  for (const std::string& uuid : device_uuids) {
    for (const auto& [kind, dtype] : kinds) {
      std::vector<std::string> days(28);
      for (size_t d = 0; d < days.size(); ++d) {
        days[d] = "2025-11-" + std::string(d < 9 ? "0" : "") + std::to_string(d + 1) + "T08:30:00Z";
      }
      std::shuffle(days.begin(), days.end(), rng_);
      CalibrationRecord latest;
      for (int m = 0; m < kMeasurementsEach; ++m) {
        CalibrationRecord calibration;
        calibration.device_name = random_text(rng_);
        calibration.device_uuid = uuid;
        calibration.kind = kind;
        calibration.dtype = dtype;
        calibration.value = std::uniform_real_distribution<double>(1e9, 1e15)(rng_);
        calibration.details = random_text(rng_);
        calibration.measured_at = days[m];
        if (calibration.measured_at > latest.measured_at) latest = calibration;
        calibrations.push_back(calibration);
      }
      newest[uuid].push_back(latest);
    }
  }
  std::shuffle(calibrations.begin(), calibrations.end(), rng_);
  for (const CalibrationRecord& calibration : calibrations) {
    ASSERT_TRUE(store->add_calibration(calibration).ok);
  }
  for (const std::string& uuid : device_uuids) {
    SCOPED_TRACE(uuid);
    const std::vector<CalibrationRecord> latest = value_of(store->latest_calibrations(uuid));
    ASSERT_EQ(latest.size(), kinds.size());
    for (size_t i = 0; i < kinds.size(); ++i) expect_same_calibration(newest[uuid][i], latest[i]);
  }
  EXPECT_TRUE(value_of(store->latest_calibrations("GPU-none")).empty());
}

// ---- regression bookkeeping (schema 4) ---------------------------------------------------------

// A passed, timed result of one series on one device.
ResultRecord timed_result(const std::string& series_key, int64_t device_id, double median_s,
                          double clock_mhz) {
  ResultRecord result;
  result.kernel = "cpu.flash";
  // One case per key.
  result.problem =
      make_problem(1, 2, 2, 64, 64 + static_cast<int64_t>(series_key.size()), 32, 32, {});
  result.distribution = "normal";
  result.device_id = device_id;
  result.device_name = "dev";
  result.series_key = series_key;
  result.status = ResultStatus::passed;
  result.timing.timed = true;
  result.timing.median_s = median_s;
  result.timing.cv = 0.01;
  for (int r = 0; r < 3; ++r) {
    Sample sample;
    sample.repetition = r;
    sample.time_s = median_s * (1 + 0.01 * (r - 1));
    sample.iterations = 10;
    sample.sm_clock_mhz = clock_mhz + r;  // median: clock_mhz + 1
    result.samples.push_back(sample);
  }
  result.check.checked = true;
  result.check.max_abs_error = 1e-3;
  return result;
}

TEST_F(StoreTest, SeriesHistoriesCarryLevelsAndEarlierVerdictsAndLeaveReruns) {
  SCOPED_TRACE(seed_trace());
  std::unique_ptr<Store> store = open_store(path("analysis.sqlite"));
  ASSERT_NE(store, nullptr);
  const std::string key_a = "cpu.flash|a|normal|dev|Release";
  const std::string key_b = "cpu.flash|bb|normal|dev|Release";
  std::vector<int64_t> runs;
  constexpr int kRuns = 6;
  for (int i = 0; i < kRuns; ++i) {
    RunInfo info = random_run_info(rng_);
    info.selection = "run suite=smoke";
    if (i == kRuns - 1) info.rerun_of = runs.back();  // the last run reruns the one before
    const int64_t run_id = value_of(store->begin_run(info));
    DeviceInfo device = random_device(rng_, "cpu", 0);
    device.uuid = "chip-" + std::to_string(i % 2);
    const int64_t device_id = value_of(store->add_device(run_id, device));
    ASSERT_TRUE(store->add_result(run_id, timed_result(key_a, device_id, 1e-3 * (i + 1), 1000)).ok);
    if (i % 2 == 0) {
      ASSERT_TRUE(store->add_result(run_id, timed_result(key_b, device_id, 2e-3, 900)).ok);
    }
    ASSERT_TRUE(store->finish_run(run_id).ok);
    runs.push_back(run_id);
  }
  // The analysis of run 3: a suspicion of a, a level; then run 4 turns it into an outlier.
  AlertRecord suspected;
  suspected.series_key = key_a;
  suspected.kind = AlertKind::performance;
  suspected.state = "suspected";
  suspected.severity = Severity::warning;
  suspected.message = "slower";
  suspected.since_run_id = runs[2];
  suspected.change = 0.25;
  suspected.chip_changed = true;
  suspected.environment = "chip chip-1 -> chip-0";
  ASSERT_TRUE(store->store_analysis(runs[2], {suspected}, {{"dev", 0.05, 9}}, {}, {}).ok);
  ASSERT_TRUE(store
                  ->store_analysis(runs[3], {}, {{"dev", -0.01, 9}}, {},
                                   {{runs[2], key_a, AlertKind::performance, Verdict::outlier,
                                     "; reverted"}})
                  .ok);
  const std::vector<AlertRecord> alerts = value_of(store->run_alerts(runs[2]));
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].state, "outlier");
  EXPECT_EQ(alerts[0].severity, Severity::info);
  EXPECT_EQ(alerts[0].message, "slower; reverted");
  EXPECT_EQ(alerts[0].since_run_id, runs[2]);
  EXPECT_DOUBLE_EQ(alerts[0].change, 0.25);
  EXPECT_TRUE(alerts[0].chip_changed);
  EXPECT_EQ(alerts[0].environment, suspected.environment);
  EXPECT_TRUE(value_of(store->find_alert(runs[2], key_a, AlertKind::performance)).has_value());
  EXPECT_FALSE(value_of(store->find_alert(runs[2], key_b, AlertKind::performance)).has_value());
  EXPECT_FALSE(value_of(store->find_alert(runs[2], key_a, AlertKind::accuracy)).has_value());
  // Storing an analysis again replaces it.
  ASSERT_TRUE(store->store_analysis(runs[2], {}, {{"dev", 0.04, 8}}, {}, {}).ok);
  EXPECT_TRUE(value_of(store->run_alerts(runs[2])).empty());
  ASSERT_EQ(value_of(store->run_levels(runs[2])).size(), 1u);
  EXPECT_DOUBLE_EQ(value_of(store->run_levels(runs[2]))[0].level, 0.04);
  // Schema 6: the detector's row for a in run 3, which every history row of it then carries.
  AnalysisRecord analysis_a =
      random_analysis(rng_, key_a, false, load(*store, runs[2]).result_ids.at(0));
  analysis_a.run_id = runs[2];
  ASSERT_TRUE(
      store->store_analysis(runs[2], {suspected}, {{"dev", 0.05, 9}}, {analysis_a}, {}).ok);

  const auto histories =
      value_of(store->series_histories({key_a, key_b, "none"}, runs.back() + 1, 3));
  const std::vector<HistoryRow>& a = histories.at(key_a);
  ASSERT_EQ(a.size(), 3u) << "limited to the newest 3, the rerun left out";
  EXPECT_EQ(a[0].run_id, runs[2]);
  EXPECT_EQ(a[2].run_id, runs[4]);
  EXPECT_DOUBLE_EQ(a[0].median_s, 3e-3);
  EXPECT_DOUBLE_EQ(a[0].sm_clock_mhz, 1001);
  EXPECT_DOUBLE_EQ(a[0].level, 0.05);
  EXPECT_EQ(a[0].performance_state, "suspected");
  EXPECT_TRUE(a[0].chip_changed);
  EXPECT_EQ(a[0].chip, "chip-0");
  EXPECT_EQ(a[1].performance_state, "");
  EXPECT_TRUE(std::isnan(a[2].level)) << "run 5 was never analysed";
  ASSERT_TRUE(a[0].analysis.has_value());
  expect_same_analysis(analysis_a, *a[0].analysis);
  EXPECT_FALSE(a[1].analysis.has_value()) << "run 4's analysis stored no row for a";
  EXPECT_FALSE(a[2].analysis.has_value()) << "run 5 was never analysed";
  EXPECT_EQ(histories.at(key_b).size(), 3u);
  for (const HistoryRow& row : histories.at(key_b)) EXPECT_FALSE(row.analysis.has_value());
  EXPECT_TRUE(histories.at("none").empty());
  const std::vector<HistoryRow> full_a = value_of(store->full_series_history(key_a));
  ASSERT_EQ(full_a.size(), static_cast<size_t>(kRuns - 1));
  for (const HistoryRow& row : full_a) {
    SCOPED_TRACE("run " + std::to_string(row.run_id));
    EXPECT_EQ(row.analysis.has_value(), row.run_id == runs[2]);
    if (row.analysis) expect_same_analysis(analysis_a, *row.analysis);
  }

  EXPECT_EQ(value_of(store->latest_primary_run_id()), runs[kRuns - 2]);
  EXPECT_EQ(value_of(store->latest_rerun_of(runs[kRuns - 2])), runs.back());
  EXPECT_EQ(value_of(store->previous_comparable_run(runs[3], "run suite=smoke")), runs[2]);
  EXPECT_FALSE(value_of(store->previous_comparable_run(runs[3], "other")).has_value());
  const std::vector<int64_t> unanalysed = value_of(store->unanalysed_runs());
  EXPECT_EQ(unanalysed, (std::vector<int64_t>{runs[0], runs[1], runs[4]}));
  EXPECT_EQ(value_of(store->series_keys()), (std::vector<std::string>{key_a, key_b}));
  EXPECT_EQ(value_of(store->run_series(runs[0])).size(), 2u);
  EXPECT_EQ(value_of(store->result_samples(a[0].result_id)).size(), 3u);

  AnnotationRecord annotation;
  annotation.series_key = key_b;
  annotation.kind = "expected_change";
  annotation.reason = "new tiling; 'quoted' reason";
  annotation.from_run_id = runs[3];
  ASSERT_TRUE(store->add_annotations({annotation}).ok);
  const std::vector<AnnotationRecord> annotations = value_of(store->annotations());
  ASSERT_EQ(annotations.size(), 1u);
  EXPECT_EQ(annotations[0].reason, annotation.reason);
  EXPECT_EQ(annotations[0].from_run_id, runs[3]);
  EXPECT_FALSE(annotations[0].created_at.empty());
}

TEST_F(StoreTest, MergeCopiesEachRunOnceAndMapsItsIds) {
  SCOPED_TRACE(seed_trace());
  std::map<std::string, std::vector<AnalysisRecord>> analyses;  // by file, as stored there
  // Two runners' files, each with two runs (the second a rerun of the first), alerts and
  // analysis rows.
  auto fill = [&](const std::string& file, const std::string& chip) {
    std::unique_ptr<Store> store = open_store(file);
    int64_t first = 0;
    for (int i = 0; i < 2; ++i) {
      RunInfo info = random_run_info(rng_);
      info.merged_from.clear();
      info.rerun_of = first;
      const int64_t run_id = value_of(store->begin_run(info));
      DeviceInfo device = random_device(rng_, "cuda", 0);
      device.uuid = chip;
      const int64_t device_id = value_of(store->add_device(run_id, device));
      EXPECT_TRUE(store->add_result(run_id, timed_result("k|s|normal|dev|b", device_id, 1e-3, 1500)).ok);
      EXPECT_TRUE(store->finish_run(run_id).ok);
      if (i == 0) first = run_id;
    }
    AlertRecord alert;
    alert.series_key = "k|s|normal|dev|b";
    alert.kind = AlertKind::performance;
    alert.state = "suspected";
    alert.severity = Severity::warning;
    alert.since_run_id = first;
    // The series' row refers to its result and to runs of the file (the baseline and the
    // suspicion's start: the run itself) and to a run the file does not have; the kernel's
    // aggregate has no result.
    AnalysisRecord series = random_analysis(rng_, alert.series_key, false,
                                            load(*store, first).result_ids.at(0));
    series.baseline_run_id = first;
    series.since_run_id = first;
    series.history_from_run_id = first + 1000;
    AnalysisRecord kernel = random_analysis(rng_, "k|*|*|dev|b", true, 0);
    kernel.baseline_run_id = kernel.since_run_id = kernel.history_from_run_id = 0;
    analyses[file] = {kernel, series};  // by series key, as run_analysis answers
    EXPECT_TRUE(
        store->store_analysis(first, {alert}, {{"dev", 0.01, 10}}, {series, kernel}, {}).ok);
    CalibrationRecord calibration;
    calibration.device_uuid = chip;
    calibration.kind = "copy";
    calibration.dtype = "bytes";
    calibration.value = 1e12;
    calibration.measured_at = "2025-12-01T00:00:00Z";
    EXPECT_TRUE(store->add_calibration(calibration).ok);
    // One profiled forward of two phases (`attnbench profile`), its id the file's own.
    std::vector<ProfilePhaseRecord> profile(2);
    for (size_t p = 0; p < profile.size(); ++p) {
      profile[p].profile_id = "profile-of-" + chip;
      profile[p].profiled_at = "2025-12-01T00:00:00Z";
      profile[p].kernel = "cpu.flash";
      profile[p].name = p == 0 ? "scores" : "gaps";
      profile[p].total_s = std::uniform_real_distribution<double>(1e-3, 1.0)(rng_);
    }
    EXPECT_TRUE(store->add_profile(profile).ok);
  };
  const std::string a = path("runner-a.sqlite");
  const std::string b = path("runner-b.sqlite");
  fill(a, "GPU-a");
  fill(b, "GPU-b");
  // The target already has a run of its own.
  std::unique_ptr<Store> target = open_store(path("merged.sqlite"));
  ASSERT_NE(target, nullptr);
  const int64_t own = value_of(target->begin_run(random_run_info(rng_)));
  MergeReport report = value_of(target->merge_from(a));
  EXPECT_EQ(report.runs_added, 2);
  EXPECT_EQ(report.calibrations_added, 1);
  EXPECT_EQ(report.profiles_added, 1);
  report = value_of(target->merge_from(b));
  EXPECT_EQ(report.runs_added, 2);
  // Merging again changes nothing.
  report = value_of(target->merge_from(a));
  EXPECT_EQ(report.runs_added, 0);
  EXPECT_EQ(report.runs_already_present, 2);
  EXPECT_EQ(report.calibrations_added, 0);
  EXPECT_EQ(report.profiles_added, 0);
  const std::vector<ProfilePhaseRecord> merged_profiles = value_of(target->load_profiles());
  ASSERT_EQ(merged_profiles.size(), 4u) << "each file's two phases, once";
  EXPECT_EQ(merged_profiles[0].profile_id, "profile-of-GPU-a");
  EXPECT_EQ(merged_profiles[3].profile_id, "profile-of-GPU-b");
  EXPECT_FALSE(target->merge_from(path("merged.sqlite")).ok());
  EXPECT_FALSE(target->merge_from(path("absent.sqlite")).ok());

  const std::vector<RunListEntry> runs = value_of(target->list_runs(0));
  ASSERT_EQ(runs.size(), 5u);
  // Newest first: b's rerun, b's run, a's rerun, a's run, the target's own.
  EXPECT_EQ(runs.back().id, own);
  const StoredRun rerun_b = load(*target, runs[0].id);
  EXPECT_EQ(rerun_b.info.rerun_of, runs[1].id) << "the rerun points at its run's new id";
  EXPECT_NE(rerun_b.info.merged_from.find("runner-b.sqlite"), std::string::npos);
  EXPECT_EQ(rerun_b.status, "complete");
  ASSERT_EQ(rerun_b.results.size(), 1u);
  ASSERT_EQ(rerun_b.devices.size(), 1u);
  EXPECT_EQ(rerun_b.results[0].device_id, rerun_b.device_ids[0]);
  EXPECT_EQ(rerun_b.devices[0].uuid, "GPU-b");
  ASSERT_EQ(rerun_b.results[0].samples.size(), 3u);
  const std::vector<AlertRecord> alerts = value_of(target->run_alerts(runs[1].id));
  ASSERT_EQ(alerts.size(), 1u);
  EXPECT_EQ(alerts[0].since_run_id, runs[1].id);
  EXPECT_EQ(value_of(target->run_levels(runs[1].id)).size(), 1u);
  EXPECT_EQ(value_of(target->latest_calibrations("GPU-b")).size(), 1u);

  // The analysis rows came along once each, their ids those of this file.
  for (const auto& [run, file] : {std::pair{runs[1].id, b}, std::pair{runs[3].id, a}}) {
    SCOPED_TRACE(file);
    const std::vector<AnalysisRecord> merged = value_of(target->run_analysis(run));
    ASSERT_EQ(merged.size(), 2u);
    std::vector<AnalysisRecord> expected = analyses.at(file);
    for (AnalysisRecord& row : expected) row.run_id = run;
    expected[1].result_id = load(*target, run).result_ids.at(0);
    expected[1].baseline_run_id = run;
    expected[1].since_run_id = run;
    expected[1].history_from_run_id = 0;  // a run the source did not have: NULL
    expect_same_analysis(expected[0], merged[0]);
    expect_same_analysis(expected[1], merged[1]);
  }
  RawDatabase raw(path("merged.sqlite"));
  EXPECT_EQ(raw.count("result_analysis"), 4);
}

// ---- schema 6: result_analysis, alerts under CHECK constraints ---------------------------------

// The quoted values of `column IN ('a', 'b', ...)` in a table's stored CREATE TABLE text.
std::vector<std::string> check_list(RawDatabase& raw, const std::string& table,
                                    const std::string& column) {
  const std::string sql =
      raw.query("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", {table});
  std::smatch list;
  // \b keeps "verdict" from matching inside "accuracy_verdict".
  if (!std::regex_search(sql, list, std::regex("\\b" + column + "\\s+IN\\s*\\(([^)]*)\\)"))) {
    ADD_FAILURE() << "no CHECK (" << column << " IN (...)) in " << sql;
    return {};
  }
  std::vector<std::string> values;
  const std::string inside = list[1].str();
  const std::regex quoted("'([^']*)'");
  for (auto it = std::sregex_iterator(inside.begin(), inside.end(), quoted);
       it != std::sregex_iterator(); ++it) {
    values.push_back((*it)[1].str());
  }
  return values;
}

std::vector<std::string> sorted(std::vector<std::string> values) {
  std::sort(values.begin(), values.end());
  return values;
}

// What alerts.state may hold: nothing, a verdict, a result status, or a finding about the run.
std::vector<std::string> alert_state_names() {
  std::vector<std::string> names = {""};
  for (const std::string& name : enum_names(verdict_name)) names.push_back(name);
  for (const std::string& name : enum_names(result_status_name)) names.push_back(name);
  names.insert(names.end(), {"missing", "fewer_cases"});
  return names;
}

TEST_F(StoreTest, CheckListsAreTheEnumerationsNames) {
  // The migration is a raw string that cannot be spelled from the C++ names, so the lists the
  // file holds are compared with them: a value added to an enumeration fails here first.
  ASSERT_NE(open_store(path("checks.sqlite")), nullptr);
  RawDatabase raw(path("checks.sqlite"));
  EXPECT_EQ(sorted(check_list(raw, "alerts", "kind")), sorted(enum_names(alert_kind_name)));
  EXPECT_EQ(sorted(check_list(raw, "alerts", "severity")), sorted(enum_names(severity_name)));
  EXPECT_EQ(sorted(check_list(raw, "alerts", "state")), sorted(alert_state_names()));
  EXPECT_EQ(sorted(check_list(raw, "result_analysis", "verdict")),
            sorted(enum_names(verdict_name)));
  EXPECT_EQ(sorted(check_list(raw, "result_analysis", "accuracy_verdict")),
            sorted(enum_names(verdict_name)));
  EXPECT_EQ(sorted(check_list(raw, "result_analysis", "scope")),
            sorted({"series", "kernel"}));
  EXPECT_EQ(sorted(check_list(raw, "results", "status")), sorted(enum_names(result_status_name)));
  EXPECT_EQ(enum_names(alert_kind_name).size(), 5u) << "the enumeration reader stops early";
  EXPECT_EQ(enum_names(verdict_name).size(), 7u) << "the enumeration reader stops early";
}

TEST_F(StoreTest, CurrentSchemaCommentListsEveryTableAndColumn) {
  // schema.cpp lists the current schema for people; it must say what a migrated file holds.
  std::ifstream source(std::string(ATTNBENCH_SOURCE_DIR) + "/harness/store/schema.cpp");
  ASSERT_TRUE(source) << "cannot read harness/store/schema.cpp";
  std::map<std::string, std::vector<std::string>> documented;
  std::string line;
  std::string table;
  std::string text;  // the current table's comment so far
  bool inside = false;
  auto finish_table = [&] {
    if (table.empty()) return;
    const size_t open = text.find('{');
    const size_t close = text.find('}', open);
    ASSERT_NE(open, std::string::npos) << table;
    ASSERT_NE(close, std::string::npos) << table;
    std::stringstream columns(text.substr(open + 1, close - open - 1));
    for (std::string column; std::getline(columns, column, ',');) {
      column.erase(0, column.find_first_not_of(" \n"));
      column.erase(column.find_last_not_of(" \n") + 1);
      documented[table].push_back(column);
    }
  };
  const std::regex table_line("^//   ([a-z_]+): (.*)$");
  while (std::getline(source, line)) {
    if (line.starts_with("// ---- the current schema")) {
      inside = true;
      continue;
    }
    if (!inside) continue;
    if (line.starts_with("// ---- end of the current schema")) break;
    std::smatch match;
    if (std::regex_match(line, match, table_line)) {
      finish_table();
      table = match[1].str();
      text = match[2].str();
    } else if (!table.empty()) {
      text += " " + line.substr(std::min<size_t>(2, line.size()));
    }
  }
  finish_table();

  // A file migrated from version 1 and a new file have the same tables and columns.
  ASSERT_TRUE(Store::create_at_version(path("old.sqlite"), 1).ok);
  for (const std::string& file : {path("old.sqlite"), path("new.sqlite")}) {
    SCOPED_TRACE(file);
    ASSERT_NE(open_store(file), nullptr);
    RawDatabase raw(file);
    std::map<std::string, std::vector<std::string>> actual;
    for (const auto& row : raw.rows("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                                    "name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")) {
      for (const auto& column : raw.rows("SELECT name FROM pragma_table_info(?)", {row[0]})) {
        actual[row[0]].push_back(column[0]);
      }
    }
    EXPECT_EQ(documented, actual);
  }
}

TEST_F(StoreTest, MigrationFromVersion5RebuildsAlertsUnderChecksAndKeepsEveryRow) {
  SCOPED_TRACE(seed_trace());
  const std::string file = path("v5.sqlite");
  ASSERT_TRUE(Store::create_at_version(file, 5).ok);

  // Alerts as attnbench 5 (or a script) wrote them: most in the sets, some not, one whose run
  // is gone (written with foreign keys off, as Python does by default).
  struct OldAlert {
    int64_t id, run_id;
    std::string series_key, kind, severity, message, details_json, created_at, state;
    std::optional<int64_t> since_run_id;
    double change;
    std::string environment, annotation;
    int64_t chip_changed;
  };
  const std::vector<std::string> kinds = enum_names(alert_kind_name);
  const std::vector<std::string> severities = enum_names(severity_name);
  const std::vector<std::string> states = alert_state_names();
  const std::array<std::string, 4> outside = {"regression", "Performance", "performance ", ""};
  auto pick_name = [&](const std::vector<std::string>& names) {
    if (std::bernoulli_distribution(0.25)(rng_)) return pick(rng_, outside) + random_text(rng_);
    return names[std::uniform_int_distribution<size_t>(0, names.size() - 1)(rng_)];
  };
  constexpr int kAlerts = 40;
  std::vector<OldAlert> old;
  {
    RawDatabase raw(file);
    for (int64_t run = 1; run <= 2; ++run) {
      raw.query(
          "INSERT INTO runs (id, uuid, started_at, status, suite, command, protocol_json, "
          "git_sha, git_dirty, build_type, build_flags, compiler, cuda_runtime, cuda_driver, "
          "cudnn, blas, host, cpu, os) VALUES (?, ?, 't', 'complete', 's', 'c', '{}', 'g', 0, "
          "'b', 'f', 'c', '', '', '', '', 'h', 'c', 'o')",
          {run, random_text(rng_) + std::to_string(run)});
    }
    for (int i = 0; i < kAlerts; ++i) {
      OldAlert alert{i + 1,
                     i == 0 ? 99 : 1 + i % 2,  // run 99 does not exist
                     random_text(rng_),
                     pick_name(kinds),
                     pick_name(severities),
                     random_text(rng_),
                     random_text(rng_),
                     "2025-12-0" + std::to_string(1 + i % 9) + "T00:00:00Z",
                     pick_name(states),
                     random_bool(rng_) ? std::nullopt : std::optional<int64_t>(1),
                     std::uniform_real_distribution<double>(-1, 1)(rng_),
                     random_text(rng_),
                     random_text(rng_),
                     int64_t{random_bool(rng_)}};
      if (i == 1) alert.kind = "bogus-kind";  // at least one of each outside its set
      if (i == 2) alert.severity = "fatal";
      if (i == 3) alert.state = "regressed";
      raw.query(
          "INSERT INTO alerts (id, run_id, series_key, kind, severity, message, details_json, "
          "created_at, state, change_fraction, environment, annotation, chip_changed) "
          "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
          {alert.id, alert.run_id, alert.series_key, alert.kind, alert.severity, alert.message,
           alert.details_json, alert.created_at, alert.state, alert.change, alert.environment,
           alert.annotation, alert.chip_changed});
      if (alert.since_run_id) {
        raw.query("UPDATE alerts SET since_run_id = ? WHERE id = ?", {*alert.since_run_id, alert.id});
      }
      old.push_back(alert);
    }
    EXPECT_EQ(raw.count("alerts"), kAlerts);
  }

  std::unique_ptr<Store> store = open_store(file);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), kSchemaVersion);  // through 6, and every step after it
  // Every row kept with its id; a value outside its set became run, info or ''.
  auto in = [](const std::vector<std::string>& names, const std::string& value) {
    return std::find(names.begin(), names.end(), value) != names.end();
  };
  std::map<int64_t, AlertRecord> loaded;
  for (int64_t run : {1, 2, 99}) {
    for (const AlertRecord& alert : value_of(store->run_alerts(run))) loaded[alert.id] = alert;
  }
  ASSERT_EQ(loaded.size(), old.size());
  for (const OldAlert& expected : old) {
    SCOPED_TRACE("alert " + std::to_string(expected.id));
    const AlertRecord& alert = loaded.at(expected.id);
    EXPECT_EQ(alert.run_id, expected.run_id);
    EXPECT_EQ(alert.series_key, expected.series_key);
    EXPECT_EQ(alert_kind_name(alert.kind), in(kinds, expected.kind) ? expected.kind : "run");
    EXPECT_EQ(severity_name(alert.severity),
              in(severities, expected.severity) ? expected.severity : "info");
    EXPECT_EQ(alert.state, in(states, expected.state) ? expected.state : "");
    EXPECT_EQ(alert.message, expected.message);
    EXPECT_EQ(alert.details_json, expected.details_json);
    EXPECT_EQ(alert.created_at, expected.created_at);
    EXPECT_EQ(alert.since_run_id, expected.since_run_id.value_or(0));
    EXPECT_EQ(alert.change, expected.change);
    EXPECT_EQ(alert.environment, expected.environment);
    EXPECT_EQ(alert.annotation, expected.annotation);
    EXPECT_EQ(alert.chip_changed, expected.chip_changed != 0);
  }
  store.reset();

  RawDatabase raw(file);
  EXPECT_EQ(raw.query("SELECT version FROM schema_version"), std::to_string(kSchemaVersion));
  EXPECT_TRUE(raw.has_object("table", "result_analysis"));
  EXPECT_TRUE(raw.has_object("index", "result_analysis_by_series"));
  EXPECT_TRUE(raw.has_object("index", "alerts_by_run"));
  EXPECT_TRUE(raw.has_object("index", "alerts_by_series"));
  EXPECT_FALSE(raw.has_object("table", "alerts_v6"));
  // The CHECKs hold from now on, against any writer.
  const std::string insert =
      "INSERT INTO alerts (run_id, series_key, kind, severity, message, state) VALUES (1, 'k', ";
  EXPECT_EQ(raw.execute(insert + "'performance', 'error', 'm', 'confirmed')"), SQLITE_OK);
  EXPECT_EQ(raw.execute(insert + "'regression', 'error', 'm', 'confirmed')"), SQLITE_CONSTRAINT);
  EXPECT_EQ(raw.execute(insert + "'performance', 'fatal', 'm', 'confirmed')"), SQLITE_CONSTRAINT);
  EXPECT_EQ(raw.execute(insert + "'performance', 'error', 'm', 'regressed')"), SQLITE_CONSTRAINT);
  EXPECT_EQ(raw.count("alerts"), kAlerts + 1);
}

TEST_F(StoreTest, StoredNameThatDoesNotParseIsAnErrorNamingIt) {
  SCOPED_TRACE(seed_trace());
  const std::string file = path("unparsed.sqlite");
  std::unique_ptr<Store> store = open_store(file);
  ASSERT_NE(store, nullptr);
  const int64_t run_id = value_of(store->begin_run(random_run_info(rng_)));
  {
    // Only a writer that switches the CHECKs off can do this.
    RawDatabase raw(file);
    ASSERT_EQ(raw.execute("PRAGMA ignore_check_constraints = ON"), SQLITE_OK);
    raw.query("INSERT INTO alerts (run_id, series_key, kind, severity, message) "
              "VALUES (?, 'k', 'Performance', 'info', 'm')",
              {run_id});
  }
  const Result<std::vector<AlertRecord>> alerts = store->run_alerts(run_id);
  EXPECT_FALSE(alerts.ok());
  const std::string& message = alerts.status().message;
  EXPECT_NE(message.find("'Performance'"), std::string::npos) << message;
  EXPECT_NE(message.find("kind"), std::string::npos) << message;
}

TEST_F(StoreTest, AnalysisRowsRoundTripEveryField) {
  SCOPED_TRACE(seed_trace());
  const std::string file = path("analysis.sqlite");
  std::unique_ptr<Store> store = open_store(file);
  ASSERT_NE(store, nullptr);
  const int64_t run_id = value_of(store->begin_run(random_run_info(rng_)));
  constexpr int kResults = 4;
  for (int i = 0; i < kResults; ++i) ASSERT_TRUE(store->add_result(run_id, random_result(rng_, 0)).ok);
  ASSERT_TRUE(store->finish_run(run_id).ok);
  const std::vector<int64_t> result_ids = load(*store, run_id).result_ids;

  // Series of parseable keys with their results, kernel-wide aggregates, a key that does not
  // parse, and series missing from the run (no result).
  std::map<std::string, AnalysisRecord> expected;  // by key, as run_analysis orders them
  for (int i = 0; i < kResults; ++i) {
    const SeriesKey key = random_series_key(rng_);
    AnalysisRecord series = random_analysis(rng_, key.text(), false, result_ids[i]);
    AnalysisRecord kernel = random_analysis(rng_, key.kernel_wide().text(), true, 0);
    AnalysisRecord missing = random_analysis(rng_, random_series_key(rng_).text(), false, 0);
    for (AnalysisRecord* row : {&series, &kernel, &missing}) expected[row->series_key] = *row;
  }
  const AnalysisRecord unparsed = random_analysis(rng_, "no bars: " + random_text(rng_), false, 0);
  expected[unparsed.series_key] = unparsed;
  std::vector<AnalysisRecord> rows;
  for (auto& [key, row] : expected) {
    rows.push_back(row);
    row.run_id = run_id;  // store_analysis files them under the run it is given
  }
  std::shuffle(rows.begin(), rows.end(), rng_);
  ASSERT_TRUE(store->store_analysis(run_id, {}, {}, rows, {}).ok);
  EXPECT_TRUE(value_of(store->unanalysed_runs()).empty());

  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(pass == 0 ? "open" : "reopened");
    const std::vector<AnalysisRecord> loaded = value_of(store->run_analysis(run_id));
    ASSERT_EQ(loaded.size(), expected.size());
    auto next = expected.begin();
    for (const AnalysisRecord& row : loaded) {
      SCOPED_TRACE(row.series_key);
      expect_same_analysis((next++)->second, row);
    }
    store.reset();
    store = open_store(file);
    ASSERT_NE(store, nullptr);
  }
  EXPECT_TRUE(value_of(store->run_analysis(run_id + 1)).empty());

  // In the file: NaN and 0 ids are NULL, the key's parts are columns, the scope is named.
  store.reset();
  RawDatabase raw(file);
  for (const auto& [key, row] : expected) {
    SCOPED_TRACE(key);
    const std::vector<std::vector<std::string>> found = raw.rows(
        "SELECT scope, kernel, shape, distribution, device_name, build, result_id IS NULL, "
        "center_s IS NULL, spread_s IS NULL, threshold IS NULL, change_fraction IS NULL, "
        "level IS NULL, rerun_change IS NULL, baseline_run_id IS NULL, "
        "history_from_run_id IS NULL, since_run_id IS NULL, verdict, accuracy_verdict, "
        "analysed_at != '' FROM result_analysis WHERE run_id = ? AND series_key = ?",
        {run_id, key});
    ASSERT_EQ(found.size(), 1u);
    const std::optional<SeriesKey> parts = parse_series_key(key);
    const SeriesKey columns = parts.value_or(SeriesKey{key, "", "", "", ""});
    auto null = [](bool is_null) { return std::string(is_null ? "1" : "0"); };
    EXPECT_EQ(found[0], (std::vector<std::string>{
                            row.kernel_wide ? "kernel" : "series", columns.kernel, columns.shape,
                            columns.distribution, columns.device, columns.build,
                            null(row.result_id == 0), null(std::isnan(row.center_s)),
                            null(std::isnan(row.spread_s)), null(std::isnan(row.threshold)),
                            null(std::isnan(row.change)), null(std::isnan(row.level)),
                            null(std::isnan(row.rerun_change)), null(row.baseline_run_id == 0),
                            null(row.history_from_run_id == 0), null(row.since_run_id == 0),
                            std::string(verdict_name(row.verdict)),
                            std::string(verdict_name(row.accuracy_verdict)), "1"}));
  }
  // One row per (run, series); a result that is not in the file is refused.
  store = open_store(file);
  ASSERT_NE(store, nullptr);
  EXPECT_FALSE(store->store_analysis(run_id, {}, {}, {rows[0], rows[0]}, {}).ok);
  AnalysisRecord dangling = rows[0];
  dangling.result_id = result_ids.back() + 1;
  EXPECT_FALSE(store->store_analysis(run_id, {}, {}, {dangling}, {}).ok);
  EXPECT_EQ(value_of(store->run_analysis(run_id)).size(), expected.size()) << "rolled back";
  // Storing the analysis again replaces the rows.
  ASSERT_TRUE(store->store_analysis(run_id, {}, {}, {rows[0]}, {}).ok);
  EXPECT_EQ(value_of(store->run_analysis(run_id)).size(), 1u);
}

TEST_F(StoreTest, KernelHistoryIsNewestFirstAndLeavesReruns) {
  SCOPED_TRACE(seed_trace());
  std::unique_ptr<Store> store = open_store(path("kernel.sqlite"));
  ASSERT_NE(store, nullptr);
  const SeriesKey series = random_series_key(rng_);
  const std::string group = series.kernel_wide().text();
  constexpr int kRuns = 7;
  std::vector<int64_t> runs;
  std::map<int64_t, AnalysisRecord> stored;  // run -> its group row
  for (int i = 0; i < kRuns; ++i) {
    RunInfo info = random_run_info(rng_);
    if (i == 3) info.rerun_of = runs.back();
    runs.push_back(value_of(store->begin_run(info)));
    if (i == 5) continue;  // a run analysed without the group (the kernel was not run)
    AnalysisRecord row = random_analysis(rng_, group, true, 0);
    row.run_id = runs.back();
    AnalysisRecord other = random_analysis(rng_, series.text(), false, 0);
    ASSERT_TRUE(store->store_analysis(runs.back(), {}, {}, {row, other}, {}).ok);
    stored[runs.back()] = row;
  }
  for (int limit : {0, 2, 10}) {
    for (int64_t before : {runs.back(), runs.back() + 1, runs[1]}) {
      SCOPED_TRACE("limit " + std::to_string(limit) + ", before " + std::to_string(before));
      std::vector<int64_t> want;
      for (auto run = runs.rbegin(); run != runs.rend(); ++run) {
        if (*run < before && *run != runs[3] && stored.count(*run)) want.push_back(*run);
      }
      if (want.size() > static_cast<size_t>(limit)) want.resize(limit);
      const std::vector<AnalysisRecord> history =
          value_of(store->kernel_history(group, before, limit));
      ASSERT_EQ(history.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) expect_same_analysis(stored.at(want[i]), history[i]);
    }
  }
  EXPECT_TRUE(value_of(store->kernel_history("none", runs.back() + 1, kRuns)).empty());
}

TEST_F(StoreTest, LaterVerdictsUpdateTheEarlierRunsAlertsAndAnalysisRows) {
  SCOPED_TRACE(seed_trace());
  std::unique_ptr<Store> store = open_store(path("later.sqlite"));
  ASSERT_NE(store, nullptr);
  std::vector<int64_t> runs;
  for (int i = 0; i < 2; ++i) {
    runs.push_back(value_of(store->begin_run(random_run_info(rng_))));
  }
  const SeriesKey series = random_series_key(rng_);
  SeriesKey sibling = series;  // another shape of the same kernel
  sibling.shape += "+";
  const std::string key = series.text();
  const std::string group = series.kernel_wide().text();

  // Run 1: suspicions of the series' time and error and of the kernel, a status change.
  auto alert = [&](const std::string& series_key, AlertKind kind, const std::string& state) {
    AlertRecord record;
    record.series_key = series_key;
    record.kind = kind;
    record.state = state;
    record.severity = Severity::warning;
    record.message = random_text(rng_);
    return record;
  };
  const std::vector<AlertRecord> alerts = {
      alert(key, AlertKind::performance, "suspected"), alert(key, AlertKind::accuracy, "suspected"),
      alert(group, AlertKind::kernel, "suspected"), alert(key, AlertKind::status, "crashed")};
  AnalysisRecord series_row = random_analysis(rng_, key, false, 0);
  series_row.verdict = series_row.accuracy_verdict = Verdict::suspected;
  series_row.reason = "";
  AnalysisRecord kernel_row = random_analysis(rng_, group, true, 0);
  kernel_row.verdict = Verdict::suspected;
  ASSERT_TRUE(store->store_analysis(runs[0], alerts, {}, {series_row, kernel_row}, {}).ok);

  // Run 2 judges them: the time was an outlier, the error confirmed, the kernel an outlier.
  const std::string performance_note = "; reverted " + random_text(rng_);
  const std::string accuracy_note = "; again " + random_text(rng_);
  const std::string kernel_note = "; reverted " + random_text(rng_);
  ASSERT_TRUE(store
                  ->store_analysis(
                      runs[1], {}, {}, {},
                      {{runs[0], key, AlertKind::performance, Verdict::outlier, performance_note},
                       {runs[0], key, AlertKind::accuracy, Verdict::confirmed, accuracy_note},
                       {runs[0], group, AlertKind::kernel, Verdict::outlier, kernel_note}})
                  .ok);
  EXPECT_TRUE(value_of(store->unanalysed_runs()).empty()) << "both runs are analysed";

  const std::vector<AlertRecord> judged = value_of(store->run_alerts(runs[0]));
  ASSERT_EQ(judged.size(), alerts.size());
  const std::array<std::pair<std::string, std::string>, 4> states_and_notes = {
      {{"outlier", performance_note}, {"confirmed", accuracy_note}, {"outlier", kernel_note},
       {"crashed", ""}}};
  for (size_t i = 0; i < judged.size(); ++i) {
    SCOPED_TRACE(alert_kind_name(alerts[i].kind));
    EXPECT_EQ(judged[i].state, states_and_notes[i].first);
    EXPECT_EQ(judged[i].message, alerts[i].message + states_and_notes[i].second);
    EXPECT_EQ(judged[i].severity, i < 3 ? Severity::info : Severity::warning);
  }
  std::vector<AnalysisRecord> rows = value_of(store->run_analysis(runs[0]));
  ASSERT_EQ(rows.size(), 2u);
  const AnalysisRecord& kernel = rows[0].kernel_wide ? rows[0] : rows[1];
  const AnalysisRecord& single = rows[0].kernel_wide ? rows[1] : rows[0];
  // Only the verdicts and reasons change. An empty reason takes the note without its
  // separator; a reason gets it appended.
  AnalysisRecord want_single = series_row;
  want_single.run_id = runs[0];
  want_single.verdict = Verdict::outlier;
  want_single.accuracy_verdict = Verdict::confirmed;
  want_single.reason = performance_note.substr(2) + accuracy_note;
  expect_same_analysis(want_single, single);
  AnalysisRecord want_kernel = kernel_row;
  want_kernel.run_id = runs[0];
  want_kernel.verdict = Verdict::outlier;
  want_kernel.reason += kernel_note;
  expect_same_analysis(want_kernel, kernel);

  // A kernel verdict named by one of its series reaches the kernel's row.
  ASSERT_TRUE(store
                  ->store_analysis(runs[1], {}, {}, {},
                                   {{runs[0], sibling.text(), AlertKind::kernel,
                                     Verdict::confirmed, ""}})
                  .ok);
  rows = value_of(store->run_analysis(runs[0]));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ((rows[0].kernel_wide ? rows[0] : rows[1]).verdict, Verdict::confirmed);
  EXPECT_EQ((rows[0].kernel_wide ? rows[1] : rows[0]).verdict, Verdict::outlier);
}

}  // namespace
}  // namespace attnbench
