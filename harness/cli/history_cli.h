// The commands that read history: regressions, rerun, annotate, compare, export, history, merge.
// They register themselves on the CLI app; the returned function runs the one that was parsed
// and gives its exit code, or nothing when none of them was.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>

namespace attnbench {

std::function<std::optional<int>()> add_history_commands(CLI::App& app, std::string& db_path);

}  // namespace attnbench
