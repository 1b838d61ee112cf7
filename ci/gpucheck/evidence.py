"""The evidence a gpu-check run leaves in its OUTDIR, read for the judges of claims.py.

  Evidence(outdir)   evidence.json (steps, run ids, sanitizer reports), attnbench.sqlite, ctest's
                     JUnit XML and the timer tests' GoogleTest XML. Any of them may be missing or
                     partial (an interrupted run): a reader answers "nothing" rather than raising;
  step_gap(e, part)  why the step running a part of the check measured nothing, or None."""

from __future__ import annotations

import json
import re
import sqlite3
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

# What gpu-check leaves in OUTDIR besides the files evidence.json names.
EVIDENCE_FILE = "evidence.json"
DATABASE_FILE = "attnbench.sqlite"
DEFAULT_BUDGET_S = 300.0

# Step names of gpu-check (ci/gpucheck/plan.py), and the keys of evidence.json's "runs" (run
# ids in the database) of the attnbench runs they make.
SETUP, FIGURES, CTEST, SANITIZER, SMOKE = "setup", "figures", "ctest", "sanitizer", "gpu-smoke"
EXPERIMENT = "experiment"  # the run of an experiment's rounds (gpucheck/experiment.py)
PROFILE = "profile"  # `attnbench profile` of the masking study: rows in the profiles table
RUN_KEYS = {FIGURES: "figures", SMOKE: "smoke", SANITIZER: "sanitizer", "energy": "energy"}
# Parts of the check that run inside another step: the figures step calibrates first, measures
# energy with the figure cases (runs "energy" is the figures run) and runs the GpuTimer tests
# alone on the GPU (run.py). A part is judged by its host step, or by a step of its own name
# when a run records one.
CALIBRATE, ENERGY, TIMER = "calibrate", "energy", "timer"
HOST_STEPS = {CALIBRATE: FIGURES, ENERGY: FIGURES, TIMER: FIGURES}
# A step that ran: its data can be judged whether the step passed or failed (a ctest step that
# failed on one kernel still proves the others).
STEP_RAN = ("pass", "fail")


# ---- reading the run's files -------------------------------------------------------------------


def _number(value) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def in_house_kernel_names(kernels: list[dict], correctness_suite: str | None = None) -> list[str]:
    """The in-house CUDA kernels of a registry as `attnbench list kernels --json` states it, in
    its order: those the emulated device runs from their own source (backend emu, not
    unavailable: the registry builds both from one list, kernels/cuda/cuda_kernels.h), not their
    variants (cuda.flash3[stages=2]: `attnbench tune` runs those); of one correctness suite if
    given."""
    return [k["name"] for k in kernels
            if k.get("backend") == "emu" and not k.get("unavailable") and not k.get("variant_of")
            and correctness_suite in (None, k.get("correctness_suite"))]


@dataclass(frozen=True)
class Step:
    name: str
    result: str  # pass, fail, 'not reached: budget', 'disabled: <reason>', interrupted
    seconds: float | None = None
    predicted_s: float | None = None
    detail: str = ""

    @staticmethod
    def from_json(entry: dict) -> "Step":
        return Step(str(entry.get("name", "?")), str(entry.get("result", "?")),
                    _number(entry.get("seconds")), _number(entry.get("predicted_s")),
                    str(entry.get("detail") or ""))

    @property
    def ran(self) -> bool:
        return self.result in STEP_RAN


@dataclass
class TestOutcome:
    name: str
    status: str  # passed, failed, skipped
    message: str = ""
    properties: dict = field(default_factory=dict)


# testcase attributes GoogleTest and ctest always write; any other attribute is a property that
# an older GoogleTest recorded as an attribute.
_STANDARD_ATTRIBUTES = {"name", "classname", "status", "result", "time", "timestamp", "file",
                        "line", "value_param", "type_param"}


def _first_failure_line(case: ElementTree.Element) -> str:
    """GoogleTest's first assertion message in the test's output: ctest's JUnit <failure> only
    says "Failed", the reason is in <system-out> after a "file:line: Failure" line."""
    output = (case.findtext("system-out") or "").splitlines()
    for index, line in enumerate(output):
        if line.rstrip().endswith("Failure"):
            message = []
            for text in output[index + 1:index + 3]:  # the assertion and its streamed note
                if not text.strip() or text.startswith("["):  # "[  FAILED  ]": the test's end
                    break
                message.append(text.strip())
            return " ".join(message)
    return ""


def _outcome_of(case: ElementTree.Element, name: str) -> TestOutcome:
    failure = case.find("failure")
    if failure is None:
        failure = case.find("error")
    skipped = case.find("skipped")
    properties = {k: v for k, v in case.attrib.items() if k not in _STANDARD_ATTRIBUTES}
    for prop in case.iter("property"):
        if prop.get("name"):
            properties[prop.get("name")] = prop.get("value", "")
    if failure is not None:
        message = failure.get("message") or (failure.text or "")
        detail = _first_failure_line(case)
        if detail and detail not in message:
            message = f"{message}: {detail}" if message else detail
        return TestOutcome(name, "failed", " ".join(message.split()), properties)
    not_run = case.get("status") in ("notrun", "disabled") or case.get("result") == "skipped"
    if skipped is not None or not_run:
        message = "" if skipped is None else (skipped.get("message") or skipped.text or "")
        return TestOutcome(name, "skipped", " ".join(message.split()), properties)
    return TestOutcome(name, "passed", "", properties)


def test_name(name: str) -> str:
    """A test's name without the comment gtest_discover_tests may leave in the ctest name of a
    value-parameterized test ('.../cudnn_sdpa_shard1of4  # GetParam() = cudnn.sdpa shard 1/4')."""
    return re.sub(r"\s+#.*", "", name).strip()


def read_test_xml(path) -> dict[str, TestOutcome]:
    """Test outcomes of a JUnit XML file (ctest --output-junit) or a GoogleTest XML file, by full
    test name. ctest writes the ctest name as both name and classname; GoogleTest splits it into
    classname ("GpuTimer") and name, so each outcome is stored under `classname.name`, and under
    `name` alone when no other test has it."""
    outcomes = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        name, classname = test_name(case.get("name", "")), test_name(case.get("classname", ""))
        full = name if classname in ("", name) else f"{classname}.{name}"
        outcome = _outcome_of(case, full)
        outcomes[full] = outcome
        outcomes.setdefault(name, outcome)
    return outcomes


def merge_outcome(old: TestOutcome | None, new: TestOutcome) -> TestOutcome:
    """One test seen in two files (ctest's JUnit and the test's own XML): a failure anywhere
    fails it; properties (only GoogleTest's XML has them) are kept from both."""
    if old is None:
        return new
    rank = {"failed": 2, "passed": 1, "skipped": 0}
    winner = old if rank[old.status] >= rank[new.status] else new
    return TestOutcome(winner.name, winner.status, winner.message,
                       {**old.properties, **new.properties})


class Database:
    """attnbench.sqlite, read only. A query on a missing table or column (a file an interrupted
    run left, an older schema) answers no rows and notes the problem instead of raising."""

    def __init__(self, path: Path):
        self.path = path
        self.problems: list[str] = []
        self.connection = sqlite3.connect(path)
        self.connection.row_factory = sqlite3.Row
        self.connection.execute("PRAGMA query_only = ON")
        self._cache: dict = {}

    def query(self, sql: str, *args) -> list[dict]:
        try:
            return [dict(row) for row in self.connection.execute(sql, args)]
        except sqlite3.Error as error:
            note = f"{self.path.name}: {error}"
            if note not in self.problems:
                self.problems.append(note)
            return []

    def columns(self, table: str) -> set[str]:
        return {row["name"] for row in self.query(f"PRAGMA table_info({table})")}

    def results(self, run_id: int | None) -> list[dict]:
        """A run's results with their case's columns and their device's kind, in order."""
        if run_id is None:
            return []
        key = ("results", run_id)
        if key not in self._cache:
            # The case's shape text as attnbench stored it (cases.shape, schema 10).
            shape = ", c.shape AS shape" if "shape" in self.columns("cases") else ""
            # The case's pass (cases.pass, schema 11; every older case a forward).
            shape += ", c.pass AS pass" if "pass" in self.columns("cases") else ", 'fwd' AS pass"
            self._cache[key] = self.query(
                "SELECT r.*, c.kernel, c.batch, c.heads_q, c.heads_kv, c.seqlen_q, c.seqlen_k,"
                " c.head_dim_qk, c.head_dim_v, c.input_dtype, c.output_dtype, c.fp8_scaling,"
                " c.mask_kind, c.window_left, c.window_right, c.layout, d.kind AS device_kind"
                + shape +
                " FROM results r JOIN cases c ON c.id = r.case_id"
                " LEFT JOIN devices d ON d.id = r.device_id"
                " WHERE r.run_id = ? ORDER BY r.id", run_id)
        return self._cache[key]

    def samples(self, run_id: int | None) -> list[dict]:
        if run_id is None:
            return []
        return self.query("SELECT s.* FROM samples s JOIN results r ON r.id = s.result_id"
                          " WHERE r.run_id = ? ORDER BY s.id", run_id)

    def run(self, run_id: int | None) -> dict | None:
        rows = self.query("SELECT * FROM runs WHERE id = ?", run_id) if run_id else []
        return rows[0] if rows else None

    def cupti_profiles(self) -> dict[str, dict]:
        """The newest forward CUPTI recorded of each kernel (`attnbench profile` on a GPU,
        schema 9): {kernel: {"launches": its kernels' count, "expected_launches": what the
        kernel declares (schema 10; None: none stored), "forward_s", "median_s", "shape"}}."""
        if "source" not in self.columns("profiles"):
            return {}
        profiles: dict[str, dict] = {}
        for row in self.query("SELECT * FROM profiles WHERE source = 'CUPTI' ORDER BY id"):
            newest = profiles.get(row["kernel"])
            if newest is None or newest["profile_id"] != row["profile_id"]:
                newest = profiles[row["kernel"]] = {
                    "profile_id": row["profile_id"], "launches": 0, "shape": row["shape"],
                    "expected_launches": row.get("expected_launches"),
                    "forward_s": row["forward_s"], "median_s": row["median_s"]}
            if row["kind"] == "kernel":
                newest["launches"] += row["count"]
        return profiles

    def gpu_devices(self, run_ids: Iterable[int]) -> list[dict]:
        ids = sorted(set(run_ids))
        if not ids:
            return []
        marks = ", ".join("?" * len(ids))
        return self.query(f"SELECT * FROM devices WHERE run_id IN ({marks}) AND kind != 'cpu'"
                          " ORDER BY run_id, ordinal", *ids)

    def calibrations(self) -> list[dict]:
        return self.query("SELECT * FROM calibrations ORDER BY measured_at, id")


class Evidence:
    """Everything a gpu-check run left in OUTDIR, each part optional."""

    def __init__(self, outdir):
        self.outdir = Path(outdir)
        self.problems: list[str] = []  # files that exist but could not be read
        self.data = self._read_json(self.outdir / EVIDENCE_FILE)
        data = self.data or {}
        self.steps: dict[str, Step] = {}
        for entry in data.get("steps") or []:
            if isinstance(entry, dict):
                step = Step.from_json(entry)
                self.steps[step.name] = step
        interrupted = data.get("interrupted")
        if interrupted and not isinstance(interrupted, dict):
            interrupted = {"signal": str(interrupted), "step": "?"}
        self.interrupted: dict | None = interrupted or None
        self.gpu_line = str(data.get("gpu") or "")
        # The GPU's device model as attnbench named it (`list devices --json`: "h100", "h200"),
        # "" for a card no model describes or a run that recorded none (before 2026-12-06).
        self.device_model = str(data.get("device_model") or "")
        # The registry as `attnbench list kernels --json` gave it at setup (name, backend,
        # correctness_suite, unavailable, origin); [] for a run that recorded none.
        self.kernels = [k for k in data.get("kernels") or [] if isinstance(k, dict)]
        self.bundle = data.get("bundle") if isinstance(data.get("bundle"), dict) else {}
        self.runs = {key: value for key, value in (data.get("runs") or {}).items()
                     if isinstance(value, int)}
        self.sanitizer = data.get("sanitizer") if isinstance(data.get("sanitizer"), dict) else {}
        budgets = data.get("max_case_seconds")
        self.max_case_seconds = budgets if isinstance(budgets, dict) else {}
        self.budget_s = _number(data.get("budget_s")) or DEFAULT_BUDGET_S
        self.rehearsal = bool(data.get("rehearsal"))  # gpu-check --rehearse: no GPU at all
        # run.py rewrites evidence.json and summary.md after every step and sets "finished" at
        # the end: false without an interruption is a run still going, or one killed outright.
        self.finished = bool(data.get("finished", True))
        self.db = self._open_database(self.outdir / str(data.get("database") or DATABASE_FILE))
        self.tests: dict[str, TestOutcome] = {}
        self.test_files_read: list[str] = []
        for key in ("ctest_junit", "timer_xml"):
            if data.get(key):
                self._read_tests(self.outdir / str(data[key]))

    # -- reading ---------------------------------------------------------------------------------

    def _read_json(self, path: Path) -> dict | None:
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            self.problems.append(f"{path.name}: {error}")
            return None
        if not isinstance(data, dict):
            self.problems.append(f"{path.name}: not a JSON object")
            return None
        return data

    def _open_database(self, path: Path) -> Database | None:
        if not path.exists():
            return None  # never create one: a missing database is evidence too
        try:
            return Database(path)
        except sqlite3.Error as error:
            self.problems.append(f"{path.name}: {error}")
            return None

    def _read_tests(self, path: Path) -> None:
        """One XML file, or every *.xml of a folder (GTEST_OUTPUT=xml:DIR/ writes one file per
        test process)."""
        files = sorted(path.glob("*.xml")) if path.is_dir() else [path]
        for file in files:
            if not file.exists():
                continue  # the step that writes it did not get that far
            try:
                outcomes = read_test_xml(file)
            except (OSError, ElementTree.ParseError) as error:
                self.problems.append(f"{file.name}: {error}")
                continue
            self.test_files_read.append(file.name)
            for name, outcome in outcomes.items():
                self.tests[name] = merge_outcome(self.tests.get(name), outcome)

    # -- the run ---------------------------------------------------------------------------------

    @property
    def found(self) -> bool:
        return self.data is not None

    def unfinished(self) -> str:
        """'the run had not finished (last step recorded: ctest)', or '' when it had (or was
        interrupted, which says more)."""
        if not self.found or self.finished or self.interrupted:
            return ""
        last = list(self.steps)[-1] if self.steps else "none"
        return f"the run had not finished (last step recorded: {last})"

    def interruption(self) -> str:
        """'interrupted (signal TERM) during step ctest', or '' when the run was not."""
        if not self.interrupted:
            return ""
        signal = self.interrupted.get("signal") or "?"
        return f"interrupted (signal {signal}) during step {self.interrupted.get('step') or '?'}"

    def run_id(self, step: str) -> int | None:
        return self.runs.get(RUN_KEYS.get(step, step))

    def results(self, step: str) -> list[dict]:
        return self.db.results(self.run_id(step)) if self.db else []

    def gpu_results(self, step: str, status: str | None = "passed") -> list[dict]:
        """The step's results on a GPU (any device not recorded as the CPU), of one status."""
        return [r for r in self.results(step) if r.get("device_kind") != "cpu"
                and (status is None or r["status"] == status)]

    def gpu_devices(self) -> list[dict]:
        """The GPUs of this run's attnbench runs, once per chip."""
        if not self.db:
            return []
        seen, devices = set(), []
        for device in self.db.gpu_devices(self.runs.values()):
            if device["uuid"] not in seen:
                seen.add(device["uuid"])
                devices.append(device)
        return devices

    def in_house_kernels(self, correctness_suite: str | None = None) -> list[str]:
        """The in-house CUDA kernels of the registry setup recorded (in_house_kernel_names)."""
        return in_house_kernel_names(self.kernels, correctness_suite)

    def device_name(self) -> str:
        """The GPU model: nvidia-smi's first line ("GPU 0: NVIDIA H200 (UUID: ...)") when the
        run recorded it, else the database's devices."""
        named = re.match(r"GPU \d+: (.*?)(?: \(UUID: .*\))?\s*$", self.gpu_line)
        if named:
            return named.group(1)
        if self.gpu_line:
            return self.gpu_line
        return ", ".join(sorted({d["name"] for d in self.gpu_devices()}))

    def case_budget(self, step: str) -> float | None:
        """max_case_seconds of a step's run: evidence.json's, else the run's protocol."""
        for key in (step, RUN_KEYS.get(step, step)):
            value = _number(self.max_case_seconds.get(key))
            if value is not None:
                return value
        run = self.db.run(self.run_id(step)) if self.db else None
        try:
            return _number(json.loads(run["protocol_json"]).get("max_case_seconds"))
        except (TypeError, ValueError, KeyError, AttributeError):
            return None

    def gpus_interleaved(self, step: str) -> bool | None:
        """Whether a step's run timed its GPU cases round-robin (the protocol's interleaved_gpus,
        stored since issue 38); None for a run stored before it or no run."""
        run = self.db.run(self.run_id(step)) if self.db else None
        try:
            value = json.loads(run["protocol_json"]).get("interleaved_gpus")
        except (TypeError, ValueError, KeyError, AttributeError):
            return None
        return value if isinstance(value, bool) else None

    def total_seconds(self) -> float:
        """The run's duration: evidence.json's elapsed_s when written, else its steps' sum."""
        for key in ("elapsed_s", "seconds"):
            recorded = _number((self.data or {}).get(key))
            if recorded is not None:
                return recorded
        return sum(step.seconds or 0 for step in self.steps.values())

    def close(self) -> None:
        """Lets go of the database, so the next step's attnbench writes to it unhindered."""
        if self.db:
            self.db.connection.close()

    def problems_all(self) -> list[str]:
        return self.problems + (self.db.problems if self.db else [])


def host_step(evidence: Evidence, part: str) -> str:
    """The step that ran `part` of the check: a step of that name if the run has one, else the
    step hosting it (calibrate -> figures)."""
    return part if part in evidence.steps else HOST_STEPS.get(part, part)


def step_reason(evidence: Evidence, part: str) -> str | None:
    """Why the step running `part` measured nothing ('not reached: budget', 'disabled:
    <reason>', ...), or None when it ran (passed or failed)."""
    name = host_step(evidence, part)
    step = evidence.steps.get(name)
    if step is None:
        if evidence.interrupted:
            return f"not run: {evidence.interruption()}"
        if not evidence.found:
            return f"unknown: no {EVIDENCE_FILE}"
        return f"not run (not in {EVIDENCE_FILE})"
    if step.ran:
        return None
    if step.result == "interrupted":
        signal = (evidence.interrupted or {}).get("signal")
        return "interrupted" + (f" (signal {signal})" if signal else "")
    return step.result


def step_gap(evidence: Evidence, part: str) -> str | None:
    """'step ctest not reached: budget', or None when the step ran."""
    reason = step_reason(evidence, part)
    return None if reason is None else f"step {host_step(evidence, part)} {reason}"


def steps_gaps(evidence: Evidence, parts: Iterable[str]) -> str:
    """The gaps of several steps, those with the same reason together:
    'steps figures, gpu-smoke not run: interrupted (signal TERM) during step ctest'."""
    by_reason: dict[str, list[str]] = {}
    for part in parts:
        reason, name = step_reason(evidence, part), host_step(evidence, part)
        if reason is not None and name not in by_reason.get(reason, []):
            by_reason.setdefault(reason, []).append(name)
    return "; ".join(f"step {steps[0]} {reason}" if len(steps) == 1
                     else f"steps {', '.join(steps)} {reason}"
                     for reason, steps in by_reason.items())
