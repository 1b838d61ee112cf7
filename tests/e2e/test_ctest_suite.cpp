// Every CPU kernel over the `ctest` suite (the awkward shapes), through the same code path as
// `attnbench check`: inside its support table a kernel must pass every case; outside it, the case
// is recorded as skipped with the kernel's reason. The FP8 recipes (cpu.flash_fp8*) are judged
// against their own recipe's rows, as the checker does for any kernel with an fp8_recipe.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "harness/cli/runner.h"
#include "harness/store/store.h"
#include "kernels/registry.h"
#include "tests/support/kernel_names.h"
#include "tests/support/scratch_directory.h"
#include "tests/support/stored_runs.h"

namespace attnbench {
namespace {

class CtestSuite : public ::testing::TestWithParam<std::string> {};

TEST_P(CtestSuite, EveryCaseInsideTheTablePasses) {
  const std::string kernel = GetParam();
  const ScratchDirectory dir("attnbench_ctest");
  RunOptions options;
  options.suite = "ctest";
  options.kernel_globs = {kernel};
  options.devices = "cpu";
  options.check_only = true;  // fresh random inputs: no --seed
  options.db_path = dir.file("ctest.sqlite");
  options.worker_command = {ATTNBENCH_CLI};  // cases run in attnbench worker processes
  std::ostringstream out, err;
  const int code = run_cases(options, out, err);
  EXPECT_EQ(code, kExitClean) << err.str() << out.str();

  const Result<StoredRun> run = load_latest_run(options.db_path);
  ASSERT_TRUE(run) << run.status().message;
  EXPECT_EQ(run->status, "complete");
  int passed = 0;
  for (const ResultRecord& r : run->results) {
    SCOPED_TRACE(r.kernel + " " + shape_string(r.problem) + " " + r.distribution);
    EXPECT_EQ(r.kernel, kernel);
    if (r.status == ResultStatus::skipped) {
      EXPECT_FALSE(r.message.empty());
      // Skips are only for what the kernel excludes: its table (FP8 inputs on the CPU, fp32 for
      // an FP8 recipe) or its recipe's limits (incoherent processing at head_dim 96 or 192).
      const Kernel& k = *find_kernel(kernel);
      const bool recipe_refuses =
          k.fp8_recipe && !fp8_recipe_limits(*k.fp8_recipe, r.problem).empty();
      EXPECT_TRUE(!unsupported_reason(k.support, r.problem).empty() || recipe_refuses)
          << r.message;
      continue;
    }
    expect_passed(r, /*deterministic=*/true);  // as every CPU kernel is
    ++passed;
  }
  EXPECT_GT(passed, 20) << "the ctest suite should give every CPU kernel many cases";
}

INSTANTIATE_TEST_SUITE_P(CpuKernels, CtestSuite, ::testing::ValuesIn(cpu_kernel_names()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           return test_name_part(param_info.param);
                         });

}  // namespace
}  // namespace attnbench
