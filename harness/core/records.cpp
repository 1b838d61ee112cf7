#include "harness/core/records.h"

#include <array>
#include <nlohmann/json.hpp>

#include "reference/enum_names.h"
#include "harness/core/statistics.h"

namespace attnbench {

namespace {

constexpr std::array kResultStatuses = {ResultStatus::passed,  ResultStatus::failed,
                                        ResultStatus::skipped, ResultStatus::crashed,
                                        ResultStatus::timeout, ResultStatus::error};
constexpr std::array kTimingStops = {TimingStop::stable, TimingStop::repetitions, TimingStop::budget};

}  // namespace

std::vector<EnvironmentEntry> environment_entries(const EnvironmentInfo& env) {
  return {{"driver", env.cuda_driver},
          {"CUDA", env.cuda_runtime},
          {"cuDNN", env.cudnn},
          {"cudnn-frontend", env.cudnn_frontend},
          {"cuBLAS", env.cublas},
          {"BLAS", env.blas},
          {"build", env.build_type + " " + env.compiler + " " + env.build_flags},
          {"host", env.host},
          {"CPU", env.cpu},
          {"OS", env.os}};
}

std::string_view result_status_name(ResultStatus status) {
  switch (status) {
    case ResultStatus::passed:
      return "passed";
    case ResultStatus::failed:
      return "failed";
    case ResultStatus::skipped:
      return "skipped";
    case ResultStatus::crashed:
      return "crashed";
    case ResultStatus::timeout:
      return "timeout";
    case ResultStatus::error:
      return "error";
  }
  return "unknown";  // not a ResultStatus: the store's CHECK constraint refuses it
}

std::optional<ResultStatus> parse_result_status(std::string_view text) {
  return parse_enum_name(kResultStatuses, text, result_status_name);
}

std::string_view timing_stop_name(TimingStop stop) {
  switch (stop) {
    case TimingStop::stable:
      return "stable";
    case TimingStop::repetitions:
      return "repetitions";
    case TimingStop::budget:
      return "budget";
  }
  return "unknown";  // not a TimingStop: the store's CHECK constraint refuses it
}

std::optional<TimingStop> parse_timing_stop(std::string_view text) {
  return parse_enum_name(kTimingStops, text, timing_stop_name);
}

bool parse_distribution(const std::string& text, Distribution& distribution) {
  const std::optional<Distribution> parsed =
      parse_enum_name(kDistributions, text, distribution_name);
  if (parsed) distribution = *parsed;
  return parsed.has_value();
}

std::string_view distribution_name(Distribution distribution) {
  switch (distribution) {
    case Distribution::normal:
      return "normal";
    case Distribution::large_logits:
      return "large_logits";
    case Distribution::outliers:
      return "outliers";
    case Distribution::sink:
      return "sink";
  }
  return "?";
}

std::string accepted_distribution_names() {
  return join_enum_names(kDistributions, distribution_name);
}

std::vector<double> sample_times(const std::vector<Sample>& samples) {
  std::vector<double> times;
  for (const Sample& sample : samples) times.push_back(sample.time_s);
  return times;
}

double median_sample_clock(const std::vector<Sample>& samples) {
  std::vector<double> clocks;
  for (const Sample& sample : samples) {
    if (std::isfinite(sample.sm_clock_mhz)) clocks.push_back(sample.sm_clock_mhz);
  }
  return clocks.empty() ? kNotMeasured : median(std::move(clocks));
}

double protocol_number(const RunInfo& run, const std::string& key) {
  const nlohmann::json protocol =
      nlohmann::json::parse(run.protocol_json, nullptr, /*allow_exceptions=*/false);
  if (!protocol.is_object() || !protocol.contains(key) || !protocol[key].is_number()) return 0;
  return protocol[key].get<double>();
}

}  // namespace attnbench
