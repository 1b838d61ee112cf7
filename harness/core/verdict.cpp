#include "harness/core/verdict.h"

#include <array>

#include "reference/enum_names.h"

namespace attnbench {

namespace {

constexpr std::array kVerdicts = {Verdict::ok,        Verdict::improved, Verdict::suspected,
                                  Verdict::confirmed, Verdict::outlier,  Verdict::ambiguous,
                                  Verdict::insufficient_history};
constexpr std::array kAlertKinds = {AlertKind::performance, AlertKind::accuracy, AlertKind::status,
                                    AlertKind::kernel, AlertKind::run};
constexpr std::array kSeverities = {Severity::error, Severity::warning, Severity::info};

}  // namespace

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::ok: return "ok";
    case Verdict::improved: return "improved";
    case Verdict::suspected: return "suspected";
    case Verdict::confirmed: return "confirmed";
    case Verdict::outlier: return "outlier";
    case Verdict::ambiguous: return "ambiguous";
    case Verdict::insufficient_history: return "insufficient_history";
  }
  return "unknown";
}

std::optional<Verdict> parse_verdict(std::string_view text) {
  return parse_enum_name(kVerdicts, text, verdict_name);
}

std::string_view alert_kind_name(AlertKind kind) {
  switch (kind) {
    case AlertKind::performance: return "performance";
    case AlertKind::accuracy: return "accuracy";
    case AlertKind::status: return "status";
    case AlertKind::kernel: return "kernel";
    case AlertKind::run: return "run";
  }
  return "unknown";
}

std::optional<AlertKind> parse_alert_kind(std::string_view text) {
  return parse_enum_name(kAlertKinds, text, alert_kind_name);
}

std::string_view severity_name(Severity severity) {
  switch (severity) {
    case Severity::error: return "error";
    case Severity::warning: return "warning";
    case Severity::info: return "info";
  }
  return "unknown";
}

std::optional<Severity> parse_severity(std::string_view text) {
  return parse_enum_name(kSeverities, text, severity_name);
}

}  // namespace attnbench
