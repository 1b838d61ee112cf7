#!/usr/bin/env python3
"""ci/behaviour-db.py OUT.sqlite [--seed N]

Writes the fixed-seed database of the behaviour check (ci/behaviour-check.sh): the same rows for
the same seed, at schema version 5 whatever migrations later binaries add (they
migrate it forward when they open it). Results only: no alerts, no run levels, nothing analysed;
the detector writes those.

It reuses reports/tests/fixtures.py (Fixture(path, version=5)); the migrations are read from
whichever harness/**/*.cpp defines kMigrations, so the script survives the store moving.

Contents (run ids are fixed: runs are inserted in order into an empty file):
  runs 1-30   nightly runs of the smoke suite, one `selection` for all, a new commit each night;
              each on one CPU ("cpu", 4 kernels x 8 shapes) and one NVIDIA H200 ("cuda",
              2 kernels x 6 shapes); a shared per-run, per-device effect (lognormal, 1.5 %),
              per-series noise (0.5 %), 5 samples per timed result.
  (a) cpu.flash      +20 % on every shape from run 20 on; an expected_change annotation for each
                     of its series, from_run_id 20.
  (b) cpu.naive      +10 % on every shape from run 26 on; no annotation.
  (c) run 28         cpu.masked_inplace b=2,...,mask=causal crashed (not timed, a message).
  (d) run 30         cpu.masked_fused b=2,...,mask=padding missing (31 CPU results, run 29 had
                     32).
  (e) run 31         a rerun of run 30 (rerun_of = 30) re-measuring 4 cpu.naive shapes (still
                     10 % slower) and 12 controls of the other CPU kernels."""

import argparse
import datetime
import hashlib
import math
import pathlib
import random
import re
import sqlite3
import sys
import types
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reports.tests import fixtures  # noqa: E402
from reports.tests.fixtures import Case, Fixture, timestamp  # noqa: E402

DEFAULT_SEED = 20261203
SCHEMA_VERSION = 5
RUNS = 30
START = datetime.datetime(2026, 11, 1, 2, 0, 0)

CPU_NAME = "Intel(R) Xeon(R) Processor"
GPU_NAME = "NVIDIA H200"
CPU_KERNELS = ("cpu.flash", "cpu.naive", "cpu.masked_fused", "cpu.masked_inplace")
GPU_KERNELS = ("cudnn.sdpa", "cuda.flash2")
EXPECTED_KERNEL, EXPECTED_FROM, EXPECTED_FACTOR = "cpu.flash", 20, 1.20
STEP_KERNEL, STEP_FROM, STEP_FACTOR = "cpu.naive", 26, 1.10
CRASH_RUN, MISSING_RUN = 28, 30
SELECTION = "run suite=smoke shapes= kernels= filter= devices=all dist= shard="
RERUN_SELECTION = "run suite= shapes= kernels= filter= devices=cpu dist= shard="


def migrations():
    """The SQL of each migration step, in order, from the harness source that defines
    kMigrations (harness/store.cpp today; found by search so a move does not break this)."""
    candidates = sorted((ROOT / "harness").rglob("*.cpp"))
    for path in candidates:
        text = path.read_text(errors="replace")
        found = re.search(r"\bkMigrations\b[^;{]*=\s*\{", text)
        if not found:
            continue
        steps = re.findall(r'R"sql\((.*?)\)sql"', text[found.start():], flags=re.S)
        if steps:
            return steps
    sys.exit(f"behaviour-db: no harness/**/*.cpp under {ROOT} defines kMigrations")


def cpu_cases():
    shapes = [dict(dtype="fp32", mask=mask)
              for mask in ("none", "causal", "causal_br", "window(32,16)", "padding")]
    shapes += [dict(dtype="bf16", mask=mask) for mask in ("none", "causal")]
    cases = []
    for kernel in CPU_KERNELS:
        for shape in shapes:
            cases.append(Case(kernel, batch=2, heads_q=4, heads_kv=4, seqlen_q=128, seqlen_k=128,
                              head_dim=64, **shape))
        cases.append(Case(kernel, batch=1, heads_q=4, heads_kv=2, seqlen_q=128, seqlen_k=256,
                          head_dim=64, dtype="fp32", mask="causal_br"))
    return cases


def gpu_cases():
    return [Case(kernel, batch=16384 // s, heads_q=16, heads_kv=16, seqlen_q=s, seqlen_k=s,
                 head_dim=128, dtype="bf16", mask=mask)
            for kernel in GPU_KERNELS for s in (1024, 2048, 4096) for mask in ("none", "causal_br")]


def protocol(seed, timers):
    return ('{"breaker":false,"case_timeout_seconds":60.0,"cases":%d,"full_check_work":1e9,'
            '"max_case_seconds":0.5,"min_stable_repetitions":5,"mode":"run","repetitions":5,'
            '"seed":%d,"stable_relative_stddev":0.005,"target_repetition_seconds":0.02,'
            '"timers":{%s}}' % (len(cpu_cases()) + len(gpu_cases()), seed, timers))


CPU_TIMERS = '"cpu":"host steady_clock (CPU)"'
GPU_TIMERS = '"cuda:0":"CUDA events around each forward (L2 flushed)"'


class Writer:
    def __init__(self, fixture, rng):
        self.fixture = fixture
        self.rng = rng
        self.at = None

    def result(self, run_id, device, case, median_s, *, status="passed", message="",
               ceiling=None, bound=None, gpu=False):
        """One result with five samples spread around median_s (their median is median_s)."""
        rng = self.rng
        if bound is None:
            bound = rng.uniform(1e-5, 1e-4) if case.dtype == "fp32" else rng.uniform(5e-3, 3e-2)
        error = bound * rng.uniform(0.05, 0.5)
        self.at += datetime.timedelta(seconds=1)
        columns = dict(created_at=timestamp(self.at))
        if median_s is None:
            self.fixture.result(run_id, device, case, status=status, message=message,
                                samples=False, **columns)
            return
        spread = rng.uniform(0.002, 0.006)
        deviations = [rng.gauss(0.0, spread) for _ in range(5)]
        middle = sorted(deviations)[2]
        times = [median_s * (1 + d - middle) for d in deviations]
        mean = sum(times) / 5
        stddev = math.sqrt(sum((t - mean) ** 2 for t in times) / 4)
        iterations = max(1, round(0.02 / median_s))
        clocks = [round(rng.uniform(1965, 1980)) for _ in range(5)] if gpu else [None] * 5
        columns.update(mean_s=mean, min_s=min(times), max_s=max(times), stddev_s=stddev,
                       iterations_per_repetition=iterations, forwards_timed=5 * iterations,
                       timing_wall_s=round(sum(times) * iterations + 0.01, 6),
                       timing_stop="stable" if stddev / mean < 0.005 else "repetitions",
                       seed=run_id * 1000 + 7)
        if gpu:
            columns["sm_clock_mhz"] = sorted(clocks)[2]
        result_id = self.fixture.result(run_id, device, case, status=status, message=message,
                                        median_s=median_s, error=error, bound=bound,
                                        cv=stddev / mean, ceiling=ceiling, samples=False,
                                        extra_memory_bytes=16384 if not gpu else 1 << 20,
                                        **columns)
        self.fixture.db.executemany(
            "INSERT INTO samples (result_id, repetition, time_s, iterations, sm_clock_mhz, "
            "clock_reasons) VALUES (?, ?, ?, ?, ?, ?)",
            [(result_id, i, t, iterations, c, "sw_power_cap" if c else "")
             for i, (t, c) in enumerate(zip(times, clocks))])


def build(path, seed):
    rng = random.Random(seed)
    ids = random.Random(seed ^ 0x5EED)  # uuids and shas: their own stream
    # Deterministic run uuids (Fixture.run calls uuid.uuid4()) and migrations found by search.
    fixtures.uuid = types.SimpleNamespace(
        uuid4=lambda: uuid.UUID(int=ids.getrandbits(128), version=4))
    fixtures.migrations = migrations

    path = pathlib.Path(path)
    for suffix in ("", "-wal", "-shm", "-journal"):
        candidate = path.with_name(path.name + suffix)
        if candidate.exists():
            candidate.unlink()
    fixture = Fixture(path, version=SCHEMA_VERSION)
    writer = Writer(fixture, rng)
    cpus, gpus = cpu_cases(), gpu_cases()
    fixtures.describe(cpus + gpus, [CPU_NAME, GPU_NAME])  # one attnbench call (ATTNBENCH_CLI)
    chip = "GPU-" + str(uuid.UUID(int=ids.getrandbits(128), version=4))
    cpu_ceiling, gpu_ceiling = 120e9, 780e12
    # Each series' own speed: FLOP/s.
    kernel_rate = {"cpu.flash": 22e9, "cpu.naive": 6e9, "cpu.masked_fused": 14e9,
                   "cpu.masked_inplace": 12e9, "cudnn.sdpa": 520e12, "cuda.flash2": 360e12}
    rate = {case: kernel_rate[case.kernel] * rng.uniform(0.8, 1.2) for case in cpus + gpus}
    crashed = next(c for c in cpus if c.kernel == "cpu.masked_inplace" and c.mask == "causal")
    missing = next(c for c in cpus if c.kernel == "cpu.masked_fused" and c.mask == "padding")
    shas = [f"{ids.getrandbits(160):040x}" for _ in range(RUNS)]

    def factor(case, run_id):
        if case.kernel == EXPECTED_KERNEL and run_id >= EXPECTED_FROM:
            return EXPECTED_FACTOR
        if case.kernel == STEP_KERNEL and run_id >= STEP_FROM:
            return STEP_FACTOR
        return 1.0

    for index in range(RUNS):
        started = START + datetime.timedelta(days=index)
        run_seed = 1000 + index
        run_id = fixture.run(started, suite="smoke", git_sha=shas[index], minutes=7,
                             command="attnbench run --suite smoke",
                             protocol_json=protocol(run_seed, CPU_TIMERS + "," + GPU_TIMERS),
                             selection=SELECTION, cudnn_frontend="1.16.0", cublas="13.0.2")
        assert run_id == index + 1, run_id
        if run_id == EXPECTED_FROM:
            for case in cpus:
                if case.kernel == EXPECTED_KERNEL:
                    fixture.db.execute(
                        "INSERT INTO annotations (series_key, kind, reason, created_at, "
                        "from_run_id) VALUES (?, 'expected_change', ?, ?, ?)",
                        (case.series_key(CPU_NAME),
                         "cpu.flash: exact tail handling costs ~20 % on tiny shapes (accepted)",
                         timestamp(started - datetime.timedelta(hours=3)), EXPECTED_FROM))
        cpu = fixture.device(run_id, "cpu", CPU_NAME, "cpu:ci-runner-1", threads=2,
                             memory_bytes=8 << 30)
        gpu = fixture.device(run_id, "cuda", GPU_NAME, chip, sm_version=90, sm_count=132,
                             memory_bytes=143771336704, l2_bytes=52428800, clock_mhz=1980,
                             power_limit_w=700, ecc=1, persistence=1)
        if index == 0:
            fixture.calibration(cpu, "gemm", "fp32", cpu_ceiling, started)
            fixture.calibration(cpu, "copy", "bytes", 18e9, started)
            fixture.calibration(gpu, "gemm", "bf16", gpu_ceiling, started)
            fixture.calibration(gpu, "copy", "bytes", 4.2e12, started)
        writer.at = started
        gpu_effect = math.exp(rng.gauss(0.0, 0.015))
        for case in gpus:
            median_s = case.flops / rate[case] * gpu_effect * rng.gauss(1.0, 0.005)
            writer.result(run_id, gpu, case, median_s, ceiling=gpu_ceiling, gpu=True)
        cpu_effect = math.exp(rng.gauss(0.0, 0.015))
        for case in cpus:
            median_s = (case.flops / rate[case] * cpu_effect * rng.gauss(1.0, 0.005)
                        * factor(case, run_id))
            if run_id == MISSING_RUN and case == missing:
                continue
            if run_id == CRASH_RUN and case == crashed:
                writer.result(run_id, cpu, case, None, status="crashed",
                              message="worker died: signal 11 (Segmentation fault); "
                                      "a fresh worker took the next case")
                continue
            writer.result(run_id, cpu, case, median_s, ceiling=cpu_ceiling)

    # (e) The rerun of the last run, minutes later on the same host: 4 of the slowed cpu.naive
    # shapes and 12 controls spread over the other CPU kernels (as `attnbench rerun` picks them).
    started = START + datetime.timedelta(days=RUNS - 1, minutes=12)
    rerun_id = fixture.run(started, suite="", git_sha=shas[-1], minutes=2,
                           command=f"attnbench rerun --suspects --run {RUNS} "
                                   "--db results/attnbench.sqlite",
                           protocol_json=protocol(2000, CPU_TIMERS), selection=RERUN_SELECTION,
                           rerun_of=RUNS, cudnn_frontend="1.16.0", cublas="13.0.2")
    cpu = fixture.device(rerun_id, "cpu", CPU_NAME, "cpu:ci-runner-1", threads=2,
                         memory_bytes=8 << 30)
    suspects = [c for c in cpus if c.kernel == STEP_KERNEL][:4]
    others = [c for c in cpus if c.kernel != STEP_KERNEL and c != missing]
    controls = others[::2][:12]
    writer.at = started
    effect = math.exp(rng.gauss(0.0, 0.015))
    for case in suspects + controls:
        median_s = case.flops / rate[case] * effect * rng.gauss(1.0, 0.005) * factor(case, RUNS)
        writer.result(rerun_id, cpu, case, median_s, ceiling=cpu_ceiling)
    fixture.close()
    return dict(runs=RUNS, rerun=rerun_id, chip=chip, crashed=crashed, missing=missing,
                suspects=suspects)


def content_digest(path):
    """Row counts per table and a SHA-256 over every table's rows (by rowid) and the schema: the
    same for the same seed, so a changed database (reports/tests/fixtures.py changed under this
    script, say) is told apart from a changed behaviour."""
    db = sqlite3.connect(path)
    digest = hashlib.sha256()
    counts = []
    tables = [name for (name,) in db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    for (sql,) in db.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name"):
        digest.update(sql.encode())
    for table in tables:
        rows = db.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
        counts.append(f"{table} {len(rows)}")
        for row in rows:
            digest.update(repr(row).encode())
    db.close()
    return ", ".join(counts), digest.hexdigest()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the SQLite file to write (replaced)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help="the noise seed (default %(default)s)")
    arguments = parser.parse_args(argv)
    made = build(arguments.out, arguments.seed)
    print(f"behaviour-db: {arguments.out}: schema v{SCHEMA_VERSION}, seed {arguments.seed}, "
          f"runs 1-{made['runs']} + rerun {made['rerun']} of run {made['runs']}; "
          f"{EXPECTED_KERNEL} +{round((EXPECTED_FACTOR - 1) * 100)} % from run {EXPECTED_FROM} "
          f"(expected_change), {STEP_KERNEL} +{round((STEP_FACTOR - 1) * 100)} % from run "
          f"{STEP_FROM}, crash in run {CRASH_RUN} ({made['crashed'].kernel} "
          f"{made['crashed'].shape}), missing in run {MISSING_RUN} ({made['missing'].kernel} "
          f"{made['missing'].shape})")
    counts, digest = content_digest(arguments.out)
    print(f"behaviour-db: rows: {counts}")
    print(f"behaviour-db: content sha256 {digest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
