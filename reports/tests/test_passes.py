"""The pass axis in the report (issue 36): a backward's and a training step's results read with
their pass from the database the attnbench binary writes, a file from before the pass (schema
10 and older) reads as forwards, and the throughput plots put each pass in panels of its own."""

import os
import sqlite3
import subprocess
import types

from reports import analysis
from reports.build import build
from reports.db import Database

CLI = os.environ.get("ATTNBENCH_CLI", "build/bin/attnbench")


def _result(pass_name, mask="causal"):
    return types.SimpleNamespace(dtype="bf16", head_dim=64, head_dim_v=64, mask=mask,
                                 pass_name=pass_name)


def test_each_pass_has_its_own_panels_forward_first():
    keys = {analysis.panel_key(_result(p)) for p in ("fwd_bwd", "bwd", "fwd")}
    assert len(keys) == 3
    ordered = sorted(keys, key=analysis.panel_sort_key)
    assert [analysis.panel_title(k) for k in ordered] == [
        "bf16, d=64, mask=causal", "bf16, d=64, mask=causal, bwd",
        "bf16, d=64, mask=causal, fwd_bwd"]


def test_results_carry_their_pass_and_older_files_read_as_forwards(tmp_path):
    db_path = tmp_path / "passes.sqlite"
    ran = subprocess.run(
        [CLI, "run", "--devices", "cpu", "--kernels", "cpu.flash", "--shape",
         "b=1,hq=2,s=64,d=16,dtype=bf16,mask=causal", "--pass", "all", "--repetitions", "2",
         "--db", str(db_path)], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    db = Database(db_path)
    run_id = 1  # the file's only run
    results = db.results(run_id)
    assert sorted(r.pass_name for r in results) == ["bwd", "fwd", "fwd_bwd"]
    for r in results:
        assert r.timed and r.flops_per_s > 0, r.shape
        assert (r.pass_name == "fwd") == ("pass=" not in r.shape)
    build(db_path, tmp_path / "report")
    assert (tmp_path / "report" / "index.html").exists()

    # The same file as schema 10 wrote it: no pass column; every case a forward.
    connection = sqlite3.connect(db_path)
    connection.execute("DELETE FROM cases WHERE pass != 'fwd'")
    connection.execute("ALTER TABLE cases DROP COLUMN pass")
    connection.commit()
    connection.close()
    older = Database(db_path).results(run_id, with_samples=False)
    assert older and all(r.pass_name == "fwd" for r in older)
