"""studies.html (issue 17): each study suite's expected finding, read from its suite file, beside
what the newest run of that suite measured, exactly as stored; a study never run says how to run
it. Fresh random values per test (the seed is printed)."""

import datetime
import os
import subprocess

import pytest

from reports import studies
from reports.build import build
from reports.tests import fixtures
from reports.tests.pages import Page

START = datetime.datetime(2026, 12, 1, 2, 0, 0)


def test_the_finding_is_the_suite_files_paragraph():
    text = ("# decode: a study.\n#\n# The expected finding: flash reads the cache\n#   at the copy"
            " bandwidth:\n#   - at batch 1, launches\n#     dominate;\n#   - GQA reads less.\n#\n"
            "# Something else.\nname = \"decode\"\n")
    assert studies.expected_finding(text) == [
        "The expected finding: flash reads the cache at the copy bandwidth:",
        "at batch 1, launches dominate;", "GQA reads less."]
    assert studies.expected_finding("name = \"x\"\n# The expected finding: after the matrix\n") == []
    for name in studies.STUDIES:  # every study suite of the project writes one
        description, finding = studies.suite_text(name)
        assert description and finding[0].startswith("The expected finding"), name


def test_each_study_shows_its_newest_run_beside_its_finding(tmp_path, rng):
    fixture = fixtures.Fixture(tmp_path / "studies.sqlite")
    gpu_case = dict(batch=8, heads_q=16, heads_kv=16, seqlen_q=1024, seqlen_k=1024, dtype="bf16",
                    mask="causal")
    stale = fixture.run(START, suite="masking")
    device = fixture.device(stale, "cuda", "NVIDIA H200", "GPU-1111")
    fixture.result(stale, device, fixtures.Case("cuda.masked_fused", **gpu_case),
                   median_s=1.0, launches=9, extra_memory_bytes=1)
    newest = fixture.run(START + datetime.timedelta(days=1), suite="masking")
    device = fixture.device(newest, "cuda", "NVIDIA H200", "GPU-1111")
    wanted = {}
    for kernel, launches in (("cuda.masked_outofplace", 3), ("cuda.masked_fused", 1),
                             ("cuda.masked_inplace", 2)):
        median = rng.uniform(1e-4, 1e-3)
        memory = rng.randrange(1 << 20, 1 << 30)
        energy = rng.uniform(0.01, 0.5)
        fixture.result(newest, device, fixtures.Case(kernel, **gpu_case), median_s=median,
                       launches=launches, extra_memory_bytes=memory, energy_j=energy)
        wanted[kernel] = (median, launches, memory, energy)
    other = fixture.run(START + datetime.timedelta(days=2), suite="smoke")  # the report's run
    fixture.device(other, "cpu", "CPU", "cpu:1")
    fixture.close()

    build(tmp_path / "studies.sqlite", tmp_path / "report")
    page = Page(tmp_path / "report" / "studies.html")
    assert {f"study-{name}" for name in studies.STUDIES} <= page.ids
    assert "Expected: The expected finding, out of place > in place > fused" in page.text
    assert "5 in place; every fused backend (flash, efficient, cuDNN) 1." in page.text
    rows = page.rows("study-masking-table")
    # The newest masking run only, the fewest launches first, every number as stored.
    assert [row[0].text for row in rows] == ["cuda.masked_fused", "cuda.masked_inplace",
                                            "cuda.masked_outofplace"]
    for row in rows:
        median, launches, memory, energy = wanted[row[0].text]
        assert (row[4].value, row[5].value, row[6].value, row[7].value) == (
            median, launches, memory, energy)
    assert f"Run {newest}," in page.text
    for name in ("memory", "long_context", "decode"):
        assert f"Not run in this database yet: attnbench run --suite {name}" in page.text
    assert 'href="studies.html"' in (tmp_path / "report" / "index.html").read_text()


@pytest.mark.skipif(not os.environ.get("ATTNBENCH_CLI"),
                    reason="ATTNBENCH_CLI (the attnbench binary; ctest sets it) is not set")
def test_a_real_masking_run_on_the_cpu(tmp_path):
    """The study as a user runs it on a CPU host: the in-house masked kernels at the study's
    shape, each row with its time and extra memory; out of place allocates the most."""
    db = tmp_path / "masking.sqlite"
    ran = subprocess.run([os.environ["ATTNBENCH_CLI"], "run", "--suite", "masking", "--kernels",
                          "cpu.masked_*", "--repetitions", "3", "--max-case-seconds", "0.5",
                          "--db", str(db)], capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    build(db, tmp_path / "report")
    rows = {row[0].text: row for row in Page(tmp_path / "report" / "studies.html")
            .rows("study-masking-table")}
    assert set(rows) == {"cpu.masked_outofplace", "cpu.masked_inplace", "cpu.masked_fused"}
    for row in rows.values():
        assert row[3].text == "passed" and row[4].value > 0, [c.text for c in row]
    memory = {kernel: row[6].value for kernel, row in rows.items()}
    assert memory["cpu.masked_outofplace"] > memory["cpu.masked_inplace"], memory
