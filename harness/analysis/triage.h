// The triage of an analysed run: what a reader acts on, first. The run's alerts grouped by kernel
// and device model (one group per kernel-wide series key, plus one for findings about the whole
// run), each group carrying its kernel-wide verdict, its median change, how many shapes moved
// which way and the environment difference, with its shapes beneath it; the groups in the order a
// reader should look at them; and the gate's decision in one sentence.
//
// Built once, by the analysis of a run (run_analysis.cpp), and stored (run_triage): `regressions`,
// its --summary-md and --junit, `rerun` and the HTML report all show this order and this sentence,
// and none of them decides either again.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "harness/analysis/regression.h"
#include "harness/store/store.h"

namespace attnbench {

enum class GateDecision : uint8_t { failed, passed, nothing_measured };
std::string_view gate_name(GateDecision gate);

// The series key of a finding about the whole run on one device model: "run|<device>" (an
// unusual run); a run finding with no device ("fewer cases") groups under run_finding_key("").
std::string run_finding_key(const std::string& device);

// Whether an alert gates the job: errors always, suspected regressions when asked
// (--fail-on suspected).
bool alert_gates(const AlertRecord& alert, bool fail_on_suspected);

// One shape of a group (one series), or one finding of the run group.
struct TriageRow {
  std::string series_key;
  std::string case_label;  // the shape (and distribution) as people name it; the run: empty
  std::string kind;        // its most severe alert's kind; empty: no alert of its own
  std::string state;       // that alert's state, or the series' verdict
  std::string what;        // how the row reads: "suspected", "accuracy suspected", "no alert (ok)"
  Severity severity = Severity::info;
  double change = kNotMeasured;  // the series' own change against its baseline (level-free)
  // The smallest slowdown the gate would confirm this shape for on its own within 3 nightlies
  // (harness/analysis/detectable.h); kBlind: never alone; NaN: not judged.
  double detectable = kNotMeasured;
  std::string message;           // its alerts' messages; none repeats the case
  std::string environment;
  std::string annotation;
};

// Where a group stands among the others at the same severity, first to last.
enum class TriageRank : uint8_t {
  status,        // failures, crashes, status changes, missing cases
  run,           // a finding about the whole run (its level, fewer cases)
  kernel_wide,   // the kernel moved as a whole (confirmed, suspected, unclear)
  accuracy,      // a shape's error grew
  shapes_alone,  // shapes that moved while their kernel did not
  good_news,     // improvements, outliers, annotated changes
};

struct TriageGroup {
  std::string key;     // the kernel-wide series key, or run_finding_key(device) for the run
  std::string kernel;  // empty: the run as a whole
  std::string device;
  Severity severity = Severity::info;  // its most severe alert's
  TriageRank rank = TriageRank::good_news;
  std::string verdict;  // the kernel-wide aggregate's verdict when it alerted; empty otherwise
  Severity verdict_severity = Severity::info;  // that alert's
  std::string awaiting;          // what would settle it (a suspected or unclear aggregate)
  double change = kNotMeasured;  // the kernel-wide median change against its history
  int shapes = 0;                // shapes judged with a change
  int slower = 0;                // of them, beyond their own threshold, slower
  int faster = 0;                // ... and faster
  int64_t since_run_id = 0;
  std::string headline;         // one line: what happened to the kernel (or the run) as a whole
  std::string message;          // why the kernel-wide verdict stands where it does (its alert's)
  std::string annotation;       // the annotation covering the kernel, with its reason
  std::string environment;      // what differs from the baseline's environment
  std::vector<TriageRow> rows;  // statuses first, then slowest first
};

// What the gate can see of one kernel on one device model (issue 41): the smallest slowdown its
// kernel-wide aggregate would be confirmed for (harness/analysis/detectable.h), relative; kBlind
// (+infinity): blind within that many nightlies; NaN: not judged (an analysis before schema 13).
struct KernelSight {
  std::string key;     // the kernel-wide series key
  std::string kernel;  // with its pass when not the forward: "cpu.naive (bwd)"
  std::string device;
  double within_one = kNotMeasured;
  double within_three = kNotMeasured;
  bool misses_target = false;  // within_three above the target, or blind
};

struct Triage {
  GateDecision gate = GateDecision::passed;
  bool fail_on_suspected = false;
  std::string verdict;  // "gate failed: 1 confirmed regression (...)": what and why, one sentence
  std::vector<TriageGroup> groups;
  double detect_target = kDefaultDetectTarget;  // what the gate should see within three nightlies
  std::vector<KernelSight> sight;  // every kernel-wide aggregate with a history, by key
};

// The triage of run `run_id` from its alerts and its analysis rows (every series and kernel-wide
// aggregate judged); `measured`: its passed or failed results; `detect_target`: the slowdown the
// gate should see within three nightlies (the verdict names the kernels it cannot).
Triage build_triage(int64_t run_id, int measured, const std::vector<AlertRecord>& alerts,
                    const std::vector<AnalysisRecord>& analyses, bool fail_on_suspected,
                    double detect_target = kDefaultDetectTarget);

// "14.2 % within 3 nightlies (7.0 % within 1)", "blind within 3 nightlies": what one kernel's
// sight reads as, everywhere it is shown.
std::string sight_text(const KernelSight& sight);
// A shape's: "alone from 9.1 % within 3 nightlies", "never alone"; empty when not judged.
std::string row_sight_text(const TriageRow& row);

// "cpu.flash on AMD EPYC", "the run on NVIDIA H200", "the run": a group as people name it.
std::string triage_group_name(const TriageGroup& group);

// As stored (run_triage); the report reads the same JSON.
StoredTriage stored_triage(const Triage& triage);
nlohmann::json triage_groups_json(const std::vector<TriageGroup>& groups);
// {"target": 0.05, "kernels": [{key, kernel, device, within_1, within_3, misses_target}]}.
nlohmann::json triage_sight_json(const Triage& triage);
// The target a stored triage was decided under (its detectable_json), kDefaultDetectTarget when
// it holds none.
double stored_detect_target(const StoredTriage& stored);

}  // namespace attnbench
