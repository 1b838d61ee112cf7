// The database commands: what `attnbench regressions`, `rerun`, `annotate`, `compare`, `export`,
// `history` and `merge` do (one file each, harness/cli/<name>_command.cpp), as library functions
// that print to the streams they are given and return the exit code (DESIGN: 0 clean, 1 failures or
// confirmed regressions, 2 usage or infrastructure error, or nothing measured).
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "harness/analysis/run_analysis.h"
#include "harness/store/store.h"

namespace attnbench {

struct RegressionOptions {
  DetectorOptions detector;
  bool fail_on_suspected = false;  // --fail-on suspected (default: confirmed)
  std::string junit_path;
  std::string summary_md_path;
};

// The exit code of an analysed run: its triage's gate (decided under --fail-on by the analysis).
int regression_exit_code(const RegressionReport& report);
void print_regression_report(const RegressionReport& report, std::ostream& out);
std::string regression_summary_markdown(const RegressionReport& report);
std::string regression_junit_xml(const RegressionReport& report, const RegressionOptions& options);

// `run_text`: an id, "latest" (the newest run that is not a rerun), "unanalysed" (every such
// run never analysed, oldest first) or ids separated by commas.
int regressions_command(const std::string& db_path, const std::string& run_text,
                        const RegressionOptions& options, std::ostream& out, std::ostream& err);

struct RerunOptions {
  std::string run_text = "latest";
  int controls = 12;  // unsuspected cases re-measured too, to measure the rerun's level
  std::vector<std::string> worker_command;  // for tests; default: this executable
  std::string command_line;
};
int rerun_command(const std::string& db_path, const RerunOptions& rerun,
                  const RegressionOptions& options, std::ostream& out, std::ostream& err);

struct AnnotateOptions {
  std::vector<std::string> series;  // exact keys
  std::string kernel_glob;
  std::string shape_glob;  // matched against the shape field of the key (default "*")
  std::string kind;        // expected_change, baseline_reset, ignore
  std::string reason;
  std::string run_text;  // the first run it governs: an id or "latest"; default: each
                         // series' newest run
};
int annotate_command(const std::string& db_path, const AnnotateOptions& options,
                     std::ostream& out, std::ostream& err);

int compare_command(const std::string& db_path, const std::string& run_a, const std::string& run_b,
                    const DetectorOptions& options, std::ostream& out, std::ostream& err);

// format: gbench-json (Google Benchmark's JSON, accepted by its tools/compare.py) or csv.
int export_command(const std::string& db_path, const std::string& run_text,
                   const std::string& format, const std::string& output, std::ostream& out,
                   std::ostream& err);

struct HistoryOptions {
  std::vector<std::string> series;
  std::string kernel_glob;
  std::string shape_glob;
  int max_series = 20;
};
int history_command(const std::string& db_path, const HistoryOptions& options, std::ostream& out,
                    std::ostream& err);

int merge_command(const std::vector<std::string>& sources, const std::string& into,
                  std::ostream& out, std::ostream& err);

}  // namespace attnbench
