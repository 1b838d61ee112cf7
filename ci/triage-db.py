#!/usr/bin/env python3
"""ci/triage-db.py OUT.sqlite [--seed N] [--schema-version N] [--attnbench BINARY]

Writes a synthetic database to triage: 17 nightly runs of the smoke suite on one CPU host, at the
latest schema version of harness/store (reports/tests/fixtures.py; --schema-version for an older
binary), results only: no alerts, nothing analysed.
The cases' stored form comes from `attnbench describe` (reports/tests/fixtures.py: --attnbench's
BINARY, else ATTNBENCH_CLI, else build/bin/attnbench).
With --attnbench, then judges every run in order (BINARY regressions --run unanalysed) and prints
the last run's report. The same rows for the same seed; the default seed is the one of docs/report.md's screenshot.

Contents (run ids are fixed: runs are inserted in order into an empty file):
  runs 1-17   nightly runs of the smoke suite, one `selection` for all, a new commit each night, on
              one "AMD EPYC 7763 64-Core Processor" ("cpu"): what smoke runs there, 9 CPU kernels
              x 29 shapes, the 4 FP8 kernels skipping the 11 fp32 shapes (fp16/bf16 only), so 217
              timed + 44 skipped results a run; a shared per-run effect (lognormal, 1.5 %),
              per-series noise (0.5 %), 5 samples per timed result.
  (a) cpu.masked_inplace  +10 % on every shape in run 17 only.
  (b) cpu.flash           noisy (1.5 % per-series noise, 3x the others') in every run, unchanged
                          as a whole; in run 17 one shape (fp16, mask=window(32,16)) +12 %.
  (c) cpu.masked_fused    b=1,...,dtype=bf16,mask=window(64,0) passed in runs 1-16, failed its
                          check in run 17 (max error above the bound, not timed)."""

import argparse
import datetime
import math
import os
import pathlib
import random
import re
import subprocess
import sys
import types
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reports.tests import fixtures  # noqa: E402
from reports.tests.fixtures import Case, Fixture  # noqa: E402

DEFAULT_SEED = 20261205
RUNS = 17
START = datetime.datetime(2026, 11, 18, 2, 0, 0)
CPU_NAME = "AMD EPYC 7763 64-Core Processor"
# `attnbench list kernels` order (a run's order within a shape), with each kernel's FLOP/s on a
# full 128x128 problem: medians of a few ms, naive slowest, flash fastest of the fp32 paths.
RATES = {"cpu.naive": 3.7e9, "cpu.masked_outofplace": 7.5e9, "cpu.masked_inplace": 8.5e9,
         "cpu.masked_fused": 9.5e9, "cpu.flash": 11e9, "cpu.flash_fp8": 5.5e9,
         "cpu.flash_fp8_block": 5e9, "cpu.flash_fp8_incoherent": 4.8e9,
         "cpu.flash_fp8_block_incoherent": 4.5e9}
SLOWED, SLOWED_FACTOR = "cpu.masked_inplace", 1.10
# The noisy kernel's trip threshold is 4 of its spreads: at 1.5 % noise its +12 % shape tripped
# for each of 86 seeds tried; at 2 % it missed for 3 of 30, at 2.5 % for 7 (and runs 1-16 warned
# more often).
NOISY, NOISY_NOISE, NOISY_FACTOR = "cpu.flash", 0.015, 1.12
NOISY_SHAPE = "b=2,hq=4,hkv=4,sq=128,sk=128,d=64,dtype=fp16,mask=window(32,16)"
FAILED = ("cpu.masked_fused", "b=1,hq=4,hkv=2,sq=128,sk=256,d=64,dtype=bf16,mask=window(64,0)")
SELECTION = "run suite=smoke shapes= kernels= filter= devices=all dist= shard="


def smoke_shapes():
    """suites/smoke.toml's matrices expanded as the harness does (a list's entries in the order
    written, dtype before mask; batch 1 and heads_kv = heads_q unless given)."""
    def grid(dtypes, masks, **fixed):
        return [dict(fixed, dtype=d, mask=m) for d in dtypes for m in masks]
    square = dict(batch=2, heads_q=4, heads_kv=4, seqlen_q=128, seqlen_k=128)
    return (grid(("fp32", "fp16", "bf16"), ("none", "causal", "causal_br", "window(32,16)",
                                             "padding"), **square)
            + grid(("fp32", "bf16"), ("causal_br", "window(64,0)"), heads_q=4, heads_kv=2,
                   seqlen_q=128, seqlen_k=256)
            + grid(("fp32", "fp16"), ("causal_br",), heads_q=4, heads_kv=4, seqlen_q=256,
                   seqlen_k=128)
            + grid(("fp32", "bf16"), ("none",), batch=2, heads_q=4, heads_kv=1, seqlen_q=1,
                   seqlen_k=256)
            + grid(("fp32", "bf16"), ("none", "causal"), distribution="large_logits", **square)
            + [dict(batch=1, heads_q=4, heads_kv=4, seqlen_q=128, seqlen_k=128, dtype="bf16",
                    mask="causal_br", distribution="outliers", layout=layout)
               for layout in ("bshd", "bhsd")])


def protocol(seed, cases):
    return ('{"breaker":false,"case_timeout_seconds":60,"cases":%d,"full_check_work":134217728.0,'
            '"max_case_seconds":0.5,"min_stable_repetitions":5,"mode":"run","repetitions":5,'
            '"seed":%d,"stable_relative_stddev":0.005,"target_repetition_seconds":0.02,'
            '"timers":{"cpu":"host steady_clock around one forward"}}' % (cases, seed))


def build(path, seed, version=None):
    rng, ids = random.Random(seed), random.Random(seed ^ 0x5EED)  # uuids and shas: own stream
    # Fixture.run calls uuid.uuid4(): deterministic run uuids, so a seed gives the same file
    # (restored after, for whoever imports fixtures next in this process).
    fixtures.uuid = types.SimpleNamespace(
        uuid4=lambda: uuid.UUID(int=ids.getrandbits(128), version=4))
    try:
        return _write(path, rng, ids, version)
    finally:
        fixtures.uuid = uuid


def _write(path, rng, ids, version):
    path = pathlib.Path(path)
    for suffix in ("", "-wal", "-shm", "-journal"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    fixture = Fixture(path, version=version)
    cases = [Case(kernel, head_dim=64, **shape) for shape in smoke_shapes() for kernel in RATES]
    fixtures.describe(cases, [CPU_NAME])  # one attnbench call for every case's stored form
    # A synthetic work model for the times: flash kernels skip masked tiles (Case.flops counts
    # the visible pairs), the others score every key of the full matrix.
    work = {c: c.flops if "flash" in c.kernel else 4.0 * c.batch * c.heads_q * c.seqlen_q
            * c.seqlen_k * c.head_dim for c in cases}
    base = {c: work[c] / RATES[c.kernel] * rng.uniform(0.8, 1.2) for c in cases}
    at = START
    for index in range(RUNS):
        started = START + datetime.timedelta(days=index)
        last = index == RUNS - 1
        run_id = fixture.run(started, suite="smoke", git_sha=f"{ids.getrandbits(160):040x}",
                             minutes=1, command="attnbench run --suite smoke",
                             protocol_json=protocol(1000 + index, len(cases)), selection=SELECTION,
                             host="ci-runner-1", cpu=CPU_NAME, cuda_driver="none")
        assert run_id == index + 1, run_id
        cpu = fixture.device(run_id, "cpu", CPU_NAME, "cpu:ci-runner-1", threads=4,
                             memory_bytes=16 << 30, l2_bytes=512 << 10)
        if index == 0:
            fixture.calibration(cpu, "gemm", "fp32", 140e9, started)
            fixture.calibration(cpu, "copy", "bytes", 20e9, started)
        effect = math.exp(rng.gauss(0.0, 0.015))
        for case in cases:
            at = max(at, started) + datetime.timedelta(milliseconds=150)
            created = dict(created_at=fixtures.timestamp(at), seed=run_id * 1000 + 7)
            if "fp8" in case.kernel and case.dtype == "fp32":
                fixture.result(run_id, cpu, case, status="skipped", samples=False,
                               message="dtype fp32 not supported (fp16, bf16)", **created)
                continue
            bound = rng.uniform(1e-5, 1e-4) if case.dtype == "fp32" else rng.uniform(5e-3, 3e-2)
            if last and (case.kernel, case.shape) == FAILED:
                error = bound * rng.uniform(10, 20)
                where = re.sub(r"[^A-Za-z0-9.=-]", "_", f"{case.kernel}__{case.shape}__normal")
                fixture.result(run_id, cpu, case, status="failed", error=error, bound=bound,
                               samples=False, **created,
                               message=f"max|out-ref| {error:.3g} > bound {bound:.3g} at b=0,"
                                       f"h={rng.randrange(4)},row={rng.randrange(128)},"
                                       f"d={rng.randrange(64)} [dumped to results/failures/"
                                       f"run{run_id}/{where}]")
                continue
            noise = NOISY_NOISE if case.kernel == NOISY else 0.005
            median_s = base[case] * effect * math.exp(rng.gauss(0.0, noise))
            if last and case.kernel == SLOWED:
                median_s *= SLOWED_FACTOR
            if last and case.kernel == NOISY and case.shape == NOISY_SHAPE:
                # Exactly +12 %, without that night's noise: whether it trips is then up to
                # its baseline's spread alone.
                median_s = base[case] * effect * NOISY_FACTOR
            times = [median_s * (1 + rng.gauss(0.0, 0.004)) for _ in range(5)]
            times = [t * median_s / sorted(times)[2] for t in times]  # their median is median_s
            mean = sum(times) / 5
            stddev = math.sqrt(sum((t - mean) ** 2 for t in times) / 4)
            iterations = max(1, round(0.02 / median_s))
            result_id = fixture.result(
                run_id, cpu, case, median_s=median_s, error=bound * rng.uniform(0.05, 0.5),
                bound=bound, cv=stddev / mean, ceiling=140e9, samples=False, mean_s=mean,
                min_s=min(times), max_s=max(times), stddev_s=stddev,
                iterations_per_repetition=iterations, forwards_timed=5 * iterations,
                timing_stop="stable" if stddev / mean < 0.005 else "repetitions",
                extra_memory_bytes=4 * case.seqlen_q * case.seqlen_k * 4, **created)
            fixture.db.executemany(
                "INSERT INTO samples (result_id, repetition, time_s, iterations, sm_clock_mhz, "
                "clock_reasons) VALUES (?, ?, ?, ?, NULL, '')",
                [(result_id, i, t, iterations) for i, t in enumerate(times)])
    fixture.close()
    return len(cases)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the SQLite file to write (replaced)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help="the noise seed (default %(default)s)")
    parser.add_argument("--schema-version", type=int, metavar="N",
                        help="write schema version N (default: the latest in harness/store; an "
                             "older binary reads only up to its own)")
    parser.add_argument("--attnbench", metavar="BINARY",
                        help="then judge every run with BINARY regressions --run unanalysed")
    arguments = parser.parse_args(argv)
    if arguments.attnbench:  # the fixtures describe cases with the same binary
        os.environ["ATTNBENCH_CLI"] = str(pathlib.Path(arguments.attnbench).resolve())
    cases = build(arguments.out, arguments.seed, arguments.schema_version)
    print(f"triage-db: {arguments.out}: seed {arguments.seed}, runs 1-{RUNS} x {cases} results; "
          f"run {RUNS}: {SLOWED} {SLOWED_FACTOR - 1:+.0%} on every shape, {NOISY} (noisy) "
          f"{NOISY_FACTOR - 1:+.0%} on {NOISY_SHAPE}, "
          f"{FAILED[0]} {FAILED[1]} failed")
    if not arguments.attnbench:
        return 0
    judged = subprocess.run([arguments.attnbench, "regressions", "--db", arguments.out,
                             "--run", "unanalysed"], capture_output=True, text=True)
    # Exit 1 is the verdict (something gates), not a failure of the analysis.
    if judged.returncode not in (0, 1):
        sys.stderr.write(judged.stdout + judged.stderr)
        return judged.returncode if judged.returncode > 1 else 2  # < 0: killed by a signal
    lines = judged.stdout.splitlines()
    start = max((i for i, line in enumerate(lines) if line.startswith("regressions of run")),
                default=0)
    print("\n".join(lines[start:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
