// The emulated device `emu` as a user meets it (issue 14): the in-house CUDA kernels' own source
// run on the CPU by `attnbench check|run --devices emu`, over the `ctest` suite's awkward shapes
// with the same checker as every device; the kernels built on cuBLAS/cuDNN listed as skipped
// with the reason; no timing stored and nothing in the regression history.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "harness/cli/runner.h"
#include "harness/measure/devices.h"
#include "harness/store/store.h"
#include "tests/support/command.h"
#include "tests/support/kernel_names.h"
#include "tests/support/scratch_directory.h"
#include "tests/support/stored_runs.h"

namespace attnbench {
namespace {

CommandResult attnbench(const std::string& arguments) {
  return run_shell(std::string(ATTNBENCH_CLI) + " " + arguments);
}

// ---- the matrix: every emulated kernel over its correctness suite, and over `quick` ------------

// Runs `kernel` over `suite` on emu (check only) and expects every case its table takes to pass,
// bit for bit under two schedules, with at least `minimum` such cases.
void expect_emulated_suite_passes(const std::string& kernel, const std::string& suite,
                                  int minimum) {
  const ScratchDirectory dir("attnbench_emu_matrix");
  RunOptions options;
  options.suite = suite;
  options.kernel_globs = {kernel};
  options.devices = "emu";
  options.check_only = true;  // fresh random inputs, and a fresh schedule seed per checked run
  // The forward and the backward apart; fwd_bwd only chains the two steps on one plan (the bwd
  // cases run the forward first too), so it adds time here and no branch.
  options.pass = "fwd,bwd";
  options.db_path = dir.file("emu.sqlite");
  options.worker_command = {ATTNBENCH_CLI};
  std::ostringstream out, err;
  EXPECT_EQ(run_cases(options, out, err), kExitClean) << err.str() << out.str();

  const Result<StoredRun> run = load_latest_run(options.db_path);
  ASSERT_TRUE(run) << run.status().message;
  EXPECT_EQ(run->status, "complete");
  int passed = 0;
  for (const ResultRecord& r : run->results) {
    SCOPED_TRACE(r.kernel + " " + shape_string(r.problem) + " " + r.distribution);
    if (r.status == ResultStatus::skipped) {
      // Only what the table excludes: fp32 or FP8 inputs, head dims not instantiated.
      const bool outside_table = r.message.find("not supported") != std::string::npos ||
                                 r.message.find("not instantiated") != std::string::npos;
      EXPECT_TRUE(outside_table) << r.message;
      continue;
    }
    // Deterministic: the checker's two runs used two schedule seeds (stored with the result),
    // so bit-for-bit repeatability here is independence from the threads' order.
    expect_passed(r, /*deterministic=*/true);
    EXPECT_NE(r.details_json.find("emu_schedule_seeds"), std::string::npos) << r.details_json;
    EXPECT_TRUE(r.samples.empty()) << "the emulated device times nothing";
    ++passed;
  }
  EXPECT_GE(passed, minimum) << "too few cases of " << suite << " passed";
}

class EmuMatrix : public ::testing::TestWithParam<std::string> {};

// The full tier: the kernel's own correctness suite, every awkward shape.
TEST_P(EmuMatrix, EveryCaseInsideTheTablePasses) {
  const std::string kernel = GetParam();
  const std::string suite = correctness_suite_of(kernel, Backend::emu);
  // ctest gives each in-house kernel about 100 bf16/fp16 cases, hopper-stages 48; hopper-fp8 61
  // e4m3 (6 with per-head descales) and 25 fp16/bf16 (cuda.flash3_fp8 takes all 86, its
  // warp-specialized stages the 61 e4m3, the 16-bit variants the 25).
  // cuda.flash2_deterministic, whose table holds the backward passes alone, takes the ctest
  // suite's 57 backward cases at d 64 and 128.
  const bool e4m3_only = kernel == "cuda.flash3_fp8_ws" || kernel == "cuda.flash3_fp8_ws_transpose";
  // cuda.flash_decode, a decode kernel, takes the suite's cases of 1 .. 16 query rows: 34.
  const int minimum = kernel == "cuda.flash2_deterministic" ? 57
                      : kernel == "cuda.flash_decode"       ? 30
                      : suite == "ctest"                    ? 100
                      : suite == "hopper-stages"            ? 48
                      : kernel == "cuda.flash3_fp8"         ? 86
                      : e4m3_only                           ? 61
                                                            : 25;
  expect_emulated_suite_passes(kernel, suite, minimum);
}

// The quick tier: suites/quick.toml, every branch at its smallest shape. The Hopper stages take
// its d 128 bf16 cases (10), the 16-bit FP8 variants those and fp16's (10), the e4m3-only stages
// its 6 e4m3 cases; the kernels of the ctest suite take 20 or more; a kernel whose table holds
// the backward passes alone (cuda.flash2_deterministic) its two backward cases.
TEST_P(EmuMatrix, EveryBranchOfTheQuickSuitePasses) {
  const Kernel* kernel = find_kernel(GetParam(), Backend::emu);
  ASSERT_NE(kernel, nullptr);
  const bool backward_only =
      std::find(kernel->support.passes.begin(), kernel->support.passes.end(), Pass::fwd) ==
      kernel->support.passes.end();
  expect_emulated_suite_passes(GetParam(), "quick", backward_only ? 2 : 6);
}

INSTANTIATE_TEST_SUITE_P(InHouseCudaKernels, EmuMatrix,
                         ::testing::ValuesIn(emulated_kernel_names()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           return test_name_part(param_info.param);
                         });

TEST(EmuDevice, EighteenInHouseKernelsAreEmulated) {
  EXPECT_EQ(emulated_kernel_names(),
            (std::vector<std::string>{
                "cuda.naive", "cuda.masked_outofplace", "cuda.masked_inplace", "cuda.masked_fused",
                "cuda.flash1", "cuda.flash2", "cuda.flash2_deterministic", "cuda.flash3_wg1",
                "cuda.flash3_ws", "cuda.flash3_pingpong", "cuda.flash3", "cuda.flash3_fp8",
                "cuda.flash3_fp8_ws", "cuda.flash3_fp8_ws_transpose", "cuda.flash3_fp8_incoherent",
                "cuda.flash3_fp8_block", "cuda.flash3_fp8_block_incoherent", "cuda.flash_decode"}));
}

// ---- the device ---------------------------------------------------------------------------------

TEST(EmuDevice, IsListedAndSelectedOnlyByName) {
  const CommandResult listed = attnbench("list devices");
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_NE(listed.output.find("emu  attnbench emu"), std::string::npos) << listed.output;

  const std::vector<Device> found = discover_devices();
  const Result<std::vector<Device>> all = select_devices("all", found);
  ASSERT_TRUE(all) << all.status().message;
  for (const Device& d : *all) EXPECT_NE(d.label(), "emu") << "--devices all must not emulate";
  const Result<std::vector<Device>> emu = select_devices("emu", found);
  ASSERT_TRUE(emu) << emu.status().message;
  ASSERT_EQ(emu->size(), 1u);
  EXPECT_EQ((*emu)[0].label(), "emu");
  EXPECT_EQ((*emu)[0].info.kind, kEmuDeviceKind);
}

// ---- the commands, as a new user types them
// ----------------------------------------------

TEST(EmuDevice, Flash2AtSeqlen256HeadDim128ChecksInUnder30Seconds) {
  const ScratchDirectory dir("attnbench_emu_flash2");
  const auto start = std::chrono::steady_clock::now();
  const CommandResult checked = attnbench(
      "check --devices emu --kernels cuda.flash2 --shape b=1,hq=2,s=256,d=128,dtype=bf16 --db " +
      dir.file("emu.sqlite"));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  EXPECT_NE(checked.output.find("1 passed"), std::string::npos) << checked.output;
  std::printf("emu: cuda.flash2 b=1,hq=2,s=256,d=128,bf16 checked in %.2f s\n", seconds);
  EXPECT_LT(seconds, 30.0);
}

TEST(EmuDevice, EveryInHouseKernelPassesTheGqaTailShapeAndCublasIsSkippedWithItsReason) {
  const ScratchDirectory dir("attnbench_emu_gqa");
  const CommandResult checked = attnbench(
      "check --devices emu --kernels 'cuda.*' --shape "
      "b=2,hq=8,hkv=2,sq=113,sk=203,d=64,dtype=bf16,mask=causal_br --db " +
      dir.file("emu.sqlite"));
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  // Skipped: cuda.naive_cublas (cuBLAS), the Hopper stages and FP8 kernels outside their one
  // head dim, cuda.flash3_fp8_ws and _ws_transpose outside their one input dtype, and
  // cuda.flash2_deterministic, whose table holds the backward passes alone, and
  // cuda.flash_decode, a decode kernel (at most 16 query rows).
  EXPECT_NE(checked.output.find("7 passed, 12 skipped"), std::string::npos) << checked.output;
  const Result<StoredRun> run = load_latest_run(dir.file("emu.sqlite"));
  ASSERT_TRUE(run) << run.status().message;
  for (const ResultRecord& r : run->results) {
    SCOPED_TRACE(r.kernel);
    if (r.kernel == "cuda.naive_cublas") {
      EXPECT_EQ(r.status, ResultStatus::skipped);
      EXPECT_NE(r.message.find("cuBLAS/cuDNN"), std::string::npos) << r.message;
    } else if (r.kernel == "cuda.flash2_deterministic") {
      EXPECT_EQ(r.status, ResultStatus::skipped);
      EXPECT_NE(r.message.find("pass fwd not supported (bwd, fwd_bwd)"), std::string::npos)
          << r.message;
    } else if (r.kernel == "cuda.flash_decode") {
      EXPECT_EQ(r.status, ResultStatus::skipped);
      EXPECT_NE(r.message.find("seqlen_q 113 not supported"), std::string::npos) << r.message;
    } else if (r.kernel == "cuda.flash3_fp8_ws" ||
               r.kernel == "cuda.flash3_fp8_ws_transpose") {  // the table's first refusal: dtype
      EXPECT_EQ(r.status, ResultStatus::skipped);
      EXPECT_NE(r.message.find("dtype bf16 not supported (e4m3)"), std::string::npos) << r.message;
    } else if (correctness_suite_of(r.kernel, Backend::emu) != "ctest") {
      EXPECT_EQ(r.status, ResultStatus::skipped);
      EXPECT_NE(r.message.find("head_dim 64 not instantiated"), std::string::npos) << r.message;
    } else {
      expect_passed(r, /*deterministic=*/true);
    }
  }
}

// The naive family takes any even head dim up to 256, head_dim_v its own (issue 39; ctest's
// matrix holds 32, 96, 256 and 192/128). d 80 is 2.5 chunks of the scores kernel's head dim and
// 1.25 tiles of the output's, forward for all four and the textbook backward of cuda.naive;
// an odd head dim and one past 256 are refused with the rule they break.
TEST(EmuDevice, TheNaiveFamilyTakesAnyEvenHeadDimUpTo256) {
  const ScratchDirectory dir("attnbench_emu_naive_head_dims");
  const std::string db = dir.file("emu.sqlite");
  const CommandResult checked = attnbench(
      "check --devices emu --kernels 'cuda.naive,cuda.masked_*' --pass fwd,bwd --db " + db +
      " --shape b=1,hq=2,hkv=1,sq=70,sk=97,d=80,dtype=bf16,mask=causal"
      " --shape 'b=1,hq=2,hkv=1,sq=70,sk=97,dqk=80,dv=48,dtype=fp16,mask=window(16,4)'"
      " --shape b=1,hq=1,s=33,d=34,dtype=bf16 --shape b=1,hq=1,s=33,d=33,dtype=bf16"
      " --shape b=1,hq=1,s=33,d=258,dtype=bf16");
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  const Result<StoredRun> run = load_latest_run(db);
  ASSERT_TRUE(run) << run.status().message;
  int passed = 0;
  for (const ResultRecord& r : run->results) {
    SCOPED_TRACE(r.kernel + " " + shape_string(r.problem));
    const bool masked_backward = r.kernel != "cuda.naive" && r.problem.pass == Pass::bwd;
    if (r.problem.head_dim_qk == 33) {
      EXPECT_EQ(r.status, ResultStatus::skipped);
      if (!masked_backward) {
        EXPECT_NE(r.message.find("head_dim 33 not a multiple of 2"), std::string::npos)
            << r.message;
      }
    } else if (r.problem.head_dim_qk == 258) {
      EXPECT_EQ(r.status, ResultStatus::skipped);
      if (!masked_backward) {
        EXPECT_NE(r.message.find("head_dim 258 above the maximum 256"), std::string::npos)
            << r.message;
      }
    } else if (masked_backward) {
      EXPECT_EQ(r.status, ResultStatus::skipped) << r.message;  // forward-only study kernels
    } else {
      expect_passed(r, /*deterministic=*/true);
      ++passed;
    }
  }
  EXPECT_EQ(passed, 3 * (4 + 1)) << checked.output;  // 3 shapes x (4 forwards, 1 backward)
}

// cuda.flash2's and cuda.flash3's forwards at the head dims models ship besides 64, 128 and 256
// (issue 39): d 80 under MQA with sq > sk (rows with no key), d 96 under GQA with padding in bhsd,
// 192/128 under GQA with a window and with a tail of 17 in bhsd; their backwards and a head dim
// outside the instantiations are refused with the rule that excludes them. flash3's d 80 and 96
// rows are 128 wide in shared memory (the TMA fills past d with zeros), its 192/128 Q and K 192.
TEST(EmuDevice, Flash2AndFlash3TakeTheHeadDimsModelsShip) {
  const ScratchDirectory dir("attnbench_emu_flash_head_dims");
  const std::string db = dir.file("emu.sqlite");
  const CommandResult checked = attnbench(
      "check --devices emu --kernels cuda.flash2,cuda.flash3 --pass fwd,bwd --db " + db +
      " --shape b=2,hq=4,hkv=1,sq=203,sk=130,d=80,dtype=fp16,mask=causal_br"
      " --shape b=2,hq=4,hkv=2,sq=70,sk=300,d=96,dtype=bf16,mask=padding,layout=bhsd"
      " --shape 'b=1,hq=4,hkv=2,sq=130,sk=200,dqk=192,dv=128,dtype=fp16,mask=window(40,8)'"
      " --shape b=1,hq=2,sq=17,sk=17,dqk=192,dv=128,dtype=bf16,layout=bhsd"
      " --shape b=1,hq=1,sq=33,sk=33,d=112,dtype=bf16");
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
  const Result<StoredRun> run = load_latest_run(db);
  ASSERT_TRUE(run) << run.status().message;
  std::map<std::string, int> passed;
  for (const ResultRecord& r : run->results) {
    SCOPED_TRACE(r.kernel + " " + shape_string(r.problem));
    if (r.kernel == "cuda.flash3" && r.problem.pass == Pass::bwd) {
      EXPECT_EQ(r.status, ResultStatus::skipped);
      EXPECT_EQ(r.message, "pass bwd not supported (fwd): the kernel has no backward");
    } else if (r.problem.head_dim_qk == 112) {
      EXPECT_EQ(r.status, ResultStatus::skipped);
      EXPECT_EQ(r.message, "head_dim 112 not instantiated (64, 80, 96, 128, 256, 192/128)");
    } else if (r.problem.pass == Pass::bwd) {
      EXPECT_EQ(r.status, ResultStatus::skipped);
      EXPECT_EQ(r.message, "head_dim " + std::to_string(r.problem.head_dim_qk) +
                               " not instantiated for the backward (64, 128)");
    } else {
      expect_passed(r, /*deterministic=*/true);
      ++passed[r.kernel];
    }
  }
  EXPECT_EQ(passed, (std::map<std::string, int>{{"cuda.flash2", 4}, {"cuda.flash3", 4}}))
      << checked.output;
}

// Each in-house kernel's expectation of a forward (Kernel::expected_resources), stored beside
// what the emulated device measured of it: the checked forward's launches as the emulated stream
// counted them, and the tracking allocator's high-water mark. On the host both are exact, so
// they must be equal; and `attnbench describe` states the same expectation as the stored one.
// Two shapes: a GQA tail at d 64 (the tier-1 kernels, cuda.flash1 over four key blocks), and
// d 128 bf16 (the Hopper stages, the FP8 kernels quantizing 16-bit inputs).
TEST(EmuDevice, EveryInHouseKernelsStoredExpectationIsWhatTheDeviceMeasured) {
  const ScratchDirectory dir("attnbench_emu_expected");
  const std::string shapes =
      "--shape b=1,hq=4,hkv=2,sq=37,sk=203,d=64,dtype=fp16,mask=causal_br "
      "--shape b=1,hq=2,sq=70,sk=150,d=128,dtype=bf16";
  const CommandResult checked = attnbench("check --devices emu --kernels 'cuda.*' " + shapes +
                                          " --db " + dir.file("emu.sqlite"));
  ASSERT_EQ(checked.exit_code, 0) << checked.output;
  const CommandResult described = attnbench("describe --json --kernels 'cuda.*' " + shapes);
  ASSERT_EQ(described.exit_code, 0) << described.output;
  std::map<std::pair<std::string, std::string>, nlohmann::json> described_expectation;
  const nlohmann::json description = nlohmann::json::parse(described.output);
  for (const nlohmann::json& c : description.at("cases")) {
    if (c.at("supported").get<bool>()) {
      described_expectation[{c.at("kernel").get<std::string>(), c.at("shape").get<std::string>()}] =
          c.at("expected");
    }
  }
  const Result<StoredRun> run = load_latest_run(dir.file("emu.sqlite"));
  ASSERT_TRUE(run) << run.status().message;
  std::set<std::string> judged;
  for (const ResultRecord& r : run->results) {
    if (r.status != ResultStatus::passed) continue;
    SCOPED_TRACE(r.kernel + " " + shape_string(r.problem));
    const nlohmann::json details = nlohmann::json::parse(r.details_json);
    ASSERT_TRUE(details.contains("expected")) << r.details_json;
    const nlohmann::json& expected = details.at("expected");
    EXPECT_EQ(expected, (described_expectation[{r.kernel, shape_string(r.problem)}]));
    ASSERT_TRUE(expected.contains("launches")) << "every in-house kernel declares its launches";
    EXPECT_EQ(r.launches, expected.at("launches").get<int>());
    if (expected.contains("extra_memory_bytes")) {
      EXPECT_EQ(r.extra_memory_bytes, expected.at("extra_memory_bytes").get<int64_t>());
    }
    judged.insert(r.kernel);
  }
  // Every in-house kernel but the two warp-specialized FP8 stages, which take e4m3 only.
  EXPECT_EQ(judged.size(), 14u) << checked.output;
}

// Like a `check` run's, an emulated result enters the analysis by its status only (a pass turning
// into a failure is a status change), never with a time.
TEST(EmuDevice, ARunStoresNoTimesAndTheAnalysisJudgesItsStatusOnly) {
  const ScratchDirectory dir("attnbench_emu_run");
  const std::string db = dir.file("emu.sqlite");
  for (int night = 0; night < 2; ++night) {
    const CommandResult ran = attnbench(
        "run --devices emu --kernels cuda.masked_fused --shape b=1,hq=2,s=64,d=64,dtype=fp16 "
        "--db " +
        db);
    ASSERT_EQ(ran.exit_code, 0) << ran.output;
  }
  const CommandResult judged = attnbench("regressions --db " + db);
  EXPECT_EQ(judged.exit_code, 0) << judged.output;
  const Result<StoredRun> run = load_latest_run(db);
  ASSERT_TRUE(run) << run.status().message;
  ASSERT_EQ(run->results.size(), 1u);
  EXPECT_EQ(run->results[0].status, ResultStatus::passed);
  EXPECT_TRUE(run->results[0].samples.empty()) << "the emulated device times nothing";
  Result<std::unique_ptr<Store>> store = Store::open(db);
  ASSERT_TRUE(store) << store.status().message;
  const Result<std::vector<AnalysisRecord>> analysis = (*store)->run_analysis(run->id);
  ASSERT_TRUE(analysis) << analysis.status().message;
  for (const AnalysisRecord& a : *analysis) {
    EXPECT_FALSE(std::isfinite(a.center_s) && a.center_s > 0) << "no time may enter the history";
    EXPECT_FALSE(std::isfinite(a.change)) << "no change in time can be judged";
  }
}

}  // namespace
}  // namespace attnbench
