// The attnbench command line: list, run, check, show, calibrate. Returns the process exit code
// (0 clean, 1 failures, 2 usage or infrastructure error / nothing measured).
#pragma once

namespace attnbench {

int run_cli(int argc, char** argv);

}  // namespace attnbench
