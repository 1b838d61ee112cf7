"""The report built from databases with known content shows exactly that content: counts,
ceilings, triage, fastest kernels, accuracy, clocks, history and comparisons; every image exists
and has something drawn; every database string is escaped; old and newer schemas build."""

import datetime
import json
import math
import os
import pathlib
import sqlite3
import statistics
import subprocess
import sys
from collections import defaultdict

import pytest

from reports import analysis
from reports.build import build
from reports.db import Database, ReportError
from reports.tests import fixtures
from reports.tests.pages import Page, non_blank

ROOT = pathlib.Path(__file__).resolve().parents[2]


def built(tmp_path, make, rng, **kwargs):
    db = tmp_path / "attnbench.sqlite"
    fixture = make(db, rng, **kwargs)
    out = tmp_path / "report"
    summary = build(db, out)
    pages = {name: Page(out / f"{name}.html") for name in ("index", "history", "compare")}
    return fixture, summary, pages, out


def check_images(out, pages):
    images = {src for page in pages.values() for src in page.images}
    assert images, "the report has no images"
    for src in images:
        path = out / src
        assert path.is_file(), f"{src} is referenced but missing"
        assert non_blank(path), f"{src} is blank"
    # Nothing written that no page shows.
    assert {f"img/{p.name}" for p in (out / "img").glob("*.png")} == images


def series_rows(page):
    """history.html's series table by (kernel, case, device)."""
    return {(row[0].text, row[1].text, row[2].text): row for row in page.rows("series-table")}


def status_counts(page):
    return {c.attrs["data-status"]: int(c.value) for c in page.valued if "data-status" in c.attrs}


def last_run(fixture):
    run_id = max(r.run_id for r in fixture.inserted)
    return run_id, [r for r in fixture.inserted if r.run_id == run_id]


def test_mixed_database_shows_exactly_its_content(tmp_path, rng):
    fixture, summary, pages, out = built(tmp_path, fixtures.mixed_database, rng)
    run_id, results = last_run(fixture)
    index = pages["index"]
    assert summary.run_id == run_id and summary.results == len(results)

    counts = status_counts(index)
    for status in ("passed", "failed", "skipped", "crashed", "timeout", "error"):
        assert counts[status] == sum(1 for r in results if r.status == status), status

    # The GPU's ceilings are the ones calibrated for this run's chip, value for value.
    ceilings = {(c.attrs["data-kind"], c.attrs["data-dtype"]): c.value
                for c in index.valued if "data-kind" in c.attrs}
    expected = {(kind, dtype): value for chip, kind, dtype, value in fixture.calibrations
                if chip in ("GPU-2222", "cpu:ci")}
    assert ceilings == expected

    # Triage: every failure, the status change, the missing case and both alerts, once each,
    # most severe first.
    special = fixture.special
    triage = index.rows("triage-table")
    found = {(row[1].text, row[2].text, row[3].text) for row in triage}
    wanted = {
        ("failed", special["failed"].kernel, special["failed"].label),
        ("timeout", special["timeout"].kernel, special["timeout"].label),
        ("status crashed", special["crashed"].kernel, special["crashed"].label),
        ("passed -> skipped", special["skipped"].kernel, special["skipped"].label),
        ("missing", special["missing"].kernel, special["missing"].label),
        ("performance confirmed", special["regression"].kernel, special["regression"].label),
        ("performance suspected", special["failed"].kernel, special["failed"].label),
    }
    assert found == wanted and len(triage) == len(wanted)
    ranks = [{"error": 0, "warning": 1, "info": 2}[row[0].text] for row in triage]
    assert ranks == sorted(ranks)
    failed_row = next(row for row in triage if row[1].text == "failed")
    assert failed_row[5].text.startswith("max |out - ref| 0.8 exceeds the bound 0.031")
    regression_row = next(row for row in triage if row[1].text == "performance confirmed")
    assert "chip GPU-1111 -> GPU-2222" in regression_row[6].text
    assert "+25.0 %" in regression_row[5].text

    # Fastest kernel per shape, with its exact median.
    best = {}
    for r in results:
        if r.status == "passed" and r.median_s is not None:
            if r.case.label not in best or r.median_s < best[r.case.label].median_s:
                best[r.case.label] = r
    fastest = {row[0].text: (row[1].text, row[2].value) for row in index.rows("fastest")}
    assert fastest == {label: (r.case.kernel, r.median_s) for label, r in best.items()}

    # Accuracy: checked cases, failures and the worst error / bound per kernel.
    checked = defaultdict(list)
    for r in results:
        if r.error is not None:
            checked[r.case.kernel].append(r)
    accuracy = {row[0].text: (int(row[1].text), int(row[2].text), row[3].value)
                for row in index.rows("accuracy-table")}
    assert accuracy == {k: (len(v), sum(1 for r in v if r.status == "failed"),
                            max(r.ratio for r in v)) for k, v in checked.items()}

    # Health: the GPU's median SM clock over every sample of the run; the suspect samples and
    # noisy cases the analysis stored (the throttled repetition and a dip; its noisy judgements).
    gpu_clocks = [c for r in results if r.device.kind == "cuda" for c in r.clocks]
    health = {row[0].text: row for row in index.rows("health-table")}
    gpu_row = health["cuda:0: NVIDIA H200"]
    assert gpu_row[3].value == statistics.median(gpu_clocks)
    assert int(gpu_row[4].text) == fixture.suspect_samples == 2
    noisy = [fixture.analysed[(run_id, r.series_key)].get("noisy") for r in results
             if r.device.kind == "cuda" and (run_id, r.series_key) in fixture.analysed]
    assert int(gpu_row[8].text) == sum(1 for n in noisy if n)

    # History: this run's median of every series, and the detector's stored judgement of it:
    # change, verdict and baseline center exactly as stored (kernel-wide rows are no series).
    previous = {r.series_key: r for r in fixture.inserted if r.run_id == run_id - 1}
    history = series_rows(pages["history"])
    for r in results:
        row = history[(r.case.kernel, r.case.label, r.device.name)]
        assert row[6].value == r.median_s
        stored = fixture.analysed[(run_id, r.series_key)]
        assert row[7].value == stored["change_fraction"]
        assert row[8].text == stored["verdict"]
        assert row[9].value == stored.get("center_s")
    missing = special["missing"]
    assert history[(missing.kernel, missing.label, "NVIDIA H200")][8].text == "ok"
    assert len(history) == len({r.series_key for r in fixture.inserted})

    # Commit-to-commit comparison: every case timed in both runs, and each kernel's geomean.
    changes = {(row[0].text, row[1].text, row[2].text): row[5].value
               for row in pages["compare"].rows("case-changes")}
    both = [(previous[r.series_key], r) for r in results
            if r.median_s is not None and previous[r.series_key].median_s is not None]
    assert changes == {(r.case.kernel, r.case.label, r.device.name): r.median_s / b.median_s - 1
                       for b, r in both}
    # Each row marked by its series' stored verdict in this run, not by a threshold of the page's.
    verdicts = {(row[0].text, row[1].text, row[2].text): row[6].text
                for row in pages["compare"].rows("case-changes")}
    assert verdicts == {(r.case.kernel, r.case.label, r.device.name): fixture.analysed[
        (run_id, r.series_key)]["verdict"].replace("_", " ") for b, r in both}
    geomeans = {row[0].text: row[1].value for row in pages["compare"].rows("kernel-geomeans")}
    for kernel in {r.case.kernel for _, r in both}:
        ratios = [r.median_s / b.median_s for b, r in both if r.case.kernel == kernel]
        expected_mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        assert math.isclose(geomeans[kernel], expected_mean, rel_tol=1e-12)

    # Every triage item links to its series' full history plot, which is there.
    for row in triage:
        history_links = [link for link in row[7].links if link.startswith("history.html#")]
        assert len(history_links) == 1, row
        assert history_links[0].split("#")[1] in pages["history"].ids
    check_images(out, pages)


def test_cpu_only_database(tmp_path, rng):
    fixture, summary, pages, out = built(tmp_path, fixtures.cpu_database, rng, runs=12)
    run_id, results = last_run(fixture)
    text = pages["index"].text
    assert "No GPU results in this run" in text
    assert "No launch counts in this run" in text
    assert "No energy measured in this run" in text
    assert "No SM clocks in this run" in text
    assert "Nothing to triage" in text
    # The throughput of each case at its exact value, in GFLOP/s on a CPU.
    assert "throughput (GFLOP/s)" not in text  # axis labels live in the images, not the page
    history = series_rows(pages["history"])
    assert len(history) == len(results)
    for r in results:
        row = history[(r.case.kernel, r.case.label, r.device.name)]
        stored = fixture.analysed[(run_id, r.series_key)]
        assert int(row[4].text) == 12
        assert row[6].value == r.median_s
        assert (row[7].value, row[8].text, row[9].value) == (
            stored["change_fraction"], stored["verdict"], stored["center_s"])
    check_images(out, pages)


HOSTILE = '<script>alert("x")</script>'


def test_every_database_string_is_escaped(tmp_path, rng):
    db = tmp_path / "hostile.sqlite"
    fixture = fixtures.Fixture(db)
    started = fixtures.START
    run_id = fixture.run(started, suite=f"suite{HOSTILE}", command=f"run '{HOSTILE}' & more",
                         host=f"host{HOSTILE}", git_sha=f"sha{HOSTILE}")
    gpu = fixture.device(run_id, "cuda", f"GPU {HOSTILE} & \"quoted\"", f"GPU-{HOSTILE}")
    fixture.calibration(gpu, "gemm", "bf16", 5e14, started)
    fixture.db.execute("UPDATE calibrations SET details = ?", (f"details {HOSTILE}",))
    kernel = f"cuda.$x$<marquee>{HOSTILE}"
    cases = [fixtures.Case(kernel, seqlen_q=s, seqlen_k=s) for s in (512, 1024)]
    for case in cases:
        fixture.result(run_id, gpu, case, median_s=rng.uniform(1e-4, 1e-3), error=1e-3,
                       bound=1e-2, ceiling=5e14, clocks=[1900.0] * 5)
    # attnbench describes only the distributions it draws; the hostile name carries the case.
    broken = fixtures.Case(kernel, seqlen_q=2048, seqlen_k=2048, distribution="outliers")
    fixtures.describe(cases + [broken], [gpu.name])
    fixture.result(run_id, gpu, broken, status="crashed", message=f"boom {HOSTILE}",
                   repro=f"attnbench {HOSTILE}")
    key = cases[0].series_key(gpu.name)
    # Kind, severity and state are CHECKed closed sets (schema version 6): the free text is.
    fixture.alert(run_id, key, "performance", "error", f"message {HOSTILE}",
                  f'{{"note{HOSTILE}": "{HOSTILE.replace(chr(34), chr(39))}"}}',
                  state="confirmed", environment=f"env {HOSTILE}",
                  annotation=f"annotation {HOSTILE}")
    fixture.analysis(run_id, key, "confirmed", center_s=2e-4, threshold=0.03,
                     change_fraction=0.2, reason=f"reason {HOSTILE}",
                     annotation=f"annotation {HOSTILE}", status_change=f"status {HOSTILE}")
    fixture.annotation(key, f"expected_change{HOSTILE}", f"reason {HOSTILE}", started)
    fixture.close()
    out = tmp_path / "report"
    build(db, out)
    for name in ("index", "history", "compare"):
        html = (out / f"{name}.html").read_text()
        assert "<script>alert" not in html, name
        assert "<marquee>" not in html, name
    index = Page(out / "index.html")
    triage = index.rows("triage-table")
    # Escaped on the way in, read back intact by an HTML parser: nothing lost, nothing run.
    assert {row[2].text for row in triage} == {kernel}
    assert any(row[5].text.startswith(f"boom {HOSTILE}") for row in triage)
    assert any(f"env {HOSTILE}" in row[6].text for row in triage)
    assert f"suite{HOSTILE}" in index.text
    history = Page(out / "history.html")
    assert f"reason {HOSTILE}" in history.text
    check_images(out, {"index": index, "history": history})


@pytest.mark.parametrize("version", range(1, len(fixtures.migrations()) + 1))
def test_every_schema_version_builds(tmp_path, rng, version):
    fixture, summary, pages, out = built(tmp_path, fixtures.mixed_database, rng, version=version,
                                         compact=True)
    text = pages["index"].text
    triage = {row[1].text for row in pages["index"].rows("triage-table")}
    # Failures come from the results whatever the schema; alerts only where there is a table.
    assert {"failed", "timeout", "missing", "passed -> skipped"} <= triage
    if version == 1:
        assert "No alerts table in this database (schema version 1)" in text
        assert "No annotations table in this database" in pages["history"].text
    else:
        assert any(what.startswith("performance") for what in triage)
    # The detector's judgements are stored from version 6 on; before, none is invented.
    history = series_rows(pages["history"]).values()
    if version < 6:
        assert all(row[7].text == "not analysed" and row[7].value is None for row in history)
        assert "No result_analysis table in this database" in pages["history"].text
    else:
        assert not any(row[7].text == "not analysed" for row in history)
    check_images(out, pages)


def test_newer_schema_columns_are_shown(tmp_path, rng):
    db = tmp_path / "newer.sqlite"
    fixtures.mixed_database(db, rng)
    with sqlite3.connect(db) as connection:
        # What a later migration might add: a column the report has never heard of.
        connection.execute("ALTER TABLE alerts ADD COLUMN owner TEXT NOT NULL DEFAULT ''")
        connection.execute("CREATE TABLE run_notes (run_id INTEGER, note TEXT)")
        connection.execute("UPDATE alerts SET owner = 'kernel team'")
    build(db, tmp_path / "report")
    triage = Page(tmp_path / "report" / "index.html").rows("triage-table")
    assert any("owner kernel team" in row[5].text for row in triage)


def run_cli(*arguments):
    return subprocess.run([sys.executable, "-m", "reports", *arguments], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_cli_errors_are_one_line_and_exit_2(tmp_path, rng):
    missing = run_cli("build", "--db", str(tmp_path / "nope.sqlite"), "--out", str(tmp_path / "o"))
    assert missing.returncode == 2 and "no such database file" in missing.stderr
    empty = tmp_path / "empty.sqlite"
    fixtures.Fixture(empty).close()
    no_runs = run_cli("build", "--db", str(empty), "--out", str(tmp_path / "o"))
    assert no_runs.returncode == 2 and "holds no runs" in no_runs.stderr
    db = tmp_path / "mixed.sqlite"
    fixtures.mixed_database(db, rng, compact=True)
    unknown = run_cli("build", "--db", str(db), "--out", str(tmp_path / "o"), "--run", "99")
    assert unknown.returncode == 2 and "no run 99" in unknown.stderr
    with pytest.raises(ReportError):
        build(db, tmp_path / "o", run_id=99)
    first = run_cli("build", "--db", str(db), "--out", str(tmp_path / "o"), "--run", "1")
    assert first.returncode == 0, first.stderr
    assert "report of run 1" in first.stdout
    assert "No earlier run in this database" in Page(tmp_path / "o" / "compare.html").text


@pytest.mark.skipif(not os.environ.get("ATTNBENCH_CLI"),
                    reason="ATTNBENCH_CLI (the attnbench binary; ctest sets it) is not set")
def test_report_of_a_real_cpu_run(tmp_path):
    """A database written by the C++ itself: the schema contract, end to end."""
    db = tmp_path / "real.sqlite"
    cli = os.environ["ATTNBENCH_CLI"]
    ran = subprocess.run([cli, "run", "--db", str(db), "--kernels", "cpu.flash,cpu.naive",
                          "--shape", "b=1,hq=2,s=64,d=32,dtype=fp32,mask=causal",
                          "--repetitions", "3", "--max-case-seconds", "0.05"],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    summary = build(db, tmp_path / "report")
    assert summary.results == 2
    index = Page(tmp_path / "report" / "index.html")
    counts = status_counts(index)
    assert counts["passed"] == 2
    assert {row[1].text for row in index.rows("fastest")} <= {"cpu.flash", "cpu.naive"}
    check_images(tmp_path / "report", {"index": index})


def test_accuracy_by_recipe_shows_each_kernels_median_rmse(tmp_path, rng):
    """Issue 16's accuracy-by-recipe table and figure: per kernel and distribution, the median
    of the stored RMSEs over the shapes; a kernel missing a distribution leaves its cell empty."""
    db = tmp_path / "recipes.sqlite"
    fixture = fixtures.Fixture(db)
    run_id = fixture.run(fixtures.START, suite="fp8-accuracy")
    cpu = fixture.device(run_id, "cpu", "Intel(R) Xeon(R) Processor", "cpu:ci", threads=2)
    stored = defaultdict(list)
    kernels = ("cpu.flash", "cpu.flash_fp8", "cpu.flash_fp8_incoherent")
    cases = [fixtures.Case(kernel, heads_q=2, heads_kv=2, seqlen_q=seqlen, seqlen_k=seqlen,
                           dtype="fp16", distribution=distribution)
             for kernel in kernels for distribution in ("normal", "outliers", "sink")
             if not (kernel == "cpu.flash" and distribution == "sink")
             for seqlen in (256, 512, 1024)]
    fixtures.describe(cases, [cpu.name])
    for case in cases:
        rmse = rng.uniform(1e-5, 1e-1)
        fixture.result(run_id, cpu, case, median_s=1e-3, error=rmse * 4, bound=1.0, rmse=rmse)
        stored[(case.kernel, case.distribution)].append(rmse)
    fixture.close()
    out = tmp_path / "report"
    build(db, out)
    index = Page(out / "index.html")
    rows = {row[0].text: row[1:] for row in index.rows("recipe-accuracy")}
    assert set(rows) == set(kernels)
    for kernel in kernels:
        # Columns: normal first, then the others by name.
        for cell, distribution in zip(rows[kernel], ("normal", "outliers", "sink")):
            values = stored.get((kernel, distribution))
            if values:
                assert cell.value == pytest.approx(statistics.median(values), rel=1e-12)
            else:
                assert cell.text == ""
    assert "img/recipes.png" in index.images
    check_images(out, {"index": index})


def test_profiles_show_the_newest_breakdown_of_each_kernel_and_shape(tmp_path, rng):
    """Issue 17's stored profiles: the newest of each kernel and shape, its phases' shares (which
    add up to 100 %), the forward and the plain median; the older profile is not shown."""
    db = tmp_path / "profiles.sqlite"
    fixture = fixtures.Fixture(db)
    run_id = fixture.run(fixtures.START, suite="smoke")
    fixture.device(run_id, "cpu", CPU_NAME, "cpu:ci", threads=2)
    study = dict(batch=8, heads_q=16, heads_kv=16, seqlen_q=1024, seqlen_k=1024, head_dim=64,
                 dtype="bf16", mask="causal")
    inplace, flash = (fixtures.Case(k, **study) for k in ("cpu.masked_inplace", "cpu.flash"))
    shape = inplace.shape

    def phases():
        return [(name, rng.randrange(1, 200), rng.uniform(1e-3, 1.0))
                for name in ("scores", "mask", "softmax", "output")] + \
            [("gaps", 0, rng.uniform(0, 0.1))]

    fixture.profile(inplace, fixtures.START, phases(), 0.5, 0.49)
    newest = phases()
    forward_s = rng.uniform(0.1, 2.0)
    fixture.profile(inplace, fixtures.START + datetime.timedelta(hours=1), newest, forward_s,
                    forward_s * 0.98)
    fixture.profile(flash, fixtures.START, phases(), 0.2, 0.2)
    fixture.close()
    out = tmp_path / "report"
    build(db, out)
    index = Page(out / "index.html")
    shown = index.rows("profile-phases")
    assert len(shown) == 2, "one row per kernel and shape: the older profile is not shown"
    rows = {(row[0].text, row[1].text): row for row in shown}
    assert set(rows) == {("cpu.masked_inplace", shape), ("cpu.flash", shape)}
    row = rows[("cpu.masked_inplace", shape)]
    assert row[3].value == pytest.approx(forward_s, rel=1e-12)
    whole = sum(total for _, _, total in newest)
    assert row[6].value == 1 << 20
    assert row[7].text == "–", "a CPU kernel's phases launch nothing"
    for name, _, total in newest:
        assert f"{name} {100 * total / whole:.1f} %" in row[8].text
    assert "img/profiles.png" in index.images
    check_images(out, {"index": index})


def test_a_gpu_profile_shows_its_launches_and_streams(tmp_path, rng):
    """A forward CUPTI recorded on a GPU: its kernels' launches summed, on its streams."""
    db = tmp_path / "gpu-profile.sqlite"
    fixture = fixtures.Fixture(db)
    fixture.run(fixtures.START, suite="masking")
    case = fixtures.Case("cuda.masked_outofplace", batch=8, heads_q=16, heads_kv=16,
                         seqlen_q=1024, seqlen_k=1024, head_dim=64, dtype="bf16", mask="causal")
    counts = [rng.randrange(1, 4) for _ in range(4)]
    kernels = [(name, count, rng.uniform(1e-5, 1e-4)) for name, count in
               zip(("scores_kernel", "mask_copy_kernel", "softmax_kernel", "output_kernel"), counts)]
    fixture.profile(case, fixtures.START, kernels + [("gaps", 0, 1e-6)], 4e-4, 4e-4, threads=1,
                    source="CUPTI", kind="kernel", device="NVIDIA H200")
    fixture.close()
    out = tmp_path / "report"
    build(db, out)
    row = Page(out / "index.html").rows("profile-phases")[0]
    assert row[5].text == "1 stream"
    assert row[7].value == sum(counts)
    assert "mask_copy_kernel" in row[8].text


# ---- the detector's stored judgement is the one truth (issue 12) -----------------------------

CPU_NAME = "Intel(R) Xeon(R) Processor"


def cpu_history(path, rng, runs, kernels=("cpu.flash", "cpu.naive"), seqlens=(128, 256)):
    """A short CPU history with fresh random medians and nothing judged yet: (fixture, cases,
    run ids, {(run_id, series_key): (result_id, median_s)}, the CPU of each run)."""
    fixture = fixtures.Fixture(path)
    cases = [fixtures.Case(k, batch=1, heads_q=2, heads_kv=2, seqlen_q=s, seqlen_k=s,
                           dtype="fp32") for k in kernels for s in seqlens]
    fixtures.describe(cases, [CPU_NAME])
    base = {case: rng.uniform(2e-3, 9e-3) for case in cases}
    run_ids, measured, cpus = [], {}, {}
    for index in range(runs):
        started = fixtures.START + datetime.timedelta(days=index)
        run_id = fixture.run(started, suite="smoke", git_sha=f"{rng.getrandbits(160):040x}")
        cpus[run_id] = fixture.device(run_id, "cpu", CPU_NAME, "cpu:ci", threads=2)
        for case in cases:
            median_s = base[case] * rng.uniform(0.99, 1.01)
            result_id = fixture.result(run_id, cpus[run_id], case, median_s=median_s)
            measured[(run_id, case.series_key(CPU_NAME))] = (result_id, median_s)
        run_ids.append(run_id)
    return fixture, cases, run_ids, measured, cpus


def test_the_page_shows_the_stored_baseline(tmp_path, rng):
    """A sentinel center written into the stored row is what the page shows for that series
    and run (history table, triage details, the plot's band), whatever the medians say."""
    db = tmp_path / "sentinel.sqlite"
    fixture, cases, run_ids, measured, _ = cpu_history(db, rng, runs=rng.randint(4, 7))
    sentinel = 0.001234567  # no median of this history is near it (2-9 ms)
    chosen = rng.choice(cases).series_key(CPU_NAME)
    last = run_ids[-1]
    for run_id in run_ids[1:]:
        for case in cases:
            key = case.series_key(CPU_NAME)
            result_id, median_s = measured[(run_id, key)]
            columns = dict(result_id=result_id, baseline_run_id=run_id - 1)
            if key == chosen:
                columns.update(center_s=sentinel, spread_s=sentinel * rng.uniform(0.005, 0.01))
            fixture.judged(run_id, key, median_s, rng, **columns)
    change = fixture.analysed[(last, chosen)]["change_fraction"]
    fixture.alert(last, chosen, "performance", "warning", "suspected by the detector",
                  state="suspected", change_fraction=change)
    fixture.close()
    build(db, tmp_path / "report")
    history = Page(tmp_path / "report" / "history.html")
    rows = {row[0].text + " " + row[1].text: row for row in history.rows("series-table")}
    case = next(c for c in cases if c.series_key(CPU_NAME) == chosen)
    row = rows[case.kernel + " " + case.label]
    stored = fixture.analysed[(last, chosen)]
    assert row[9].value == sentinel and row[9].text.startswith("1.23 ms")
    assert row[7].value == stored["change_fraction"]
    # Every other series shows its own stored center, never the sentinel.
    for other in cases:
        if other.series_key(CPU_NAME) != chosen:
            assert rows[other.kernel + " " + other.label][9].value == \
                fixture.analysed[(last, other.series_key(CPU_NAME))]["center_s"]
    triage = Page(tmp_path / "report" / "index.html").rows("triage-table")
    assert len(triage) == 1 and "baseline 1.23 ms" in triage[0][5].text

    # The plot's band at each run is the stored center at that run's level, +- its threshold.
    database = Database(db)
    try:
        stored_rows = database.analysis_history([chosen], last)[chosen]
        points = [(r, "passed", measured[(r, chosen)][1], "cpu:ci") for r in run_ids]
        series = analysis.build_series({chosen: points}, [], [], [], {chosen: stored_rows})
        bands = series[chosen].bands()
    finally:
        database.close()
    assert bands[0] is None  # the first run was never judged: no band
    for run_id, band in zip(run_ids[1:], bands[1:]):
        row = fixture.analysed[(run_id, chosen)]
        center = sentinel * math.exp(row["level"])
        assert band == pytest.approx((center * (1 - row["threshold"]), center,
                                      center * (1 + row["threshold"])), rel=1e-12)


def test_an_expected_change_reads_as_the_detector_judged_it(tmp_path, rng):
    """A 20 % step annotated expected_change: the detector restarted the baseline at the step,
    so the runs after it are ok with no change; the page says so, not +20 %."""
    db = tmp_path / "expected.sqlite"
    runs = rng.randint(8, 12)
    fixture, cases, run_ids, measured, _ = cpu_history(db, rng, runs=runs)
    stepped = rng.choice(cases)
    key = stepped.series_key(CPU_NAME)
    step_run = run_ids[-rng.randint(2, 3)]  # one or two runs after it, up to the last
    factor = 1.2 * rng.uniform(0.995, 1.005)
    for run_id in run_ids:
        if run_id >= step_run:
            result_id, median_s = measured[(run_id, key)]
            fixture.db.execute("UPDATE results SET median_s = ? WHERE id = ?",
                               (median_s * factor, result_id))
            measured[(run_id, key)] = (result_id, median_s * factor)
    reason = f"new tiling {rng.randrange(1000)}"
    fixture.annotation(key, "expected_change", reason,
                       fixtures.START + datetime.timedelta(days=step_run - 1, hours=-1),
                       from_run_id=step_run)
    covered = f"expected_change from run {step_run}: {reason}"
    for run_id in run_ids[5:]:
        for case in cases:
            other = case.series_key(CPU_NAME)
            result_id, median_s = measured[(run_id, other)]
            columns = dict(result_id=result_id, baseline_run_id=run_id - 1)
            if other == key and run_id == step_run:
                # At the step itself: a trip, covered by the annotation (severity info).
                fixture.judged(run_id, other, median_s, rng, change=factor - 1,
                               verdict="suspected", annotation=covered, **columns)
                fixture.alert(run_id, other, "performance", "info", "+20 % (expected)",
                              state="suspected", change_fraction=factor - 1, annotation=covered)
                continue
            if other == key and run_id > step_run:
                columns.update(history_from_run_id=step_run, annotation=covered,
                               baseline_runs=run_id - step_run,
                               baseline_run_id=rng.randrange(step_run, run_id))
            fixture.judged(run_id, other, median_s, rng, **columns)
    fixture.close()

    # What a report that recomputed its baseline without the annotation's restart would say.
    medians = [measured[(r, key)][1] for r in run_ids]
    naive = medians[-1] / statistics.median(medians[-11:-1]) - 1
    assert naive > 0.1

    out = tmp_path / "report"
    build(db, out)
    row = series_rows(Page(out / "history.html"))[(stepped.kernel, stepped.label, CPU_NAME)]
    stored = fixture.analysed[(run_ids[-1], key)]
    assert row[7].value == stored["change_fraction"] and abs(row[7].value) < 0.02
    assert not row[7].text.startswith("+2") and row[8].text == "ok"
    assert row[9].value == stored["center_s"]
    assert row[9].value == pytest.approx(medians[-1], rel=0.05)  # the new level, not the old
    index = Page(out / "index.html")
    assert not index.rows("triage-table") and "Nothing to triage" in index.text

    # The step's own run: the detector's covered trip, as stored.
    build(db, tmp_path / "at-step", run_id=step_run)
    row = series_rows(Page(tmp_path / "at-step" / "history.html"))[
        (stepped.kernel, stepped.label, CPU_NAME)]
    assert row[7].value == factor - 1 and row[8].text == "suspected"
    triage = Page(tmp_path / "at-step" / "index.html").rows("triage-table")
    assert [(r[0].text, r[1].text) for r in triage] == [("info", "performance suspected")]
    assert covered in triage[0][5].text


@pytest.mark.parametrize("how", ["schema 5", "never analysed", "shown run not analysed"])
def test_no_stored_judgement_reads_not_analysed(tmp_path, rng, how):
    """A database whose shown run has no result_analysis rows (written before version 6, or
    never judged) builds, and says 'not analysed' instead of inventing a baseline."""
    db = tmp_path / "old.sqlite"
    if how == "schema 5":
        fixture = fixtures.mixed_database(db, rng, version=5, compact=True)
    else:
        fixture = fixtures.cpu_database(db, rng, runs=rng.randint(6, 9),
                                        analysed=how != "never analysed")
    run_id, results = last_run(fixture)
    if how == "shown run not analysed":
        with sqlite3.connect(db) as connection:
            connection.execute("DELETE FROM result_analysis WHERE run_id = ?", (run_id,))
            connection.execute("UPDATE runs SET analysed_at = NULL WHERE id = ?", (run_id,))
    out = tmp_path / "report"
    summary = build(db, out)
    assert summary.run_id == run_id
    pages = {name: Page(out / f"{name}.html") for name in ("index", "history", "compare")}
    history = series_rows(pages["history"])
    assert len(history) == len({r.series_key for r in fixture.inserted})
    for row in history.values():
        assert (row[7].text, row[7].value, row[8].text, row[9].value) == \
            ("not analysed", None, "not analysed", None)
    if how == "schema 5":
        assert "No result_analysis table in this database (schema version 5)" in \
            pages["history"].text
        # The triage's own items have no stored baseline run to compare with.
        triage = pages["index"].rows("triage-table")
        failed = next(row for row in triage if row[1].text == "failed")
        assert "not analysed" in failed[6].text
    else:
        assert f"has not judged run {run_id}" in pages["history"].text
    assert "not analysed" in pages["index"].text
    check_images(out, pages)


def test_triage_follows_the_rank_tables(tmp_path, rng):
    """Most severe first, then by state (facts before verdicts, the surest regression first),
    then by kind: explicit ranks of the closed sets, whatever order the alerts were stored in."""
    db = tmp_path / "ranks.sqlite"
    fixture = fixtures.Fixture(db)
    run_id = fixture.run(fixtures.START)
    cpu = fixture.device(run_id, "cpu", CPU_NAME, "cpu:ci")
    states = {"performance": ("suspected", "confirmed", "outlier", "ambiguous", "improved"),
              "kernel": ("suspected", "confirmed", "outlier", "ambiguous", "improved"),
              "accuracy": ("suspected", "confirmed", "outlier"),
              "status": ("failed", "crashed", "timeout", "error", "missing", "skipped"),
              "run": ("fewer_cases", "ambiguous")}
    stored = []
    cases = [fixtures.Case(f"cpu.k{index:02d}", seqlen_q=64 * (index + 1),
                           seqlen_k=64 * (index + 1), dtype="fp32")
             for index in range(rng.randint(25, 40))]
    fixtures.describe(cases, [CPU_NAME])
    for index, case in enumerate(cases):
        fixture.result(run_id, cpu, case, median_s=rng.uniform(1e-3, 2e-3))
        kind = rng.choice(sorted(states))
        state = rng.choice(states[kind])
        severity = rng.choice(("error", "warning", "info"))
        key = {"kernel": case.kernel_wide_key(CPU_NAME),
               "run": f"run|{CPU_NAME}"}.get(kind, case.series_key(CPU_NAME))
        fixture.alert(run_id, key, kind, severity, f"alert {index}", state=state)
        label = {"kernel": "every shape (kernel-wide)",
                 "run": "the whole run"}.get(kind, case.label)
        stored.append((severity, f"{kind} {state}", "" if kind == "run" else case.kernel, label))
    fixture.close()
    build(db, tmp_path / "report")
    shown = [(r[0].text, r[1].text, r[2].text, r[3].text)
             for r in Page(tmp_path / "report" / "index.html").rows("triage-table")]

    def rank(item):
        kind, state = item[1].split(" ", 1)
        return (analysis.SEVERITY_RANK[item[0]], analysis.STATE_RANK[state],
                analysis.KIND_RANK[kind], item[2], item[3])

    assert shown == sorted(stored, key=rank)  # stable: equal ranks keep the stored order
    # The tables themselves, as the triage promises them.
    assert [s for s, _ in sorted(analysis.SEVERITY_RANK.items(), key=lambda kv: kv[1])] == \
        ["error", "warning", "info"]
    order = sorted(analysis.STATE_RANK, key=analysis.STATE_RANK.get)
    for earlier, later in (("crashed", "failed"), ("failed", "missing"), ("missing", "confirmed"),
                           ("confirmed", "suspected"), ("suspected", "ambiguous"),
                           ("ambiguous", "outlier"), ("outlier", "improved")):
        assert order.index(earlier) < order.index(later)
    assert set(analysis.STATE_RANK) >= {"", "missing", "fewer_cases", *fixtures_verdicts()}
    assert set(analysis.KIND_RANK) == {"performance", "accuracy", "status", "kernel", "run"}


def fixtures_verdicts():
    from reports.db import STATUSES, VERDICTS
    return set(VERDICTS) | set(STATUSES)


def test_the_compare_page_shows_the_environments_attnbench_stored(tmp_path, rng):
    """The compare page lists the fields of the two runs' environments, as attnbench named and
    stored them (runs.environment_json), whose values differ; a run without one (written before
    schema version 10) is said to have none, and nothing is compared."""
    fields = [f"field {i} {rng.getrandbits(16):04x}" for i in range(rng.randint(3, 8))]
    changed = rng.sample(fields, rng.randint(1, len(fields) - 1))

    def stored(run):
        return json.dumps([{"what": what, "value": f"{what} {run if what in changed else 0}"}
                           for what in fields])

    db = tmp_path / "compare.sqlite"
    fixture = fixtures.Fixture(db)
    for index, environment_json in enumerate(("", stored(1), stored(2))):
        run_id = fixture.run(fixtures.START + datetime.timedelta(days=index),
                             git_sha=f"{index:040x}", environment_json=environment_json)
        fixture.device(run_id, "cpu", CPU_NAME, "cpu:ci")
    fixture.close()
    build(db, tmp_path / "report")
    page = Page(tmp_path / "report" / "compare.html")
    rows = {row[0].text: (row[1].text, row[2].text) for row in page.rows("environment-differences")}
    assert rows == {what: (f"{what} 1", f"{what} 2") for what in changed}
    build(db, tmp_path / "older", run_id=2, compare_to=1)
    assert "No environment stored for one of the runs" in Page(tmp_path / "older" / "compare.html").text


def test_triage_shows_the_environment_the_analysis_stored(tmp_path, rng):
    """Each triage item shows what differs from its baseline's environment as the analysis stored
    it (the alert's text, else its series' result_analysis row's, schema version 10), and says
    why there is none: no baseline run yet, not analysed, analysed before schema 10. The report
    compares no environments itself."""
    runs = rng.randint(3, 6)
    kernels = ("cuda.flash2", "cuda.naive")
    cases = {k: [fixtures.Case(k, seqlen_q=s, seqlen_k=s) for s in (512, 1024, 2048, 4096)]
             for k in kernels}
    fixtures.describe([c for k in kernels for c in cases[k]], ["NVIDIA H200"])

    def database(path, version=None):
        fixture = fixtures.Fixture(path, version)
        results = {}
        for index in range(runs):
            run_id = fixture.run(fixtures.START + datetime.timedelta(days=index),
                                 cuda_driver=f"580.{index:02d}")
            gpu = fixture.device(run_id, "cuda", "NVIDIA H200", "GPU-1", sm_version=90)
            for case in cases["cuda.flash2"] + cases["cuda.naive"]:
                failed = index == runs - 1 and case == cases["cuda.naive"][0]
                results[(run_id, case)] = fixture.result(
                    run_id, gpu, case, status="failed" if failed else "passed",
                    median_s=None if failed else rng.uniform(1e-4, 2e-4),
                    error=0.5 if failed else rng.uniform(1e-4, 5e-3), bound=0.01,
                    message="max |out - ref| 0.5 exceeds the bound 0.01" if failed else "")
        return fixture, run_id, results

    # Stored environments: free text, as the analysis wrote it; one series without a baseline.
    fixture, last, results = database(tmp_path / "environment.sqlite")
    stored = {case: f"driver 580.{rng.randrange(runs - 1):02d} -> 580.{runs - 1:02d} "
                    f"({rng.getrandbits(32):08x})" for k in kernels for case in cases[k]}
    stored[cases["cuda.naive"][0]] = ""  # a failed series with too little history
    for kernel in kernels:
        for case in cases[kernel]:
            fixture.analysis(last, case.series_key("NVIDIA H200"), "ok",
                             result_id=results[(last, case)], environment=stored[case])
        fixture.analysis(last, cases[kernel][0].kernel_wide_key("NVIDIA H200"), "suspected",
                         environment=f"{kernel} kernel-wide {rng.getrandbits(32):08x}")
        fixture.alert(last, cases[kernel][0].kernel_wide_key("NVIDIA H200"), "kernel", "warning",
                      f"{kernel} slower", state="suspected",
                      environment=f"alert's own {rng.getrandbits(32):08x}")
    slow = cases["cuda.flash2"][3]
    fixture.alert(last, slow.series_key("NVIDIA H200"), "performance", "warning", "slower",
                  state="suspected")
    fixture.close()
    build(tmp_path / "environment.sqlite", tmp_path / "report")
    triage = {(row[1].text, row[2].text): row[6].text for row in
              Page(tmp_path / "report" / "index.html").rows("triage-table")}
    assert triage[("performance suspected", "cuda.flash2")] == stored[slow]
    assert triage[("failed", "cuda.naive")] == "no stored baseline run (too little history)"
    for kernel in kernels:
        assert triage[("kernel suspected", kernel)].startswith("alert's own ")

    # A file analysed before schema 10 stored no environment: said so, none computed.
    fixture, last, results = database(tmp_path / "v9.sqlite", version=9)
    fixture.analysis(last, slow.series_key("NVIDIA H200"), "suspected",
                     result_id=results[(last, slow)])
    fixture.alert(last, slow.series_key("NVIDIA H200"), "performance", "warning", "slower",
                  state="suspected")
    fixture.close()
    build(tmp_path / "v9.sqlite", tmp_path / "report9")
    triage = {(row[1].text, row[2].text): row[6].text for row in
              Page(tmp_path / "report9" / "index.html").rows("triage-table")}
    assert triage[("performance suspected", "cuda.flash2")] == \
        "not stored: analysed before schema version 10"
    assert triage[("failed", "cuda.naive")] == \
        "not analysed: no stored judgement of this series in this run"
