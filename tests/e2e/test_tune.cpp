// `attnbench tune` as a user runs it (issue 38, item 3): a kernel's variants checked and timed
// beside it in one stored run, the fastest per shape printed with its margin over the default;
// under emu every CUDA variant checked, none timed. And the naming rule variants live by: a
// variant runs only where named ("cpu.flash[block_q=128,block_k=256]", "cpu.flash[*]").
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "harness/store/store.h"
#include "kernels/registry.h"
#include "tests/support/command.h"
#include "tests/support/scratch_directory.h"
#include "tests/support/stored_runs.h"

namespace attnbench {
namespace {

CommandResult attnbench(const std::string& arguments) {
  return run_shell(std::string(ATTNBENCH_CLI) + " " + arguments + " 2>&1");
}

// 1024 queries and keys: no tile of any variant is clamped to the sequence, so each variant's
// scratch differs from the default's (256 x 512 tiles).
constexpr const char* kShape = "b=1,hq=2,s=1024,d=64,dtype=fp32";
constexpr const char* kSmallVariant = "cpu.flash[block_q=128,block_k=256]";

TEST(Tune, TimesEveryCpuVariantBesideTheDefaultAndNamesTheFastest) {
  const ScratchDirectory dir("attnbench_tune");
  const std::string db = dir.file("tune.sqlite");
  const CommandResult tuned =
      attnbench("tune --kernel cpu.flash --shape " + std::string(kShape) +
                " --devices cpu --repetitions 3 --max-case-seconds 0.2 --db " + db);
  ASSERT_EQ(tuned.exit_code, 0) << tuned.output;
  const Result<StoredRun> run = load_latest_run(db);
  ASSERT_TRUE(run) << run.status().message;
  const size_t variants = variants_of("cpu.flash").size();
  ASSERT_GE(variants, 2u);
  ASSERT_EQ(run->results.size(), 1 + variants) << tuned.output;
  std::map<std::string, const ResultRecord*> by_kernel;
  for (const ResultRecord& r : run->results) {
    EXPECT_EQ(r.status, ResultStatus::passed) << r.kernel << ": " << r.message;
    EXPECT_TRUE(r.timing.timed) << r.kernel;
    EXPECT_GT(r.timing.median_s, 0) << r.kernel;
    by_kernel[r.kernel] = &r;
  }
  ASSERT_TRUE(by_kernel.count("cpu.flash")) << tuned.output;
  for (const Kernel* variant : variants_of("cpu.flash")) {
    ASSERT_TRUE(by_kernel.count(variant->name)) << variant->name << " not run:\n" << tuned.output;
  }
  // Each variant really runs its own tiles: the small one's per-thread scratch is smaller.
  ASSERT_TRUE(by_kernel.count(kSmallVariant));
  EXPECT_LT(by_kernel[kSmallVariant]->extra_memory_bytes,
            by_kernel["cpu.flash"]->extra_memory_bytes);
  // The verdict: how many passed, the fastest, and the default's own choice.
  EXPECT_NE(tuned.output.find("tune cpu.flash (run " + std::to_string(run->id)), std::string::npos)
      << tuned.output;
  const std::string counted = std::to_string(1 + variants) + " of " + std::to_string(1 + variants) +
                              " passed their check; fastest ";
  EXPECT_NE(tuned.output.find(counted), std::string::npos) << tuned.output;
  EXPECT_NE(tuned.output.find("block_q=256,block_k=512"), std::string::npos) << tuned.output;
  // A margin comes with whether it stands out of the host's noise (Mann-Whitney over the
  // repetitions), unless the default itself was the fastest.
  const bool default_fastest = tuned.output.find("fastest the default") != std::string::npos;
  const bool judged = tuned.output.find(" repetitions)") != std::string::npos &&
                      tuned.output.find("significant") != std::string::npos;
  EXPECT_TRUE(default_fastest || judged) << tuned.output;
}

// Under emu every CUDA variant is checked beside its family (cuda.flash3's six: [stages=2] on
// rings of 2 stages, [pingpong=off], [rescale=after_pv], [stages=2,block_n=176] on key tiles of
// 176, [probe=clock64], [persistent=on]; 4 key tiles of 128 (3 of 176) so each stage is refilled;
// causal GQA with tails), none timed; a variant's table is its own (d 128 bf16 only: the d 64
// shape is skipped).
TEST(Tune, ChecksEveryCudaVariantOnTheEmulatedDevice) {
  const ScratchDirectory dir("attnbench_tune_emu");
  const std::string db = dir.file("tune.sqlite");
  const CommandResult tuned =
      attnbench("tune --kernel cuda.flash3 --devices emu --db " + db +
                " --shape b=1,hq=2,hkv=1,sq=130,sk=400,d=128,dtype=bf16,mask=causal_br"
                " --shape b=1,hq=2,hkv=1,sq=70,sk=200,d=64,dtype=fp16");
  ASSERT_EQ(tuned.exit_code, 0) << tuned.output;
  const Result<StoredRun> run = load_latest_run(db);
  ASSERT_TRUE(run) << run.status().message;
  std::map<std::string, int> passed;
  for (const ResultRecord& r : run->results) {
    EXPECT_FALSE(r.timing.timed) << r.kernel;
    if (r.status == ResultStatus::passed) ++passed[r.kernel];
    if (r.kernel != "cuda.flash3" && r.problem.head_dim_qk == 64) {
      EXPECT_EQ(r.status, ResultStatus::skipped) << r.kernel << ": " << r.message;
    }
  }
  EXPECT_EQ(passed["cuda.flash3"], 2) << tuned.output;
  for (const char* variant : {"cuda.flash3[stages=2]", "cuda.flash3[pingpong=off]",
                              "cuda.flash3[rescale=after_pv]", "cuda.flash3[stages=2,block_n=176]",
                              "cuda.flash3[probe=clock64]", "cuda.flash3[persistent=on]"}) {
    EXPECT_EQ(passed[variant], 1) << variant << "\n" << tuned.output;
  }
  EXPECT_NE(tuned.output.find("6 variants beside the default"), std::string::npos) << tuned.output;
  EXPECT_NE(tuned.output.find("7 of 7 passed their check; none timed"), std::string::npos)
      << tuned.output;
  EXPECT_NE(tuned.output.find("1 of 1 passed their check (6 skipped: outside their tables)"),
            std::string::npos)
      << tuned.output;
}

// cuda.flash_decode and its unsplit variant under emu: both pass a ragged decode batch over a
// paged cache, the family with its keys cut into several splits, the variant into one.
TEST(Tune, ChecksTheUnsplitDecodeVariantOnTheEmulatedDevice) {
  const ScratchDirectory dir("attnbench_tune_decode");
  const std::string db = dir.file("tune.sqlite");
  const CommandResult tuned = attnbench(
      "tune --kernel cuda.flash_decode --devices emu --db " + db +
      " --shape 'hq=8,hkv=2,d=128,dtype=fp16,mask=causal_br,varlen=list(4:1500,1:600),page=64'");
  ASSERT_EQ(tuned.exit_code, 0) << tuned.output;
  const Result<StoredRun> run = load_latest_run(db);
  ASSERT_TRUE(run) << run.status().message;
  std::map<std::string, int64_t> splits;
  for (const ResultRecord& r : run->results) {
    EXPECT_EQ(r.status, ResultStatus::passed) << r.kernel << ": " << r.message;
    splits[r.kernel] = nlohmann::json::parse(r.details_json).value("splits", int64_t{0});
  }
  EXPECT_GT(splits["cuda.flash_decode"], 1) << tuned.output;
  EXPECT_EQ(splits["cuda.flash_decode[splits=1]"], 1) << tuned.output;
}

// cuda.flash3[probe=clock64] under emu: its check passes and its details hold each consumer
// warpgroup's waits per key tile (the emulator's clock is the host's nanoseconds: the structure
// is checked here, the figures on a GPU). Two query blocks of two heads (4 CTAs, 8 warpgroups),
// causal from the bottom right: every block visits the 4 key tiles of 128.
TEST(Tune, TheFlash3ClockProbeReportsEachWaitPerKeyTile) {
  const ScratchDirectory dir("attnbench_flash3_probe");
  const std::string db = dir.file("probe.sqlite");
  const CommandResult checked =
      attnbench("check --devices emu --kernels 'cuda.flash3[probe=clock64]' --db " + db +
                " --shape b=1,hq=2,hkv=1,sq=130,sk=400,d=128,dtype=bf16,mask=causal_br");
  ASSERT_EQ(checked.exit_code, 0) << checked.output;
  const Result<StoredRun> run = load_latest_run(db);
  ASSERT_TRUE(run) << run.status().message;
  ASSERT_EQ(run->results.size(), 1u);
  const ResultRecord& r = run->results[0];
  EXPECT_EQ(r.status, ResultStatus::passed) << r.message;
  const nlohmann::json details = nlohmann::json::parse(r.details_json, nullptr, false);
  ASSERT_TRUE(details.contains("clock_probe")) << r.details_json;
  const nlohmann::json& probe = details["clock_probe"];
  EXPECT_EQ(probe.value("warpgroups", 0), 8) << r.details_json;
  EXPECT_EQ(probe.value("key_tiles", 0), 8 * 4) << r.details_json;
  const nlohmann::json& per_tile = probe["per_tile"];
  double waits = 0;
  for (const char* wait :
       {"k_full_wait", "v_full_wait", "turn_wait", "scores_wait", "output_wait"}) {
    ASSERT_TRUE(per_tile.contains(wait)) << wait << " in " << r.details_json;
    EXPECT_GE(per_tile[wait].get<double>(), 0.0) << wait;
    waits += per_tile[wait].get<double>();
  }
  EXPECT_GT(per_tile.value("mainloop", 0.0), 0.0) << r.details_json;
  EXPECT_LE(waits, per_tile.value("mainloop", 0.0)) << r.details_json;
}

// cuda.flash3[persistent=on] under emu, whose device has 4 SMs: 4 CTAs run 12 blocks in turn, so
// each CTA's rings and Q's tile carry on from one block to the next. Causal from the bottom right:
// blocks of 2 to 4 key tiles (a CTA's rings of 3 stages wrap across its blocks), and with
// sq > sk + 128 blocks with no visible key between blocks with some (CTA 1: h0's second block, h1's
// first, empty, h3's last), which load no Q and store from registers.
TEST(Tune, TheFlash3PersistentGridRunsSeveralBlocksOnEachCta) {
  const ScratchDirectory dir("attnbench_flash3_persistent");
  const std::string db = dir.file("persistent.sqlite");
  const CommandResult checked =
      attnbench("check --devices emu --kernels 'cuda.flash3[persistent=on]' --db " + db +
                " --shape b=1,hq=4,hkv=2,sq=300,sk=400,d=128,dtype=bf16,mask=causal_br"
                " --shape b=1,hq=4,hkv=2,sq=300,sk=100,d=128,dtype=bf16,mask=causal_br");
  ASSERT_EQ(checked.exit_code, 0) << checked.output;
  const Result<StoredRun> run = load_latest_run(db);
  ASSERT_TRUE(run) << run.status().message;
  ASSERT_EQ(run->results.size(), 2u);
  for (const ResultRecord& r : run->results) {
    EXPECT_EQ(r.status, ResultStatus::passed) << r.message;
    const nlohmann::json details = nlohmann::json::parse(r.details_json, nullptr, false);
    ASSERT_TRUE(details.contains("persistent_grid")) << r.details_json;
    EXPECT_EQ(details["persistent_grid"].value("ctas", 0), 4) << r.details_json;
    EXPECT_EQ(details["persistent_grid"].value("blocks", 0), 12) << r.details_json;
  }
}

TEST(Tune, RefusesWhatHasNoVariantsAndSaysWhatItAccepts) {
  const ScratchDirectory dir("attnbench_tune_errors");
  const std::string db =
      " --shape b=1,hq=1,s=64,d=32,dtype=fp32 --devices cpu --db " + dir.file("tune.sqlite");
  const std::pair<std::string, std::string> refusals[] = {
      {"--kernel cpu.naive",
       "--kernel 'cpu.naive' has no variants; accepted: a kernel with "
       "variants (cpu.flash"},
      {std::string("--kernel '") + kSmallVariant + "'",
       "is a variant of cpu.flash; give its family"},
      {"--kernel cpu.nothing", "--kernel 'cpu.nothing': unknown kernel"},
      {"--kernel cpu.flash --kernels cpu.naive", "drop --kernels"},
  };
  for (const auto& [arguments, message] : refusals) {
    const CommandResult refused = attnbench("tune " + arguments + db);
    EXPECT_EQ(refused.exit_code, 2) << arguments << ":\n" << refused.output;
    EXPECT_NE(refused.output.find(message), std::string::npos) << refused.output;
  }
}

// A variant runs where it is named, by its name or its family's "[*]", never through a glob of
// kernels ("cpu.*") or a suite's entries alone: nightly suites stay as they were.
TEST(Tune, AVariantRunsOnlyWhereNamed) {
  const ScratchDirectory dir("attnbench_tune_naming");
  const std::string shape = " --shape b=1,hq=1,s=64,d=32,dtype=fp32 --devices cpu --db ";
  const std::pair<std::string, size_t> selections[] = {
      {"'cpu.flash*'", 1},  // cpu.flash_fp8* are fp16/bf16 only: cpu.flash alone at fp32
      {"cpu.flash", 1},
      {std::string("'") + kSmallVariant + ",cpu.naive'", 2},
      {"'cpu.flash[*]'", variants_of("cpu.flash").size()},
  };
  int index = 0;
  for (const auto& [kernels, expected] : selections) {
    const std::string db = dir.file("naming" + std::to_string(index++) + ".sqlite");
    const CommandResult checked = attnbench("check --kernels " + kernels + shape + db);
    EXPECT_EQ(checked.exit_code, 0) << kernels << ":\n" << checked.output;
    const Result<StoredRun> run = load_latest_run(db);
    ASSERT_TRUE(run) << run.status().message;
    size_t ran = 0;
    for (const ResultRecord& r : run->results) ran += r.status == ResultStatus::passed ? 1 : 0;
    EXPECT_EQ(ran, expected) << kernels << ":\n" << checked.output;
  }
}

}  // namespace
}  // namespace attnbench
