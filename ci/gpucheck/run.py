"""Runs the planned steps of gpu-check inside a budget and leaves a summary whatever happens.

Each step starts only when what is left of the budget covers at least half its prediction
(predictions are pessimistic leads), and may use all that is left; a step that does not fit is
recorded "not reached: budget", a step whose pre-check failed "disabled: <reason>". After every
step evidence.json and summary.md are rewritten, so a run killed outright (SIGKILL) still leaves
a summary up to its last finished step; on SIGTERM or SIGINT the running command's process group
is stopped, the interruption is recorded with the step it hit, and the summary is written.
"""

import contextlib
import datetime
import io
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from gpucheck import experiment, plan, setup
from gpucheck.summary import write_summary

# Kept back from the budget for the final summary (a few database queries and a file).
SUMMARY_RESERVE_S = 5.0
# A step starts when the budget left covers this fraction of its prediction.
START_FRACTION = 0.5
# A stopped command gets this long between SIGTERM and SIGKILL.
KILL_GRACE_S = 5.0
# The logs and failure dumps travel as one archive: the device tool brings back at most eight
# files of 16 MiB, and summary.md must be among them. A file larger than this stays out of the
# archive (named in skipped.txt inside it): a failing 16k-token case dumps 100 MB tensors.
LOGS_ARCHIVE = "logs.tar.gz"
ARCHIVED_FILE_LIMIT = 4 << 20
ARCHIVE_LIMIT = 12 << 20  # uncompressed: the archive stays under the 16 MiB a file may have
# PtxConformance's inputs and both sides' outputs (a few hundred files, ~60 MB) travel as at most
# CONFORMANCE_ARCHIVES archives of CONFORMANCE_ARCHIVE_LIMIT bytes each (uncompressed: random bits
# barely compress), the instructions most worth a second look first: the mma forms, whose
# rounding the emulator has to match, then the smallest wgmma forms, then the rest by size.
CONFORMANCE_DIR = "ptx-conformance"
CONFORMANCE_ARCHIVES = 2
CONFORMANCE_ARCHIVE_LIMIT = 15 << 20
CONFORMANCE_FIRST = ("manifest.json", "mma_bf16_", "mma_f16_", "wgmma_m64n64k16_bf16_ss_bkmajor_",
                     "wgmma_m64n64k16_f16_ss_bkmajor_", "wgmma_m64n64k16_bf16_rs_bnmajor_")
# What an earlier run left in a reused OUTDIR: judged as this run's evidence otherwise.
EARLIER_RUN_FILES = ("attnbench.sqlite", "attnbench.sqlite-wal", "attnbench.sqlite-shm",
                     "evidence.json", "summary.md", "ctest.xml", "timer.xml", LOGS_ARCHIVE,
                     *(f"{CONFORMANCE_DIR}-{n}.tar.gz" for n in range(1, CONFORMANCE_ARCHIVES + 1)))
EARLIER_RUN_FOLDERS = ("logs", "failures", CONFORMANCE_DIR)


def add_listing(archive, name, lines):
    """A text file `name` in the open tar `archive`, one line each: what was left out of it."""
    listing = io.BytesIO("".join(f"{line}\n" for line in lines).encode())
    info = tarfile.TarInfo(name)
    info.size = len(listing.getvalue())
    archive.addfile(info, listing)


class Interrupted(Exception):
    pass


class Check:
    """One run of gpu-check: its budget, its evidence, the command running now."""

    def __init__(self, root, outdir, budget_s, case_filter="", rehearse=False):
        self.root = Path(root)
        self.outdir = Path(outdir).resolve()  # commands run there: paths must not be relative
        self.outdir.mkdir(parents=True, exist_ok=True)
        remove_earlier_run(self.outdir)
        self.budget_s = budget_s
        self.case_filter = case_filter
        self.rehearse = rehearse
        self.started = time.monotonic()
        self.db = self.outdir / "attnbench.sqlite"
        self.logs = self.outdir / "logs"  # one log per step; packed into LOGS_ARCHIVE at the end
        self.logs.mkdir(exist_ok=True)
        self.finishing = False  # the final summary and archive are being written
        self.claims = self.root / "GPU-CLAIMS.md"
        self.child = None
        self.current_step = None
        self.environment = dict(os.environ)
        self.bundle = None  # setup.Bundle once set up
        self.tools = {}  # ctest, compute-sanitizer: their paths, found in setup
        self.prechecks = {}  # name -> "ok ..." or the reason it is missing
        self.evidence = {
            "started_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "budget_s": budget_s, "finished": False, "interrupted": None, "gpu": "",
            "device_model": "",
            "bundle": {}, "git_sha": "", "prechecks": self.prechecks, "steps": [], "runs": {},
            # Each run's max_case_seconds is read from its stored protocol, not repeated here.
            "ctest_junit": "ctest.xml", "timer_xml": "timer.xml", "sanitizer": {},
            "rehearsal": rehearse,
        }

    def call_budget(self, calls, index):
        """Seconds for calls[index]: what is left, less half the prediction of each call after it
        (so a slow call cannot starve the others); None when not even half its own prediction
        is left (the call is not reached)."""
        later = sum(START_FRACTION * c.predicted_s for c in calls[index + 1:])
        own = START_FRACTION * calls[index].predicted_s
        budget = self.left() - later
        return None if self.left() < own else max(own, budget)

    def setup_tool(self, name):
        return self.tools.get(name) or name

    # ---- time --------------------------------------------------------------------------------
    def elapsed(self):
        return time.monotonic() - self.started

    def left(self):
        return self.budget_s - SUMMARY_RESERVE_S - self.elapsed()

    # ---- evidence and summary ----------------------------------------------------------------
    def save(self, quiet=True):
        """evidence.json (atomically) and summary.md as they stand now."""
        self.evidence["elapsed_s"] = round(self.elapsed(), 1)
        path = self.outdir / "evidence.json"
        partial = path.with_suffix(".json.partial")
        partial.write_text(json.dumps(self.evidence, indent=1))
        partial.replace(path)
        output = io.StringIO() if quiet else sys.stdout
        with contextlib.redirect_stdout(output):
            return write_summary(self.outdir, self.claims)

    def record(self, name, result, seconds, predicted_s, detail=""):
        self.evidence["steps"].append({"name": name, "result": result, "seconds": round(seconds, 1),
                                       "predicted_s": round(predicted_s, 1), "detail": detail})
        print(f"gpu-check: {name}: {result} ({seconds:.0f} s, predicted {predicted_s:.0f} s)"
              f"{' ' + detail if detail else ''}", flush=True)
        self.save()

    # ---- commands ----------------------------------------------------------------------------
    def run(self, command, log, timeout_s, environment=None):
        """Runs `command` in its own process group, output appended to OUTDIR/logs/log; returns
        the exit code, or None when it ran past `timeout_s` (the group is stopped)."""
        with open(self.logs / log, "a") as out:
            out.write(f"\n$ {' '.join(map(str, command))}\n")
            out.flush()
            # SIGTERM/SIGINT wait until the child is known, so the handler can stop it: a signal
            # between the start and the assignment would leave the command running on its own.
            signals = {signal.SIGTERM, signal.SIGINT}
            signal.pthread_sigmask(signal.SIG_BLOCK, signals)
            try:
                self.child = subprocess.Popen(
                    [str(c) for c in command], stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True, env=environment or self.environment, cwd=self.outdir,
                    # the command itself starts with the signals unblocked
                    preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_UNBLOCK, signals))
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)
            try:
                return self.child.wait(timeout=max(1.0, timeout_s))
            except subprocess.TimeoutExpired:
                self.stop_child()
                out.write(f"\n(stopped after {timeout_s:.0f} s: budget)\n")
                return None
            finally:
                self.child = None

    def stop_child(self):
        child = self.child
        if child is None or child.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, sig)
            try:
                child.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def attnbench_argv(self, arguments):
        """attnbench with `arguments`, writing to the check's database (a GPU required)."""
        extra = ["--db", str(self.db)]
        if arguments[0] in ("run", "check"):
            extra.append("--require-gpu")
        return [self.bundle.cli, *arguments, *extra]

    def attnbench(self, arguments, log, timeout_s):
        """An attnbench command; returns (exit, the ids of the runs it stored)."""
        before = latest_run_id(self.db)
        code = self.run(self.attnbench_argv(arguments), log, timeout_s)
        return code, run_ids_after(self.db, before)

    def pack_logs(self):
        """OUTDIR/logs and OUTDIR/failures (dumps of failing cases) into LOGS_ARCHIVE."""
        folders = [f for f in (self.logs, self.outdir / "failures") if f.exists()]
        skipped, archived = [], 0
        with tarfile.open(self.outdir / LOGS_ARCHIVE, "w:gz") as archive:
            for folder in folders:  # the logs first: they matter most
                for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                    size = path.stat().st_size
                    if size > ARCHIVED_FILE_LIMIT or archived + size > ARCHIVE_LIMIT:
                        skipped.append(f"{path.relative_to(self.outdir)} {size} bytes")
                        continue
                    archived += size
                    archive.add(path, arcname=str(path.relative_to(self.outdir)))
            add_listing(archive, "skipped.txt", skipped)
        for folder in folders:
            shutil.rmtree(folder)
        self.pack_conformance()

    def pack_conformance(self):
        """OUTDIR/ptx-conformance into CONFORMANCE_ARCHIVES archives, CONFORMANCE_FIRST first."""
        folder = self.outdir / CONFORMANCE_DIR
        if not folder.exists():
            return
        def priority(path):
            ranks = [i for i, prefix in enumerate(CONFORMANCE_FIRST) if path.name.startswith(prefix)]
            return (ranks[0] if ranks else len(CONFORMANCE_FIRST), path.stat().st_size, path.name)
        files = sorted((p for p in folder.iterdir() if p.is_file()), key=priority)
        groups, skipped = [[] for _ in range(CONFORMANCE_ARCHIVES)], []
        sizes = [0] * CONFORMANCE_ARCHIVES
        for path in files:
            size = path.stat().st_size
            fits = [n for n in range(CONFORMANCE_ARCHIVES) if sizes[n] + size <= CONFORMANCE_ARCHIVE_LIMIT]
            if not fits:
                skipped.append(f"{path.name} {size} bytes")
                continue
            groups[fits[0]].append(path)
            sizes[fits[0]] += size
        for n, group in enumerate(groups, start=1):
            if not group and not (n == 1 and skipped):
                continue
            with tarfile.open(self.outdir / f"{CONFORMANCE_DIR}-{n}.tar.gz", "w:gz") as archive:
                for path in group:
                    archive.add(path, arcname=f"{CONFORMANCE_DIR}/{path.name}")
                if n == 1 and skipped:
                    add_listing(archive, f"{CONFORMANCE_DIR}/skipped.txt", skipped)
        shutil.rmtree(folder)

    # ---- the interruption --------------------------------------------------------------------
    def ignore_signals(self):
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)

    def finish(self, quiet=False):
        """The final summary and archive, once, with further signals ignored."""
        self.ignore_signals()
        self.finishing = True
        self.evidence["finished"] = True
        status = self.save(quiet=quiet)
        self.pack_logs()
        return status

    def on_signal(self, signum, _frame):
        self.ignore_signals()  # a second TERM must not re-enter this or tear the archive
        if self.finishing:
            return
        name = signal.Signals(signum).name.replace("SIG", "")
        self.evidence["interrupted"] = {"signal": name, "step": self.current_step or "between steps"}
        self.stop_child()
        print(f"gpu-check: interrupted by {name} during {self.current_step}", flush=True)
        self.finishing = True
        self.save(quiet=False)
        self.pack_logs()
        sys.exit(128 + signum)


def remove_earlier_run(outdir):
    for name in EARLIER_RUN_FILES:
        (outdir / name).unlink(missing_ok=True)
    for name in EARLIER_RUN_FOLDERS:
        shutil.rmtree(outdir / name, ignore_errors=True)


def latest_run_id(db):
    if not Path(db).exists():
        return 0
    with contextlib.closing(sqlite3.connect(db)) as connection:
        try:
            return connection.execute("SELECT coalesce(max(id), 0) FROM runs").fetchone()[0]
        except sqlite3.Error:
            return 0


def run_ids_after(db, before):
    if not Path(db).exists():
        return []
    with contextlib.closing(sqlite3.connect(db)) as connection:
        try:
            rows = connection.execute("SELECT id FROM runs WHERE id > ? ORDER BY id", (before,))
            return [row[0] for row in rows]
        except sqlite3.Error:
            return []


# ---- the steps -----------------------------------------------------------------------------------
# Each takes (check, planned step) and returns (result, detail), result "pass" or "fail".

def step_figures(check, step):
    details, failed = [], False
    for index, call in enumerate(step.calls):
        budget = check.call_budget(step.calls, index)
        if budget is None:
            details.append(f"{call.label} not reached: budget")
            failed = True
            continue
        if call.label == "calibrate":
            code, _ = check.attnbench(call.args, "calibrate.log", budget)
        elif call.label == "figures":
            code, runs = check.attnbench(call.args, "figures.log", budget)
            if runs:
                check.evidence["runs"]["figures"] = runs[0]
                check.evidence["runs"]["energy"] = runs[0]  # the figure cases measure energy
        else:  # the timer tests, from the test binary
            command = [check.bundle.test_binary("test_gpu"), "--gtest_filter=GpuTimer.*",
                       f"--gtest_output=xml:{check.outdir / 'timer.xml'}"]
            code = check.run(command, "timer.log", budget)
        details.append(f"{call.label} exit {code}")
        failed = failed or code != 0
        check.save()
    return ("fail" if failed else "pass"), "; ".join(details)


def step_ctest(check, step):
    timeout = check.left()
    per_test = max(10, min(int(timeout), 140))
    # The PTX conformance test writes every input and both outputs there (issue 14, item 7).
    environment = dict(check.environment, ATTNBENCH_GPU_TEST_CASE_TIMEOUT=str(plan.CASE_TIMEOUT_S),
                       ATTNBENCH_CONFORMANCE_DIR=str(check.outdir / "ptx-conformance"))
    junit = check.outdir / "ctest.xml"
    code = check.run([check.setup_tool("ctest"), "--test-dir", check.bundle.ctest_dir,
                      "--label-regex", "^gpu$", "--exclude-regex", r"GpuTimer\.",
                      "--no-tests=error", "--parallel", str(plan.CTEST_PARALLEL),
                      "--timeout", str(per_test), "--output-junit", str(junit),
                      "--output-on-failure"], "ctest.log", timeout, environment)
    log = (check.logs / "ctest.log").read_text(errors="replace")
    summary = re.findall(r"\d+% tests passed, \d+ tests? failed out of \d+", log)
    skipped, no_gpu = ctest_skips(junit)
    detail = (summary[-1] if summary else "no ctest summary") + f"; {skipped} skipped" + (
        f", {no_gpu} for want of a GPU" if no_gpu else "")
    # A gpu test that skips for want of a GPU on a GPU host proved nothing (a GPU outside a
    # kernel's architectures is a fair skip).
    return ("pass" if code == 0 and no_gpu == 0 else "fail"), detail


def ctest_skips(junit):
    """(skipped tests, those skipped for want of a GPU) from ctest's JUnit XML, which carries
    each test's output; ctest's console shows no output of a skipped test."""
    try:
        cases = ElementTree.parse(junit).getroot().iter("testcase")
    except (OSError, ElementTree.ParseError):
        return 0, 0
    skipped = [c for c in cases if c.find("skipped") is not None or c.get("status") == "notrun"]
    no_gpu = [c for c in skipped if re.search(r"no GPU", ElementTree.tostring(c, "unicode"))]
    return len(skipped), len(no_gpu)


SUMMARY_PATTERNS = {
    "memcheck": r"ERROR SUMMARY: (\d+) error",
    "synccheck": r"ERROR SUMMARY: (\d+) error",
    "racecheck": r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?",
}


def step_sanitizer(check, step):
    sanitizer = check.setup_tool("compute-sanitizer")
    details, failed = [], False
    for index, call in enumerate(step.calls):
        tool = call.sanitizer
        budget = check.call_budget(step.calls, index)
        if budget is None:
            check.evidence["sanitizer"][tool] = {"not_reached": "budget"}
            details.append(f"{tool} not reached: budget")
            failed = True
            continue
        logs = check.logs / "sanitizer"
        logs.mkdir(exist_ok=True)
        for old in logs.glob(f"{tool}-*.log"):
            old.unlink()
        before = latest_run_id(check.db)
        # The cases run in worker processes (--target-processes all follows them); a worker's
        # stdout is its pipe to the parent, so the tool writes to files, one per process.
        command = [sanitizer, "--tool", tool, "--target-processes", "all",
                   "--log-file", str(logs / f"{tool}-%p.log"),
                   *(["--leak-check", "no"] if tool == "memcheck" else []),
                   *check.attnbench_argv(call.args)]
        code = check.run(command, f"{tool}.log", budget)
        texts = [p.read_text(errors="replace") for p in sorted(logs.glob(f"{tool}-*.log"))]
        counts = [int(m) for text in texts for m in re.findall(SUMMARY_PATTERNS[tool], text)]
        errors = sum(counts)
        check.evidence["sanitizer"][tool] = {"errors": errors, "processes": len(counts), "exit": code}
        runs = run_ids_after(check.db, before)
        if tool == "memcheck" and runs:
            check.evidence["runs"]["sanitizer"] = runs[0]
        ok = code == 0 and errors == 0 and counts
        failed = failed or not ok
        details.append(f"{tool} {errors} errors in {len(counts)} processes (exit {code})")
        check.save()
    return ("fail" if failed else "pass"), "; ".join(details)


def one_run_step(log, run_key):
    """A step that is one attnbench run (gpu-smoke, an experiment's rounds): its log, and its run
    id in evidence.json's runs under `run_key`."""
    def step(check, planned):
        code, runs = check.attnbench(planned.calls[0].args, log, check.left())
        if runs:
            check.evidence["runs"][run_key] = runs[0]
        return ("pass" if code == 0 else "fail"), f"exit {code}"
    return step


def step_profile(check, step):
    """The masking study's GPU kernels profiled (CUPTI); the rows go to the check's database,
    the trace to OUTDIR."""
    arguments = [*step.calls[0].args, "--trace", str(check.outdir / plan.PROFILE_TRACE)]
    code, _ = check.attnbench(arguments, "profile.log", check.left())
    check.evidence["profile"] = {"exit": code, "trace": plan.PROFILE_TRACE}
    return ("pass" if code == 0 else "fail"), f"exit {code}"


def step_flash3_ncu(check, step):
    """Nsight Compute over each variant in its own attnbench process; the findings go to
    evidence.json, the raw CSV to the logs."""
    ncu = check.setup_tool("ncu")
    details, failed = [], False
    found = check.evidence.setdefault("ncu", {})
    for index, call in enumerate(step.calls):
        budget = check.call_budget(step.calls, index)
        if budget is None:
            found[call.label] = {"error": "not reached: budget"}
            details.append(f"{call.label} not reached: budget")
            failed = True
            continue
        raw = check.logs / f"ncu-{index}.csv"
        code = check.run(experiment.ncu_command(ncu, raw, check.attnbench_argv(call.args)),
                         f"ncu-{index}.log", budget)
        launches = experiment.parse_ncu_raw(raw.read_text(errors="replace")) \
            if raw.exists() else []
        if code != 0 or not launches:
            found[call.label] = {"error": f"ncu exit {code}, {len(launches)} launches profiled "
                                          f"(logs/ncu-{index}.log)"}
            failed = True
        else:
            found[call.label] = {"findings": experiment.ncu_findings(launches[0]),
                                 "raw": f"logs/ncu-{index}.csv"}
        details.append(f"{call.label} exit {code}")
        check.save()
    return ("fail" if failed else "pass"), "; ".join(details)


STEP_FUNCTIONS = {"figures": step_figures, "ctest": step_ctest, "sanitizer": step_sanitizer,
                  "gpu-smoke": one_run_step("smoke.log", "smoke"), "profile": step_profile,
                  "flash3-rounds": one_run_step("flash3-rounds.log", "experiment"),
                  "flash3-ncu": step_flash3_ncu}


def run_steps(check, plan_steps, functions):
    """Runs each planned step in order: skipped when disabled or out of budget."""
    for step in plan_steps:
        missing = [f"{need}: {check.prechecks.get(need, 'not checked')}" for need in step.needs
                   if not str(check.prechecks.get(need, "")).startswith("ok")]
        if missing:
            check.record(step.name, f"disabled: {missing[0]}", 0, step.predicted_s)
            continue
        if check.left() < START_FRACTION * step.predicted_s:
            check.record(step.name, "not reached: budget", 0, step.predicted_s,
                         f"{check.left():.0f} s left")
            continue
        check.current_step = step.name
        start = time.monotonic()
        try:
            result, detail = functions[step.name](check, step)
        except Exception as error:  # a bug in a step must not lose the other steps' evidence
            result, detail = "fail", f"{type(error).__name__}: {error}"
        check.current_step = None
        if result == "pass" and check.left() < 0:
            detail += "; ran past the budget"
        check.record(step.name, result, time.monotonic() - start, step.predicted_s, detail)


def main_run(root, outdir, budget_s, case_filter, rehearse, experiment_name=None):
    """The whole check, or an experiment's steps; returns the exit code (0 all passed, 1 a step
    or claim failed, 2 no GPU or nothing to run with)."""
    check = Check(root, outdir, budget_s, case_filter, rehearse)
    check.evidence["experiment"] = experiment_name or ""
    signal.signal(signal.SIGTERM, check.on_signal)
    signal.signal(signal.SIGINT, check.on_signal)
    check.current_step = "setup"
    start = time.monotonic()
    setup_result, detail = setup.run_setup(check)
    check.current_step = None
    check.record("setup", setup_result, time.monotonic() - start, plan.SETUP_S, detail)
    if setup_result != "pass":
        check.finish()
        return 2
    try:
        planned = plan.experiment_steps(experiment_name) if experiment_name else \
            plan.steps(case_filter, plan.registry_kernels(check.bundle.cli, check.environment))
        plan_steps = plan.predict(planned, check.bundle.cli,
                                  environment=check.environment)[1:]  # setup is done
    except (RuntimeError, OSError, ValueError) as error:
        check.record("plan", "fail", 0, 0, f"attnbench plan: {error}")
        check.finish()
        return 1
    if rehearse:
        for step in plan_steps:
            check.record(step.name, "disabled: rehearsal (no GPU on the build machine)", 0,
                         step.predicted_s)
    else:
        run_steps(check, plan_steps, STEP_FUNCTIONS)
    print(flush=True)
    status = check.finish()
    print(f"gpu-check: {check.outdir}: summary.md, evidence.json, attnbench.sqlite and the step "
          f"logs in {LOGS_ARCHIVE}; {check.elapsed():.0f} s of a {budget_s:g} s budget", flush=True)
    return status
