// The closed sets of the regression analysis, named once: a verdict on a series, and an alert's
// kind and severity. The store keeps them as text under CHECK constraints (harness/store/
// schema.cpp) spelled from these names; the report reads the same words.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace attnbench {

enum class Verdict : uint8_t {
  ok,
  improved,
  suspected,
  confirmed,
  outlier,
  ambiguous,
  insufficient_history
};
std::string_view verdict_name(Verdict verdict);
std::optional<Verdict> parse_verdict(std::string_view text);

// performance: one series' time; accuracy: its error; status: a failure or a status change;
// kernel: a kernel's aggregate over all its shapes; run: a finding about the whole run.
enum class AlertKind : uint8_t { performance, accuracy, status, kernel, run };
std::string_view alert_kind_name(AlertKind kind);
std::optional<AlertKind> parse_alert_kind(std::string_view text);

// error gates the job (exit 1); warning and info are for people. Ordered: most severe first.
enum class Severity : uint8_t { error, warning, info };
std::string_view severity_name(Severity severity);
std::optional<Severity> parse_severity(std::string_view text);

// The kinds of annotation, as `annotate --kind` takes them and the store keeps them:
// expected_change (the change at that run is intended; the baseline restarts there),
// baseline_reset (the baseline restarts there), ignore (never gates).
constexpr std::string_view kExpectedChange = "expected_change";
constexpr std::string_view kBaselineReset = "baseline_reset";
constexpr std::string_view kIgnore = "ignore";
constexpr std::string_view kAnnotationKinds[] = {kExpectedChange, kBaselineReset, kIgnore};

// What the detector's rule is, as stored with every analysis row: bump it when a change to
// harness/analysis/ can change a verdict, so stored rows say which rule wrote them.
constexpr int kDetectorVersion = 3;  // 3: kernel-wide peers (issue 41)

}  // namespace attnbench
