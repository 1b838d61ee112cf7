// `attnbench profile`: where one forward's time goes (issue 17). For each selected case, after a
// warm-up, plain timed forwards alternate with forwards whose phases are recorded
// (kernels/cpu/phases.h); the recorded forward of median time is shown against the plain median.
// Its breakdown is printed and stored (the `profiles` table of --db), and its phases written as
// a Chrome / Perfetto trace with --trace. CPU kernels: CUPTI's trace of
// the GPU kernels is not built yet, and they are named and skipped.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace attnbench {

struct ProfileOptions {
  std::string suite;
  std::vector<std::string> shapes;
  std::vector<std::string> kernel_globs;
  std::string filter;
  std::string distribution = "normal";  // for --shape
  std::string trace_path;               // --trace: the Chrome trace JSON
  std::string db_path;                  // --db: store the breakdowns; empty: print only
  int timed_forwards = 5;               // pairs of a plain and a recorded forward
};

int profile_command(const ProfileOptions& options, std::ostream& out, std::ostream& err);

}  // namespace attnbench
