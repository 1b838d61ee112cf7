// Planted bugs (issue 14, "Must show"; issues 15, 16): each a test-only variant of cuda.flash2,
// cuda.flash3_wg1, cuda.flash3_ws, cuda.flash3_fp8 or its _incoherent, _block, _ws and
// _ws_transpose made from the real kernel source with one edit
// (tests/test_kernels/planted/planted_bugs.cmake, which refuses an edit that does not match), run
// on the emulated device through `attnbench check` as a user runs it. Each must fail with its named
// reason on a case its real kernel passes, so none can pass vacuously; the order-dependent one is
// caught under several schedule seeds, and two seeds record different schedules.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <string>

#include "tests/support/command.h"
#include "tests/support/scratch_directory.h"
#include "tests/support/stored_runs.h"

namespace attnbench {
namespace {

// Two query blocks (the second holds 2 rows: its warps past seqlen_q have no rows), 8 key tiles
// (the pipeline refills stages), one kv head (the row past seqlen_k is past the end of k).
constexpr const char* kShape = "b=1,hq=2,hkv=1,sq=130,sk=511,d=64,dtype=bf16";

// The flash3 stages': two query blocks (of 64 for flash3_wg1, 128 for flash3_ws and flash3; the
// second holds 2 rows), 4 key tiles of 128 on a ring of 2 stages for flash3_wg1 (each stage
// refilled) and of 3 for the warp-specialized K and V rings (stage 0 refilled), at their one
// instantiation.
constexpr const char* kFlash3Shape = "b=1,hq=2,hkv=1,sq=130,sk=511,d=128,dtype=bf16";

ResultRecord check_once(const std::string& kernel, const ScratchDirectory& dir,
                        const std::string& seed = "", const std::string& shape = kShape) {
  const std::string db = dir.file("planted.sqlite");
  const std::string environment =
      "ATTNBENCH_TEST_KERNELS=1 " + (seed.empty() ? "" : "ATTNBENCH_EMU_SEED=" + seed + " ");
  const CommandResult checked =
      run_shell(environment + ATTNBENCH_CLI + " check --devices emu --kernels " + kernel +
                " --shape " + shape + " --db " + db);
  EXPECT_NE(checked.exit_code, -1) << checked.output;
  const Result<StoredRun> run = load_latest_run(db);
  EXPECT_TRUE(run) << run.status().message << "\n" << checked.output;
  if (!run || run->results.size() != 1) return {};
  return run->results[0];
}

struct PlantedBug {
  const char* name;
  ResultStatus status;  // failed: wrong output; error: the emulator's report
  const char* reason;   // what the result's message must say
};

// ctest's test names show the bug, not the struct's bytes.
void PrintTo(const PlantedBug& bug, std::ostream* out) { *out << "test.flash2_" << bug.name; }

class PlantedFlash2Bug : public ::testing::TestWithParam<PlantedBug> {};

TEST_P(PlantedFlash2Bug, FailsWithItsReasonWhereTheKernelPasses) {
  const PlantedBug bug = GetParam();
  const ScratchDirectory dir("attnbench_planted");
  const ResultRecord clean = check_once("cuda.flash2", dir);
  expect_passed(clean, /*deterministic=*/true);
  const ResultRecord planted = check_once(std::string("test.flash2_") + bug.name, dir);
  EXPECT_EQ(planted.kernel, std::string("test.flash2_") + bug.name);
  EXPECT_EQ(planted.status, bug.status) << planted.message;
  EXPECT_NE(planted.message.find(bug.reason), std::string::npos) << planted.message;
}

INSTANTIATE_TEST_SUITE_P(
    Emu, PlantedFlash2Bug,
    ::testing::Values(
        // The refill lands on a stage a slower warp still reads: NaN (in flight) or the next tile.
        PlantedBug{"refill_before_barrier", ResultStatus::failed, "NaN"},
        PlantedBug{"unswizzled_read", ResultStatus::failed, "max|out-ref|"},
        PlantedBug{"short_wait", ResultStatus::failed, "NaN"},
        PlantedBug{"v_not_transposed", ResultStatus::failed, "max|out-ref|"},
        PlantedBug{"tail_guard_off_by_one", ResultStatus::failed,
                   "reads 16 bytes outside every buffer of the case"},
        // Lanes read rows of the tile their neighbours have not written yet.
        PlantedBug{"missing_syncwarp", ResultStatus::failed, "max|out-ref|"},
        PlantedBug{"shuffle_mask_drops_lane", ResultStatus::failed,
                   "(lane 0) is not in its own mask"},
        PlantedBug{"barrier_in_branch", ResultStatus::failed, "returned before it"},
        // A plain store past the end of out: the canaries here, ASan's report in the bounds build.
        PlantedBug{"store_guard_off_by_one", ResultStatus::failed, "canary overwritten"}),
    [](const ::testing::TestParamInfo<PlantedBug>& param_info) {
      return std::string(param_info.param.name);
    });

// cuda.flash2 at the head dims whose shared rows are wider than their data (d 80 in 128-wide rows;
// 192/128, whose V rows are narrower than Q's), each bug at the instantiation it breaks: 8 full
// key tiles of d 80 (the last key's padding chunks lie past the end of K), 4 tiles of 32 keys at
// 192/128 (every V stage written, one refilled).
struct PlantedHeadDimBug {
  const char* name;
  const char* shape;
  const char* reason;  // what the result's message must say
};
void PrintTo(const PlantedHeadDimBug& bug, std::ostream* out) {
  *out << "test.flash2_dims_" << bug.name;
}

class PlantedFlash2HeadDimBug : public ::testing::TestWithParam<PlantedHeadDimBug> {};

TEST_P(PlantedFlash2HeadDimBug, FailsWithItsReasonWhereTheKernelPasses) {
  const PlantedHeadDimBug bug = GetParam();
  const ScratchDirectory dir("attnbench_planted_dims");
  expect_passed(check_once("cuda.flash2", dir, "", bug.shape), /*deterministic=*/true);
  const ResultRecord planted =
      check_once(std::string("test.flash2_dims_") + bug.name, dir, "", bug.shape);
  EXPECT_EQ(planted.status, ResultStatus::failed) << planted.message;
  EXPECT_NE(planted.message.find(bug.reason), std::string::npos) << planted.message;
}

INSTANTIATE_TEST_SUITE_P(
    Emu, PlantedFlash2HeadDimBug,
    ::testing::Values(PlantedHeadDimBug{"copies_past_head_dim",
                                        "b=1,hq=2,hkv=1,sq=130,sk=512,d=80,dtype=bf16",
                                        "bytes past the end of k)"},
                      PlantedHeadDimBug{"v_copied_at_qk_width",
                                        "b=1,hq=2,hkv=1,sq=130,sk=100,dqk=192,dv=128,dtype=bf16",
                                        "is outside the block's shared memory"}),
    [](const ::testing::TestParamInfo<PlantedHeadDimBug>& param_info) {
      return std::string(param_info.param.name);
    });

// The flash3 pipelines: a stage refilled before the consumers' wgmma wait gives NaN under every
// seed (the TMA's box is NaN from issue, and the product is computed at the wait). In
// cuda.flash3_wg1 the thread that waits issues the refill itself; in cuda.flash3_ws and
// cuda.flash3 the producer warpgroup does, once every consumer thread has released the stage (V's
// in their rings of their own), and runs while the consumers' tensor cores work (the emulated
// wait lets other warps run first).
struct PlantedRelease {
  const char* stage;  // the kernel: cuda.<stage>
  const char* bug;    // the variant: test.<stage>_<bug>
};
void PrintTo(const PlantedRelease& p, std::ostream* out) { *out << p.stage << "_" << p.bug; }

class PlantedFlash3Bug : public ::testing::TestWithParam<PlantedRelease> {};

TEST_P(PlantedFlash3Bug, AStageReleasedBeforeTheWgmmaWaitFails) {
  const PlantedRelease planted = GetParam();
  const std::string stage = planted.stage;
  const ScratchDirectory dir("attnbench_planted_flash3");
  expect_passed(check_once("cuda." + stage, dir, "", kFlash3Shape), /*deterministic=*/true);
  const std::string variant = "test." + stage + "_" + planted.bug;
  for (const char* seed : {"1", "2", "3"}) {
    SCOPED_TRACE(std::string("seed ") + seed);
    const ResultRecord planted_result = check_once(variant, dir, seed, kFlash3Shape);
    EXPECT_EQ(planted_result.kernel, variant);
    EXPECT_EQ(planted_result.status, ResultStatus::failed) << planted_result.message;
    EXPECT_NE(planted_result.message.find("NaN"), std::string::npos) << planted_result.message;
  }
}

INSTANTIATE_TEST_SUITE_P(Emu, PlantedFlash3Bug,
                         ::testing::Values(PlantedRelease{"flash3_wg1", "release_before_wait"},
                                           PlantedRelease{"flash3_ws", "release_before_wait"},
                                           PlantedRelease{"flash3", "v_released_before_wait"}),
                         [](const ::testing::TestParamInfo<PlantedRelease>& param_info) {
                           return std::string(param_info.param.stage);
                         });

// A producer refilling a stage before both consumers have released it re-arms the stage's "full"
// barrier while they have yet to wait on it: the emulator stops the launch at the arrival that
// exceeds the barrier's count, naming it (what a GPU would do instead is a race), on `shape`
// where `kernel` passes.
void expect_refill_stopped_by_the_emulator(const std::string& kernel, const std::string& variant,
                                           const std::string& shape, const ScratchDirectory& dir) {
  expect_passed(check_once(kernel, dir, "", shape), /*deterministic=*/true);
  const ResultRecord planted = check_once(variant, dir, "", shape);
  EXPECT_EQ(planted.kernel, variant);
  EXPECT_EQ(planted.status, ResultStatus::failed) << planted.message;
  EXPECT_EQ(planted.message.rfind("kernel error:", 0), 0u) << planted.message;
  EXPECT_NE(planted.message.find("mbarrier.arrive"), std::string::npos) << planted.message;
  EXPECT_NE(planted.message.find("arrives once more than the barrier's count"), std::string::npos)
      << planted.message;
}

// cuda.flash3's K ring: four key tiles on a ring of three stages, stage 0 refilled once.
TEST(PlantedFlash3KRingBug, RefillWithoutEmptyWaitIsStoppedByTheEmulator) {
  const ScratchDirectory dir("attnbench_planted_flash3_k_refill");
  expect_refill_stopped_by_the_emulator("cuda.flash3", "test.flash3_k_refill_without_empty_wait",
                                        kFlash3Shape, dir);
}

// cuda.flash3[persistent=on] on the emulated device's 4 SMs: 6 blocks of 2 to 4 key tiles, so
// CTAs 0 and 1 run two blocks each. Loading the next block's Q before the consumers release its
// tile overwrites Q while they still compute the previous block's scores from it.
TEST(PlantedFlash3PersistentBug, QReloadedBeforeTheOutputLeftItsTileFails) {
  const ScratchDirectory dir("attnbench_planted_flash3_persistent");
  const std::string shape = "b=1,hq=2,hkv=1,sq=300,sk=400,d=128,dtype=bf16,mask=causal_br";
  expect_passed(check_once("'cuda.flash3[persistent=on]'", dir, "", shape),
                /*deterministic=*/true);
  const std::string variant = "test.flash3_persistent_q_reloaded_before_store";
  const ResultRecord planted = check_once(variant, dir, "", shape);
  EXPECT_EQ(planted.kernel, variant);
  EXPECT_EQ(planted.status, ResultStatus::failed) << planted.message;
  EXPECT_NE(planted.message.find("NaN"), std::string::npos) << planted.message;
}

// The planted variant fails its check with a wrong value (the output past its bound, or the LSE
// past its allowance; which one trips first depends on the fresh inputs) on `shape` where
// `kernel` passes it. Not a crash, a canary or a NaN: those would hide the bug being planted.
void expect_fails_where_the_kernel_passes(const std::string& kernel, const std::string& variant,
                                          const std::string& shape, const ScratchDirectory& dir) {
  expect_passed(check_once(kernel, dir, "", shape), /*deterministic=*/true);
  const ResultRecord planted = check_once(variant, dir, "", shape);
  EXPECT_EQ(planted.kernel, variant);
  EXPECT_EQ(planted.status, ResultStatus::failed) << planted.message;
  const bool wrong_value =
      planted.message.rfind("max|out-ref|", 0) == 0 || planted.message.rfind("LSE error", 0) == 0;
  EXPECT_TRUE(wrong_value) << planted.message;
}

// cuda.flash3 at 192/128 (issue 39): K's tiles loaded at V's width leave a third of each K tile
// unwritten (NaN); S over d_v in the full turns is finite and wrong. GQA, two query blocks,
// three key tiles on the ring of two stages.
TEST(PlantedFlash3HeadDimBug, KLoadedAtVsWidthGivesNaN) {
  const ScratchDirectory dir("attnbench_planted_flash3_dims");
  const std::string shape = "b=1,hq=2,hkv=1,sq=130,sk=300,dqk=192,dv=128,dtype=bf16";
  expect_passed(check_once("cuda.flash3", dir, "", shape), /*deterministic=*/true);
  const ResultRecord planted = check_once("test.flash3_dims_k_loaded_at_v_width", dir, "", shape);
  EXPECT_EQ(planted.status, ResultStatus::failed) << planted.message;
  EXPECT_NE(planted.message.find("NaN"), std::string::npos) << planted.message;
}
TEST(PlantedFlash3HeadDimBug, ScoresOverDvFailTheCheck) {
  const ScratchDirectory dir("attnbench_planted_flash3_dims");
  expect_fails_where_the_kernel_passes("cuda.flash3", "test.flash3_dims_scores_over_d_v",
                                       "b=1,hq=2,hkv=1,sq=130,sk=300,dqk=192,dv=128,dtype=bf16",
                                       dir);
}

// cuda.flash3_fp8 (issue 16): P's e4m3 fragment packed in S's accumulator order (as a 16-bit
// kernel's), and Q's and K's descales left out of the scores. Per-tensor descales, so they are
// not 1; two query blocks, four key tiles on the ring of two stages.
constexpr const char* kFlash3Fp8Shape =
    "b=1,hq=2,hkv=1,sq=130,sk=511,d=128,dtype=e4m3,out=e4m3,fp8_scaling=per_tensor";
// More key tiles than cuda.flash3_fp8_ws's rings hold (6 stages at d 128), one CTA.
constexpr const char* kFlash3Fp8RingShape =
    "b=1,hq=1,sq=128,sk=1000,d=128,dtype=e4m3,out=e4m3,fp8_scaling=per_tensor";

class PlantedFlash3Fp8Bug : public ::testing::TestWithParam<const char*> {};

TEST_P(PlantedFlash3Fp8Bug, FailsItsCheckWhereTheKernelPasses) {
  const ScratchDirectory dir("attnbench_planted_flash3_fp8");
  expect_fails_where_the_kernel_passes(
      "cuda.flash3_fp8", std::string("test.flash3_fp8_") + GetParam(), kFlash3Fp8Shape, dir);
}

INSTANTIATE_TEST_SUITE_P(Emu, PlantedFlash3Fp8Bug,
                         ::testing::Values("p_in_accumulator_order", "qk_descales_ignored"),
                         [](const ::testing::TestParamInfo<const char*>& param_info) {
                           return std::string(param_info.param);
                         });

// cuda.flash3_fp8_ws (issue 16), the warp-specialized FP8 forward, on the same shape (its query
// blocks of 128: the first holds both consumers' rows, the second 2). Consumer 1 reading consumer
// 0's rows of Q gives wrong rows.
TEST(PlantedFlash3Fp8WsBug, ConsumerRowsNotOffsetFailsItsCheckWhereTheKernelPasses) {
  const ScratchDirectory dir("attnbench_planted_flash3_fp8_ws_rows");
  expect_fails_where_the_kernel_passes(
      "cuda.flash3_fp8_ws", "test.flash3_fp8_ws_consumer_rows_not_offset", kFlash3Fp8Shape, dir);
}

// cuda.flash3_fp8_ws's K ring (K and V^T in rings of their own since issue 38).
TEST(PlantedFlash3Fp8WsBug, RefillWithoutEmptyWaitIsStoppedByTheEmulator) {
  const ScratchDirectory dir("attnbench_planted_flash3_fp8_ws_refill");
  // Eight key tiles on K's ring of six stages (as many as fit at d 128): stages 0 and 1 refilled.
  expect_refill_stopped_by_the_emulator("cuda.flash3_fp8_ws",
                                        "test.flash3_fp8_ws_refill_without_empty_wait",
                                        kFlash3Fp8RingShape, dir);
}

// cuda.flash3_fp8_ws_transpose (issue 16), whose producer warpgroup writes V^T: in key order, P's
// e4m3 fragment (which holds keys in v_key_of_column's order) meets other keys' V.
TEST(PlantedFlash3Fp8WsTransposeBug, KeyOrderFailsItsCheckWhereTheKernelPasses) {
  const ScratchDirectory dir("attnbench_planted_flash3_fp8_ws_transpose_order");
  expect_fails_where_the_kernel_passes("cuda.flash3_fp8_ws_transpose",
                                       "test.flash3_fp8_ws_transpose_transpose_in_key_order",
                                       kFlash3Fp8Shape, dir);
}

// V^T's stores left unfenced: the tensor cores read shared memory through the async proxy, which
// need not see them. The emulator stops the launch at the wgmma reading such a byte, naming it.
TEST(PlantedFlash3Fp8WsTransposeBug, UnfencedTransposeIsStoppedByTheEmulator) {
  const ScratchDirectory dir("attnbench_planted_flash3_fp8_ws_transpose_fence");
  expect_passed(check_once("cuda.flash3_fp8_ws_transpose", dir, "", kFlash3Fp8Shape),
                /*deterministic=*/true);
  const std::string variant = "test.flash3_fp8_ws_transpose_transpose_without_proxy_fence";
  const ResultRecord planted = check_once(variant, dir, "", kFlash3Fp8Shape);
  EXPECT_EQ(planted.kernel, variant);
  EXPECT_EQ(planted.status, ResultStatus::failed) << planted.message;
  EXPECT_EQ(planted.message.rfind("kernel error:", 0), 0u) << planted.message;
  EXPECT_NE(planted.message.find("no fence.proxy.async since"), std::string::npos)
      << planted.message;
}

// cuda.flash3_fp8 with per-(batch, head) descales (fp8_scaling per_head), GQA 2:1 over two
// batches: the tensor's descale (1) read in place of each head's.
TEST(PlantedFlash3Fp8PerHeadBug, FailsItsCheckWhereTheKernelPasses) {
  const ScratchDirectory dir("attnbench_planted_flash3_fp8_per_head");
  expect_fails_where_the_kernel_passes(
      "cuda.flash3_fp8", "test.flash3_fp8_per_head_descales_ignored",
      "b=2,hq=4,hkv=2,sq=130,sk=200,d=128,dtype=e4m3,out=e4m3,fp8_scaling=per_head", dir);
}

// cuda.flash3_fp8_incoherent (issue 16), through its passes on bf16: the rotation without its
// 1 / sqrt(d), and the forward reading the params' Q descale (1) in place of the pass's.
constexpr const char* kFlash3Fp8IncoherentShape = "b=1,hq=2,hkv=1,sq=130,sk=511,d=128,dtype=bf16";

class PlantedFlash3Fp8IncoherentBug : public ::testing::TestWithParam<const char*> {};

TEST_P(PlantedFlash3Fp8IncoherentBug, FailsItsCheckWhereTheKernelPasses) {
  const ScratchDirectory dir("attnbench_planted_flash3_fp8_incoherent");
  expect_fails_where_the_kernel_passes("cuda.flash3_fp8_incoherent",
                                       std::string("test.flash3_fp8_incoherent_") + GetParam(),
                                       kFlash3Fp8IncoherentShape, dir);
}

// cuda.flash3_fp8_block (issue 16): every key tile scaled by K's first block descale. Four key
// blocks of 128; sink keys (0, 170 and 340) give the first three a far larger amax than the last.
// The sinks take most of each row's weight, so the wrong tile moves the output by 1.6-3.3x the
// bound (22 fresh draws, 2026-12-05) and now and then by less (CI saw one draw pass, one fail
// by its LSE only): the bug must be caught in one of three fresh draws, the kernel pass in each.
TEST(PlantedFlash3Fp8BlockBug, FailsItsCheckWhereTheKernelPasses) {
  const ScratchDirectory dir("attnbench_planted_flash3_fp8_block");
  const std::string shape = std::string(kFlash3Fp8IncoherentShape) + " --dist sink";
  const std::string variant = "test.flash3_fp8_block_first_k_descale_for_every_tile";
  int caught = 0;
  std::string messages;
  for (int draw = 0; draw < 3 && caught == 0; ++draw) {
    expect_passed(check_once("cuda.flash3_fp8_block", dir, "", shape), /*deterministic=*/true);
    const ResultRecord planted = check_once(variant, dir, "", shape);
    EXPECT_EQ(planted.kernel, variant);
    const bool wrong_value =
        planted.status == ResultStatus::failed && (planted.message.rfind("max|out-ref|", 0) == 0 ||
                                                   planted.message.rfind("LSE error", 0) == 0);
    caught += wrong_value;
    messages += "draw " + std::to_string(draw + 1) + ": " +
                std::string(result_status_name(planted.status)) + " " + planted.message + "\n";
  }
  EXPECT_EQ(caught, 1) << messages;
}

INSTANTIATE_TEST_SUITE_P(Emu, PlantedFlash3Fp8IncoherentBug,
                         ::testing::Values("rotation_unnormalized", "computed_q_descale_ignored"),
                         [](const ::testing::TestParamInfo<const char*>& param_info) {
                           return std::string(param_info.param);
                         });

// cuda.naive's backward (issue 37): GQA 2:1 with tails and a bottom-right mask; each planted bug
// fails naming the gradient it breaks, where cuda.naive passes the same case.
constexpr const char* kNaiveBackwardShape =
    "b=1,hq=2,hkv=1,sq=113,sk=203,d=64,dtype=fp16,mask=causal_br,pass=bwd";

// A planted backward bug: the variant's name after its family's prefix, and the gradient its
// failure must name first.
struct BackwardBug {
  const char* name;
  const char* reason;
};
void PrintTo(const BackwardBug& bug, std::ostream* out) { *out << bug.name; }
std::string backward_bug_test_name(const ::testing::TestParamInfo<BackwardBug>& param_info) {
  return param_info.param.name;
}

class PlantedNaiveBackwardBug : public ::testing::TestWithParam<BackwardBug> {};

TEST_P(PlantedNaiveBackwardBug, FailsNamingTheGradientWhereTheKernelPasses) {
  const auto [bug, reason] = GetParam();
  const ScratchDirectory dir("attnbench_planted_naive_backward");
  expect_passed(check_once("cuda.naive", dir, "", kNaiveBackwardShape), /*deterministic=*/true);
  const ResultRecord planted =
      check_once(std::string("test.cuda_naive_bwd_") + bug, dir, "", kNaiveBackwardShape);
  EXPECT_EQ(planted.status, ResultStatus::failed) << planted.message;
  EXPECT_EQ(planted.message.rfind(reason, 0), 0u) << planted.message;
}

INSTANTIATE_TEST_SUITE_P(Emu, PlantedNaiveBackwardBug,
                         ::testing::Values(BackwardBug{"no_softmax_scale", "dq: max|dq-ref|"},
                                           BackwardBug{"delta_from_dout", "dq: max|dq-ref|"},
                                           // dQ reads no group sum: dK is the first to fail.
                                           BackwardBug{"gqa_not_summed", "dk: max|dk-ref|"}),
                         backward_bug_test_name);

// cuda.flash2's backward (issue 37) at its planted instantiation (d 64, bf16): GQA 2:1, tails,
// a bottom-right causal mask whose first query tile sees no key of the last key block; each
// planted value bug fails naming the gradient it breaks first, where cuda.flash2 passes.
constexpr const char* kFlash2BackwardShape =
    "b=1,hq=2,hkv=1,sq=113,sk=203,d=64,dtype=bf16,mask=causal_br,pass=bwd";

class PlantedFlash2BackwardBug : public ::testing::TestWithParam<BackwardBug> {};

TEST_P(PlantedFlash2BackwardBug, FailsNamingTheGradientWhereTheKernelPasses) {
  const auto [bug, reason] = GetParam();
  const ScratchDirectory dir("attnbench_planted_flash2_backward");
  expect_passed(check_once("cuda.flash2", dir, "", kFlash2BackwardShape),
                /*deterministic=*/false);
  const ResultRecord planted =
      check_once(std::string("test.flash2_bwd_") + bug, dir, "", kFlash2BackwardShape);
  EXPECT_EQ(planted.status, ResultStatus::failed) << planted.message;
  EXPECT_EQ(planted.message.rfind(reason, 0), 0u) << planted.message;
}

INSTANTIATE_TEST_SUITE_P(Emu, PlantedFlash2BackwardBug,
                         ::testing::Values(BackwardBug{"delta_from_dout", "dq: max|dq-ref|"},
                                           // dQ's convert keeps the scale: dK is the first to fail.
                                           BackwardBug{"no_softmax_scale", "dk: max|dk-ref|"},
                                           BackwardBug{"masked_tile_unmasked", "dq: max|dq-ref|"}),
                         backward_bug_test_name);

// cuda.flash_decode (issue 39) at its planted instantiation (d 64, bf16): a ragged decode batch
// over a paged cache of 16-key pages, GQA 4:1, its keys cut into several splits (3 on the
// emulated device's SMs); every sequence's last page is partial (1000, 300 and 37 keys). Each bug
// fails the output check where cuda.flash_decode passes.
// (Quoted for the shell: the list's parentheses.)
constexpr const char* kDecodeShape =
    "'hq=4,hkv=1,d=64,dtype=bf16,mask=causal_br,varlen=list(1:1000,2:300,1:37),page=16'";

class PlantedFlashDecodeBug : public ::testing::TestWithParam<BackwardBug> {};

TEST_P(PlantedFlashDecodeBug, FailsItsCheckWhereTheKernelPasses) {
  const auto [bug, reason] = GetParam();
  const ScratchDirectory dir("attnbench_planted_flash_decode");
  const ResultRecord clean = check_once("cuda.flash_decode", dir, "", kDecodeShape);
  expect_passed(clean, /*deterministic=*/true);
  const auto details = nlohmann::json::parse(clean.details_json, nullptr, false);
  EXPECT_GT(details.value("splits", 0), 1) << clean.details_json;  // the combine has work
  const ResultRecord planted =
      check_once(std::string("test.flash_decode_") + bug, dir, "", kDecodeShape);
  EXPECT_EQ(planted.status, ResultStatus::failed) << planted.message;
  EXPECT_NE(planted.message.find(reason), std::string::npos) << planted.message;
}

INSTANTIATE_TEST_SUITE_P(Emu, PlantedFlashDecodeBug,
                         ::testing::Values(BackwardBug{"lse_dropped", "max|out-ref|"},
                                           BackwardBug{"page_off_by_one", "max|out-ref|"},
                                           BackwardBug{"last_page_whole", "max|out-ref|"}),
                         backward_bug_test_name);

TEST(PlantedFlash2Bug, TheOrderDependentBugIsFoundUnderEightSeedsWithDifferentSchedules) {
  const ScratchDirectory dir("attnbench_planted_seeds");
  int caught = 0;
  std::set<uint64_t> schedules;
  for (int seed = 1; seed <= 8; ++seed) {
    const ResultRecord r =
        check_once("test.flash2_refill_before_barrier", dir, std::to_string(seed));
    caught += r.status == ResultStatus::failed;
    const nlohmann::json details = nlohmann::json::parse(r.details_json, nullptr, false);
    ASSERT_TRUE(details.contains("emu_schedule_hashes")) << r.details_json;
    for (const auto& hash : details["emu_schedule_hashes"]) schedules.insert(hash.get<uint64_t>());
  }
  std::printf("refill before the barrier: caught under %d of 8 seeds, %zu distinct schedules\n",
              caught, schedules.size());
  EXPECT_GE(caught, 1);
  EXPECT_GE(schedules.size(), 2u);
}

}  // namespace
}  // namespace attnbench
