// Every CPU kernel over the `ctest` suite (the awkward shapes), through the same code path as
// `attnbench check`: inside its support table a kernel must pass every case; outside it, the case
// is recorded as skipped with the kernel's reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "harness/cli/runner.h"
#include "harness/store/store.h"
#include "kernels/registry.h"

namespace attnbench {
namespace {

class CtestSuite : public ::testing::TestWithParam<std::string> {};

TEST_P(CtestSuite, EveryCaseInsideTheTablePasses) {
  const std::string kernel = GetParam();
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("attnbench_ctest_" + kernel + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  RunOptions options;
  options.suite = "ctest";
  options.kernel_globs = {kernel};
  options.devices = "cpu";
  options.check_only = true;  // fresh random inputs: no --seed
  options.db_path = (dir / "ctest.sqlite").string();
  options.worker_command = {ATTNBENCH_CLI};  // cases run in attnbench worker processes
  std::ostringstream out, err;
  const int code = run_cases(options, out, err);
  EXPECT_EQ(code, kExitClean) << err.str() << out.str();

  const Result<std::unique_ptr<Store>> store = Store::open(options.db_path);
  ASSERT_TRUE(store) << store.status().message;
  const Result<std::optional<int64_t>> run_id = (*store)->latest_run_id();
  ASSERT_TRUE(run_id) << run_id.status().message;
  ASSERT_TRUE(*run_id);
  const Result<StoredRun> run = (*store)->load_run(**run_id);
  ASSERT_TRUE(run) << run.status().message;
  EXPECT_EQ(run->status, "complete");
  int passed = 0;
  for (const ResultRecord& r : run->results) {
    SCOPED_TRACE(r.kernel + " " + shape_string(r.problem) + " " + r.distribution);
    EXPECT_EQ(r.kernel, kernel);
    if (r.status == ResultStatus::skipped) {
      EXPECT_FALSE(r.message.empty());
      // Skips are only for what the table excludes: FP8 inputs on the CPU.
      EXPECT_TRUE(is_fp8(r.problem.input_dtype)) << r.message;
      continue;
    }
    EXPECT_EQ(r.status, ResultStatus::passed) << r.message;
    EXPECT_TRUE(r.check.checked);
    EXPECT_LE(r.check.max_abs_error, r.check.bound);
    EXPECT_EQ(r.check.nan_count, 0);
    EXPECT_TRUE(r.check.canaries_ok);
    EXPECT_TRUE(r.check.repeatable);
    EXPECT_GE(r.extra_memory_bytes, 0);
    ++passed;
  }
  EXPECT_GT(passed, 20) << "the ctest suite should give every CPU kernel many cases";
  std::filesystem::remove_all(dir);
}

std::vector<std::string> cpu_kernel_names() {
  std::vector<std::string> names;
  for (const Kernel& k : all_kernels()) {
    if (k.backend == Backend::cpu) names.push_back(k.name);
  }
  return names;
}

INSTANTIATE_TEST_SUITE_P(CpuKernels, CtestSuite, ::testing::ValuesIn(cpu_kernel_names()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           std::string name = param_info.param;
                           for (char& c : name)
                             c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

}  // namespace
}  // namespace attnbench
