// What the database commands share: opening the store with a one-line error, resolving a run
// argument, and short spellings of numbers and commits.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "harness/store/store.h"

namespace attnbench {

// nullptr after printing "error: <why>" to `err`.
std::unique_ptr<Store> open_store(const std::string& db_path, std::ostream& err);
// "latest" (the newest run that is not a rerun) or a positive id; nullopt after printing the
// error, which names `what` and what is accepted.
std::optional<int64_t> resolve_run(Store& store, const std::string& text, const std::string& what,
                                   std::ostream& err);
std::string scientific(double value);  // "1.23e-04"

}  // namespace attnbench
