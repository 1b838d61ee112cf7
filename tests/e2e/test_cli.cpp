// The attnbench binary as a user runs it: exit codes, one-line errors, the stored database,
// a run killed part-way, and measured extra memory.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "harness/cli/runner.h"
#include "harness/measure/timing.h"
#include "harness/store/store.h"
#include "reference/problem.h"
#include "tests/support/command.h"
#include "tests/support/scratch_directory.h"
#include "tests/support/stored_runs.h"

namespace attnbench {
namespace {

namespace fs = std::filesystem;

CommandResult run_command(const std::string& arguments) {
  return run_shell(std::string(ATTNBENCH_CLI) + " " + arguments);
}

class Cli : public ::testing::Test {
 protected:
  std::string db() const { return (dir_ / "results.sqlite").string(); }
  const ScratchDirectory scratch_{"attnbench_cli"};
  const fs::path dir_ = scratch_.path();
};

TEST_F(Cli, ListsKernelsSuitesAndDevices) {
  CommandResult kernels = run_command("list kernels");
  EXPECT_EQ(kernels.exit_code, 0) << kernels.output;
  for (const char* name : {"cpu.naive", "cpu.masked_outofplace", "cpu.masked_inplace",
                           "cpu.masked_fused", "cpu.flash"}) {
    EXPECT_NE(kernels.output.find(name), std::string::npos) << name;
  }
  CommandResult support = run_command("list kernels --support");
  EXPECT_EQ(support.exit_code, 0);
  EXPECT_NE(support.output.find("bf16"), std::string::npos) << support.output;
  CommandResult suites = run_command("list suites");
  EXPECT_EQ(suites.exit_code, 0);
  for (const char* name : {"smoke", "ctest", "nightly", "llm"})
    EXPECT_NE(suites.output.find(name), std::string::npos);
  CommandResult devices = run_command("list devices");
  EXPECT_EQ(devices.exit_code, 0);
  EXPECT_NE(devices.output.find("cpu"), std::string::npos);
}

TEST_F(Cli, ReportWrapsThePythonReportBuilder) {
  // A run stored by the binary, then `attnbench report` builds the HTML site from it.
  ASSERT_EQ(run_command("run --kernels cpu.flash,cpu.naive --shape b=1,hq=2,sq=33,sk=47,d=16 "
                        "--repetitions 2 --max-case-seconds 0.1 --db " + db())
                .exit_code,
            0);
  const std::string out = (dir_ / "report").string();
  CommandResult report = run_command("report --db " + db() + " --out " + out);
  EXPECT_EQ(report.exit_code, 0) << report.output;
  EXPECT_NE(report.output.find("index.html"), std::string::npos) << report.output;
  std::ifstream index(out + "/index.html");
  const std::string html((std::istreambuf_iterator<char>(index)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("cpu.flash"), std::string::npos);
  EXPECT_TRUE(fs::exists(out + "/history.html"));

  CommandResult bad = run_command("report --db " + db() + " --out " + out + " --run yesterday");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--run 'yesterday': accepted: a run id or 'latest'"),
            std::string::npos)
      << bad.output;
  CommandResult missing = run_command("report --db " + (dir_ / "none.sqlite").string() +
                                      " --out " + out);
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
}

TEST_F(Cli, BadInputIsOneClearLineAndExitCode2) {
  struct Case {
    std::string arguments;
    std::string expected;
  };
  const std::string suite_path = (dir_ / "broken.toml").string();
  std::ofstream(suite_path)
      << "name = \"broken\"\n[[matrix]]\nkernels = [\"cpu.*\"]\nseqlen = 64\nmask = \"causual\"\n";
  const std::vector<Case> cases = {
      {"run --kernels cpu.flsh --shape b=1,hq=1,sq=8,sk=8,d=16 --db " + db(),
       "accepted: cpu.naive"},
      {"run --shape b=1,hq=1,sq=8,sk=8,d=16,dtype=fp9 --db " + db(), "fp32"},
      {"run --shape b=1,hq=1,sq=8,sk=8,d=16,mask=diagonal --db " + db(), "causal_br"},
      {"run --suite " + suite_path + " --db " + db(), "broken.toml:5: field 'mask'"},
      {"run --suite smok --db " + db(), "smoke"},
      {"run --repetitions 0 --suite smoke --db " + db(), "repetitions"},
      {"list gadgets", "kernels"},
      {"frobnicate", ""},
      {"run --db " + db(), "--suite"},
      {"run --require-gpu --suite smoke --db " + db(), "GPU"},
  };
  for (const Case& c : cases) {
    CommandResult result = run_command(c.arguments);
    EXPECT_EQ(result.exit_code, 2) << c.arguments << "\n" << result.output;
    EXPECT_NE(result.output.find(c.expected), std::string::npos) << c.arguments << "\n"
                                                                 << result.output;
    EXPECT_NE(result.output.find("error"), std::string::npos) << c.arguments << "\n"
                                                              << result.output;
  }
  // ATTNBENCH_REQUIRE_GPU=1 does what --require-gpu does.
  CommandResult env =
      run_command("check --shape b=1,hq=1,sq=8,sk=8,d=16 --db " + db() + " --kernels cpu.flash");
  EXPECT_EQ(env.exit_code, 0) << env.output;
  setenv("ATTNBENCH_REQUIRE_GPU", "1", 1);
  env = run_command("check --shape b=1,hq=1,sq=8,sk=8,d=16 --db " + db() + " --kernels cpu.flash");
  unsetenv("ATTNBENCH_REQUIRE_GPU");
  EXPECT_EQ(env.exit_code, 2) << env.output;
}

TEST_F(Cli, RunStoresCheckedAndTimedResultsAndShowPrintsThem) {
  const std::string gbench_json = (dir_ / "gbench.json").string();
  CommandResult run = run_command(
      "run --shape b=1,hq=2,hkv=1,sq=113,sk=203,d=64,dtype=bf16,mask=causal_br "
      "--kernels 'cpu.*' --repetitions 3 --db " +
      db() + " --benchmark_out=" + gbench_json);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("vs best"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("ETA"), std::string::npos);

  const Result<StoredRun> stored = load_latest_run(db());
  ASSERT_TRUE(stored) << stored.status().message;
  EXPECT_EQ(stored->status, "complete");
  ASSERT_EQ(stored->results.size(), 9u);  // the five CPU kernels and the four FP8 recipes
  for (const ResultRecord& r : stored->results) {
    EXPECT_EQ(r.status, ResultStatus::passed) << r.kernel << " " << r.message;
    EXPECT_EQ(r.samples.size(), 3u);
    EXPECT_TRUE(r.timing.timed);
    EXPECT_GT(r.timing.median_s, 0);
    EXPECT_GT(r.flops_per_s, 0);
    EXPECT_GT(r.extra_memory_bytes, 0);
    EXPECT_NE(r.repro.find("--seed"), std::string::npos);
  }
  CommandResult show = run_command("show --db " + db());
  EXPECT_EQ(show.exit_code, 0) << show.output;
  EXPECT_NE(show.output.find("cpu.flash"), std::string::npos);
  EXPECT_NE(show.output.find("9 passed"), std::string::npos) << show.output;

  std::ifstream json(gbench_json);
  std::string text((std::istreambuf_iterator<char>(json)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\"benchmarks\""), std::string::npos);
  EXPECT_NE(text.find("cpu.flash/"), std::string::npos);
  EXPECT_NE(text.find("manual_time"), std::string::npos);
}

// `attnbench describe` says what `run` stores, for the Python that writes test databases: the
// canonical shape (defaults dropped), the series key on the device that ran, FLOPs and bytes.
// Compared field by field with a stored run of the same shapes, so describe cannot drift from it.
TEST_F(Cli, DescribeSaysWhatRunStores) {
  const std::vector<std::string> shapes = {
      "b=1,hq=2,hkv=1,sq=33,sk=70,d=64,dtype=bf16,out=bf16,layout=bshd,mask=causal",
      "b=2,hq=2,s=40,d=32,dtype=fp32,mask=window(8,0)"};
  std::string shape_flags;
  for (const std::string& shape : shapes) shape_flags += " --shape '" + shape + "'";
  CommandResult run =
      run_command("check" + shape_flags + " --kernels cpu.flash,cpu.naive --db " + db());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Result<StoredRun> stored = load_latest_run(db());
  ASSERT_TRUE(stored) << stored.status().message;
  ASSERT_EQ(stored->results.size(), 4u);
  const std::string device = stored->devices.at(0).name;

  CommandResult described = run_command("describe --json" + shape_flags +
                                        " --kernels 'cpu.flash,cpu.naive' --device-name '" +
                                        device + "' --device-name 'NVIDIA H200'");
  ASSERT_EQ(described.exit_code, 0) << described.output;
  const nlohmann::json json = nlohmann::json::parse(described.output);
  ASSERT_EQ(json.at("shapes").size(), shapes.size());
  ASSERT_EQ(json.at("cases").size(), 4u);  // kernels x shapes x the one distribution
  std::map<std::string, const nlohmann::json*> shape_of_input;
  for (const nlohmann::json& shape : json.at("shapes")) {
    shape_of_input[shape.at("input").get<std::string>()] = &shape;
  }
  for (const ResultRecord& r : stored->results) {
    SCOPED_TRACE(r.series_key);
    const auto same_case = [&](const nlohmann::json& c) {
      return c.at("kernel") == r.kernel && c.at("shape") == shape_string(r.problem);
    };
    const auto found = std::find_if(json.at("cases").begin(), json.at("cases").end(), same_case);
    ASSERT_NE(found, json.at("cases").end());
    EXPECT_EQ(found->at("series_keys").at(device).get<std::string>(), r.series_key);
    EXPECT_NE(found->at("series_keys").at("NVIDIA H200").get<std::string>(), r.series_key);
    EXPECT_EQ(found->at("distribution"), "normal");
    EXPECT_EQ(found->at("case_label"), shape_string(r.problem));
    const nlohmann::json& shape = *shape_of_input.at(found->at("input").get<std::string>());
    EXPECT_EQ(shape.at("shape"), shape_string(r.problem));
    EXPECT_DOUBLE_EQ(shape.at("flops").get<double>(), r.flops);
    EXPECT_DOUBLE_EQ(shape.at("bytes").get<double>(), r.bytes);
  }
  // The defaults are dropped and the key order is the canonical one, whatever the input said.
  EXPECT_EQ(json.at("shapes").at(0).at("shape"),
            "b=1,hq=2,hkv=1,sq=33,sk=70,d=64,dtype=bf16,mask=causal");

  const CommandResult bad_shape = run_command("describe --shape b=1,hq=3,hkv=2,s=8,d=64");
  EXPECT_EQ(bad_shape.exit_code, 2);
  EXPECT_NE(bad_shape.output.find("error: --shape 'b=1,hq=3,hkv=2,s=8,d=64'"), std::string::npos)
      << bad_shape.output;
  const CommandResult bad_kernel =
      run_command("describe --shape b=1,hq=2,s=8,d=64 --kernels cpu.nope");
  EXPECT_EQ(bad_kernel.exit_code, 2);
  EXPECT_NE(bad_kernel.output.find("unknown kernel 'cpu.nope'"), std::string::npos)
      << bad_kernel.output;
  const CommandResult bad_dist = run_command("describe --shape b=1,hq=2,s=8,d=64 --dist lumpy");
  EXPECT_EQ(bad_dist.exit_code, 2);
  EXPECT_NE(bad_dist.output.find("--dist 'lumpy': accepted: "), std::string::npos)
      << bad_dist.output;
}

TEST_F(Cli, DumpWritesNpyFilesAndARepro) {
  const std::string dump = (dir_ / "dump").string();
  CommandResult check =
      run_command("check --shape b=1,hq=2,sq=17,sk=33,d=16,mask=causal --kernels cpu.flash --db " +
                  db() + " --dump " + dump);
  ASSERT_EQ(check.exit_code, 0) << check.output;
  int npy = 0;
  std::string repro;
  for (const auto& entry : fs::recursive_directory_iterator(dump)) {
    if (entry.path().extension() == ".npy") ++npy;
    if (entry.path().filename() == "repro.txt") {
      std::ifstream in(entry.path());
      repro.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  EXPECT_EQ(npy, 6);  // q, k, v, out, ref, ref_rows
  EXPECT_NE(repro.find("attnbench check --shape"), std::string::npos) << repro;
}

TEST_F(Cli, KilledRunKeepsFinishedResultsAndStaysIncomplete) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string database = db();
    execl(ATTNBENCH_CLI, ATTNBENCH_CLI, "run", "--suite", "smoke", "--db", database.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until a few results are committed, then kill without warning.
  int64_t stored_results = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline && stored_results < 3) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!fs::exists(db())) continue;
    Result<std::unique_ptr<Store>> store = Store::open(db());
    if (!store) continue;
    const Result<std::vector<RunListEntry>> runs = (*store)->list_runs(1);
    if (runs && !runs->empty()) stored_results = runs->front().result_count;
  }
  ASSERT_GE(stored_results, 3) << "the run never stored 3 results";
  kill(child, SIGKILL);
  int wait_status = 0;
  waitpid(child, &wait_status, 0);
  ASSERT_TRUE(WIFSIGNALED(wait_status));

  const Result<StoredRun> run = load_latest_run(db());
  ASSERT_TRUE(run) << run.status().message;
  EXPECT_EQ(run->status, "incomplete");
  EXPECT_GE(static_cast<int64_t>(run->results.size()), stored_results);
  for (const ResultRecord& r : run->results) {
    EXPECT_FALSE(r.kernel.empty());
    if (r.status == ResultStatus::passed) {
      EXPECT_FALSE(r.samples.empty());
    }
  }
  CommandResult show = run_command("show --db " + db());
  EXPECT_EQ(show.exit_code, 0) << show.output;
  EXPECT_NE(show.output.find("incomplete"), std::string::npos) << show.output;
}

TEST_F(Cli, FlashScratchIsFlatInSeqlenWhileNaiveGrowsQuadratically) {
  // Measured by the harness's tracking allocator and stored per result.
  std::string shapes;
  for (int s : {1024, 2048, 4096, 8192}) {
    shapes += " --shape b=1,hq=1,sq=" + std::to_string(s) + ",sk=" + std::to_string(s) + ",d=32";
  }
  CommandResult check = run_command("check --kernels cpu.flash,cpu.naive --db " + db() + shapes);
  ASSERT_EQ(check.exit_code, 0) << check.output;
  const Result<StoredRun> run = load_latest_run(db());
  ASSERT_TRUE(run) << run.status().message;
  std::map<std::string, std::map<int64_t, int64_t>> memory;  // kernel -> seqlen -> bytes
  for (const ResultRecord& r : run->results) {
    ASSERT_EQ(r.status, ResultStatus::passed) << r.kernel << " " << r.message;
    memory[r.kernel][r.problem.seqlen_k] = r.extra_memory_bytes;
  }
  ASSERT_EQ(memory["cpu.flash"].size(), 4u);
  ASSERT_EQ(memory["cpu.naive"].size(), 4u);
  EXPECT_GT(memory["cpu.flash"][1024], 0);
  EXPECT_EQ(memory["cpu.flash"][1024], memory["cpu.flash"][8192]);
  // Quadratic: 8x the sequence gives ~64x the score matrix.
  const double naive_growth =
      static_cast<double>(memory["cpu.naive"][8192]) / memory["cpu.naive"][1024];
  EXPECT_GT(naive_growth, 50.0);
  EXPECT_LT(naive_growth, 70.0);
  EXPECT_GT(memory["cpu.naive"][8192], 100 * memory["cpu.flash"][8192]);
}

}  // namespace
}  // namespace attnbench

namespace attnbench {
namespace {

TEST_F(Cli, CrashesAndHangsCostOneCaseNotTheRun) {
  // Test-only kernels (listed with ATTNBENCH_TEST_KERNELS=1) segfault, abort or hang in their
  // worker; each is recorded with what happened and the run goes on with fresh workers.
  // The hang costs its case timeout twice (one per shape): 4 s, well above the other cases' time
  // (cpu.flash at these shapes runs its 0.2 s budget), so the test waits 8 s, not 20.
  setenv("ATTNBENCH_TEST_KERNELS", "1", 1);
  CommandResult run = run_command(
      "run --kernels 'test.cpu_segfault,test.cpu_abort,test.cpu_hang,cpu.flash' "
      "--shape b=1,hq=2,sq=33,sk=47,d=16 "
      "--shape b=1,hq=2,sq=65,sk=65,d=32,mask=causal --case-timeout 4 --max-case-seconds 0.2 "
      "--repetitions 2 --db " + db());
  unsetenv("ATTNBENCH_TEST_KERNELS");
  EXPECT_EQ(run.exit_code, 1) << run.output;  // failures: crashed and timed-out cases

  const Result<StoredRun> stored = load_latest_run(db());
  ASSERT_TRUE(stored) << stored.status().message;
  EXPECT_EQ(stored->status, "complete");
  ASSERT_EQ(stored->results.size(), 8u);  // 4 kernels x 2 shapes, nothing lost
  int flash_passed = 0;
  for (const ResultRecord& r : stored->results) {
    SCOPED_TRACE(r.kernel + " " + r.message);
    if (r.kernel == "cpu.flash") {
      EXPECT_EQ(r.status, ResultStatus::passed);
      EXPECT_FALSE(r.samples.empty());
      ++flash_passed;
    } else if (r.kernel == "test.cpu_segfault") {
      EXPECT_EQ(r.status, ResultStatus::crashed);
      EXPECT_NE(r.message.find("signal 11"), std::string::npos);
    } else if (r.kernel == "test.cpu_abort") {
      EXPECT_EQ(r.status, ResultStatus::crashed);
      EXPECT_NE(r.message.find("signal 6"), std::string::npos);
    } else if (r.kernel == "test.cpu_hang") {
      EXPECT_EQ(r.status, ResultStatus::timeout);
      EXPECT_NE(r.message.find("watchdog"), std::string::npos);
    } else {
      ADD_FAILURE() << "unexpected kernel";
    }
  }
  EXPECT_EQ(flash_passed, 2);  // including the shape after the crashes: a fresh worker ran it
  // Without the variable, the test kernels do not exist.
  CommandResult hidden = run_command("list kernels");
  EXPECT_EQ(hidden.output.find("test.cpu_segfault"), std::string::npos);
}


// gpu-check's budget when every never-run kernel misbehaves: with --breaker each crashing or
// hanging kernel costs one case (one watchdog at most), its other cases are recorded "not run:
// breaker" with the first failure's reproducing command, and a good kernel runs every case.
TEST_F(Cli, TheBreakerHoldsTheBudgetWhenEveryKernelMisbehaves) {
  constexpr int kShapes = 6;
  constexpr int kCaseTimeoutSeconds = 2;
  // Three misbehaving kernels each spend at most one watchdog and a worker restart; the
  // sleeping kernel's six cases are capped at 0.2 s each. Without the breaker the hang alone
  // would spend six watchdogs (12 s).
  constexpr double kBudgetSeconds = 3 * (kCaseTimeoutSeconds + 1.0) + kShapes * 0.5 + 3.0;
  std::string shapes;
  for (int i = 0; i < kShapes; ++i)
    shapes += " --shape b=1,hq=2,sq=" + std::to_string(17 + 8 * i) + ",sk=33,d=16";
  setenv("ATTNBENCH_TEST_KERNELS", "1", 1);
  const auto start = std::chrono::steady_clock::now();
  CommandResult run = run_command(
      "run --breaker --kernels 'test.cpu_hang,test.cpu_segfault,test.cpu_abort,test.cpu_flash_sleeps'" +
      shapes + " --case-timeout " + std::to_string(kCaseTimeoutSeconds) +
      " --max-case-seconds 0.2 --repetitions 3 --db " + db());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  unsetenv("ATTNBENCH_TEST_KERNELS");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_LT(seconds, kBudgetSeconds) << run.output;

  const Result<StoredRun> stored = load_latest_run(db());
  ASSERT_TRUE(stored) << stored.status().message;
  ASSERT_EQ(stored->results.size(), 4u * kShapes);  // every case recorded, none dropped
  std::map<std::string, std::map<std::string, int>> outcomes;  // kernel -> outcome -> count
  for (const ResultRecord& r : stored->results) {
    SCOPED_TRACE(r.kernel + " " + r.message);
    const bool breaker = r.message.rfind("not run: breaker: ", 0) == 0;
    ++outcomes[r.kernel][breaker ? "breaker" : std::string(result_status_name(r.status))];
    if (breaker) {
      EXPECT_EQ(r.status, ResultStatus::skipped);
      EXPECT_NE(r.message.find(r.kernel), std::string::npos);
      EXPECT_NE(r.message.find("reproduce: attnbench check --shape"), std::string::npos);
    }
  }
  for (const char* kernel : {"test.cpu_segfault", "test.cpu_abort"}) {
    EXPECT_EQ(outcomes[kernel]["crashed"], 1) << kernel;
    EXPECT_EQ(outcomes[kernel]["breaker"], kShapes - 1) << kernel;
  }
  EXPECT_EQ(outcomes["test.cpu_hang"]["timeout"], 1);
  EXPECT_EQ(outcomes["test.cpu_hang"]["breaker"], kShapes - 1);
  EXPECT_EQ(outcomes["test.cpu_flash_sleeps"]["passed"], kShapes);
}


// The stored protocol names the timer each device really used (the executor's own name, as its
// worker reported it), parses as JSON, and records the repetition rule.
TEST_F(Cli, TheStoredProtocolNamesTheExecutorsTimer) {
  CommandResult run = run_command("run --kernels cpu.flash --shape b=1,hq=2,s=33,d=16 --devices cpu "
                                  "--max-case-seconds 0.1 --repetitions 5 --db " + db());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const Result<StoredRun> stored = load_latest_run(db());
  ASSERT_TRUE(stored) << stored.status().message;
  const nlohmann::json protocol = nlohmann::json::parse(stored->info.protocol_json);
  EXPECT_EQ(protocol.at("timers").at("cpu").get<std::string>(), "host steady_clock around one forward");
  EXPECT_EQ(protocol.at("repetitions").get<int>(), 5);
  EXPECT_EQ(protocol.at("min_stable_repetitions").get<int>(), 5);
  ASSERT_EQ(stored->results.size(), 1u);
  const TimingSummary& timing = stored->results[0].timing;
  EXPECT_GT(timing.forwards_timed, 0);
  EXPECT_TRUE(timing.stop.has_value());
  EXPECT_GT(timing.wall_s, 0);
  // The case's wall-clock budget holds, give or take one repetition, unless the minimum number
  // of repetitions alone outran it (a busy host: CI runs two tests at once on two cores).
  if (timing.repetitions > kMinRepetitions) {
    EXPECT_LE(timing.wall_s, 0.1 + timing.wall_s / timing.repetitions + 0.05);
  } else {
    EXPECT_EQ(timing.repetitions, kMinRepetitions) << "the budget never stops before the minimum";
  }
}

// Issue 41: on the CPU the kernels of one problem are timed together (round-robin), which the
// protocol records; --no-interleave times each alone. Either way every case is measured.
TEST_F(Cli, TheProtocolSaysWhetherTheCpuCasesWereInterleaved) {
  for (const bool interleave : {true, false}) {
    SCOPED_TRACE(interleave ? "interleaved" : "--no-interleave");
    CommandResult run = run_command(
        std::string("run --kernels cpu.naive,cpu.flash,cpu.masked_fused") +
        " --shape b=1,hq=2,s=33,d=16 --shape b=1,hq=2,s=20,d=16 --devices cpu "
        "--max-case-seconds 0.05 --repetitions 3 --db " + db() +
        (interleave ? "" : " --no-interleave"));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const Result<StoredRun> stored = load_latest_run(db());
    ASSERT_TRUE(stored) << stored.status().message;
    const nlohmann::json protocol = nlohmann::json::parse(stored->info.protocol_json);
    EXPECT_EQ(protocol.at("interleaved").get<bool>(), interleave);
    EXPECT_FALSE(protocol.at("interleaved_gpus").get<bool>()) << "GPUs interleave when asked";
    ASSERT_EQ(stored->results.size(), 6u);
    for (const ResultRecord& r : stored->results) {
      EXPECT_EQ(r.status, ResultStatus::passed) << r.kernel << " " << r.message;
      EXPECT_GE(r.samples.size(), 1u) << r.kernel;
    }
  }
}

// Where a run times a problem's kernels round-robin: the CPU by default, a GPU when the flag or
// the suite asks, never the emulated device (it times nothing), never a check, never under
// --no-interleave.
TEST(Interleaving, TheCpuByDefaultGpusWhenAskedNeverWhenOnlyChecking) {
  RunOptions options;
  Suite suite;
  EXPECT_TRUE(interleaves_on(Backend::cpu, options, suite));
  EXPECT_FALSE(interleaves_on(Backend::cuda, options, suite));
  EXPECT_FALSE(interleaves_on(Backend::emu, options, suite));
  options.interleave_gpus = true;
  EXPECT_TRUE(interleaves_on(Backend::cuda, options, suite));
  EXPECT_FALSE(interleaves_on(Backend::emu, options, suite));
  options.interleave_gpus = false;
  suite.interleave_gpus = true;
  EXPECT_TRUE(interleaves_on(Backend::cuda, options, suite));
  options.check_only = true;
  EXPECT_FALSE(interleaves_on(Backend::cuda, options, suite));
  EXPECT_FALSE(interleaves_on(Backend::cpu, options, suite));
  options.check_only = false;
  options.interleave = false;  // --no-interleave wins over the suite
  EXPECT_FALSE(interleaves_on(Backend::cuda, options, suite));
  EXPECT_FALSE(interleaves_on(Backend::cpu, options, suite));
}

TEST_F(Cli, NoInterleaveAndInterleaveGpusTogetherAreRefused) {
  const CommandResult run = run_command("run --kernels cpu.naive --shape b=1,hq=1,s=8,d=16 "
                                        "--no-interleave --interleave-gpus --db " + db());
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("--no-interleave and --interleave-gpus: accepted: one of them"),
            std::string::npos)
      << run.output;
}

// `plan`'s table keeps its columns in line when a name is longer than the usual width (a
// variant's, cuda.flash3[stages=2,block_n=176]): every row's figures start at one column.
TEST_F(Cli, PlanKeepsItsColumnsInLineForLongVariantNames) {
  const CommandResult plan =
      run_command("plan --shape b=1,hq=2,s=256,d=128,dtype=bf16 --kernels 'cuda.flash3,"
                  "cuda.flash3[*]' --device-model h200");
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  std::istringstream lines(plan.output);
  std::set<size_t> figure_columns;
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find(" us/step");
    if (at == std::string::npos) continue;
    ++rows;
    figure_columns.insert(at);
  }
  EXPECT_EQ(rows, 7) << plan.output;  // cuda.flash3 and its six variants
  EXPECT_EQ(figure_columns.size(), 1u) << plan.output;
}

}  // namespace
}  // namespace attnbench
