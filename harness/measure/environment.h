// What a run was measured on and built with, captured once per run.
#pragma once

#include <string>

#include "harness/core/records.h"

namespace attnbench {

EnvironmentInfo capture_environment();
// What this binary was built with (build type, flags, compiler) and nothing else: what a series
// key's build part reads (series_build), without the git, host and CUDA queries of a run.
EnvironmentInfo compiled_environment();
std::string now_utc_iso8601();
std::string cpu_model_name();  // /proc/cpuinfo "model name"
std::string make_uuid();       // random, 128 bits, canonical text form
// Output of a shell command (first line, trimmed); empty on failure.
std::string command_output(const std::string& command);

}  // namespace attnbench
