"""gpu-check's summary (ci/gpucheck/summary.py) and its judges (ci/gpucheck/claims.py) against
synthetic OUTDIRs (gpucheck_outdir.py): every claim id of GPU-CLAIMS.md gets a judge and a row;
figures pass and fail at their thresholds with the measured value shown; cuda.flash2 is judged
only against torch.sdpa_flash of the same run; an interrupted run with no database still gets a
summary that says so; an id without a judge fails; steps not reached, another GPU, an older
schema and broken rules read as they should.

    PYTHONPATH=ci python3 -m pytest -q ci/tests/test_gpucheck_summary.py"""

import contextlib
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gpucheck.claims import (FAIL, JUDGES, NOT_MEASURED, PASS, ClaimsError, parse_claims,
                             split_row)
from gpucheck.summary import write_summary
from gpucheck_outdir import (CASE_BUDGETS, CUDNN_SHARDS, GPU_UUID, SMOKE_SHAPES, STARTED,
                             SUITE_TEST, Scenario, build_outdir, write_evidence)
from reports.tests.fixtures import Case

ROOT = Path(__file__).resolve().parents[2]
LIVE_CLAIMS = ROOT / "GPU-CLAIMS.md"


def every_judged_claim(path: Path) -> Path:
    """A claims table with a row for every judge, in the judges' order: a GPU run deletes the
    claims it proved from GPU-CLAIMS.md, and their judges stay to judge the next run."""
    rows = [f"| {claim_id} | The claim {claim_id} | a synthetic run | not yet measured |"
            for claim_id in JUDGES]
    path.write_text("# Every judged claim\n\n| id | claim | proven by | status |\n|---|---|---|---|\n"
                    + "\n".join(rows) + "\n")
    return path


_CLAIMS_DIR = tempfile.TemporaryDirectory(prefix="gpucheck-claims.")  # removed at exit
CLAIMS = every_judged_claim(Path(_CLAIMS_DIR.name) / "GPU-CLAIMS.md")
# The claims gpu-check cannot measure on its one-H200 host, or within its 240 s plan.
HOST_LIMITED = {"multi-gpu", "nvtx", "a100", "nightly-10min"}
# The claims whose threshold is stated per device model (an absolute figure, or a ratio to a peer
# stated for the Hoppers); every other claim is judged on any GPU.
PER_MODEL = {"cudnn-figure", "cudnn-fp8-figure", "flash2-figure", "flash3-figure",
             "flash3-fp8-figure", "calibrate-bf16-gemm", "calibrate-copy",
             "cudnn-backward-figure", "flash2-backward-figure", "flash2-deterministic-cost"}
# Of those, the ones stated for the H200 only: an H100 run reads them "not judged".
H200_ONLY = {"cudnn-figure", "cudnn-fp8-figure"}
COLUMNS = ("id", "claim", "threshold", "judged for", "measured", "result", "why")


def summary_claims(outdir: Path) -> dict[str, dict]:
    """The rows of summary.md's claims table, by id, in order."""
    lines = (outdir / "summary.md").read_text().splitlines()
    start = lines.index("## Claims (GPU-CLAIMS.md)")
    rows = {}
    for line in lines[start + 4:]:  # title, blank line, header, separator
        if not line.startswith("|"):
            break
        cells = split_row(line)
        assert len(cells) == len(COLUMNS), line
        assert cells[0] not in rows, f"two rows for {cells[0]}"
        rows[cells[0]] = dict(zip(COLUMNS, cells))
    return rows


def summarize(outdir: Path, claims_path: Path = CLAIMS) -> tuple[int, dict[str, dict]]:
    status = write_summary(outdir, claims_path)
    return status, summary_claims(outdir)


def tflops(value: float) -> str:
    return f"{value / 1e12:.1f} TFLOP/s"


# ---- (a) every claim id has a judge and a row --------------------------------------------------


def test_every_claim_id_has_a_judge_and_a_row_and_a_healthy_run_passes_them(tmp_path, rng):
    live = [claim.id for claim in parse_claims(LIVE_CLAIMS)]
    assert [i for i in live if i not in JUDGES] == [], "claims of GPU-CLAIMS.md without a judge"
    ids = [claim.id for claim in parse_claims(CLAIMS)]
    # The ids the issues name, so that a renamed or dropped id shows here.
    for required in ("flash2-figure", "flash2-correct", "l2-flush-clean", "racecheck-clean",
                     "synccheck-clean", "timing-wall-plan", "gpu-check-budget", *HOST_LIMITED,
                     *PER_MODEL):
        assert required in ids

    built = build_outdir(tmp_path, rng)
    status, rows = summarize(tmp_path)

    assert list(rows) == ids  # one row per id, in GPU-CLAIMS.md's order, flash2's included
    results = {claim_id: row["result"] for claim_id, row in rows.items()}
    assert {i for i, r in results.items() if r == NOT_MEASURED} == HOST_LIMITED, rows
    assert {i for i, r in results.items() if r == PASS} == set(ids) - HOST_LIMITED, rows
    assert status == 0
    # The healthy run's figures, as stored, beside their claims.
    assert rows["cudnn-figure"]["measured"] == tflops(built.flops_per_s["cudnn.sdpa"])
    assert rows["cudnn-fp8-figure"]["measured"] == tflops(built.flops_per_s["cudnn.sdpa_fp8"])
    assert rows["flash3-fp8-figure"]["measured"] == tflops(built.flops_per_s["cuda.flash3_fp8_ws"])
    assert rows["flash3-fp8-hadamard-cost"]["measured"].startswith("+2.0% (")
    gemm = built.calibrations[("gemm", "bf16")]
    assert rows["calibrate-bf16-gemm"]["measured"] == f"{gemm / 1e12:.1f} TFLOP/s"
    copy = built.calibrations[("copy", "bytes")]
    assert rows["calibrate-copy"]["measured"] == f"{copy / 1e12:.2f} TB/s"
    assert rows["timer-cross-check"]["measured"].startswith("1.50 %")


def test_summary_holds_the_run_devices_versions_steps_and_results(tmp_path, rng):
    built = build_outdir(tmp_path, rng)
    write_summary(tmp_path, CLAIMS)
    text = (tmp_path / "summary.md").read_text()

    assert text.startswith(f"# attnbench GPU check, {STARTED:%Y-%m-%d %H:%M} UTC\n")
    assert f"- git: {'c' * 40}; bundle built 2026-12-02T18:00:00Z on build-1" in text
    assert (f"- device: NVIDIA H200 ({GPU_UUID}), sm_90, 132 SMs, 140 GiB, L2 60 MiB, max SM "
            "clock 1980 MHz, power limit 700 W, ECC on, persistence on") in text
    assert "cuDNN compiled 9.19.0, loaded 9.19.0; cudnn-frontend 1.16.0" in text
    assert f"- duration: {built.evidence['elapsed_s']:.0f} s of a 300 s budget" in text
    for step in built.evidence["steps"]:
        assert f"| {step['name']} " in text
    assert "## Calibrations" in text and "## Figures" in text and "## gpu-smoke (run " in text
    # Each result's shape as attnbench stored it (cases.shape).
    smoke = Case("cuda.masked_outofplace", **SMOKE_SHAPES[0])
    assert re.search(rf"cuda\.masked_outofplace +\| {re.escape(smoke.shape)} +\|", text), text
    backward = Case("cudnn.sdpa_deterministic", pass_name="bwd", **SMOKE_SHAPES[0])
    assert backward.shape.endswith(",pass=bwd") and f"| {backward.shape} |" in text
    assert "## Energy" in text and "mJ per forward" in text


def test_the_figures_show_each_results_median_clock_and_how_they_were_timed(tmp_path, rng):
    """Issue 38: kernels compared within a few percent on a chip at its power cap are timed
    round-robin, and every figure shows the median SM clock of its samples beside its rate."""
    build_outdir(tmp_path, rng)
    db = sqlite3.connect(tmp_path / "attnbench.sqlite")
    stored = {kernel: clock for kernel, clock in db.execute(
        "SELECT c.kernel, r.sm_clock_mhz FROM results r JOIN cases c ON c.id = r.case_id"
        " JOIN runs u ON u.id = r.run_id WHERE u.suite = 'gpu-figures' AND c.kernel = 'cudnn.sdpa'"
        " AND c.input_dtype = 'bf16' AND c.seqlen_k = 8192 AND c.pass = 'fwd'")}
    write_summary(tmp_path, CLAIMS)
    text = (tmp_path / "summary.md").read_text()
    assert "## Figures (16k tokens, seqlen 8192, 16 heads of 128, no mask; the kernels of each " \
           "shape timed round-robin)" in text
    figures = text[text.index("## Figures"):text.index("## gpu-smoke")]
    header = next(line for line in figures.splitlines() if line.startswith("| run "))
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert columns[5:8] == ["TFLOP/s", "median SM MHz", "median us"], columns
    row = next(line for line in figures.splitlines()
               if re.match(r"\| \d+ +\| cudnn\.sdpa +\| fwd +\| bf16 ", line))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[6] == f"{stored['cudnn.sdpa']:.0f}", (cells, stored)


def test_the_flash3_experiment_shows_each_variant_against_cudnn_with_its_clocks(tmp_path, rng):
    """--experiment flash3: every result of the rounds with its ratio to cudnn.sdpa of the same
    shape, computed from the stored rates, and its samples' clocks and reasons."""
    rates = {"cudnn.sdpa": rng.uniform(600, 620), "cuda.flash3": rng.uniform(520, 640),
             "cuda.flash3[stages=2]": rng.uniform(500, 600),
             "cuda.flash3[probe=clock64]": rng.uniform(450, 600)}
    waits = ("k_full_wait", "v_full_wait", "turn_wait", "scores_wait", "output_wait")
    probe = {wait: rng.uniform(0, 400) for wait in waits}
    probe["mainloop"] = sum(probe.values()) + rng.uniform(500, 1500)
    built = build_outdir(tmp_path, rng, Scenario(experiment_tflops=rates, experiment_probe=probe))
    write_summary(tmp_path, CLAIMS)
    text = (tmp_path / "summary.md").read_text()
    run_id = built.evidence["runs"]["experiment"]
    assert (f"## Experiment flash3: rounds (run {run_id}; the kernels of each shape timed "
            "round-robin)") in text
    rounds = text[text.index("## Experiment flash3: rounds"):]
    db = sqlite3.connect(tmp_path / "attnbench.sqlite")
    for kernel in rates:
        stored = built.flops_per_s[("experiment", kernel)]
        ratio = stored / built.flops_per_s[("experiment", "cudnn.sdpa")]
        clocks = [c for (c,) in db.execute(
            "SELECT s.sm_clock_mhz FROM samples s JOIN results r ON r.id = s.result_id"
            " JOIN cases c ON c.id = r.case_id WHERE r.run_id = ? AND c.kernel = ?",
            (run_id, kernel))]
        row = next(line for line in rounds.splitlines()
                   if line.startswith(f"| {kernel} ") and "passed" in line)
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[3] == f"{stored / 1e12:.1f}", cells
        assert cells[4] == f"{ratio:.3f}x", cells
        assert cells[6] == f"{min(clocks):.0f}-{max(clocks):.0f}", cells
        assert cells[7] == "sw_power_cap" and cells[8] == str(len(clocks)), cells
    # The probe's waits per key tile, each with its share of the mainloop's clocks.
    probed = text[text.index("## Experiment flash3: clock64 probe"):]
    for wait, clocks in probe.items():
        row = next(line for line in probed.splitlines() if f"| {wait} " in line)
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[0] == "cuda.flash3[probe=clock64]", cells
        assert cells[3] == f"{clocks:.0f}", cells
        assert cells[4] == f"{100 * clocks / probe['mainloop']:.1f} %", cells
    assert "## Experiment flash3: Nsight Compute (--clock-control none)\n\nnot run" in text


# ---- (b) figures against their thresholds ------------------------------------------------------


def test_a_figure_above_its_threshold_passes_and_one_below_fails(tmp_path, rng):
    scenario = Scenario(cudnn_tflops=rng.uniform(601, 780), fp8_tflops=rng.uniform(700, 899))
    built = build_outdir(tmp_path, rng, scenario)
    status, rows = summarize(tmp_path)

    cudnn, fp8 = rows["cudnn-figure"], rows["cudnn-fp8-figure"]
    assert (cudnn["result"], cudnn["threshold"]) == (PASS, ">= 600 TFLOP/s")
    assert cudnn["measured"] == tflops(built.flops_per_s["cudnn.sdpa"])
    assert (fp8["result"], fp8["threshold"]) == (FAIL, ">= 900 TFLOP/s")
    assert fp8["measured"] == tflops(built.flops_per_s["cudnn.sdpa_fp8"])
    assert fp8["why"].startswith("below 900 TFLOP/s")
    assert status == 1  # a failed claim fails the run
    figures = (tmp_path / "summary.md").read_text()
    assert f"| {built.flops_per_s['cudnn.sdpa_fp8'] / 1e12:.1f} " in figures


def test_calibrations_below_their_thresholds_fail(tmp_path, rng):
    build_outdir(tmp_path, rng)
    gemm, copy = rng.uniform(400, 699), rng.uniform(2.0, 3.99)
    with contextlib.closing(sqlite3.connect(tmp_path / "attnbench.sqlite")) as db, db:
        db.execute("UPDATE calibrations SET value = ? WHERE kind = 'gemm' AND dtype = 'bf16'",
                   (gemm * 1e12,))
        db.execute("UPDATE calibrations SET value = ? WHERE kind = 'copy'", (copy * 1e12,))
    status, rows = summarize(tmp_path)
    assert rows["calibrate-bf16-gemm"]["result"] == FAIL
    assert rows["calibrate-bf16-gemm"]["measured"] == f"{gemm:.1f} TFLOP/s"
    assert rows["calibrate-copy"]["result"] == FAIL
    assert rows["calibrate-copy"]["measured"] == f"{copy:.2f} TB/s"
    assert status == 1


# ---- (c) cuda.flash2 against torch.sdpa_flash of the same run ------------------------------------


def test_flash2_is_not_measured_without_torch_sdpa_flash(tmp_path, rng):
    built = build_outdir(tmp_path, rng, Scenario(torch_tflops=None,
                                                 flash2_tflops=rng.uniform(200, 600)))
    status, rows = summarize(tmp_path)
    row = rows["flash2-figure"]
    assert row["result"] == NOT_MEASURED
    assert row["why"] == "no torch.sdpa_flash result in this run"
    assert row["measured"] == tflops(built.flops_per_s["cuda.flash2"])  # shown, not judged
    assert status == 0  # not measured is no failure


@pytest.mark.parametrize("ratio, result", [(0.9, PASS), (0.7, FAIL)])
def test_flash2_is_judged_against_torch_sdpa_flash(tmp_path, rng, ratio, result):
    torch = rng.uniform(400, 700)
    built = build_outdir(tmp_path, rng, Scenario(torch_tflops=torch, flash2_tflops=ratio * torch))
    status, rows = summarize(tmp_path)
    row = rows["flash2-figure"]
    mine, peer = built.flops_per_s["cuda.flash2"], built.flops_per_s["torch.sdpa_flash"]
    assert row["result"] == result
    assert row["threshold"] == ">= 0.85x torch.sdpa_flash (same run)"
    assert row["measured"] == f"{mine / peer:.2f}x ({mine / 1e12:.1f} vs {peer / 1e12:.1f} TFLOP/s)"
    assert status == (0 if result == PASS else 1)


@pytest.mark.parametrize("flash3, causal_ratio, result, why", [
    (670.0, 0.93, PASS, ""),
    (600.0, 0.93, FAIL, "below 1x cudnn.sdpa"),
    (670.0, 0.85, FAIL, "causal below 0.95x cudnn.sdpa's"),
])
def test_flash3_is_judged_against_cudnn_at_the_figure_shape_and_causal_at_16k(
        tmp_path, rng, flash3, causal_ratio, result, why):
    built = build_outdir(tmp_path, rng, Scenario(flash3_tflops=flash3,
                                                 flash3_causal_ratio=causal_ratio))
    status, rows = summarize(tmp_path)
    row = rows["flash3-figure"]
    assert row["result"] == result, row
    assert row["threshold"].startswith(">= 1x cudnn.sdpa (same run) at the figure shape")
    mine, peer = built.flops_per_s["cuda.flash3"], built.flops_per_s["cudnn.sdpa"]
    assert row["measured"].startswith(f"{mine / peer:.2f}x (")
    assert why in row["why"]
    # The stages and cuDNN, measured, each stage beside its time model's TFLOP/s.
    for stage in ("cuda.flash3_wg1", "cuda.flash3_ws", "cuda.flash3_pingpong"):
        assert f"{stage} {built.flops_per_s[stage] / 1e12:.0f} (model 766)" in row["why"], row
    assert f"cudnn.sdpa {built.flops_per_s['cudnn.sdpa'] / 1e12:.0f}" in row["why"]
    if result == PASS or "causal" in why:
        causal = (built.long_context[("cuda.flash3", "causal")]
                  / built.long_context[("cudnn.sdpa", "causal")])
        assert row["measured"].endswith(f"causal {causal:.2f}x cudnn.sdpa's"), row
    assert status == (0 if result == PASS else 1)


def test_flash3_causal_without_cudnns_causal_at_16k_is_not_measured(tmp_path, rng):
    build_outdir(tmp_path, rng, Scenario(cudnn_causal_ratio=None))
    _, rows = summarize(tmp_path)
    assert rows["flash3-figure"]["result"] == NOT_MEASURED, rows["flash3-figure"]
    assert rows["flash3-figure"]["why"] == "no cudnn.sdpa result at seqlen 16k causal"


def test_flash3_without_its_figure_is_not_measured(tmp_path, rng):
    build_outdir(tmp_path, rng, Scenario(flash3_tflops=None))
    _, rows = summarize(tmp_path)
    assert rows["flash3-figure"]["result"] == NOT_MEASURED
    assert rows["flash3-figure"]["why"].startswith("no cuda.flash3 result at the figure shape")


@pytest.mark.parametrize("cost, result", [(0.06, PASS), (0.15, FAIL)])
def test_the_hadamard_cost_is_the_incoherent_kernels_extra_time_over_the_plain_one(
        tmp_path, rng, cost, result):
    build_outdir(tmp_path, rng, Scenario(flash3_fp8_bf16_tflops=rng.uniform(300, 800),
                                         hadamard_cost=cost))
    status, rows = summarize(tmp_path)
    row = rows["flash3-fp8-hadamard-cost"]
    assert (row["result"], row["threshold"]) == (result, "rotation <= 10% of the forward"), row
    assert row["measured"].startswith(f"+{cost:.1%} (")
    assert status == (0 if result == PASS else 1)


def test_the_hadamard_cost_without_the_bf16_figures_is_not_measured(tmp_path, rng):
    build_outdir(tmp_path, rng, Scenario(flash3_fp8_bf16_tflops=None))
    _, rows = summarize(tmp_path)
    row = rows["flash3-fp8-hadamard-cost"]
    assert row["result"] == NOT_MEASURED
    assert row["why"] == "no timed cuda.flash3_fp8 result at the bf16 figure shape"


# ---- (d) an interrupted run with no database ----------------------------------------------------


def test_an_interrupted_run_without_a_database_still_gets_a_summary(tmp_path, capsys):
    write_evidence(tmp_path, {
        "started_at": "2026-12-03T10:00:00Z", "budget_s": 300, "finished": False,
        "interrupted": {"signal": "TERM", "step": "ctest"},
        "gpu": f"GPU 0: NVIDIA H200 (UUID: {GPU_UUID})", "bundle": {}, "git_sha": "d" * 40,
        "prechecks": {"ctest": "ok"},
        "steps": [{"name": "setup", "result": "pass", "seconds": 41.0, "predicted_s": 40,
                   "detail": "built from source"},
                  {"name": "ctest", "result": "interrupted", "seconds": 12.5, "predicted_s": 80,
                   "detail": ""}],
        "runs": {}, "ctest_junit": "ctest.xml", "timer_xml": "timer.xml"})
    status, rows = summarize(tmp_path)
    text = (tmp_path / "summary.md").read_text()

    assert "**Interrupted**: the run was interrupted (signal TERM) during step ctest" in text
    assert "**No attnbench.sqlite**" in text
    assert "| ctest " in text and "| interrupted " in text
    assert list(rows) == [claim.id for claim in parse_claims(CLAIMS)]
    assert {row["result"] for row in rows.values()} == {NOT_MEASURED}, rows
    assert rows["cudnn-correct"]["why"] == "step ctest interrupted (signal TERM)"
    assert rows["naive-launches"]["why"] == ("step gpu-smoke not run: interrupted (signal TERM) "
                                             "during step ctest")
    assert rows["require-gpu"]["why"] == ("steps figures, sanitizer, gpu-smoke not run: "
                                          "interrupted (signal TERM) during step ctest")
    assert rows["gpu-check-budget"]["why"] == "interrupted (signal TERM) during step ctest"
    assert rows["bundle-runs"]["why"].startswith("built from source")
    assert status == 1
    printed = capsys.readouterr().out
    assert printed.index("| step") < printed.index("| claim")  # steps, then claims, last


def test_a_summary_written_between_steps_says_the_run_is_unfinished(tmp_path, rng):
    # run.py rewrites the summary after every step: one killed outright (SIGKILL) leaves this.
    built = build_outdir(tmp_path, rng)
    built.evidence.update(finished=False, steps=built.evidence["steps"][:3])
    write_evidence(tmp_path, built.evidence)
    status, rows = summarize(tmp_path)
    assert ("**Unfinished**: the run had not finished (last step recorded: ctest)"
            in (tmp_path / "summary.md").read_text())
    assert rows["gpu-check-budget"]["result"] == NOT_MEASURED
    assert rows["gpu-check-budget"]["why"] == ("the run had not finished "
                                               "(last step recorded: ctest)")
    assert rows["naive-launches"]["why"] == "step gpu-smoke not run (not in evidence.json)"
    assert rows["cudnn-figure"]["result"] == PASS  # what was measured still counts
    assert status == 1


def test_an_empty_outdir_gets_a_summary_that_proves_nothing(tmp_path):
    status, rows = summarize(tmp_path)
    assert "**No evidence.json**" in (tmp_path / "summary.md").read_text()
    assert {row["result"] for row in rows.values()} == {NOT_MEASURED}
    assert status == 1


# ---- (e) a claim without a judge -----------------------------------------------------------------


def test_a_claim_without_a_judge_fails(tmp_path, rng):
    build_outdir(tmp_path / "out", rng)
    claims = tmp_path / "GPU-CLAIMS.md"
    unjudged = f"unjudged-claim-{rng.randrange(10**6)}"
    row = f"| {unjudged} | Something nobody measures | nothing | not yet measured |"
    claims.write_text(CLAIMS.read_text().rstrip("\n") + f"\n{row}\n")
    assert unjudged not in JUDGES

    status, rows = summarize(tmp_path / "out", claims)
    assert rows[unjudged]["result"] == FAIL
    assert rows[unjudged]["why"] == "no judge for this claim"
    assert status == 1


def test_claims_table_errors_name_the_line(tmp_path):
    lines = CLAIMS.read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("| bundle-runs |"))
    second = next(i for i, line in enumerate(lines) if line.startswith("| require-gpu |"))
    # What to do to the first row, the (1-based) line the error names, and what it says.
    cases = {
        "no id": (lambda row: "|  " + row[len("| bundle-runs "):], first + 1,
                  "a claim with no id"),
        "duplicate": (lambda row: row.replace("| bundle-runs |", "| require-gpu |"),
                      second + 1, f"duplicate id 'require-gpu' (first on line {first + 1})"),
        "old format": (lambda row: "|" + row.split("|", 2)[2], first + 1,
                       "3 cells where the header has 4 (is the id column missing?)"),
    }
    for name, (change, line, message) in cases.items():
        broken = list(lines)
        broken[first] = change(lines[first])
        path = tmp_path / f"{name}.md"
        path.write_text("\n".join(broken) + "\n")
        with pytest.raises(ClaimsError) as error:
            parse_claims(path)
        assert str(error.value) == f"{path}:{line}: {message}", name


def test_an_unreadable_claims_table_still_writes_the_summary_and_fails(tmp_path, rng):
    build_outdir(tmp_path, rng)
    broken = tmp_path / "claims.md"
    broken.write_text("# no table here\n")
    assert write_summary(tmp_path, broken) == 1
    assert "**GPU-CLAIMS.md could not be read**" in (tmp_path / "summary.md").read_text()


def test_a_section_that_breaks_still_leaves_the_claims(tmp_path, rng, monkeypatch):
    from gpucheck import summary

    def broken(evidence):
        raise KeyError("a column nobody foresaw")

    build_outdir(tmp_path, rng)
    monkeypatch.setattr(summary, "figure_rows", broken)
    status, rows = summarize(tmp_path)
    assert ("**Summary incomplete**: writing it failed with KeyError: 'a column nobody foresaw'"
            in (tmp_path / "summary.md").read_text())
    assert list(rows) == [claim.id for claim in parse_claims(CLAIMS)]
    assert status == 1


# ---- steps, devices, schemas and rules ----------------------------------------------------------


def test_steps_not_reached_or_disabled_leave_their_claims_unmeasured(tmp_path, rng):
    scenario = Scenario(steps={"ctest": "not reached: budget",
                               "sanitizer": "disabled: compute-sanitizer not found"})
    build_outdir(tmp_path, rng, scenario)
    status, rows = summarize(tmp_path)
    for claim_id in ("cudnn-correct", "inhouse-correct", "isolation-oob", "timing-protocol"):
        assert rows[claim_id]["result"] == NOT_MEASURED
        assert rows[claim_id]["why"] == "step ctest not reached: budget"
    # The timer tests run in the figures step, which ran.
    assert rows["timer-cross-check"]["result"] == rows["l2-flush-clean"]["result"] == PASS
    for claim_id in ("memcheck-clean", "racecheck-clean", "synccheck-clean"):
        assert rows[claim_id]["result"] == NOT_MEASURED
        assert rows[claim_id]["why"] == "step sanitizer disabled: compute-sanitizer not found"
    assert rows["gpu-check-budget"]["result"] == FAIL
    assert rows["gpu-check-budget"]["why"] == "steps not reached: ctest"
    assert rows["cudnn-figure"]["result"] == PASS  # the figures step ran
    assert status == 1


def test_parts_recorded_as_steps_of_their_own_are_judged_by_those_steps(tmp_path, rng):
    # An older layout: calibrate and energy as steps beside figures.
    build_outdir(tmp_path, rng, Scenario(own_steps=("calibrate", "energy"),
                                         steps={"energy": "not reached: budget"}))
    status, rows = summarize(tmp_path)
    assert rows["energy-hot-loop"]["result"] == NOT_MEASURED
    assert rows["energy-hot-loop"]["why"] == "step energy not reached: budget"
    assert rows["calibrate-bf16-gemm"]["result"] == PASS
    assert rows["gpu-check-budget"]["result"] == FAIL
    assert status == 1


def test_sanitizer_errors_fail_their_claim(tmp_path, rng):
    built = build_outdir(tmp_path, rng)
    errors, processes = rng.randrange(1, 20), rng.randrange(2, 9)
    built.evidence["sanitizer"]["racecheck"] = {"errors": errors, "processes": processes,
                                                "exit": 0}
    del built.evidence["sanitizer"]["synccheck"]  # the step ran out of time before it
    write_evidence(tmp_path, built.evidence)
    status, rows = summarize(tmp_path)
    assert rows["racecheck-clean"]["result"] == FAIL
    assert rows["racecheck-clean"]["measured"] == (f"{errors} errors in {processes} processes, "
                                                   "exit 0")
    assert rows["synccheck-clean"]["result"] == NOT_MEASURED
    assert rows["synccheck-clean"]["why"] == "no synccheck report in evidence.json"
    assert rows["memcheck-clean"]["result"] == PASS
    assert status == 1


def test_a_rehearsal_measures_nothing(tmp_path, rng):
    built = build_outdir(tmp_path, rng)
    built.evidence["rehearsal"] = True
    for step in built.evidence["steps"][1:]:
        step.update(result="disabled: rehearsal (no GPU on the build machine)", seconds=0)
    write_evidence(tmp_path, built.evidence)
    status, rows = summarize(tmp_path)
    assert "**Rehearsal**" in (tmp_path / "summary.md").read_text()
    assert {row["why"] for row in rows.values()} == {"rehearsal: no GPU on this machine"}
    assert {row["result"] for row in rows.values()} == {NOT_MEASURED}
    assert status == 0


def test_a_card_without_a_model_reads_not_judged_for_every_per_model_claim(tmp_path, rng):
    build_outdir(tmp_path, rng, Scenario(gpu_name="NVIDIA A100-SXM4-80GB", device_model=""))
    status, rows = summarize(tmp_path)
    for claim_id in PER_MODEL:
        assert rows[claim_id]["result"] == NOT_MEASURED
        assert rows[claim_id]["why"].startswith(
            "not judged on this device (NVIDIA A100-SXM4-80GB, model unknown): thresholds "
            "stated for "), rows[claim_id]
        assert rows[claim_id]["judged for"] == "unknown model"
    assert rows["cudnn-correct"]["result"] == PASS
    assert rows["cudnn-correct"]["judged for"] == "any GPU"
    assert rows["flash3-fp8-hadamard-cost"]["result"] == PASS  # a ratio within one run
    assert rows["a100"]["result"] == PASS  # ctest and gpu-smoke passed on the A100
    assert status == 0


# ---- (b') either Hopper: each claim judged for the run's device model ---------------------------

H100 = dict(gpu_name="NVIDIA H100 80GB HBM3", device_model="h100", copy_tb_per_s=(2.95, 3.05))


def test_an_h100_run_is_judged_by_the_h100s_thresholds(tmp_path, rng):
    cudnn, cudnn_fp8 = rng.uniform(550, 700), rng.uniform(850, 1000)
    built = build_outdir(tmp_path, rng, Scenario(
        **H100, cudnn_tflops=cudnn, fp8_tflops=cudnn_fp8,
        flash3_tflops=rng.uniform(1.0, 1.08) * cudnn,
        flash3_fp8_ws_tflops=rng.uniform(0.95, 1.0) * cudnn_fp8))
    status, rows = summarize(tmp_path)
    assert "- device model: h100" in (tmp_path / "summary.md").read_text()
    # A copy at 3.0 TB/s passes the H100's claim, which it would fail on an H200 (below).
    copy = rows["calibrate-copy"]
    assert (copy["result"], copy["threshold"], copy["judged for"]) == (PASS, ">= 2.7 TB/s", "h100")
    assert copy["measured"] == f"{built.calibrations[('copy', 'bytes')] / 1e12:.2f} TB/s"
    # cuDNN's own figures are stated for the H200 only: not judged here, never passed.
    for claim_id in H200_ONLY:
        assert rows[claim_id]["result"] == NOT_MEASURED, rows[claim_id]
        assert rows[claim_id]["why"].startswith("not judged on this device (NVIDIA H100 80GB "
                                                "HBM3, model h100): thresholds stated for h200")
    # The in-house figures are ratios to cuDNN in the same run there.
    flash3 = rows["flash3-figure"]
    assert flash3["threshold"].startswith(">= 1x cudnn.sdpa (same run) at the figure shape")
    mine, peer = built.flops_per_s["cuda.flash3"], built.flops_per_s["cudnn.sdpa"]
    assert flash3["measured"].startswith(f"{mine / peer:.2f}x (")
    assert rows["flash3-fp8-figure"]["threshold"] == ">= 0.94x cudnn.sdpa_fp8 (same run)"
    assert {i for i, r in rows.items() if r["result"] != PASS} == HOST_LIMITED | H200_ONLY, rows
    assert status == 0


@pytest.mark.parametrize("ratio, result", [(1.02, PASS), (0.95, FAIL)])
def test_on_an_h100_flash3_is_judged_against_cudnn_of_the_same_run(tmp_path, rng, ratio, result):
    cudnn = rng.uniform(550, 700)
    build_outdir(tmp_path, rng, Scenario(**H100, cudnn_tflops=cudnn, flash3_tflops=ratio * cudnn))
    _, rows = summarize(tmp_path)
    assert rows["flash3-figure"]["result"] == result, rows["flash3-figure"]
    if result == FAIL:
        assert rows["flash3-figure"]["why"].startswith("below 1x cudnn.sdpa (run ")


def test_the_h200s_thresholds_hold_where_they_were_measured(tmp_path, rng):
    """The same 3.0 TB/s copy on an H200 fails: its memory was measured at 4.25 TB/s."""
    build_outdir(tmp_path, rng, Scenario(copy_tb_per_s=(2.95, 3.05)))
    status, rows = summarize(tmp_path)
    copy = rows["calibrate-copy"]
    assert (copy["result"], copy["threshold"], copy["judged for"]) == (FAIL, ">= 4 TB/s", "h200")
    assert rows["cudnn-figure"]["result"] == PASS
    assert rows["flash3-figure"]["threshold"].startswith(
        ">= 1x cudnn.sdpa (same run) at the figure shape")
    assert status == 1


def test_the_fp8_claim_judges_the_in_house_fp8_kernels_setup_recorded(tmp_path, rng):
    """flash3-fp8-correct takes its kernels from the registry setup recorded (the in-house
    kernels of the hopper-fp8 suite), not from a list of its own; without one it says so."""
    build_outdir(tmp_path, rng)
    _, rows = summarize(tmp_path)
    row = rows["flash3-fp8-correct"]
    assert row["result"] == PASS, row
    for kernel in ("cuda.flash3_fp8", "cuda.flash3_fp8_ws_transpose", "cuda.flash3_fp8_block"):
        assert kernel in row["why"], row
    assert "cudnn." not in row["why"] and "cuda.flash3," not in row["why"], row

    built = build_outdir(tmp_path / "no-kernels", rng)
    built.evidence.pop("kernels")
    write_evidence(built.outdir, built.evidence)
    _, rows = summarize(built.outdir)
    assert rows["flash3-fp8-correct"]["result"] == NOT_MEASURED
    assert rows["flash3-fp8-correct"]["why"].startswith("evidence.json holds no in-house kernel")


def test_a_failing_ctest_test_fails_its_claims(tmp_path, rng):
    message = f"max |out - ref| {rng.uniform(0.1, 1):.3f} exceeds the bound"
    shard = rng.randrange(1, CUDNN_SHARDS + 1)
    build_outdir(tmp_path, rng, Scenario(failing_tests={
        SUITE_TEST + "cuda_masked_inplace": message,
        f"{SUITE_TEST}cudnn_sdpa_shard{shard}of{CUDNN_SHARDS}": message}))
    status, rows = summarize(tmp_path)
    assert rows["inhouse-correct"]["result"] == FAIL
    assert rows["inhouse-correct"]["measured"] == "4/5 passed"
    assert rows["inhouse-correct"]["why"] == f"cuda_masked_inplace: Failed: {message}"
    assert rows["cudnn-correct"]["result"] == FAIL  # one failed shard fails cudnn.sdpa
    assert rows["cudnn-correct"]["measured"] == f"{CUDNN_SHARDS - 1}/{CUDNN_SHARDS} passed"
    assert rows["cudnn-correct"]["why"] == (f"cudnn_sdpa_shard{shard}of{CUDNN_SHARDS}: "
                                            f"Failed: {message}")
    assert rows["cudnn-fp8-correct"]["result"] == PASS
    assert status == 1


def test_a_missing_shard_leaves_its_kernel_unmeasured(tmp_path, rng):
    shard = rng.randrange(1, CUDNN_SHARDS + 1)
    build_outdir(tmp_path, rng, Scenario(
        missing_tests={f"{SUITE_TEST}cudnn_sdpa_shard{shard}of{CUDNN_SHARDS}"}))
    _, rows = summarize(tmp_path)
    assert rows["cudnn-correct"]["result"] == NOT_MEASURED
    assert rows["cudnn-correct"]["why"] == ("not in the test XML (ctest.xml, timer.xml): "
                                            f"cudnn_sdpa_shard{shard}of{CUDNN_SHARDS}")


def test_the_timer_and_a_missing_test(tmp_path, rng):
    difference = rng.uniform(5.5, 20)
    build_outdir(tmp_path, rng, Scenario(
        timer_difference=difference,
        missing_tests={"GpuIsolation.OutOfBoundsWriteIsCrashedAndTheGoodKernelStillPasses"}))
    status, rows = summarize(tmp_path)
    assert rows["timer-cross-check"]["result"] == FAIL
    assert rows["timer-cross-check"]["measured"].startswith(f"{difference:.2f} %")
    assert rows["isolation-oob"]["result"] == NOT_MEASURED
    assert rows["isolation-oob"]["why"].startswith("not in the test XML (ctest.xml, timer.xml)")


def test_memory_and_launches_outside_their_formulas_fail(tmp_path, rng):
    build_outdir(tmp_path, rng, Scenario(extra_memory={"cuda.naive": rng.uniform(1.6, 3)},
                                         launches={"cuda.flash2": 2}))
    status, rows = summarize(tmp_path)
    assert rows["naive-memory"]["result"] == FAIL
    assert rows["naive-memory"]["why"].startswith("cuda.naive b=")
    assert rows["flash2-memory-launches"]["result"] == FAIL
    assert "2 launches, expected 1" in rows["flash2-memory-launches"]["why"]
    assert rows["naive-launches"]["result"] == PASS
    assert status == 1


def test_memory_and_launches_are_judged_by_the_stored_expectation(tmp_path, rng):
    """The claims compare each result with the expectation attnbench stored beside it, never a
    formula of their own: a kernel that declares (and launches) 5 passes, whatever the naive
    family's usual 3; a result without a stored expectation is not measured, never passed."""
    build_outdir(tmp_path / "stored", rng, Scenario(
        stored_expectations={"cuda.naive": {"launches": 5}, "cuda.flash1": {
            "extra_memory_bytes": rng.randrange(1 << 20, 1 << 24)}}))
    _, rows = summarize(tmp_path / "stored")
    assert rows["naive-launches"]["result"] == PASS
    assert "cuda.naive 5" in rows["naive-launches"]["measured"]
    assert rows["naive-memory"]["result"] == PASS

    build_outdir(tmp_path / "none", rng, Scenario(no_expectations=True))
    _, rows = summarize(tmp_path / "none")
    for claim in ("naive-memory", "naive-launches", "flash2-memory-launches"):
        assert rows[claim]["result"] == NOT_MEASURED, claim
        assert "no stored expectation" in rows[claim]["why"], claim


def test_the_masking_study_is_judged_by_cuptis_launches_and_the_paths_times(tmp_path, rng):
    """The profile step's CUPTI profiles: a healthy run passes and shows the PyTorch peers'
    launches beside the in-house ones; a fused kernel that launched a mask kernel, or the three
    paths' times out of the study's order, fail; no profile step leaves the claim unmeasured."""
    build_outdir(tmp_path / "healthy", rng)
    _, rows = summarize(tmp_path / "healthy")
    row = rows["masking-study-gpu"]
    assert row["result"] == PASS, row
    assert "cuda.masked_outofplace 4 launches" in row["measured"]
    assert "torch.naive_outofplace 6 launches" in row["measured"]

    build_outdir(tmp_path / "launches", rng, Scenario(profile_launches={"cuda.masked_fused": 4}))
    _, rows = summarize(tmp_path / "launches")
    assert rows["masking-study-gpu"]["result"] == FAIL
    assert "cuda.masked_fused launched 4, expected 3" in rows["masking-study-gpu"]["why"]

    build_outdir(tmp_path / "order", rng, Scenario(masking_times_reversed=True))
    _, rows = summarize(tmp_path / "order")
    assert rows["masking-study-gpu"]["result"] == FAIL
    assert "out of place >= in place >= fused" in rows["masking-study-gpu"]["why"]

    build_outdir(tmp_path / "budget", rng, Scenario(steps={"profile": "not reached: budget"}))
    _, rows = summarize(tmp_path / "budget")
    assert rows["masking-study-gpu"]["result"] == NOT_MEASURED
    assert rows["masking-study-gpu"]["why"] == "step profile not reached: budget"


def test_timing_wall_plan_needs_schema_5_and_keeps_to_the_budget(tmp_path, rng):
    build_outdir(tmp_path / "v4", rng, Scenario(schema_version=4))
    _, rows = summarize(tmp_path / "v4")
    row = rows["timing-wall-plan"]
    assert row["result"] == NOT_MEASURED
    assert row["why"] == ("the database has no forwards_timed, timing_wall_s, timing_stop "
                          "(results columns of schema version 5)")
    assert rows["cudnn-figure"]["result"] == PASS  # an older file still gives its figures

    build_outdir(tmp_path / "over", rng, Scenario(over_budget="cuda.flash1"))
    _, rows = summarize(tmp_path / "over")
    row = rows["timing-wall-plan"]
    assert row["result"] == FAIL
    assert row["why"].startswith("cuda.flash1 b=")
    assert f"> {CASE_BUDGETS['gpu-smoke']:g} s + one repetition" in row["why"]
    assert row["threshold"] == ("forwards > 0, stop set, wall <= max_case_seconds "
                                "(figures 0.5 s, gpu-smoke 0.3 s) + 1 repetition")


def test_the_command_line_writes_the_summary_and_prints_claims_last(tmp_path, rng):
    build_outdir(tmp_path, rng)
    environment = {**os.environ, "PYTHONPATH": str(ROOT / "ci")}
    done = subprocess.run([sys.executable, "-m", "gpucheck.summary", str(tmp_path),
                           "--claims", str(CLAIMS)], cwd=ROOT, env=environment,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "summary.md").exists()
    last_ids = [claim.id for claim in parse_claims(CLAIMS)][-1]
    assert done.stdout.rstrip().splitlines()[-1].startswith(f"| {last_ids} ")


def test_a_failing_backward_case_fails_its_claim_and_a_slow_backward_its_ratio(tmp_path, rng):
    scenario = Scenario(failing_backward="cudnn.sdpa_deterministic",
                        cudnn_backward_tflops=rng.uniform(300, 400),
                        torch_cudnn_backward_tflops=500.0)
    build_outdir(tmp_path, rng, scenario)
    _, rows = summarize(tmp_path)
    correct, figure = rows["backward-gpu-correct"], rows["cudnn-backward-figure"]
    assert correct["result"] == FAIL and "cudnn.sdpa_deterministic" in correct["why"], correct
    assert "dk: max|dk-ref|" in correct["why"]
    assert figure["result"] == FAIL and figure["threshold"] == ">= 0.95x torch.sdpa_cudnn (same run)"
    # No backward at the figure shape: the ratio is not measured, and says why.
    tmp_path2 = tmp_path / "none"
    build_outdir(tmp_path2, rng, Scenario(cudnn_backward_tflops=None))
    _, rows = summarize(tmp_path2)
    assert rows["cudnn-backward-figure"]["result"] == NOT_MEASURED


def test_the_in_house_backward_is_judged_against_its_peers_and_its_cost_shown(tmp_path, rng):
    torch_flash = rng.uniform(250, 350)
    scenario = Scenario(failing_backward="cuda.flash2_deterministic",
                        torch_flash_backward_tflops=torch_flash,
                        flash2_backward_tflops=0.7 * torch_flash,
                        flash2_deterministic_backward_tflops=0.5 * torch_flash)
    build_outdir(tmp_path, rng, scenario)
    status, rows = summarize(tmp_path)
    correct = rows["flash2-backward-correct"]
    assert correct["result"] == FAIL and "cuda.flash2_deterministic" in correct["why"], correct
    figure = rows["flash2-backward-figure"]
    assert figure["result"] == FAIL, figure
    assert figure["threshold"] == ">= 0.85x torch.sdpa_flash (same run)"
    assert figure["measured"].startswith("0.70x (")
    cost = rows["flash2-deterministic-cost"]
    assert cost["result"] == FAIL and cost["measured"].startswith("0.71x ("), cost
    assert cost["measured"].endswith("extra memory cuda.flash2 129 MiB, "
                                     "cuda.flash2_deterministic 1025 MiB")
    assert status == 1
    # Without PyTorch's flash backward the figure is not measured, and says why.
    tmp_path2 = tmp_path / "no-torch"
    build_outdir(tmp_path2, rng, Scenario(torch_flash_backward_tflops=None))
    _, rows = summarize(tmp_path2)
    assert rows["flash2-backward-figure"]["result"] == NOT_MEASURED
    assert rows["flash2-backward-figure"]["why"] == "no torch.sdpa_flash result in this run"
    assert rows["flash2-backward-correct"]["result"] == PASS
