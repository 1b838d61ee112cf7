"""The GPU claims of GPU-CLAIMS.md and one judge per claim id, over the Evidence a gpu-check
run left in its OUTDIR (evidence.py).

  parse_claims(path)    the claims table, one Claim per row (id, claim, proven by, status);
  JUDGES                claim id -> judge(evidence) -> Verdict(measured, threshold, result, why);
  judge_claim(claim, e) a claim's verdict; an id with no judge reads 'fail', never 'pass'.

A judge says 'pass' or 'fail' only from a measurement. What it cannot see (a step not reached
or disabled, a tool or a test missing, a card the claim states no threshold for) reads
'not measured' with the reason, so a summary never passes a claim nobody measured.

A figure differs between cards: an H100 and an H200 share their SMs and tensor cores but not
their memory (3.0 against 4.3 TB/s). Such a claim states its threshold per device model
(`per_model`), the model being the one attnbench gave the run's GPU (evidence.json's
device_model, from `attnbench list devices --json`), or as a ratio to a peer measured in the same
run, which holds on either card. Every verdict names the model it was judged for."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from gpucheck.evidence import (CALIBRATE, CTEST, DATABASE_FILE, ENERGY, EVIDENCE_FILE, FIGURES,
                               PROFILE, SANITIZER, SETUP, SMOKE, TIMER, Evidence, TestOutcome,
                               _number, step_gap, steps_gaps)

PASS, FAIL, NOT_MEASURED = "pass", "fail", "not measured"
TERA = 1e12


# ---- the claims table --------------------------------------------------------------------------

ID_PATTERN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*\Z")


class ClaimsError(ValueError):
    """GPU-CLAIMS.md's table cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class Claim:
    id: str
    text: str
    proven_by: str
    status: str
    line: int = 0  # in GPU-CLAIMS.md, for messages


def split_row(line: str) -> list[str]:
    """The cells of a Markdown table row; '\\|' is a pipe inside a cell."""
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|") and not body.endswith("\\|"):
        body = body[:-1]
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", body)]


def _column_positions(header: list[str], where: str) -> dict[str, int]:
    """Where id, claim, proven by and status are, by the header's names (the proven-by header
    carries a note in parentheses)."""
    positions = {}
    for index, name in enumerate(header):
        for column in ("id", "claim", "proven by", "status"):
            if name == column or (column == "proven by" and name.startswith(column)):
                positions.setdefault(column, index)
    missing = [c for c in ("id", "claim", "proven by", "status") if c not in positions]
    if missing:
        raise ClaimsError(f"{where}: the claims table's header lacks {', '.join(missing)}")
    return positions


def parse_claims(path) -> list[Claim]:
    """Every row of the claims table (the first table whose header starts with `| id |`)."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    header_at = next((i for i, line in enumerate(lines)
                      if line.lstrip().startswith("|") and split_row(line)[0].lower() == "id"),
                     None)
    if header_at is None:
        raise ClaimsError(f"{path}: no claims table (a header row starting '| id |')")
    header = [cell.lower() for cell in split_row(lines[header_at])]
    columns = _column_positions(header, f"{path}:{header_at + 1}")
    separator = lines[header_at + 1] if header_at + 1 < len(lines) else ""
    if not re.fullmatch(r"\s*\|?[\s:|-]+\|?\s*", separator) or "-" not in separator:
        raise ClaimsError(f"{path}:{header_at + 2}: the header row is not followed by |---|")
    claims, first_seen = [], {}
    for number in range(header_at + 3, len(lines) + 1):  # 1-based line numbers
        line = lines[number - 1]
        if not line.lstrip().startswith("|"):
            break
        cells = split_row(line)
        if len(cells) != len(header):
            raise ClaimsError(f"{path}:{number}: {len(cells)} cells where the header has "
                              f"{len(header)} (is the id column missing?)")
        claim_id = cells[columns["id"]]
        if not claim_id:
            raise ClaimsError(f"{path}:{number}: a claim with no id")
        if not ID_PATTERN.match(claim_id):
            raise ClaimsError(f"{path}:{number}: id {claim_id!r} is not kebab-case "
                              "(lower-case words and digits joined by '-')")
        if claim_id in first_seen:
            raise ClaimsError(f"{path}:{number}: duplicate id {claim_id!r} "
                              f"(first on line {first_seen[claim_id]})")
        first_seen[claim_id] = number
        claims.append(Claim(claim_id, cells[columns["claim"]], cells[columns["proven by"]],
                            cells[columns["status"]], number))
    return claims


# ---- verdicts ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    measured: str
    threshold: str
    result: str  # PASS, FAIL or NOT_MEASURED
    why: str = ""
    judged_for: str = "any GPU"  # the device model a per-model threshold was taken for


@dataclass(frozen=True)
class Finding:
    """What a judge's measuring function found; the judge adds the claim's threshold."""
    result: str
    measured: str = "-"
    why: str = ""
    threshold: str | None = None  # replaces the registered threshold when it depends on the run


def passed(measured: str, why: str = "", **extra) -> Finding:
    return Finding(PASS, measured, why, **extra)


def failed(measured: str, why: str, **extra) -> Finding:
    return Finding(FAIL, measured, why, **extra)


def unmeasured(why: str, measured: str = "-", **extra) -> Finding:
    return Finding(NOT_MEASURED, measured, why, **extra)


def both(*findings: Finding) -> Finding:
    """All of a claim's parts: a failed part fails it, an unmeasured part leaves it unmeasured."""
    measured = "; ".join(f.measured for f in findings if f.measured not in ("", "-")) or "-"
    results = {f.result for f in findings}
    result = FAIL if FAIL in results else NOT_MEASURED if NOT_MEASURED in results else PASS
    # The reasons of the parts that decided the result (all of them when every part passed).
    whys = [f.why for f in findings if f.why and (result == PASS or f.result == result)]
    return Finding(result, measured, "; ".join(whys))


# ---- thresholds that differ between cards --------------------------------------------------------


@dataclass(frozen=True)
class AtLeast:
    """An absolute figure, stated for one device model."""
    value: float
    unit: str = "TFLOP/s"

    def __str__(self) -> str:
        return f">= {self.value:g} {self.unit}"


@dataclass(frozen=True)
class RatioTo:
    """A figure as a ratio to a peer measured in the same run: it holds on any card the peer
    runs on, since both saw the same clocks and memory."""
    peer: str
    ratio: float

    def __str__(self) -> str:
        return f">= {self.ratio:g}x {self.peer} (same run)"


# ---- judges ------------------------------------------------------------------------------------

JUDGES: dict[str, Callable[[Evidence], Verdict]] = {}


def judge(claim_id: str, threshold: str, *, steps: tuple = (), any_step: tuple = (),
          per_model: dict | None = None):
    """Registers a claim's judge. Before measuring, it reads 'not measured' when a step it needs
    did not run (every one of `steps`, at least one of `any_step`).

    per_model: {device model: AtLeast or RatioTo} for a claim whose threshold differs between
    cards (or is stated for some cards only); `threshold` is then a format string whose "{}" takes
    the model's threshold, and the measuring function is called as measure(evidence, threshold).
    A run on a card without a value reads 'not measured: not judged on this device', never
    pass."""
    def register(measure: Callable[..., Finding]):
        def judged(evidence: Evidence) -> Verdict:
            model = evidence.device_model
            stated, judged_for = threshold, "any GPU"
            if per_model is not None:
                stated = "; ".join(f"{name}: {threshold.format(value)}"
                                   for name, value in per_model.items())
                judged_for = model or "unknown model"
            if evidence.rehearsal:
                return Verdict("-", stated, NOT_MEASURED, "rehearsal: no GPU on this machine",
                               judged_for)
            if per_model is not None:
                if model not in per_model:
                    card = evidence.device_name() or "unknown"
                    return Verdict("-", stated, NOT_MEASURED,
                                   f"not judged on this device ({card}, model "
                                   f"{model or 'unknown'}): thresholds stated for "
                                   f"{', '.join(per_model)}", judged_for)
                stated = threshold.format(per_model[model])
            missing = [s for s in steps if step_gap(evidence, s)]
            if any_step and all(step_gap(evidence, s) for s in any_step):
                missing += [s for s in any_step if s not in missing]
            if missing:
                return Verdict("-", stated, NOT_MEASURED, steps_gaps(evidence, missing),
                               judged_for)
            found = (measure(evidence, per_model[model]) if per_model is not None
                     else measure(evidence))
            return Verdict(found.measured, found.threshold or stated, found.result, found.why,
                           judged_for)
        if claim_id in JUDGES:
            raise ValueError(f"two judges for claim {claim_id}")
        judged.__name__, judged.__doc__ = measure.__name__, measure.__doc__
        JUDGES[claim_id] = judged
        return judged
    return register


def judge_claim(claim: Claim, evidence: Evidence) -> Verdict:
    """The claim's verdict. No judge, or a judge that breaks on odd data, fails the claim: a
    forgotten judge must not pass silently, and the summary is written either way."""
    measure = JUDGES.get(claim.id)
    if measure is None:
        return Verdict("-", "-", FAIL, "no judge for this claim")
    try:
        return measure(evidence)
    except Exception as error:  # noqa: BLE001 -- reported in the claim's row
        return Verdict("-", "-", FAIL, f"judge raised {type(error).__name__}: {error}")


# -- formatting and the shapes of the claims ------------------------------------------------------


def shape_text(r: dict) -> str:
    """A result's shape as attnbench stored it (cases.shape); for a file before schema 10, a
    short label from its columns, for messages only."""
    if r.get("shape"):
        return r["shape"]
    text = (f"b={r['batch']},hq={r['heads_q']},hkv={r['heads_kv']},sq={r['seqlen_q']},"
            f"sk={r['seqlen_k']},d={r['head_dim_qk']},{r['input_dtype']}")
    if r["mask_kind"] == "window":
        return f"{text},window({r['window_left']},{r['window_right']})"
    return text if r["mask_kind"] == "none" else f"{text},{r['mask_kind']}"


def first_issues(issues: list[str], shown: int = 3) -> str:
    more = f" (and {len(issues) - shown} more)" if len(issues) > shown else ""
    return "; ".join(issues[:shown]) + more


def is_figure_shape(r: dict, dtype: str, pass_name: str = "fwd") -> bool:
    """FlashAttention's benchmark convention at seqlen 8192: 16k tokens, 16 heads of 128,
    no mask; in the given pass (the forward unless a claim is about the backward)."""
    return (r["batch"] * r["seqlen_q"] == 16384 and r["seqlen_q"] == 8192
            and r["seqlen_k"] == 8192 and r["heads_q"] == 16 and r["head_dim_qk"] == 128
            and r["mask_kind"] == "none" and r["input_dtype"] == dtype
            and r.get("pass", "fwd") == pass_name)


FLASH3_STAGES = ("cuda.flash3_wg1", "cuda.flash3_ws", "cuda.flash3_pingpong", "cuda.flash3")
FIGURE_DTYPE = {"cudnn.sdpa": "bf16", "cudnn.sdpa_deterministic": "bf16", "cuda.flash2": "bf16",
                "cuda.flash2_deterministic": "bf16", "torch.sdpa_flash": "bf16",
                "torch.sdpa_cudnn": "bf16", "cudnn.sdpa_fp8": "e4m3", "cuda.flash3_fp8": "e4m3",
                "cuda.flash3_fp8_ws": "e4m3", "cuda.flash3_fp8_ws_transpose": "e4m3",
                "cuda.flash3_fp8_incoherent": "bf16",
                **{stage: "bf16" for stage in FLASH3_STAGES}}


def figure_results(evidence: Evidence, kernel: str, dtype: str | None = None,
                   pass_name: str = "fwd") -> list[tuple[int, dict]]:
    """(run id, result) of `kernel` at its figure shape (in `dtype`, else the kernel's figure
    dtype): the figures step's run first, then gpu-smoke's (whose suite holds the figure shapes
    too)."""
    found = []
    for step in (FIGURES, SMOKE):
        if step_gap(evidence, step):
            continue
        for r in evidence.gpu_results(step, status=None):
            if r["kernel"] == kernel and is_figure_shape(r, dtype or FIGURE_DTYPE[kernel],
                                                         pass_name):
                found.append((evidence.run_id(step), r))
    return found


def no_figure_why(evidence: Evidence, kernel: str) -> str:
    if not evidence.db:
        return f"no {DATABASE_FILE}"
    where = (evidence.data or {}).get("filter")
    return (f"no {kernel} result at the figure shape"
            + (f" (cases filtered: {where})" if where else ""))


def timed_figures(evidence: Evidence, kernel: str,
                  pass_name: str = "fwd") -> list[tuple[int, dict]] | Finding:
    """Every (run, result) of `kernel` timed at its figure shape, figures run first, else the
    finding that says why there is none."""
    results = figure_results(evidence, kernel, pass_name=pass_name)
    if not results:
        return unmeasured(no_figure_why(evidence, kernel))
    timed = [(run, r) for run, r in results if r["status"] == "passed" and r.get("flops_per_s")]
    if not timed:
        run, r = results[0]
        return failed("-", f"{kernel} at the figure shape (run {run}): {r['status']}: "
                           f"{(r.get('message') or '')[:80]}")
    return timed


def judge_figure(evidence: Evidence, kernel: str, threshold: AtLeast | RatioTo,
                 pass_name: str = "fwd") -> Finding:
    """`kernel` at its figure shape against an absolute threshold, or against its peer's figure
    in the same run (the absolute TFLOP/s shown, not judged)."""
    timed = timed_figures(evidence, kernel, pass_name)
    if isinstance(timed, Finding):
        return timed
    if isinstance(threshold, RatioTo):
        return judge_figure_ratio(evidence, timed, threshold, pass_name)
    run, r = timed[0]
    tflops = r["flops_per_s"] / TERA
    measured = f"{tflops:.1f} TFLOP/s"
    where = f"run {run}" + (f", median {r['median_s'] * 1e6:.1f} us" if r.get("median_s") else "")
    if tflops >= threshold.value:
        return passed(measured, where)
    return failed(measured, f"below {threshold.value:g} TFLOP/s ({where})")


def judge_figure_ratio(evidence: Evidence, timed: list[tuple[int, dict]],
                       threshold: RatioTo, pass_name: str = "fwd") -> Finding:
    """The kernel's timed figures against `threshold.peer`'s at the figure shape in the same run
    (same clocks)."""
    peers = {run: r for run, r in figure_results(evidence, threshold.peer, pass_name=pass_name)
             if r["status"] == "passed" and r.get("flops_per_s")}
    paired = [(run, r, peers[run]) for run, r in timed if run in peers]
    if not paired:
        _, r = timed[0]
        untimed = [p for _, p in figure_results(evidence, threshold.peer, pass_name=pass_name)]
        why = (f"{threshold.peer} {untimed[0]['status']}: "
               f"{(untimed[0].get('message') or '')[:100]}"
               if untimed else f"no {threshold.peer} result in this run")
        return unmeasured(why, f"{r['flops_per_s'] / TERA:.1f} TFLOP/s")
    run, r, peer = paired[0]
    ratio = r["flops_per_s"] / peer["flops_per_s"]
    measured = (f"{ratio:.2f}x ({r['flops_per_s'] / TERA:.1f} vs "
                f"{peer['flops_per_s'] / TERA:.1f} TFLOP/s)")
    if ratio >= threshold.ratio:
        return passed(measured, f"run {run}")
    return failed(measured, f"below {threshold.ratio:g}x {threshold.peer} (run {run})")


def gpu_calibrations(evidence: Evidence, kind: str, dtype: str) -> list[dict]:
    """The newest calibration of `kind`/`dtype` of each GPU of the run."""
    if not evidence.db:
        return []
    gpu_uuids = {d["uuid"] for d in evidence.gpu_devices()}
    newest = {}
    for row in evidence.db.calibrations():  # oldest first: later rows replace earlier ones
        on_gpu = row["device_uuid"] in gpu_uuids if gpu_uuids else \
            str(row["device_uuid"]).startswith("GPU-")
        if on_gpu and row["kind"] == kind and row["dtype"] == dtype:
            newest[row["device_uuid"]] = row
    return list(newest.values())


def judge_calibration(evidence: Evidence, kind: str, dtype: str, threshold: AtLeast) -> Finding:
    minimum, unit = threshold.value, threshold.unit
    rows = gpu_calibrations(evidence, kind, dtype)
    if not rows:
        return unmeasured(f"no {kind} {dtype} calibration of the GPU in the database"
                          if evidence.db else f"no {DATABASE_FILE}")
    unmeasured_rows = [r for r in rows if r["value"] is None]
    if unmeasured_rows:
        return failed("-", f"calibration recorded no value: {unmeasured_rows[0]['details']}")
    weakest = min(rows, key=lambda r: r["value"])
    measured = f"{weakest['value'] / TERA:.2f} {unit}" if unit == "TB/s" else \
        f"{weakest['value'] / TERA:.1f} {unit}"
    if weakest["value"] >= minimum * TERA:
        return passed(measured, weakest["details"])
    return failed(measured, f"below {minimum:g} {unit} ({weakest['device_name']})")


# -- tests from ctest's JUnit XML and the timer's GoogleTest XML ----------------------------------

CTEST_SUITE = "GpuKernels/GpuCtestSuite.EveryCaseInsideTheTablePasses/"
TIMER_TEST = "GpuTimer.HarnessAgreesWithAHostClockLoopWithin5Percent"
L2_FLUSH_TEST = "GpuTimer.L2FlushDoesNotBillTheNextKernel"
ISOLATION_TEST = "GpuIsolation.OutOfBoundsWriteIsCrashedAndTheGoodKernelStillPasses"
PTX_CONFORMANCE_TEST = "PtxConformance.EveryWrappedInstructionMatchesTheHardware"
LAUNCH_COUNT_TEST = "CudaDevice.LaunchCountOfOneKernelIsOne"
CUPTI_TRACE_TEST = "CudaDevice.AProfiledForwardHoldsItsKernelAndTheCallThatLaunchedIt"


def suite_tests(evidence: Evidence, kernel: str) -> list[str]:
    """The ctest suite's tests of a kernel (tests/gpu/test_gpu.cpp): `.../cuda_flash2`, or, for a
    kernel split into shards, every one of `.../cudnn_sdpa_shard1of4` .. `shard4of4` (a shard
    missing from the XML leaves the claim unmeasured, it cannot pass on the others)."""
    base = CTEST_SUITE + re.sub(r"[^A-Za-z0-9]", "_", kernel)
    shard = re.compile(re.escape(base) + r"_shard(\d+)of(\d+)\Z")
    counts = {int(m.group(2)) for name in evidence.tests if (m := shard.match(name))}
    if not counts:
        return [base]
    shards = max(counts)
    return [f"{base}_shard{i}of{shards}" for i in range(1, shards + 1)]


def short_test(name: str) -> str:
    return name[len(CTEST_SUITE):] if name.startswith(CTEST_SUITE) else name


def tests_absent_why(evidence: Evidence, names: list[str]) -> str:
    shown = ", ".join(short_test(n) for n in names)
    if not evidence.test_files_read:
        named = [str((evidence.data or {}).get(k)) for k in ("ctest_junit", "timer_xml")
                 if (evidence.data or {}).get(k)]
        return f"no test XML in OUTDIR ({', '.join(named) or 'none named'}): {shown}"
    return f"not in the test XML ({', '.join(evidence.test_files_read)}): {shown}"


def judge_tests(evidence: Evidence, names: list[str]) -> Finding:
    """Every named test passed. A failure fails the claim; a test absent from the XML, or one
    that skipped (a skip on the GPU host proved nothing), leaves it unmeasured."""
    outcomes = [(name, evidence.tests.get(name)) for name in names]
    passed_count = sum(1 for _, o in outcomes if o and o.status == "passed")
    measured = (f"{passed_count}/{len(names)} passed" if len(names) > 1
                else (outcomes[0][1].status if outcomes[0][1] else "-"))
    failures = [f"{short_test(n)}: {o.message[:100] or 'failed'}" for n, o in outcomes
                if o and o.status == "failed"]
    if failures:
        return failed(measured, first_issues(failures, 2))
    absent = [n for n, o in outcomes if o is None]
    if absent:
        return unmeasured(tests_absent_why(evidence, absent), measured)
    skips = [f"{short_test(n)} skipped: {o.message[:100]}" for n, o in outcomes
             if o.status == "skipped"]
    if skips:
        return unmeasured(first_issues(skips, 2), measured)
    return passed(measured)


def judge_cuda_device_tests(evidence: Evidence) -> Finding:
    """Every CudaDevice.* test (tests/gpu/test_cuda_executor.cpp) that ctest ran passed."""
    names = sorted(n for n in evidence.tests if n.startswith("CudaDevice."))
    if not names:
        return unmeasured(tests_absent_why(evidence, ["CudaDevice.*"]))
    found = judge_tests(evidence, names)
    return Finding(found.result, f"CudaDevice.* {found.measured}", found.why)


def property_number(outcome: TestOutcome, name: str) -> float | None:
    return _number(outcome.properties.get(name))


# -- results of the gpu-smoke run -----------------------------------------------------------------

NAIVE_FAMILY = ("cuda.naive", "cuda.masked_outofplace", "cuda.masked_inplace",
                "cuda.masked_fused")
# predicted_s is bytes_moved / copy bandwidth, so within one shape it orders as the bytes do.
BYTES_ORDER = ("cuda.masked_fused", "cuda.naive", "cuda.masked_inplace", "cuda.masked_outofplace")


def parse_json_object(text: str | None) -> dict:
    """A JSON object column as stored ({} when empty, not JSON, or not an object)."""
    try:
        value = json.loads(text or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def stored_expectation(r: dict, what: str) -> int | None:
    """What the kernel declares one forward of this problem costs, as attnbench stored it beside
    the measurement (details_json "expected", Kernel::expected_resources): `what` is
    extra_memory_bytes or launches. None when the result carries none (written before attnbench
    stored expectations, or by a kernel that declares nothing): the claim is then not judged."""
    expected = parse_json_object(r.get("details_json")).get("expected")
    value = expected.get(what) if isinstance(expected, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def no_expectation_why(what: str) -> Callable[[dict], str | None]:
    """Why a result cannot be judged for `what`: no stored expectation of it."""
    def why(r: dict) -> str | None:
        if stored_expectation(r, what) is not None:
            return None
        return (f"no stored expectation of its {what.replace('_', ' ')} (details_json "
                "\"expected\": written by an attnbench that stores none)")
    return why


# The tracking allocator rounds each allocation up (alignment, allocation granularity) and a
# kernel may hold small side buffers, so the high-water mark may exceed the formula: up to 1.5x
# passes, while a second copy of the buffer (2x) fails. Less than the formula always fails: the
# kernel cannot hold what it materializes in less.
MEMORY_TOLERANCE = 1.5


def memory_issue(r: dict) -> str | None:
    expected, measured = stored_expectation(r, "extra_memory_bytes"), r.get("extra_memory_bytes")
    if expected is None:
        return None  # not judged: no_expectation_why says so
    if measured is None or measured < 0:
        return "extra memory not measured"
    if expected <= measured <= MEMORY_TOLERANCE * expected:
        return None
    return f"{measured} B where the formula gives {expected} B (up to {MEMORY_TOLERANCE:g}x)"


def launches_issue(r: dict) -> str | None:
    expected, measured = stored_expectation(r, "launches"), r.get("launches")
    if expected is None:
        return None  # not judged: no_expectation_why says so
    if measured is None or measured < 0:
        return "launches not measured"
    return None if measured == expected else f"{measured} launches, expected {expected}"


def smoke_forwards(evidence: Evidence) -> list[dict]:
    """gpu-smoke's passed forward results on a GPU (its backward blocks apart)."""
    return [r for r in evidence.gpu_results(SMOKE) if r.get("pass", "fwd") == "fwd"]


def judge_smoke_rule(evidence: Evidence, kernels: tuple, issue_of: Callable[[dict], str | None],
                     describe: Callable[[list[dict]], str],
                     unjudged_why: Callable[[dict], str | None] = lambda r: None) -> Finding:
    """A rule over every passed gpu-smoke forward result of `kernels` (the claims' memory and
    launches are the forward's): a broken rule fails the claim; a result the rule cannot judge
    (unjudged_why: no stored expectation) or a kernel with no passed result leaves it
    unmeasured, never passed."""
    if not evidence.db:
        return unmeasured(f"no {DATABASE_FILE}")
    rows = [r for r in smoke_forwards(evidence) if r["kernel"] in kernels]
    issues = [f"{r['kernel']} {shape_text(r)}: {issue}" for r in rows
              if (issue := issue_of(r))]
    measured = describe(rows) if rows else "-"
    if issues:
        return failed(measured, first_issues(issues))
    unjudged = [f"{r['kernel']} {shape_text(r)}: {why}" for r in rows if (why := unjudged_why(r))]
    if unjudged:
        return unmeasured(first_issues(unjudged, 2), measured)
    missing = [k for k in kernels if not any(r["kernel"] == k for r in rows)]
    if missing:
        return unmeasured(f"no passed gpu-smoke result of {', '.join(missing)}", measured)
    return passed(measured)


def distinct_values(rows: list[dict], column: str) -> str:
    """'2/8': the distinct values of a column, smallest first."""
    values = {r.get(column) for r in rows}
    return "/".join(str(v) for v in sorted(values, key=lambda v: (v is None, v or 0)))


def values_per_kernel(rows: list[dict], column: str) -> str:
    """'cuda.naive 3, cuda.flash1 2/8': the distinct values of a column per kernel."""
    kernels = list(dict.fromkeys(r["kernel"] for r in rows))
    return ", ".join(f"{k} {distinct_values([r for r in rows if r['kernel'] == k], column)}"
                     for k in kernels)


def memory_ratios(rows: list[dict]) -> str:
    expected = [(r, stored_expectation(r, "extra_memory_bytes")) for r in rows]
    ratios = [r["extra_memory_bytes"] / e for r, e in expected
              if e and r.get("extra_memory_bytes") is not None and r["extra_memory_bytes"] >= 0]
    text = f"{len(rows)} results"
    return text + (f", measured/formula {min(ratios):.2f}-{max(ratios):.2f}" if ratios else "")


# ---- the claims, one judge each (GPU-CLAIMS.md's order) ------------------------------------------


@judge("bundle-runs", "setup passes from the bundle", steps=(SETUP,))
def bundle_runs(evidence: Evidence) -> Finding:
    """The bundle unpacked, its libraries resolved and `attnbench list devices` saw the GPU."""
    setup = evidence.steps[SETUP]
    if setup.result == "fail":
        return failed("setup failed", setup.detail)
    if not evidence.bundle:
        return unmeasured(f"built from source, no bundle ({setup.detail or 'setup'})")
    bundle = evidence.bundle
    measured = (f"bundle {str(bundle.get('git_sha', '?'))[:12]} built "
                f"{bundle.get('built_at', '?')} on {bundle.get('built_on', '?')}")
    # What the bundle must load on the GPU host, as setup's pre-checks found it.
    prechecks = (evidence.data or {}).get("prechecks") or {}
    loads = {name: str(prechecks[name]) for name in ("attnbench", "cudnn", "cublas")
             if name in prechecks}
    missing = [f"{name}: {state}" for name, state in loads.items() if not state.startswith("ok")]
    if missing:
        return failed(measured, first_issues(missing))
    return passed(measured, "; ".join(f"{name} {state}" for name, state in loads.items()))


DEVICE_FIELDS = ("name", "uuid", "sm_version", "sm_count", "memory_bytes", "l2_bytes",
                 "clock_mhz", "power_limit_w", "ecc", "persistence")


@judge("devices-discovered", "every field of every GPU, stored with each run", steps=(SETUP,))
def devices_discovered(evidence: Evidence) -> Finding:
    devices = evidence.gpu_devices()
    if not devices:
        return unmeasured("no GPU device in the database" if evidence.db
                          else f"no {DATABASE_FILE}")
    issues = [f"{d['name']} ({d['uuid']}) lacks {', '.join(missing)}" for d in devices
              if (missing := [f for f in DEVICE_FIELDS if d.get(f) in (None, "")])]
    stored = {d["run_id"] for d in evidence.db.gpu_devices(evidence.runs.values())}
    bare = [f"run {run}" for run in sorted(set(evidence.runs.values()))
            if evidence.db.run(run) and run not in stored]
    measured = ", ".join(f"{d['name']} sm_{d['sm_version']} x{d['sm_count']} SMs"
                         for d in devices)
    if issues or bare:
        return failed(measured, first_issues(issues + [f"{b} stored no GPU" for b in bare]))
    return passed(measured, f"{len(devices)} GPU in {len(stored)} runs")


@judge("require-gpu", "attnbench runs with --require-gpu ran on the GPU",
       any_step=(FIGURES, SANITIZER, SMOKE))
def require_gpu(evidence: Evidence) -> Finding:
    """gpu-check runs every attnbench run and check with --require-gpu: a run that stored its
    GPU was accepted."""
    if not evidence.db:
        return unmeasured(f"no {DATABASE_FILE}")
    runs = sorted(set(evidence.runs.values()))
    if not runs:
        return unmeasured(f"no attnbench run in {EVIDENCE_FILE}")
    on_gpu = [run for run in runs if evidence.db.gpu_devices([run])]
    measured = f"{len(on_gpu)}/{len(runs)} runs on the GPU"
    if len(on_gpu) == len(runs):
        return passed(measured, "runs " + ", ".join(map(str, runs)))
    absent = [str(run) for run in runs if run not in on_gpu]
    return failed(measured, f"runs {', '.join(absent)} stored no GPU")


@judge("multi-gpu", "one worker per GPU, in parallel")
def multi_gpu(evidence: Evidence) -> Finding:
    return unmeasured("needs a host with several GPUs (attnbench run --devices all); "
                      "gpu-check's host has one")


@judge("timing-protocol", "CudaDevice.* pass; every gpu-smoke sample has its SM clock",
       steps=(CTEST, SMOKE))
def timing_protocol(evidence: Evidence) -> Finding:
    timed = {r["id"] for r in evidence.gpu_results(SMOKE) if r.get("timed")}
    samples = [s for s in (evidence.db.samples(evidence.run_id(SMOKE)) if evidence.db else [])
               if s["result_id"] in timed]
    with_clock = sum(1 for s in samples if s.get("sm_clock_mhz") is not None)
    clocks_measured = f"SM clock in {with_clock}/{len(samples)} samples"
    if not samples:
        clocks = unmeasured("no samples of timed gpu-smoke results")
    elif with_clock < len(samples):
        clocks = failed(clocks_measured, f"{len(samples) - with_clock} samples without SM clock")
    else:
        clocks = passed(clocks_measured)
    return both(judge_cuda_device_tests(evidence), clocks)


@judge("timer-cross-check", "difference <= 5 %", steps=(TIMER,))
def timer_cross_check(evidence: Evidence) -> Finding:
    outcome = evidence.tests.get(TIMER_TEST)
    if outcome is None:
        return unmeasured(tests_absent_why(evidence, [TIMER_TEST]))
    difference = property_number(outcome, "difference_percent")
    if difference is None:
        if outcome.status == "failed":
            return failed("-", f"{TIMER_TEST}: {outcome.message[:100] or 'failed'}")
        return unmeasured(f"{TIMER_TEST} {outcome.status} without difference_percent")
    harness = property_number(outcome, "harness_median_us")
    host = property_number(outcome, "host_loop_us")
    measured = f"{difference:.2f} %" + (f" ({harness:.1f} vs {host:.1f} us)"
                                        if harness is not None and host is not None else "")
    if difference <= 5.0:
        return passed(measured, "harness median vs host-clock loop")
    return failed(measured, "the harness and the host-clock loop disagree by more than 5 %")


@judge("energy-hot-loop", "energy_j stored for every result of the energy run", steps=(ENERGY,))
def energy_hot_loop(evidence: Evidence) -> Finding:
    rows = evidence.gpu_results(ENERGY)
    if not rows:
        return unmeasured("no passed result in the energy run" if evidence.db
                          else f"no {DATABASE_FILE}")
    missing = [f"{r['kernel']} {shape_text(r)}: no energy" for r in rows
               if not r.get("energy_j") or r["energy_j"] <= 0]
    measured = ", ".join(f"{r['kernel']} {r['energy_j'] * 1e3:.2f} mJ per forward"
                         for r in rows if r.get("energy_j"))
    return failed(measured or "-", first_issues(missing)) if missing else passed(measured)


@judge("launches-graph", f"{LAUNCH_COUNT_TEST} passes; every gpu-smoke result has launches >= 1",
       steps=(CTEST, SMOKE))
def launches_graph(evidence: Evidence) -> Finding:
    rows = evidence.gpu_results(SMOKE)
    bad = [f"{r['kernel']} {shape_text(r)}: launches {r.get('launches')}" for r in rows
           if (r.get("launches") or 0) < 1]
    measured = f"launches in {len(rows) - len(bad)}/{len(rows)} results"
    if not rows:
        smoke = unmeasured("no passed gpu-smoke result")
    else:
        smoke = failed(measured, first_issues(bad)) if bad else passed(measured)
    test = judge_tests(evidence, [LAUNCH_COUNT_TEST])
    return both(Finding(test.result, f"{LAUNCH_COUNT_TEST} {test.measured}", test.why), smoke)


@judge("memory-tracking", "extra memory >= 0 in every gpu-smoke result", steps=(SMOKE,))
def memory_tracking(evidence: Evidence) -> Finding:
    rows = evidence.gpu_results(SMOKE)
    if not rows:
        return unmeasured("no passed gpu-smoke result" if evidence.db else f"no {DATABASE_FILE}")
    bad = [f"{r['kernel']} {shape_text(r)}: {r.get('extra_memory_bytes')}" for r in rows
           if r.get("extra_memory_bytes") is None or r["extra_memory_bytes"] < 0]
    measured = f"extra memory in {len(rows) - len(bad)}/{len(rows)} results"
    return failed(measured, first_issues(bad)) if bad else passed(measured)


@judge("nvtx", "ranges visible in Nsight Systems")
def nvtx(evidence: Evidence) -> Finding:
    return unmeasured("Nsight Systems does not run on the lent GPU host; "
                      "check with nsys profile on a workstation")


# The calibrated ceilings per card: both Hoppers' tensor cores (775-790 TFLOP/s measured on the
# H200 by this project, 798 on an H100 by the device tool's notes), and their memories (4.25 TB/s
# measured on the H200, about 3.0 TB/s on an H100): ~90 % of what was measured.
@judge("calibrate-bf16-gemm", "{}", steps=(CALIBRATE,),
       per_model={"h100": AtLeast(700), "h200": AtLeast(700)})
def calibrate_bf16_gemm(evidence: Evidence, threshold: AtLeast) -> Finding:
    return judge_calibration(evidence, "gemm", "bf16", threshold)


@judge("calibrate-copy", "{}", steps=(CALIBRATE,),
       per_model={"h100": AtLeast(2.7, "TB/s"), "h200": AtLeast(4, "TB/s")})
def calibrate_copy(evidence: Evidence, threshold: AtLeast) -> Finding:
    return judge_calibration(evidence, "copy", "bytes", threshold)


# A result's fraction of peak is its TFLOP/s over the calibrated GEMM ceiling of its own input
# dtype; 1 % allows rounding and a ceiling re-measured within the run.
FRACTION_TOLERANCE = 0.01


@judge("calibrate-dtypes", "gemm fp16, bf16, e4m3 calibrated; fractions of their dtype's ceiling",
       steps=(CALIBRATE, SMOKE))
def calibrate_dtypes(evidence: Evidence) -> Finding:
    ceilings = {}
    for dtype in ("fp16", "bf16", "e4m3"):
        rows = [r for r in gpu_calibrations(evidence, "gemm", dtype) if r["value"]]
        if rows:
            ceilings[dtype] = min(r["value"] for r in rows)
    missing = [d for d in ("fp16", "bf16", "e4m3") if d not in ceilings]
    measured = ", ".join(f"{d} {v / TERA:.0f}" for d, v in ceilings.items()) + " TFLOP/s"
    if missing:
        return (failed(measured, f"no gemm {', '.join(missing)} calibration")
                if ceilings else unmeasured("no gemm calibration of the GPU in the database"))
    rows = [r for r in evidence.gpu_results(SMOKE) if r.get("timed")]
    issues = []
    for r in rows:
        fraction = r.get("fraction_of_peak_flops")
        if fraction is None or r.get("fraction_of_peak_bandwidth") is None:
            issues.append(f"{r['kernel']} {shape_text(r)}: no fraction of peak")
        elif r["input_dtype"] in ceilings and r.get("flops_per_s"):
            expected = r["flops_per_s"] / ceilings[r["input_dtype"]]
            if abs(fraction - expected) > FRACTION_TOLERANCE * expected:
                issues.append(f"{r['kernel']} {shape_text(r)}: fraction {fraction:.3f}, "
                              f"{expected:.3f} of its {r['input_dtype']} ceiling")
    measured += f"; fractions in {len(rows) - len(issues)}/{len(rows)} timed results"
    if issues:
        return failed(measured, first_issues(issues))
    if not rows:
        return unmeasured("no timed gpu-smoke result", measured)
    return passed(measured)


@judge("cupti-trace", "the test passes", steps=(CTEST,))
def cupti_trace(evidence: Evidence) -> Finding:
    return judge_tests(evidence, [CUPTI_TRACE_TEST])


@judge("isolation-oob", "the test passes", steps=(CTEST,))
def isolation_oob(evidence: Evidence) -> Finding:
    return judge_tests(evidence, [ISOLATION_TEST])


@judge("ptx-conformance", "identical bits (ex2.approx: 2 ulp)", steps=(CTEST,))
def ptx_conformance(evidence: Evidence) -> Finding:
    return judge_tests(evidence, [PTX_CONFORMANCE_TEST])


@judge("naive-cublas-correct", "ctest suite passes", steps=(CTEST,))
def naive_cublas_correct(evidence: Evidence) -> Finding:
    return judge_tests(evidence, suite_tests(evidence, "cuda.naive_cublas"))


@judge("cudnn-correct", "ctest suite passes", steps=(CTEST,))
def cudnn_correct(evidence: Evidence) -> Finding:
    return judge_tests(evidence, suite_tests(evidence, "cudnn.sdpa"))


@judge("cudnn-fp8-correct", "ctest suite passes", steps=(CTEST,))
def cudnn_fp8_correct(evidence: Evidence) -> Finding:
    return judge_tests(evidence, suite_tests(evidence, "cudnn.sdpa_fp8"))


@judge("cudnn-fp8-quantized-correct", "ctest suite passes", steps=(CTEST,))
def cudnn_fp8_quantized_correct(evidence: Evidence) -> Finding:
    return judge_tests(evidence, suite_tests(evidence, "cudnn.sdpa_fp8_quantized")
                       + suite_tests(evidence, "cudnn.sdpa_fp8_incoherent"))


# cuDNN is the peer the in-house figures are measured against; its own figures are stated for
# the H200 only, where this project measured cudnn.sdpa (608.8-622.5 TFLOP/s): no H100 run yet.
@judge("cudnn-figure", "{}", any_step=(FIGURES, SMOKE), per_model={"h200": AtLeast(600)})
def cudnn_figure(evidence: Evidence, threshold: AtLeast) -> Finding:
    return judge_figure(evidence, "cudnn.sdpa", threshold)


@judge("cudnn-fp8-figure", "{}", any_step=(FIGURES, SMOKE), per_model={"h200": AtLeast(900)})
def cudnn_fp8_figure(evidence: Evidence, threshold: AtLeast) -> Finding:
    return judge_figure(evidence, "cudnn.sdpa_fp8", threshold)


def judge_sanitizer(evidence: Evidence, tool: str) -> Finding:
    """evidence.json's report of one compute-sanitizer tool: clean means no error, at least one
    process checked, and the tool exited 0 (a timeout proves nothing clean)."""
    report = evidence.sanitizer.get(tool)
    if not isinstance(report, dict):
        return unmeasured(f"no {tool} report in {EVIDENCE_FILE}")
    if report.get("not_reached"):
        return unmeasured(f"{tool} not reached: {report['not_reached']}")
    errors, processes, status = (report.get("errors"), report.get("processes"),
                                 report.get("exit"))
    if errors is None or processes is None:
        return unmeasured(f"{tool} report without errors/processes: {report}")
    measured = f"{errors} errors in {processes} processes, exit {status}"
    kernels = {r["kernel"] for r in evidence.results(SANITIZER)}
    covered = f"{len(kernels)} kernels in run {evidence.run_id(SANITIZER)}" if kernels else ""
    if errors == 0 and processes > 0 and status == 0:
        return passed(measured, covered)
    if errors == 0 and processes == 0:
        return failed(measured, "no process was checked")
    return failed(measured, f"{tool} found errors" if errors else f"{tool} exited {status}")


@judge("memcheck-clean", "0 errors, every process", steps=(SANITIZER,))
def memcheck_clean(evidence: Evidence) -> Finding:
    return judge_sanitizer(evidence, "memcheck")


VERSION_FIELDS = (("cuda_runtime", "CUDA runtime"), ("cuda_driver", "driver"),
                  ("cudnn", "cuDNN"), ("cudnn_frontend", "cudnn-frontend"), ("cublas", "cuBLAS"))


def run_environment(evidence: Evidence) -> dict | None:
    """The runs-table row of the first attnbench run gpu-check made (they share a host)."""
    for step in (SMOKE, FIGURES, SANITIZER):
        run = evidence.db.run(evidence.run_id(step)) if evidence.db else None
        if run:
            return run
    return None


@judge("versions", "every version recorded (cuDNN compiled and loaded)",
       any_step=(FIGURES, SANITIZER, SMOKE))
def versions(evidence: Evidence) -> Finding:
    run = run_environment(evidence)
    if run is None:
        return unmeasured("no attnbench run in the database" if evidence.db
                          else f"no {DATABASE_FILE}")
    missing = [label for column, label in VERSION_FIELDS
               if str(run.get(column) or "").strip().lower() in ("", "none", "unknown")]
    cudnn = str(run.get("cudnn") or "")
    if cudnn and not ("compiled" in cudnn and "loaded" in cudnn):
        missing.append("cuDNN compiled and loaded")
    measured = "; ".join(f"{label} {run.get(column) or '-'}" for column, label in VERSION_FIELDS)
    if missing:
        return failed(measured, f"run {run['id']} lacks {', '.join(missing)}")
    return passed(measured, f"run {run['id']}")


@judge("gpu-check-budget", "every step run within budget_s")
def gpu_check_budget(evidence: Evidence) -> Finding:
    if not evidence.found:
        return unmeasured(f"no {EVIDENCE_FILE}")
    total, budget = evidence.total_seconds(), evidence.budget_s
    threshold = f"every step run within {budget:g} s"
    measured = f"{total:.0f} s of {budget:g} s"
    if evidence.interrupted or evidence.unfinished():
        return unmeasured(evidence.interruption() or evidence.unfinished(), measured,
                          threshold=threshold)
    late = [name for name, step in evidence.steps.items() if step.result.startswith("not reached")]
    if late:
        return failed(measured, f"steps not reached: {', '.join(late)}", threshold=threshold)
    if total > budget:
        return failed(measured, "over budget", threshold=threshold)
    skipped = [f"step {name} {step.result}" for name, step in evidence.steps.items()
               if not step.ran]
    if skipped:
        return unmeasured(f"not every step ran: {'; '.join(skipped)}", measured,
                          threshold=threshold)
    return passed(measured, f"{len(evidence.steps)} steps", threshold=threshold)


@judge("gpu-smoke-90s", "< 90 s", steps=(SMOKE,))
def gpu_smoke_90s(evidence: Evidence) -> Finding:
    step = evidence.steps[SMOKE]
    if step.seconds is None:
        return unmeasured("the gpu-smoke step recorded no seconds")
    measured = f"{step.seconds:.0f} s"
    if step.result == "fail":
        # A step that failed early ran fast for the wrong reason: its time counts only when the
        # suite's run completed anyway (a kernel that failed its check).
        run = evidence.db.run(evidence.run_id(SMOKE)) if evidence.db else None
        if not run or run.get("status") != "complete":
            return unmeasured(f"gpu-smoke failed before its run completed ({step.detail})",
                              measured)
    if step.seconds < 90:
        return passed(measured, f"predicted {step.predicted_s:.0f} s"
                      if step.predicted_s is not None else "")
    return failed(measured, "the suite took 90 s or more")


@judge("a100", "the sm_80 builds pass ctest and gpu-smoke on an A100")
def a100(evidence: Evidence) -> Finding:
    if "A100" not in evidence.device_name():
        return unmeasured("needs an A100 host (gpu-check there)")
    gaps = steps_gaps(evidence, (CTEST, SMOKE))
    if gaps:
        return unmeasured(gaps)
    failures = [name for name in (CTEST, SMOKE) if evidence.steps[name].result != "pass"]
    measured = ", ".join(f"{n} {evidence.steps[n].result}" for n in (CTEST, SMOKE))
    return failed(measured, "steps failed on the A100") if failures else passed(measured)


@judge("nightly-10min", "nightly suite < 10 min")
def nightly_10min(evidence: Evidence) -> Finding:
    return unmeasured("too long for gpu-check: attnbench run --suite nightly --devices gpu "
                      "on its own")


# The masking study on a GPU (suites/masking.toml): each in-house kernel's launches per forward as
# it declares them (stored with its profile, profiles.expected_launches), cuDNN's one fused kernel
# (the claim's figure: cuDNN declares none, its engine chooses); and the three in-house paths'
# times in the study's order. The PyTorch peers are shown beside the seed study's 6 / 5 / 1, not
# judged.
MASKING_KERNELS = ("cuda.naive", "cuda.masked_outofplace", "cuda.masked_inplace",
                   "cuda.masked_fused", "cuda.flash2", "cudnn.sdpa")
CUDNN_FUSED_LAUNCHES = 1
MASKING_ORDER = ("cuda.masked_outofplace", "cuda.masked_inplace", "cuda.masked_fused")
MASKING_PEERS = ("torch.naive_outofplace", "torch.naive_inplace", "torch.sdpa_flash",
                 "torch.sdpa_efficient", "torch.sdpa_cudnn", "torch.sdpa_math")


@judge("masking-study-gpu", "launches as each in-house kernel declares them, cuDNN 1; time out "
       "of place >= in place >= fused", steps=(PROFILE,))
def masking_study_gpu(evidence: Evidence) -> Finding:
    profiles = evidence.db.cupti_profiles() if evidence.db else {}
    shown = [k for k in (*MASKING_KERNELS, *MASKING_PEERS) if k in profiles]
    measured = ", ".join(f"{k} {profiles[k]['launches']} launches "
                         f"{profiles[k]['median_s'] * 1e6:.0f} us" for k in shown) or "-"
    missing = [k for k in MASKING_KERNELS if k not in profiles]
    if missing:
        return unmeasured(f"no CUPTI profile of {', '.join(missing)}", measured)
    expected = {k: profiles[k].get("expected_launches") for k in MASKING_KERNELS}
    expected["cudnn.sdpa"] = CUDNN_FUSED_LAUNCHES
    wrong = [f"{k} launched {profiles[k]['launches']}, expected {n}"
             for k, n in expected.items() if n is not None and profiles[k]["launches"] != n]
    times = [profiles[k]["median_s"] for k in MASKING_ORDER]
    if any(a < b for a, b in zip(times, times[1:])):
        wrong.append("time is not out of place >= in place >= fused")
    if wrong:
        return failed(measured, "; ".join(wrong))
    undeclared = [k for k, n in expected.items() if n is None]
    if undeclared:
        return unmeasured(f"no stored expectation of the launches of {', '.join(undeclared)} "
                          "(profiles.expected_launches: written by an attnbench that stores none)",
                          measured)
    return passed(measured, "the PyTorch study counted 6 out of place, 5 in place, 1 fused; "
                  "energy is not in gpu-check: attnbench run --suite masking --devices gpu --energy")


@judge("flash2-correct", "ctest suite passes", steps=(CTEST,))
def flash2_correct(evidence: Evidence) -> Finding:
    return judge_tests(evidence, suite_tests(evidence, "cuda.flash2"))


@judge("flash3-wg1-correct", "hopper-stages suite passes", steps=(CTEST,))
def flash3_wg1_correct(evidence: Evidence) -> Finding:
    return judge_tests(evidence, suite_tests(evidence, "cuda.flash3_wg1"))


@judge("flash3-ws-correct", "hopper-stages suite passes", steps=(CTEST,))
def flash3_ws_correct(evidence: Evidence) -> Finding:
    return judge_tests(evidence, suite_tests(evidence, "cuda.flash3_ws"))


@judge("flash3-pingpong-correct", "hopper-stages suite passes", steps=(CTEST,))
def flash3_pingpong_correct(evidence: Evidence) -> Finding:
    return judge_tests(evidence, suite_tests(evidence, "cuda.flash3_pingpong"))


@judge("flash3-correct", "ctest suite passes", steps=(CTEST,))
def flash3_correct(evidence: Evidence) -> Finding:
    return judge_tests(evidence, suite_tests(evidence, "cuda.flash3"))


@judge("flash3-fp8-correct", "hopper-fp8 suite passes", steps=(CTEST,))
def flash3_fp8_correct(evidence: Evidence) -> Finding:
    """Every in-house FP8 kernel: the registry's in-house kernels whose correctness suite is
    hopper-fp8, as setup recorded them (a new FP8 kernel is judged without a change here)."""
    kernels = evidence.in_house_kernels("hopper-fp8")
    if not kernels:
        return unmeasured("evidence.json holds no in-house kernel of the hopper-fp8 suite "
                          "(setup records `attnbench list kernels --json`)")
    found = judge_tests(evidence, [test for kernel in kernels
                                   for test in suite_tests(evidence, kernel)])
    return Finding(found.result, found.measured,
                   "; ".join(part for part in (found.why, ", ".join(kernels)) if part))


# On an H100, the H200's two thresholds as a ratio: 850 against cuDNN's 900.
@judge("flash3-fp8-figure", "{}", any_step=(FIGURES, SMOKE),
       per_model={"h100": RatioTo("cudnn.sdpa_fp8", 0.94), "h200": AtLeast(850)})
def flash3_fp8_figure(evidence: Evidence, threshold: AtLeast | RatioTo) -> Finding:
    """The warp-specialized stage carries the figure, as cuda.flash3_ws's pipeline carries
    cuda.flash3's; the first stage (one warpgroup) runs beside it for comparison."""
    return judge_figure(evidence, "cuda.flash3_fp8_ws", threshold)


# A prediction, not a measurement: the passes rotate Q and K twice (the amax pass, then the
# quantize pass), about 40 warp shuffles a row each time; at the figure shape ~42 M shuffles, ~170
# us on 132 SMs at one a clock, against a forward of ~2.3 ms: about 7 %.
HADAMARD_MAXIMUM_COST = 0.10


@judge("flash3-fp8-hadamard-cost", f"rotation <= {HADAMARD_MAXIMUM_COST:.0%} of the forward",
       steps=(FIGURES,))
def flash3_fp8_hadamard_cost(evidence: Evidence) -> Finding:
    """cuda.flash3_fp8_incoherent against cuda.flash3_fp8 on the same bf16 figure shape: both
    time their amax, quantize and layout passes, so the difference is the rotation's cost, in %
    of cuda.flash3_fp8's whole forward."""
    medians = {}
    for kernel in ("cuda.flash3_fp8", "cuda.flash3_fp8_incoherent"):
        timed = [r for _, r in figure_results(evidence, kernel, "bf16")
                 if r["status"] == "passed" and r.get("median_s")]
        if not timed:
            return unmeasured(f"no timed {kernel} result at the bf16 figure shape")
        medians[kernel] = timed[0]["median_s"]
    plain, rotated = medians["cuda.flash3_fp8"], medians["cuda.flash3_fp8_incoherent"]
    cost = (rotated - plain) / plain
    measured = f"{cost:+.1%} ({rotated * 1e6:.1f} us against {plain * 1e6:.1f} us)"
    why = "cuda.flash3_fp8_incoherent against cuda.flash3_fp8, bf16 in, at the figure shape"
    if cost > HADAMARD_MAXIMUM_COST:
        return failed(measured, why)
    return passed(measured, why)


# Issue 38's targets, on either card: cuDNN's speed at the figure shape, and causal at seqlen 16k
# at least 0.95x cudnn.sdpa's causal of the same run (was 550 TFLOP/s on an H200, 0.9x cuDNN on
# an H100, and causal 85 % of non-causal).
FLASH3_FIGURE = {"h100": RatioTo("cudnn.sdpa", 1.0), "h200": RatioTo("cudnn.sdpa", 1.0)}
FLASH3_CAUSAL_RATIO = 0.95  # of cudnn.sdpa's causal rate at seqlen 16k, same run
LONG_CONTEXT = 16384  # suites/gpu-figures.toml: seqlen 16k, batch 1, 4 heads of 128, bf16


def long_context_result(evidence: Evidence, mask: str, kernel: str = "cuda.flash3") -> dict | None:
    """`kernel`'s result (any status) at seqlen 16k with `mask` (none or causal) in the figures
    run."""
    for r in evidence.gpu_results(FIGURES, status=None):
        if (r["kernel"] == kernel and r["seqlen_q"] == LONG_CONTEXT == r["seqlen_k"]
                and r["batch"] == 1 and r["head_dim_qk"] == 128 and r["input_dtype"] == "bf16"
                and r["mask_kind"] == mask):
            return r
    return None


def stages_side_by_side(evidence: Evidence) -> str:
    """Each flash3 stage's measured TFLOP/s at the figure shape beside its time model's
    (flash3_time_model.h, stored as predicted_s), and cudnn.sdpa of the same run: shown, not
    judged."""
    shown = []
    for kernel in (*FLASH3_STAGES, "cudnn.sdpa"):
        timed = [r for _, r in figure_results(evidence, kernel)
                 if r["status"] == "passed" and r.get("flops_per_s")]
        if not timed:
            shown.append(f"{kernel} -")
            continue
        r = timed[0]
        model = (f" (model {r['flops_per_s'] * r['median_s'] / r['predicted_s'] / TERA:.0f})"
                 if r.get("predicted_s") and r.get("median_s") else "")
        shown.append(f"{kernel} {r['flops_per_s'] / TERA:.0f}{model}")
    return "TFLOP/s: " + ", ".join(shown)


@judge("flash3-figure", "{} at the figure shape, causal >= "
       f"{FLASH3_CAUSAL_RATIO:g}x cudnn.sdpa's causal at seqlen 16k (same run)", steps=(FIGURES,),
       per_model=FLASH3_FIGURE)
def flash3_figure(evidence: Evidence, threshold: AtLeast | RatioTo) -> Finding:
    """cuda.flash3 at the figure shape against its threshold; causal at seqlen 16k against
    cudnn.sdpa's causal of the same run (its causal / non-causal rate shown); the stages and
    cudnn.sdpa of the same run beside it, each with the time model's prediction."""
    figure = judge_figure(evidence, "cuda.flash3", threshold)
    side_by_side = stages_side_by_side(evidence)
    if figure.result != PASS:
        return Finding(figure.result, figure.measured, f"{figure.why}; {side_by_side}")
    full, causal = long_context_result(evidence, "none"), long_context_result(evidence, "causal")
    peer = long_context_result(evidence, "causal", "cudnn.sdpa")
    for kernel, r, mask in (("cuda.flash3", full, "non-causal"), ("cuda.flash3", causal, "causal"),
                            ("cudnn.sdpa", peer, "causal")):
        if r is None:
            return unmeasured(f"no {kernel} result at seqlen 16k {mask}", figure.measured)
        if r["status"] != "passed" or not r.get("flops_per_s"):
            return failed(figure.measured, f"{kernel} at seqlen 16k, mask {r['mask_kind']}: "
                                           f"{r['status']}: {(r.get('message') or '')[:80]}")
    ratio = causal["flops_per_s"] / peer["flops_per_s"]
    measured = f"{figure.measured}; causal {ratio:.2f}x cudnn.sdpa's"
    why = (f"{figure.why}; seqlen 16k: {full['flops_per_s'] / TERA:.0f} non-causal, "
           f"{causal['flops_per_s'] / TERA:.0f} causal "
           f"({causal['flops_per_s'] / full['flops_per_s']:.0%} of non-causal), cudnn.sdpa "
           f"{peer['flops_per_s'] / TERA:.0f} causal; {side_by_side}")
    if ratio >= FLASH3_CAUSAL_RATIO:
        return passed(measured, why)
    return failed(measured, f"causal below {FLASH3_CAUSAL_RATIO:g}x cudnn.sdpa's; {why}")


@judge("flash2-figure", "{}", any_step=(FIGURES, SMOKE),
       per_model={"h100": RatioTo("torch.sdpa_flash", 0.85),
                  "h200": RatioTo("torch.sdpa_flash", 0.85)})
def flash2_figure(evidence: Evidence, threshold: RatioTo) -> Finding:
    """cuda.flash2 against PyTorch's flash SDPA measured in the same run, so both saw the same
    clocks; the absolute TFLOP/s are shown, not judged."""
    return judge_figure(evidence, "cuda.flash2", threshold)


@judge("torch-peers-gpu", "torch.sdpa_flash and torch.sdpa_cudnn pass at the figure shape",
       any_step=(FIGURES, SMOKE))
def torch_peers_gpu(evidence: Evidence) -> Finding:
    """The shipped PyTorch peers run on the GPU host: its python3 and libpython load the bridge,
    torch runs on attnbench's stream, and the checker passes them."""
    measured, problems = [], []
    for kernel in ("torch.sdpa_flash", "torch.sdpa_cudnn"):
        results = figure_results(evidence, kernel)
        if not results:
            return unmeasured(no_figure_why(evidence, kernel))
        run, r = results[0]
        if r["status"] == "passed" and r.get("flops_per_s"):
            measured.append(f"{kernel} {r['flops_per_s'] / TERA:.1f} TFLOP/s")
        else:
            problems.append(f"{kernel} (run {run}): {r['status']}: {(r.get('message') or '')[:80]}")
    if problems:
        return failed(", ".join(measured) or "-", "; ".join(problems))
    return passed(", ".join(measured))


BACKWARD_PEERS = ("cudnn.sdpa", "cudnn.sdpa_deterministic", "torch.sdpa_flash", "torch.sdpa_cudnn")
BACKWARD_IN_HOUSE = ("cuda.naive", "cuda.naive_cublas", "cuda.flash2", "cuda.flash2_deterministic")


def judge_backward_cases(evidence: Evidence, kernels: tuple) -> Finding:
    """Every backward case (bwd or fwd_bwd) the figures and gpu-smoke steps ran of `kernels`
    passed: a deterministic kernel's pass includes its bit-for-bit rerun."""
    counts, problems = {}, []
    for step in (FIGURES, SMOKE):
        if step_gap(evidence, step):
            continue
        for r in evidence.gpu_results(step, status=None):
            if r["kernel"] not in kernels or r.get("pass", "fwd") == "fwd":
                continue
            if r["status"] == "skipped":
                continue
            counts[r["kernel"]] = counts.get(r["kernel"], 0) + 1
            if r["status"] != "passed":
                problems.append(f"{r['kernel']} {shape_text(r)}: {r['status']}: "
                                f"{(r.get('message') or '')[:80]}")
    measured = ", ".join(f"{kernel} {counts[kernel]}" for kernel in kernels if kernel in counts)
    if problems:
        return failed(measured or "-", first_issues(problems))
    missing = [kernel for kernel in kernels if kernel not in counts]
    if missing:
        return unmeasured(f"no backward case of {', '.join(missing)}", measured or "-")
    return passed(measured + " backward cases passed")


@judge("backward-gpu-correct", "every backward case of cudnn.sdpa, cudnn.sdpa_deterministic, "
       "torch.sdpa_flash and torch.sdpa_cudnn passes (the figure shape's and gpu-smoke's)",
       any_step=(FIGURES, SMOKE))
def backward_gpu_correct(evidence: Evidence) -> Finding:
    """The backward through attnbench on a GPU (issue 36): cuDNN's backward graphs (atomic and
    deterministic; the deterministic one rerun bit for bit, which its pass requires) and the
    PyTorch peers' autograd, each gradient within the checker's bound."""
    return judge_backward_cases(evidence, BACKWARD_PEERS)


@judge("flash2-backward-correct", "every backward case of cuda.naive, cuda.naive_cublas, "
       "cuda.flash2 and cuda.flash2_deterministic passes (the figure shape's and gpu-smoke's)",
       any_step=(FIGURES, SMOKE))
def flash2_backward_correct(evidence: Evidence) -> Finding:
    """The in-house backward kernels on a GPU (issue 37): the textbook ones (in-house GEMMs and
    cuBLAS), FlashAttention-2's with atomic dQ, and its deterministic variant (rerun bit for bit,
    which its pass requires)."""
    return judge_backward_cases(evidence, BACKWARD_IN_HOUSE)


@judge("flash2-backward-figure", "{}", any_step=(FIGURES, SMOKE),
       per_model={"h100": RatioTo("torch.sdpa_flash", 0.85),
                  "h200": RatioTo("torch.sdpa_flash", 0.85)})
def flash2_backward_figure(evidence: Evidence, threshold: RatioTo) -> Finding:
    """cuda.flash2's backward at the figure shape against PyTorch's flash backward
    (FlashAttention-2 inside PyTorch) in the same run."""
    return judge_figure(evidence, "cuda.flash2", threshold, pass_name="bwd")


@judge("flash2-deterministic-cost", "{}", any_step=(FIGURES, SMOKE),
       per_model={"h100": RatioTo("cuda.flash2", 0.8), "h200": RatioTo("cuda.flash2", 0.8)})
def flash2_deterministic_cost(evidence: Evidence, threshold: RatioTo) -> Finding:
    """What determinism costs: cuda.flash2_deterministic's backward at the figure shape against
    cuda.flash2's (atomic dQ) in the same run, and the extra memory of each (its per-split fp32
    dQ against one accumulator) shown beside."""
    figure = judge_figure(evidence, "cuda.flash2_deterministic", threshold, pass_name="bwd")
    memory = []
    for kernel in ("cuda.flash2", "cuda.flash2_deterministic"):
        results = figure_results(evidence, kernel, pass_name="bwd")
        if results and results[0][1].get("extra_memory_bytes") is not None:
            memory.append(f"{kernel} {results[0][1]['extra_memory_bytes'] / 2**20:.0f} MiB")
    if not memory:
        return figure
    return Finding(figure.result, f"{figure.measured}; extra memory {', '.join(memory)}",
                   figure.why)


@judge("cudnn-backward-figure", "{}", any_step=(FIGURES, SMOKE),
       per_model={"h100": RatioTo("torch.sdpa_cudnn", 0.95),
                  "h200": RatioTo("torch.sdpa_cudnn", 0.95)})
def cudnn_backward_figure(evidence: Evidence, threshold: RatioTo) -> Finding:
    """cudnn.sdpa's backward at the figure shape against PyTorch's cuDNN SDPA backward in the same
    run: the same library, so attnbench's graph should cost no more than PyTorch's use of it."""
    return judge_figure(evidence, "cudnn.sdpa", threshold, pass_name="bwd")


@judge("flash2-memory-launches", "extra memory and launches as cuda.flash2 declares them "
       "(0 and 1)", steps=(SMOKE,))
def flash2_memory_launches(evidence: Evidence) -> Finding:
    def issue(r):
        return first_issues([i for i in (memory_issue(r), launches_issue(r)) if i])
    def unjudged(r):
        return first_issues([w for what in ("extra_memory_bytes", "launches")
                             if (w := no_expectation_why(what)(r))])
    def describe(rows):
        return (f"extra memory {distinct_values(rows, 'extra_memory_bytes')} B, "
                f"launches {distinct_values(rows, 'launches')} ({len(rows)} results)")
    return judge_smoke_rule(evidence, ("cuda.flash2",), issue, describe, unjudged)


INHOUSE_KERNELS = NAIVE_FAMILY + ("cuda.flash1",)


@judge("inhouse-correct", "ctest suite passes for each", steps=(CTEST,))
def inhouse_correct(evidence: Evidence) -> Finding:
    return judge_tests(evidence, [name for k in INHOUSE_KERNELS
                                  for name in suite_tests(evidence, k)])


@judge("naive-memory", f"formula <= extra memory <= {MEMORY_TOLERANCE:g}x formula (each "
       "kernel's, stored with its result)", steps=(SMOKE,))
def naive_memory(evidence: Evidence) -> Finding:
    return judge_smoke_rule(evidence, INHOUSE_KERNELS, memory_issue, memory_ratios,
                            no_expectation_why("extra_memory_bytes"))


@judge("naive-launches", "launches = each kernel's declared count, stored with its result",
       steps=(SMOKE,))
def naive_launches(evidence: Evidence) -> Finding:
    return judge_smoke_rule(evidence, INHOUSE_KERNELS, launches_issue,
                            lambda rows: values_per_kernel(rows, "launches"),
                            no_expectation_why("launches"))


def problem_key(r: dict) -> tuple:
    return tuple(r[c] for c in ("batch", "heads_q", "heads_kv", "seqlen_q", "seqlen_k",
                                "head_dim_qk", "head_dim_v", "input_dtype", "mask_kind",
                                "window_left", "window_right", "layout"))


@judge("masked-predicted",
       "predicted_s beside every median; fused <= naive <= in place < out of place",
       steps=(SMOKE,))
def masked_predicted(evidence: Evidence) -> Finding:
    if not evidence.db:
        return unmeasured(f"no {DATABASE_FILE}")
    rows = [r for r in smoke_forwards(evidence) if r["kernel"] in NAIVE_FAMILY]
    if not rows:
        return unmeasured(f"no passed gpu-smoke result of {', '.join(NAIVE_FAMILY)}")
    issues = [f"{r['kernel']} {shape_text(r)}: no predicted_s beside its median" for r in rows
              if r.get("predicted_s") is None or r.get("median_s") is None]
    shapes: dict[tuple, dict] = {}
    for r in rows:
        if r.get("predicted_s") is not None:
            shapes.setdefault(problem_key(r), {})[r["kernel"]] = r["predicted_s"]
    compared = [(key, p) for key, p in shapes.items() if all(k in p for k in BYTES_ORDER)]
    for key, p in compared:
        fused, naive, inplace, outofplace = (p[k] for k in BYTES_ORDER)
        if not (fused <= naive <= inplace < outofplace):
            issues.append(f"shape {key}: predicted fused {fused:.3g}, naive {naive:.3g}, "
                          f"in place {inplace:.3g}, out of place {outofplace:.3g} s")
    beside = sum(1 for r in rows if r.get("predicted_s") is not None and r.get("median_s"))
    measured = (f"predicted beside {beside}/{len(rows)} medians; "
                f"order checked on {len(compared)} shapes")
    if issues:
        return failed(measured, first_issues(issues))
    if not compared:
        return unmeasured("no shape with all four kernels to compare", measured)
    return passed(measured)


@judge("l2-flush-clean", "the test passes; difference <= 10 %", steps=(TIMER,))
def l2_flush_clean(evidence: Evidence) -> Finding:
    found = judge_tests(evidence, [L2_FLUSH_TEST])
    outcome = evidence.tests.get(L2_FLUSH_TEST)
    difference = property_number(outcome, "difference_percent") if outcome else None
    if difference is None:
        return found
    measured = f"{difference:.2f} %"
    if found.result == PASS and difference > 10.0:
        return failed(measured, "the probe is slower after a flush by more than 10 %")
    return Finding(found.result, measured, found.why)


@judge("racecheck-clean", "0 hazards, every process", steps=(SANITIZER,))
def racecheck_clean(evidence: Evidence) -> Finding:
    return judge_sanitizer(evidence, "racecheck")


@judge("synccheck-clean", "0 errors, every process", steps=(SANITIZER,))
def synccheck_clean(evidence: Evidence) -> Finding:
    return judge_sanitizer(evidence, "synccheck")


TIMING_COLUMNS = ("forwards_timed", "timing_wall_s", "timing_stop")
TIMING_STOPS = ("stable", "repetitions", "budget")


def timing_issue(r: dict, budget: float) -> str | None:
    """What a timed result's plan broke. One repetition's wall time is the result's wall time
    over its repetitions: the planner may start a repetition just before the budget runs out."""
    forwards, stop = r.get("forwards_timed"), r.get("timing_stop")
    repetitions, wall = r.get("repetitions"), r.get("timing_wall_s")
    if not forwards or forwards <= 0:
        return f"forwards_timed {forwards}"
    if stop not in TIMING_STOPS:
        return f"timing_stop {stop!r}"
    if not repetitions or repetitions <= 0 or wall is None:
        return f"repetitions {repetitions}, wall {wall}"
    repetition = wall / repetitions
    if wall > (budget + repetition) * (1 + 1e-9):
        return f"wall {wall:.3f} s > {budget:g} s + one repetition ({repetition:.3f} s)"
    return None


@judge("timing-wall-plan", "forwards > 0, stop set, wall <= max_case_seconds + 1 repetition",
       any_step=(FIGURES, SMOKE))
def timing_wall_plan(evidence: Evidence) -> Finding:
    if not evidence.db:
        return unmeasured(f"no {DATABASE_FILE}")
    absent = [c for c in TIMING_COLUMNS if c not in evidence.db.columns("results")]
    if absent:
        return unmeasured(f"the database has no {', '.join(absent)} (results columns of schema "
                          "version 5)")
    issues, rows, budgets, unbudgeted = [], [], [], []
    for step in (FIGURES, SMOKE):
        if step_gap(evidence, step):
            continue
        timed = [r for r in evidence.gpu_results(step, status=None) if r.get("timed")]
        budget = evidence.case_budget(step)
        if budget is None:
            unbudgeted += [step] if timed else []
            continue
        budgets.append(f"{step} {budget:g} s")
        rows += timed
        issues += [f"{r['kernel']} {shape_text(r)}: {issue}" for r in timed
                   if (issue := timing_issue(r, budget))]
    threshold = ("forwards > 0, stop set, wall <= max_case_seconds"
                 + (f" ({', '.join(budgets)})" if budgets else "") + " + 1 repetition")
    stops = {stop: sum(1 for r in rows if r.get("timing_stop") == stop) for stop in TIMING_STOPS}
    walls = [r["timing_wall_s"] for r in rows if r.get("timing_wall_s") is not None]
    measured = (f"{len(rows)} timed results" + (f", wall <= {max(walls):.3f} s" if walls else "")
                + "; stopped " + ", ".join(f"{k} {v}" for k, v in stops.items()))
    if issues:
        return failed(measured, first_issues(issues), threshold=threshold)
    if unbudgeted:
        return unmeasured(f"no max_case_seconds for {', '.join(unbudgeted)}", measured,
                          threshold=threshold)
    if not rows:
        return unmeasured("no timed GPU result", threshold=threshold)
    return passed(measured, threshold=threshold)
