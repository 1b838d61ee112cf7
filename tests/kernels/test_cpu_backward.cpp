// The CPU backwards through `attnbench check` as a user runs it: cpu.flash and cpu.naive pass a
// backward and a fwd_bwd case with GQA, a causal mask and two of cpu.flash's key blocks; each
// planted backward bug of cpu.flash (tests/test_kernels: D left out, the softmax scale missing,
// GQA's dK/dV not summed, the last key block skipped) fails on the same case with the gradient it
// breaks named, so none passes vacuously, also with dO drawn 4096 times smaller (dout=small).
// (The ctest suite's backward blocks cover the shapes.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/command.h"
#include "tests/support/scratch_directory.h"
#include "tests/support/stored_runs.h"

namespace attnbench {
namespace {

// Two kv heads of four query heads each, 300 keys (cpu.flash's backward takes 256 per block),
// bottom-right causal with more queries than keys fits, so the first rows see a few keys only.
constexpr const char* kShape = "b=2,hq=8,hkv=2,sq=130,sk=300,d=32,dtype=bf16,mask=causal_br";

ResultRecord check_once(const std::string& kernel, const std::string& pass,
                        const ScratchDirectory& dir) {
  const std::string db = dir.file("backward.sqlite");
  const CommandResult checked = run_shell(std::string("ATTNBENCH_TEST_KERNELS=1 ") + ATTNBENCH_CLI +
                                          " check --devices cpu --kernels " + kernel + " --shape " +
                                          kShape + ",pass=" + pass + " --db " + db);
  EXPECT_NE(checked.exit_code, -1) << checked.output;
  const Result<StoredRun> run = load_latest_run(db);
  EXPECT_TRUE(run) << run.status().message << "\n" << checked.output;
  if (!run || run->results.size() != 1) return {};
  return run->results[0];
}

TEST(CpuBackward, FlashAndNaivePassBackwardAndTrainingStepRerunningBitForBit) {
  const ScratchDirectory dir("attnbench_cpu_backward");
  for (const char* kernel : {"cpu.flash", "cpu.naive"}) {
    for (const char* pass : {"bwd", "fwd_bwd"}) {
      SCOPED_TRACE(std::string(kernel) + " " + pass);
      const ResultRecord result = check_once(kernel, pass, dir);
      expect_passed(result, /*deterministic=*/true);
      EXPECT_EQ(result.problem.pass, pass == std::string("bwd") ? Pass::bwd : Pass::fwd_bwd);
      EXPECT_GT(result.check.rows_checked, 0);
      const nlohmann::json details = nlohmann::json::parse(result.details_json);
      for (const char* gradient : {"dq", "dk", "dv"}) {
        EXPECT_LE(details["gradients"][gradient]["max_abs_error"].get<double>(),
                  details["gradients"][gradient]["bound"].get<double>());
        EXPECT_EQ(details["backward_rerun_max_difference"][gradient].get<double>(), 0.0);
      }
      EXPECT_GT(result.extra_memory_bytes, 0);
    }
  }
}

struct PlantedBackwardBug {
  const char* name;
  const char* reason;  // what the failure names
};
void PrintTo(const PlantedBackwardBug& bug, std::ostream* out) { *out << bug.name; }

class PlantedCpuBackwardBug : public ::testing::TestWithParam<PlantedBackwardBug> {};

TEST_P(PlantedCpuBackwardBug, FailsNamingTheGradientItBreaks) {
  const PlantedBackwardBug bug = GetParam();
  const ScratchDirectory dir("attnbench_cpu_backward_planted");
  // dO of 2^-12 (dout=small) makes every gradient that small: the bound must shrink with it.
  for (const char* pass : {"bwd", "bwd,dout=small"}) {
    SCOPED_TRACE(pass);
    const ResultRecord planted =
        check_once(std::string("test.cpu_flash_bwd_") + bug.name, pass, dir);
    EXPECT_EQ(planted.status, ResultStatus::failed) << planted.message;
    EXPECT_NE(planted.message.find(bug.reason), std::string::npos) << planted.message;
    EXPECT_NE(planted.message.find("expected"), std::string::npos) << planted.message;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cpu, PlantedCpuBackwardBug,
    ::testing::Values(PlantedBackwardBug{"no_delta", "dq: max|dq-ref|"},
                      PlantedBackwardBug{"no_softmax_scale", "dq: max|dq-ref|"},
                      // dQ does not depend on the sum over the group: dK is the first to fail.
                      PlantedBackwardBug{"gqa_not_summed", "dk: max|dk-ref|"},
                      PlantedBackwardBug{"last_key_block_skipped", "dq: max|dq-ref|"}),
    [](const ::testing::TestParamInfo<PlantedBackwardBug>& param_info) {
      return std::string(param_info.param.name);
    });

}  // namespace
}  // namespace attnbench
