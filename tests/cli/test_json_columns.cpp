// The store's JSON columns (runs.protocol_json, devices.extra_json, results.details_json) parse
// whatever a device or a library calls itself: a run on a CPU device named with quotes, a
// backslash and control characters goes through run_cases into SQLite and is read back with SQL;
// what a kernel reports (a cuDNN engine name) is stored as a JSON object whatever it is.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/cli/runner.h"
#include "harness/measure/devices.h"
#include "tests/support/scratch_directory.h"

namespace attnbench {
namespace {

using json = nlohmann::json;

const std::string kDeviceName = "H200 \"SXM\" \\ \x01\t caf\xc3\xa9";
const std::string kEngineName = "eng0 \"k=\\\"sm90\\\"\" \\ \x01\x1f\t\n";

// Every row of one column, as text.
std::vector<std::string> column(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::vector<std::string> values;
  EXPECT_EQ(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* statement = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  while (statement != nullptr && sqlite3_step(statement) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(statement, 0));
    values.emplace_back(text ? std::string(text, static_cast<size_t>(sqlite3_column_bytes(statement, 0)))
                             : std::string("<NULL>"));
  }
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return values;
}

json parse_or_fail(const std::string& text, const std::string& what) {
  const json parsed = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(parsed.is_discarded()) << what << " is not JSON: " << text;
  EXPECT_TRUE(parsed.is_object()) << what << " is not a JSON object: " << text;
  return parsed;
}

TEST(JsonColumns, AHostileDeviceNameLeavesEveryJsonColumnParseable) {
  const ScratchDirectory dir("attnbench_json_columns");
  Device device = discover_devices().front();  // the CPU, always first
  ASSERT_EQ(device.backend, Backend::cpu);
  device.info.name = kDeviceName;
  // What a hand-made extra_json with that name in it looks like: not JSON.
  device.info.extra_json = "{\"nvml\": \"" + kDeviceName + "\"}";

  RunOptions options;
  options.shapes = {"b=1,hq=2,s=17,d=16"};
  options.kernel_globs = {"cpu.flash"};
  options.devices = "cpu";
  options.repetitions = 1;
  options.max_case_seconds = 0.05;
  options.seed = 7;
  options.db_path = dir.file("results.sqlite");
  options.command_line = "attnbench run --devices " + kDeviceName;
  options.isolate = false;  // in this process: no attnbench binary needed
  std::ostringstream out, err;
  ASSERT_EQ(run_cases(options, {device}, out, err), kExitClean) << err.str() << out.str();

  const std::string db = options.db_path;
  const std::vector<std::string> protocols = column(db, "SELECT protocol_json FROM runs");
  ASSERT_EQ(protocols.size(), 1u);
  const json protocol = parse_or_fail(protocols[0], "runs.protocol_json");
  EXPECT_EQ(protocol.at("timers").at("cpu").get<std::string>(), "host steady_clock around one forward");
  EXPECT_EQ(protocol.at("seed").get<uint64_t>(), 7u);
  EXPECT_EQ(protocol.at("cases").get<int>(), 1);

  const std::vector<std::string> extras = column(db, "SELECT extra_json FROM devices");
  ASSERT_EQ(extras.size(), 1u);
  EXPECT_EQ(parse_or_fail(extras[0], "devices.extra_json").at("unparsed"), device.info.extra_json);
  const std::vector<std::string> details = column(db, "SELECT details_json FROM results");
  ASSERT_EQ(details.size(), 1u);
  for (const std::string& text : details) parse_or_fail(text, "results.details_json");

  // The name itself is stored as it is, byte for byte, wherever it goes.
  EXPECT_EQ(column(db, "SELECT name FROM devices"), std::vector<std::string>{kDeviceName});
  EXPECT_EQ(column(db, "SELECT DISTINCT device_name FROM results"), std::vector<std::string>{kDeviceName});
  EXPECT_EQ(column(db, "SELECT command FROM runs"), std::vector<std::string>{options.command_line});
}

TEST(JsonColumns, WhatAKernelReportsIsStoredAsAJsonObject) {
  // A cuDNN-like plan's details, built with nlohmann as cudnn_sdpa.cpp builds them.
  const std::string reported = json{{"engine", kEngineName}, {"amax_s", 1.5}, {"amax_o", nullptr}}.dump();
  const json stored = parse_or_fail(json_object_column(reported), "details");
  EXPECT_EQ(stored.at("engine").get<std::string>(), kEngineName);
  EXPECT_EQ(stored.at("amax_s").get<double>(), 1.5);
  EXPECT_TRUE(stored.at("amax_o").is_null());

  // What the old hand-made escaping wrote for that name (control characters passed through):
  // not JSON, so it is kept as text inside an object.
  std::string hand_made = "{\"engine\":\"";
  for (char c : kEngineName) {
    if (c == '"' || c == '\\') hand_made += '\\';
    hand_made += c;
  }
  hand_made += "\"}";
  ASSERT_TRUE(json::parse(hand_made, nullptr, false).is_discarded()) << "the old helper's output parsed";
  EXPECT_EQ(parse_or_fail(json_object_column(hand_made), "unparsed").at("unparsed").get<std::string>(),
            hand_made);

  // Nothing reported, or not an object, or not UTF-8: still an object.
  EXPECT_EQ(json_object_column(""), "{}");
  EXPECT_EQ(parse_or_fail(json_object_column("[1, 2]"), "array").at("unparsed"), "[1, 2]");
  EXPECT_EQ(parse_or_fail(json_object_column("\"text\""), "string").at("unparsed"), "\"text\"");
  parse_or_fail(json_object_column("engine \xff\xfe"), "invalid UTF-8");
  parse_or_fail(json_object_column("{\"engine\": \"\xff\"}"), "invalid UTF-8 inside JSON");
}

}  // namespace
}  // namespace attnbench
