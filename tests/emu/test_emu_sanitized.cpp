// The emulated device under a sanitizer (issue 14, item 5), built only in the race build
// (ATTNBENCH_EMU_SANITIZE=thread, label emu-race) or the bounds build (=address, emu-bounds):
//   - every in-house CUDA kernel passes a representative subset of the ctest suite's shapes (GQA,
//     causal from the bottom right, tails, head dims 64 and 128, fp16 and bf16) with the
//     sanitizer watching: no report on a correct kernel;
//   - race build: the planted races of cuda.flash2 (a refill before its barrier, a cp.async wait
//   one
//     group short, the epilogue's __syncwarp removed) fail as data races naming the two threads
//     and the kernel's source lines, under every seed tried (ThreadSanitizer sees the unordered
//     pair whether or not this schedule read a wrong value);
//   - bounds build: a plain store past the end of `out` fails at its line, naming the buffer.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/emu/sanitizer.h"
#include "tests/support/command.h"
#include "tests/support/scratch_directory.h"
#include "tests/support/stored_runs.h"

namespace attnbench {
namespace {

using emu::Sanitizer;

// The subset: GQA with causal_br and tails in both sequences (d=64, bf16); one query row tail
// and a longer key side at d=128, fp16; two batches with a query side past one tile.
// And the Hopper stages' one instantiation (d=128, bf16): GQA, causal_br, tails, two key tiles;
// the same at e4m3 for cuda.flash3_fp8 (its layout pass, then TMA reading V^T from scratch); the
// FP8 kernels' passes before the forward on the two 16-bit shapes at d=128.
const char* const kSubset[] = {
    "b=1,hq=2,hkv=1,sq=70,sk=130,d=64,dtype=bf16,mask=causal_br",
    "b=1,hq=1,sq=17,sk=113,d=128,dtype=fp16",
    "b=2,hq=1,sq=65,sk=65,d=64,dtype=fp16,mask=causal",
    "b=1,hq=2,hkv=1,sq=70,sk=200,d=128,dtype=bf16,mask=causal_br",
    "b=1,hq=2,hkv=1,sq=70,sk=200,d=128,dtype=e4m3,out=e4m3,fp8_scaling=per_tensor,mask=causal_br",
};

// The planted bugs' cases: flash2, two query blocks and eight key tiles of 64; the flash3 stages,
// one block (both consumer warpgroups' 64 rows for flash3) and three key tiles of 128 through
// flash3_wg1's two-stage ring, four (the last of 16 keys) through flash3's three-stage K and V
// rings, so a stage is refilled: the race shows at every seed, in half the time of two blocks
// (8.6 s against 15 s a seed under ThreadSanitizer, 2026-12-06).
std::string planted_shape(const std::string& family) {
  if (family == "flash2") return "b=1,hq=2,hkv=1,sq=130,sk=511,d=64,dtype=bf16";
  // Three key blocks, so that CTAs add into the same dQ rows; two query tiles.
  if (family == "flash2_bwd") return "b=1,hq=2,hkv=1,sq=70,sk=150,d=64,dtype=bf16,pass=bwd";
  // cuda.flash3's K and V rings hold 3 stages: a fourth key tile (16 keys) refills one.
  if (family == "flash3") return "b=1,hq=1,sq=128,sk=400,d=128,dtype=bf16";
  // cuda.flash3[persistent=on] on the emulated device's 4 SMs: 6 blocks of 2 to 4 key tiles, so
  // CTAs 0 and 1 run two each, their rings wrapping across them.
  if (family == "flash3_persistent") {
    return "b=1,hq=2,hkv=1,sq=300,sk=400,d=128,dtype=bf16,mask=causal_br";
  }
  // cuda.flash3_fp8_ws_transpose's rings hold 4 stages: six key tiles refill two.
  if (family == "flash3_fp8_ws_transpose") {
    return "b=1,hq=1,sq=128,sk=700,d=128,dtype=e4m3,out=e4m3,fp8_scaling=per_tensor";
  }
  return "b=1,hq=1,sq=128,sk=300,d=128,dtype=bf16";
}

std::string build_name() { return emu::sanitizer_build_name(); }

Result<StoredRun> check(const std::string& kernels, const std::string& shapes,
                        const ScratchDirectory& dir, const std::string& seed = "") {
  const std::string db = dir.file("sanitized.sqlite");
  const std::string environment =
      "ATTNBENCH_TEST_KERNELS=1 " + (seed.empty() ? "" : "ATTNBENCH_EMU_SEED=" + seed + " ");
  const CommandResult checked = run_shell(environment + ATTNBENCH_CLI +
                                          " check --devices emu --case-timeout 300 --kernels '" +
                                          kernels + "' " + shapes + " --db " + db);
  EXPECT_NE(checked.exit_code, -1) << checked.output;
  Result<StoredRun> run = load_latest_run(db);
  EXPECT_TRUE(run) << run.status().message << "\n" << checked.output;
  return run;
}

TEST(SanitizedEmu, EveryInHouseKernelPassesTheSubsetWithNoReport) {
  ASSERT_NE(emu::kSanitizer, Sanitizer::none) << "built only in a sanitizer build";
  const ScratchDirectory dir("attnbench_emu_sanitized");
  std::string shapes;
  for (const char* shape : kSubset) shapes += std::string(" --shape ") + shape;
  const Result<StoredRun> run = check("cuda.*", shapes, dir);
  ASSERT_TRUE(run);
  int passed = 0;
  int skipped = 0;
  for (const ResultRecord& r : run->results) {
    SCOPED_TRACE(r.kernel + " " + r.series_key);
    if (r.kernel == "cuda.naive_cublas") {
      EXPECT_EQ(r.status, ResultStatus::skipped) << r.message;
      continue;
    }
    if (r.status == ResultStatus::skipped) {  // only outside a table: the Hopper stages
      const bool outside_table = r.message.find("not supported") != std::string::npos ||
                                 r.message.find("not instantiated") != std::string::npos;
      EXPECT_TRUE(outside_table) << r.message;
      ++skipped;
      continue;
    }
    expect_passed(r, /*deterministic=*/true);
    const nlohmann::json details = nlohmann::json::parse(r.details_json, nullptr, false);
    EXPECT_EQ(details.value("emu_build", ""), build_name()) << r.details_json;
    EXPECT_FALSE(details.contains("emu_sanitizer_report")) << r.details_json;
    passed += r.status == ResultStatus::passed;
  }
  // Seven kernels over the four 16-bit shapes; the three Hopper stages only at d=128, bf16 (the
  // fourth); the six FP8 kernels at d=128: cuda.flash3_fp8 on the two 16-bit shapes there (the
  // second and fourth) and at e4m3 (the fifth, where every other kernel skips), its two
  // warp-specialized stages at e4m3 (cuda.flash3_fp8_ws, cuda.flash3_fp8_ws_transpose), its
  // three 16-bit variants on the two 16-bit shapes.
  // cuda.flash2_deterministic skips them all: its table holds the backward passes alone.
  constexpr int kInHouseKernels = 7;
  constexpr int kHopperStages = 3;
  constexpr int kFp8Kernels = 6;
  constexpr int kBackwardOnly = 1;
  // cuda.flash_decode skips them all (more than 16 query rows): its serving case is below.
  constexpr int kDecodeOnly = 1;
  constexpr int kFp8Cases = 3 + 2 + 3 * 2;
  constexpr int k16BitShapes = static_cast<int>(std::size(kSubset)) - 1;
  EXPECT_EQ(passed + skipped,
            (kInHouseKernels + kHopperStages + kFp8Kernels + kBackwardOnly + kDecodeOnly) *
                static_cast<int>(std::size(kSubset)));
  EXPECT_EQ(passed, kInHouseKernels * k16BitShapes + kHopperStages + kFp8Cases);
}

// cuda.flash_decode and its unsplit variant (issue 39) under the sanitizer: a ragged decode batch
// over a paged cache (16-key pages, partial last pages, one sequence with no key), GQA 4:1, the
// keys cut into splits whose partial rows the combine reads; no report.
TEST(SanitizedEmu, TheDecodeKernelPassesAServingBatchWithNoReport) {
  ASSERT_NE(emu::kSanitizer, Sanitizer::none) << "built only in a sanitizer build";
  const ScratchDirectory dir("attnbench_emu_sanitized_decode");
  const Result<StoredRun> run = check(
      "cuda.flash_decode,cuda.flash_decode[splits=1]",
      "--shape 'hq=4,hkv=1,d=64,dtype=bf16,mask=causal_br,varlen=list(1:700,4:300,2:0),page=16'",
      dir);
  ASSERT_TRUE(run);
  ASSERT_EQ(run->results.size(), 2u);
  for (const ResultRecord& r : run->results) {
    SCOPED_TRACE(r.kernel);
    expect_passed(r, /*deterministic=*/true);
    const nlohmann::json details = nlohmann::json::parse(r.details_json, nullptr, false);
    EXPECT_FALSE(details.contains("emu_sanitizer_report")) << r.details_json;
  }
}

// The in-house backwards (issue 37) under the sanitizer: GQA 2:1 (dK and dV summed over the
// group), causal from the bottom right, tails on both sides, three key blocks of cuda.flash2's
// (its CTAs add dQ into one accumulator with atomics, the deterministic variant's into one each);
// no report; deterministic but for cuda.flash2's atomics.
TEST(SanitizedEmu, EveryBackwardPassesWithNoReport) {
  ASSERT_NE(emu::kSanitizer, Sanitizer::none) << "built only in a sanitizer build";
  const ScratchDirectory dir("attnbench_emu_sanitized_backward");
  const Result<StoredRun> run =
      check("cuda.naive,cuda.flash2,cuda.flash2_deterministic",
            "--shape b=1,hq=2,hkv=1,sq=70,sk=130,d=64,dtype=bf16,mask=causal_br,pass=bwd", dir);
  ASSERT_TRUE(run);
  ASSERT_EQ(run->results.size(), 3u);
  for (const ResultRecord& r : run->results) {
    SCOPED_TRACE(r.kernel);
    expect_passed(r, /*deterministic=*/r.kernel != "cuda.flash2");
    EXPECT_EQ(r.problem.pass, Pass::bwd);
    const nlohmann::json details = nlohmann::json::parse(r.details_json, nullptr, false);
    EXPECT_EQ(details.value("emu_build", ""), build_name()) << r.details_json;
    EXPECT_FALSE(details.contains("emu_sanitizer_report")) << r.details_json;
  }
}

// cuda.flash3's variants (`attnbench tune`) at the planted bugs' shape, its rings wrapping (four
// key tiles on three stages; on two for [stages=2]; three of 176 keys on two for
// [stages=2,block_n=176]), causal from the bottom right so the last tile is masked: without the
// turns ([pingpong=off]) the two consumers meet only at the rings; [probe=clock64] writes its
// records besides; [persistent=on] is checked again where its CTAs run several blocks each.
TEST(SanitizedEmu, EveryFlash3VariantPassesWithNoReport) {
  ASSERT_NE(emu::kSanitizer, Sanitizer::none) << "built only in a sanitizer build";
  const ScratchDirectory dir("attnbench_emu_sanitized_variants");
  const Result<StoredRun> run =
      check("cuda.flash3[*]", "--shape " + planted_shape("flash3") + ",mask=causal_br", dir);
  ASSERT_TRUE(run);
  ASSERT_EQ(run->results.size(), 6u);
  // [persistent=on] again where its CTAs run several blocks each.
  const Result<StoredRun> persistent =
      check("cuda.flash3[persistent=on]", "--shape " + planted_shape("flash3_persistent"), dir);
  ASSERT_TRUE(persistent);
  ASSERT_EQ(persistent->results.size(), 1u);
  std::vector<ResultRecord> results = run->results;
  results.push_back(persistent->results[0]);
  for (const ResultRecord& r : results) {
    SCOPED_TRACE(r.kernel);
    expect_passed(r, /*deterministic=*/true);
    const nlohmann::json details = nlohmann::json::parse(r.details_json, nullptr, false);
    EXPECT_EQ(details.value("emu_build", ""), build_name()) << r.details_json;
    EXPECT_FALSE(details.contains("emu_sanitizer_report")) << r.details_json;
  }
}

// cuda.flash2 and cuda.flash3 where their shared rows are wider than their data: d 80 (128-wide
// rows: flash2's last chunks never copied nor read, flash3's TMA boxes zero-filled past d and its
// P V at N = 128) and 192/128 (V's rows narrower than Q's, O staged through Q's), each with a
// refilled stage (flash3: more key tiles than its 3 and 2 stages) and a ragged last tile; no
// report.
TEST(SanitizedEmu, FlashKernelsAtTheirPaddedHeadDimsPassWithNoReport) {
  ASSERT_NE(emu::kSanitizer, Sanitizer::none) << "built only in a sanitizer build";
  const ScratchDirectory dir("attnbench_emu_sanitized_dims");
  const Result<StoredRun> run =
      check("cuda.flash2,cuda.flash3",
            "--shape b=1,hq=1,sq=130,sk=450,d=80,dtype=bf16,mask=causal_br"
            " --shape b=1,hq=1,sq=130,sk=300,dqk=192,dv=128,dtype=fp16",
            dir);
  ASSERT_TRUE(run);
  ASSERT_EQ(run->results.size(), 4u);
  for (const ResultRecord& r : run->results) {
    SCOPED_TRACE(r.series_key);
    expect_passed(r, /*deterministic=*/true);
    const nlohmann::json details = nlohmann::json::parse(r.details_json, nullptr, false);
    EXPECT_EQ(details.value("emu_build", ""), build_name()) << r.details_json;
    EXPECT_FALSE(details.contains("emu_sanitizer_report")) << r.details_json;
  }
}

struct PlantedReport {
  const char* family;  // flash2, flash2_bwd, flash3_wg1 or flash3 (planted_bugs.cmake)
  const char* bug;
  Sanitizer sanitizer;  // the build that reports it this way
  const char* kind;     // the report's kind, first in the message
  const char* detail;   // what else the message must say
};
void PrintTo(const PlantedReport& p, std::ostream* out) {
  *out << "test." << p.family << "_" << p.bug;
}

class PlantedUnderSanitizer : public ::testing::TestWithParam<PlantedReport> {};

TEST_P(PlantedUnderSanitizer, FailsWithTheSanitizersReportAtTheKernelsLine) {
  const PlantedReport planted = GetParam();
  const ScratchDirectory dir("attnbench_emu_sanitized_planted");
  // Three seeds, three schedules: the sanitizer sees the bug in each, not only when it bites.
  for (const char* seed : {"1", "2", "3"}) {
    SCOPED_TRACE(std::string("seed ") + seed);
    const std::string variant = std::string(planted.family) + "_" + planted.bug;
    const Result<StoredRun> run =
        check("test." + variant, "--shape " + planted_shape(planted.family), dir, seed);
    ASSERT_TRUE(run);
    ASSERT_EQ(run->results.size(), 1u);
    const ResultRecord& r = run->results[0];
    EXPECT_EQ(r.status, ResultStatus::failed) << r.message;
    const std::string prefix = "emu (" + build_name() + " build): " + planted.kind;
    EXPECT_NE(r.message.find(prefix), std::string::npos) << r.message;
    // The kernel's own line (the variant's generated source), not the emulator's.
    EXPECT_NE(r.message.find(variant + ".cuh:"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find(planted.detail), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("block ("), std::string::npos) << r.message;  // the emulated thread
    const nlohmann::json details = nlohmann::json::parse(r.details_json, nullptr, false);
    EXPECT_TRUE(details.contains("emu_sanitizer_report")) << r.details_json;  // the whole text
  }
}

constexpr const char* kUnordered = "and no barrier or warp sync orders the two";

// The planted bugs this build's sanitizer reports (the other build's are not instantiated here).
std::vector<PlantedReport> planted_for_this_build() {
  const std::vector<PlantedReport> all = {
      {"flash2", "refill_before_barrier", Sanitizer::thread, "data race: ", kUnordered},
      {"flash2", "short_wait", Sanitizer::thread, "data race: ", kUnordered},
      {"flash2", "missing_syncwarp", Sanitizer::thread, "data race: ", kUnordered},
      {"flash3_wg1", "release_before_wait", Sanitizer::thread, "data race: ", kUnordered},
      {"flash3", "v_released_before_wait", Sanitizer::thread, "data race: ", kUnordered},
      {"flash3_fp8_ws_transpose", "vt_released_before_wait", Sanitizer::thread,
       "data race: ", kUnordered},
      {"flash3_persistent", "q_reloaded_before_store", Sanitizer::thread,
       "data race: ", kUnordered},
      {"flash2_bwd", "dq_plain_add", Sanitizer::thread, "data race: ", kUnordered},
      {"flash2_bwd", "ds_read_before_barrier", Sanitizer::thread, "data race: ", kUnordered},
      {"flash2", "store_guard_off_by_one", Sanitizer::address, "out-of-bounds write",
       "past the end of out"},
  };
  std::vector<PlantedReport> mine;
  for (const PlantedReport& p : all) {
    if (p.sanitizer == emu::kSanitizer) mine.push_back(p);
  }
  return mine;
}

// The build compiles exactly the planted variants its sanitizer reports (planted_bugs.cmake's
// ATTNBENCH_PLANTED_UNDER_<sanitizer>): none without its test here, none of the table missing.
TEST(SanitizedEmu, TheBuildListsExactlyThePlantedBugsItsSanitizerReports) {
  const CommandResult listed =
      run_shell(std::string("ATTNBENCH_TEST_KERNELS=1 ") + ATTNBENCH_CLI + " list kernels --json");
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  std::vector<std::string> built;
  for (const nlohmann::json& kernel : nlohmann::json::parse(listed.output)) {
    const std::string name = kernel.at("name");
    if (kernel.at("backend") == "emu" && name.rfind("test.", 0) == 0) built.push_back(name);
  }
  std::vector<std::string> reported;
  for (const PlantedReport& p : planted_for_this_build()) {
    reported.push_back(std::string("test.") + p.family + "_" + p.bug);
  }
  std::sort(built.begin(), built.end());
  std::sort(reported.begin(), reported.end());
  EXPECT_EQ(built, reported);
}

INSTANTIATE_TEST_SUITE_P(Emu, PlantedUnderSanitizer, ::testing::ValuesIn(planted_for_this_build()),
                         [](const ::testing::TestParamInfo<PlantedReport>& param_info) {
                           return std::string(param_info.param.family) + "_" + param_info.param.bug;
                         });

}  // namespace
}  // namespace attnbench
