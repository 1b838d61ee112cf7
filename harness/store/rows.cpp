// The field lists of every table (rows.h): each column of runs, devices, cases, results,
// samples, calibrations, run_levels, annotations, alerts and result_analysis, spelled once, with
// the record member it holds. Writers and readers of a table go through its list; schema.cpp
// has the columns' types and constraints.
#include "harness/store/rows.h"

#include <array>
#include <nlohmann/json.hpp>
#include <optional>

#include "harness/core/series_key.h"
#include "harness/core/verdict.h"

namespace attnbench::sql {

namespace {

using field::id;
using field::known_or_null;
using field::named;
using field::read_only;
using field::text_or_default;
using field::text_or_null;
using field::value;

// ---- runs and devices --------------------------------------------------------------------------

constexpr auto kRunFields = std::to_array<Field<StoredRun>>({
    read_only<&StoredRun::id>("id"),
    value<&StoredRun::info, &RunInfo::uuid>("uuid"),
    value<&StoredRun::info, &RunInfo::started_at>("started_at"),
    value<&StoredRun::status>("status"),
    text_or_null<&StoredRun::finished_at>("finished_at"),
    text_or_null<&StoredRun::analysed_at>("analysed_at"),
    value<&StoredRun::info, &RunInfo::suite>("suite"),
    value<&StoredRun::info, &RunInfo::command>("command"),
    value<&StoredRun::info, &RunInfo::protocol_json>("protocol_json"),
    value<&StoredRun::info, &RunInfo::env, &EnvironmentInfo::git_sha>("git_sha"),
    value<&StoredRun::info, &RunInfo::env, &EnvironmentInfo::git_dirty>("git_dirty"),
    value<&StoredRun::info, &RunInfo::env, &EnvironmentInfo::build_type>("build_type"),
    value<&StoredRun::info, &RunInfo::env, &EnvironmentInfo::build_flags>("build_flags"),
    value<&StoredRun::info, &RunInfo::env, &EnvironmentInfo::compiler>("compiler"),
    value<&StoredRun::info, &RunInfo::env, &EnvironmentInfo::cuda_runtime>("cuda_runtime"),
    value<&StoredRun::info, &RunInfo::env, &EnvironmentInfo::cuda_driver>("cuda_driver"),
    value<&StoredRun::info, &RunInfo::env, &EnvironmentInfo::cudnn>("cudnn"),
    value<&StoredRun::info, &RunInfo::env, &EnvironmentInfo::cudnn_frontend>("cudnn_frontend"),
    value<&StoredRun::info, &RunInfo::env, &EnvironmentInfo::cublas>("cublas"),
    value<&StoredRun::info, &RunInfo::env, &EnvironmentInfo::blas>("blas"),
    value<&StoredRun::info, &RunInfo::env, &EnvironmentInfo::host>("host"),
    value<&StoredRun::info, &RunInfo::env, &EnvironmentInfo::cpu>("cpu"),
    value<&StoredRun::info, &RunInfo::env, &EnvironmentInfo::os>("os"),
    value<&StoredRun::info, &RunInfo::selection>("selection"),
    value<&StoredRun::info, &RunInfo::shard>("shard"),
    id<&StoredRun::info, &RunInfo::rerun_of>("rerun_of"),
    value<&StoredRun::info, &RunInfo::merged_from>("merged_from"),
    // Derived from the columns above when the row is written: the entries a reader compares.
    {"environment_json",
     [](const StoredRun& run) { return text(environment_entries_json(run.info.env)); }},
});

// run_id leads the row.
constexpr auto kDeviceFields = std::to_array<Field<DeviceInfo>>({
    value<&DeviceInfo::kind>("kind"),
    value<&DeviceInfo::ordinal>("ordinal"),
    value<&DeviceInfo::name>("name"),
    value<&DeviceInfo::uuid>("uuid"),
    value<&DeviceInfo::sm_version>("sm_version"),
    value<&DeviceInfo::sm_count>("sm_count"),
    value<&DeviceInfo::threads>("threads"),
    value<&DeviceInfo::memory_bytes>("memory_bytes"),
    value<&DeviceInfo::l2_bytes>("l2_bytes"),
    value<&DeviceInfo::clock_mhz>("clock_mhz"),
    value<&DeviceInfo::power_limit_w>("power_limit_w"),
    value<&DeviceInfo::ecc>("ecc"),
    value<&DeviceInfo::persistence>("persistence"),
    value<&DeviceInfo::extra_json>("extra_json"),
});

// ---- cases -------------------------------------------------------------------------------------

constexpr auto kCaseFields = std::to_array<Field<StoredCase>>({
    {"case_key", [](const StoredCase& stored) { return text(case_key(stored)); }},
    value<&StoredCase::kernel>("kernel"),
    value<&StoredCase::problem, &Problem::batch>("batch"),
    value<&StoredCase::problem, &Problem::heads_q>("heads_q"),
    value<&StoredCase::problem, &Problem::heads_kv>("heads_kv"),
    value<&StoredCase::problem, &Problem::seqlen_q>("seqlen_q"),
    value<&StoredCase::problem, &Problem::seqlen_k>("seqlen_k"),
    value<&StoredCase::problem, &Problem::head_dim_qk>("head_dim_qk"),
    value<&StoredCase::problem, &Problem::head_dim_v>("head_dim_v"),
    named<dtype_name, parse_dtype, &StoredCase::problem, &Problem::input_dtype>("input_dtype"),
    named<dtype_name, parse_dtype, &StoredCase::problem, &Problem::output_dtype>("output_dtype"),
    named<dtype_name, parse_dtype, &StoredCase::problem, &Problem::p_dtype>("p_dtype"),
    named<fp8_scaling_name, parse_fp8_scaling, &StoredCase::problem, &Problem::fp8_scaling>(
        "fp8_scaling"),
    named<static_cast<std::string_view (*)(MaskKind)>(mask_name), parse_mask_kind,
          &StoredCase::problem, &Problem::mask, &Mask::kind>("mask_kind"),
    value<&StoredCase::problem, &Problem::mask, &Mask::window_left>("window_left"),
    value<&StoredCase::problem, &Problem::mask, &Mask::window_right>("window_right"),
    named<layout_name, parse_layout, &StoredCase::problem, &Problem::layout>("layout"),
    named<varlen_name, parse_varlen, &StoredCase::problem, &Problem::varlen>("varlen"),
    value<&StoredCase::problem, &Problem::page_size>("page_size"),
    value<&StoredCase::problem, &Problem::scale>("scale"),
    value<&StoredCase::distribution>("distribution"),
    named<pass_name, parse_pass, &StoredCase::problem, &Problem::pass>("pass"),
    named<upstream_gradient_name, parse_upstream_gradient, &StoredCase::problem, &Problem::dout>(
        "dout"),
    // The canonical shape text: the part of the case and series keys no other column holds.
    {"shape", [](const StoredCase& stored) { return text(shape_string(stored.problem)); }},
});

// ---- results and samples -----------------------------------------------------------------------

Status read_timing_stop(Statement& row, const char* name, ResultRecord& result) {
  result.timing.stop.reset();
  if (row.is_null(name)) return row.status();
  const std::string stored = row.get<std::string>(name);
  result.timing.stop = parse_timing_stop(stored);
  if (!result.timing.stop) return Status::Error("unknown timing stop '" + stored + "'");
  return row.status();
}

// run_id and case_id lead the row; the case's columns are the case row's.
constexpr auto kResultFields = std::to_array<Field<ResultRecord>>({
    id<&ResultRecord::device_id>("device_id"),
    value<&ResultRecord::device_name>("device_name"),
    value<&ResultRecord::series_key>("series_key"),
    named<result_status_name, parse_result_status, &ResultRecord::status>("status"),
    value<&ResultRecord::message>("message"),
    value<&ResultRecord::seed>("seed"),
    value<&ResultRecord::check, &CheckSummary::checked>("checked"),
    value<&ResultRecord::check, &CheckSummary::max_abs_error>("max_abs_error"),
    value<&ResultRecord::check, &CheckSummary::lowp_error>("lowp_error"),
    value<&ResultRecord::check, &CheckSummary::atol>("atol"),
    value<&ResultRecord::check, &CheckSummary::bound>("bound"),
    value<&ResultRecord::check, &CheckSummary::rel_l2>("rel_l2"),
    value<&ResultRecord::check, &CheckSummary::rmse>("rmse"),
    value<&ResultRecord::check, &CheckSummary::nan_count>("nan_count"),
    value<&ResultRecord::check, &CheckSummary::inf_count>("inf_count"),
    value<&ResultRecord::check, &CheckSummary::rows_checked>("rows_checked"),
    value<&ResultRecord::check, &CheckSummary::rows_total>("rows_total"),
    value<&ResultRecord::check, &CheckSummary::lse_max_error>("lse_max_error"),
    value<&ResultRecord::check, &CheckSummary::canaries_ok>("canaries_ok"),
    value<&ResultRecord::check, &CheckSummary::repeatable>("repeatable"),
    value<&ResultRecord::timing, &TimingSummary::timed>("timed"),
    value<&ResultRecord::timing, &TimingSummary::median_s>("median_s"),
    value<&ResultRecord::timing, &TimingSummary::mean_s>("mean_s"),
    value<&ResultRecord::timing, &TimingSummary::min_s>("min_s"),
    value<&ResultRecord::timing, &TimingSummary::max_s>("max_s"),
    value<&ResultRecord::timing, &TimingSummary::stddev_s>("stddev_s"),
    value<&ResultRecord::timing, &TimingSummary::cv>("cv"),
    value<&ResultRecord::timing, &TimingSummary::repetitions>("repetitions"),
    value<&ResultRecord::timing, &TimingSummary::iterations_per_repetition>(
        "iterations_per_repetition"),
    // What timing cost is known only for a timed result.
    {"forwards_timed",
     [](const ResultRecord& result) {
       return result.timing.timed ? integer(result.timing.forwards_timed) : null();
     },
     value<&ResultRecord::timing, &TimingSummary::forwards_timed>("").read},
    value<&ResultRecord::timing, &TimingSummary::wall_s>("timing_wall_s"),
    {"timing_stop",
     [](const ResultRecord& result) {
       return result.timing.stop ? text(timing_stop_name(*result.timing.stop)) : null();
     },
     read_timing_stop},
    value<&ResultRecord::flops>("flops"),
    value<&ResultRecord::bytes>("bytes"),
    value<&ResultRecord::flops_per_s>("flops_per_s"),
    value<&ResultRecord::bytes_per_s>("bytes_per_s"),
    value<&ResultRecord::fraction_of_peak_flops>("fraction_of_peak_flops"),
    value<&ResultRecord::fraction_of_peak_bandwidth>("fraction_of_peak_bandwidth"),
    value<&ResultRecord::extra_memory_bytes>("extra_memory_bytes"),
    value<&ResultRecord::launches>("launches"),
    value<&ResultRecord::energy_j>("energy_j"),
    value<&ResultRecord::predicted_s>("predicted_s"),
    value<&ResultRecord::repro>("repro"),
    value<&ResultRecord::details_json>("details_json"),
    // History queries need a result's clock without its samples.
    {"sm_clock_mhz", [](const ResultRecord& result) { return real(median_sample_clock(result.samples)); }},
});

// result_id leads the row.
constexpr auto kSampleFields = std::to_array<Field<Sample>>({
    value<&Sample::repetition>("repetition"),
    value<&Sample::time_s>("time_s"),
    value<&Sample::iterations>("iterations"),
    value<&Sample::sm_clock_mhz>("sm_clock_mhz"),
    value<&Sample::clock_reasons>("clock_reasons"),
});

constexpr auto kCalibrationFields = std::to_array<Field<CalibrationRecord>>({
    value<&CalibrationRecord::device_name>("device_name"),
    value<&CalibrationRecord::device_uuid>("device_uuid"),
    value<&CalibrationRecord::kind>("kind"),
    value<&CalibrationRecord::dtype>("dtype"),
    value<&CalibrationRecord::value>("value"),
    value<&CalibrationRecord::details>("details"),
    value<&CalibrationRecord::measured_at>("measured_at"),
});

constexpr auto kProfilePhaseFields = std::to_array<Field<ProfilePhaseRecord>>({
    value<&ProfilePhaseRecord::profile_id>("profile_id"),
    value<&ProfilePhaseRecord::profiled_at>("profiled_at"),
    value<&ProfilePhaseRecord::kernel>("kernel"),
    value<&ProfilePhaseRecord::shape>("shape"),
    value<&ProfilePhaseRecord::distribution>("distribution"),
    value<&ProfilePhaseRecord::device>("device"),
    value<&ProfilePhaseRecord::forward_s>("forward_s"),
    value<&ProfilePhaseRecord::median_s>("median_s"),
    value<&ProfilePhaseRecord::threads>("threads"),
    value<&ProfilePhaseRecord::extra_memory_bytes>("extra_memory_bytes"),
    value<&ProfilePhaseRecord::name>("name"),
    value<&ProfilePhaseRecord::count>("count"),
    value<&ProfilePhaseRecord::total_s>("total_s"),
    value<&ProfilePhaseRecord::kind>("kind"),
    value<&ProfilePhaseRecord::source>("source"),
    value<&ProfilePhaseRecord::share>("share"),
    known_or_null<&ProfilePhaseRecord::expected_launches>("expected_launches"),
});

// ---- the regression analysis -------------------------------------------------------------------

// run_id leads the row.
constexpr auto kLevelFields = std::to_array<Field<RunLevel>>({
    value<&RunLevel::device_name>("device_name"),
    value<&RunLevel::level>("level"),
    value<&RunLevel::series_count>("series_count"),
});

constexpr auto kAnnotationFields = std::to_array<Field<AnnotationRecord>>({
    read_only<&AnnotationRecord::id>("id"),
    value<&AnnotationRecord::series_key>("series_key"),
    value<&AnnotationRecord::kind>("kind"),
    value<&AnnotationRecord::reason>("reason"),
    id<&AnnotationRecord::from_run_id>("from_run_id"),
    text_or_default<&AnnotationRecord::created_at>("created_at"),
});

constexpr auto kAlertFields = std::to_array<Field<AlertRecord>>({
    read_only<&AlertRecord::id>("id"),
    value<&AlertRecord::run_id>("run_id"),
    value<&AlertRecord::series_key>("series_key"),
    named<alert_kind_name, parse_alert_kind, &AlertRecord::kind>("kind"),
    named<severity_name, parse_severity, &AlertRecord::severity>("severity"),
    value<&AlertRecord::message>("message"),
    {"details_json",
     [](const AlertRecord& alert) {
       return text(alert.details_json.empty() ? "{}" : alert.details_json);
     },
     value<&AlertRecord::details_json>("").read},
    value<&AlertRecord::state>("state"),
    id<&AlertRecord::since_run_id>("since_run_id"),
    value<&AlertRecord::change>("change_fraction"),
    value<&AlertRecord::environment>("environment"),
    value<&AlertRecord::annotation>("annotation"),
    value<&AlertRecord::chip_changed>("chip_changed"),
    read_only<&AlertRecord::created_at>("created_at"),
});

constexpr std::string_view kSeriesScope = "series";
constexpr std::string_view kKernelScope = "kernel";

Status read_scope(Statement& row, const char* name, AnalysisRecord& analysis) {
  const std::string stored = row.get<std::string>(name);
  if (stored != kSeriesScope && stored != kKernelScope) {
    return Status::Error("unknown " + std::string(name) + " '" + stored + "'");
  }
  analysis.kernel_wide = stored == kKernelScope;
  return row.status();
}

// One part of the analysed series' key; a key that does not parse is all kernel.
template <std::string SeriesKey::*Part>
SqlValue key_part(const AnalysisRecord& analysis) {
  const std::optional<SeriesKey> key = parse_series_key(analysis.series_key);
  if (!key) return text(Part == &SeriesKey::kernel ? analysis.series_key : "");
  return text((*key).*Part);
}

constexpr auto kAnalysisFields = std::to_array<Field<AnalysisRecord>>({
    value<&AnalysisRecord::run_id>("run_id"),
    value<&AnalysisRecord::series_key>("series_key"),
    {"scope",
     [](const AnalysisRecord& analysis) {
       return text(analysis.kernel_wide ? kKernelScope : kSeriesScope);
     },
     read_scope},
    {"kernel", key_part<&SeriesKey::kernel>},
    {"shape", key_part<&SeriesKey::shape>},
    {"distribution", key_part<&SeriesKey::distribution>},
    {"device_name", key_part<&SeriesKey::device>},
    {"build", key_part<&SeriesKey::build>},
    id<&AnalysisRecord::result_id>("result_id"),
    named<verdict_name, parse_verdict, &AnalysisRecord::verdict>("verdict"),
    named<verdict_name, parse_verdict, &AnalysisRecord::accuracy_verdict>("accuracy_verdict"),
    value<&AnalysisRecord::center_s>("center_s"),
    value<&AnalysisRecord::spread_s>("spread_s"),
    value<&AnalysisRecord::threshold>("threshold"),
    value<&AnalysisRecord::change>("change_fraction"),
    value<&AnalysisRecord::level>("level"),
    value<&AnalysisRecord::rerun_change>("rerun_change"),
    value<&AnalysisRecord::baseline_runs>("baseline_runs"),
    id<&AnalysisRecord::baseline_run_id>("baseline_run_id"),
    id<&AnalysisRecord::history_from_run_id>("history_from_run_id"),
    id<&AnalysisRecord::since_run_id>("since_run_id"),
    value<&AnalysisRecord::chip_changed>("chip_changed"),
    value<&AnalysisRecord::status_change>("status_change"),
    value<&AnalysisRecord::reason>("reason"),
    value<&AnalysisRecord::awaiting>("awaiting"),
    value<&AnalysisRecord::annotation>("annotation"),
    value<&AnalysisRecord::detector_version>("detector_version"),
    value<&AnalysisRecord::environment>("environment"),
    known_or_null<&AnalysisRecord::noisy>("noisy"),
    value<&AnalysisRecord::detectable_1>("detectable_1"),
    value<&AnalysisRecord::detectable_3>("detectable_3"),
});

template <typename Record, size_t N>
std::span<const Field<Record>> all(const std::array<Field<Record>, N>& fields) {
  return fields;
}

}  // namespace

std::string environment_entries_json(const EnvironmentInfo& env) {
  nlohmann::json entries = nlohmann::json::array();
  for (const EnvironmentEntry& entry : environment_entries(env)) {
    entries.push_back({{"what", entry.what}, {"value", entry.value}});
  }
  return entries.dump();
}

StoredCase case_of(const ResultRecord& result) {
  return {result.kernel, result.problem, result.distribution};
}

std::string case_key(const StoredCase& stored) {
  return stored.kernel + "|" + shape_string(stored.problem) + "|" + stored.distribution;
}

Row run_row(const StoredRun& run) { return to_row(all(kRunFields), run); }
Status read_run(Statement& row, StoredRun& run) { return read_fields(all(kRunFields), row, run); }

Row device_row(int64_t run_id, const DeviceInfo& device) {
  return to_row(all(kDeviceFields), device, {{"run_id", integer(run_id)}});
}
Status read_device(Statement& row, DeviceInfo& device) {
  return read_fields(all(kDeviceFields), row, device);
}

Row case_row(const StoredCase& stored) { return to_row(all(kCaseFields), stored); }
Status read_case(Statement& row, StoredCase& stored) {
  Status read = read_fields(all(kCaseFields), row, stored);
  if (!read) return Status::Error("case " + row.get<std::string>("case_key") + ": " + read.message);
  return read;
}

Row result_row(int64_t run_id, int64_t case_id, const ResultRecord& result) {
  return to_row(all(kResultFields), result,
                {{"run_id", integer(run_id)}, {"case_id", integer(case_id)}});
}
Status read_result(Statement& row, ResultRecord& result) {
  return read_fields(all(kResultFields), row, result);
}

namespace {

// The id of the case under `wanted`'s key.
Result<int64_t> find_or_add_case(sqlite3* db, const StoredCase& wanted) {
  const std::string key = case_key(wanted);
  if (Status added =
          insert_row(db, "cases", case_row(wanted), " ON CONFLICT (case_key) DO NOTHING");
      !added) {
    return added;
  }
  Statement select(db, "SELECT * FROM cases WHERE case_key = ?");
  select.bind(text(key));
  if (!select.next_row()) {
    return select.status() ? Status::Error("case " + key + " is missing after its insert")
                           : select.status();
  }
  const int64_t case_id = select.get<int64_t>("id");
  StoredCase stored;
  if (Status read = read_case(select, stored); !read) return read;
  if (stored.kernel != wanted.kernel || !(stored.problem == wanted.problem) ||
      stored.distribution != wanted.distribution) {
    return Status::Error("case key " + key + " already names a different problem");
  }
  return case_id;
}

}  // namespace

Result<int64_t> insert_result(sqlite3* db, int64_t run_id, const ResultRecord& result) {
  const Result<int64_t> case_id = find_or_add_case(db, case_of(result));
  if (!case_id) return case_id.status();
  if (Status inserted = insert_row(db, "results", result_row(run_id, *case_id, result));
      !inserted) {
    return inserted;
  }
  const int64_t result_id = sqlite3_last_insert_rowid(db);
  for (const Sample& sample : result.samples) {
    if (Status inserted = insert_row(db, "samples", sample_row(result_id, sample)); !inserted) {
      return inserted;
    }
  }
  return result_id;
}

Row sample_row(int64_t result_id, const Sample& sample) {
  return to_row(all(kSampleFields), sample, {{"result_id", integer(result_id)}});
}
Status read_sample(Statement& row, Sample& sample) {
  return read_fields(all(kSampleFields), row, sample);
}

Row calibration_row(const CalibrationRecord& calibration) {
  return to_row(all(kCalibrationFields), calibration);
}
Status read_calibration(Statement& row, CalibrationRecord& calibration) {
  return read_fields(all(kCalibrationFields), row, calibration);
}

Row profile_phase_row(const ProfilePhaseRecord& phase) {
  return to_row(all(kProfilePhaseFields), phase);
}
Status read_profile_phase(Statement& row, ProfilePhaseRecord& phase) {
  return read_fields(all(kProfilePhaseFields), row, phase);
}

Row level_row(int64_t run_id, const RunLevel& level) {
  return to_row(all(kLevelFields), level, {{"run_id", integer(run_id)}});
}
Status read_level(Statement& row, RunLevel& level) {
  return read_fields(all(kLevelFields), row, level);
}

Row annotation_row(const AnnotationRecord& annotation) {
  return to_row(all(kAnnotationFields), annotation);
}
Status read_annotation(Statement& row, AnnotationRecord& annotation) {
  return read_fields(all(kAnnotationFields), row, annotation);
}

Row alert_row(const AlertRecord& alert) { return to_row(all(kAlertFields), alert); }
Status read_alert(Statement& row, AlertRecord& alert) {
  return read_fields(all(kAlertFields), row, alert);
}

Row analysis_row(const AnalysisRecord& analysis) { return to_row(all(kAnalysisFields), analysis); }
Status read_analysis(Statement& row, AnalysisRecord& analysis, std::string_view prefix) {
  return read_fields(all(kAnalysisFields), row, analysis, prefix);
}

std::string analysis_columns(std::string_view alias, std::string_view prefix) {
  std::string columns;
  for (const Field<AnalysisRecord>& field : kAnalysisFields) {
    if (!field.read) continue;
    if (!columns.empty()) columns += ", ";
    columns.append(alias).append(".").append(field.column);
    columns.append(" AS ").append(prefix).append(field.column);
  }
  return columns;
}

}  // namespace attnbench::sql
