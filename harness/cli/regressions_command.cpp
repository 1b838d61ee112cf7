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

int regression_exit_code(const RegressionReport& report, const RegressionOptions& options) {
  if (report.measured == 0) return kExitUsage;
  for (const AlertRecord& alert : report.alerts) {
    if (alert_gates(alert, options.fail_on_suspected)) return kExitFailures;
  }
  return kExitClean;
}

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
  if (report.alerts.empty()) {
    out << "  no alerts\n";
    return;
  }
  // Gating alerts first, then warnings, then the rest.
  std::vector<const AlertRecord*> sorted;
  for (const AlertRecord& a : report.alerts) sorted.push_back(&a);
  std::stable_sort(sorted.begin(), sorted.end(), [](const AlertRecord* a, const AlertRecord* b) {
    return a->severity < b->severity;  // Severity is ordered most severe first
  });
  for (const AlertRecord* alert : sorted) {
    std::string tag = alert->state;
    std::transform(tag.begin(), tag.end(), tag.begin(), ::toupper);
    char head[64];
    std::snprintf(head, sizeof head, "%-9s %-12s %-11s ", severity_name(alert->severity).data(),
                  tag.c_str(), alert_kind_name(alert->kind).data());
    out << head << alert->message << "\n";
    if (!alert->environment.empty() && alert->kind != AlertKind::run) out << "          environment: " << alert->environment << "\n";
    if (!alert->annotation.empty()) out << "          annotated " << alert->annotation << "\n";
  }
}

std::string regression_summary_markdown(const RegressionReport& report) {
  std::ostringstream md;
  md << "## attnbench regressions: run " << report.run_id << " (" << report.suite << ")\n\n"
     << report.results << " results";
  if (report.rerun_id != 0) md << ", rerun " << report.rerun_id << " folded in";
  md << ". Verdicts:";
  for (const auto& [name, count] : report.verdict_counts) md << " " << count << " " << name << ",";
  md.seekp(-1, std::ios_base::cur);
  md << ".\n\n";
  if (report.alerts.empty()) {
    md << "No alerts.\n";
    return md.str();
  }
  md << "| severity | state | kind | what | environment | annotation |\n|---|---|---|---|---|---|\n";
  for (const AlertRecord& a : report.alerts) {
    md << "| " << severity_name(a.severity) << " | " << a.state << " | " << alert_kind_name(a.kind) << " | "
       << markdown_cell(a.message) << " | " << markdown_cell(a.environment) << " | "
       << markdown_cell(a.annotation) << " |\n";
  }
  return md.str();
}

std::string regression_junit_xml(const RegressionReport& report, const RegressionOptions& options) {
  std::map<std::string, std::vector<const AlertRecord*>> by_series;
  for (const AlertRecord& a : report.alerts) by_series[a.series_key].push_back(&a);
  std::vector<CiCase> cases;
  auto add_case = [&](const std::string& key, const std::string& classname, const std::string& name) {
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
  std::set<std::string> seen;
  for (const std::string& key : report.series) {
    seen.insert(key);
    add_case(key, kernel_of_series_key(key), shape_of_series_key(key));
  }
  for (const auto& [key, alerts] : by_series) {
    if (seen.count(key)) continue;
    if (alerts.front()->kind == AlertKind::kernel) {
      add_case(key, kernel_of_series_key(key), "all shapes");
    } else if (alerts.front()->kind == AlertKind::run) {
      add_case(key, "run", "run " + std::to_string(report.run_id));
    } else {
      add_case(key, kernel_of_series_key(key), shape_of_series_key(key));
    }
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
    const Result<RegressionReport> analysed = analyse_stored_run(*store, run_id, options.detector);
    if (!analysed) {
      err << "error: " << analysed.status().message << "\n";
      return kExitUsage;
    }
    const RegressionReport& report = *analysed;
    print_regression_report(report, out);
    const int code = regression_exit_code(report, options);
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
