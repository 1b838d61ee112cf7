"""The report built from databases with known content shows exactly that content: counts,
ceilings, triage, fastest kernels, accuracy, clocks, history and comparisons; every image exists
and has something drawn; every database string is escaped; old and newer schemas build."""

import math
import os
import pathlib
import sqlite3
import statistics
import subprocess
import sys
from collections import defaultdict

import pytest

from reports.build import build
from reports.db import ReportError
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

    # Health: the GPU's median SM clock over every sample of the run.
    gpu_clocks = [c for r in results if r.device.kind == "cuda" for c in r.clocks]
    health = {row[0].text: row for row in index.rows("health-table")}
    assert health["cuda:0: NVIDIA H200"][3].value == statistics.median(gpu_clocks)
    assert int(health["cuda:0: NVIDIA H200"][4].text) == sum(
        1 for c in gpu_clocks if c < 0.9 * statistics.median(gpu_clocks))

    # History: this run's median of every series, and its change against run 1.
    previous = {r.series_key: r for r in fixture.inserted if r.run_id == run_id - 1}
    history = {(row[0].text, row[1].text, row[2].text): row
               for row in pages["history"].rows("series-table")}
    for r in results:
        row = history[(r.case.kernel, r.case.label, r.device.name)]
        assert row[6].value == r.median_s
        before = previous[r.series_key]
        if r.median_s is not None and before.median_s is not None and before.status == "passed":
            assert row[7].value == r.median_s / before.median_s - 1
    assert len(history) == len({r.series_key for r in fixture.inserted})

    # Commit-to-commit comparison: every case timed in both runs, and each kernel's geomean.
    changes = {(row[0].text, row[1].text, row[2].text): row[5].value
               for row in pages["compare"].rows("case-changes")}
    both = [(previous[r.series_key], r) for r in results
            if r.median_s is not None and previous[r.series_key].median_s is not None]
    assert changes == {(r.case.kernel, r.case.label, r.device.name): r.median_s / b.median_s - 1
                       for b, r in both}
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
    history = pages["history"].rows("series-table")
    assert len(history) == len(results)
    by_key = defaultdict(list)
    for r in fixture.inserted:
        by_key[(r.case.kernel, r.case.label)].append(r.median_s)
    for row in history:
        medians = by_key[(row[0].text, row[1].text)]
        assert int(row[4].text) == 12
        center = statistics.median(medians[-11:-1])  # the 10 good runs before the last
        assert row[7].value == medians[-1] / center - 1
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
    broken = fixtures.Case(kernel, seqlen_q=2048, seqlen_k=2048, distribution=f"d{HOSTILE}")
    fixture.result(run_id, gpu, broken, status="crashed", message=f"boom {HOSTILE}",
                   repro=f"attnbench {HOSTILE}")
    key = cases[0].series_key(gpu.name)
    fixture.alert(run_id, key, f"kind{HOSTILE}", "error", f"message {HOSTILE}",
                  f'{{"note{HOSTILE}": "{HOSTILE.replace(chr(34), chr(39))}"}}',
                  state=f"state{HOSTILE}", environment=f"env {HOSTILE}",
                  annotation=f"annotation {HOSTILE}")
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
    fixture, summary, pages, out = built(tmp_path, fixtures.mixed_database, rng, version=version)
    text = pages["index"].text
    triage = {row[1].text for row in pages["index"].rows("triage-table")}
    # Failures come from the results whatever the schema; alerts only where there is a table.
    assert {"failed", "timeout", "missing", "passed -> skipped"} <= triage
    if version == 1:
        assert "No alerts table in this database (schema version 1)" in text
        assert "No annotations table in this database" in pages["history"].text
    else:
        assert any(what.startswith("performance") for what in triage)
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
    fixtures.mixed_database(db, rng)
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
