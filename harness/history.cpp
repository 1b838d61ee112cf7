// The history commands: the glue between the store and the detector (harness/regression.h),
// and what each command prints.
#include "harness/history.h"

#include <nlohmann/json.hpp>

#include "harness/case_matrix.h"


#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "harness/ci_reports.h"
#include "harness/devices.h"
#include "harness/progress.h"
#include "harness/runner.h"
#include "harness/statistics.h"
#include "harness/timing.h"

namespace attnbench {
namespace {

constexpr int64_t kNoRunLimit = std::numeric_limits<int64_t>::max();
// How many earlier runs a kernel-wide aggregate looks back past ambiguous ones for its prior.
constexpr int kGroupPriorLookback = 5;

std::string signed_percent(double fraction) {
  if (!std::isfinite(fraction)) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%+.1f %%", fraction * 100);
  return text;
}

std::string plain_percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %%", fraction * 100);
  return text;
}

std::string scientific(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2e", value);
  return text;
}

std::string short_sha(const std::string& sha) { return sha.substr(0, 10); }

std::unique_ptr<Store> open_store(const std::string& db_path, std::ostream& err) {
  Status status;
  std::unique_ptr<Store> store = Store::open(db_path, status);
  if (!store) err << "error: " << status.message << "\n";
  return store;
}

// "latest" (the newest run that is not a rerun) or a positive id.
std::optional<int64_t> resolve_run(Store& store, const std::string& text, const std::string& what,
                                   std::ostream& err) {
  Status status;
  if (text == "latest") {
    std::optional<int64_t> latest = store.latest_primary_run_id(status);
    if (!latest) {
      err << "error: " << (status ? "no run stored in " + store.path() : status.message) << "\n";
    }
    return latest;
  }
  try {
    size_t used = 0;
    const int64_t id = std::stoll(text, &used);
    if (used == text.size() && id > 0) return id;
  } catch (const std::exception&) {
  }
  err << "error: " << what << " '" << text << "': accepted: a positive run id or 'latest'\n";
  return std::nullopt;
}

Verdict verdict_or_ok(const std::string& text) { return parse_verdict(text).value_or(Verdict::ok); }

// Errors relative to the case's bound: fresh random inputs move both together.
double relative_error(double max_abs_error, double bound) {
  return std::isfinite(bound) && bound > 0 ? max_abs_error / bound : max_abs_error;
}

SeriesPoint point_from_history(const HistoryRow& row) {
  SeriesPoint point;
  point.run_id = row.run_id;
  point.status = row.status;
  point.median_s = row.median_s;
  point.cv = row.cv;
  point.clock_mhz = row.sm_clock_mhz;
  point.error = relative_error(row.max_abs_error, row.bound);
  point.level = std::isfinite(row.level) ? row.level : 0;
  point.chip = row.chip;
  point.state = verdict_or_ok(row.performance_state);
  point.since_run_id = row.performance_since;
  point.change = row.performance_change;
  point.chip_changed = row.chip_changed;
  point.accuracy_state = verdict_or_ok(row.accuracy_state);
  point.accuracy_since_run_id = row.accuracy_since;
  return point;
}

double median_sample_clock(const std::vector<Sample>& samples) {
  std::vector<double> clocks;
  for (const Sample& s : samples) {
    if (std::isfinite(s.sm_clock_mhz)) clocks.push_back(s.sm_clock_mhz);
  }
  return clocks.empty() ? kNotMeasured : median(clocks);
}

std::vector<double> sample_times(const std::vector<Sample>& samples) {
  std::vector<double> times;
  for (const Sample& s : samples) times.push_back(s.time_s);
  return times;
}

// The device row of a result in a loaded run.
const DeviceInfo* device_of(const StoredRun& run, int64_t device_id) {
  for (size_t i = 0; i < run.device_ids.size(); ++i) {
    if (run.device_ids[i] == device_id) return &run.devices[i];
  }
  return nullptr;
}

SeriesPoint point_from_result(const StoredRun& run, const ResultRecord& result) {
  SeriesPoint point;
  point.run_id = run.id;
  point.status = result.status;
  point.median_s = result.timing.timed ? result.timing.median_s : kNotMeasured;
  point.cv = result.timing.cv;
  point.clock_mhz = median_sample_clock(result.samples);
  point.error = result.check.checked ? relative_error(result.check.max_abs_error, result.check.bound)
                                      : kNotMeasured;
  if (const DeviceInfo* device = device_of(run, result.device_id)) point.chip = device->uuid;
  return point;
}

// What differs between the baseline run's environment and this one's, for one device model.
std::string environment_difference(const StoredRun& baseline, const StoredRun& current,
                                   const std::string& device_name, const std::string& base_chip,
                                   const std::string& chip) {
  std::vector<std::string> differences;
  auto differ = [&](const std::string& what, const std::string& a, const std::string& b) {
    if (a != b) differences.push_back(what + " " + (a.empty() ? "-" : a) + " -> " + (b.empty() ? "-" : b));
  };
  differ("chip", base_chip, chip);
  const EnvironmentInfo& a = baseline.info.env;
  const EnvironmentInfo& b = current.info.env;
  differ("driver", a.cuda_driver, b.cuda_driver);
  differ("CUDA", a.cuda_runtime, b.cuda_runtime);
  differ("cuDNN", a.cudnn, b.cudnn);
  differ("cuBLAS", a.cublas, b.cublas);
  differ("BLAS", a.blas, b.blas);
  differ("build", a.build_type + " " + a.compiler + " " + a.build_flags,
         b.build_type + " " + b.compiler + " " + b.build_flags);
  differ("host", a.host, b.host);
  const DeviceInfo* device_a = nullptr;
  const DeviceInfo* device_b = nullptr;
  for (const DeviceInfo& d : baseline.devices) {
    if (d.name == device_name && device_a == nullptr) device_a = &d;
  }
  for (const DeviceInfo& d : current.devices) {
    if (d.name == device_name && device_b == nullptr) device_b = &d;
  }
  if (device_a != nullptr && device_b != nullptr) {
    auto number = [](double v) {
      std::ostringstream text;
      text << v;
      return text.str();
    };
    if (device_a->clock_mhz != device_b->clock_mhz) {
      differ("clock", number(device_a->clock_mhz) + " MHz", number(device_b->clock_mhz) + " MHz");
    }
    if (device_a->power_limit_w != device_b->power_limit_w) {
      differ("power limit", number(device_a->power_limit_w) + " W", number(device_b->power_limit_w) + " W");
    }
    if (device_a->threads != device_b->threads) {
      differ("threads", std::to_string(device_a->threads), std::to_string(device_b->threads));
    }
  }
  std::string text;
  for (const std::string& d : differences) text += (text.empty() ? "" : "; ") + d;
  const std::string commits = a.git_sha == b.git_sha
                                  ? "same commit " + short_sha(b.git_sha)
                                  : "commits " + short_sha(a.git_sha) + ".." + short_sha(b.git_sha);
  return (text.empty() ? "same environment" : text) + " (" + commits +
         (b.git_dirty ? ", dirty" : "") + "; baseline run " + std::to_string(baseline.id) + ")";
}

// Annotations that govern a series at a run.
struct Coverage {
  int64_t history_from = 0;  // the baseline starts here (a reset or an older expected change)
  const AnnotationRecord* ignore = nullptr;
  const AnnotationRecord* expected_here = nullptr;  // an expected change at this very run
  const AnnotationRecord* reset_here = nullptr;
  std::string text() const {
    const AnnotationRecord* a = ignore ? ignore : (expected_here ? expected_here : reset_here);
    if (a == nullptr) return {};
    return a->kind + " from run " + std::to_string(a->from_run_id) + ": " + a->reason;
  }
  bool covers() const { return ignore != nullptr || expected_here != nullptr || reset_here != nullptr; }
};

Coverage coverage_of(const std::vector<AnnotationRecord>& annotations, const std::string& key,
                     int64_t run_id) {
  Coverage coverage;
  for (const AnnotationRecord& a : annotations) {
    if (a.series_key != key || a.from_run_id > run_id) continue;
    if (a.kind == "ignore") {
      coverage.ignore = &a;
    } else if (a.kind == "expected_change" && a.from_run_id == run_id) {
      coverage.expected_here = &a;
    } else if (a.kind == "expected_change" || a.kind == "baseline_reset") {
      if (a.kind == "baseline_reset" && a.from_run_id == run_id) coverage.reset_here = &a;
      coverage.history_from = std::max(coverage.history_from, a.from_run_id);
    }
  }
  return coverage;
}

std::string severity_for(Verdict state, bool covered) {
  if (covered) return "info";
  switch (state) {
    case Verdict::confirmed:
      return "error";
    case Verdict::suspected:
    case Verdict::ambiguous:
      return "warning";
    default:
      return "info";
  }
}

std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  std::ostringstream text;
  text.precision(9);
  text << value;
  return text.str();
}

std::string json_string(const std::string& value) {
  std::string quoted = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", c);
      quoted += escape;
    } else {
      quoted += c;
    }
  }
  return quoted + "\"";
}

std::string case_name(const std::string& key) {
  return kernel_of_series_key(key) + " " + shape_of_series_key(key);
}

}  // namespace

// ---- regressions -------------------------------------------------------------------------------

Status analyse_stored_run(Store& store, int64_t run_id, const DetectorOptions& options,
                          RegressionReport& report) {
  report = RegressionReport{};
  Status status;
  std::optional<StoredRun> run = store.load_run(run_id, status);
  if (!run) return status;
  if (run->info.rerun_of != 0) {
    return Status::Error("run " + std::to_string(run_id) + " is a rerun of run " +
                         std::to_string(run->info.rerun_of) + ": analyse run " +
                         std::to_string(run->info.rerun_of) + " (its reruns are folded in)");
  }
  report.run_id = run_id;
  report.suite = run->info.suite;
  report.results = static_cast<int>(run->results.size());
  for (const ResultRecord& r : run->results) {
    report.measured += r.status == ResultStatus::passed || r.status == ResultStatus::failed;
  }

  std::optional<StoredRun> rerun;
  if (std::optional<int64_t> rerun_id = store.latest_rerun_of(run_id, status); rerun_id) {
    rerun = store.load_run(*rerun_id, status);
    if (!rerun) return status;
    report.rerun_id = *rerun_id;
  }
  if (!status) return status;

  // The run's series, and those the previous run of the same selection had and this one lacks.
  std::map<std::string, size_t> result_index;
  std::vector<std::string> keys;
  for (size_t i = 0; i < run->results.size(); ++i) {
    if (result_index.emplace(run->results[i].series_key, i).second) keys.push_back(run->results[i].series_key);
  }
  report.series = keys;
  std::vector<AlertRecord>& alerts = report.alerts;
  std::optional<int64_t> previous_run;
  if (!run->info.selection.empty()) {
    previous_run = store.previous_comparable_run(run_id, run->info.selection, status);
    if (!status) return status;
  }
  std::vector<std::string> missing_keys;
  if (previous_run) {
    const auto previous_series = store.run_series(*previous_run, status);
    if (!status) return status;
    for (const auto& [key, result_status] : previous_series) {
      if (result_status == ResultStatus::passed && !result_index.count(key)) missing_keys.push_back(key);
    }
    if (previous_series.size() > run->results.size()) {
      AlertRecord fewer;
      fewer.kind = "run";
      fewer.state = "fewer_cases";
      fewer.severity = "warning";
      fewer.message = "run " + std::to_string(run_id) + " has " +
                      std::to_string(run->results.size()) + " results; run " +
                      std::to_string(*previous_run) + " of the same selection had " +
                      std::to_string(previous_series.size()) +
                      (run->status == "complete" ? "" : " (this run is incomplete)");
      alerts.push_back(fewer);
    }
  }
  std::vector<std::string> all_keys = keys;
  all_keys.insert(all_keys.end(), missing_keys.begin(), missing_keys.end());
  std::map<std::string, std::vector<HistoryRow>> histories =
      store.series_histories(all_keys, run_id, options.max_history, status);
  if (!status) return status;
  const std::vector<AnnotationRecord> annotations = store.annotations(status);
  if (!status) return status;

  std::map<std::string, size_t> rerun_index;
  if (rerun) {
    for (size_t i = 0; i < rerun->results.size(); ++i) rerun_index.emplace(rerun->results[i].series_key, i);
  }

  // Inputs per device model: a run's level is a property of one kind of device.
  struct Slot {
    std::string device;
    size_t index;
    std::vector<HistoryRow> rows;  // the history used (after annotations)
    Coverage coverage;
  };
  std::map<std::string, std::vector<SeriesInput>> inputs;
  std::map<std::string, Slot> slots;
  for (const std::string& key : all_keys) {
    Slot slot;
    slot.coverage = coverage_of(annotations, key, run_id);
    SeriesInput input;
    input.key = key;
    input.group = group_key(key);
    for (const HistoryRow& row : histories[key]) {
      if (row.run_id < slot.coverage.history_from) continue;
      slot.rows.push_back(row);
      input.history.push_back(point_from_history(row));
    }
    const auto found = result_index.find(key);
    if (found != result_index.end()) {
      const ResultRecord& result = run->results[found->second];
      input.candidate = point_from_result(*run, result);
      slot.device = result.device_name;
      const DeviceInfo* device = device_of(*run, result.device_id);
      input.host_timed = device != nullptr && device->kind == "cpu";
    } else {
      const std::vector<std::string> fields = [&] {
        std::vector<std::string> parts;
        std::stringstream stream(key);
        for (std::string part; std::getline(stream, part, '|');) parts.push_back(part);
        return parts;
      }();
      slot.device = fields.size() >= 4 ? fields[3] : "";
    }
    if (const auto again = rerun_index.find(key); rerun && again != rerun_index.end()) {
      const ResultRecord& repeated = rerun->results[again->second];
      input.rerun = point_from_result(*rerun, repeated);
      input.rerun_samples = sample_times(repeated.samples);
      const Baseline baseline = compute_baseline(input.history, options);
      if (!baseline.points.empty()) {
        const HistoryRow& representative = slot.rows[baseline.representative];
        const std::vector<Sample> samples = store.result_samples(representative.result_id, status);
        if (!status) return status;
        input.baseline_samples = sample_times(samples);
        input.baseline_samples_level = input.history[baseline.representative].level;
      }
    }
    std::vector<SeriesInput>& device_inputs = inputs[slot.device];
    slot.index = device_inputs.size();
    device_inputs.push_back(std::move(input));
    slots.emplace(key, std::move(slot));
  }

  std::map<int64_t, std::optional<StoredRun>> headers;  // baseline runs, for environments
  auto header = [&](int64_t id) -> const StoredRun* {
    auto found = headers.find(id);
    if (found == headers.end()) {
      Status ignored;
      found = headers.emplace(id, store.load_run_header(id, ignored)).first;
    }
    return found->second ? &*found->second : nullptr;
  };

  std::vector<AlertStateChange> earlier;
  std::map<std::string, int> verdict_counts;
  for (auto& [device, device_inputs] : inputs) {
    // The kernel-wide aggregates' states at their previous clear runs: a run left ambiguous (a
    // busy host) neither confirms nor breaks a suspicion, as for single series.
    std::map<std::string, GroupPrior> priors;
    std::map<std::string, std::set<int64_t>> runs_of_group;
    for (const SeriesInput& input : device_inputs) {
      for (const SeriesPoint& point : input.history) runs_of_group[input.group].insert(point.run_id);
    }
    for (const auto& [group, runs] : runs_of_group) {
      GroupPrior& prior = priors[group];
      std::vector<int64_t> unclear_runs;
      bool prior_found = false;
      int looked = 0;
      for (auto earlier_run = runs.rbegin(); earlier_run != runs.rend(); ++earlier_run) {
        std::optional<AlertRecord> alert = store.find_alert(*earlier_run, group, "kernel", status);
        if (!status) return status;
        const Verdict state = alert ? verdict_or_ok(alert->state) : Verdict::ok;
        if (state == Verdict::outlier || state == Verdict::confirmed ||
            (state == Verdict::suspected && !alert->chip_changed)) {
          prior.set_aside_runs.insert(*earlier_run);
        }
        if (state == Verdict::ambiguous) unclear_runs.push_back(*earlier_run);
        if (prior_found || looked++ >= kGroupPriorLookback || state == Verdict::ambiguous) continue;
        prior_found = true;
        if (alert) {
          prior.state = state;
          prior.since_run_id = alert->since_run_id;
          prior.chip_changed = alert->chip_changed;
          prior.run_id = *earlier_run;
        }
      }
      // An unclear run is kept (busy hosts teach how the kernel feels one), unless it came during
      // the open suspicion: then it is likely the slowdown itself, seen on a busy day.
      if (prior.state == Verdict::suspected || prior.state == Verdict::confirmed) {
        for (int64_t unclear : unclear_runs) {
          if (unclear >= prior.since_run_id) prior.set_aside_runs.insert(unclear);
        }
      }
    }
    const RunAnalysis analysis = analyze_run(device_inputs, priors, options);
    if (!device.empty()) report.levels.push_back({device, analysis.level, analysis.level_series});
    report.scatters.push_back(analysis.scatter);
    if (std::fabs(std::exp(analysis.level) - 1) > options.level_tolerance ||
        analysis.scatter > options.max_scatter) {
      AlertRecord shifted;
      shifted.kind = "run";
      shifted.series_key = "run|" + device;
      shifted.state = "ambiguous";
      shifted.severity = "warning";
      shifted.change = std::exp(analysis.level) - 1;
      char scatter[32];
      std::snprintf(scatter, sizeof scatter, "%.1fx", analysis.scatter);
      shifted.message = "the run on " + device + " was unusual: its " +
                        std::to_string(analysis.level_series) + " series moved together by " +
                        signed_percent(shifted.change) + " and scattered " + scatter +
                        " their usual spread around that (a busy host, a throttled device, or a "
                        "change that slows everything); its trips are unclear";
      alerts.push_back(shifted);
    }

    for (size_t i = 0; i < device_inputs.size(); ++i) {
      const SeriesInput& input = device_inputs[i];
      const SeriesAnalysis& verdict = analysis.series[i];
      const Slot& slot = slots.at(input.key);
      const Coverage& coverage = slot.coverage;
      const std::string name = case_name(input.key);
      if (input.candidate) ++verdict_counts[std::string(verdict_name(verdict.performance.state))];

      std::string environment;
      const Baseline& baseline = verdict.baseline;
      if (!baseline.points.empty() && input.candidate) {
        const HistoryRow& base_row = slot.rows[baseline.representative];
        if (const StoredRun* base = header(base_row.run_id)) {
          environment = environment_difference(*base, *run, device, base_row.chip,
                                               input.candidate->chip);
        }
      }
      auto make_alert = [&](const std::string& kind, const std::string& state) {
        AlertRecord alert;
        alert.series_key = input.key;
        alert.kind = kind;
        alert.state = state;
        alert.environment = environment;
        alert.annotation = coverage.text();
        return alert;
      };

      const PerformanceJudgement& perf = verdict.performance;
      if (perf.state != Verdict::ok && perf.state != Verdict::insufficient_history) {
        AlertRecord alert = make_alert("performance", std::string(verdict_name(perf.state)));
        alert.severity = severity_for(perf.state, coverage.covers());
        alert.since_run_id = perf.since_run_id;
        alert.change = perf.trip.change;
        alert.chip_changed = perf.chip_changed;
        std::ostringstream message;
        message << name << ": " << signed_percent(perf.trip.change) << " vs its baseline ("
                << format_seconds(baseline.center) << " over " << baseline.points.size()
                << " runs, threshold " << plain_percent(perf.trip.threshold) << ")";
        if (perf.since_run_id != 0 && perf.since_run_id != run_id) message << " since run " << perf.since_run_id;
        if (!perf.reason.empty()) message << "; " << perf.reason;
        if (perf.mann_whitney) {
          char text[96];
          std::snprintf(text, sizeof text, "; rerun %s, Mann-Whitney U=%.1f p=%.3g%s",
                        signed_percent(perf.rerun_trip.change).c_str(), perf.mann_whitney->u,
                        perf.mann_whitney->p_greater, perf.mann_whitney->exact ? " (exact)" : "");
          message << text;
        }
        alert.message = message.str();
        std::ostringstream details;
        details << "{\"center_s\": " << json_number(baseline.center)
                << ", \"spread_s\": " << json_number(baseline.spread)
                << ", \"threshold\": " << json_number(perf.trip.threshold)
                << ", \"median_s\": " << json_number(input.candidate->median_s)
                << ", \"level\": " << json_number(input.candidate->level)
                << ", \"baseline_runs\": " << baseline.points.size()
                << ", \"rerun_change\": " << json_number(perf.rerun_trip.change)
                << ", \"mann_whitney_u\": " << json_number(perf.mann_whitney ? perf.mann_whitney->u : kNotMeasured)
                << ", \"mann_whitney_p\": " << json_number(perf.mann_whitney ? perf.mann_whitney->p_greater : kNotMeasured)
                << ", \"reason\": " << json_string(perf.reason) << "}";
        alert.details_json = details.str();
        alerts.push_back(alert);
      }
      if (perf.previous_reverted && !input.history.empty()) {
        earlier.push_back({input.history.back().run_id, input.key, "performance", "outlier",
                           "; not repeated by run " + std::to_string(run_id) + ": an outlier"});
      }
      const AccuracyJudgement& accuracy = verdict.accuracy;
      if (accuracy.state != Verdict::ok) {
        AlertRecord alert = make_alert("accuracy", std::string(verdict_name(accuracy.state)));
        alert.severity = severity_for(accuracy.state, coverage.covers());
        alert.since_run_id = accuracy.since_run_id;
        alert.change = accuracy.ratio;
        char text[192];
        std::snprintf(text, sizeof text,
                      "max error / bound %.3g is %.2fx the baseline's worst %.3g (limit %.0fx)",
                      input.candidate->error, accuracy.ratio, baseline.error,
                      options.accuracy_growth);
        alert.message = name + ": " + text;
        alerts.push_back(alert);
      }
      if (accuracy.previous_reverted && !input.history.empty()) {
        earlier.push_back({input.history.back().run_id, input.key, "accuracy", "outlier",
                           "; not repeated by run " + std::to_string(run_id)});
      }
      // Failures and status changes: facts, not estimates.
      const ResultRecord* result =
          input.candidate ? &run->results[result_index.at(input.key)] : nullptr;
      const bool failure = result != nullptr && result->status != ResultStatus::passed &&
                           result->status != ResultStatus::skipped;
      if (failure || !verdict.status_change.empty()) {
        AlertRecord alert = make_alert(
            "status", result ? std::string(result_status_name(result->status)) : "missing");
        alert.severity = coverage.covers() ? "info" : "error";
        alert.message = name + ": " +
                        (verdict.status_change.empty() ? alert.state : verdict.status_change) +
                        (result && !result->message.empty() ? ": " + result->message : "");
        if (!result && !input.history.empty()) {
          alert.message += " (last measured in run " + std::to_string(input.history.back().run_id) + ")";
        }
        alerts.push_back(alert);
      }
    }

    for (const GroupAnalysis& group : analysis.groups) {
      if (group.previous_reverted) {
        earlier.push_back({group.previous_run_id, group.group, "kernel", "outlier",
                           "; not repeated by run " + std::to_string(run_id)});
      }
      if (group.state == Verdict::ok || group.state == Verdict::insufficient_history) continue;
      // Name the kernel and every shape it was judged on, with each shape's own change.
      std::vector<std::pair<double, std::string>> shapes;
      bool covered = true;
      for (size_t i = 0; i < device_inputs.size(); ++i) {
        const SeriesInput& input = device_inputs[i];
        if (input.group != group.group || !input.candidate) continue;
        const Trip& trip = analysis.series[i].performance.trip;
        if (!std::isfinite(trip.change)) continue;
        shapes.emplace_back(trip.change, shape_of_series_key(input.key));
        covered = covered && slots.at(input.key).coverage.covers();
      }
      const Coverage group_coverage = coverage_of(annotations, group.group, run_id);
      covered = (covered && !shapes.empty()) || group_coverage.covers();
      std::sort(shapes.rbegin(), shapes.rend());
      AlertRecord alert;
      alert.series_key = group.group;
      alert.kind = "kernel";
      alert.state = std::string(verdict_name(group.state));
      alert.severity = severity_for(group.state, covered);
      alert.since_run_id = group.since_run_id;
      alert.change = group.trip.change;
      alert.chip_changed = group.chip_changed;
      alert.annotation = group_coverage.text();
      std::ostringstream message;
      message << kernel_of_series_key(group.group) << " on " << device << ", all " << shapes.size()
              << " shapes: median " << signed_percent(group.trip.change) << " (threshold "
              << plain_percent(group.trip.threshold) << ")";
      // The median is against what the kernel's history predicts at the other kernels' level,
      // not against the run's level that each shape's own change below is measured from.
      if (group.reference_level != 0) {
        message << " against its history with the other kernels at "
                << signed_percent(std::exp(group.reference_level) - 1);
        if (std::fabs(group.load_sensitivity) >= 0.05) {
          char moves[64];
          std::snprintf(moves, sizeof moves, " (it moves %.2gx as much)", 1 + group.load_sensitivity);
          message << moves;
        }
      }
      if (group.since_run_id != 0 && group.since_run_id != run_id) message << " since run " << group.since_run_id;
      if (!group.reason.empty()) message << "; " << group.reason;
      message << "; shapes (each against the run's level):";
      for (const auto& [change, shape] : shapes) message << " " << shape << " (" << signed_percent(change) << ")";
      alert.message = message.str();
      std::ostringstream details;
      details << "{\"members\": " << group.members << ", \"spread\": " << json_number(group.spread)
              << ", \"load_sensitivity\": " << json_number(group.load_sensitivity)
              << ", \"threshold\": " << json_number(group.trip.threshold)
              << ", \"rerun_change\": " << json_number(group.rerun_trip.change) << "}";
      alert.details_json = details.str();
      alerts.push_back(alert);
    }
  }
  for (const auto& [name, count] : verdict_counts) report.verdict_counts.emplace_back(name, count);
  return store.store_analysis(run_id, alerts, report.levels, earlier);
}

int regression_exit_code(const RegressionReport& report, const RegressionOptions& options) {
  if (report.measured == 0) return kExitUsage;
  for (const AlertRecord& alert : report.alerts) {
    if (alert.severity == "error") return kExitFailures;
    if (options.fail_on_suspected && alert.severity == "warning" && alert.state == "suspected") {
      return kExitFailures;
    }
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
  auto rank = [](const AlertRecord& a) { return a.severity == "error" ? 0 : a.severity == "warning" ? 1 : 2; };
  std::vector<const AlertRecord*> sorted;
  for (const AlertRecord& a : report.alerts) sorted.push_back(&a);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&](const AlertRecord* a, const AlertRecord* b) { return rank(*a) < rank(*b); });
  for (const AlertRecord* alert : sorted) {
    std::string tag = alert->state;
    std::transform(tag.begin(), tag.end(), tag.begin(), ::toupper);
    char head[64];
    std::snprintf(head, sizeof head, "%-9s %-12s %-11s ", alert->severity.c_str(), tag.c_str(),
                  alert->kind.c_str());
    out << head << alert->message << "\n";
    if (!alert->environment.empty() && alert->kind != "run") out << "          environment: " << alert->environment << "\n";
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
    md << "| " << a.severity << " | " << a.state << " | " << a.kind << " | "
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
      const bool fails = a->severity == "error" ||
                         (options.fail_on_suspected && a->severity == "warning" && a->state == "suspected");
      if (fails && c.outcome != CiCase::Outcome::failed) {
        c.outcome = CiCase::Outcome::failed;
        c.message = a->kind + " " + a->state + ": " + a->message;
      }
      c.details += a->severity + " " + a->kind + " " + a->state + ": " + a->message +
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
    if (alerts.front()->kind == "kernel") {
      add_case(key, kernel_of_series_key(key), "all shapes");
    } else if (alerts.front()->kind == "run") {
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
  Status status;
  if (run_text == "unanalysed") {
    run_ids = store->unanalysed_runs(status);
    if (!status) {
      err << "error: " << status.message << "\n";
      return kExitUsage;
    }
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
    RegressionReport report;
    if (Status analysed = analyse_stored_run(*store, run_id, options.detector, report); !analysed) {
      err << "error: " << analysed.message << "\n";
      return kExitUsage;
    }
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

// ---- rerun -------------------------------------------------------------------------------------

namespace {

// The value of "key": <number> in the protocol JSON the runner writes; 0 when absent.
double protocol_number(const std::string& text, const std::string& key) {
  const nlohmann::json protocol = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!protocol.is_object() || !protocol.contains(key) || !protocol[key].is_number()) return 0;
  return protocol[key].get<double>();
}

}  // namespace

int rerun_command(const std::string& db_path, const RerunOptions& rerun,
                  const RegressionOptions& options, std::ostream& out, std::ostream& err) {
  std::unique_ptr<Store> store = open_store(db_path, err);
  if (!store) return kExitUsage;
  const std::optional<int64_t> run_id = resolve_run(*store, rerun.run_text, "--run", err);
  if (!run_id) return kExitUsage;
  Status status;
  std::optional<StoredRun> run = store->load_run(*run_id, status);
  if (!run) {
    err << "error: " << status.message << "\n";
    return kExitUsage;
  }
  if (run->info.rerun_of != 0) {
    err << "error: run " << *run_id << " is itself a rerun (of run " << run->info.rerun_of << ")\n";
    return kExitUsage;
  }
  if (run->analysed_at.empty()) {
    RegressionReport first;
    if (Status analysed = analyse_stored_run(*store, *run_id, options.detector, first); !analysed) {
      err << "error: " << analysed.message << "\n";
      return kExitUsage;
    }
  }
  const std::vector<AlertRecord> alerts = store->run_alerts(*run_id, status);
  if (!status) {
    err << "error: " << status.message << "\n";
    return kExitUsage;
  }
  // Suspects: suspected or unclear results, and every shape of a suspected kernel.
  std::set<std::string> suspects;
  std::set<std::string> suspect_groups;
  for (const AlertRecord& a : alerts) {
    const bool open = a.state == "suspected" || a.state == "ambiguous";
    if (!open) continue;
    if (a.kind == "performance" || a.kind == "accuracy") suspects.insert(a.series_key);
    if (a.kind == "kernel") suspect_groups.insert(a.series_key);
  }
  std::vector<const ResultRecord*> chosen;
  std::vector<const ResultRecord*> others;
  for (const ResultRecord& r : run->results) {
    if (r.status != ResultStatus::passed) continue;
    if (suspects.count(r.series_key) || suspect_groups.count(group_key(r.series_key))) {
      chosen.push_back(&r);
    } else {
      others.push_back(&r);
    }
  }
  if (chosen.empty()) {
    out << "rerun: run " << *run_id << " has no suspects\n";
    RegressionReport report;
    if (Status analysed = analyse_stored_run(*store, *run_id, options.detector, report); !analysed) {
      err << "error: " << analysed.message << "\n";
      return kExitUsage;
    }
    print_regression_report(report, out);
    return regression_exit_code(report, options);
  }
  const size_t suspect_count = chosen.size();
  // Controls spread over the run: the rerun's own level comes from them.
  if (!others.empty() && rerun.controls > 0) {
    const size_t stride = std::max<size_t>(1, others.size() / static_cast<size_t>(rerun.controls));
    for (size_t i = 0; i < others.size() && chosen.size() - suspect_count < static_cast<size_t>(rerun.controls); i += stride) {
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
  run_options.repetitions = static_cast<int>(protocol_number(run->info.protocol_json, "repetitions"));
  run_options.max_case_seconds = protocol_number(run->info.protocol_json, "max_case_seconds");
  run_options.db_path = db_path;
  run_options.rerun_of = *run_id;
  run_options.command_line = rerun.command_line.empty()
                                 ? "attnbench rerun --suspects --run " + std::to_string(*run_id) +
                                       " --db " + db_path
                                 : rerun.command_line;
  run_options.worker_command = rerun.worker_command;
  out << "rerun of run " << *run_id << ": " << suspect_count << " suspects and "
      << chosen.size() - suspect_count << " controls on " << run_options.devices << "\n";
  store.reset();  // the runner opens the file itself
  const int run_code = run_cases(run_options, out, err);
  if (run_code == kExitUsage) return kExitUsage;

  store = open_store(db_path, err);
  if (!store) return kExitUsage;
  RegressionReport report;
  if (Status analysed = analyse_stored_run(*store, *run_id, options.detector, report); !analysed) {
    err << "error: " << analysed.message << "\n";
    return kExitUsage;
  }
  print_regression_report(report, out);
  if (!options.summary_md_path.empty()) write_text_file(options.summary_md_path, regression_summary_markdown(report));
  if (!options.junit_path.empty()) write_text_file(options.junit_path, regression_junit_xml(report, options));
  const int code = regression_exit_code(report, options);
  out << "rerun: exit " << code << "\n";
  return code;
}

// ---- annotate ----------------------------------------------------------------------------------

int annotate_command(const std::string& db_path, const AnnotateOptions& options,
                     std::ostream& out, std::ostream& err) {
  static const std::set<std::string> kKinds = {"expected_change", "baseline_reset", "ignore"};
  if (!kKinds.count(options.kind)) {
    err << "error: annotate --kind '" << options.kind
        << "': accepted: expected_change, baseline_reset, ignore\n";
    return kExitUsage;
  }
  if (options.reason.empty()) {
    err << "error: annotate: --reason TEXT is required (it is kept and shown with every alert)\n";
    return kExitUsage;
  }
  if (options.series.empty() == options.kernel_glob.empty()) {
    err << "error: annotate: give --series KEY or --kernel GLOB [--shape GLOB], not both\n";
    return kExitUsage;
  }
  std::unique_ptr<Store> store = open_store(db_path, err);
  if (!store) return kExitUsage;
  Status status;
  const std::vector<std::string> known = store->series_keys(status);
  if (!status) {
    err << "error: " << status.message << "\n";
    return kExitUsage;
  }
  std::vector<std::string> keys;
  if (!options.series.empty()) {
    for (const std::string& key : options.series) {
      const bool is_group = key.find("|*|*|") != std::string::npos;
      if (!is_group && !std::binary_search(known.begin(), known.end(), key)) {
        err << "error: annotate --series '" << key << "': no such series in " << db_path
            << " (see `attnbench history --kernel GLOB`)\n";
        return kExitUsage;
      }
      keys.push_back(key);
    }
  } else {
    const std::string shape_glob = options.shape_glob.empty() ? "*" : options.shape_glob;
    std::set<std::string> groups;
    for (const std::string& key : known) {
      if (!glob_match(options.kernel_glob, kernel_of_series_key(key))) continue;
      std::string shape = shape_of_series_key(key);
      shape = shape.substr(0, shape.find(" dist="));
      if (!glob_match(shape_glob, shape)) continue;
      keys.push_back(key);
      if (shape_glob == "*") groups.insert(group_key(key));
    }
    keys.insert(keys.end(), groups.begin(), groups.end());
    if (keys.empty()) {
      err << "error: annotate: no series matches --kernel '" << options.kernel_glob << "' --shape '"
          << shape_glob << "' in " << db_path << "\n";
      return kExitUsage;
    }
  }
  std::optional<int64_t> from_run;
  if (!options.run_text.empty()) {
    from_run = resolve_run(*store, options.run_text, "annotate --run", err);
    if (!from_run) return kExitUsage;
  }
  // Default: each series' newest run (a kernel-wide key: the newest run of any of its shapes).
  std::map<std::string, int64_t> newest;
  if (!from_run) {
    const auto histories = store->series_histories(known, kNoRunLimit, 1, status);
    if (!status) {
      err << "error: " << status.message << "\n";
      return kExitUsage;
    }
    for (const auto& [key, rows] : histories) {
      if (rows.empty()) continue;
      newest[key] = rows.back().run_id;
      int64_t& group = newest[group_key(key)];
      group = std::max(group, rows.back().run_id);
    }
  }
  std::vector<AnnotationRecord> records;
  for (const std::string& key : keys) {
    AnnotationRecord record;
    record.series_key = key;
    record.kind = options.kind;
    record.reason = options.reason;
    record.from_run_id = from_run ? *from_run : newest[key];
    records.push_back(record);
  }
  if (Status added = store->add_annotations(records); !added) {
    err << "error: " << added.message << "\n";
    return kExitUsage;
  }
  for (const AnnotationRecord& r : records) {
    out << "annotated " << r.kind << " from run " << r.from_run_id << ": " << r.series_key << "\n";
  }
  out << records.size() << " series annotated: " << options.reason << "\n";
  return kExitClean;
}

// ---- compare -----------------------------------------------------------------------------------

int compare_command(const std::string& db_path, const std::string& run_a, const std::string& run_b,
                    const DetectorOptions& options, std::ostream& out, std::ostream& err) {
  std::unique_ptr<Store> store = open_store(db_path, err);
  if (!store) return kExitUsage;
  const std::optional<int64_t> id_a = resolve_run(*store, run_a, "compare RUN_A", err);
  if (!id_a) return kExitUsage;
  const std::optional<int64_t> id_b = resolve_run(*store, run_b, "compare RUN_B", err);
  if (!id_b) return kExitUsage;
  Status status;
  const std::optional<StoredRun> a = store->load_run(*id_a, status);
  if (!a) {
    err << "error: " << status.message << "\n";
    return kExitUsage;
  }
  const std::optional<StoredRun> b = store->load_run(*id_b, status);
  if (!b) {
    err << "error: " << status.message << "\n";
    return kExitUsage;
  }
  // Cases match by kernel, shape, distribution and device model.
  auto case_key = [](const ResultRecord& r) {
    return r.kernel + "|" + shape_string(r.problem) + "|" + r.distribution + "|" + r.device_name;
  };
  std::map<std::string, const ResultRecord*> in_a, in_b;
  std::vector<std::string> order;
  for (const ResultRecord& r : a->results) {
    if (in_a.emplace(case_key(r), &r).second) order.push_back(case_key(r));
  }
  for (const ResultRecord& r : b->results) {
    if (in_b.emplace(case_key(r), &r).second && !in_a.count(case_key(r))) order.push_back(case_key(r));
  }
  std::map<std::string, std::vector<double>> log_ratios;  // per kernel
  std::map<std::string, int> verdicts;
  out << "compare run " << *id_a << " -> run " << *id_b << " (change = B / A - 1; verdict: more than "
      << plain_percent(options.min_change) << " and Mann-Whitney p < " << options.mann_whitney_alpha
      << ")\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-22s %-60s %12s %12s %9s %9s  %s\n", "kernel", "shape", "A",
                "B", "change", "p", "verdict");
  out << line;
  for (const std::string& key : order) {
    const ResultRecord* ra = in_a.count(key) ? in_a[key] : nullptr;
    const ResultRecord* rb = in_b.count(key) ? in_b[key] : nullptr;
    const ResultRecord& any = ra ? *ra : *rb;
    const std::string shape =
        shape_string(any.problem) + (any.distribution == "normal" ? "" : " dist=" + any.distribution);
    std::string verdict;
    double change = kNotMeasured;
    double p = kNotMeasured;
    if (!ra || !rb) {
      verdict = ra ? "only in A" : "only in B";
    } else if (ra->status != rb->status) {
      verdict = std::string(result_status_name(ra->status)) + " -> " + std::string(result_status_name(rb->status));
    } else if (!ra->timing.timed || !rb->timing.timed) {
      verdict = std::string(result_status_name(rb->status));
    } else {
      change = rb->timing.median_s / ra->timing.median_s - 1;
      log_ratios[any.kernel].push_back(std::log(rb->timing.median_s / ra->timing.median_s));
      const MannWhitneyResult test = mann_whitney_u(sample_times(rb->samples), sample_times(ra->samples));
      p = test.p_two_sided;
      const bool significant = std::isfinite(p) && p < options.mann_whitney_alpha;
      verdict = change > options.min_change && significant      ? "slower"
                : -change > options.min_change && significant ? "faster"
                                                               : "same";
    }
    ++verdicts[verdict];
    std::snprintf(line, sizeof line, "%-22s %-60s %12s %12s %9s %9s  %s\n", any.kernel.c_str(),
                  shape.c_str(),
                  ra && ra->timing.timed ? format_seconds(ra->timing.median_s).c_str() : "-",
                  rb && rb->timing.timed ? format_seconds(rb->timing.median_s).c_str() : "-",
                  signed_percent(change).c_str(),
                  std::isfinite(p) ? scientific(p).c_str() : "-", verdict.c_str());
    out << line;
  }
  out << "\ngeometric mean of B / A per kernel:\n";
  for (const auto& [kernel, logs] : log_ratios) {
    std::snprintf(line, sizeof line, "  %-22s %s over %zu cases\n", kernel.c_str(),
                  signed_percent(std::exp(mean(logs)) - 1).c_str(), logs.size());
    out << line;
  }
  out << "verdicts:";
  for (const auto& [verdict, count] : verdicts) out << " " << count << " " << verdict << ",";
  out << "\n";
  return kExitClean;
}

// ---- export ------------------------------------------------------------------------------------

int export_command(const std::string& db_path, const std::string& run_text,
                   const std::string& format, const std::string& output, std::ostream& out,
                   std::ostream& err) {
  if (format != "gbench-json" && format != "csv") {
    err << "error: export --format '" << format << "': accepted: gbench-json, csv\n";
    return kExitUsage;
  }
  std::unique_ptr<Store> store = open_store(db_path, err);
  if (!store) return kExitUsage;
  const std::optional<int64_t> run_id = resolve_run(*store, run_text, "export --run", err);
  if (!run_id) return kExitUsage;
  Status status;
  const std::optional<StoredRun> run = store->load_run(*run_id, status);
  if (!run) {
    err << "error: " << status.message << "\n";
    return kExitUsage;
  }
  std::ostringstream text;
  if (format == "gbench-json") {
    // The benchmark names are the runner's case names, kernel/shape/distribution.
    std::vector<benchmark::BenchmarkReporter::Run> runs;
    for (size_t i = 0; i < run->results.size(); ++i) {
      const ResultRecord& r = run->results[i];
      const std::string name = r.kernel + "/" + shape_string(r.problem) + "/" + r.distribution;
      auto repetitions = gbench_runs_from_samples(name, static_cast<int64_t>(i), r.samples);
      // The iteration count is chosen per run to fill the repetition time; left in the name,
      // it would keep tools/compare.py from matching the same case across two runs.
      for (benchmark::BenchmarkReporter::Run& repetition : repetitions) {
        repetition.run_name.iterations.clear();
      }
      runs.insert(runs.end(), repetitions.begin(), repetitions.end());
    }
    write_gbench_json(text, runs);
  } else {
    auto csv = [](const std::string& field) {
      if (field.find_first_of(",\"\n") == std::string::npos) return field;
      std::string quoted = "\"";
      for (char c : field) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
      return quoted + "\"";
    };
    auto number = [](double v) { return std::isfinite(v) ? json_number(v) : std::string(); };
    text << "run_id,kernel,shape,distribution,device,status,repetitions,median_s,mean_s,min_s,"
            "max_s,stddev_s,cv,flops_per_s,bytes_per_s,max_abs_error,bound,series_key\n";
    for (const ResultRecord& r : run->results) {
      text << *run_id << "," << csv(r.kernel) << "," << csv(shape_string(r.problem)) << ","
           << csv(r.distribution) << "," << csv(r.device_name) << "," << result_status_name(r.status)
           << "," << r.timing.repetitions << "," << number(r.timing.median_s) << ","
           << number(r.timing.mean_s) << "," << number(r.timing.min_s) << ","
           << number(r.timing.max_s) << "," << number(r.timing.stddev_s) << ","
           << number(r.timing.cv) << "," << number(r.flops_per_s) << "," << number(r.bytes_per_s)
           << "," << number(r.check.max_abs_error) << "," << number(r.check.bound) << ","
           << csv(r.series_key) << "\n";
    }
  }
  if (output.empty() || output == "-") {
    out << text.str();
    return kExitClean;
  }
  if (Status written = write_text_file(output, text.str()); !written) {
    err << "error: export: " << written.message << "\n";
    return kExitUsage;
  }
  err << "exported run " << *run_id << " (" << run->results.size() << " results) as " << format
      << " to " << output << "\n";
  return kExitClean;
}

// ---- history -----------------------------------------------------------------------------------

int history_command(const std::string& db_path, const HistoryOptions& options, std::ostream& out,
                    std::ostream& err) {
  if (options.series.empty() == options.kernel_glob.empty()) {
    err << "error: history: give --series KEY or --kernel GLOB [--shape GLOB], not both\n";
    return kExitUsage;
  }
  std::unique_ptr<Store> store = open_store(db_path, err);
  if (!store) return kExitUsage;
  Status status;
  std::vector<std::string> keys = options.series;
  if (keys.empty()) {
    const std::string shape_glob = options.shape_glob.empty() ? "*" : options.shape_glob;
    for (const std::string& key : store->series_keys(status)) {
      std::string shape = shape_of_series_key(key);
      shape = shape.substr(0, shape.find(" dist="));
      if (glob_match(options.kernel_glob, kernel_of_series_key(key)) && glob_match(shape_glob, shape)) {
        keys.push_back(key);
      }
    }
    if (!status) {
      err << "error: " << status.message << "\n";
      return kExitUsage;
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
    const std::vector<HistoryRow> rows = store->full_series_history(key, status);
    if (!status) {
      err << "error: " << status.message << "\n";
      return kExitUsage;
    }
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
    std::snprintf(line, sizeof line, "  %6s  %-20s  %-10s  %-8s  %12s  %12s  %-10s  %s\n", "run",
                  "started", "commit", "status", "median", "level-free", "verdict", "chip");
    out << line;
    for (size_t i = 0; i < rows.size(); ++i) {
      const HistoryRow& r = rows[i];
      const double level_free = std::isfinite(r.median_s) ? r.median_s * std::exp(-(std::isfinite(r.level) ? r.level : 0)) : kNotMeasured;
      std::snprintf(line, sizeof line, "%s %6lld  %-20s  %-10s  %-8s  %12s  %12s  %-10s  %s\n",
                    change_rows.count(i) ? ">" : " ", static_cast<long long>(r.run_id),
                    r.started_at.c_str(), short_sha(r.git_sha).c_str(),
                    std::string(result_status_name(r.status)).c_str(),
                    std::isfinite(r.median_s) ? format_seconds(r.median_s).c_str() : "-",
                    std::isfinite(level_free) ? format_seconds(level_free).c_str() : "-",
                    r.performance_state.empty() ? "ok" : r.performance_state.c_str(), r.chip.c_str());
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

// ---- merge -------------------------------------------------------------------------------------

int merge_command(const std::vector<std::string>& sources, const std::string& into,
                  std::ostream& out, std::ostream& err) {
  if (sources.empty()) {
    err << "error: merge: give the databases to merge, then --into C.sqlite\n";
    return kExitUsage;
  }
  std::unique_ptr<Store> store = open_store(into, err);
  if (!store) return kExitUsage;
  MergeReport total;
  for (const std::string& source : sources) {
    MergeReport report;
    if (Status merged = store->merge_from(source, report); !merged) {
      err << "error: " << merged.message << "\n";
      return kExitUsage;
    }
    out << "merged " << source << ": " << report.runs_added << " runs added, "
        << report.runs_already_present << " already present, " << report.calibrations_added
        << " calibrations, " << report.annotations_added << " annotations\n";
    total.runs_added += report.runs_added;
  }
  out << "merge: " << total.runs_added << " runs added to " << into << "\n";
  return kExitClean;
}

}  // namespace attnbench
