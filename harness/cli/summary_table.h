// The end-of-run table (also `attnbench show`): kernel, shape, status, error against its bound,
// median time, throughput, and the ratio to the fastest kernel on the same shape and device; a
// result that did not pass has its message under its row, indented.
#pragma once

#include <ostream>
#include <vector>

#include "harness/core/records.h"

namespace attnbench {

void print_summary_table(const std::vector<ResultRecord>& results, std::ostream& out);
// "12 passed, 1 failed, 3 skipped" — every status that occurred.
std::string status_counts(const std::vector<ResultRecord>& results);

}  // namespace attnbench
