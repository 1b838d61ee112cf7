"""Scale (ctest label slow): a synthetic year of nightly history, 365 runs x 2,000 GPU cases,
builds in under 60 s and still shows the last run's regressions and every series."""

import time

import pytest

from reports.build import build
from reports.tests import fixtures
from reports.tests.pages import Page

BUILD_LIMIT_S = 60
RUNS = 365
CASES = 2000


@pytest.mark.slow
def test_a_year_of_history_builds_in_under_a_minute(tmp_path, rng, record_property):
    db = tmp_path / "year.sqlite"
    started = time.perf_counter()
    fixture = fixtures.year_database(db, rng, runs=RUNS, cases=CASES)
    record_property("generate_seconds", time.perf_counter() - started)
    record_property("database_mib", db.stat().st_size / 2**20)

    started = time.perf_counter()
    summary = build(db, tmp_path / "report")
    seconds = time.perf_counter() - started
    record_property("build_seconds", seconds)
    assert seconds < BUILD_LIMIT_S
    assert summary.run_id == RUNS and summary.results == CASES

    history = Page(tmp_path / "report" / "history.html")
    rows = history.rows("series-table")
    assert len(rows) == CASES
    assert all(int(row[4].text) == RUNS for row in rows)
    # Every series' change, verdict and baseline are the detector's stored row of the last run.
    stored = {(row["verdict"], row["change_fraction"], row["center_s"])
              for (run_id, _), row in fixture.analysed.items() if run_id == RUNS}
    assert {(row[8].text, row[7].value, row[9].value) for row in rows} == stored
    # The two steps placed in the last two runs are the triage, most severe first.
    triage = Page(tmp_path / "report" / "index.html").rows("triage-table")
    last_two = {case.label for case, (run, _) in fixture.steps.items() if run >= RUNS - 2}
    assert [row[1].text for row in triage] == ["performance confirmed", "performance suspected"]
    assert {row[3].text for row in triage} == last_two
