// The profile's arithmetic and its trace (harness/measure/profile.h), and the phase recorder the
// CPU kernels mark their phases with (kernels/cpu/phases.h): on fresh random events, every
// phase's count and thread time is the sum of its events, the shares (gaps included) add up to
// 100 %, and the trace holds one track per thread plus the forward's.
#include <gtest/gtest.h>
#include <omp.h>

#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "harness/measure/profile.h"
#include "kernels/cpu/phases.h"
#include "tests/support/fresh_seed.h"

namespace attnbench {
namespace {

const char* const kPhases[] = {"scores", "mask", "softmax", "output"};

struct RandomForward {
  std::vector<std::vector<PhaseEvent>> by_thread;
  int64_t start_ns = 1'000'000;
  int64_t end_ns = 0;
  std::map<std::string, double> seconds;  // per phase
  std::map<std::string, int64_t> counts;
};

// Threads that each run back-to-back phases with random gaps, inside one forward; some threads
// record nothing (they count as absent, not as idle).
RandomForward random_forward(std::mt19937_64& rng) {
  RandomForward forward;
  const int threads = std::uniform_int_distribution<int>(2, 8)(rng);
  forward.by_thread.resize(static_cast<size_t>(threads) + 1);  // the last one records nothing
  int64_t latest = forward.start_ns;
  for (int t = 0; t < threads; ++t) {
    int64_t now = forward.start_ns + std::uniform_int_distribution<int64_t>(0, 500)(rng);
    const int events = std::uniform_int_distribution<int>(1, 40)(rng);
    for (int e = 0; e < events; ++e) {
      const char* phase = kPhases[std::uniform_int_distribution<int>(0, 3)(rng)];
      const int64_t duration = std::uniform_int_distribution<int64_t>(1, 100'000)(rng);
      forward.by_thread[static_cast<size_t>(t)].push_back({phase, now, now + duration});
      forward.seconds[phase] += static_cast<double>(duration) * 1e-9;
      ++forward.counts[phase];
      now += duration + std::uniform_int_distribution<int64_t>(0, 2'000)(rng);
    }
    latest = std::max(latest, now);
  }
  forward.end_ns = latest + 1'000;
  return forward;
}

// The forward as the CPU executor records it.
ForwardProfile profile_of(const RandomForward& forward) {
  ForwardProfile profile;
  profile.source = "phases";
  profile.start_ns = forward.start_ns;
  profile.end_ns = forward.end_ns;
  profile.forward_s = static_cast<double>(forward.end_ns - forward.start_ns) * 1e-9;
  profile.activities = activities_from_phases(forward.by_thread);
  return profile;
}

TEST(ProfileBreakdown, EveryPhaseSumsItsEventsAndTheSharesWithTheGapsMakeOneHundredPercent) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (int draw = 0; draw < 20; ++draw) {
    const RandomForward forward = random_forward(rng);
    const ProfileBreakdown breakdown = breakdown_of(profile_of(forward));
    const int recording_threads = static_cast<int>(forward.by_thread.size()) - 1;
    EXPECT_EQ(breakdown.tracks, recording_threads);
    EXPECT_DOUBLE_EQ(breakdown.forward_s,
                     static_cast<double>(forward.end_ns - forward.start_ns) * 1e-9);
    ASSERT_EQ(breakdown.phases.size(), forward.seconds.size() + 1);
    EXPECT_EQ(breakdown.phases.back().name, kGapsPhase);
    double shares = 0, recorded = 0;
    for (size_t i = 0; i < breakdown.phases.size(); ++i) {
      const PhaseTotal& phase = breakdown.phases[i];
      shares += phase.share;
      if (phase.name == kGapsPhase) continue;
      recorded += phase.total_s;
      EXPECT_NEAR(phase.total_s, forward.seconds.at(phase.name), 1e-12) << phase.name;
      EXPECT_EQ(phase.count, forward.counts.at(phase.name)) << phase.name;
      if (i > 0) {
        EXPECT_LE(phase.total_s, breakdown.phases[i - 1].total_s) << "largest first";
      }
    }
    EXPECT_NEAR(shares, 1.0, 1e-12);
    const double capacity = breakdown.forward_s * recording_threads;
    EXPECT_NEAR(breakdown.phases.back().total_s, capacity - recorded, 1e-12);
  }
}

TEST(ProfileBreakdown, PhasesLongerThanTheForwardAreSharesOfTheirOwnSum) {
  // Two threads' phases of 3 ms each in a forward of 2 ms: only overlapping (nested) scopes, a
  // kernel's bug, can do this; the shares still add up to 100 %.
  RandomForward forward;
  forward.by_thread = {{{"scores", 0, 3'000'000}}, {{"output", 0, 3'000'000}}};
  forward.start_ns = 0;
  forward.end_ns = 2'000'000;
  const ProfileBreakdown breakdown = breakdown_of(profile_of(forward));
  ASSERT_EQ(breakdown.phases.size(), 3u);
  EXPECT_DOUBLE_EQ(breakdown.phases[0].share + breakdown.phases[1].share, 1.0);
  EXPECT_EQ(breakdown.phases[2].total_s, 0.0);
  EXPECT_EQ(breakdown.phases[2].share, 0.0);
}

TEST(ProfileTrace, HoldsATrackPerRecordingThreadAndTheForwardInMicroseconds) {
  std::mt19937_64 rng(std::random_device{}());
  const RandomForward forward = random_forward(rng);
  const nlohmann::json events =
      trace_events(profile_of(forward), 3, "cpu.flash b=1", forward.start_ns);
  size_t phases = 0, tracks = 0, forwards = 0;
  for (const nlohmann::json& event : events) {
    EXPECT_EQ(event.at("pid"), 3);
    if (event.at("ph") == "M") {
      tracks += event.at("name") == "thread_name";
      continue;
    }
    ASSERT_EQ(event.at("ph"), "X");
    EXPECT_GE(event.at("ts").get<double>(), 0.0);
    EXPECT_GT(event.at("dur").get<double>(), 0.0);
    if (event.at("name") == "forward") {
      ++forwards;
      EXPECT_EQ(event.at("tid"), 0);
      EXPECT_DOUBLE_EQ(event.at("dur").get<double>(),
                       static_cast<double>(forward.end_ns - forward.start_ns) / 1e3);
    } else {
      ++phases;
      EXPECT_GE(event.at("tid").get<int>(), 1);
    }
  }
  size_t recorded = 0;
  for (const auto& thread : forward.by_thread) recorded += thread.size();
  EXPECT_EQ(phases, recorded);
  EXPECT_EQ(forwards, 1u);
  EXPECT_EQ(tracks, forward.by_thread.size());  // the recording threads' and "forward"
  for (const nlohmann::json& event : events) {
    if (event.at("ph") == "X" && event.at("name") != "forward") {
      EXPECT_EQ(event.at("cat"), "phase");
    }
  }
  const nlohmann::json document = trace_document(events);
  EXPECT_EQ(nlohmann::json::parse(document.dump()).at("traceEvents").size(), events.size());
}

// A GPU forward as CUPTI records it: kernels and copies on two streams, and the runtime calls that
// launched them. The breakdown sums the work per name over the streams' time; the calls only
// appear in the trace, on their host thread's track, with the correlation id of their work.
TEST(ProfileBreakdown, OnAGpuTheWorkOfEachStreamIsSummedAndTheRuntimeCallsAreNot) {
  std::mt19937_64 rng(std::random_device{}());
  ForwardProfile profile;
  profile.source = "CUPTI";
  profile.start_ns = 0;
  profile.forward_s = 1e-3;  // as the events time it
  std::map<std::string, double> seconds;
  int64_t correlation = 0;
  for (int stream : {7, 13}) {
    int64_t now = std::uniform_int_distribution<int64_t>(0, 10'000)(rng);
    for (const char* name : {"scores_kernel", "softmax_kernel", "memcpy DtoD", "scores_kernel"}) {
      const int64_t duration = std::uniform_int_distribution<int64_t>(1'000, 100'000)(rng);
      const ActivityKind kind =
          std::string(name).rfind("memcpy", 0) == 0 ? ActivityKind::memcpy : ActivityKind::kernel;
      profile.activities.push_back({kind, name, "", stream, now, now + duration, ++correlation});
      profile.activities.push_back({ActivityKind::runtime, "cudaLaunchKernel_v7000", "", 0,
                                    now - 5'000, now - 1'000, correlation});
      seconds[name] += static_cast<double>(duration) * 1e-9;
      now += duration + std::uniform_int_distribution<int64_t>(0, 50'000)(rng);
    }
  }
  profile.end_ns = 1'000'000;
  const ProfileBreakdown breakdown = breakdown_of(profile);
  EXPECT_EQ(breakdown.tracks, 2) << "two streams; the host thread of the calls is no track";
  double shares = 0, work = 0;
  for (const PhaseTotal& phase : breakdown.phases) {
    shares += phase.share;
    EXPECT_NE(phase.name, "cudaLaunchKernel_v7000");
    if (phase.name == kGapsPhase) continue;
    EXPECT_NEAR(phase.total_s, seconds.at(phase.name), 1e-15) << phase.name;
    EXPECT_EQ(phase.count, phase.name == "scores_kernel" ? 4 : 2) << phase.name;
    work += phase.total_s;
  }
  EXPECT_NEAR(shares, 1.0, 1e-12);
  EXPECT_NEAR(breakdown.phases.back().total_s, std::max(0.0, 2e-3 - work), 1e-15);

  const nlohmann::json events = trace_events(profile, 1, "cuda.naive", 0);
  std::set<int> runtime_tracks, work_tracks;
  size_t correlated = 0;
  for (const nlohmann::json& event : events) {
    if (event.at("ph") != "X" || event.at("name") == "forward") continue;
    (event.at("cat") == "runtime" ? runtime_tracks : work_tracks)
        .insert(event.at("tid").get<int>());
    correlated += event.contains("args") && event.at("args").contains("correlation");
  }
  EXPECT_EQ(work_tracks, (std::set<int>{8, 14})) << "stream n is track n + 1";
  EXPECT_EQ(runtime_tracks.size(), 1u);
  EXPECT_EQ(correlated, profile.activities.size());
}

TEST(ProfileJson, AProfileCrossesTheWorkerProtocolUnchanged) {
  std::mt19937_64 rng(std::random_device{}());
  const ForwardProfile profile = profile_of(random_forward(rng));
  ForwardProfile with_gpu = profile;
  with_gpu.median_s = 0.25;
  with_gpu.activities.push_back({ActivityKind::runtime, "cudaMemsetAsync", "", 3, 5, 9, 42});
  with_gpu.activities.push_back({ActivityKind::memset, "memset", "4096 bytes", 7, 10, 20, 42});
  const ForwardProfile back =
      profile_from_json(nlohmann::json::parse(profile_to_json(with_gpu).dump()));
  EXPECT_EQ(profile_to_json(back), profile_to_json(with_gpu));
  ASSERT_EQ(back.activities.size(), with_gpu.activities.size());
  EXPECT_EQ(back.activities.back().kind, ActivityKind::memset);
  EXPECT_EQ(back.activities.back().detail, "4096 bytes");
  nlohmann::json bad = profile_to_json(with_gpu);
  bad["activities"][0]["kind"] = "warp";
  EXPECT_THROW(profile_from_json(bad), std::invalid_argument);
}

TEST(ShortKernelName, DropsReturnTypeNamespacesTemplateArgumentsAndParameters) {
  EXPECT_EQ(short_kernel_name("void attnbench::sm90::detail::flash3_kernel<128, __nv_bfloat16>("
                              "attnbench::FlashParams const&, int)"),
            "flash3_kernel");
  EXPECT_EQ(short_kernel_name("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, "
                              "float, float, float, at::native::(anonymous namespace)::"
                              "SoftMaxForwardEpilogue>(float*, float const*, int)"),
            "cunn_SoftMaxForward");
  EXPECT_EQ(short_kernel_name("void at::native::elementwise_kernel<128, 2, "
                              "at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_"
                              "cuda(at::TensorIteratorBase&)::{lambda()#3}>(at::"
                              "TensorIteratorBase&)::{lambda(int)#1}>(int, {lambda(int)#1})"),
            "elementwise_kernel");
  EXPECT_EQ(short_kernel_name("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"),
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64");
  EXPECT_EQ(demangled_name("_ZN9attnbench6detail11mask_kernelEPf"),
            "attnbench::detail::mask_kernel(float*)");
  EXPECT_EQ(short_kernel_name(demangled_name("_ZN9attnbench6detail11mask_kernelEPf")),
            "mask_kernel");
  EXPECT_EQ(demangled_name("cudnn_generated_fort_native_sdpa"), "cudnn_generated_fort_native_sdpa");
}

TEST(PhaseRecording, RecordsEachOpenMpThreadsScopesAndNothingWithoutARecording) {
  const int threads = std::max(2, omp_get_max_threads());
  std::optional<PhaseScope> before("scores");  // started before any recording: never recorded
  PhaseRecording recording(threads);
  before.reset();
  EXPECT_THROW(PhaseRecording second(1), std::logic_error) << "one recording at a time";
  int team = 0;
#pragma omp parallel num_threads(threads)
  {
#pragma omp single
    team = omp_get_num_threads();
    PhaseScope phase("scores");
    phase.next("scores");  // the phase already running: no event
    phase.next("softmax");
  }
  int scopes = 0;
  for (const std::vector<PhaseEvent>& events : recording.by_thread()) {
    if (events.empty()) continue;
    ASSERT_EQ(events.size(), 2u);
    EXPECT_STREQ(events[0].phase, "scores");
    EXPECT_STREQ(events[1].phase, "softmax");
    EXPECT_LE(events[0].start_ns, events[0].end_ns);
    EXPECT_LE(events[0].end_ns, events[1].start_ns) << "the append's cost falls between phases";
    EXPECT_LE(events[1].start_ns, events[1].end_ns);
    scopes += 2;
  }
  EXPECT_EQ(scopes, 2 * team);
}

// The calls a plugin's phase callback makes (mark_phase): each mark ends the one before on its
// thread, null only ends, and marks outside a recording leave nothing behind.
TEST(PhaseRecording, MarkedPhasesEndAtTheNextMarkAndNothingOutsideARecording) {
  mark_phase("scores");  // no recording yet: never recorded
  {
    PhaseRecording recording(1);
    mark_phase("softmax");
    mark_phase("output");
    mark_phase(nullptr);
    mark_phase(nullptr);  // nothing open: nothing recorded
    const std::vector<std::vector<PhaseEvent>> events = recording.by_thread();
    ASSERT_EQ(events.size(), 1u);
    ASSERT_EQ(events[0].size(), 2u);
    EXPECT_STREQ(events[0][0].phase, "softmax");
    EXPECT_STREQ(events[0][1].phase, "output");
    EXPECT_LE(events[0][0].end_ns, events[0][1].start_ns);
    mark_phase("scores");  // left open when the recording ends
  }
  PhaseRecording next(1);
  mark_phase("output");  // the phase left open under the old recording is not recorded here
  mark_phase(nullptr);
  const std::vector<std::vector<PhaseEvent>> events = next.by_thread();
  ASSERT_EQ(events[0].size(), 1u);
  EXPECT_STREQ(events[0][0].phase, "output");
}

}  // namespace
}  // namespace attnbench
