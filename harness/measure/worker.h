// Process isolation. Cases run in worker processes (`attnbench __worker --device D`), one per
// device, fed one case (or the cases of one problem, timed together) at a time over a pipe (one
// JSON line each way per case). A kernel that segfaults, aborts, leaves a sticky CUDA error or
// hangs takes only its worker down: the parent records the case as crashed or timeout with the
// message, starts a fresh worker and goes on.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "harness/measure/case_runner.h"

namespace attnbench {

// The worker's main loop; returns its exit code. `device` is "cpu" or "cuda:N"; `plugins` and
// `kernel_globs` load the kernels from outside the build the parent loaded (registry.h).
int worker_main(const std::string& device, const std::vector<std::string>& plugins,
                const std::vector<std::string>& kernel_globs);

// The executor for `device` ("cpu", "cuda:N"), what a worker runs its cases on (and the runner
// with --no-isolation); the reason when there is none. Host kernels may take half the
// machine's memory as scratch: beyond it they report out of memory and the case is skipped,
// instead of the machine swapping.
Result<std::unique_ptr<DeviceExecutor>> make_device_executor(const std::string& device);

class WorkerProcess {
 public:
  // `command` starts attnbench (its path); the worker arguments are appended.
  WorkerProcess(std::vector<std::string> command, std::string device);
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Sends the case and waits for its outcome up to `timeout`. On a crash or a timeout the
  // worker is gone (the next call starts a new one) and the outcome says crashed or timeout.
  CaseOutcome run(const CaseRequest& request, std::chrono::seconds timeout);
  // The cases of one problem, timed together (CaseRunner::run_group), up to `timeout` for all of
  // them: one outcome per request, in order. On a crash or a timeout every case without an
  // outcome gets that status and message.
  std::vector<CaseOutcome> run_group(const std::vector<CaseRequest>& requests,
                                     std::chrono::seconds timeout);

 private:
  // Sends one request line and reads `count` outcome lines (run, run_group).
  std::vector<CaseOutcome> exchange(const std::string& request_line, size_t count,
                                    std::chrono::seconds timeout);
  Status start();
  void stop(bool force);
  void drain_stderr();
  std::string stderr_tail() const;

  std::vector<std::string> command_;
  std::string device_;
  pid_t pid_ = -1;
  int to_worker_ = -1;
  int from_worker_ = -1;
  int worker_stderr_ = -1;
  std::string pending_;      // bytes read from the worker not yet forming a line
  std::string stderr_text_;  // the worker's recent stderr, for crash messages
};

// The protocol: one JSON object per line each way, every field of CaseRequest and CaseOutcome
// (the problem as its shape string; a number that was not measured as null; invalid UTF-8 in a
// text replaced, never a reason to fail). Decoding a line that is not a whole message (truncated,
// garbled, a field missing or of the wrong type) is an error status, never an exception.
std::string encode_request(const CaseRequest& request);
Result<CaseRequest> decode_request(const std::string& line);
// A group (run_group): {"group": [request, ...]}; the worker answers one outcome line per case.
// decode_requests takes either form (a single request is a group of one).
std::string encode_group_request(const std::vector<CaseRequest>& requests);
Result<std::vector<CaseRequest>> decode_requests(const std::string& line);
std::string encode_outcome(const CaseOutcome& outcome);
Result<CaseOutcome> decode_outcome(const std::string& line);

}  // namespace attnbench
