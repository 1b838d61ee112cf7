"""Test databases written directly with sqlite3, following the schema. The schema itself is read
from harness/store/ (the kMigrations raw strings), so the fixtures always match what the C++
writes, including migrations added after this file was written. What attnbench would store
about a case comes from `attnbench describe` (described.py's Case).

Scenarios:
  cpu_database    CPU kernels only, a short history;
  mixed_database  CPU and synthetic GPU rows (H200), with failures, a crash, a timeout, a status
                  change, a missing case, out-of-memory, alerts, an annotation, clocks and energy;
  year_database   365 nightly runs x 2,000 GPU cases, chip changes, steps, alerts.
Each returns what it inserted, so a test can check that the page shows exactly those values.
From schema version 6 they also write what the detector would store about every analysed run
(result_analysis rows, fixture.analysed): synthetic judgements with fresh random numbers, since
the report shows the stored judgement and never recomputes one."""

import datetime
import math
import pathlib
import re
import sqlite3
import uuid
from dataclasses import dataclass, field

from reports.db import Device  # the report's own record of a device row
# The cases and what attnbench says about them (re-exported: tests use fixtures.Case, ...).
from reports.tests.described import (Case, attnbench_cli, build_label, describe,  # noqa: F401
                                     key_parts)

ROOT = pathlib.Path(__file__).resolve().parents[2]


def migrations():
    """The SQL of each migration step, in order, from harness/store/."""
    text = next(path.read_text() for path in sorted((ROOT / "harness" / "store").glob("*.cpp"))
                if "kMigrations = {" in path.read_text())
    body = text[text.index("kMigrations"):]
    return re.findall(r'R"sql\((.*?)\)sql"', body, flags=re.S)


@dataclass
class Inserted:
    """One result as inserted, for the tests' expectations."""
    id: int
    run_id: int
    case: Case
    device: Device
    status: str
    message: str
    median_s: float | None
    error: float | None
    bound: float | None
    cv: float | None
    series_key: str
    clocks: list = field(default_factory=list)

    @property
    def ratio(self):
        return None if self.error is None else self.error / self.bound


def timestamp(moment):
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class Fixture:
    def __init__(self, path, version=None):
        self.path = pathlib.Path(path)
        self.db = sqlite3.connect(self.path)
        steps = migrations()
        version = len(steps) if version is None else version
        for step in steps[:version]:
            self.db.executescript(step)
        self.db.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
        self.version = version
        self.cases = {}
        self.inserted = []
        self.calibrations = []
        self.analysed = {}  # {(run_id, series_key): the result_analysis row as written}

    def close(self):
        self.db.commit()
        self.db.close()

    def _insert(self, table, row):
        names = ", ".join(row)
        marks = ", ".join("?" * len(row))
        return self.db.execute(f"INSERT INTO {table} ({names}) VALUES ({marks})",
                               list(row.values())).lastrowid

    def run(self, started, suite="nightly", git_sha="a" * 40, minutes=9, status="complete",
            **environment):
        row = {"uuid": str(uuid.uuid4()), "started_at": timestamp(started),
               "finished_at": timestamp(started + datetime.timedelta(minutes=minutes))
               if status == "complete" else None,
               "status": status, "suite": suite,
               "command": f"attnbench run --suite {suite}", "protocol_json": "{}",
               "git_sha": git_sha, "git_dirty": 0, "build_type": "Release", "build_flags": "-O3",
               "compiler": "GNU 12.2.0", "cuda_runtime": "13.0", "cuda_driver": "580.65",
               "cudnn": "compiled 9.19.0, loaded 9.19.0", "blas": "OpenBLAS 0.3.21",
               "host": "ci-runner-1", "cpu": "Intel(R) Xeon(R) Processor", "os": "Linux"}
        row.update(environment)
        return self._insert("runs", row)

    def device(self, run_id, kind, name, chip, ordinal=0, **fields):
        row = {"run_id": run_id, "kind": kind, "ordinal": ordinal, "name": name, "uuid": chip}
        row.update(fields)
        return Device(self._insert("devices", row), kind, ordinal, name, chip)

    def calibration(self, device, kind, dtype, value, measured_at):
        self.calibrations.append((device.uuid, kind, dtype, value))
        self._insert("calibrations", {"device_name": device.name, "device_uuid": device.uuid,
                                      "kind": kind, "dtype": dtype, "value": value,
                                      "details": f"{kind} {dtype} test ceiling",
                                      "measured_at": timestamp(measured_at)})

    def columns(self, table):
        """The table's columns in this file's schema version."""
        return {row[1] for row in self.db.execute(f"PRAGMA table_info({table})")}

    def case_id(self, case):
        """The case's row, as attnbench writes it (described: its key and cases row), once."""
        described = case.case_row
        key = described["case_key"]
        if key not in self.cases:
            have = self.columns("cases")
            self.cases[key] = self._insert(
                "cases", {name: value for name, value in described.items() if name in have})
        return self.cases[key]

    def result(self, run_id, device, case, status="passed", median_s=None, message="",
               error=None, bound=None, cv=None, clocks=(), ceiling=None, samples=True,
               suspect=None, **columns):
        """One result. median_s None: not timed. clocks: one SM clock per sample (GPU);
        suspect: each sample's clock as the analysis judged it (schema 10; None: not judged)."""
        timed = median_s is not None
        row = {"run_id": run_id, "case_id": self.case_id(case), "device_id": device.id,
               "device_name": device.name, "series_key": case.series_key(device.name),
               "status": status, "message": message, "seed": 42,
               "checked": int(error is not None), "max_abs_error": error, "bound": bound,
               "timed": int(timed), "median_s": median_s, "cv": cv,
               "repetitions": 5 if timed else 0, "flops": case.flops, "bytes": case.bytes,
               "repro": f"attnbench check --shape '{case.shape}' --kernels {case.kernel}",
               "launches": -1, "extra_memory_bytes": -1}
        if timed:
            row["flops_per_s"] = case.flops / median_s
            if ceiling:
                row["fraction_of_peak_flops"] = row["flops_per_s"] / ceiling
        row.update(columns)
        result_id = self._insert("results", row)
        if timed and samples:
            sample_clocks = list(clocks) or [None] * 5
            rows = [(result_id, i, median_s, 10, clock, "sw_power_cap" if clock else "")
                    for i, clock in enumerate(sample_clocks)]
            if suspect is not None:
                rows = [row + (int(flag),) for row, flag in zip(rows, suspect)]
            self.db.executemany(
                "INSERT INTO samples (result_id, repetition, time_s, iterations, sm_clock_mhz, "
                "clock_reasons" + (", clock_suspect" if suspect is not None else "") +
                ") VALUES (?, ?, ?, ?, ?, ?" + (", ?" if suspect is not None else "") + ")", rows)
        self.inserted.append(Inserted(result_id, run_id, case, device, status, message, median_s,
                                      error, bound, cv, row["series_key"], list(clocks)))
        return result_id

    def alert(self, run_id, series_key, kind, severity, message, details="{}", **extra):
        row = {"run_id": run_id, "series_key": series_key, "kind": kind, "severity": severity,
               "message": message, "details_json": details}
        row.update(extra)
        return self._insert("alerts", row)

    def profile(self, case, profiled_at, phases, forward_s, median_s, threads=2,
                source="phases", kind="phase", device="cpu"):
        """One stored profile of `case` (`attnbench profile`, schema 9): `phases` as (name, count,
        total_s) with "gaps" among them, each of `kind` but the gaps; shares of their sum, as the
        profiler stores them; from schema 10 the launches the kernel declares (described). Its
        id."""
        profile_id = str(uuid.uuid4())
        whole = sum(total for _, _, total in phases)
        for name, count, total in phases:
            self._insert("profiles", {
                "profile_id": profile_id, "profiled_at": timestamp(profiled_at),
                "kernel": case.kernel, "shape": case.shape, "distribution": case.distribution,
                "device": device, "forward_s": forward_s, "median_s": median_s,
                "threads": threads, "extra_memory_bytes": 1 << 20, "name": name,
                "count": count, "total_s": total, "share": total / whole,
                **({"kind": "gaps" if name == "gaps" else kind, "source": source}
                   if self.version >= 9 else {}),
                **({"expected_launches": case.expected.get("launches")}
                   if self.version >= 10 else {})})
        return profile_id

    def annotation(self, series_key, kind, reason, created, **extra):
        row = {"series_key": series_key, "kind": kind, "reason": reason,
               "created_at": timestamp(created)}
        row.update(extra)
        return self._insert("annotations", row)

    @property
    def stores_analysis(self):
        return self.version >= 6

    def analysis(self, run_id, series_key, verdict="ok", **columns):
        """One result_analysis row (schema version 6) as the detector writes it: the key's parts
        as columns (scope kernel for a kernel-wide key: described by attnbench), NULL for what
        it did not measure.
        Recorded in self.analysed; a no-op on older schemas, which have no such table."""
        if not self.stores_analysis:
            return None
        row = {"run_id": run_id, "series_key": series_key, **key_parts(series_key),
               "verdict": verdict, "accuracy_verdict": "ok", "baseline_runs": 0,
               "chip_changed": 0, "detector_version": 2}
        row.update(columns)
        self._insert("result_analysis", row)
        self.db.execute("UPDATE runs SET analysed_at = started_at WHERE id = ?", (run_id,))
        self.analysed[(run_id, series_key)] = row
        return row

    def judged(self, run_id, series_key, median_s, rng, change=None, verdict="ok", level=None,
               **columns):
        """A series' row with a synthetic baseline: a random level and spread, the center
        placed so that `change` (random and small when None) is what this median shows against
        it, threshold = max(3 %, 4 spreads) as the detector's rule. median_s None (not timed,
        missing): a random center near `columns['center_s']` or none at all."""
        level = rng.gauss(0.0, 0.01) if level is None else level
        if change is None and median_s is not None:
            change = rng.gauss(0.0, 0.004)
        if median_s is not None:
            columns.setdefault("center_s", median_s / math.exp(level) / (1 + change))
        center = columns.get("center_s")
        if center is not None:
            spread = columns.setdefault("spread_s", center * rng.uniform(0.005, 0.012))
            columns.setdefault("threshold", max(0.03, 4 * spread / center))
            columns.setdefault("baseline_runs", 10)
        return self.analysis(run_id, series_key, verdict, change_fraction=change,
                             level=level if median_s is not None else None, **columns)


START = datetime.datetime(2026, 1, 1, 2, 0, 0)


def _time(rng, case, rate):
    """A median time for a case at about `rate` FLOP/s, with fresh random variation."""
    return case.flops / (rate * rng.uniform(0.7, 1.3))


def cpu_database(path, rng, runs=12, analysed=True):
    """CPU kernels only, `runs` nightly runs of the smoke suite, no GPU, no alerts. analysed:
    every run has the detector's rows (too little history for the first five); False: the
    runs were never judged (attnbench regressions never ran)."""
    fixture = Fixture(path)
    kernels = ("cpu.flash", "cpu.naive", "cpu.masked_fused")
    cases = [Case(k, batch=2, heads_q=4, heads_kv=4, seqlen_q=s, seqlen_k=s, dtype=dtype, mask=mask)
             for k in kernels for s in (128, 256, 512) for dtype in ("fp32", "bf16")
             for mask in ("none", "causal")]
    describe(cases, ["Intel(R) Xeon(R) Processor"])
    base_rate = {case: rng.uniform(5e9, 60e9) for case in cases}
    ceiling = 300e9
    for index in range(runs):
        started = START + datetime.timedelta(days=index)
        run_id = fixture.run(started, suite="smoke", git_sha=f"{index:040x}")
        cpu = fixture.device(run_id, "cpu", "Intel(R) Xeon(R) Processor", "cpu:ci", threads=2)
        fixture.calibration(cpu, "gemm", "fp32", ceiling, started)
        fixture.calibration(cpu, "copy", "bytes", 38e9, started)
        level = rng.gauss(0.0, 0.01)
        for case in cases:
            median_s = case.flops / (base_rate[case] * rng.uniform(0.98, 1.02))
            bound = rng.uniform(1e-4, 1e-2)
            result_id = fixture.result(run_id, cpu, case, median_s=median_s,
                                       error=bound * rng.uniform(0.01, 0.9),
                                       bound=bound, cv=rng.uniform(0.002, 0.08), ceiling=ceiling,
                                       extra_memory_bytes=case.seqlen_q * case.seqlen_k * 16
                                       if "naive" in case.kernel else 4096 * case.head_dim)
            if not analysed:
                continue
            key = case.series_key(cpu.name)
            if index < 5:
                fixture.analysis(run_id, key, "insufficient_history", result_id=result_id,
                                 level=level, baseline_runs=index)
            else:
                fixture.judged(run_id, key, median_s, rng, level=level, result_id=result_id,
                               baseline_runs=min(index, 10),
                               baseline_run_id=run_id - rng.randint(1, min(index, 10)))
    fixture.close()
    return fixture


# GPU ceilings of the synthetic H200 (FLOP/s per dtype), roughly its dense tensor figures.
H200_CEILINGS = {"fp16": 800e12, "bf16": 800e12, "e4m3": 1500e12}


def mixed_database(path, rng, version=None, compact=False):
    """Two runs (two commits) on a CPU and a synthetic H200. The second run holds, besides
    random passing results: a failed check, a crash, a timeout, a passed -> skipped change, a
    series that went missing, an out-of-memory case, two alerts and an annotation. compact: the
    same special cases among a quarter of the GPU shapes (one head dim, no GQA), for tests that
    build a report per schema version."""
    fixture = Fixture(path, version)
    gpu_kernels = ("cudnn.sdpa", "cuda.flash2", "cuda.naive")
    head_dims, gqas = ((128,), (1,)) if compact else ((64, 128), (1, 4))
    gpu_cases = [Case(k, batch=16384 // s, heads_q=16, heads_kv=16 // gqa, seqlen_q=s, seqlen_k=s,
                      head_dim=d, dtype="bf16", mask=mask)
                 for k in gpu_kernels for s in (512, 1024, 2048, 4096) for d in head_dims
                 for mask in ("none", "causal_br") for gqa in gqas]
    cpu_cases = [Case(k, batch=2, heads_q=4, heads_kv=4, seqlen_q=s, seqlen_k=s, dtype="fp32",
                      mask=mask)
                 for k in ("cpu.flash", "cpu.naive") for s in (128, 256)
                 for mask in ("none", "causal")]
    describe(gpu_cases + cpu_cases, ["NVIDIA H200", "Intel(R) Xeon(R) Processor"])
    rates = {"cudnn.sdpa": 450e12, "cuda.flash2": 300e12, "cuda.naive": 60e12}
    def pick(kernel):
        return rng.choice([c for c in gpu_cases if c.kernel == kernel and c.seqlen_k < 4096])

    special = {"failed": pick("cuda.flash2"), "crashed": pick("cuda.naive")}
    special["timeout"] = next(c for c in gpu_cases if c.kernel == "cuda.naive" and c.seqlen_k < 4096
                              and c != special["crashed"])
    special["skipped"] = next(c for c in gpu_cases
                              if c.kernel == "cuda.flash2" and c.seqlen_k < 4096
                              and c != special["failed"])
    special["missing"] = next(c for c in gpu_cases
                              if c.kernel == "cudnn.sdpa" and c.seqlen_k == 1024)
    special["regression"] = next(c for c in gpu_cases
                                 if c.kernel == "cudnn.sdpa" and c.seqlen_k == 2048)
    oom = [c for c in gpu_cases if c.kernel == "cuda.naive" and c.seqlen_k == 4096]
    # A sample the analysis judged suspect a little below its series' usual clock (far below
    # by its tolerance, not by the 10 % the report once applied to the run's median).
    dip = next(c for c in gpu_cases if c.kernel == "cudnn.sdpa" and c.seqlen_k == 512)
    messages = {
        "failed": "max |out - ref| 0.8 exceeds the bound 0.031",
        "crashed": "worker died: signal 11 (Segmentation fault)",
        "timeout": "no answer within 60 s; worker killed",
        "skipped": "unsupported: head_dim 96 not instantiated",
    }
    for index, sha in enumerate(("1" * 40, "2" * 40)):
        started = START + datetime.timedelta(days=index)
        last = index == 1
        run_id = fixture.run(started, git_sha=sha, cuda_driver="580.65" if not last else "580.82")
        cpu = fixture.device(run_id, "cpu", "Intel(R) Xeon(R) Processor", "cpu:ci", threads=2)
        gpu = fixture.device(run_id, "cuda", "NVIDIA H200", "GPU-1111" if not last else "GPU-2222",
                             sm_version=90, sm_count=132, clock_mhz=1980, power_limit_w=700)
        fixture.calibration(cpu, "gemm", "fp32", 300e9, started)
        for dtype, value in H200_CEILINGS.items():
            fixture.calibration(gpu, "gemm", dtype, value * rng.uniform(0.9, 1.0), started)
        fixture.calibration(gpu, "copy", "bytes", 4.2e12, started)
        for case in cpu_cases:
            bound = rng.uniform(1e-6, 1e-5)
            fixture.result(run_id, cpu, case, median_s=_time(rng, case, 30e9), ceiling=300e9,
                           error=bound * rng.uniform(0.05, 0.9), bound=bound,
                           cv=rng.uniform(0.002, 0.05), extra_memory_bytes=4096 * case.seqlen_k)
        for case in gpu_cases:
            if last and case == special["missing"]:
                continue
            bound = rng.uniform(1e-3, 3e-2)
            clocks = [rng.uniform(1950, 1985) for _ in range(5)]
            # What each kernel declares, as a healthy run measures it; cuDNN declares nothing.
            columns = {
                "error": bound * rng.uniform(0.05, 0.9), "bound": bound,
                "cv": rng.uniform(0.001, 0.03), "clocks": clocks, "ceiling": H200_CEILINGS["bf16"],
                "extra_memory_bytes": case.expected.get("extra_memory_bytes", 1 << 20),
                "launches": case.expected.get("launches", 1)}
            if last and fixture.version >= 10:  # the analysis's judgement of each sample
                columns["suspect"] = [False] * len(clocks)
            median_s = _time(rng, case, rates[case.kernel])
            columns["energy_j"] = median_s * rng.uniform(400, 690)
            if case.kernel == "cuda.flash2":
                columns["predicted_s"] = median_s * rng.uniform(0.3, 0.9)
            status, message = "passed", ""
            if last:
                for what in ("failed", "crashed", "timeout", "skipped"):
                    if case == special[what]:
                        status, message = what, messages[what]
                if case == special["regression"]:
                    median_s *= 1.25
                    columns["clocks"] = clocks[:4] + [1400.0]  # one throttled repetition
                    if "suspect" in columns:
                        columns["suspect"] = [False] * 4 + [True]
                if case == dip and "suspect" in columns:
                    columns["clocks"] = clocks[:2] + [1850.0] + clocks[3:]
                    columns["suspect"] = [False, False, True, False, False]
            if case in oom:
                status, message = "skipped", "out of memory: scores need 9 GiB"
            if status == "failed":
                # A failed check is never timed (harness/case_runner.cpp).
                median_s = None
                columns = {"error": bound * rng.uniform(2, 30), "bound": bound,
                           "extra_memory_bytes": columns["extra_memory_bytes"]}
            if status in ("crashed", "timeout", "skipped"):
                median_s, columns = None, {}
            fixture.result(run_id, gpu, case, status=status, message=message, median_s=median_s,
                           **columns)
        if last and fixture.version >= 2:
            # As harness/history.cpp writes them: severity error/warning/info, and from schema
            # version 4 the verdict (state), the change and the environment's differences.
            v4 = fixture.version >= 4
            key = special["regression"].series_key("NVIDIA H200")
            fixture.alert(run_id, key, "performance", "error",
                          "25.0 % slower than the baseline (threshold 3.0 %)",
                          '{"center_s": 0.001, "threshold": 0.03}',
                          **(dict(state="confirmed", change_fraction=0.25, chip_changed=1,
                                  environment="chip GPU-1111 -> GPU-2222; driver 580.65 -> 580.82")
                             if v4 else {}))
            other = special["failed"].series_key("NVIDIA H200")
            fixture.alert(run_id, other, "performance", "warning",
                          "6.1 % slower than the baseline (threshold 3.0 %)", '{"threshold": 0.03}',
                          **(dict(state="suspected", change_fraction=0.061) if v4 else {}))
            if v4:
                crashed = special["crashed"].series_key("NVIDIA H200")
                fixture.alert(run_id, crashed, "status", "error",
                              "passed -> crashed: " + messages["crashed"], state="crashed")
            fixture.annotation(special["skipped"].series_key("NVIDIA H200"), "expected_change",
                               "flash2 drops head dim 96 until the new tiling lands",
                               started - datetime.timedelta(hours=1))
        _judge_mixed_run(fixture, rng, run_id, special, last)
    fixture.special = special
    fixture.suspect_samples = 2 if fixture.version >= 10 else 0
    fixture.close()
    return fixture


def _judge_mixed_run(fixture, rng, run_id, special, last):
    """What the detector would store about a run of mixed_database (schema version 6): the
    first run has no history (insufficient_history); the second is judged against the first,
    its rows agreeing with the alerts written for it."""
    if not fixture.stores_analysis:
        return
    mine = [r for r in fixture.inserted if r.run_id == run_id]
    earlier = {r.series_key: r for r in fixture.inserted if r.run_id == run_id - 1}
    gpu_key = {what: case.series_key("NVIDIA H200") for what, case in special.items()}
    alerted = {gpu_key["regression"]: ("confirmed", 0.25), gpu_key["failed"]: ("suspected", 0.061)}
    for result in mine + ([] if not last else
                          [earlier[gpu_key["missing"]]]):  # the missing series: no result
        key = result.series_key
        here = result.run_id == run_id
        if not last:
            fixture.analysis(run_id, key, "insufficient_history", result_id=result.id)
            continue
        before = earlier[key]
        verdict, change = alerted.get(key, ("ok", None))
        columns = dict(result_id=result.id if here else None, baseline_run_id=before.run_id,
                       accuracy_verdict="ok")
        if key == gpu_key["regression"]:
            columns["chip_changed"] = 1
        median_s = result.median_s if here else None
        if median_s is None and before.median_s is not None:
            columns["center_s"] = before.median_s * rng.uniform(0.97, 1.03)
        if not here:
            columns["status_change"] = "passed -> missing"
        if fixture.version >= 10:  # what the analysis judged of the result's conditions
            columns["environment"] = (f"driver 580.65 -> 580.82 (commits {'1' * 10}.."
                                      f"{'2' * 10}; baseline run {before.run_id})") if here else ""
            columns["noisy"] = int(rng.random() < 0.2) if result.median_s is not None else None
        fixture.judged(run_id, key, median_s, rng, change=change, verdict=verdict, **columns)
    # The kernel-wide aggregates: no center, no baseline run of their own.
    groups = {r.case.kernel_wide_key(r.device.name) for r in mine}
    for group in sorted(groups):
        fixture.analysis(run_id, group, "ok" if last else "insufficient_history",
                         threshold=0.03 if last else None,
                         change_fraction=rng.gauss(0, 0.005) if last else None)


def year_database(path, rng, runs=365, cases=2000):
    """A synthetic year of nightly runs: `cases` GPU results per run, the chip changing about
    every 30 runs, a few true steps with their alerts, a baseline reset. Samples are stored for
    the last two runs only: the report reads samples of the run it shows (by result id), so
    older runs' samples would only make the file slower to write."""
    kernels = ["cudnn.sdpa", "cudnn.sdpa_fp8", "cuda.naive", "cuda.naive_cublas",
               "cuda.masked_fused", "cuda.flash1", "cuda.flash2", "cuda.flash3_ws",
               "cuda.flash3", "cuda.flash3_fp8"]
    shapes = []
    for seqlen in (512, 1024, 2048, 4096, 8192, 16384):
        for head_dim in (64, 128, 256):
            for dtype in ("fp16", "bf16"):
                for mask in ("none", "causal_br"):
                    for gqa in (1, 4, 8):
                        shapes.append(dict(batch=16384 // seqlen, heads_q=2048 // head_dim,
                                           heads_kv=2048 // head_dim // gqa, seqlen_q=seqlen,
                                           seqlen_k=seqlen, head_dim=head_dim, dtype=dtype,
                                           mask=mask))
    per_kernel = cases // len(kernels)
    all_cases = [Case(kernel, **shape) for kernel in kernels for shape in shapes[:per_kernel]]
    describe(all_cases, ["NVIDIA H200"])
    # Throughput that grows with seqlen and head dim, each kernel at its own fraction of the
    # ceiling, so the figures look like a real matrix.
    speed = {kernel: rng.uniform(0.1, 0.75) for kernel in kernels}
    rate = {case: 800e12 * speed[case.kernel]
            * (0.5 + 0.5 * min(1.0, (case.seqlen_k / 512) ** 0.3 - 1))
            * (case.head_dim / 256) ** 0.2 * rng.uniform(0.95, 1.05) for case in all_cases}
    # True steps of 5-15 %: most in the second half of the year, two in the last two runs so
    # that the shown run has a suspected and a confirmed regression to triage.
    stepped = rng.sample(all_cases, 12)
    steps = {case: (rng.randrange(runs // 2, runs - 2), rng.uniform(1.05, 1.15))
             for case in stepped[:10]}
    steps[stepped[10]] = (runs - 2, rng.uniform(1.05, 1.15))
    steps[stepped[11]] = (runs - 1, rng.uniform(1.05, 1.15))
    fixture = Fixture(path)
    db = fixture.db
    level = 1.0
    chip = "GPU-0000"
    result_rows, sample_rows, analysis_rows = [], [], []
    next_result_id = 1
    for index in range(runs):
        started = START + datetime.timedelta(days=index)
        run_id = fixture.run(started, git_sha=f"{index // 3:040x}")
        if index % 30 == 0:
            chip = f"GPU-{index:04d}-{rng.randrange(1 << 16):04x}"
            level = rng.uniform(0.97, 1.03)
        gpu = fixture.device(run_id, "cuda", "NVIDIA H200", chip, sm_version=90, sm_count=132,
                             clock_mhz=1980, power_limit_w=700)
        if index % 30 == 0:
            for dtype, value in H200_CEILINGS.items():
                fixture.calibration(gpu, "gemm", dtype, value, started)
        run_effect = level * rng.gauss(1.0, 0.015)
        run_level = math.log(run_effect)  # what the detector would measure as the run's level
        for case in all_cases:
            base_s = case.flops / rate[case]
            noise = rng.gauss(1.0, 0.01)
            median_s = base_s * run_effect * noise
            step_run, factor = steps.get(case, (runs + 1, 1.0))
            if index >= step_run:
                median_s *= factor
            # The detector's row: too little history for the first five runs; the step's own
            # two runs tripped (their alerts below); later runs are judged against a baseline
            # that has taken the step in.
            key = case.series_key(gpu.name)
            row = dict(verdict="insufficient_history", center_s=None, spread_s=None,
                       threshold=None, change_fraction=None)
            if index >= 5:
                center = base_s * (factor if index >= step_run + 2 else 1.0)
                change = median_s / (center * run_effect) - 1
                if index in (step_run, step_run + 1):
                    change = factor - 1
                    center = median_s / (run_effect * factor)
                spread = center * 0.008
                row = dict(verdict="suspected" if index == step_run else
                           "confirmed" if index == step_run + 1 else "ok",
                           center_s=center, spread_s=spread, threshold=max(0.03, 4 * 0.008),
                           change_fraction=change)
            analysis_rows.append((
                run_id, key, "series", case.kernel, case.shape, case.distribution, gpu.name,
                build_label(), next_result_id, row["verdict"], "ok", row["center_s"], row["spread_s"],
                row["threshold"], row["change_fraction"], run_level, min(index, 10),
                run_id - 1 if index >= 5 else None, 0, 2, timestamp(started)))
            if index == runs - 1:
                fixture.analysed[(run_id, key)] = row
            bound = 0.03
            flops_per_s = case.flops / median_s
            result_rows.append((next_result_id, run_id, fixture.case_id(case), gpu.id, gpu.name,
                                case.series_key(gpu.name), "passed", "", 42, 1,
                                bound * 0.2, bound, 1, median_s, rng.uniform(0.002, 0.02), 5,
                                case.flops, flops_per_s, flops_per_s / H200_CEILINGS[case.dtype],
                                -1, 1))
            if index >= runs - 2:
                sample_rows += [(next_result_id, i, median_s, 10, rng.uniform(1950, 1985),
                                 "sw_power_cap") for i in range(5)]
            if index == step_run or index == step_run + 1:
                fixture.alert(run_id, case.series_key(gpu.name), "performance",
                              "warning" if index == step_run else "error",
                              f"{(factor - 1) * 100:.1f} % slower than the baseline",
                              state="suspected" if index == step_run else "confirmed",
                              change_fraction=factor - 1)
            next_result_id += 1
    db.executemany(
        "INSERT INTO results (id, run_id, case_id, device_id, device_name, series_key, status, "
        "message, seed, checked, max_abs_error, bound, timed, median_s, cv, repetitions, flops, "
        "flops_per_s, fraction_of_peak_flops, extra_memory_bytes, launches) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", result_rows)
    db.executemany("INSERT INTO samples (result_id, repetition, time_s, iterations, sm_clock_mhz, "
                   "clock_reasons) VALUES (?, ?, ?, ?, ?, ?)", sample_rows)
    if fixture.stores_analysis:
        db.executemany(
            "INSERT INTO result_analysis (run_id, series_key, scope, kernel, shape, distribution, "
            "device_name, build, result_id, verdict, accuracy_verdict, center_s, spread_s, "
            "threshold, change_fraction, level, baseline_runs, baseline_run_id, chip_changed, "
            "detector_version, analysed_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", analysis_rows)
        db.execute("UPDATE runs SET analysed_at = finished_at")
    reset_case = rng.choice(list(steps))
    fixture.annotation(reset_case.series_key("NVIDIA H200"), "baseline_reset",
                       "new tiling accepted",
                       START + datetime.timedelta(days=steps[reset_case][0] + 3))
    fixture.steps = steps
    fixture.close()
    return fixture
