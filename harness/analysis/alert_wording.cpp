#include "harness/analysis/alert_wording.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "harness/core/progress.h"

namespace attnbench {

namespace {

const DeviceInfo* first_device_named(const StoredRun& run, const std::string& name) {
  for (const DeviceInfo& device : run.devices) {
    if (device.name == name) return &device;
  }
  return nullptr;
}

std::string number_text(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

// A device's fields an environment difference compares (the chip apart: a series' own chip is its
// result's). Unknown ECC and persistence (-1) read "-".
std::vector<EnvironmentEntry> device_entries(const DeviceInfo& device) {
  const auto flag = [](int value) { return value < 0 ? std::string("-") : value ? "on" : "off"; };
  return {{"clock", number_text(device.clock_mhz) + " MHz"},
          {"power limit", number_text(device.power_limit_w) + " W"},
          {"threads", std::to_string(device.threads)},
          {"SM version", std::to_string(device.sm_version)},
          {"SMs", std::to_string(device.sm_count)},
          {"ECC", flag(device.ecc)},
          {"persistence mode", flag(device.persistence)}};
}

}  // namespace

std::string short_sha(const std::string& sha) { return sha.substr(0, 10); }

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

std::string performance_message(const SeriesAnalysis& verdict, int64_t run_id) {
  const PerformanceJudgement& perf = verdict.performance;
  const Baseline& baseline = verdict.baseline;
  std::ostringstream message;
  message << signed_percent(perf.trip.change)
          << " vs its baseline (" << format_seconds(baseline.center) << " over "
          << baseline.points.size() << " runs, threshold " << plain_percent(perf.trip.threshold)
          << ")";
  if (perf.since_run_id != 0 && perf.since_run_id != run_id) message << " since run " << perf.since_run_id;
  if (!perf.reason.empty()) message << "; " << perf.reason;
  if (perf.mann_whitney) {
    char text[96];
    std::snprintf(text, sizeof text, "; rerun %s, Mann-Whitney U=%.1f p=%.3g%s",
                  signed_percent(perf.rerun_trip.change).c_str(), perf.mann_whitney->u,
                  perf.mann_whitney->p_greater, perf.mann_whitney->exact ? " (exact)" : "");
    message << text;
  }
  return message.str();
}

std::string accuracy_message(const SeriesAnalysis& verdict, double candidate_error,
                             const DetectorOptions& options) {
  char text[192];
  std::snprintf(text, sizeof text,
                "max error / bound %.3g is %.2fx the baseline's worst %.3g (limit %.0fx)",
                candidate_error, verdict.accuracy.ratio, verdict.baseline.error,
                options.accuracy_growth);
  return text;
}

std::string status_message(const SeriesAnalysis& verdict, const ResultRecord* result,
                           const std::vector<SeriesPoint>& history) {
  const std::string state = result ? std::string(result_status_name(result->status)) : "missing";
  std::string message = (verdict.status_change.empty() ? state : verdict.status_change) +
                        (result && !result->message.empty() ? ": " + result->message : "");
  if (!result && !history.empty()) {
    message += " (last measured in run " + std::to_string(history.back().run_id) + ")";
  }
  return message;
}

std::string kernel_message(const GroupAnalysis& group, int64_t run_id) {
  std::ostringstream message;
  message << "median " << signed_percent(group.trip.change) << " (threshold "
          << plain_percent(group.trip.threshold) << ")";
  // The median is against what the kernel's history predicts at the other kernels' level,
  // not against the run's level that each shape's own change below is measured from.
  if (!group.peer.empty()) {
    message << " against its history with its peer " << kernel_label_of_group(group.peer)
            << " (the kernel that feels this host most like it) at "
            << signed_percent(std::exp(group.reference_level) - 1);
  } else if (group.reference_level != 0) {
    message << " against its history with the other kernels at "
            << signed_percent(std::exp(group.reference_level) - 1);
  }
  if (!group.peer.empty() || group.reference_level != 0) {
    if (std::fabs(group.load_sensitivity) >= 0.05) {
      char moves[64];
      std::snprintf(moves, sizeof moves, " (it moves %.2gx as much)", 1 + group.load_sensitivity);
      message << moves;
    }
  }
  if (group.since_run_id != 0 && group.since_run_id != run_id) message << " since run " << group.since_run_id;
  if (!group.reason.empty()) message << "; " << group.reason;
  return message.str();
}

std::string unusual_run_message(const std::string& device, const RunAnalysis& analysis) {
  char scatter[32];
  std::snprintf(scatter, sizeof scatter, "%.1fx", analysis.scatter);
  return "the run on " + device + " was unusual: its " + std::to_string(analysis.level_series) +
         " series moved together by " + signed_percent(std::exp(analysis.level) - 1) +
         " and scattered " + scatter +
         " their usual spread around that (a busy host, a throttled device, or a change that "
         "slows everything); its trips are unclear";
}

std::string fewer_cases_message(int64_t run_id, size_t results, int64_t previous_run_id,
                                size_t previous_results, bool complete) {
  return "run " + std::to_string(run_id) + " has " + std::to_string(results) + " results; run " +
         std::to_string(previous_run_id) + " of the same selection had " +
         std::to_string(previous_results) + (complete ? "" : " (this run is incomplete)");
}

std::string environment_difference(const StoredRun& baseline, const StoredRun& current,
                                   const std::string& device_name, const std::string& base_chip,
                                   const std::string& chip, const std::string& clock) {
  std::vector<std::string> differences;
  auto differ = [&](const std::string& what, const std::string& a, const std::string& b) {
    if (a != b) differences.push_back(what + " " + (a.empty() ? "-" : a) + " -> " + (b.empty() ? "-" : b));
  };
  differ("chip", base_chip, chip);
  const std::vector<EnvironmentEntry> before = environment_entries(baseline.info.env);
  const std::vector<EnvironmentEntry> now = environment_entries(current.info.env);
  for (size_t i = 0; i < before.size() && i < now.size(); ++i) {
    differ(now[i].what, before[i].value, now[i].value);
  }
  const DeviceInfo* device_a = first_device_named(baseline, device_name);
  const DeviceInfo* device_b = first_device_named(current, device_name);
  if (device_a != nullptr && device_b != nullptr) {
    const std::vector<EnvironmentEntry> device_before = device_entries(*device_a);
    const std::vector<EnvironmentEntry> device_now = device_entries(*device_b);
    for (size_t i = 0; i < device_before.size(); ++i) {
      differ(device_now[i].what, device_before[i].value, device_now[i].value);
    }
  }
  if (!clock.empty()) differences.push_back(clock);
  std::string text;
  for (const std::string& d : differences) text += (text.empty() ? "" : "; ") + d;
  const EnvironmentInfo& a = baseline.info.env;
  const EnvironmentInfo& b = current.info.env;
  const std::string commits = a.git_sha == b.git_sha
                                  ? "same commit " + short_sha(b.git_sha)
                                  : "commits " + short_sha(a.git_sha) + ".." + short_sha(b.git_sha);
  return (text.empty() ? "same environment" : text) + " (" + commits +
         (b.git_dirty ? ", dirty" : "") + "; baseline run " + std::to_string(baseline.id) + ")";
}

}  // namespace attnbench
