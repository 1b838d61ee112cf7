// `attnbench profile`: where one forward's time goes (issue 17). Each selected case runs in its
// device's worker process, as in `run`: inputs, plan, the check against the reference (a case that
// fails it is not profiled), a warm-up, then plain timed forwards alternating with recorded ones
// (harness/measure/executor.h profile_forward: a CPU kernel's phases; CUPTI's kernels, copies,
// fills and runtime calls on a GPU; the launches on the emulated device). The recorded forward of
// median time is shown against the plain median; its breakdown is printed and stored (the
// `profiles` table of --db), and its activities written as a Chrome / Perfetto trace (--trace).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace attnbench {

struct ProfileOptions {
  std::string suite;
  std::vector<std::string> shapes;
  std::vector<std::string> kernel_globs;
  std::vector<std::string> plugins;  // --plugin: shared libraries of kernels, as `run` loads them
  std::string filter;
  std::string distribution = "normal";  // for --shape
  std::string pass;                     // --pass, as `run`
  std::string trace_path;               // --trace: the Chrome trace JSON
  std::string db_path;                  // --db: store the breakdowns; empty: print only
  int timed_forwards = 5;               // pairs of a plain and a recorded forward
  std::string devices = "all";          // as `run --devices`: cpu, gpu, ordinals, emu
  int case_timeout_seconds = 600;       // the worker's watchdog, per case
};

int profile_command(const ProfileOptions& options, std::ostream& out, std::ostream& err);

}  // namespace attnbench
