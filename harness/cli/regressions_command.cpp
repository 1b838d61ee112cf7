// `attnbench regressions`: judge runs, print their alerts, write JUnit and a Markdown summary;
// the exit code says whether anything gates the job.
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

int regression_exit_code(const RegressionReport& report) {
  switch (report.triage.gate) {
    case GateDecision::nothing_measured:
      return kExitUsage;
    case GateDecision::failed:
      return kExitFailures;
    case GateDecision::passed:
      return kExitClean;
  }
  return kExitUsage;
}

namespace {

// A row of a group as one line: its change, its case, what it is and its message.
std::string row_line(const TriageRow& row) {
  std::string line = signed_percent(row.change) + " ";
  line.resize(std::max<size_t>(line.size(), 10), ' ');
  line += row.case_label.empty() ? std::string() : row.case_label + "  ";
  const std::string sees = row_sight_text(row);
  return line + row.what + (row.message.empty() ? "" : ": " + row.message) +
         (sees.empty() ? "" : " [" + sees + "]");
}

// The rows of a group the terminal shows: the alerted ones, and of a kernel that moved as a
// whole its slowest shapes, up to this many (the summary and the report list them all).
constexpr size_t kRowsPrinted = 12;

}  // namespace

void print_regression_report(const RegressionReport& report, std::ostream& out) {
  out << "regressions of run " << report.run_id << " (" << report.suite << "): " << report.results
      << " results";
  if (report.rerun_id != 0) out << ", rerun " << report.rerun_id << " folded in";
  out << "\n";
  for (size_t i = 0; i < report.levels.size(); ++i) {
    const RunLevel& level = report.levels[i];
    out << "  level on " << level.device_name << ": ";
    if (level.series_count > 0) {
      char scatter[64];
      std::snprintf(scatter, sizeof scatter, ", scatter %.2fx the usual spread",
                    i < report.scatters.size() ? report.scatters[i] : kNotMeasured);
      out << signed_percent(std::exp(level.level) - 1) << " over " << level.series_count
          << " series" << scatter;
    } else {
      out << "not normalized (too few series with history)";
    }
    out << "\n";
  }
  out << "  verdicts:";
  for (const auto& [name, count] : report.verdict_counts) out << " " << count << " " << name;
  out << "\n";
  // What the gate can see (issue 41): how many kernels meet the target, and each that does not
  // (--summary-md and the report list every kernel).
  if (!report.triage.sight.empty()) {
    const auto misses = std::count_if(report.triage.sight.begin(), report.triage.sight.end(),
                                      [](const KernelSight& sight) { return sight.misses_target; });
    out << "  can see a " << plain_percent(report.triage.detect_target)
        << " slowdown within 3 nightlies: " << report.triage.sight.size() - misses << " of "
        << report.triage.sight.size() << " kernels\n";
    for (const KernelSight& sight : report.triage.sight) {
      if (sight.misses_target) {
        out << "    not " << sight.kernel << " on " << sight.device << ": " << sight_text(sight)
            << "\n";
      }
    }
  }
  // One block per kernel and device, in the triage's order, its rows beneath it.
  for (const TriageGroup& group : report.triage.groups) {
    char severity[16];
    std::snprintf(severity, sizeof severity, "%-9s ", severity_name(group.severity).data());
    out << severity << triage_group_name(group) << ": " << group.headline << "\n";
    if (!group.message.empty()) out << "          why: " << group.message << "\n";
    if (!group.annotation.empty()) out << "          annotated " << group.annotation << "\n";
    if (!group.environment.empty()) out << "          environment: " << group.environment << "\n";
    size_t printed = 0;
    for (const TriageRow& row : group.rows) {
      if (printed == kRowsPrinted) break;
      out << "          " << row_line(row) << "\n";
      if (!row.annotation.empty()) out << "            annotated " << row.annotation << "\n";
      ++printed;
    }
    if (group.rows.size() > printed) {
      out << "          ... and " << group.rows.size() - printed
          << " more shapes (--summary-md and the report list them all)\n";
    }
  }
  if (report.triage.groups.empty()) out << "  no alerts\n";
  out << report.triage.verdict << "\n";
}

std::string regression_summary_markdown(const RegressionReport& report) {
  std::ostringstream md;
  md << "## attnbench regressions: run " << report.run_id << " (" << report.suite << ")\n\n"
     << "**" << markdown_cell(report.triage.verdict) << "**\n\n" << report.results << " results";
  if (report.rerun_id != 0) md << ", rerun " << report.rerun_id << " folded in";
  md << ". Verdicts:";
  for (const auto& [name, count] : report.verdict_counts) md << " " << count << " " << name << ",";
  md.seekp(-1, std::ios_base::cur);
  md << ".\n\n";
  if (!report.triage.sight.empty()) {
    md << "What the gate can see (the smallest slowdown it would confirm; target "
       << plain_percent(report.triage.detect_target) << " within 3 nightlies):\n\n"
       << "| kernel | device | can see | meets the target |\n|---|---|---|---|\n";
    for (const KernelSight& sight : report.triage.sight) {
      md << "| " << markdown_cell(sight.kernel) << " | " << markdown_cell(sight.device) << " | "
         << markdown_cell(sight_text(sight)) << " | " << (sight.misses_target ? "no" : "yes")
         << " |\n";
    }
    md << "\n";
  }
  if (report.triage.groups.empty()) return md.str();
  md << "| severity | kernel | device | what happened | differs from baseline |\n|---|---|---|---|---|\n";
  for (const TriageGroup& group : report.triage.groups) {
    md << "| " << severity_name(group.severity) << " | "
       << markdown_cell(group.kernel.empty() ? "the run" : group.kernel) << " | "
       << markdown_cell(group.device) << " | "
       << markdown_cell(group.headline + (group.message.empty() ? "" : "\n" + group.message)) << " | "
       << markdown_cell(group.environment) << " |\n";
  }
  // Each group's rows, folded (GitHub renders <details>), in the same order.
  for (const TriageGroup& group : report.triage.groups) {
    md << "\n<details><summary>" << markdown_cell(triage_group_name(group)) << ": " << group.rows.size()
       << (group.rows.size() == 1 ? " row" : " rows") << "</summary>\n\n"
       << "| change | case | what | message |\n|---|---|---|---|\n";
    for (const TriageRow& row : group.rows) {
      md << "| " << signed_percent(row.change) << " | " << markdown_cell(row.case_label) << " | "
         << markdown_cell(row.what) << " | "
         << markdown_cell(row.message) << " |\n";
    }
    md << "\n</details>\n";
  }
  return md.str();
}

std::string regression_junit_xml(const RegressionReport& report, const RegressionOptions& options) {
  std::map<std::string, std::vector<const AlertRecord*>> by_series;
  for (const AlertRecord& a : report.alerts) by_series[a.series_key].push_back(&a);
  std::vector<CiCase> cases;
  std::set<std::string> seen;
  auto add_case = [&](const std::string& key, const std::string& classname, const std::string& name) {
    if (!seen.insert(key).second) return;
    CiCase c;
    c.classname = classname;
    c.name = name;
    for (const AlertRecord* a : by_series[key]) {
      const std::string kind(alert_kind_name(a->kind));
      if (alert_gates(*a, options.fail_on_suspected) && c.outcome != CiCase::Outcome::failed) {
        c.outcome = CiCase::Outcome::failed;
        c.message = kind + " " + a->state + ": " + a->message;
      }
      c.details += std::string(severity_name(a->severity)) + " " + kind + " " + a->state + ": " + a->message +
                   (a->environment.empty() ? "" : "\nenvironment: " + a->environment) + "\n";
    }
    cases.push_back(c);
  };
  // The triage's groups first, in its order (a kernel's own case, "all shapes", before its
  // shapes), then every other series of the run.
  for (const TriageGroup& group : report.triage.groups) {
    if (group.kernel.empty()) {  // findings about the run: one case each
      for (const TriageRow& row : group.rows) {
        add_case(row.series_key, "run", "run " + std::to_string(report.run_id) + ": " + row.what);
      }
      continue;
    }
    if (by_series.count(group.key)) add_case(group.key, group.kernel, "all shapes");
    for (const TriageRow& row : group.rows) add_case(row.series_key, group.kernel, shape_of_series_key(row.series_key));
  }
  for (const std::string& key : report.series) {
    add_case(key, kernel_of_series_key(key), shape_of_series_key(key));
  }
  return junit_xml("attnbench regressions run " + std::to_string(report.run_id), cases);
}

int regressions_command(const std::string& db_path, const std::string& run_text,
                        const RegressionOptions& options, std::ostream& out, std::ostream& err) {
  std::unique_ptr<Store> store = open_store(db_path, err);
  if (!store) return kExitUsage;
  std::vector<int64_t> run_ids;
  if (run_text == "unanalysed") {
    Result<std::vector<int64_t>> unanalysed = store->unanalysed_runs();
    if (!unanalysed) {
      err << "error: " << unanalysed.status().message << "\n";
      return kExitUsage;
    }
    run_ids = std::move(*unanalysed);
    if (run_ids.empty()) {
      err << "error: regressions --run unanalysed: every run in " << db_path << " was analysed already\n";
      return kExitUsage;
    }
  } else {
    std::stringstream list(run_text);
    for (std::string item; std::getline(list, item, ',');) {
      std::optional<int64_t> id = resolve_run(*store, item, "--run", err);
      if (!id) return kExitUsage;
      run_ids.push_back(*id);
    }
  }
  int exit_code = kExitClean;
  std::string junit_text, markdown;
  for (int64_t run_id : run_ids) {
    const Result<RegressionReport> analysed =
        analyse_stored_run(*store, run_id, options.detector, options.fail_on_suspected);
    if (!analysed) {
      err << "error: " << analysed.status().message << "\n";
      return kExitUsage;
    }
    const RegressionReport& report = *analysed;
    print_regression_report(report, out);
    const int code = regression_exit_code(report);
    if (code == kExitUsage) err << "error: run " << run_id << " measured nothing (no passed or failed result)\n";
    exit_code = std::max(exit_code, code);
    markdown += regression_summary_markdown(report) + "\n";
    junit_text = regression_junit_xml(report, options);  // the newest run's
  }
  if (!options.summary_md_path.empty()) {
    if (Status written = write_text_file(options.summary_md_path, markdown); !written) {
      err << "error: --summary-md: " << written.message << "\n";
      exit_code = kExitUsage;
    }
  }
  if (!options.junit_path.empty()) {
    if (Status written = write_text_file(options.junit_path, junit_text); !written) {
      err << "error: --junit: " << written.message << "\n";
      exit_code = kExitUsage;
    }
  }
  out << "regressions: exit " << exit_code
      << (exit_code == kExitClean ? " (clean)"
          : exit_code == kExitFailures
              ? (options.fail_on_suspected ? " (failures, confirmed or suspected regressions)"
                                           : " (failures or confirmed regressions)")
              : " (nothing measured, or an error)")
      << "\n";
  return exit_code;
}

}  // namespace attnbench
