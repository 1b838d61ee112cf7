// Rows <-> records. Each table is described once, in rows.cpp, as a list of fields: a column
// name with how a record's member becomes the column's value and how the column's value goes
// back into the member. The writer (an INSERT's row) and the reader (a SELECT's columns, read by
// name) both walk that one list, so a column is spelled once and a member cannot be written and
// forgotten on the way back. Conventions: a NaN double is NULL; an id of 0 is NULL; an
// enumeration is its C++ name, and a stored name that does not parse is an error naming it.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>

#include "harness/core/records.h"
#include "harness/store/sqlite.h"
#include "harness/store/store.h"

namespace attnbench::sql {

// ---- fields ------------------------------------------------------------------------------------

// One column of a table and the member (or the derivation) of the record it holds.
template <typename Record>
struct Field {
  const char* column;
  // The value an INSERT binds; nullptr: the column is only read (ids, DEFAULT timestamps).
  SqlValue (*write)(const Record&) = nullptr;
  // Reads the column (named `name`: the column, or an alias of it) into the record; nullptr: the
  // column is only written (derived from other members, such as a series key's parts).
  Status (*read)(Statement& row, const char* name, Record&) = nullptr;
  // A NULL is left out of the INSERT, so the column's DEFAULT applies.
  bool omit_null = false;
};

namespace field {

template <typename T>
struct MemberPointer;
template <typename Class, typename Member>
struct MemberPointer<Member Class::*> {
  using Object = Class;
};
template <auto First>
using ObjectOf = typename MemberPointer<decltype(First)>::Object;

// record.*First.*Rest...: a member, or a member of a member (&ResultRecord::check,
// &CheckSummary::max_abs_error).
// clang-format off
template <auto First, auto... Rest, typename Record>
auto& member(Record& record) {
  return ((record.*First) .* ... .* Rest);
}
// clang-format on

inline SqlValue to_sql(bool value) { return integer(value ? 1 : 0); }
template <std::integral T>
SqlValue to_sql(T value) {
  return integer(static_cast<int64_t>(value));  // a uint64 seed: its two's complement pattern
}
inline SqlValue to_sql(double value) { return real(value); }
inline SqlValue to_sql(const std::string& value) { return text(value); }

// A member stored as it is: an integer, a bool, a double (NaN as NULL) or text.
template <auto First, auto... Rest>
constexpr Field<ObjectOf<First>> value(const char* column) {
  using Record = ObjectOf<First>;
  return {column, [](const Record& record) { return to_sql(member<First, Rest...>(record)); },
          [](Statement& row, const char* name, Record& record) {
            row.read(name, member<First, Rest...>(record));
            return Status::Ok();
          }};
}

// Read, never written: the table's own id, a DEFAULT timestamp.
template <auto First, auto... Rest>
constexpr Field<ObjectOf<First>> read_only(const char* column) {
  Field<ObjectOf<First>> field = value<First, Rest...>(column);
  field.write = nullptr;
  return field;
}

// An id that names another row; 0 (none) is NULL.
template <auto First, auto... Rest>
constexpr Field<ObjectOf<First>> id(const char* column) {
  using Record = ObjectOf<First>;
  Field<Record> field = value<First, Rest...>(column);
  field.write = [](const Record& record) { return id_or_null(member<First, Rest...>(record)); };
  return field;
}

// Text that is NULL when empty (a time that has not happened yet).
template <auto First, auto... Rest>
constexpr Field<ObjectOf<First>> text_or_null(const char* column) {
  using Record = ObjectOf<First>;
  Field<Record> field = value<First, Rest...>(column);
  field.write = [](const Record& record) {
    const std::string& value = member<First, Rest...>(record);
    return value.empty() ? null() : text(value);
  };
  return field;
}

// An integer that is NULL when negative (not known, not judged); NULL reads back as the member's
// default, which must be negative.
template <auto First, auto... Rest>
constexpr Field<ObjectOf<First>> known_or_null(const char* column) {
  using Record = ObjectOf<First>;
  Field<Record> field = value<First, Rest...>(column);
  field.write = [](const Record& record) {
    const auto value = member<First, Rest...>(record);
    return value < 0 ? null() : integer(static_cast<int64_t>(value));
  };
  return field;
}

// Text whose column has a DEFAULT that applies when the member is empty.
template <auto First, auto... Rest>
constexpr Field<ObjectOf<First>> text_or_default(const char* column) {
  Field<ObjectOf<First>> field = text_or_null<First, Rest...>(column);
  field.omit_null = true;
  return field;
}

// An enumeration stored by its name: Name(value) -> text, Parse(text) -> optional value.
template <auto Name, auto Parse, auto First, auto... Rest>
constexpr Field<ObjectOf<First>> named(const char* column) {
  using Record = ObjectOf<First>;
  return {column, [](const Record& record) { return text(Name(member<First, Rest...>(record))); },
          [](Statement& row, const char* name, Record& record) {
            const std::string stored = row.get<std::string>(name);
            const auto parsed = Parse(stored);
            if (!parsed) return Status::Error("unknown " + std::string(name) + " '" + stored + "'");
            member<First, Rest...>(record) = *parsed;
            return row.status();
          }};
}

}  // namespace field

// The INSERT row of a record: every field that is written, after `leading` (the columns that
// tie the row to its parents: run_id, case_id, ...).
template <typename Record>
Row to_row(std::span<const Field<Record>> fields, const Record& record, Row leading = {}) {
  Row row = std::move(leading);
  for (const Field<Record>& field : fields) {
    if (!field.write) continue;
    SqlValue value = field.write(record);
    if (field.omit_null && std::holds_alternative<std::nullptr_t>(value)) continue;
    row.push_back({field.column, std::move(value)});
  }
  return row;
}

// Reads every field that is read; a query may name the columns `prefix` + column (joins).
template <typename Record>
Status read_fields(std::span<const Field<Record>> fields, Statement& row, Record& record,
                   std::string_view prefix = {}) {
  for (const Field<Record>& field : fields) {
    if (!field.read) continue;
    const std::string name = std::string(prefix) + field.column;
    if (Status read = field.read(row, name.c_str(), record); !read) return read;
  }
  return row.status();
}

// ---- the tables --------------------------------------------------------------------------------

// A case row: what a result is a measurement of.
struct StoredCase {
  std::string kernel;
  Problem problem;
  std::string distribution;
};
StoredCase case_of(const ResultRecord& result);
// runs.environment_json: environment_entries as [{"what", "value"}, ...] (schema 10).
std::string environment_entries_json(const EnvironmentInfo& env);
// Unique per (kernel, problem, distribution): shape_string prints every field that differs from
// its default.
std::string case_key(const StoredCase& stored);

// runs: the run's own columns (id, info, status, finished_at, analysed_at; not its devices or
// results).
Row run_row(const StoredRun& run);
[[nodiscard]] Status read_run(Statement& row, StoredRun& run);

Row device_row(int64_t run_id, const DeviceInfo& device);
[[nodiscard]] Status read_device(Statement& row, DeviceInfo& device);

Row case_row(const StoredCase& stored);
// The message names the case and the column whose value is unknown.
[[nodiscard]] Status read_case(Statement& row, StoredCase& stored);

// Everything but the case's columns (kernel, problem, distribution) and the samples; the
// result's sm_clock_mhz is the median of its samples'.
Row result_row(int64_t run_id, int64_t case_id, const ResultRecord& result);
[[nodiscard]] Status read_result(Statement& row, ResultRecord& result);

// Writes a result's rows: its case (found, or inserted when new; a stored case under the same
// key must be this very problem, or history would be mislabelled), the result, its samples.
// The caller holds the write transaction. The new result's id.
Result<int64_t> insert_result(sqlite3* db, int64_t run_id, const ResultRecord& result);

Row sample_row(int64_t result_id, const Sample& sample);
[[nodiscard]] Status read_sample(Statement& row, Sample& sample);

Row calibration_row(const CalibrationRecord& calibration);
Row profile_phase_row(const ProfilePhaseRecord& phase);
Status read_profile_phase(Statement& row, ProfilePhaseRecord& phase);
[[nodiscard]] Status read_calibration(Statement& row, CalibrationRecord& calibration);

Row level_row(int64_t run_id, const RunLevel& level);
[[nodiscard]] Status read_level(Statement& row, RunLevel& level);

Row annotation_row(const AnnotationRecord& annotation);
[[nodiscard]] Status read_annotation(Statement& row, AnnotationRecord& annotation);

// alert.run_id is the run it belongs to.
Row alert_row(const AlertRecord& alert);
[[nodiscard]] Status read_alert(Statement& row, AlertRecord& alert);

// analysis.run_id is the run it belongs to; the series key's parts are written as columns.
Row analysis_row(const AnalysisRecord& analysis);
[[nodiscard]] Status read_analysis(Statement& row, AnalysisRecord& analysis,
                                   std::string_view prefix = {});
// "alias.run_id AS prefixrun_id, alias.series_key AS prefixseries_key, ...": every column
// read_analysis reads, for a query that joins result_analysis to other tables.
std::string analysis_columns(std::string_view alias, std::string_view prefix);

}  // namespace attnbench::sql
