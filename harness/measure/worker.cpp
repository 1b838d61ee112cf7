#include "harness/measure/worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/measure/executor.h"
#include "kernels/registry.h"

namespace attnbench {
namespace {

using json = nlohmann::json;

// How much of a dead worker's stderr the crash message keeps.
constexpr size_t kStderrTailBytes = 2048;
// Host scratch a CPU kernel may take: half the machine's memory.
constexpr double kHostScratchFraction = 0.5;
constexpr size_t kCudaPrefixChars = 5;  // "cuda:"

// One protocol line: invalid UTF-8 (a path, a library's message) is replaced, never thrown.
std::string dump_line(const json& message) {
  return message.dump(-1, ' ', false, json::error_handler_t::replace);
}

// A number that was not measured (NaN) travels as null; anything but a number or null is a
// garbled message (get<double> throws).
json number(double value) { return std::isfinite(value) ? json(value) : json(nullptr); }
double number_from(const json& value) { return value.is_null() ? kNotMeasured : value.get<double>(); }

const json& array_at(const json& object, const char* key) {
  const json& value = object.at(key);
  if (!value.is_array()) throw std::invalid_argument(std::string("'") + key + "' is not an array");
  return value;
}

json encode_check(const CheckSummary& c) {
  return {{"checked", c.checked},         {"max_abs_error", number(c.max_abs_error)},
          {"lowp_error", number(c.lowp_error)}, {"atol", number(c.atol)},
          {"bound", number(c.bound)},      {"rel_l2", number(c.rel_l2)},
          {"rmse", number(c.rmse)},        {"nan_count", c.nan_count},
          {"inf_count", c.inf_count},      {"rows_checked", c.rows_checked},
          {"rows_total", c.rows_total},    {"lse_max_error", number(c.lse_max_error)},
          {"canaries_ok", c.canaries_ok},  {"repeatable", c.repeatable}};
}

CheckSummary decode_check(const json& j) {
  CheckSummary c;
  c.checked = j.at("checked").get<bool>();
  c.max_abs_error = number_from(j.at("max_abs_error"));
  c.lowp_error = number_from(j.at("lowp_error"));
  c.atol = number_from(j.at("atol"));
  c.bound = number_from(j.at("bound"));
  c.rel_l2 = number_from(j.at("rel_l2"));
  c.rmse = number_from(j.at("rmse"));
  c.nan_count = j.at("nan_count").get<int64_t>();
  c.inf_count = j.at("inf_count").get<int64_t>();
  c.rows_checked = j.at("rows_checked").get<int64_t>();
  c.rows_total = j.at("rows_total").get<int64_t>();
  c.lse_max_error = number_from(j.at("lse_max_error"));
  c.canaries_ok = j.at("canaries_ok").get<bool>();
  c.repeatable = j.at("repeatable").get<bool>();
  return c;
}

std::string signal_description(int signal_number) {
  const char* name = strsignal(signal_number);
  return "signal " + std::to_string(signal_number) + " (" + (name ? name : "unknown") + ")";
}

bool write_all(int fd, const std::string& text) {
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    written += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

namespace {

json request_json(const CaseRequest& r) {
  return json({{"name", r.name},
              {"kernel", r.kernel},
              {"shape", shape_string(r.problem)},
              {"distribution", r.distribution},
              {"seed", r.seed},
              {"check_only", r.check_only},
              {"repetitions", r.repetitions},
              {"max_case_seconds", r.max_case_seconds},
              {"measure_energy", r.measure_energy},
              {"dump_dir", r.dump_dir},
              {"failure_dump_dir", r.failure_dump_dir},
              {"repro", r.repro},
              {"profile_forwards", r.profile_forwards}});
}

// Throws on a missing field or one of the wrong type (decode_requests says so).
Result<CaseRequest> request_from_json(const json& j) {
  CaseRequest r;
  r.name = j.at("name").get<std::string>();
  r.kernel = j.at("kernel").get<std::string>();
  if (Status s = parse_shape(j.at("shape").get<std::string>(), r.problem); !s.ok) {
    return Status::Error("bad case request: " + s.message);
  }
  r.distribution = j.at("distribution").get<std::string>();
  r.seed = j.at("seed").get<uint64_t>();
  r.check_only = j.at("check_only").get<bool>();
  r.repetitions = j.at("repetitions").get<int>();
  r.max_case_seconds = j.at("max_case_seconds").get<double>();
  r.measure_energy = j.at("measure_energy").get<bool>();
  r.dump_dir = j.at("dump_dir").get<std::string>();
  r.failure_dump_dir = j.at("failure_dump_dir").get<std::string>();
  r.repro = j.at("repro").get<std::string>();
  r.profile_forwards = j.at("profile_forwards").get<int>();
  return r;
}

}  // namespace

std::string encode_request(const CaseRequest& r) { return dump_line(request_json(r)); }

Result<CaseRequest> decode_request(const std::string& line) {
  Result<std::vector<CaseRequest>> requests = decode_requests(line);
  if (!requests) return requests.status();
  if (requests->size() != 1) return Status::Error("bad case request: a group where one case was expected");
  return std::move(requests->front());
}

std::string encode_group_request(const std::vector<CaseRequest>& requests) {
  json group = json::array();
  for (const CaseRequest& r : requests) group.push_back(request_json(r));
  return dump_line({{"group", group}});
}

Result<std::vector<CaseRequest>> decode_requests(const std::string& line) {
  std::vector<CaseRequest> requests;
  try {
    const json j = json::parse(line);
    const bool group = j.is_object() && j.contains("group");
    if (group && (!j["group"].is_array() || j["group"].empty()))
      return Status::Error("bad case request: \"group\" must be a non-empty array of cases");
    for (const json& one : group ? j["group"] : json::array({j})) {
      Result<CaseRequest> request = request_from_json(one);
      if (!request) return request.status();
      requests.push_back(std::move(*request));
    }
  } catch (const std::exception& e) {
    return Status::Error(std::string("bad case request: ") + e.what());
  }
  return requests;
}

std::string encode_outcome(const CaseOutcome& o) {
  json samples = json::array();
  for (const Sample& s : o.samples) {
    samples.push_back({{"repetition", s.repetition}, {"time_s", number(s.time_s)}, {"iterations", s.iterations},
                       {"sm_clock_mhz", number(s.sm_clock_mhz)}, {"clock_reasons", s.clock_reasons}});
  }
  return dump_line({{"status", std::string(result_status_name(o.status))},
              {"message", o.message},
              {"check", encode_check(o.check)},
              {"samples", samples},
              {"timing_wall_s", number(o.timing.wall_s)},
              {"timing_stop", o.timing.stop ? std::string(timing_stop_name(*o.timing.stop)) : ""},
              {"extra_memory_bytes", o.extra_memory_bytes},
              {"launches", o.launches},
              {"energy_j", number(o.energy_j)},
              {"details_json", o.details_json},
              {"timer", o.timer},
              {"device_unusable", o.device_unusable},
              {"profile", o.profile ? profile_to_json(*o.profile) : json(nullptr)}});
}

Result<CaseOutcome> decode_outcome(const std::string& line) {
  CaseOutcome o;
  try {
    const json j = json::parse(line);
    const std::string status_text = j.at("status").get<std::string>();
    const auto status = parse_result_status(status_text);
    if (!status) return Status::Error("bad outcome from worker: status '" + status_text + "'");
    o.status = *status;
    o.message = j.at("message").get<std::string>();
    o.check = decode_check(j.at("check"));
    o.samples.clear();
    for (const json& s : array_at(j, "samples")) {
      Sample sample;
      sample.repetition = s.at("repetition").get<int>();
      sample.time_s = number_from(s.at("time_s"));
      sample.iterations = s.at("iterations").get<int64_t>();
      sample.sm_clock_mhz = number_from(s.at("sm_clock_mhz"));
      sample.clock_reasons = s.at("clock_reasons").get<std::string>();
      o.samples.push_back(sample);
    }
    o.timing = summarize_samples(o.samples);
    o.timing.wall_s = number_from(j.at("timing_wall_s"));
    const std::string stop = j.at("timing_stop").get<std::string>();
    o.timing.stop = parse_timing_stop(stop);
    if (!stop.empty() && !o.timing.stop) {
      return Status::Error("bad outcome from worker: timing stop '" + stop + "'");
    }
    o.extra_memory_bytes = j.at("extra_memory_bytes").get<int64_t>();
    o.launches = j.at("launches").get<int>();
    o.energy_j = number_from(j.at("energy_j"));
    o.details_json = j.at("details_json").get<std::string>();
    o.timer = j.at("timer").get<std::string>();
    o.device_unusable = j.at("device_unusable").get<bool>();
    if (const json& profile = j.at("profile"); !profile.is_null()) {
      o.profile = profile_from_json(profile);
    }
  } catch (const std::exception& e) {
    return Status::Error(std::string("bad outcome from worker: ") + e.what());
  }
  return o;
}

Result<std::unique_ptr<DeviceExecutor>> make_device_executor(const std::string& device) {
  if (device == "cpu") {
    const double memory =
        static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
    return make_cpu_executor(static_cast<size_t>(kHostScratchFraction * memory));
  }
  if (device == "emu") {
    const double memory =
        static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
    return make_emu_executor(static_cast<size_t>(kHostScratchFraction * memory));
  }
  if (device.rfind("cuda:", 0) == 0) {
#if defined(ATTNBENCH_HAVE_CUDA)
    int ordinal = -1;
    try {
      size_t used = 0;
      ordinal = std::stoi(device.substr(kCudaPrefixChars), &used);
      if (used != device.size() - kCudaPrefixChars) ordinal = -1;
    } catch (const std::exception&) {
      ordinal = -1;
    }
    if (ordinal >= 0) {
      Status status;
      std::unique_ptr<DeviceExecutor> executor = make_cuda_executor(ordinal, status);
      if (!executor) return status;
      return executor;
    }
#else
    return Status::Error("device " + device + " needs the CUDA backend, which this build lacks");
#endif
  }
  return Status::Error("unknown device '" + device + "'; accepted: cpu, emu, cuda:N");
}

int worker_main(const std::string& device, const std::vector<std::string>& plugins,
                const std::vector<std::string>& kernel_globs) {
  // The protocol owns the original stdout; anything a kernel or library prints goes to stderr.
  const int protocol_fd = dup(STDOUT_FILENO);
  dup2(STDERR_FILENO, STDOUT_FILENO);
  if (Status s = add_requested_kernels(plugins, kernel_globs); !s.ok) {
    std::cerr << "worker: " << s.message << "\n";
    return 2;
  }
  const Result<std::unique_ptr<DeviceExecutor>> executor = make_device_executor(device);
  if (!executor) {
    std::cerr << "worker: " << executor.status().message << "\n";
    return 2;
  }
  CaseRunner runner(**executor);
  std::string line;
  while (std::getline(std::cin, line)) {
    std::vector<CaseOutcome> outcomes(1);
    if (const Result<std::vector<CaseRequest>> requests = decode_requests(line); !requests) {
      outcomes.front().message = requests.status().message;
    } else {
      outcomes = runner.run_group(*requests);
    }
    bool unusable = false;
    for (const CaseOutcome& outcome : outcomes) {
      if (!write_all(protocol_fd, encode_outcome(outcome) + "\n")) return 2;
      unusable = unusable || outcome.device_unusable;
    }
    if (unusable) return 3;  // the parent starts a fresh worker
  }
  return 0;
}

WorkerProcess::WorkerProcess(std::vector<std::string> command, std::string device)
    : command_(std::move(command)), device_(std::move(device)) {}

WorkerProcess::~WorkerProcess() { stop(false); }

Status WorkerProcess::start() {
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    return Status::Error(std::string("cannot create pipes for a worker: ") + std::strerror(errno));
  }
  std::vector<std::string> arguments = command_;
  arguments.insert(arguments.end(), {"__worker", "--device", device_});
  // The worker loads the same kernels from outside the build as this process did.
  const ExternalKernelSources& external = external_kernel_sources();
  for (const std::string& plugin : external.plugins) arguments.insert(arguments.end(), {"--plugin", plugin});
  for (const std::string& glob : external.kernel_globs) arguments.insert(arguments.end(), {"--kernels", glob});
  std::vector<char*> argv;
  for (std::string& a : arguments) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return Status::Error(std::string("cannot start a worker: ") + std::strerror(errno));
  if (pid == 0) {
    dup2(in_pipe[0], STDIN_FILENO);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    execv(argv[0], argv.data());
    std::fprintf(stderr, "cannot start worker '%s': %s\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  pid_ = pid;
  to_worker_ = in_pipe[1];
  from_worker_ = out_pipe[0];
  worker_stderr_ = err_pipe[0];
  pending_.clear();
  stderr_text_.clear();
  return Status::Ok();
}

void WorkerProcess::stop(bool force) {
  if (pid_ < 0) return;
  if (to_worker_ >= 0) close(to_worker_);  // EOF: a healthy worker exits by itself
  if (force) kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  for (int* fd : {&from_worker_, &worker_stderr_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
  to_worker_ = -1;
  pid_ = -1;
}

void WorkerProcess::drain_stderr() {
  char buffer[4096];
  while (worker_stderr_ >= 0) {
    pollfd fd{worker_stderr_, POLLIN, 0};
    if (poll(&fd, 1, 0) <= 0) return;
    const ssize_t n = read(worker_stderr_, buffer, sizeof buffer);
    if (n <= 0) {  // the worker closed its stderr: stop polling it
      close(worker_stderr_);
      worker_stderr_ = -1;
      return;
    }
    stderr_text_.append(buffer, static_cast<size_t>(n));
    if (stderr_text_.size() > 2 * kStderrTailBytes) stderr_text_.erase(0, stderr_text_.size() - kStderrTailBytes);
  }
}

std::string WorkerProcess::stderr_tail() const {
  std::string tail = stderr_text_.size() > kStderrTailBytes
                         ? stderr_text_.substr(stderr_text_.size() - kStderrTailBytes)
                         : stderr_text_;
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  const size_t last_line = tail.rfind('\n');
  return last_line == std::string::npos ? tail : tail.substr(last_line + 1);
}

CaseOutcome WorkerProcess::run(const CaseRequest& request, std::chrono::seconds timeout) {
  return exchange(encode_request(request), 1, timeout).front();
}

std::vector<CaseOutcome> WorkerProcess::run_group(const std::vector<CaseRequest>& requests,
                                                  std::chrono::seconds timeout) {
  return exchange(encode_group_request(requests), requests.size(), timeout);
}

std::vector<CaseOutcome> WorkerProcess::exchange(const std::string& request_line, size_t count,
                                                 std::chrono::seconds timeout) {
  std::vector<CaseOutcome> outcomes;
  // What every case without an outcome gets when the exchange fails.
  auto fail_rest = [&](ResultStatus status, const std::string& message) {
    while (outcomes.size() < count) {
      CaseOutcome outcome;
      outcome.status = status;
      outcome.message = message;
      outcomes.push_back(outcome);
    }
    return outcomes;
  };
  if (pid_ < 0) {
    if (Status s = start(); !s.ok) return fail_rest(ResultStatus::error, s.message);
  }
  signal(SIGPIPE, SIG_IGN);  // a dead worker must not kill the parent through a write
  if (!write_all(to_worker_, request_line + "\n")) {
    drain_stderr();  // what it said before it went: the reason
    stop(true);
    return fail_rest(ResultStatus::crashed, "worker gone before the case started: " + stderr_tail());
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[65536];
  for (;;) {
    for (size_t newline = pending_.find('\n'); newline != std::string::npos;
         newline = pending_.find('\n')) {
      const std::string line = pending_.substr(0, newline);
      pending_.erase(0, newline + 1);
      if (Result<CaseOutcome> decoded = decode_outcome(line); decoded) {
        outcomes.push_back(std::move(*decoded));
      } else {
        outcomes.emplace_back().message = decoded.status().message;
      }
      if (outcomes.size() < count) continue;
      drain_stderr();
      const bool unusable = std::any_of(outcomes.begin(), outcomes.end(),
                                        [](const CaseOutcome& o) { return o.device_unusable; });
      if (unusable) stop(false);  // it exits by itself; reap it
      return outcomes;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      stop(true);
      return fail_rest(ResultStatus::timeout, "no result after " + std::to_string(timeout.count()) +
                                                  " s (watchdog); the worker was killed");
    }
    pollfd fds[2] = {{from_worker_, POLLIN, 0}, {worker_stderr_, POLLIN, 0}};
    const int ready = poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (fds[1].revents & (POLLIN | POLLHUP)) drain_stderr();
    if (fds[0].revents & (POLLIN | POLLHUP)) {
      const ssize_t n = read(from_worker_, buffer, sizeof buffer);
      if (n > 0) {
        pending_.append(buffer, static_cast<size_t>(n));
        continue;
      }
      break;  // EOF: the worker died
    }
  }
  // The worker died mid-case: say how.
  drain_stderr();
  int status = 0;
  const pid_t pid = pid_;
  close(to_worker_);
  to_worker_ = -1;
  waitpid(pid, &status, 0);
  pid_ = -1;
  for (int* fd : {&from_worker_, &worker_stderr_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
  std::string how = WIFSIGNALED(status) ? "worker killed by " + signal_description(WTERMSIG(status))
                                        : "worker exited with code " + std::to_string(WEXITSTATUS(status));
  const std::string tail = stderr_tail();
  return fail_rest(ResultStatus::crashed, how + (tail.empty() ? "" : ": " + tail));
}

}  // namespace attnbench
