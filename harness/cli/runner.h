// One run, start to finish: suite -> cases (kernel x problem x device) -> support check ->
// seeded inputs -> run -> check against the reference -> time -> result -> SQLite (one
// transaction per result) -> summary table -> exit code.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "harness/core/records.h"
#include "harness/measure/devices.h"
#include "harness/suite/suite.h"
#include "kernels/kernel.h"

namespace attnbench {

// Exit codes of DESIGN.
constexpr int kExitClean = 0;
constexpr int kExitFailures = 1;  // failed checks (later: confirmed regressions)
constexpr int kExitUsage = 2;     // usage or infrastructure error, or nothing was measured

constexpr double kDefaultMaxCaseSeconds = 2.0;
constexpr int kDefaultRepetitions = 10;
constexpr const char* kDefaultDatabase = "results/attnbench.sqlite";
constexpr int kDefaultCaseTimeoutSeconds = 60;

struct RunOptions {
  std::string suite;                      // name or path; may be empty when shapes are given
  std::vector<std::string> shapes;        // --shape, ad-hoc problems
  std::vector<std::string> kernel_globs;  // --kernels; empty = the suite's (all for --shape)
  std::vector<std::string> plugins;       // --plugin: shared libraries of kernels
  std::string filter;                     // --filter / --benchmark_filter, regex on case names
  std::string devices = "all";
  std::string distribution;     // --dist for --shape problems (default normal)
  std::string pass;             // --pass fwd|bwd|fwd_bwd|all; empty: each entry's own (fwd)
  int repetitions = 0;          // 0 = the suite's, else kDefaultRepetitions
  double max_case_seconds = 0;  // 0 = the suite's, else kDefaultMaxCaseSeconds
  std::string dump_dir;         // --dump: write every case's tensors here
  bool check_only = false;      // `attnbench check`
  bool require_gpu = false;
  std::optional<uint64_t> seed;  // run seed; random when absent (stored)
  std::string db_path = kDefaultDatabase;
  std::string command_line;
  std::string gbench_out;           // --benchmark_out
  bool gbench_json_stdout = false;  // --benchmark_format=json
  bool interactive = false;         // progress line rewritten in place (a terminal)
  bool measure_energy = false;      // --energy (also a suite's `energy = true`)
  // Process isolation: cases run in `attnbench __worker` processes started with this command
  // (default: this executable); --no-isolation runs them in this process (for debuggers).
  bool isolate = true;
  std::vector<std::string> worker_command;
  // On a device timed by the host's clock (the CPU), the kernels of one problem are timed
  // together, round-robin (CaseRunner::run_group), so the host's drift reaches them alike;
  // --no-interleave times each case's repetitions back to back. GPUs time each case alone unless
  // asked (--interleave-gpus, or a suite's `interleave_gpus = true`): their timer is the device's,
  // but a chip at its power cap drifts its clock from case to case, and kernels compared within a
  // few percent need that drift to reach them alike; the group's plans hold memory together.
  bool interleave = true;
  bool interleave_gpus = false;
  int case_timeout_seconds = kDefaultCaseTimeoutSeconds;  // the watchdog
  // --breaker: after a kernel's first crash or timeout its remaining cases are not run
  // (recorded skipped, "not run: breaker", with the first failure and its reproducing command),
  // so a kernel that has never run on this device costs one watchdog, not one per case.
  bool breaker = false;
  // --shard i/n: this runner's share of the suite, split deterministically by shape so that n
  // runners together measure every case once.
  std::string shard;
  std::string junit_path;       // --junit: JUnit XML, one test case per kernel x shape
  std::string summary_md_path;  // --summary-md: a Markdown summary
  int64_t rerun_of = 0;         // `attnbench rerun`: the run whose suspects are re-measured
  // Exact cases "kernel|shape|distribution" (`attnbench rerun`), besides suite and shapes.
  std::vector<std::string> cases;
};

// The --breaker rule, one place: a kernel's first crash or timeout opens its breaker, and every
// later case of that kernel is recorded skipped with the reason open_reason gives.
constexpr const char* kBreakerPrefix = "not run: breaker: ";
class Breaker {
 public:
  void record(const std::string& case_label, const ResultRecord& result);
  std::optional<std::string> open_reason(const std::string& kernel) const;

 private:
  static constexpr size_t kBreakerMessageChars = 200;  // the first line or two of the failure
  std::map<std::string, std::string> first_failure_;   // kernel -> the reason its cases skip
};

// What a run uses: the flag's value when given (> 0), else the suite's, else the default.
int resolve_repetitions(int asked, const Suite& suite);
double resolve_max_case_seconds(double asked, const Suite& suite);
// Whether a run times a problem's kernels round-robin on a device of this backend: never when it
// only checks or under --no-interleave; on the CPU by default; on a GPU when asked
// (--interleave-gpus or the suite's interleave_gpus). The emulated device times nothing.
bool interleaves_on(Backend backend, const RunOptions& options, const Suite& suite);

// A JSON column as the run stores it (results.details_json from Plan::details, devices.extra_json
// from device discovery): the text when it is a JSON object, "{}" when it is empty, else
// {"unparsed": the text}, so the column always parses whoever produced it.
std::string json_object_column(const std::string& reported);
// A result's details (a JSON object column) with "origin" added for a kernel from outside the
// build (plugin or Python file and version), so each stored result says where its kernel came from.
std::string with_origin(const std::string& details_json, const Kernel& kernel);
// What a kernel declares a forward should cost (Kernel::expected_resources) as stored and printed:
// {"extra_memory_bytes": N, "launches": M}, the declared parts only; empty when nothing is.
nlohmann::json expectation_json(const ResourceExpectation& expected);
// A result's details (a JSON object column) with "expected": the kernel's expectation of the
// problem beside what was measured, for every case that ran (a skipped one measured nothing), so
// a reader (gpu-check's claims) compares the two without a formula of its own.
std::string with_expectation(const std::string& details_json, const Kernel& kernel,
                             const Problem& problem);

// Runs and stores; returns the exit code. Progress and errors go to `err`, tables to `out`.
int run_cases(const RunOptions& options, std::ostream& out, std::ostream& err);
// The same on the devices `found` instead of the ones discovered (tests bring their own).
int run_cases(const RunOptions& options, const std::vector<Device>& found, std::ostream& out,
              std::ostream& err);

}  // namespace attnbench
