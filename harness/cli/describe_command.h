// `attnbench describe`: what attnbench would store about cases, without running them: each
// shape's canonical text, FLOPs and bytes, and per kernel and distribution the case as the store
// writes it (case key, cases row), its label, per device model its series key and its kernel's
// aggregate key, and the kernel's expectation of one forward (Kernel::expected_resources).
// Python that writes or reads databases (the report's and gpu-check's test fixtures) asks it
// instead of restating the shape syntax, the series key, the FLOP convention or a kernel's
// formulas; many cases in one call, so a fixture pays one process start.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace attnbench {

struct DescribeOptions {
  std::vector<std::string> shapes;        // --shape, as `run` takes them
  std::vector<std::string> kernel_globs;  // over the registry; empty: shapes only
  // Names described as they are, for a kernel outside the registry (a plugin or Python kernel not
  // loaded here, a name an older database holds): its series key and stored case, no expectation.
  std::vector<std::string> kernel_names;
  std::vector<std::string> distributions;  // empty: normal
  std::vector<std::string> device_names;   // empty: no series key (it names a device model)
  bool json = false;
};

int describe_command(const DescribeOptions& options, std::ostream& out, std::ostream& err);

}  // namespace attnbench
