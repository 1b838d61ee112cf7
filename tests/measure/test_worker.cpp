// The worker protocol (harness/measure/worker.h): every field of a case request and of its
// outcome survives a round trip, a line that is not a whole message (truncated, garbled, a
// field missing or of the wrong type) is an error status and never an exception, and the parent
// turns a worker that answers nonsense, dies mid-line, is killed or hangs into one case's
// error, crash or timeout. Fake workers are /bin/sh scripts: no attnbench binary needed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/core/shell.h"
#include "harness/measure/timing.h"
#include "harness/measure/worker.h"
#include "tests/support/problems.h"
#include "tests/support/result_support.h"
#include "tests/support/same_records.h"

namespace attnbench {
namespace {

using json = nlohmann::json;

// Quotes, a backslash, control characters, non-ASCII UTF-8: what a device, library or path may
// hold.
const std::string kHostile = "H200 \"SXM\" \\ \x01\t\n\x7f caf\xc3\xa9 '$(id)'";

CaseRequest full_request() {
  CaseRequest r;
  r.name = "cpu.flash/" + kHostile;
  r.kernel = "cpu.flash";
  r.problem = parsed_shape(
      "b=3,hq=8,hkv=2,sq=17,sk=33,d=64,dv=32,dtype=bf16,out=fp32,mask=window(4,0),layout=bhsd,"
      "scale=0.3");
  r.distribution = "outliers";
  r.seed = std::numeric_limits<uint64_t>::max() - 12345;
  r.check_only = true;
  r.repetitions = 17;
  r.max_case_seconds = 0.125;
  r.measure_energy = true;
  r.dump_dir = "/tmp/dump " + kHostile;
  r.failure_dump_dir = "/tmp/failures";
  r.repro = "attnbench check --shape 'x' " + kHostile;
  r.profile_forwards = 7;
  return r;
}

CaseOutcome full_outcome() {
  CaseOutcome o;
  o.status = ResultStatus::failed;
  o.message = "max error 1e-2 > bound; launches not measured: " + kHostile;
  CheckSummary& c = o.check;
  c.checked = true;
  c.max_abs_error = 0.0125;
  c.lowp_error = 0.003;
  c.atol = 1e-5;
  c.bound = 0.00601;
  c.rel_l2 = 0.5;
  c.rmse = 0.25;
  c.nan_count = 3;
  c.inf_count = 4;
  c.rows_checked = 100;
  c.rows_total = 1LL << 40;
  c.lse_max_error = kNotMeasured;  // no LSE
  c.canaries_ok = false;
  c.repeatable = false;
  for (int i = 0; i < 4; ++i) {
    Sample s;
    s.repetition = i;
    s.time_s = 1e-3 * (1 + 0.01 * i);
    s.iterations = 1000 + i;
    s.sm_clock_mhz = i == 2 ? kNotMeasured : 1980.0 - i;
    s.clock_reasons = i == 1 ? "sw_power_cap, \"hw\" slowdown" : "";
    o.samples.push_back(s);
  }
  o.timing = summarize_samples(o.samples);
  o.timing.wall_s = 0.0875;
  o.timing.stop = TimingStop::budget;
  o.extra_memory_bytes = (1LL << 40) + 7;
  o.launches = 5;
  o.energy_j = 0.042;
  o.details_json = json{{"engine", kHostile}, {"amax_s", 1.5}}.dump();
  o.timer = "cudaEvent (L2 flushed) " + kHostile;
  o.device_unusable = true;
  ForwardProfile profile;
  profile.source = "CUPTI";
  profile.start_ns = 1'000'000'007;
  profile.end_ns = 1'000'900'013;
  profile.forward_s = 8.75e-4;
  profile.median_s = 8.5e-4;
  profile.activities = {
      {ActivityKind::runtime, "cudaLaunchKernel_v7000", "", 0, 1'000'000'100, 1'000'003'000, 42},
      {ActivityKind::kernel, "softmax_kernel", "void ns::softmax_kernel<" + kHostile + ">(float*)",
       13, 1'000'004'000, 1'000'800'000, 42}};
  o.profile = profile;
  return o;
}

void expect_same_outcome(const CaseOutcome& expected, const CaseOutcome& actual) {
  EXPECT_SAME_FIELD(expected, actual, status);
  EXPECT_SAME_FIELD(expected, actual, message);
  // The summary is rebuilt from the samples; what the samples cannot tell travels itself.
  expect_same_measurement(expected, actual);
  EXPECT_SAME_FIELD(expected, actual, timer);
  EXPECT_SAME_FIELD(expected, actual, device_unusable);
  ASSERT_EQ(expected.profile.has_value(), actual.profile.has_value());
  if (expected.profile) {
    EXPECT_EQ(profile_to_json(*expected.profile), profile_to_json(*actual.profile));
  }
}

// ---- round trips ---------------------------------------------------------------------------------

// A message encoded (on one line, as the protocol sends it) and decoded again.
template <typename Message>
Result<Message> round_trip(const Message& message, std::string (*encode)(const Message&),
                           Result<Message> (*decode)(const std::string&)) {
  const std::string line = encode(message);
  EXPECT_EQ(line.find('\n'), std::string::npos) << "one line: " << line;
  return decode(line);
}

TEST(WorkerProtocol, RequestRoundTripsEveryField) {
  const CaseRequest expected = full_request();
  const Result<CaseRequest> decoded = round_trip(expected, encode_request, decode_request);
  ASSERT_TRUE(decoded) << decoded.status().message;
  const CaseRequest& actual = *decoded;
  EXPECT_EQ(expected.name, actual.name);
  EXPECT_EQ(expected.kernel, actual.kernel);
  EXPECT_EQ(expected.problem, actual.problem);
  EXPECT_EQ(shape_string(expected.problem), shape_string(actual.problem));
  EXPECT_EQ(expected.distribution, actual.distribution);
  EXPECT_EQ(expected.seed, actual.seed);
  EXPECT_EQ(expected.check_only, actual.check_only);
  EXPECT_EQ(expected.repetitions, actual.repetitions);
  EXPECT_EQ(expected.max_case_seconds, actual.max_case_seconds);
  EXPECT_EQ(expected.profile_forwards, actual.profile_forwards);
  EXPECT_EQ(expected.measure_energy, actual.measure_energy);
  EXPECT_EQ(expected.dump_dir, actual.dump_dir);
  EXPECT_EQ(expected.failure_dump_dir, actual.failure_dump_dir);
  EXPECT_EQ(expected.repro, actual.repro);
  // The defaults too (false, zero, empty).
  const CaseRequest defaults = value_of(decode_request(encode_request(CaseRequest{})));
  EXPECT_EQ(defaults.problem, CaseRequest{}.problem);
  EXPECT_EQ(defaults.seed, 0u);
  EXPECT_FALSE(defaults.check_only);
  EXPECT_TRUE(defaults.dump_dir.empty());
}

TEST(WorkerProtocol, OutcomeRoundTripsEveryField) {
  const CaseOutcome expected = full_outcome();
  const Result<CaseOutcome> decoded = round_trip(expected, encode_outcome, decode_outcome);
  ASSERT_TRUE(decoded) << decoded.status().message;
  const CaseOutcome& actual = *decoded;
  expect_same_outcome(expected, actual);
  // The kernel's details stay a parseable JSON text, the hostile engine name intact.
  EXPECT_EQ(json::parse(actual.details_json).at("engine").get<std::string>(), kHostile);
}

TEST(WorkerProtocol, EveryStatusAndStopAndTheDefaultsRoundTrip) {
  for (ResultStatus status : {ResultStatus::passed, ResultStatus::failed, ResultStatus::skipped,
                              ResultStatus::crashed, ResultStatus::timeout, ResultStatus::error}) {
    CaseOutcome expected = full_outcome();
    expected.status = status;
    const Result<CaseOutcome> actual = decode_outcome(encode_outcome(expected));
    ASSERT_TRUE(actual) << result_status_name(status) << ": " << actual.status().message;
    EXPECT_EQ(actual->status, status);
  }
  for (std::optional<TimingStop> stop : {std::optional<TimingStop>{}, std::optional{TimingStop::stable},
                                         std::optional{TimingStop::repetitions}, std::optional{TimingStop::budget}}) {
    CaseOutcome expected = full_outcome();
    expected.timing.stop = stop;
    const CaseOutcome actual = value_of(decode_outcome(encode_outcome(expected)));
    EXPECT_EQ(actual.timing.stop, stop);
  }
  const CaseOutcome expected;  // nothing measured: NaNs, -1s, empty texts
  CaseOutcome actual = full_outcome();
  actual = value_of(decode_outcome(encode_outcome(expected)));
  expect_same_outcome(expected, actual);
}

TEST(WorkerProtocol, NumbersThatWereNotMeasuredTravelAsNull) {
  CaseOutcome expected = full_outcome();
  expected.energy_j = std::numeric_limits<double>::infinity();
  expected.timing.wall_s = kNotMeasured;
  const json line = json::parse(encode_outcome(expected));
  EXPECT_TRUE(line.at("energy_j").is_null());
  EXPECT_TRUE(line.at("timing_wall_s").is_null());
  EXPECT_TRUE(line.at("check").at("lse_max_error").is_null());
  EXPECT_TRUE(line.at("samples").at(2).at("sm_clock_mhz").is_null());
  const CaseOutcome actual = value_of(decode_outcome(line.dump()));
  EXPECT_TRUE(std::isnan(actual.energy_j));
  EXPECT_TRUE(std::isnan(actual.timing.wall_s));
}

TEST(WorkerProtocol, InvalidUtf8IsReplacedNotThrown) {
  CaseRequest request = full_request();
  request.dump_dir = "/tmp/\xff\xfe";
  std::string line;
  ASSERT_NO_THROW(line = encode_request(request));
  const CaseRequest decoded = value_of(decode_request(line));
  EXPECT_EQ(decoded.dump_dir, "/tmp/\xef\xbf\xbd\xef\xbf\xbd");  // U+FFFD twice
  CaseOutcome outcome = full_outcome();
  outcome.message = "cuDNN says \xc3";  // a cut UTF-8 sequence
  outcome.timer = "\x80";
  ASSERT_NO_THROW(line = encode_outcome(outcome));
  const CaseOutcome actual = value_of(decode_outcome(line));
  EXPECT_EQ(actual.message, "cuDNN says \xef\xbf\xbd");
  EXPECT_EQ(actual.timer, "\xef\xbf\xbd");
}

// ---- broken messages -----------------------------------------------------------------------------

template <typename Decode>
void expect_error(Decode decode, const std::string& line, const std::string& prefix) {
  Status status;
  ASSERT_NO_THROW(status = decode(line)) << line;
  EXPECT_FALSE(status.ok) << "decoded: " << line;
  EXPECT_EQ(status.message.rfind(prefix, 0), 0u) << status.message;
  EXPECT_EQ(status.message.find('\n'), std::string::npos) << status.message;
}

Status decode_a_request(const std::string& line) {
  const Result<CaseRequest> request = decode_request(line);
  return request ? Status::Ok() : request.status();
}

Status decode_an_outcome(const std::string& line) {
  const Result<CaseOutcome> outcome = decode_outcome(line);
  return outcome ? Status::Ok() : outcome.status();
}

TEST(WorkerProtocol, EveryTruncationIsAnError) {
  const std::string request = encode_request(full_request());
  for (size_t length = 0; length < request.size(); ++length) {
    expect_error(decode_a_request, request.substr(0, length), "bad case request: ");
  }
  const std::string outcome = encode_outcome(full_outcome());
  for (size_t length = 0; length < outcome.size(); ++length) {
    expect_error(decode_an_outcome, outcome.substr(0, length), "bad outcome from worker: ");
  }
}

TEST(WorkerProtocol, GarbledLinesAreErrors) {
  for (const std::string line : {"", "\n", "null", "[]", "{}", "42", "\"text\"", "{\"status\":", "}{",
                                 "not json at all", "\x01\x02", "[{\"status\":\"passed\"}]"}) {
    expect_error(decode_a_request, line, "bad case request: ");
    expect_error(decode_an_outcome, line, "bad outcome from worker: ");
  }
  // A valid message followed by junk on the same line.
  expect_error(decode_an_outcome, encode_outcome(full_outcome()) + "}", "bad outcome from worker: ");
}

// Each field of a message removed, then given a value of the wrong type: an error naming it.
template <typename Decode>
void expect_each_field_required(const json& message, Decode decode, const std::string& prefix) {
  for (const auto& [key, value] : message.items()) {
    json missing = message;
    missing.erase(key);
    expect_error(decode, missing.dump(), prefix);
    json wrong = message;
    wrong[key] = value.is_string() ? json(12) : json("twelve");
    SCOPED_TRACE(key);
    expect_error(decode, wrong.dump(), prefix);
  }
}

TEST(WorkerProtocol, EveryFieldIsRequiredAndTyped) {
  expect_each_field_required(json::parse(encode_request(full_request())), decode_a_request,
                             "bad case request: ");
  const json outcome = json::parse(encode_outcome(full_outcome()));
  expect_each_field_required(outcome, decode_an_outcome, "bad outcome from worker: ");
  expect_each_field_required(outcome.at("check"),
                             [&](const std::string& check) {
                               json broken = outcome;
                               broken["check"] = json::parse(check);
                               return decode_an_outcome(broken.dump());
                             },
                             "bad outcome from worker: ");
  expect_each_field_required(outcome.at("samples").at(0),
                             [&](const std::string& sample) {
                               json broken = outcome;
                               broken["samples"][0] = json::parse(sample);
                               return decode_an_outcome(broken.dump());
                             },
                             "bad outcome from worker: ");
  json samples_object = outcome;
  samples_object["samples"] = json::object();
  expect_error(decode_an_outcome, samples_object.dump(), "bad outcome from worker: ");
}

TEST(WorkerProtocol, UnknownNamesAreErrors) {
  json outcome = json::parse(encode_outcome(full_outcome()));
  outcome["status"] = "finished";
  expect_error(decode_an_outcome, outcome.dump(), "bad outcome from worker: status 'finished'");
  outcome = json::parse(encode_outcome(full_outcome()));
  outcome["timing_stop"] = "later";
  expect_error(decode_an_outcome, outcome.dump(), "bad outcome from worker: timing stop 'later'");
  json request = json::parse(encode_request(full_request()));
  request["shape"] = "b=0,hq=2,s=8,d=16";
  expect_error(decode_a_request, request.dump(), "bad case request: ");
}

// ---- the parent's side ---------------------------------------------------------------------------

// A worker that runs `script` in /bin/sh (the worker arguments land in $1..$3).
CaseOutcome run_fake_worker(const std::string& script, std::chrono::seconds timeout = std::chrono::seconds(20)) {
  WorkerProcess worker({"/bin/sh", "-c", script, "fake-worker"}, "cpu");
  return worker.run(full_request(), timeout);
}

TEST(WorkerProcessSide, AnOutcomeLineIsTheCasesOutcome) {
  const CaseOutcome expected = full_outcome();
  const CaseOutcome actual =
      run_fake_worker("read request; printf '%s\\n' " + shell_quote(encode_outcome(expected)) + "; read more");
  expect_same_outcome(expected, actual);
}

TEST(WorkerProcessSide, TheRequestArrivesAsOneLine) {
  // The fake worker keeps the line it read; it decodes to the request sent.
  const std::string kept = testing::TempDir() + "attnbench_worker_request_" + std::to_string(::getpid());
  const CaseOutcome outcome = run_fake_worker(
      "read -r request; printf '%s\\n' \"$request\" > " + shell_quote(kept) + "; printf '%s\\n' " +
      shell_quote(encode_outcome(CaseOutcome{})) + "; read more");
  EXPECT_EQ(outcome.status, ResultStatus::error);
  std::ifstream file(kept);
  std::string line, rest;
  ASSERT_TRUE(std::getline(file, line));
  EXPECT_FALSE(std::getline(file, rest)) << "more than one line";
  std::remove(kept.c_str());
  const Result<CaseRequest> decoded = decode_request(line);
  ASSERT_TRUE(decoded) << line;
  const CaseRequest& received = *decoded;
  EXPECT_EQ(received.name, full_request().name);
  EXPECT_EQ(received.dump_dir, full_request().dump_dir);
  EXPECT_EQ(received.seed, full_request().seed);
}

TEST(WorkerProcessSide, AGarbledAnswerIsAnErrorNotACrash) {
  const CaseOutcome outcome = run_fake_worker("read request; echo '{\"status\": \"passed\", oops'; read more");
  EXPECT_EQ(outcome.status, ResultStatus::error);
  EXPECT_EQ(outcome.message.rfind("bad outcome from worker: ", 0), 0u) << outcome.message;
}

TEST(WorkerProcessSide, DeathMidLineIsACrashWithTheExitCodeAndStderr) {
  const CaseOutcome outcome =
      run_fake_worker("read request; printf '{\"status\":\"pas'; echo 'kernel went wrong' >&2; exit 4");
  EXPECT_EQ(outcome.status, ResultStatus::crashed);
  EXPECT_EQ(outcome.message, "worker exited with code 4: kernel went wrong");
}

TEST(WorkerProcessSide, ASignalIsNamed) {
  const CaseOutcome outcome = run_fake_worker("read request; kill -SEGV $$");
  EXPECT_EQ(outcome.status, ResultStatus::crashed);
  EXPECT_EQ(outcome.message.rfind("worker killed by signal 11 (", 0), 0u) << outcome.message;
}

TEST(WorkerProcessSide, SilenceIsATimeout) {
  const CaseOutcome outcome = run_fake_worker("read request; sleep 30", std::chrono::seconds(1));
  EXPECT_EQ(outcome.status, ResultStatus::timeout);
  EXPECT_EQ(outcome.message, "no result after 1 s (watchdog); the worker was killed");
}

TEST(WorkerProcessSide, AWorkerThatCannotStartIsACrashThatSaysWhy) {
  WorkerProcess worker({"/nonexistent/attnbench"}, "cpu");
  CaseOutcome outcome;
  ASSERT_NO_THROW(outcome = worker.run(full_request(), std::chrono::seconds(20)));
  EXPECT_EQ(outcome.status, ResultStatus::crashed);
  // Gone before or after the request reached it: either way the reason is in the message.
  EXPECT_NE(outcome.message.find("cannot start worker '/nonexistent/attnbench'"), std::string::npos)
      << outcome.message;
}

// The cases of one problem travel as one line and come back as one outcome line each; a worker
// that dies after the first gives every case left without one the crash.
TEST(WorkerProtocol, AGroupRoundTripsAndASingleRequestIsAGroupOfOne) {
  CaseRequest second = full_request();
  second.kernel = "cpu.flash";
  second.name = "cpu.flash/" + shape_string(second.problem) + "/normal";
  const std::string line = encode_group_request({full_request(), second});
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const std::vector<CaseRequest> group = value_of(decode_requests(line));
  ASSERT_EQ(group.size(), 2u);
  EXPECT_EQ(group[0].kernel, full_request().kernel);
  EXPECT_EQ(group[1].name, second.name);
  EXPECT_EQ(value_of(decode_requests(encode_request(second))).size(), 1u);
  EXPECT_FALSE(decode_request(line)) << "a group is not one case";
  expect_error([](const std::string& text) -> Status {
    const Result<std::vector<CaseRequest>> r = decode_requests(text);
    return r ? Status::Ok() : r.status();
  }, R"({"group": []})", "bad case request: ");
}

TEST(WorkerProcessSide, AGroupGetsOneOutcomePerCaseAndACrashForTheRest) {
  CaseOutcome first = full_outcome();
  WorkerProcess worker({"/bin/sh", "-c",
                        "read request; printf '%s\\n' " + shell_quote(encode_outcome(first)) +
                            "; echo 'died in the second' >&2; exit 5",
                        "fake-worker"},
                       "cpu");
  const std::vector<CaseOutcome> outcomes =
      worker.run_group({full_request(), full_request(), full_request()}, std::chrono::seconds(20));
  ASSERT_EQ(outcomes.size(), 3u);
  expect_same_outcome(first, outcomes[0]);
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(outcomes[i].status, ResultStatus::crashed);
    EXPECT_EQ(outcomes[i].message, "worker exited with code 5: died in the second");
  }
}

TEST(WorkerExecutor, MadeForCpuAndRefusedForUnknownDevices) {
  const Result<std::unique_ptr<DeviceExecutor>> cpu = make_device_executor("cpu");
  ASSERT_TRUE(cpu) << cpu.status().message;
  EXPECT_EQ((*cpu)->timer_name(), "host steady_clock around one forward");
  for (const std::string device : {"gpu", "", "cpu0", "cuda:", "cuda:x"}) {
    const Result<std::unique_ptr<DeviceExecutor>> refused = make_device_executor(device);
    EXPECT_FALSE(refused) << device;
    EXPECT_FALSE(refused.status().ok) << device;
    EXPECT_FALSE(refused.status().message.empty()) << device;
  }
}

}  // namespace
}  // namespace attnbench
