// Scale (label `slow`, run on demand): a synthetic year of nightly runs, 365 runs x 2,000 cases
// x 10 samples, written through the store as the runner writes them (one transaction per
// result, every column filled as a GPU run fills it), each run analysed as the nightly job does.
// Then `attnbench regressions --run latest` must answer in under 5 s and the file must stay
// under 1 GiB. The figures are printed.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

#include "harness/store/store.h"
#include "tests/support/problems.h"
#include "tests/support/result_support.h"
#include "tests/support/scratch_directory.h"
#include "tests/support/fresh_seed.h"

namespace attnbench {
namespace {

namespace fs = std::filesystem;

constexpr int kRuns = 365;
constexpr int kKernels = 20;
constexpr int kShapesPerKernel = 100;  // 2,000 cases
constexpr int kSamples = 10;
constexpr double kMaxSeconds = 5.0;
constexpr double kMaxBytes = 1024.0 * 1024 * 1024;

Problem shape_number(int index) {
  static const int64_t seqlens[] = {128, 512, 1024, 2048, 4096};
  static const int64_t head_dims[] = {64, 128};
  static const MaskKind masks[] = {MaskKind::none, MaskKind::causal, MaskKind::causal_br,
                                   MaskKind::window, MaskKind::padding};
  const int64_t seqlen = seqlens[index % 5];
  const int64_t head_dim = head_dims[(index / 5) % 2];
  Problem p =
      make_problem(1 + index % 2, 32, 8, seqlen, seqlen, head_dim, head_dim,
                   {masks[(index / 20) % 5]}, (index / 10) % 2 == 0 ? DType::bf16 : DType::f16);
  if (p.mask.kind == MaskKind::window) {
    p.mask.window_left = 256;
    p.mask.window_right = 0;
  }
  return p;
}

TEST(Scale, AYearOfNightlyRunsJudgedInUnderFiveSecondsInUnderOneGiB) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0, 1);
  const ScratchDirectory dir("attnbench_scale");
  const std::string db = dir.file("year.sqlite");

  const auto fill_start = std::chrono::steady_clock::now();
  {
    std::unique_ptr<Store> store = value_of(Store::open(db));
    std::vector<double> base(kKernels * kShapesPerKernel);
    for (double& b : base) b = 20e-6 * std::exp(5 * std::uniform_real_distribution<double>(0, 1)(rng));
    for (int run = 0; run < kRuns; ++run) {
      RunInfo info;
      info.uuid = "year-" + std::to_string(seed) + "-" + std::to_string(run);
      info.started_at = "2025-01-01T02:17:00Z";
      info.suite = "nightly";
      info.command = "build/bin/attnbench run --suite nightly --db results/attnbench.sqlite";
      info.protocol_json =
          "{\"mode\": \"run\", \"seed\": 1234567890123, \"repetitions\": 10, "
          "\"max_case_seconds\": 2, \"cases\": 2000}";
      info.selection = "run suite=nightly shapes= kernels= filter= devices=all dist= shard=";
      info.env.git_sha = std::to_string(rng()) + std::to_string(rng());
      info.env.build_type = "Release";
      info.env.compiler = "GNU 12.2.0";
      info.env.cuda_runtime = "13.0";
      info.env.cuda_driver = "580.65";
      info.env.cudnn = "compiled 9.19.0, loaded 9.19.0";
      const int64_t run_id = value_of(store->begin_run(info));
      DeviceInfo device;
      device.kind = "cuda";
      device.name = "NVIDIA H200";
      device.uuid = "GPU-" + std::to_string(run / 30);  // a new chip every month
      device.sm_version = 90;
      device.sm_count = 132;
      device.memory_bytes = 150'000'000'000;
      device.l2_bytes = 60'000'000;
      device.clock_mhz = 1980;
      device.power_limit_w = 700;
      const int64_t device_id = value_of(store->add_device(run_id, device));
      const double run_effect = 0.015 * noise(rng);
      for (int k = 0; k < kKernels; ++k) {
        for (int s = 0; s < kShapesPerKernel; ++s) {
          ResultRecord r;
          r.kernel = "cuda.kernel" + std::to_string(k);
          r.problem = shape_number(s);
          r.distribution = "normal";
          r.seed = rng();
          r.device_id = device_id;
          r.device_name = device.name;
          r.series_key = r.kernel + "|" + shape_string(r.problem) + "|normal|NVIDIA H200|Release GNU 12.2.0";
          r.status = ResultStatus::passed;
          r.check.checked = true;
          r.check.max_abs_error = 1e-3 * (1 + 0.2 * noise(rng));
          r.check.lowp_error = 9e-4;
          r.check.atol = 1e-4;
          r.check.bound = 1.9e-3;
          r.check.rel_l2 = 1e-4;
          r.check.rmse = 2e-4;
          r.check.rows_checked = 4096;
          r.check.rows_total = 65536;
          const double time = base[k * kShapesPerKernel + s] * (1 + run_effect);
          for (int i = 0; i < kSamples; ++i) {
            Sample sample;
            sample.repetition = i;
            sample.iterations = 100;
            sample.time_s = time * (1 + 0.01 * noise(rng));
            sample.sm_clock_mhz = 1980;
            r.samples.push_back(sample);
          }
          r.timing.timed = true;
          r.timing.median_s = r.timing.mean_s = r.timing.min_s = r.timing.max_s = time;
          r.timing.stddev_s = 0.01 * time;
          r.timing.cv = 0.01;
          r.timing.repetitions = kSamples;
          r.timing.iterations_per_repetition = 100;
          r.flops = 1e12;
          r.bytes = 1e9;
          r.flops_per_s = r.flops / time;
          r.bytes_per_s = r.bytes / time;
          r.fraction_of_peak_flops = 0.5;
          r.fraction_of_peak_bandwidth = 0.3;
          r.extra_memory_bytes = 0;
          r.launches = 1;
          r.repro = "attnbench check --shape '" + shape_string(r.problem) + "' --kernels " +
                    r.kernel + " --dist normal --seed 1234567890123 --devices cuda:0";
          ASSERT_TRUE(store->add_result(run_id, r).ok);
        }
      }
      ASSERT_TRUE(store->finish_run(run_id).ok);
      // As the nightly job leaves it: analysed (a level, the odd alert).
      ASSERT_TRUE(store->store_analysis(run_id, {}, {{"NVIDIA H200", run_effect, 2000}}, {}, {}).ok);
    }
  }
  const double fill_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - fill_start).count();

  // The file as it stays: the WAL checkpointed into it.
  {
    const Result<std::unique_ptr<Store>> store = Store::open(db);
    ASSERT_TRUE(store.ok()) << store.status().message;
  }
  double bytes = static_cast<double>(fs::file_size(db));
  if (fs::exists(db + "-wal")) bytes += static_cast<double>(fs::file_size(db + "-wal"));

  const std::string command = std::string(ATTNBENCH_CLI) + " regressions --run latest --db " + db +
                              " > " + dir.file("regressions.txt") + " 2>&1";
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(command.c_str());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(WIFEXITED(status)) << command;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "an unchanged year raises no confirmed alert";

  std::printf(
      "scale: %d runs x %d cases x %d samples written in %.0f s; database %.0f MiB; "
      "`attnbench regressions --run latest` took %.2f s\n",
      kRuns, kKernels * kShapesPerKernel, kSamples, fill_seconds, bytes / (1024.0 * 1024.0), seconds);
  EXPECT_LT(seconds, kMaxSeconds);
  EXPECT_LT(bytes, kMaxBytes);
}

}  // namespace
}  // namespace attnbench
