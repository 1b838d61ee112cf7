// `attnbench rerun`: re-measure a run's suspects (and some controls) at once on the same chip,
// then judge the run again with the rerun folded in.
#include "harness/cli/history.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "harness/analysis/alert_wording.h"
#include "harness/analysis/run_analysis.h"
#include "harness/cli/ci_reports.h"
#include "harness/cli/command_support.h"
#include "harness/cli/runner.h"
#include "harness/core/progress.h"
#include "harness/core/shell.h"
#include "harness/core/series_key.h"
#include "harness/core/statistics.h"
#include "harness/measure/devices.h"
#include "harness/suite/case_matrix.h"

namespace attnbench {


int rerun_command(const std::string& db_path, const RerunOptions& rerun,
                  const RegressionOptions& options, std::ostream& out, std::ostream& err) {
  std::unique_ptr<Store> store = open_store(db_path, err);
  if (!store) return kExitUsage;
  const std::optional<int64_t> run_id = resolve_run(*store, rerun.run_text, "--run", err);
  if (!run_id) return kExitUsage;
  const Result<StoredRun> run = store->load_run(*run_id);
  if (!run) {
    err << "error: " << run.status().message << "\n";
    return kExitUsage;
  }
  if (run->info.rerun_of != 0) {
    err << "error: run " << *run_id << " is itself a rerun (of run " << run->info.rerun_of << ")\n";
    return kExitUsage;
  }
  if (run->analysed_at.empty()) {
    if (const Result<RegressionReport> first = analyse_stored_run(*store, *run_id, options.detector, options.fail_on_suspected); !first) {
      err << "error: " << first.status().message << "\n";
      return kExitUsage;
    }
  }
  const Result<std::vector<AlertRecord>> alerts = store->run_alerts(*run_id);
  if (!alerts) {
    err << "error: " << alerts.status().message << "\n";
    return kExitUsage;
  }
  // Suspects: suspected or unclear results, and every shape of a suspected kernel; with each
  // suspected kernel measured against a peer, every shape of the peer (its rerun's level).
  std::set<std::string> suspects;
  std::set<std::string> suspect_groups;
  std::set<std::string> peer_groups;
  for (const AlertRecord& a : *alerts) {
    const std::optional<Verdict> state = parse_verdict(a.state);
    // An annotated suspicion (info: an expected change, an ignored series) is not re-measured.
    if ((state != Verdict::suspected && state != Verdict::ambiguous) || a.severity == Severity::info) continue;
    if (a.kind == AlertKind::performance || a.kind == AlertKind::accuracy) suspects.insert(a.series_key);
    if (a.kind == AlertKind::kernel) {
      suspect_groups.insert(a.series_key);
      const std::string peer = peer_of_kernel_alert(a);
      if (!peer.empty()) peer_groups.insert(peer);
    }
  }
  std::vector<const ResultRecord*> chosen;
  std::vector<const ResultRecord*> peers;
  std::vector<const ResultRecord*> others;
  for (const ResultRecord& r : run->results) {
    if (r.status != ResultStatus::passed) continue;
    if (suspects.count(r.series_key) || suspect_groups.count(group_key(r.series_key))) {
      chosen.push_back(&r);
    } else if (peer_groups.count(group_key(r.series_key))) {
      peers.push_back(&r);
    } else {
      others.push_back(&r);
    }
  }
  if (chosen.empty()) {
    out << "rerun: run " << *run_id << " has no suspects\n";
    const Result<RegressionReport> report = analyse_stored_run(*store, *run_id, options.detector, options.fail_on_suspected);
    if (!report) {
      err << "error: " << report.status().message << "\n";
      return kExitUsage;
    }
    print_regression_report(*report, out);
    return regression_exit_code(*report);
  }
  const size_t suspect_count = chosen.size();
  chosen.insert(chosen.end(), peers.begin(), peers.end());
  // Controls spread over the run: the rerun's own level comes from them.
  if (!others.empty() && rerun.controls > 0) {
    const size_t stride = std::max<size_t>(1, others.size() / static_cast<size_t>(rerun.controls));
    const size_t controls = static_cast<size_t>(rerun.controls);
    for (size_t i = 0, added = 0; i < others.size() && added < controls; i += stride, ++added) {
      chosen.push_back(others[i]);
    }
  }

  // The same chips: every device the chosen results ran on must be here, by UUID.
  const std::vector<Device> here = discover_devices();
  std::set<std::string> labels;
  for (const ResultRecord* r : chosen) {
    const DeviceInfo* device = nullptr;
    for (size_t i = 0; i < run->device_ids.size(); ++i) {
      if (run->device_ids[i] == r->device_id) device = &run->devices[i];
    }
    if (device == nullptr) continue;
    std::string label;
    for (const Device& d : here) {
      if (d.info.uuid == device->uuid && d.info.kind == device->kind) label = d.label();
    }
    if (label.empty()) {
      err << "error: rerun: run " << *run_id << " ran on " << device->name << " (" << device->uuid
          << "), which this machine does not have; a rerun must run on the same chip\n";
      return kExitUsage;
    }
    labels.insert(label);
  }

  RunOptions run_options;
  for (const ResultRecord* r : chosen) {
    run_options.cases.push_back(r->kernel + "|" + shape_string(r->problem) + "|" + r->distribution);
  }
  run_options.devices.clear();
  for (const std::string& label : labels) {
    const std::string name = label.rfind("cuda:", 0) == 0 ? label.substr(5) : label;
    run_options.devices += (run_options.devices.empty() ? "" : ",") + name;
  }
  if (run_options.devices.empty()) run_options.devices = "all";
  run_options.repetitions = static_cast<int>(protocol_number(run->info, "repetitions"));
  run_options.max_case_seconds = protocol_number(run->info, "max_case_seconds");
  run_options.db_path = db_path;
  run_options.rerun_of = *run_id;
  run_options.command_line = rerun.command_line.empty()
                                 ? shell_join({"attnbench", "rerun", "--suspects", "--run",
                                               std::to_string(*run_id), "--db", db_path})
                                 : rerun.command_line;
  run_options.worker_command = rerun.worker_command;
  out << "rerun of run " << *run_id << ": " << suspect_count << " suspects";
  if (!peers.empty()) out << ", " << peers.size() << " shapes of their peers";
  out << " and " << chosen.size() - suspect_count - peers.size() << " controls on "
      << run_options.devices << "\n";
  store.reset();  // the runner opens the file itself
  const int run_code = run_cases(run_options, out, err);
  if (run_code == kExitUsage) return kExitUsage;

  store = open_store(db_path, err);
  if (!store) return kExitUsage;
  const Result<RegressionReport> analysed = analyse_stored_run(*store, *run_id, options.detector, options.fail_on_suspected);
  if (!analysed) {
    err << "error: " << analysed.status().message << "\n";
    return kExitUsage;
  }
  const RegressionReport& report = *analysed;
  print_regression_report(report, out);
  int code = regression_exit_code(report);
  const std::pair<const std::string&, std::string> outputs[] = {
      {options.summary_md_path, regression_summary_markdown(report)},
      {options.junit_path, regression_junit_xml(report, options)}};
  for (const auto& [path, text] : outputs) {
    if (path.empty()) continue;
    if (Status written = write_text_file(path, text); !written) {
      err << "error: " << written.message << "\n";
      code = kExitUsage;
    }
  }
  out << "rerun: exit " << code << "\n";
  return code;
}

}  // namespace attnbench
