// The schema: every version's migration step, the current schema table by table, reading a
// file's version and migrating it forward. The steps are the only definition of the tables;
// reports/tests/fixtures.py and ci/behaviour-db.py build their databases by running the
// R"sql raw strings that follow `kMigrations = {` in this file, so they stay raw strings, in
// order, and nothing after them in this file is one.
//
// ---- the current schema (version 12) -----------------------------------------------------------
// Every table with its columns in SQLite's order (test_store checks this list against a migrated
// file). Timestamps are ISO 8601 UTC text; a double that was not measured (NaN) is NULL; an id
// that names nothing (0 in the records) is NULL; enumerations are stored by their C++ names.
//
//   schema_version: one row, the file's version. { version }
//   runs: one per `attnbench run` (or merged from another file); status incomplete|complete;
//     rerun_of: the run whose suspects it re-measured; merged_from: the file it came from;
//     analysed_at: when `attnbench regressions` last judged it, NULL: never.
//     environment_json: the environment as attnbench names it, field by field, for comparing two
//     runs (records.h environment_entries, as a JSON array of what/value objects); empty for runs
//     written before version 10.
//     { id, uuid, started_at, finished_at, status, suite, command, protocol_json, git_sha,
//       git_dirty, build_type, build_flags, compiler, cuda_runtime, cuda_driver, cudnn, blas,
//       host, cpu, os, cudnn_frontend, cublas, selection, shard, rerun_of, merged_from,
//       analysed_at, environment_json }
//   devices: each device a run used; uuid is the chip. { id, run_id, kind, ordinal, name, uuid,
//       sm_version, sm_count, threads, memory_bytes, l2_bytes, clock_mhz, power_limit_w, ecc,
//       persistence, extra_json }
//   cases: one per kernel x problem x distribution, shared by every result of it; case_key is
//     "kernel|shape|distribution"; shape: reference/problem.h's shape_string, the part of the
//     case and series keys no other column holds; pass: fwd, bwd or fwd_bwd (named in the shape
//     text too, when not fwd); dout: how the backward's upstream gradient was drawn (normal,
//     small, outliers; always normal for a forward; named in the shape text when not normal);
//     varlen: a variable-length batch's lengths (reference/varlen.h; none for a dense batch,
//     whose seqlen_q and seqlen_k are every sequence's; else they are the longest); page_size: a
//     paged KV cache's keys per page (0: contiguous K and V).
//     { id, case_key, kernel, batch, heads_q,
//       heads_kv, seqlen_q, seqlen_k, head_dim_qk, head_dim_v, input_dtype, output_dtype, p_dtype,
//       fp8_scaling, mask_kind, window_left, window_right, layout, scale, distribution, shape,
//       pass, dout, varlen, page_size }
//   results: one per case measured in a run; status CHECKed (records.h's result statuses);
//     series_key "kernel|shape|distribution|device model|build"; sm_clock_mhz: the median of its
//     samples'; timing_stop CHECKed (stable, repetitions, budget).
//     { id, run_id, case_id, device_id, device_name, series_key, status, message, seed, checked,
//       max_abs_error, lowp_error, atol, bound, rel_l2, rmse, nan_count, inf_count, rows_checked,
//       rows_total, lse_max_error, canaries_ok, repeatable, timed, median_s, mean_s, min_s,
//       max_s, stddev_s, cv, repetitions, iterations_per_repetition, flops, bytes, flops_per_s,
//       bytes_per_s, fraction_of_peak_flops, fraction_of_peak_bandwidth, extra_memory_bytes,
//       launches, energy_j, predicted_s, repro, created_at, details_json, sm_clock_mhz,
//       forwards_timed, timing_wall_s, timing_stop }
//   samples: one per timed repetition of a result; clock_suspect: the analysis's judgement of its
//     SM clock (1: far below its series' usual clock, 0: not; NULL: not judged).
//     { id, result_id, repetition, time_s, iterations, sm_clock_mhz, clock_reasons,
//       clock_suspect }
//   calibrations: a device's measured ceilings (gemm per dtype, copy). { id, device_name,
//       device_uuid, kind, dtype, value, details, measured_at }
//   annotations: expected changes, baseline resets and ignores of a series, from a run on.
//     { id, series_key, kind, reason, created_at, from_run_id }
//   alerts: what the regression analysis tells people about a run; kind, severity and state
//     CHECKed (verdict.h's kinds and severities; state: '', a verdict, a result status, missing,
//     fewer_cases). { id, run_id, series_key, kind, severity, message, details_json, created_at,
//       state, since_run_id, change_fraction, environment, annotation, chip_changed }
//   run_levels: a run's level per device model (log of the speed factor its series shared).
//     { run_id, device_name, level, series_count }
//   result_analysis: the detector's whole judgement of each series (scope series) and each
//     kernel's aggregate (scope kernel) of an analysed run, keyed (run_id, series_key); the key's
//     parts as columns; verdicts CHECKed (verdict.h); result_id NULL for a missing series or an
//     aggregate. { run_id, series_key, scope, kernel, shape, distribution, device_name, build,
//       result_id, verdict, accuracy_verdict, center_s, spread_s, threshold, change_fraction,
//       level, rerun_change, baseline_runs, baseline_run_id, history_from_run_id, since_run_id,
//       chip_changed, status_change, reason, annotation, detector_version, analysed_at,
//       awaiting, environment, noisy, detectable_1, detectable_3 }
//     environment: what differs from its baseline run's environment, its clock included ('' without
//     a baseline run); noisy: its repetitions too noisy to compare (1, 0; NULL: not judged);
//     detectable_1, detectable_3: the smallest slowdown it would be confirmed for within one and
//     three nightlies (NULL: blind there).
//   run_triage: what the analysis of a run decided for people (harness/analysis/triage.h): the
//     gate (failed|passed|nothing_measured) under fail_on (confirmed|suspected), its one
//     sentence, and the groups a reader acts on (one per kernel and device model, each with its
//     rows), in order, as JSON; and what the gate can see of each kernel, with the target it was
//     held to. { run_id, gate, fail_on, verdict, groups_json, analysed_at, detectable_json }
//   profiles: one row per name of a profiled forward's work (`attnbench profile`): a CPU
//     kernel's phase, a GPU kernel, copy or fill (kind CHECKed: phase, kernel, memcpy, memset,
//     gaps); rows of one forward share profile_id; kind "gaps" holds the track time no work
//     covered; threads counts the tracks (threads on the CPU, streams on a GPU); share is of
//     forward_s x threads; source says how it was recorded (phases, CUPTI).
//     expected_launches: the launches the kernel declares for the forward (NULL: none declared).
//     { id, profile_id, profiled_at, kernel, shape, distribution, device, forward_s, median_s,
//       threads, extra_memory_bytes, name, count, total_s, share, kind, source,
//       expected_launches }
// ---- end of the current schema ---------------------------------------------------------------
#include "harness/store/schema.h"

#include <array>

#include "harness/store/store.h"

namespace attnbench::sql {

namespace {

// Forward migrations: kMigrations[i] takes a database from version i to version i + 1. A step
// that has been released never changes; a schema change is a new step and a new kSchemaVersion.
// The CHECK lists of version 6 spell the names of harness/core/verdict.h and records.h; a test
// (StoreSchema.CheckListsAreTheEnumerationsNames) reads them back from a file and compares.
constexpr std::array<const char*, kSchemaVersion> kMigrations = {
    // Version 1: the core tables.
    R"sql(
CREATE TABLE schema_version (version INTEGER NOT NULL);

CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  uuid TEXT NOT NULL UNIQUE,
  started_at TEXT NOT NULL,
  finished_at TEXT,
  status TEXT NOT NULL CHECK (status IN ('incomplete', 'complete')),
  suite TEXT NOT NULL,
  command TEXT NOT NULL,
  protocol_json TEXT NOT NULL,
  git_sha TEXT NOT NULL,
  git_dirty INTEGER NOT NULL,
  build_type TEXT NOT NULL,
  build_flags TEXT NOT NULL,
  compiler TEXT NOT NULL,
  cuda_runtime TEXT NOT NULL,
  cuda_driver TEXT NOT NULL,
  cudnn TEXT NOT NULL,
  blas TEXT NOT NULL,
  host TEXT NOT NULL,
  cpu TEXT NOT NULL,
  os TEXT NOT NULL
);

CREATE TABLE devices (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs (id),
  kind TEXT NOT NULL,
  ordinal INTEGER NOT NULL,
  name TEXT NOT NULL,
  uuid TEXT NOT NULL,
  sm_version INTEGER,
  sm_count INTEGER,
  threads INTEGER,
  memory_bytes INTEGER,
  l2_bytes INTEGER,
  clock_mhz REAL,
  power_limit_w REAL,
  ecc INTEGER,
  persistence INTEGER,
  extra_json TEXT
);
CREATE INDEX devices_by_run ON devices (run_id);

-- One row per (kernel, problem, distribution); enumerations as their canonical names.
CREATE TABLE cases (
  id INTEGER PRIMARY KEY,
  case_key TEXT NOT NULL UNIQUE,
  kernel TEXT NOT NULL,
  batch INTEGER NOT NULL,
  heads_q INTEGER NOT NULL,
  heads_kv INTEGER NOT NULL,
  seqlen_q INTEGER NOT NULL,
  seqlen_k INTEGER NOT NULL,
  head_dim_qk INTEGER NOT NULL,
  head_dim_v INTEGER NOT NULL,
  input_dtype TEXT NOT NULL,
  output_dtype TEXT NOT NULL,
  p_dtype TEXT NOT NULL,
  fp8_scaling TEXT NOT NULL,
  mask_kind TEXT NOT NULL,
  window_left INTEGER NOT NULL,
  window_right INTEGER NOT NULL,
  layout TEXT NOT NULL,
  scale REAL NOT NULL,
  distribution TEXT NOT NULL
);

CREATE TABLE results (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs (id),
  case_id INTEGER NOT NULL REFERENCES cases (id),
  device_id INTEGER REFERENCES devices (id),
  device_name TEXT,
  series_key TEXT NOT NULL,
  status TEXT NOT NULL
    CHECK (status IN ('passed', 'failed', 'skipped', 'crashed', 'timeout', 'error')),
  message TEXT NOT NULL,
  seed INTEGER NOT NULL,  -- the uint64 seed's two's complement bit pattern
  checked INTEGER,
  max_abs_error REAL,
  lowp_error REAL,
  atol REAL,
  bound REAL,
  rel_l2 REAL,
  rmse REAL,
  nan_count INTEGER,
  inf_count INTEGER,
  rows_checked INTEGER,
  rows_total INTEGER,
  lse_max_error REAL,
  canaries_ok INTEGER,
  repeatable INTEGER,
  timed INTEGER,
  median_s REAL,
  mean_s REAL,
  min_s REAL,
  max_s REAL,
  stddev_s REAL,
  cv REAL,
  repetitions INTEGER,
  iterations_per_repetition INTEGER,
  flops REAL,
  bytes REAL,
  flops_per_s REAL,
  bytes_per_s REAL,
  fraction_of_peak_flops REAL,
  fraction_of_peak_bandwidth REAL,
  extra_memory_bytes INTEGER,
  launches INTEGER,
  energy_j REAL,
  predicted_s REAL,
  repro TEXT,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
CREATE INDEX results_by_run ON results (run_id);

CREATE TABLE samples (
  id INTEGER PRIMARY KEY,
  result_id INTEGER NOT NULL REFERENCES results (id),
  repetition INTEGER NOT NULL,
  time_s REAL,
  iterations INTEGER,
  sm_clock_mhz REAL,
  clock_reasons TEXT
);
CREATE INDEX samples_by_result ON samples (result_id);

CREATE TABLE calibrations (
  id INTEGER PRIMARY KEY,
  device_name TEXT NOT NULL,
  device_uuid TEXT NOT NULL,
  kind TEXT NOT NULL,
  dtype TEXT NOT NULL,
  value REAL,
  details TEXT NOT NULL,
  measured_at TEXT NOT NULL
);
CREATE INDEX calibrations_by_device ON calibrations (device_uuid, kind, dtype, measured_at);
)sql",
    // Version 2: regression bookkeeping and the index behind every history query.
    R"sql(
-- Expected changes and baseline resets, per series.
CREATE TABLE annotations (
  id INTEGER PRIMARY KEY,
  series_key TEXT NOT NULL,
  kind TEXT NOT NULL,
  reason TEXT NOT NULL,
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
CREATE INDEX annotations_by_series ON annotations (series_key);

CREATE TABLE alerts (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs (id),
  series_key TEXT NOT NULL,
  kind TEXT NOT NULL,
  severity TEXT NOT NULL,
  message TEXT NOT NULL,
  details_json TEXT NOT NULL DEFAULT '{}',
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
CREATE INDEX alerts_by_run ON alerts (run_id);

CREATE INDEX results_by_series ON results (series_key, run_id);
)sql",
    // Version 3: the GPU backend: what a kernel reports about its run (FP8 amax, the engine
    // chosen) and the library versions of a run (cuDNN compiled and loaded, frontend, cuBLAS).
    R"sql(
ALTER TABLE results ADD COLUMN details_json TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN cudnn_frontend TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN cublas TEXT NOT NULL DEFAULT '';
)sql",
    // Version 4: regression analysis, and runs measured on many machines then merged.
    R"sql(
-- What a run asked for, so runs of the same job compare case for case; the run whose suspects a
-- rerun re-measured; the database a merged run came from; when it was last analysed.
ALTER TABLE runs ADD COLUMN selection TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN shard TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN rerun_of INTEGER REFERENCES runs (id);
ALTER TABLE runs ADD COLUMN merged_from TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN analysed_at TEXT;
CREATE INDEX runs_by_rerun ON runs (rerun_of);

-- The median SM clock of a result's repetitions: history queries need it without the samples.
ALTER TABLE results ADD COLUMN sm_clock_mhz REAL;

-- An alert's verdict (ok, suspected, confirmed, ...), since when, by how much, what differs
-- from the baseline's environment and the annotation that covers it.
ALTER TABLE alerts ADD COLUMN state TEXT NOT NULL DEFAULT '';
ALTER TABLE alerts ADD COLUMN since_run_id INTEGER;
ALTER TABLE alerts ADD COLUMN change_fraction REAL;
ALTER TABLE alerts ADD COLUMN environment TEXT NOT NULL DEFAULT '';
ALTER TABLE alerts ADD COLUMN annotation TEXT NOT NULL DEFAULT '';
ALTER TABLE alerts ADD COLUMN chip_changed INTEGER NOT NULL DEFAULT 0;
CREATE INDEX alerts_by_series ON alerts (series_key, run_id);

-- The first run an annotation governs.
ALTER TABLE annotations ADD COLUMN from_run_id INTEGER;

-- A run's level per device model: the log of the speed factor all its series shared.
CREATE TABLE run_levels (
  run_id INTEGER NOT NULL REFERENCES runs (id),
  device_name TEXT NOT NULL,
  level REAL NOT NULL,
  series_count INTEGER NOT NULL,
  PRIMARY KEY (run_id, device_name)
);
)sql",
    // Version 5: what timing a result cost and why it stopped (issue 11: timing plans in
    // wall-clock time, repetitions that stop once the samples are stable).
    R"sql(
ALTER TABLE results ADD COLUMN forwards_timed INTEGER;
ALTER TABLE results ADD COLUMN timing_wall_s REAL;
ALTER TABLE results ADD COLUMN timing_stop TEXT
  CHECK (timing_stop IS NULL OR timing_stop IN ('stable', 'repetitions', 'budget'));
)sql",
    // Version 6: the detector's whole judgement of every series it analysed, and alerts whose
    // kind, severity and state are closed sets. SQLite cannot add a CHECK to a column, so alerts
    // is rebuilt (SQLite's procedure: new table, copy, drop, rename, indexes), with a value
    // outside its set mapped to one inside (kind -> run, severity -> info, state -> '') so that
    // the step succeeds on any version-5 file; migrate() runs it with foreign keys off.
    R"sql(
CREATE TABLE result_analysis (
  run_id INTEGER NOT NULL REFERENCES runs (id),
  series_key TEXT NOT NULL,
  scope TEXT NOT NULL CHECK (scope IN ('series', 'kernel')),
  -- The series key's parts (SeriesKey); a key that does not parse: kernel = the key, the rest ''.
  kernel TEXT NOT NULL,
  shape TEXT NOT NULL,
  distribution TEXT NOT NULL,
  device_name TEXT NOT NULL,
  build TEXT NOT NULL,
  result_id INTEGER REFERENCES results (id),  -- NULL: missing from the run, or an aggregate
  verdict TEXT NOT NULL CHECK (verdict IN
    ('ok', 'improved', 'suspected', 'confirmed', 'outlier', 'ambiguous', 'insufficient_history')),
  accuracy_verdict TEXT NOT NULL CHECK (accuracy_verdict IN
    ('ok', 'improved', 'suspected', 'confirmed', 'outlier', 'ambiguous', 'insufficient_history')),
  center_s REAL,         -- the baseline's level-free median
  spread_s REAL,         -- 1.4826 x MAD, floored
  threshold REAL,        -- relative: 0.03 = a trip needs 3 %
  change_fraction REAL,  -- level-free, relative to center: +0.10 = 10 % slower
  level REAL,            -- the run's level (log) the change was measured against
  rerun_change REAL,
  baseline_runs INTEGER NOT NULL,
  baseline_run_id INTEGER,      -- the baseline's representative run
  history_from_run_id INTEGER,  -- the baseline starts here (reset, expected change); NULL: all
  since_run_id INTEGER,         -- the first run of an open suspicion or regression
  chip_changed INTEGER NOT NULL,
  status_change TEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT '',
  annotation TEXT NOT NULL DEFAULT '',
  detector_version INTEGER NOT NULL,
  analysed_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
  PRIMARY KEY (run_id, series_key)
);
CREATE INDEX result_analysis_by_series ON result_analysis (series_key, run_id);

CREATE TABLE alerts_v6 (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs (id),
  series_key TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('performance', 'accuracy', 'status', 'kernel', 'run')),
  severity TEXT NOT NULL CHECK (severity IN ('error', 'warning', 'info')),
  message TEXT NOT NULL,
  details_json TEXT NOT NULL DEFAULT '{}',
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
  state TEXT NOT NULL DEFAULT '' CHECK (state IN ('',
    'ok', 'improved', 'suspected', 'confirmed', 'outlier', 'ambiguous', 'insufficient_history',
    'passed', 'failed', 'skipped', 'crashed', 'timeout', 'error',
    'missing', 'fewer_cases')),
  since_run_id INTEGER,
  change_fraction REAL,
  environment TEXT NOT NULL DEFAULT '',
  annotation TEXT NOT NULL DEFAULT '',
  chip_changed INTEGER NOT NULL DEFAULT 0
);
INSERT INTO alerts_v6 (id, run_id, series_key, kind, severity, message, details_json, created_at,
                       state, since_run_id, change_fraction, environment, annotation, chip_changed)
SELECT id, run_id, series_key,
  CASE WHEN kind IN ('performance', 'accuracy', 'status', 'kernel', 'run') THEN kind
       ELSE 'run' END,
  CASE WHEN severity IN ('error', 'warning', 'info') THEN severity ELSE 'info' END,
  message, details_json, created_at,
  CASE WHEN state IN ('',
    'ok', 'improved', 'suspected', 'confirmed', 'outlier', 'ambiguous', 'insufficient_history',
    'passed', 'failed', 'skipped', 'crashed', 'timeout', 'error',
    'missing', 'fewer_cases') THEN state ELSE '' END,
  since_run_id, change_fraction, environment, annotation, chip_changed
FROM alerts;
DROP TABLE alerts;
ALTER TABLE alerts_v6 RENAME TO alerts;
CREATE INDEX alerts_by_run ON alerts (run_id);
CREATE INDEX alerts_by_series ON alerts (series_key, run_id);
)sql",
    // Version 7: the phases of profiled forwards (`attnbench profile`, issue 17), one row per
    // phase; a profile's rows share its profile_id.
    R"sql(
CREATE TABLE profiles (
  id INTEGER PRIMARY KEY,
  profile_id TEXT NOT NULL,
  profiled_at TEXT NOT NULL,
  kernel TEXT NOT NULL,
  shape TEXT NOT NULL,
  distribution TEXT NOT NULL,
  device TEXT NOT NULL,
  forward_s REAL NOT NULL,
  median_s REAL NOT NULL,
  threads INTEGER NOT NULL,
  extra_memory_bytes INTEGER NOT NULL,
  name TEXT NOT NULL,
  count INTEGER NOT NULL,
  total_s REAL NOT NULL,
  share REAL NOT NULL
);
CREATE INDEX profiles_by_kernel ON profiles (kernel, shape, profiled_at);
)sql",
    // Version 8: the triage of an analysed run (issue 18), decided once by the analysis and read
    // by `regressions`, --summary-md, JUnit and the report: the gate, its sentence, and the
    // groups a reader acts on (one per kernel and device model), in order, as JSON. And what a
    // suspected kernel-wide aggregate awaits.
    R"sql(
ALTER TABLE result_analysis ADD COLUMN awaiting TEXT NOT NULL DEFAULT '';
CREATE TABLE run_triage (
  run_id INTEGER PRIMARY KEY REFERENCES runs (id),
  gate TEXT NOT NULL CHECK (gate IN ('failed', 'passed', 'nothing_measured')),
  fail_on TEXT NOT NULL CHECK (fail_on IN ('confirmed', 'suspected')),
  verdict TEXT NOT NULL,
  groups_json TEXT NOT NULL CHECK (json_valid(groups_json)),
  analysed_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
)sql",
    // Version 9: GPU profiles (issue 17, CUPTI): what each row's work is, and how the forward was
    // recorded. Rows before it are CPU phases.
    R"sql(
ALTER TABLE profiles ADD COLUMN kind TEXT NOT NULL DEFAULT 'phase'
  CHECK (kind IN ('phase', 'kernel', 'memcpy', 'memset', 'gaps'));
ALTER TABLE profiles ADD COLUMN source TEXT NOT NULL DEFAULT 'phases';
UPDATE profiles SET kind = 'gaps' WHERE name = 'gaps';
)sql",
    // Version 10: what the analysis and the kernels decided, stored so that readers show it and
    // decide nothing again (issue 35, item 5): each analysed series' environment difference
    // against its baseline run (its clock included) and whether its repetitions were too noisy;
    // each sample's clock judgement; a run's environment as attnbench names it, for comparing
    // any two runs; a profiled forward's declared launches; a case's shape text.
    R"sql(
ALTER TABLE runs ADD COLUMN environment_json TEXT NOT NULL DEFAULT '';
ALTER TABLE result_analysis ADD COLUMN environment TEXT NOT NULL DEFAULT '';
ALTER TABLE result_analysis ADD COLUMN noisy INTEGER CHECK (noisy IS NULL OR noisy IN (0, 1));
ALTER TABLE samples ADD COLUMN clock_suspect INTEGER
  CHECK (clock_suspect IS NULL OR clock_suspect IN (0, 1));
ALTER TABLE profiles ADD COLUMN expected_launches INTEGER;
-- A case's shape text as a column, so no reader takes a key apart for it; older cases' from their
-- key, "kernel|shape|distribution" (a kernel name holds no '|').
ALTER TABLE cases ADD COLUMN shape TEXT NOT NULL DEFAULT '';
UPDATE cases SET shape = substr(substr(case_key, instr(case_key, '|') + 1), 1,
                                instr(substr(case_key, instr(case_key, '|') + 1), '|') - 1);
)sql",
    // Version 11: the pass (issue 36): what a case's timed step computes. Every older case is a
    // forward; its shape text, keys and series are unchanged (shape_string names no fwd pass).
    R"sql(
ALTER TABLE cases ADD COLUMN pass TEXT NOT NULL DEFAULT 'fwd'
  CHECK (pass IN ('fwd', 'bwd', 'fwd_bwd'));
)sql",
    // Version 12: the backward's upstream gradient has its own distribution (issue 36). Older
    // cases read normal; a version-11 backward of a non-normal distribution drew dO from that
    // distribution, so such a series' accuracy figures may step once at the migration.
    R"sql(
ALTER TABLE cases ADD COLUMN dout TEXT NOT NULL DEFAULT 'normal'
  CHECK (dout IN ('normal', 'small', 'outliers'));
)sql",
    // Version 13: what the gate can see (issue 41): the smallest slowdown each analysed series and
    // kernel-wide aggregate would be confirmed for within one and within three nightlies, relative
    // (0.05 = 5 %); NULL where it would not be (blind), or in analyses before this version; and
    // the run triage's list of them per kernel.
    R"sql(
ALTER TABLE result_analysis ADD COLUMN detectable_1 REAL;
ALTER TABLE result_analysis ADD COLUMN detectable_3 REAL;
-- And per kernel in the run's triage, with the target the gate was held to.
ALTER TABLE run_triage ADD COLUMN detectable_json TEXT NOT NULL DEFAULT '{}'
  CHECK (json_valid(detectable_json));
)sql",
    // Version 14: variable-length batches (issue 39): a case's per-sequence lengths, as
    // reference/varlen.h names them ("uniform", "list(120,37,512)"); older cases are dense.
    R"sql(
ALTER TABLE cases ADD COLUMN varlen TEXT NOT NULL DEFAULT 'none';
)sql",
    // Version 15: paged KV caches (issue 39): a case's page size; older cases' K and V are
    // contiguous (0).
    R"sql(
ALTER TABLE cases ADD COLUMN page_size INTEGER NOT NULL DEFAULT 0 CHECK (page_size >= 0);
)sql",
};

}  // namespace

Status newer_schema_error(const std::string& path, int version) {
  return Status::Error(path + " has schema version " + std::to_string(version) +
                       "; this attnbench reads up to " + std::to_string(kSchemaVersion));
}

Result<int> read_schema_version(sqlite3* db, const std::string& path) {
  int version = 0;
  // SQLite's own tables (sqlite_stat1 after an ANALYZE, ...) say nothing about who wrote the file.
  Statement tables(
      db,
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' "
      "ESCAPE '\\'");
  bool has_version_table = false;
  bool has_other_tables = false;
  while (tables.next_row()) {
    if (tables.get<std::string>("name") == "schema_version") {
      has_version_table = true;
    } else {
      has_other_tables = true;
    }
  }
  if (!tables.status()) {
    if (tables.error_code() == SQLITE_NOTADB) {
      return Status::Error(path + " is not an attnbench database (not a SQLite file)");
    }
    return error_with("cannot read the schema of " + path, tables.status().message);
  }
  if (!has_version_table) {
    if (!has_other_tables) return 0;
    return Status::Error(path +
                         " is a SQLite database without a schema_version table, not an "
                         "attnbench database");
  }
  Statement rows(db, "SELECT version FROM schema_version");
  int row_count = 0;
  while (rows.next_row()) {
    rows.read("version", version);
    ++row_count;
  }
  if (!rows.status()) {
    return error_with("cannot read the schema version of " + path, rows.status().message);
  }
  if (row_count != 1) {
    return Status::Error(path + " has a damaged schema_version table (" +
                         std::to_string(row_count) + " rows, expected 1)");
  }
  return version;
}

namespace {

// Runs the steps from the file's version to `target` under one write lock.
Status apply_steps(sqlite3* db, const std::string& path, int target, int& version) {
  Transaction transaction(db, Transaction::Kind::write);
  if (!transaction.status()) {
    return error_with("cannot lock " + path + " to check its schema", transaction.status().message);
  }
  const Result<int> found = read_schema_version(db, path);
  if (!found) return found.status();
  version = *found;
  if (version > kSchemaVersion) return newer_schema_error(path, version);
  if (version >= target) return transaction.commit();
  for (int step = version; step < target; ++step) {
    if (Status applied = execute_with_retry(db, kMigrations[step]); !applied) {
      return error_with(
          path + ": migration to schema version " + std::to_string(step + 1) + " failed",
          applied.message);
    }
  }
  Status recorded = Statement(db, "DELETE FROM schema_version").execute();
  if (recorded) recorded = insert_row(db, "schema_version", {{"version", integer(target)}});
  if (recorded) recorded = transaction.commit();
  if (!recorded) return error_with("cannot record the schema version of " + path, recorded.message);
  version = target;
  return Status::Ok();
}

}  // namespace

// The steps run with foreign keys off, as SQLite's procedure for rebuilding a table asks: a file
// written without them (by Python, by hand) may hold a row whose parent is gone, and copying it
// must not fail the migration. The pragma is a no-op inside a transaction, so it goes around it.
Status migrate(sqlite3* db, const std::string& path, int target, int& version) {
  if (Status off = execute_with_retry(db, "PRAGMA foreign_keys = OFF"); !off) {
    return error_with("cannot prepare " + path + " for its migration", off.message);
  }
  const Status migrated = apply_steps(db, path, target, version);
  const Status on = execute_with_retry(db, "PRAGMA foreign_keys = ON");
  if (!migrated) return migrated;
  return on ? on : error_with("cannot configure " + path, on.message);
}

}  // namespace attnbench::sql
