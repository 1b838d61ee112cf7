// `attnbench history`: a series over its runs, with what the detector stored about each run and
// the change points (PELT) of its history.
#include "harness/cli/history.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "harness/analysis/alert_wording.h"
#include "harness/cli/ci_reports.h"
#include "harness/cli/command_support.h"
#include "harness/cli/runner.h"
#include "harness/core/progress.h"
#include "harness/core/series_key.h"
#include "harness/core/statistics.h"
#include "harness/measure/devices.h"
#include "harness/suite/case_matrix.h"

namespace attnbench {

namespace {

// What the detector stored about a result: its analysis row, or for a run analysed before schema 6
// its alert; "-" when neither (never analysed, or analysed before schema 6 without an alert).
std::string stored_verdict(const HistoryRow& row) {
  if (row.analysis) return std::string(verdict_name(row.analysis->verdict));
  return row.performance_state.empty() ? "-" : row.performance_state;
}

}  // namespace

int history_command(const std::string& db_path, const HistoryOptions& options, std::ostream& out,
                    std::ostream& err) {
  if (options.series.empty() == options.kernel_glob.empty()) {
    err << "error: history: give --series KEY or --kernel GLOB [--shape GLOB], not both\n";
    return kExitUsage;
  }
  std::unique_ptr<Store> store = open_store(db_path, err);
  if (!store) return kExitUsage;
  std::vector<std::string> keys = options.series;
  if (keys.empty()) {
    const std::string shape_glob = options.shape_glob.empty() ? "*" : options.shape_glob;
    const Result<std::vector<std::string>> all_keys = store->series_keys();
    if (!all_keys) {
      err << "error: " << all_keys.status().message << "\n";
      return kExitUsage;
    }
    for (const std::string& key : *all_keys) {
      std::string shape = shape_of_series_key(key);
      shape = shape.substr(0, shape.find(" dist="));
      if (glob_match(options.kernel_glob, kernel_of_series_key(key)) && glob_match(shape_glob, shape)) {
        keys.push_back(key);
      }
    }
  }
  if (keys.empty()) {
    err << "error: history: no series matches in " << db_path << "\n";
    return kExitUsage;
  }
  if (keys.size() > static_cast<size_t>(options.max_series)) {
    out << keys.size() << " series match; showing the first " << options.max_series
        << " (narrow with --shape, or raise --max-series)\n";
    keys.resize(static_cast<size_t>(options.max_series));
  }
  for (const std::string& key : keys) {
    const Result<std::vector<HistoryRow>> history = store->full_series_history(key);
    if (!history) {
      err << "error: " << history.status().message << "\n";
      return kExitUsage;
    }
    const std::vector<HistoryRow>& rows = *history;
    out << "\nseries " << key << "\n";
    if (rows.empty()) {
      out << "  no results\n";
      continue;
    }
    // Change points on the level-free log medians of the passed results.
    std::vector<double> values;
    std::vector<size_t> positions;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (rows[i].status != ResultStatus::passed || !std::isfinite(rows[i].median_s) || rows[i].median_s <= 0) continue;
      values.push_back(std::log(rows[i].median_s) - (std::isfinite(rows[i].level) ? rows[i].level : 0));
      positions.push_back(i);
    }
    const std::vector<double> clean = despike(values);
    constexpr size_t kMinSegment = 3;  // a change must hold for 3 runs to be one
    const std::vector<size_t> changes = pelt_change_points(
        clean, change_point_penalty(clean, DetectorOptions{}.spread_floor), kMinSegment);
    std::set<size_t> change_rows;
    for (size_t c : changes) change_rows.insert(positions[c]);
    char line[256];
    std::snprintf(line, sizeof line, "  %6s  %-20s  %-10s  %-8s  %12s  %12s  %9s  %-20s  %s\n", "run",
                  "started", "commit", "status", "median", "level-free", "change", "verdict", "chip");
    out << line;
    for (size_t i = 0; i < rows.size(); ++i) {
      const HistoryRow& r = rows[i];
      const double level_free = std::isfinite(r.median_s) ? r.median_s * std::exp(-(std::isfinite(r.level) ? r.level : 0)) : kNotMeasured;
      std::snprintf(line, sizeof line, "%s %6lld  %-20s  %-10s  %-8s  %12s  %12s  %9s  %-20s  %s\n",
                    change_rows.count(i) ? ">" : " ", static_cast<long long>(r.run_id),
                    r.started_at.c_str(), short_sha(r.git_sha).c_str(),
                    std::string(result_status_name(r.status)).c_str(),
                    std::isfinite(r.median_s) ? format_seconds(r.median_s).c_str() : "-",
                    std::isfinite(level_free) ? format_seconds(level_free).c_str() : "-",
                    r.analysis ? signed_percent(r.analysis->change).c_str() : "-",
                    stored_verdict(r).c_str(), r.chip.c_str());
      out << line;
    }
    // Segments and the change at each boundary.
    if (values.size() < 2 * kMinSegment) {
      out << "  change points: too few timed runs (" << values.size() << ")\n";
      continue;
    }
    out << "  change points (PELT on level-free log medians, spikes clamped): "
        << (changes.empty() ? "none" : std::to_string(changes.size())) << "\n";
    std::vector<size_t> bounds = {0};
    bounds.insert(bounds.end(), changes.begin(), changes.end());
    bounds.push_back(values.size());
    for (size_t s = 0; s + 1 < bounds.size(); ++s) {
      const std::vector<double> segment(values.begin() + static_cast<std::ptrdiff_t>(bounds[s]),
                                        values.begin() + static_cast<std::ptrdiff_t>(bounds[s + 1]));
      const HistoryRow& first = rows[positions[bounds[s]]];
      const HistoryRow& last = rows[positions[bounds[s + 1] - 1]];
      out << "    runs " << first.run_id << ".." << last.run_id << ": "
          << format_seconds(std::exp(median(segment))) << " (" << segment.size() << " runs)";
      if (s > 0) {
        const std::vector<double> before(values.begin() + static_cast<std::ptrdiff_t>(bounds[s - 1]),
                                         values.begin() + static_cast<std::ptrdiff_t>(bounds[s]));
        out << ", " << signed_percent(std::exp(median(segment) - median(before)) - 1)
            << " from run " << first.run_id << " (" << first.started_at << ", commit "
            << short_sha(first.git_sha) << ")";
      }
      out << "\n";
    }
  }
  return kExitClean;
}

}  // namespace attnbench
