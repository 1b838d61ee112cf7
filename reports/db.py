"""Reading the attnbench database. The schema (harness/store.cpp, kMigrations) is the contract:
this module reads tables and columns by name and asks the file which ones it has, so a database
written before a table existed (annotations and alerts came with version 2) or after a newer
migration added columns still builds a report; what is absent is reported, not guessed."""

import json
import math
import pathlib
import sqlite3
import urllib.parse
from dataclasses import dataclass, field


class ReportError(Exception):
    """A problem with the input that the user can fix (missing file, unknown run)."""


FAILURE_STATUSES = ("failed", "crashed", "timeout", "error")
STATUSES = ("passed", "failed", "skipped", "crashed", "timeout", "error")
# The detector's verdicts (harness/core/verdict.h; result_analysis CHECKs them, schema version 6).
VERDICTS = ("ok", "improved", "suspected", "confirmed", "outlier", "ambiguous",
            "insufficient_history")


@dataclass
class Device:
    id: int
    kind: str
    ordinal: int
    name: str
    uuid: str
    # Every column of its row, for the environment comparison (empty where the test fixtures
    # make one).
    fields: dict = field(default_factory=dict)

    @property
    def label(self):
        # The CLI's --devices label: cpu, cuda:0, ...
        return self.kind if self.kind == "cpu" else f"{self.kind}:{self.ordinal}"


@dataclass
class Result:
    id: int
    run_id: int
    series_key: str
    kernel: str
    status: str
    message: str
    device_id: int | None
    device_name: str
    shape: str  # the CLI's --shape text (cases.shape from schema version 10)
    distribution: str
    batch: int
    heads_q: int
    heads_kv: int
    seqlen_q: int
    seqlen_k: int
    head_dim: int
    head_dim_v: int
    dtype: str
    output_dtype: str
    fp8_scaling: str
    mask: str  # "window(32,16)", "causal", ...
    layout: str
    median_s: float | None
    cv: float | None
    flops: float | None
    flops_per_s: float | None
    fraction_of_peak_flops: float | None
    bytes_per_s: float | None
    fraction_of_peak_bandwidth: float | None
    max_abs_error: float | None
    bound: float | None
    rmse: float | None  # RMSE against fp64 over the checked rows
    checked: bool
    extra_memory_bytes: int | None
    launches: int | None
    energy_j: float | None
    predicted_s: float | None
    repro: str
    details_json: str
    # (time_s, sm_clock_mhz, clock_reasons, clock_suspect): the last as the analysis judged the
    # sample's clock (samples.clock_suspect, schema version 10): True, False, None not judged.
    samples: list = field(default_factory=list)
    # What the case's step computes: fwd, bwd or fwd_bwd (cases.pass, schema version 11; every
    # older case is a forward).
    pass_name: str = "fwd"

    @property
    def timed(self):
        return self.median_s is not None and self.median_s > 0

    @property
    def case_label(self):
        # As the CLI prints a case: the shape, then the distribution when it is not the default.
        return self.shape + ("" if self.distribution == "normal" else f" dist={self.distribution}")

    @property
    def out_of_memory(self):
        # Kernels and the tracking allocator report "out of memory: <what> needs <N> MiB".
        return self.message.startswith("out of memory")

    @property
    def error_ratio(self):
        if not self.checked or self.max_abs_error is None or not self.bound:
            return None
        return self.max_abs_error / self.bound


def split_series_key(key):
    """kernel | shape | distribution | device model | build (harness/core/series_key.h), only
    for files whose columns do not hold the parts: a result's shape before schema version 10
    (cases.shape), the keys of alerts and series with no result_analysis row (before schema
    version 6, or never analysed). A key that does not parse is all kernel, as the store writes
    it (schema.cpp)."""
    parts = key.split("|")
    if len(parts) != 5:
        return {"kernel": key, "shape": "", "distribution": "", "device": "", "build": ""}
    return dict(zip(("kernel", "shape", "distribution", "device", "build"), parts))


@dataclass
class Analysis:
    """The detector's stored judgement of one series (scope series) or one kernel's aggregate
    (scope kernel) at one run: a result_analysis row (schema version 6). The report shows these
    numbers as they are; it computes no baseline of its own. Relative figures are level-free:
    the run's common speed factor (level, a log) is divided out before comparing with center."""
    run_id: int
    series_key: str
    scope: str
    kernel: str
    shape: str
    distribution: str
    device: str
    build: str
    result_id: int | None  # None: missing from the run, or an aggregate
    verdict: str
    accuracy_verdict: str
    center_s: float | None  # the baseline's level-free median; None for aggregates
    spread_s: float | None
    threshold: float | None  # relative: 0.03 = a trip needs 3 %
    change_fraction: float | None  # relative to center: +0.10 = 10 % slower
    level: float | None
    rerun_change: float | None
    baseline_runs: int
    baseline_run_id: int | None  # the baseline's representative run (environment diffs)
    history_from_run_id: int | None  # the baseline starts here (reset, expected change)
    since_run_id: int | None
    chip_changed: bool
    status_change: str
    reason: str
    annotation: str
    detector_version: int
    analysed_at: str
    # What the analysis judged of the result's conditions (schema version 10; None before):
    # what differs from its baseline run's environment, its clock included ("" without a
    # baseline run), and whether its repetitions were too noisy to compare (None: not judged).
    environment: str | None = None
    noisy: bool | None = None

    @property
    def kernel_wide(self):
        return self.scope == "kernel"

    @property
    def group_key(self):
        """The kernel-wide aggregate this row belongs to, as its columns name it."""
        return (self.kernel, self.device, self.build)


def _run_reference(value):
    # The store writes NULL for "names no run"; older writers may have written 0.
    return int(value) if value else None


def _analysis(row):
    return Analysis(
        run_id=row["run_id"], series_key=row["series_key"], scope=row["scope"],
        kernel=row["kernel"], shape=row["shape"], distribution=row["distribution"],
        device=row["device_name"], build=row["build"], result_id=row["result_id"],
        verdict=row["verdict"], accuracy_verdict=row["accuracy_verdict"],
        center_s=_finite(row["center_s"]), spread_s=_finite(row["spread_s"]),
        threshold=_finite(row["threshold"]), change_fraction=_finite(row["change_fraction"]),
        level=_finite(row["level"]), rerun_change=_finite(row["rerun_change"]),
        baseline_runs=row["baseline_runs"] or 0,
        baseline_run_id=_run_reference(row["baseline_run_id"]),
        history_from_run_id=_run_reference(row["history_from_run_id"]),
        since_run_id=_run_reference(row["since_run_id"]),
        chip_changed=bool(row["chip_changed"]), status_change=row["status_change"] or "",
        reason=row["reason"] or "", annotation=row["annotation"] or "",
        detector_version=row["detector_version"], analysed_at=row["analysed_at"] or "",
        environment=row["environment"] if "environment" in row.keys() else None,
        noisy=None if "noisy" not in row.keys() or row["noisy"] is None else bool(row["noisy"]))


def _finite(value):
    """NULL and non-finite numbers both mean 'not measured' to the report."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _known_count(value):
    # The store writes -1 for "unknown" (launches on a CPU, memory without a tracking allocator).
    return None if value is None or value < 0 else int(value)


def _mask_label(row):
    kind = row["mask_kind"]
    if kind == "window":
        return f"window({row['window_left']},{row['window_right']})"
    return kind


class Database:
    """A read-only connection plus what the file's schema holds."""

    def __init__(self, path):
        path = pathlib.Path(path)
        if not path.is_file():
            raise ReportError(f"{path}: no such database file")
        # mode=ro: the report never writes, and a file a run is still writing stays untouched.
        uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
        self.path = path
        self.connection = sqlite3.connect(uri, uri=True)
        self.connection.row_factory = sqlite3.Row
        try:
            names = self.connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        except sqlite3.DatabaseError as error:
            raise ReportError(f"{path}: not an attnbench database ({error})") from error
        self.tables = {row["name"] for row in names}
        if not {"runs", "results", "cases"} <= self.tables:
            raise ReportError(f"{path}: not an attnbench database (no runs/results/cases tables)")
        self.schema_version = 0
        if "schema_version" in self.tables:
            row = self.connection.execute("SELECT MAX(version) AS v FROM schema_version").fetchone()
            self.schema_version = row["v"] or 0

    def close(self):
        self.connection.close()

    def has_table(self, table):
        return table in self.tables

    def columns(self, table):
        if table not in self.tables:
            return set()
        # Table names come from sqlite_master, never from user input.
        return {row["name"] for row in self.connection.execute(f"PRAGMA table_info({table})")}

    def rows(self, sql, parameters=()):
        return self.connection.execute(sql, parameters).fetchall()

    # ---- runs ----------------------------------------------------------------------------------

    def _not_a_rerun(self, alias="runs"):
        """SQL condition leaving out reruns of suspects (schema version 4): they re-measure a
        few cases of another run, so they are neither 'the latest run' nor a point of history."""
        return f"{alias}.rerun_of IS NULL" if "rerun_of" in self.columns("runs") else "1"

    def run_ids(self):
        """Every run that is not a rerun, oldest first."""
        return [row["id"] for row in
                self.rows(f"SELECT id FROM runs WHERE {self._not_a_rerun()} ORDER BY id")]

    def reruns_of(self, run_id):
        if "rerun_of" not in self.columns("runs"):
            return []
        return [row["id"] for row in
                self.rows("SELECT id FROM runs WHERE rerun_of = ? ORDER BY id", (run_id,))]

    def run(self, run_id):
        row = self.connection.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise ReportError(f"{self.path}: no run {run_id}")
        return dict(row)

    def latest_run_of_suite(self, suite, up_to_run):
        """The newest run of a suite (not a rerun) up to a run; None when there is none."""
        row = self.connection.execute(
            f"SELECT * FROM runs WHERE suite = ? AND id <= ? AND {self._not_a_rerun()} "
            "ORDER BY id DESC LIMIT 1", (suite, up_to_run)).fetchone()
        return dict(row) if row else None

    def runs_up_to(self, run_id):
        """Every run up to and including run_id, by id: the history the report can see."""
        return [dict(row) for row in self.rows("SELECT * FROM runs WHERE id <= ? ORDER BY id",
                                                (run_id,))]

    def devices(self, run_id):
        devices = []
        for row in self.rows("SELECT * FROM devices WHERE run_id = ? ORDER BY kind, ordinal",
                             (run_id,)):
            devices.append(Device(row["id"], row["kind"], row["ordinal"], row["name"],
                                  row["uuid"], dict(row)))
        return devices

    def device_rows(self, device_ids):
        if not device_ids:
            return {}
        marks = ",".join("?" * len(device_ids))
        return {row["id"]: dict(row) for row in
                self.rows(f"SELECT * FROM devices WHERE id IN ({marks})", list(device_ids))}

    def calibrations(self, device_uuid, before):
        """Newest calibration of each (kind, dtype) measured no later than `before` (the run's
        end), so an old run's report shows the ceilings it was measured against; the newest
        ones when the device was calibrated only later."""
        rows = self.rows(
            "SELECT * FROM calibrations WHERE device_uuid = ? ORDER BY measured_at, id",
            (device_uuid,))
        newest, newest_before = {}, {}
        for row in rows:
            key = (row["kind"], row["dtype"])
            newest[key] = dict(row)
            if not before or row["measured_at"] <= before:
                newest_before[key] = dict(row)
        chosen = newest_before or newest
        return [chosen[key] for key in sorted(chosen)]

    # ---- results -------------------------------------------------------------------------------

    def results(self, run_id, with_samples=True):
        sql = """
            SELECT r.*, c.kernel AS case_kernel, c.batch, c.heads_q, c.heads_kv, c.seqlen_q,
                   c.seqlen_k, c.head_dim_qk, c.head_dim_v, c.input_dtype, c.output_dtype,
                   c.fp8_scaling, c.mask_kind, c.window_left, c.window_right, c.layout,
                   c.distribution{shape}{pass_column}
            FROM results r JOIN cases c ON c.id = r.case_id
            WHERE r.run_id = ? ORDER BY r.id"""
        results = []
        columns = self.columns("results")
        has_details = "details_json" in columns
        has_rmse = "rmse" in columns
        has_shape = "shape" in self.columns("cases")
        has_pass = "pass" in self.columns("cases")
        sql = sql.format(shape=", c.shape" if has_shape else "",
                         pass_column=", c.pass AS pass_name" if has_pass else "")
        for row in self.rows(sql, (run_id,)):
            results.append(Result(
                id=row["id"], run_id=row["run_id"], series_key=row["series_key"],
                kernel=row["case_kernel"], status=row["status"], message=row["message"] or "",
                device_id=row["device_id"], device_name=row["device_name"] or "",
                shape=row["shape"] if has_shape else split_series_key(row["series_key"])["shape"],
                distribution=row["distribution"],
                batch=row["batch"], heads_q=row["heads_q"], heads_kv=row["heads_kv"],
                seqlen_q=row["seqlen_q"], seqlen_k=row["seqlen_k"],
                head_dim=row["head_dim_qk"], head_dim_v=row["head_dim_v"],
                dtype=row["input_dtype"], output_dtype=row["output_dtype"],
                fp8_scaling=row["fp8_scaling"], mask=_mask_label(row), layout=row["layout"],
                median_s=_finite(row["median_s"]) if row["timed"] else None,
                cv=_finite(row["cv"]), flops=_finite(row["flops"]),
                flops_per_s=_finite(row["flops_per_s"]),
                fraction_of_peak_flops=_finite(row["fraction_of_peak_flops"]),
                bytes_per_s=_finite(row["bytes_per_s"]),
                fraction_of_peak_bandwidth=_finite(row["fraction_of_peak_bandwidth"]),
                max_abs_error=_finite(row["max_abs_error"]), bound=_finite(row["bound"]),
                rmse=_finite(row["rmse"]) if has_rmse else None,
                checked=bool(row["checked"]),
                extra_memory_bytes=_known_count(row["extra_memory_bytes"]),
                launches=_known_count(row["launches"]), energy_j=_finite(row["energy_j"]),
                predicted_s=_finite(row["predicted_s"]), repro=row["repro"] or "",
                details_json=(row["details_json"] or "") if has_details else "",
                pass_name=row["pass_name"] if has_pass else "fwd"))
        if with_samples and results and "samples" in self.tables:
            by_id = {result.id: result for result in results}
            judged = "clock_suspect" in self.columns("samples")
            for row in self.rows(
                    "SELECT s.result_id, s.time_s, s.sm_clock_mhz, s.clock_reasons"
                    + (", s.clock_suspect" if judged else "") +
                    " FROM samples s JOIN results r ON r.id = s.result_id "
                    "WHERE r.run_id = ? ORDER BY s.result_id, s.repetition", (run_id,)):
                suspect = row["clock_suspect"] if judged else None
                by_id[row["result_id"]].samples.append(
                    (_finite(row["time_s"]), _finite(row["sm_clock_mhz"]),
                     row["clock_reasons"] or "", None if suspect is None else bool(suspect)))
        return results

    def _key_table(self, series_keys):
        """The keys in a temporary table to join with: a year of nightly runs is 700k rows, far
        too many for one IN (...) list of parameters."""
        self.connection.execute(
            "CREATE TEMP TABLE IF NOT EXISTS report_keys (key TEXT PRIMARY KEY)")
        self.connection.execute("DELETE FROM report_keys")
        self.connection.executemany("INSERT OR IGNORE INTO report_keys VALUES (?)",
                                    [(key,) for key in series_keys])

    def history(self, series_keys, up_to_run):
        """Every result of these series up to a run, oldest first: {key: [point, ...]}; a point
        is (run_id, status, median_s or None, device uuid)."""
        history = {key: [] for key in series_keys}
        if not series_keys:
            return history
        # One pass over the (series_key, run_id) index.
        self._key_table(series_keys)
        rows = self.connection.execute(
            "SELECT r.series_key, r.run_id, r.status, r.timed, r.median_s, d.uuid "
            "FROM report_keys k JOIN results r ON r.series_key = k.key "
            "JOIN runs ON runs.id = r.run_id LEFT JOIN devices d ON d.id = r.device_id "
            f"WHERE r.run_id <= ? AND {self._not_a_rerun()} "
            "ORDER BY r.series_key, r.run_id, r.id", (up_to_run,))
        for key, run_id, status, timed, median, uuid in rows:
            history[key].append((run_id, status, _finite(median) if timed else None, uuid or ""))
        return history

    def series_keys_of_run(self, run_id):
        return [row["series_key"] for row in
                self.rows("SELECT DISTINCT series_key FROM results WHERE run_id = ?", (run_id,))]

    # ---- regression bookkeeping (schema version 2 and later) -----------------------------------

    def alerts(self, run_id=None, series_keys=None):
        """Alert rows as dicts (every column the file has); [] without an alerts table."""
        if "alerts" not in self.tables:
            return []
        if series_keys is not None:
            keys = list(series_keys)
            rows = []
            # Chunks keep under SQLite's limit on parameters per statement.
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                marks = ",".join("?" * len(chunk))
                rows += self.rows(f"SELECT * FROM alerts WHERE series_key IN ({marks}) ORDER BY id",
                                  chunk)
        else:
            rows = self.rows("SELECT * FROM alerts WHERE run_id = ? ORDER BY id", (run_id,))
        return [dict(row) for row in rows]

    # ---- the detector's judgement (schema version 6 and later) ---------------------------------

    @property
    def has_analysis(self):
        return "result_analysis" in self.tables

    def run_analysis(self, run_id):
        """{series_key: Analysis} of every series and kernel-wide aggregate the detector judged
        in this run; {} for a run it never judged, or a file older than the table."""
        if not self.has_analysis:
            return {}
        return {row["series_key"]: _analysis(row) for row in self.rows(
            "SELECT * FROM result_analysis WHERE run_id = ? ORDER BY series_key", (run_id,))}

    def run_triage(self, run_id):
        """The triage the analysis decided for this run (schema version 8): {"gate", "fail_on",
        "verdict", "groups", "sight"} with the groups in their order, each with its rows, and what
        the gate can see of each kernel (schema 13; {} before), as the analysis stored them; None
        for a run analysed before it (or never)."""
        if "run_triage" not in self.tables:
            return None
        row = self.connection.execute("SELECT * FROM run_triage WHERE run_id = ?",
                                      (run_id,)).fetchone()
        if row is None:
            return None
        groups = json.loads(row["groups_json"])
        if not isinstance(groups, list):
            raise ReportError(f"{self.path}: run {run_id}'s triage is not a list of groups")
        # What the gate can see of each kernel (schema 13): {"target", "kernels"}; {} before it.
        sight = json.loads(row["detectable_json"]) if "detectable_json" in row.keys() else {}
        return {"gate": row["gate"], "fail_on": row["fail_on"], "verdict": row["verdict"],
                "groups": groups, "sight": sight if isinstance(sight, dict) else {}}

    def analysis_history(self, series_keys, up_to_run):
        """{series_key: {run_id: Analysis}} of these series up to a run: the baseline of every
        point of their history plots."""
        history = {key: {} for key in series_keys}
        if not series_keys or not self.has_analysis:
            return history
        self._key_table(series_keys)
        for row in self.rows("SELECT a.* FROM report_keys k "
                             "JOIN result_analysis a ON a.series_key = k.key "
                             "WHERE a.run_id <= ? ORDER BY a.series_key, a.run_id", (up_to_run,)):
            history[row["series_key"]][row["run_id"]] = _analysis(row)
        return history

    def profiles(self):
        """The newest stored profile of each (kernel, shape, distribution, device), oldest first:
        a dict of its header (kernel, shape, forward_s, median_s, threads, profiled_at, source:
        "phases" on the CPU, "CUPTI" on a GPU; launches: its kernels' count, None for phases) and
        its phases as stored, largest first with "gaps" last (`attnbench profile`, schema 7; kind
        and source since schema 9)."""
        if "profiles" not in self.tables:
            return []
        by_id = {}
        for row in self.rows("SELECT * FROM profiles ORDER BY id"):
            profile = by_id.get(row["profile_id"])
            if profile is None:
                profile = {key: row[key] for key in ("profile_id", "profiled_at", "kernel", "shape",
                                                     "distribution", "device", "forward_s",
                                                     "median_s", "threads", "extra_memory_bytes")}
                profile["source"] = row["source"] if "source" in row.keys() else "phases"
                profile["first_id"], profile["phases"], profile["launches"] = row["id"], [], None
                by_id[row["profile_id"]] = profile
            kind = row["kind"] if "kind" in row.keys() else "phase"
            if kind == "kernel":
                profile["launches"] = (profile["launches"] or 0) + row["count"]
            profile["phases"].append({"name": row["name"], "count": row["count"], "kind": kind,
                                      "total_s": row["total_s"], "share": row["share"]})
        newest = {}
        for profile in by_id.values():
            case = (profile["kernel"], profile["shape"], profile["distribution"], profile["device"])
            order = (profile["profiled_at"], profile["first_id"])
            if case not in newest or order > (newest[case]["profiled_at"], newest[case]["first_id"]):
                newest[case] = profile
        return sorted(newest.values(), key=lambda p: (p["profiled_at"], p["kernel"], p["shape"]))

    def annotations(self):
        if "annotations" not in self.tables:
            return []
        return [dict(row) for row in self.rows("SELECT * FROM annotations ORDER BY created_at, id")]


def parse_json_object(text):
    """details_json and extra_json as a dict; {} when empty or not an object."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
