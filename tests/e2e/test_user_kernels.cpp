// Users' own kernels as a user brings them: an out-of-tree plugin library (examples/cpu_plugin,
// built by this project's CMake as the user's would build it) and Python kernels
// (examples/python, e2e/python_kernels), checked by the same checker in the same run as the
// built-in kernels; broken ones fail alone with a one-line reason; the shipped PyTorch peers
// are listed, loaded where PyTorch is installed, skipped with the reason where it is not.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/command.h"
#include "tests/support/scratch_directory.h"
#include "harness/cli/runner.h"
#include "harness/store/store.h"
#include "tests/support/stored_runs.h"

namespace attnbench {
namespace {

namespace fs = std::filesystem;

const std::string kPythonPath = std::string("PYTHONPATH=") + ATTNBENCH_SOURCE_DIR +
                                "/examples/python:" + ATTNBENCH_SOURCE_DIR + "/tests/e2e/python_kernels ";

CommandResult attnbench(const std::string& arguments) {
  return run_shell(kPythonPath + ATTNBENCH_CLI + " " + arguments);
}

bool torch_installed() { return run_shell("python3 -c 'import torch'").exit_code == 0; }

bool python_kernels_built() {
  return fs::exists(fs::path(ATTNBENCH_CLI).parent_path() / "libattnbench_python.so");
}

int lines_of(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// Results of the newest run, per kernel.
std::map<std::string, std::vector<ResultRecord>> results_by_kernel(const std::string& db) {
  std::map<std::string, std::vector<ResultRecord>> by_kernel;
  Result<StoredRun> run = load_latest_run(db);
  EXPECT_TRUE(run) << run.status().message;
  if (!run) return by_kernel;
  for (const ResultRecord& r : run->results) by_kernel[r.kernel].push_back(r);
  return by_kernel;
}

class UserKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!python_kernels_built()) GTEST_SKIP() << "no Python bridge in this build (no Python 3 development files)";
  }
  std::string db(const std::string& name = "results.sqlite") const {
    return (scratch_.path() / name).string();
  }
  const ScratchDirectory scratch_{"attnbench_user_kernels"};
};

// Must show: a plugin and a numpy kernel pass the ctest suite inside their tables, beside a
// built-in kernel, in one run, forward and backward (ABI 3's backward, a Python .backward); each
// result says where its kernel came from.
TEST_F(UserKernels, APluginAndANumpyKernelPassTheCtestSuiteBesideTheBuiltIns) {
  const CommandResult checked = attnbench(
      std::string("check --suite ctest --devices cpu --plugin ") + EXAMPLE_PLUGIN +
      " --kernels example.online_cpu,py:numpy_attention:attention,cpu.naive --db " + db());
  ASSERT_EQ(checked.exit_code, 0) << checked.output;
  const auto by_kernel = results_by_kernel(db());
  for (const char* kernel : {"example.online_cpu", "py:numpy_attention:attention", "cpu.naive"}) {
    SCOPED_TRACE(kernel);
    ASSERT_TRUE(by_kernel.count(kernel)) << checked.output;
    int passed = 0, backward_passed = 0;
    for (const ResultRecord& r : by_kernel.at(kernel)) {
      if (r.status == ResultStatus::skipped) {
        EXPECT_FALSE(r.message.empty());  // outside the table, with the reason
        continue;
      }
      EXPECT_EQ(r.status, ResultStatus::passed) << shape_string(r.problem) << " " << r.message;
      EXPECT_TRUE(r.check.checked);
      EXPECT_LE(r.check.max_abs_error, r.check.bound);
      ++passed;
      backward_passed += r.problem.has_backward() ? 1 : 0;
    }
    EXPECT_GE(passed, 5);
    EXPECT_GE(backward_passed, 5);
  }
  const nlohmann::json plugin = nlohmann::json::parse(by_kernel.at("example.online_cpu").front().details_json);
  EXPECT_NE(plugin.value("origin", "").find("version example-1.0"), std::string::npos) << plugin.dump();
  const ResultRecord& numpy_result = by_kernel.at("py:numpy_attention:attention").front();
  const nlohmann::json numpy_details = nlohmann::json::parse(numpy_result.details_json);
  EXPECT_NE(numpy_details.value("origin", "").find("numpy_attention.py:attention, sha256 "), std::string::npos)
      << numpy_details.dump();
  EXPECT_NE(numpy_details.value("origin", "").find("version 1.0"), std::string::npos);
  // numpy's allocations bypass the tracking allocator: not measured, and said so.
  EXPECT_EQ(numpy_result.extra_memory_bytes, -1);
  EXPECT_NE(numpy_details.dump().find("not measured"), std::string::npos);
  // The plugin's scratch comes from attnbench's allocator: measured (one row of scores).
  for (const ResultRecord& r : by_kernel.at("example.online_cpu")) {
    if (r.status == ResultStatus::passed) {
      EXPECT_GE(r.extra_memory_bytes, 4 * r.problem.seqlen_k);
    }
  }
}

// Suite files name Python kernels as --kernels does.
TEST_F(UserKernels, ASuiteFileNamesAPythonKernel) {
  const fs::path suite = scratch_.path() / "mine.toml";
  std::ofstream(suite) << "name = \"mine\"\n"
                          "description = \"a user's suite\"\n"
                          "[[matrix]]\n"
                          "kernels = [\"py:numpy_attention:attention\", \"cpu.flash\"]\n"
                          "batch = 2\nheads_q = 4\nheads_kv = 2\nseqlen = 48\nhead_dim = 32\n"
                          "dtype = [\"fp32\", \"fp16\"]\nmask = [\"none\", \"causal\"]\n";
  const CommandResult ran = attnbench("run --devices cpu --repetitions 3 --suite " + suite.string() +
                                      " --db " + db());
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  const auto by_kernel = results_by_kernel(db());
  ASSERT_EQ(by_kernel.at("py:numpy_attention:attention").size(), 4u) << ran.output;
  for (const ResultRecord& r : by_kernel.at("py:numpy_attention:attention")) {
    EXPECT_EQ(r.status, ResultStatus::passed) << r.message;
    EXPECT_GT(r.timing.median_s, 0.0);  // timed by the same protocol
    EXPECT_GE(r.samples.size(), 1u);
    EXPECT_LE(r.samples.size(), 3u);
  }
  EXPECT_EQ(by_kernel.at("cpu.flash").size(), 4u);
}

TEST_F(UserKernels, APluginOfAnotherAbiVersionIsAOneLineError) {
  const CommandResult checked = attnbench(std::string("check --suite ctest --devices cpu --plugin ") +
                                          EXAMPLE_WRONG_ABI_PLUGIN + " --db " + db());
  EXPECT_EQ(checked.exit_code, 2) << checked.output;
  EXPECT_EQ(lines_of(checked.output), 1) << checked.output;
  EXPECT_NE(checked.output.find("plugin ABI version 999, this attnbench accepts 1"), std::string::npos)
      << checked.output;
  EXPECT_FALSE(fs::exists(db()));  // nothing stored for a run that never started
  const CommandResult missing = attnbench("check --suite ctest --plugin /no/such/lib.so --db " + db());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(lines_of(missing.output), 1) << missing.output;
  EXPECT_NE(missing.output.find("--plugin /no/such/lib.so: no such file"), std::string::npos) << missing.output;
}

// An older plugin (ABI 2) still loads: its forward runs, its backward cases are skipped with the
// reason, as any problem outside a kernel's table.
TEST_F(UserKernels, APluginOfAnOlderAbiRunsForwardOnly) {
  const CommandResult checked =
      attnbench(std::string("check --devices cpu --plugin ") + EXAMPLE_ABI2_PLUGIN +
                " --kernels example.online_cpu --shape b=1,hq=2,s=17,d=8 --pass all --db " + db());
  ASSERT_EQ(checked.exit_code, 0) << checked.output;
  const auto results = results_by_kernel(db()).at("example.online_cpu");
  ASSERT_EQ(results.size(), 3u);
  for (const ResultRecord& r : results) {
    SCOPED_TRACE(shape_string(r.problem));
    if (r.problem.pass == Pass::fwd) {
      expect_passed(r, true);
    } else {
      EXPECT_EQ(r.status, ResultStatus::skipped);
      EXPECT_NE(r.message.find("the kernel has no backward"), std::string::npos) << r.message;
    }
  }
}

// Must show: a kernel that raises and one that returns the wrong shape fail their cases with the
// traceback's last line; the built-in kernel's results in the same run stand.
TEST_F(UserKernels, BrokenPythonKernelsFailAloneWithTheTracebacksLastLine) {
  const CommandResult checked = attnbench(
      "check --devices cpu --shape b=2,hq=4,hkv=2,s=33,d=16 --shape b=1,hq=2,s=17,d=8,mask=causal "
      "--kernels py:attnbench_test_kernels:raises,py:attnbench_test_kernels:wrong_shape,cpu.naive "
      "--db " + db());
  EXPECT_EQ(checked.exit_code, 1) << checked.output;  // failures, not an infrastructure error
  const auto by_kernel = results_by_kernel(db());
  ASSERT_EQ(by_kernel.at("py:attnbench_test_kernels:raises").size(), 2u) << checked.output;
  for (const ResultRecord& r : by_kernel.at("py:attnbench_test_kernels:raises")) {
    EXPECT_NE(r.status, ResultStatus::passed);
    EXPECT_NE(r.message.find("ValueError: planted failure (attnbench_test_kernels.py:"), std::string::npos)
        << r.message;
    EXPECT_NE(r.message.find(" in raises)"), std::string::npos) << r.message;
  }
  for (const ResultRecord& r : by_kernel.at("py:attnbench_test_kernels:wrong_shape")) {
    EXPECT_NE(r.status, ResultStatus::passed);
    EXPECT_NE(r.message.find("returned an output of shape ("), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("(batch, seqlen_q, heads_q, head_dim_v)"), std::string::npos) << r.message;
  }
  ASSERT_EQ(by_kernel.at("cpu.naive").size(), 2u);
  for (const ResultRecord& r : by_kernel.at("cpu.naive")) expect_passed(r, true);
}

TEST_F(UserKernels, APythonKernelThatCannotBeLoadedIsAOneLineError) {
  const std::map<std::string, std::string> expected = {
      {"py:attnbench_test_kernels:no_table", "no_table declares no support table"},
      {"py:attnbench_test_kernels:bad_table", "masks: unknown 'diagonal'; accepted: none, causal"},
      {"py:attnbench_test_kernels:missing", "has no function missing"},
      {"py:no_such_module:f", "import no_such_module: ModuleNotFoundError"},
      {"py:numpy_attention", "is not module:function"},
  };
  for (const auto& [kernel, message] : expected) {
    SCOPED_TRACE(kernel);
    const CommandResult checked =
        attnbench("check --devices cpu --shape b=1,hq=1,s=8,d=8 --kernels " + kernel + " --db " + db());
    EXPECT_EQ(checked.exit_code, 2) << checked.output;
    EXPECT_EQ(lines_of(checked.output), 1) << checked.output;
    EXPECT_NE(checked.output.find(message), std::string::npos) << checked.output;
  }
}

// The shipped PyTorch peers: loaded only when named, listed with the reason where PyTorch is
// absent, and their cases skipped with it (the rest of the run measured).
TEST_F(UserKernels, TorchPeersAreListedAndSkippedWithTheReasonWithoutPyTorch) {
  const CommandResult listed = attnbench("list kernels");
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  for (const char* name : {"torch.sdpa_flash", "torch.sdpa_cudnn", "torch.sdpa_efficient",
                           "torch.sdpa_math", "torch.naive_outofplace", "torch.naive_inplace"}) {
    EXPECT_NE(listed.output.find(name), std::string::npos) << name;
  }
  if (torch_installed()) GTEST_SKIP() << "PyTorch is installed here: TorchPeersPassTheCtestSuite covers it";
  EXPECT_NE(listed.output.find("unavailable: import attnbench_torch_peers: ModuleNotFoundError: No module named 'torch'"),
            std::string::npos)
      << listed.output;
  const CommandResult checked = attnbench(
      "check --devices cpu --shape b=1,hq=2,s=16,d=8 --kernels 'torch.sdpa_*,cpu.naive' --db " + db());
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  const auto by_kernel = results_by_kernel(db());
  ASSERT_TRUE(by_kernel.count("torch.sdpa_flash")) << checked.output;
  EXPECT_EQ(by_kernel.at("torch.sdpa_flash").front().status, ResultStatus::skipped);
  EXPECT_NE(by_kernel.at("torch.sdpa_flash").front().message.find("No module named 'torch'"), std::string::npos);
  expect_passed(by_kernel.at("cpu.naive").front(), true);
}

// Whether `r` is the one known way a torch peer falls short of the gradient rule on the CPU:
// PyTorch's CPU flash backward accumulates dK and dV in the bf16/fp16 gradient (measured with
// PyTorch 2.15: at 16 query heads per kv head, 129 rows, bf16, dV 0.037 from fp64 where the
// heads' shares rounded once and summed in fp32 are 0.013 off, and a sum rounded after every head
// 0.024; without GQA, 113 rows under causal_br, dV of key 0 (every row's) 0.0408 off against a
// bound of 0.0408), so its dK and dV sit at or past twice the straightforward computation's
// error. attnbench reports a miss as it is; this test tolerates it only there, naming the
// gradient.
bool known_torch_flash_backward_shortfall(const std::string& kernel, const ResultRecord& r) {
  return kernel == "torch.sdpa_flash" && r.problem.has_backward() &&
         r.problem.input_dtype != DType::f32 && r.status == ResultStatus::failed &&
         (r.message.rfind("dk: max|dk-ref|", 0) == 0 || r.message.rfind("dv: max|dv-ref|", 0) == 0);
}

// Must show, where PyTorch is installed: the torch.* peers pass the ctest suite inside their
// tables on the CPU (a backend that declines a problem skips it with PyTorch's reason), forward
// and backward, but for the known shortfall above.
TEST_F(UserKernels, TorchPeersPassTheCtestSuite) {
  if (!torch_installed()) GTEST_SKIP() << "PyTorch is not installed (pip install torch)";
  const CommandResult checked =
      attnbench("check --suite ctest --devices cpu --kernels 'torch.*' --db " + db());
  // 1: failed checks, which may be the known shortfall only (below).
  ASSERT_TRUE(checked.exit_code == kExitClean || checked.exit_code == kExitFailures)
      << checked.output;
  const auto by_kernel = results_by_kernel(db());
  // PyTorch has no CPU kernel for these two backends: every case skipped with PyTorch's reason.
  for (const char* name : {"torch.sdpa_efficient", "torch.sdpa_cudnn"}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(by_kernel.count(name)) << checked.output;
    for (const ResultRecord& r : by_kernel.at(name)) {
      EXPECT_EQ(r.status, ResultStatus::skipped);
      EXPECT_FALSE(r.message.empty());
    }
  }
  for (const char* name : {"torch.sdpa_flash", "torch.sdpa_math", "torch.naive_outofplace",
                           "torch.naive_inplace"}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(by_kernel.count(name)) << checked.output;
    int passed = 0, backward_passed = 0;
    for (const ResultRecord& r : by_kernel.at(name)) {
      if (r.status == ResultStatus::skipped || known_torch_flash_backward_shortfall(name, r)) continue;
      EXPECT_EQ(r.status, ResultStatus::passed) << shape_string(r.problem) << ": " << r.message;
      ++passed;
      backward_passed += r.problem.has_backward() ? 1 : 0;
    }
    EXPECT_GE(passed, 30);
    EXPECT_GE(backward_passed, 20);
  }
}

void expect_phases(const std::map<std::string, ProfilePhaseRecord>& phases,
                   std::initializer_list<const char*> names, const std::string& output) {
  double shares = 0;
  for (const auto& [name, row] : phases) shares += row.share;
  EXPECT_NEAR(shares, 1.0, 1e-9);
  for (const char* name : names) {
    ASSERT_TRUE(phases.count(name)) << "no " << name << ": " << output;
    EXPECT_EQ(phases.at(name).kind, "phase");
    EXPECT_GT(phases.at(name).total_s, 0.0) << name;
  }
}

CommandResult profile_plugin(const std::string& db) {
  return attnbench(
      std::string("profile --devices cpu --timed 5 --plugin ") + EXAMPLE_PLUGIN +
      " --kernels example.online_cpu --shape b=1,hq=2,s=256,d=64,dtype=fp32,mask=causal --db " +
      db);
}

CommandResult profile_torch_peers(const std::string& db) {
  return attnbench(
      "profile --devices cpu --timed 25 --kernels torch.naive_outofplace,torch.naive_inplace,"
      "torch.sdpa_math --shape b=1,hq=4,s=256,d=64,dtype=bf16,mask=causal --db " +
      db);
}

TEST_F(UserKernels, APluginMarksItsPhasesThroughTheAbi) {
  const CommandResult profiled = profile_plugin(db());
  ASSERT_EQ(profiled.exit_code, 0) << profiled.output;
  const auto phases = stored_profiles(db());
  ASSERT_TRUE(phases.count("example.online_cpu")) << profiled.output;
  expect_phases(phases.at("example.online_cpu"), {"scores", "softmax", "output"}, profiled.output);
  // One scope per query row and phase: 2 heads x 256 rows.
  EXPECT_EQ(phases.at("example.online_cpu").at("scores").count, 2 * 256);
}

TEST_F(UserKernels, TorchPeersMarkTheirPhasesOnTheCpu) {
  if (!torch_installed()) GTEST_SKIP() << "PyTorch is not installed (pip install torch)";
  const CommandResult profiled = profile_torch_peers(db());
  ASSERT_EQ(profiled.exit_code, 0) << profiled.output;
  const auto phases = stored_profiles(db());
  for (const char* naive : {"torch.naive_outofplace", "torch.naive_inplace"}) {
    SCOPED_TRACE(naive);
    ASSERT_TRUE(phases.count(naive)) << profiled.output;
    expect_phases(phases.at(naive), {"scores", "mask", "softmax", "output", "copy"},
                  profiled.output);
  }
  ASSERT_TRUE(phases.count("torch.sdpa_math")) << profiled.output;
  expect_phases(phases.at("torch.sdpa_math"), {"sdpa", "copy"}, profiled.output);
}

// Slow tier: a timing judgement. The marked phases cover most of the median recorded forward
// (gaps under half of it). On a loaded machine (ctest -j2) a forward can lose milliseconds to
// preemption, which a recording bills to gaps (CI of 6588901: 77 % gaps in
// torch.naive_outofplace; CI of 6966ac2: the median of five forwards 52 % gaps, its plain runs
// 27 ms against 0.5 ms unloaded), so the full tier checks the phases and their shares and this
// judgement runs in the slow tier, where nothing else runs beside it.
TEST_F(UserKernels, MarkedPhasesCoverMostOfTheForward) {
  const CommandResult plugin = profile_plugin(db("plugin.sqlite"));
  ASSERT_EQ(plugin.exit_code, 0) << plugin.output;
  EXPECT_LT(stored_profiles(db("plugin.sqlite")).at("example.online_cpu").at("gaps").share, 0.5)
      << plugin.output;
  if (!torch_installed()) return;  // the plugin's phases alone: PyTorch is not installed
  const CommandResult torch = profile_torch_peers(db("torch.sqlite"));
  ASSERT_EQ(torch.exit_code, 0) << torch.output;
  const auto phases = stored_profiles(db("torch.sqlite"));
  for (const char* kernel : {"torch.naive_outofplace", "torch.naive_inplace", "torch.sdpa_math"}) {
    SCOPED_TRACE(kernel);
    ASSERT_TRUE(phases.count(kernel)) << torch.output;
    EXPECT_LT(phases.at(kernel).at("gaps").share, 0.5) << torch.output;
  }
}

}  // namespace
}  // namespace attnbench
