// Runs a shell command and captures its stdout and stderr together: the tests' one way to drive
// the attnbench CLI and external tools (cuobjdump, ...).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace attnbench {

struct CommandResult {
  int exit_code = -1;  // -1: the command could not start or did not exit normally
  std::string output;  // stdout and stderr together
};

inline CommandResult run_shell(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace attnbench
