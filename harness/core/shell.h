// Shell quoting: one rule for every command the harness prints, stores or runs (a run's command
// line, a result's reproducing command, the git calls of the environment capture).
#pragma once

#include <string>
#include <vector>

namespace attnbench {

// `text` as one POSIX shell word. Left as it is when every character is one no shell treats
// specially (letters, digits and @%+=:,./-_), so `--shape b=1,hq=2,s=33,d=16` stays readable;
// otherwise in single quotes, an embedded ' written '\''. The empty word is ''. Python's
// shlex.quote follows the same rule, so scripts and the harness quote alike.
std::string shell_quote(const std::string& text);

// The words, each shell_quote'd, joined by single spaces.
std::string shell_join(const std::vector<std::string>& words);

}  // namespace attnbench
