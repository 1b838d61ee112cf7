"""OUTDIR/summary.md of a gpu-check run, and the short table printed last.

    PYTHONPATH=ci python3 -m gpucheck.summary OUTDIR [--claims GPU-CLAIMS.md]

Reads what the run left in OUTDIR (claims.Evidence: evidence.json, attnbench.sqlite, the test
XML), any of it missing or partial after an interruption, and always writes summary.md: the run
(date, git, bundle, devices, versions, duration), its steps, ONE ROW PER CLAIM ID of
GPU-CLAIMS.md, the calibrations, the figure-shape results and the gpu-smoke results.
write_summary returns (and the command exits with) 1 when a claim failed, a step failed, or the
run was interrupted or is unfinished, else 0; a claim that could not be measured does not fail
the run, its row says why."""

from __future__ import annotations

import argparse
import datetime
import sys
from pathlib import Path

from gpucheck.claims import (FAIL, TERA, VERSION_FIELDS, ClaimsError, is_figure_shape,
                             judge_claim, parse_claims, run_environment, shape_text)
from gpucheck import experiment
from gpucheck.evidence import ENERGY, EXPERIMENT, FIGURES, SMOKE, Evidence

SUMMARY_FILE = "summary.md"
DEFAULT_CLAIMS = Path(__file__).resolve().parents[2] / "GPU-CLAIMS.md"
CLAIM_TEXT_LIMIT = 80
MESSAGE_LIMIT = 60

# ---- Markdown ----------------------------------------------------------------------------------


def cell(value) -> str:
    """A table cell: one line, pipes escaped, None as '-'."""
    if value is None or value == "":
        return "-"
    return " ".join(str(value).split()).replace("|", "\\|")


def table(header: list[str], rows: list[list]) -> str:
    """A Markdown table with columns padded to their widest cell, readable as plain text."""
    cells = [[cell(v) for v in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def shorten(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word, '...' marking the cut."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit - 3].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + "..."


def number(value, scale: float = 1, spec: str = ".0f") -> str:
    return "?" if value is None else format(value / scale, spec)


def on_off(value) -> str:
    return {1: "on", 0: "off"}.get(value, "?")


# ---- the run -----------------------------------------------------------------------------------


def run_date(evidence: Evidence) -> str:
    """When the run started (evidence.json), else now: the summary names the run, not the hour
    it was written."""
    started = (evidence.data or {}).get("started_at")
    try:
        moment = datetime.datetime.fromisoformat(str(started).replace("Z", "+00:00"))
    except ValueError:
        moment = datetime.datetime.now(datetime.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def banner_lines(evidence: Evidence) -> list[str]:
    """What a reader must know before trusting anything below."""
    lines = []
    if evidence.rehearsal:
        lines.append("**Rehearsal** (gpu-check --rehearse) on a machine without a GPU: the steps "
                     "that need one were not run, and no claim is measured.")
    if evidence.interrupted:
        lines.append(f"**Interrupted**: the run was {evidence.interruption()}; the steps after "
                     "it did not run, and what follows is what was measured before.")
    if evidence.unfinished():
        lines.append(f"**Unfinished**: {evidence.unfinished()}: gpu-check is still running, or "
                     "was killed before it could record an interruption.")
    if not evidence.found:
        lines.append("**No evidence.json**: gpu-check recorded no steps; every claim that needs "
                     "one reads not measured.")
    if evidence.db is None:
        lines.append("**No attnbench.sqlite**: no attnbench run reached the database.")
    for problem in evidence.problems_all():
        lines.append(f"**Could not read** {problem}")
    return [line for item in lines for line in (item, "")]


def git_line(evidence: Evidence) -> str:
    data, bundle = evidence.data or {}, evidence.bundle
    sha = bundle.get("git_sha") or data.get("git_sha") or "unknown"
    dirty = str(bundle.get("git_dirty") or data.get("git_dirty") or "").lower()
    line = f"- git: {sha}" + (" (dirty)" if dirty in ("yes", "1", "true") else "")
    if bundle:
        line += (f"; bundle built {bundle.get('built_at', '?')} on {bundle.get('built_on', '?')}"
                 f", CUDA architectures {bundle.get('cuda_architectures', '?')}")
    else:
        line += "; no bundle (built from source on this host, or setup did not finish)"
    return line


def device_lines(evidence: Evidence) -> list[str]:
    """From the database's devices table; nvidia-smi's line when no run stored a device."""
    lines = []
    for d in evidence.gpu_devices():
        lines.append(
            f"- device: {d['name']} ({d['uuid']}), sm_{d.get('sm_version') or '?'}, "
            f"{number(d.get('sm_count'))} SMs, {number(d.get('memory_bytes'), 2**30)} GiB, "
            f"L2 {number(d.get('l2_bytes'), 2**20)} MiB, max SM clock "
            f"{number(d.get('clock_mhz'))} MHz, power limit {number(d.get('power_limit_w'))} W, "
            f"ECC {on_off(d.get('ecc'))}, persistence {on_off(d.get('persistence'))}")
    if not lines:
        lines.append(f"- device (nvidia-smi): {evidence.gpu_line or 'unknown'}")
    lines.append(f"- device model: {evidence.device_model or 'none'} (the claims' thresholds are "
                 "taken for it; a claim stating none for it reads not judged)")
    return lines


def versions_line(evidence: Evidence) -> str:
    run = run_environment(evidence)
    if run is None:
        return "- versions: no attnbench run in the database"
    parts = [f"{label} {run.get(column) or '?'}" for column, label in VERSION_FIELDS]
    return f"- versions (run {run['id']}, host {run.get('host', '?')}): " + "; ".join(parts)


def duration_line(evidence: Evidence) -> str:
    line = f"- duration: {evidence.total_seconds():.0f} s of a {evidence.budget_s:g} s budget"
    started = (evidence.data or {}).get("started_at")
    return line + (f" (started {started})" if started else "")


def prechecks_line(evidence: Evidence) -> list[str]:
    prechecks = (evidence.data or {}).get("prechecks") or {}
    if not isinstance(prechecks, dict) or not prechecks:
        return []
    return ["- prechecks: " + "; ".join(f"{k} {v}" for k, v in prechecks.items())]


def step_rows(evidence: Evidence) -> list[list]:
    return [[s.name, s.result, number(s.seconds, spec=".1f"), number(s.predicted_s, spec=".0f"),
             s.detail] for s in evidence.steps.values()]


# ---- the database's sections -------------------------------------------------------------------


def calibration_rows(evidence: Evidence) -> list[list]:
    rows = []
    for c in evidence.db.calibrations() if evidence.db else []:
        unit, scale = ("TB/s", TERA) if c["kind"] == "copy" else ("TFLOP/s", TERA)
        value = "-" if c["value"] is None else f"{c['value'] / scale:.2f} {unit}"
        rows.append([c["device_name"], c["kind"], c["dtype"], value, c["details"]])
    return rows


def tflops(r: dict) -> str:
    return "-" if r.get("flops_per_s") is None else f"{r['flops_per_s'] / TERA:.1f}"


def micros(r: dict) -> str:
    return "-" if r.get("median_s") is None else f"{r['median_s'] * 1e6:.1f}"


def megahertz(r: dict) -> str:
    """The median SM clock of a result's samples (NVML, once per repetition)."""
    return "-" if r.get("sm_clock_mhz") is None else f"{r['sm_clock_mhz']:.0f}"


def timing_order(evidence: Evidence, step: str) -> str:
    """How a step's run timed its GPU cases (the figures', the experiment's): their titles say it."""
    return {True: "the kernels of each shape timed round-robin",
            False: "each case timed alone"}.get(evidence.gpus_interleaved(step),
                                                "timing order not stored")


def measured_or_dash(value) -> str:
    """Launches and extra memory are -1 when not measured."""
    return "-" if value is None or value < 0 else str(value)


def figure_rows(evidence: Evidence) -> list[list]:
    """Every result at the figure shape (bf16 or e4m3; each pass), figures run first, then
    gpu-smoke's."""
    rows = []
    for step in (FIGURES, SMOKE):
        for r in evidence.results(step):
            if any(is_figure_shape(r, dtype, r.get("pass", "fwd")) for dtype in ("bf16", "e4m3")):
                rows.append([evidence.run_id(step), r["kernel"], r.get("pass", "fwd"),
                             r["input_dtype"], r["status"],
                             tflops(r), megahertz(r), micros(r),
                             measured_or_dash(r.get("launches")),
                             measured_or_dash(r.get("extra_memory_bytes")),
                             r.get("forwards_timed"), r.get("repetitions"),
                             r.get("timing_stop")])
    return rows


def smoke_rows(evidence: Evidence) -> list[list]:
    rows = []
    for r in evidence.results(SMOKE):
        error = ("-" if r.get("max_abs_error") is None or r.get("bound") is None
                 else f"{r['max_abs_error']:.2e} / {r['bound']:.2e}")
        rows.append([r["kernel"], shape_text(r), r["status"], micros(r), tflops(r), error,
                     measured_or_dash(r.get("launches")),
                     shorten(r.get("message") or "", MESSAGE_LIMIT)])
    return rows


def status_counts(rows: list[dict]) -> str:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no results"


def energy_lines(evidence: Evidence) -> list[str]:
    return [f"- {r['kernel']} {shape_text(r)}: {r['energy_j'] * 1e3:.2f} mJ per forward"
            for r in evidence.results(ENERGY) if r.get("energy_j") is not None]


# ---- the document ------------------------------------------------------------------------------


CLAIM_COLUMNS = ["id", "claim", "threshold", "judged for", "measured", "result", "why"]


def claim_rows(verdicts: list) -> list[list]:
    return [[claim.id, shorten(claim.text.replace("`", ""), CLAIM_TEXT_LIMIT), v.threshold,
             v.judged_for, v.measured, v.result, v.why] for claim, v in verdicts]


def section(title: str, body: str | list[str]) -> list[str]:
    lines = body if isinstance(body, list) else [body]
    return [f"## {title}", "", *lines, ""]


def render(evidence: Evidence, verdicts: list, claims_error: str | None) -> str:
    md = [f"# attnbench GPU check, {run_date(evidence)}", "", *banner_lines(evidence)]
    md += [git_line(evidence), *device_lines(evidence), versions_line(evidence),
           duration_line(evidence), *prechecks_line(evidence), ""]
    steps = step_rows(evidence)
    md += section("Steps", table(["step", "result", "seconds", "predicted seconds", "detail"],
                                 steps) if steps else "no step recorded")
    if claims_error:
        claims_body = f"**GPU-CLAIMS.md could not be read**: {claims_error}"
    else:
        claims_body = table(CLAIM_COLUMNS, claim_rows(verdicts))
    md += section("Claims (GPU-CLAIMS.md)", claims_body)
    calibrations = calibration_rows(evidence)
    md += section("Calibrations", table(["device", "kind", "dtype", "value", "how"], calibrations)
                  if calibrations else "none")
    figures = figure_rows(evidence)
    md += section("Figures (16k tokens, seqlen 8192, 16 heads of 128, no mask; "
                  f"{timing_order(evidence, FIGURES)})",
                  table(["run", "kernel", "pass", "dtype", "status", "TFLOP/s", "median SM MHz",
                         "median us", "launches", "extra memory B", "forwards timed",
                         "repetitions", "timing stop"],
                        figures) if figures else "no result at the figure shapes")
    smoke = smoke_rows(evidence)
    md += section(f"gpu-smoke (run {evidence.run_id(SMOKE) or '-'}: "
                  f"{status_counts(evidence.results(SMOKE))})",
                  table(["kernel", "shape", "status", "median us", "TFLOP/s", "error / bound",
                         "launches", "message"], smoke) if smoke else "no results")
    energy = energy_lines(evidence)
    if energy:
        md += section(f"Energy (run {evidence.run_id(ENERGY)})", energy)
    if (evidence.data or {}).get("experiment"):
        md += experiment_sections(evidence)
    return "\n".join(md)


def experiment_sections(evidence: Evidence) -> list[str]:
    """--experiment flash3: the rounds' results with their ratio to cuDNN and their clocks, the
    clock probe's waits per key tile, then what Nsight Compute found per variant."""
    run_id = evidence.run_id(EXPERIMENT)
    rounds = experiment.rounds_rows(evidence.results(EXPERIMENT),
                                    evidence.db.samples(run_id) if evidence.db else [])
    ncu = experiment.ncu_rows((evidence.data or {}).get("ncu"))
    probe = experiment.probe_rows(evidence.results(EXPERIMENT))
    return [*section(f"Experiment flash3: rounds (run {run_id or '-'}; "
                     f"{timing_order(evidence, EXPERIMENT)})",
                     table(["kernel", "shape", "status", "TFLOP/s",
                            f"vs {experiment.FLASH3_BASELINE}", "median SM MHz", "SM MHz range",
                            "clock reasons", "samples"], rounds) if rounds else "no results"),
            *section("Experiment flash3: clock64 probe (SM clocks per key tile of one consumer "
                     "warpgroup, the last forward of its case; its reads perturb its own time)",
                     table(["kernel", "shape", "wait", "clocks per key tile", "of the mainloop"],
                           probe) if probe else "no probe result"),
            *section("Experiment flash3: Nsight Compute (--clock-control none)",
                     table(["kernel", "metric", "value"], ncu) if ncu else "not run")]


def render_claims_only(evidence: Evidence, verdicts: list, error: Exception) -> str:
    """What is left to say when a section broke on data nobody foresaw: the claims, which are
    what a GPU run is for, and the error to fix."""
    return "\n".join([f"# attnbench GPU check, {run_date(evidence)}", "",
                      f"**Summary incomplete**: writing it failed with {type(error).__name__}: "
                      f"{error}", "",
                      *section("Claims (GPU-CLAIMS.md)",
                               table(CLAIM_COLUMNS, claim_rows(verdicts)))])


def exit_status(evidence: Evidence, verdicts: list, claims_error: str | None) -> int:
    failed_steps = [s for s in evidence.steps.values() if s.result in ("fail", "interrupted")]
    failed_claims = [v for _, v in verdicts if v.result == FAIL]
    # No evidence.json: gpu-check never recorded a step, so nothing here can count as a pass.
    broken = (claims_error or evidence.interrupted or evidence.unfinished()
              or not evidence.found)
    return 1 if failed_steps or failed_claims or broken else 0


def print_tables(evidence: Evidence, verdicts: list) -> None:
    """The end of gpu-check's output: steps, then claims, short enough for a terminal."""
    print()
    print(table(["step", "result", "seconds", "detail"],
                [[s.name, s.result, number(s.seconds, spec=".1f"), shorten(s.detail, 60)]
                 for s in evidence.steps.values()]))
    print()
    print(table(["claim", "result", "measured"],
                [[claim.id, v.result, shorten(v.measured, 60)] for claim, v in verdicts]))


def write_summary(outdir, claims_path=DEFAULT_CLAIMS) -> int:
    """Writes OUTDIR/summary.md from whatever the run left, prints the short tables, and returns
    1 when a claim or a step failed (or the run was interrupted or is unfinished), else 0.
    gpu-check calls it after every step, so it stays quick and never holds the database."""
    outdir = Path(outdir)
    evidence = Evidence(outdir)
    try:
        claims, claims_error = parse_claims(claims_path), None
    except (OSError, ClaimsError) as error:
        claims, claims_error = [], str(error)
    verdicts = []
    try:
        verdicts = [(claim, judge_claim(claim, evidence)) for claim in claims]
        text = render(evidence, verdicts, claims_error)
    except Exception as error:  # noqa: BLE001 -- the summary is written whatever the data
        text = render_claims_only(evidence, verdicts, error)
        claims_error = claims_error or f"summary incomplete: {error}"
    finally:
        evidence.close()
    # Whole or not at all: gpu-check may be killed while writing it.
    partial = outdir / (SUMMARY_FILE + ".partial")
    partial.write_text(text + "\n", encoding="utf-8")
    partial.replace(outdir / SUMMARY_FILE)
    print_tables(evidence, verdicts)
    if claims_error:
        print(f"gpu-check: {claims_error}", file=sys.stderr)
    return exit_status(evidence, verdicts, claims_error)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m gpucheck.summary",
                                     description="Write OUTDIR/summary.md of a gpu-check run.")
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--claims", type=Path, default=DEFAULT_CLAIMS,
                        help="the claims table (default: the repository's GPU-CLAIMS.md)")
    arguments = parser.parse_args(argv)
    if not arguments.outdir.is_dir():
        parser.error(f"{arguments.outdir} is not a folder")
    return write_summary(arguments.outdir, arguments.claims)


if __name__ == "__main__":
    sys.exit(main())
