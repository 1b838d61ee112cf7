#include "harness/analysis/triage.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

#include "harness/analysis/alert_wording.h"
#include "harness/analysis/regression.h"
#include "harness/core/series_key.h"

namespace attnbench {

namespace {

constexpr std::string_view kRunFindingPrefix = "run|";

bool is_run_finding_key(const std::string& key) { return key.rfind(kRunFindingPrefix, 0) == 0; }

// How many names a part of the verdict sentence lists before "and N more".
constexpr size_t kNamesInSentence = 3;

// Among alerts of one severity: a fact before a regression before an unclear trip before news.
int state_order(const std::string& state) {
  static const char* const kOrder[] = {
      "crashed",   "timeout",   "error",     "failed",      "missing", "skipped", "passed",
      "confirmed", "suspected", "ambiguous", "fewer_cases", "outlier", "improved"};
  for (size_t i = 0; i < std::size(kOrder); ++i) {
    if (state == kOrder[i]) return static_cast<int>(i);
  }
  return static_cast<int>(std::size(kOrder));
}

bool is_failure(const std::string& state) {
  return state == "crashed" || state == "timeout" || state == "error" || state == "failed";
}

bool is_slower(const std::string& state) {
  return state == verdict_name(Verdict::confirmed) || state == verdict_name(Verdict::suspected) ||
         state == verdict_name(Verdict::ambiguous);
}

// A more severe alert first; among equals a status (a fact) first, then the state that says more.
bool more_severe(const AlertRecord& a, const AlertRecord& b) {
  const bool status_a = a.kind == AlertKind::status, status_b = b.kind == AlertKind::status;
  return std::make_tuple(a.severity, !status_a, state_order(a.state)) <
         std::make_tuple(b.severity, !status_b, state_order(b.state));
}

// Whether a shape's slower state is said already by its kernel's verdict: a kernel confirmed (or
// suspected) slower as a whole says as much of each shape that is (or is less than) that.
bool said_by_kernel(const std::string& shape_state, const std::string& kernel_verdict) {
  return is_slower(kernel_verdict) && is_slower(shape_state) &&
         state_order(shape_state) >= state_order(kernel_verdict);
}

std::string plural(size_t count, const std::string& one, const std::string& many) {
  return std::to_string(count) + " " + (count == 1 ? one : many);
}

// "1 failed, 2 crashed".
std::string counts_text(const std::map<std::string, int>& counts) {
  std::string text;
  for (const auto& [state, count] : counts)
    text += (text.empty() ? "" : ", ") + std::to_string(count) + " " + state;
  return text;
}

std::string device_of_key(const std::string& key) {
  const std::optional<SeriesKey> parts = parse_series_key(key);
  return parts ? parts->device : std::string();
}

std::string case_label_of_key(const std::string& key) {
  const std::optional<SeriesKey> parts = parse_series_key(key);
  return parts ? parts->case_label() : key;
}

// ---- building the groups -----------------------------------------------------------------------

class TriageBuilder {
 public:
  TriageBuilder(const std::vector<AlertRecord>& alerts, const std::vector<AnalysisRecord>& analyses)
      : alerts_(alerts) {
    for (const AnalysisRecord& row : analyses) {
      if (row.kernel_wide) {
        aggregates_[row.series_key] = &row;
      } else {
        members_[group_key(row.series_key)].push_back(&row);
        series_[row.series_key] = &row;
      }
    }
  }

  std::vector<TriageGroup> groups() {
    collect_alerts();
    std::vector<TriageGroup> groups;
    for (auto& [key, alerts] : by_group_) groups.push_back(group_of(key, alerts));
    std::sort(groups.begin(), groups.end(), [](const TriageGroup& a, const TriageGroup& b) {
      const double size_a = std::isfinite(a.change) ? -std::fabs(a.change) : 0;
      const double size_b = std::isfinite(b.change) ? -std::fabs(b.change) : 0;
      return std::tie(a.severity, a.rank, size_a, a.key) <
             std::tie(b.severity, b.rank, size_b, b.key);
    });
    return groups;
  }

 private:
  // Every alert under its group: a series' under its kernel-wide key, a kernel's under its own,
  // the run's under run_finding_key(its device).
  void collect_alerts() {
    for (const AlertRecord& alert : alerts_) {
      std::string key = alert.series_key;
      if (alert.kind == AlertKind::run) {
        if (!is_run_finding_key(key)) key = run_finding_key("");
      } else if (alert.kind != AlertKind::kernel) {
        key = group_key(alert.series_key);
      }
      by_group_[key].push_back(&alert);
    }
  }

  TriageGroup group_of(const std::string& key, const std::vector<const AlertRecord*>& alerts) {
    TriageGroup group;
    group.key = key;
    const bool run_group = is_run_finding_key(key);
    group.kernel = run_group ? std::string() : kernel_of_series_key(key);
    group.device = run_group ? key.substr(kRunFindingPrefix.size()) : device_of_key(key);
    group.severity = Severity::info;
    for (const AlertRecord* alert : alerts)
      group.severity = std::min(group.severity, alert->severity);
    const AlertRecord* kernel_alert = nullptr;
    for (const AlertRecord* alert : alerts) {
      if (alert->kind == AlertKind::kernel) kernel_alert = alert;
    }
    add_aggregate(group, kernel_alert);
    add_rows(group, alerts, kernel_alert != nullptr && is_slower(kernel_alert->state));
    count_moves(group);
    group.rank = rank_of(group, alerts, kernel_alert, run_group);
    group.environment = kernel_alert != nullptr ? kernel_alert->environment : std::string();
    for (const TriageRow& row : group.rows) {
      if (group.environment.empty()) group.environment = row.environment;
    }
    group.headline = headline_of(group, kernel_alert);
    return group;
  }

  void add_aggregate(TriageGroup& group, const AlertRecord* kernel_alert) const {
    const auto found = aggregates_.find(group.key);
    const AnalysisRecord* aggregate = found == aggregates_.end() ? nullptr : found->second;
    if (aggregate != nullptr) {
      group.change = aggregate->change;
      group.since_run_id = aggregate->since_run_id;
    }
    if (kernel_alert == nullptr) return;
    group.verdict = kernel_alert->state;
    group.verdict_severity = kernel_alert->severity;
    group.message = kernel_alert->message;
    group.annotation = kernel_alert->annotation;
    group.change = kernel_alert->change;
    group.since_run_id = kernel_alert->since_run_id;
    if (aggregate != nullptr) group.awaiting = aggregate->awaiting;
  }

  // One row per series with an alert; under a kernel that moved as a whole, every shape judged.
  void add_rows(TriageGroup& group, const std::vector<const AlertRecord*>& alerts,
                bool whole_kernel_moved) const {
    std::map<std::string, std::vector<const AlertRecord*>> by_series;
    for (const AlertRecord* alert : alerts) {
      if (alert->kind != AlertKind::kernel) by_series[alert->series_key].push_back(alert);
    }
    if (whole_kernel_moved) {
      if (const auto found = members_.find(group.key); found != members_.end()) {
        for (const AnalysisRecord* member : found->second) by_series[member->series_key];
      }
    }
    for (auto& [series_key, mine] : by_series) {
      std::sort(mine.begin(), mine.end(),
                [](const AlertRecord* a, const AlertRecord* b) { return more_severe(*a, *b); });
      TriageRow row;
      row.series_key = series_key;
      const auto analysed = series_.find(series_key);
      const AnalysisRecord* analysis = analysed == series_.end() ? nullptr : analysed->second;
      if (analysis != nullptr) {
        row.change = analysis->change;
        row.state = std::string(verdict_name(analysis->verdict));
        row.detectable = analysis->detectable_3;
      }
      if (!mine.empty()) {
        const AlertRecord& first = *mine.front();
        row.kind = std::string(alert_kind_name(first.kind));
        row.state = first.state;
        if (!std::isfinite(row.change)) row.change = first.change;  // the run's level, say
        row.severity = first.severity;
        row.environment = first.environment;
        row.annotation = first.annotation;
        for (const AlertRecord* alert : mine) {
          row.message += (row.message.empty() ? "" : " · ") + alert->message;
        }
      }
      row.case_label = first_kind_is_run(mine) ? std::string() : case_label_of_key(series_key);
      row.what = what_of(row);
      group.rows.push_back(std::move(row));
    }
    // Statuses first, then the slowest shape first; shapes without a change last.
    std::stable_sort(group.rows.begin(), group.rows.end(),
                     [](const TriageRow& a, const TriageRow& b) {
                       const bool status_a = a.kind == alert_kind_name(AlertKind::status);
                       const bool status_b = b.kind == alert_kind_name(AlertKind::status);
                       if (status_a != status_b) return status_a;
                       const double change_a = std::isfinite(a.change) ? -a.change : HUGE_VAL;
                       const double change_b = std::isfinite(b.change) ? -b.change : HUGE_VAL;
                       return std::tie(change_a, a.case_label) < std::tie(change_b, b.case_label);
                     });
  }

  // How a row reads: its state, named by kind where the state alone would not say it.
  static std::string what_of(const TriageRow& row) {
    if (row.kind.empty()) return "no alert of its own";
    if (row.state == "fewer_cases") return "fewer cases";
    if (row.kind == "run") return "unusual run";
    if (row.kind == "accuracy") return "accuracy " + row.state;
    return row.state;
  }

  static bool first_kind_is_run(const std::vector<const AlertRecord*>& alerts) {
    return !alerts.empty() && alerts.front()->kind == AlertKind::run;
  }

  // Shapes moved beyond their own thresholds, from every shape of the kernel judged in the run.
  void count_moves(TriageGroup& group) const {
    const auto found = members_.find(group.key);
    if (found == members_.end()) return;
    for (const AnalysisRecord* member : found->second) {
      if (!std::isfinite(member->change)) continue;
      ++group.shapes;
      if (!std::isfinite(member->threshold)) continue;
      group.slower += member->change > member->threshold;
      group.faster += member->change < -member->threshold;
    }
  }

  static TriageRank rank_of(const TriageGroup& group, const std::vector<const AlertRecord*>& alerts,
                            const AlertRecord* kernel_alert, bool run_group) {
    bool status = false, accuracy = false, shapes_slower = false;
    for (const AlertRecord* alert : alerts) {
      status = status || alert->kind == AlertKind::status;
      accuracy = accuracy || (alert->kind == AlertKind::accuracy && is_slower(alert->state));
      shapes_slower =
          shapes_slower || (alert->kind == AlertKind::performance && is_slower(alert->state));
    }
    if (status) return TriageRank::status;
    if (run_group) return TriageRank::run;
    if (kernel_alert != nullptr && is_slower(kernel_alert->state)) return TriageRank::kernel_wide;
    if (accuracy) return TriageRank::accuracy;
    if (shapes_slower && group.severity != Severity::info) return TriageRank::shapes_alone;
    return TriageRank::good_news;
  }

  // "suspected regression: median +10.1 % across 29 shapes (29 slower), awaiting its next run".
  std::string headline_of(const TriageGroup& group, const AlertRecord* kernel_alert) const {
    std::vector<std::string> parts;
    std::map<std::string, int> statuses, shape_states;
    for (const TriageRow& row : group.rows) {
      if (row.kind == alert_kind_name(AlertKind::status)) ++statuses[row.state];
      const bool shape_alert = row.kind == alert_kind_name(AlertKind::performance) ||
                               row.kind == alert_kind_name(AlertKind::accuracy);
      if (shape_alert && !(row.kind == "performance" && said_by_kernel(row.state, group.verdict))) {
        ++shape_states[row.what];
      }
    }
    if (!statuses.empty()) parts.push_back(counts_text(statuses));
    if (group.kernel.empty()) {
      for (const TriageRow& row : group.rows) parts.push_back(row.what);
    }
    if (kernel_alert != nullptr) parts.push_back(kernel_verdict_text(group));
    if (!shape_states.empty()) {
      std::string text;
      for (const auto& [state, count] : shape_states) {
        text += (text.empty() ? "" : ", ") + plural(count, "shape", "shapes") + " " + state;
      }
      if (kernel_alert == nullptr && std::isfinite(group.change)) {
        text += "; the kernel as a whole " + signed_percent(group.change);
      }
      parts.push_back(text);
    }
    std::string headline;
    for (const std::string& part : parts) headline += (headline.empty() ? "" : "; ") + part;
    return headline;
  }

  static std::string kernel_verdict_text(const TriageGroup& group) {
    std::string noun = group.verdict == "confirmed"   ? "confirmed regression"
                       : group.verdict == "suspected" ? "suspected regression"
                       : group.verdict == "ambiguous" ? "unclear change"
                                                      : group.verdict;
    std::string text = noun + ": median " + signed_percent(group.change) + " across " +
                       plural(group.shapes, "shape", "shapes") + " (" +
                       std::to_string(group.slower) + " slower, " + std::to_string(group.faster) +
                       " faster)";
    if (group.since_run_id != 0) text += " since run " + std::to_string(group.since_run_id);
    if (!group.awaiting.empty()) text += ", awaiting " + group.awaiting;
    return text;
  }

  const std::vector<AlertRecord>& alerts_;
  std::map<std::string, const AnalysisRecord*> aggregates_;
  std::map<std::string, std::vector<const AnalysisRecord*>> members_;  // by kernel-wide key
  std::map<std::string, const AnalysisRecord*> series_;
  std::map<std::string, std::vector<const AlertRecord*>> by_group_;
};

// ---- the sentence ------------------------------------------------------------------------------

bool gates(Severity severity, const std::string& state, bool fail_on_suspected) {
  return severity == Severity::error || (fail_on_suspected && severity == Severity::warning &&
                                         state == verdict_name(Verdict::suspected));
}

// One part of the sentence: "1 confirmed regression (cpu.x on D, +10.1 % across 29 shapes since
// run 15)". It gates when one of its items does.
struct SentencePart {
  SentencePart(std::string one_text, std::string many_text)
      : one(std::move(one_text)), many(std::move(many_text)) {}
  std::string one, many;  // "confirmed regression", "confirmed regressions"
  size_t count = 0;
  std::vector<std::string> names;
  bool gates = false;

  void add(std::string name, size_t items, bool item_gates) {
    names.push_back(std::move(name));
    count += items;
    gates = gates || item_gates;
  }
  std::string text() const {
    std::string listed;
    for (size_t i = 0; i < names.size() && i < kNamesInSentence; ++i) {
      listed += (i == 0 ? "" : "; ") + names[i];
    }
    if (names.size() > kNamesInSentence) {
      listed += "; and " + std::to_string(names.size() - kNamesInSentence) + " more";
    }
    return plural(count, one, many) + (listed.empty() ? "" : " (" + listed + ")");
  }
};

std::string kernel_wide_name(const TriageGroup& group) {
  std::string name = triage_group_name(group) + ", " + signed_percent(group.change) + " across " +
                     plural(group.shapes, "shape", "shapes");
  if (group.since_run_id != 0) name += " since run " + std::to_string(group.since_run_id);
  if (!group.awaiting.empty()) name += ", awaiting " + group.awaiting;
  return name;
}

// The kernels the gate cannot hold to its target: "; cannot see a 5 % slowdown within 3
// nightlies of 2 kernels (cpu.naive on Intel Xeon: 14.2 % ...; cpu.flash on Intel Xeon: blind
// ...)", or nothing when every kernel with a history meets it.
std::string blind_part(const Triage& triage) {
  SentencePart missed{"kernel", "kernels"};
  for (const KernelSight& sight : triage.sight) {
    if (sight.misses_target) {
      missed.add(sight.kernel + " on " + sight.device + ": " + sight_text(sight), 1, false);
    }
  }
  if (missed.count == 0) return "";
  return "; cannot see a " + plain_percent(triage.detect_target) + " slowdown within 3 nightlies of " +
         missed.text();
}

// What the gate decided and why: the parts that gate first, then the rest.
std::string verdict_sentence(const Triage& triage, int64_t run_id, int measured) {
  if (triage.gate == GateDecision::nothing_measured) {
    return "nothing measured: run " + std::to_string(run_id) +
           " has no passed or failed result, so nothing was judged";
  }
  const bool policy = triage.fail_on_suspected;
  SentencePart failures{"failed case", "failed cases"}, changes{"status change", "status changes"},
      confirmed{"confirmed regression", "confirmed regressions"},
      suspected{"kernel suspected", "kernels suspected"},
      unclear{"kernel unclear", "kernels unclear"},
      alone{"shape slower alone", "shapes slower alone"},
      accuracy{"accuracy alert", "accuracy alerts"}, run{"run finding", "run findings"},
      improved{"kernel improved", "kernels improved"},
      annotated{"annotated change", "annotated changes"}, other{"other alert", "other alerts"};
  for (const TriageGroup& group : triage.groups) {
    size_t failed = 0, changed = 0, lone = 0;
    bool failed_gates = false, changed_gates = false, lone_gates = false;
    std::map<std::string, int> failed_states, changed_states, lone_states;
    for (const TriageRow& row : group.rows) {
      const bool row_gates = gates(row.severity, row.state, policy);
      if (row.kind == "status" && is_failure(row.state)) {
        ++failed, failed_gates |= row_gates, ++failed_states[row.state];
      }
      if (row.kind == "status" && !is_failure(row.state)) {
        ++changed, changed_gates |= row_gates, ++changed_states[row.state];
      }
      if (row.kind == "accuracy" && is_slower(row.state)) {
        accuracy.add(group.kernel + " " + row.case_label, 1, row_gates);
      }
      if (row.kind == "run")
        run.add(row.state == "fewer_cases" ? "fewer cases" : "unusual on " + group.device, 1,
                row_gates);
      if (row.kind == "performance" && (row.state == "outlier" || row.state == "improved")) {
        other.add(group.kernel + " " + row.case_label + ": " + row.state, 1, row_gates);
      }
      if (row.kind != "performance" || !is_slower(row.state) ||
          said_by_kernel(row.state, group.verdict)) {
        continue;
      }
      if (row.severity == Severity::info) {
        annotated.add(group.kernel + " " + row.case_label, 1, false);
      } else if (row.state == verdict_name(Verdict::confirmed)) {
        confirmed.add(group.kernel + " " + row.case_label + ", " + signed_percent(row.change), 1,
                      row_gates);
      } else {
        ++lone, lone_gates |= row_gates, ++lone_states[row.state];
      }
    }
    if (failed > 0)
      failures.add(group.kernel + ": " + counts_text(failed_states), failed, failed_gates);
    if (changed > 0)
      changes.add(group.kernel + ": " + counts_text(changed_states), changed, changed_gates);
    if (lone > 0) alone.add(group.kernel + ": " + counts_text(lone_states), lone, lone_gates);
    const bool group_gates = gates(group.verdict_severity, group.verdict, policy);
    if (is_slower(group.verdict) && group.verdict_severity == Severity::info) {
      annotated.add(kernel_wide_name(group), 1, false);  // an expected change, or ignored
      continue;
    }
    if (group.verdict == "confirmed") confirmed.add(kernel_wide_name(group), 1, group_gates);
    if (group.verdict == "suspected") suspected.add(kernel_wide_name(group), 1, group_gates);
    if (group.verdict == "ambiguous") unclear.add(kernel_wide_name(group), 1, group_gates);
    if (group.verdict == "improved") {
      improved.add(triage_group_name(group) + ", " + signed_percent(group.change), 1, false);
    }
    if (group.verdict == "outlier")
      other.add(triage_group_name(group) + ": outlier", 1, group_gates);
  }
  std::string gating, rest;
  for (const SentencePart* part : {&failures, &changes, &confirmed, &suspected, &unclear, &alone,
                                   &accuracy, &run, &improved, &annotated, &other}) {
    if (part->count == 0) continue;
    std::string& into = part->gates ? gating : rest;
    into += (into.empty() ? "" : "; ") + part->text();
  }
  const std::string policy_text = policy ? " (failing on suspected too)" : "";
  const std::string blind = blind_part(triage);
  if (triage.gate == GateDecision::failed) {
    // Every gating alert is one of the parts above; should one not be, the sentence still says
    // that something gates rather than nothing.
    if (gating.empty()) gating = "an alert gates (see the rows below)";
    return "gate failed" + policy_text + ": " + gating + (rest.empty() ? "" : "; also " + rest) +
           blind;
  }
  if (rest.empty() && triage.groups.empty()) {
    return "gate passed" + policy_text + ": no alerts (" +
           plural(static_cast<size_t>(measured), "result", "results") + " judged)" + blind;
  }
  return "gate passed" + policy_text + ": nothing gates; " + rest + blind;
}

nlohmann::json json_number(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

constexpr std::string_view kRankNames[] = {"status",   "run",          "kernel_wide",
                                           "accuracy", "shapes_alone", "good_news"};

}  // namespace

std::string run_finding_key(const std::string& device) {
  return std::string(kRunFindingPrefix) + device;
}

std::string triage_group_name(const TriageGroup& group) {
  if (group.kernel.empty()) return group.device.empty() ? "the run" : "the run on " + group.device;
  return group.kernel + " on " + group.device;
}

std::string_view gate_name(GateDecision gate) {
  switch (gate) {
    case GateDecision::failed:
      return "failed";
    case GateDecision::passed:
      return "passed";
    case GateDecision::nothing_measured:
      return "nothing_measured";
  }
  return "passed";
}

bool alert_gates(const AlertRecord& alert, bool fail_on_suspected) {
  return gates(alert.severity, alert.state, fail_on_suspected);
}

std::string sight_text(const KernelSight& sight) {
  if (std::isnan(sight.within_three)) return "not judged";
  if (std::isinf(sight.within_three)) return "blind within 3 nightlies";
  return plain_percent(sight.within_three) + " within 3 nightlies" +
         (std::isfinite(sight.within_one) ? " (" + plain_percent(sight.within_one) + " within 1)"
                                          : " (none within 1)");
}

std::string row_sight_text(const TriageRow& row) {
  if (std::isnan(row.detectable)) return "";
  if (std::isinf(row.detectable)) return "never confirmed alone";
  return "confirmed alone from " + plain_percent(row.detectable) + " within 3 nightlies";
}

Triage build_triage(int64_t run_id, int measured, const std::vector<AlertRecord>& alerts,
                    const std::vector<AnalysisRecord>& analyses, bool fail_on_suspected,
                    double detect_target) {
  Triage triage;
  triage.fail_on_suspected = fail_on_suspected;
  triage.detect_target = detect_target;
  for (const AnalysisRecord& row : analyses) {
    // A kernel-wide aggregate with a history (one without has no verdict to hold a target to).
    if (!row.kernel_wide || row.verdict == Verdict::insufficient_history) continue;
    KernelSight sight;
    sight.key = row.series_key;
    // One aggregate per pass: "cpu.naive (bwd)" beside the forward's "cpu.naive".
    sight.kernel = kernel_label_of_group(row.series_key);
    sight.device = device_of_key(row.series_key);
    sight.within_one = row.detectable_1;
    sight.within_three = row.detectable_3;
    sight.misses_target = row.detectable_3 > detect_target;  // blind too; NaN: not judged
    triage.sight.push_back(sight);
  }
  triage.gate = GateDecision::passed;
  for (const AlertRecord& alert : alerts) {
    if (alert_gates(alert, fail_on_suspected)) triage.gate = GateDecision::failed;
  }
  if (measured == 0) triage.gate = GateDecision::nothing_measured;
  triage.groups = TriageBuilder(alerts, analyses).groups();
  triage.verdict = verdict_sentence(triage, run_id, measured);
  return triage;
}

nlohmann::json triage_groups_json(const std::vector<TriageGroup>& groups) {
  nlohmann::json list = nlohmann::json::array();
  for (const TriageGroup& group : groups) {
    nlohmann::json rows = nlohmann::json::array();
    for (const TriageRow& row : group.rows) {
      rows.push_back({{"series_key", row.series_key},
                      {"case", row.case_label},
                      {"kind", row.kind},
                      {"state", row.state},
                      {"what", row.what},
                      {"severity", severity_name(row.severity)},
                      {"change", json_number(row.change)},
                      {"detectable_3", json_number(row.detectable)},
                      {"sees", row_sight_text(row)},
                      {"message", row.message},
                      {"environment", row.environment},
                      {"annotation", row.annotation}});
    }
    list.push_back({{"key", group.key},
                    {"kernel", group.kernel},
                    {"device", group.device},
                    {"severity", severity_name(group.severity)},
                    {"rank", kRankNames[static_cast<size_t>(group.rank)]},
                    {"verdict", group.verdict},
                    {"awaiting", group.awaiting},
                    {"change", json_number(group.change)},
                    {"shapes", group.shapes},
                    {"slower", group.slower},
                    {"faster", group.faster},
                    {"since_run_id", group.since_run_id},
                    {"headline", group.headline},
                    {"message", group.message},
                    {"annotation", group.annotation},
                    {"environment", group.environment},
                    {"rows", std::move(rows)}});
  }
  return list;
}

nlohmann::json triage_sight_json(const Triage& triage) {
  nlohmann::json kernels = nlohmann::json::array();
  for (const KernelSight& sight : triage.sight) {
    kernels.push_back({{"key", sight.key},
                       {"kernel", sight.kernel},
                       {"device", sight.device},
                       {"within_1", json_number(sight.within_one)},
                       {"within_3", json_number(sight.within_three)},
                       {"text", sight_text(sight)},
                       {"misses_target", sight.misses_target}});
  }
  return {{"target", triage.detect_target}, {"kernels", std::move(kernels)}};
}

double stored_detect_target(const StoredTriage& stored) {
  const nlohmann::json sight =
      nlohmann::json::parse(stored.detectable_json, nullptr, /*allow_exceptions=*/false);
  return sight.is_object() && sight.contains("target") && sight["target"].is_number()
             ? sight["target"].get<double>()
             : kDefaultDetectTarget;
}

StoredTriage stored_triage(const Triage& triage) {
  constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
  return {std::string(gate_name(triage.gate)), triage.fail_on_suspected ? "suspected" : "confirmed",
          triage.verdict,
          // Messages carry a worker's text, which need not be UTF-8.
          triage_groups_json(triage.groups).dump(-1, ' ', false, kReplace),
          triage_sight_json(triage).dump(-1, ' ', false, kReplace)};
}

}  // namespace attnbench
