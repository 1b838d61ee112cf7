// `attnbench tune`: a kernel's published variants (Kernel::variant_of) beside the kernel itself,
// checked and timed in one stored run, then per shape the fastest that passed and its margin over
// the kernel's own choice (Kernel::default_variant, the table the kernel owns): what Triton's
// autotune gives a Triton user, for attnbench's kernels.
#pragma once

#include <ostream>
#include <string>

#include "harness/cli/runner.h"

namespace attnbench {

struct TuneOptions {
  std::string kernel;  // --kernel: a kernel with variants (not a variant)
  // The selection, devices and measurement as `run` takes them; tune sets the kernels. On the
  // CPU and on GPUs the variants of a shape are timed round-robin (RunOptions::interleave,
  // interleave_gpus); under emu each is checked and none timed, as the emulated device measures
  // no time.
  RunOptions run;
};

int tune_command(const TuneOptions& options, std::ostream& out, std::ostream& err);

}  // namespace attnbench
