"""gpu-check: the one run that proves the project's GPU claims on a GPU host (ci/gpu-check.sh).

plan.py     the steps, most valuable first, and their predicted seconds (`--plan`);
run.py      runs the steps inside the budget; evidence.json and summary.md after every step;
setup.py    the GPU, the bundle (refused unless built from this checkout), libraries, pre-checks;
evidence.py what a run left in OUTDIR, read for the judges;
claims.py   the claims of GPU-CLAIMS.md and one judge per claim id that turns the evidence
            into pass, fail or not measured;
summary.py  OUTDIR/summary.md and the short table printed last
            (`PYTHONPATH=ci python3 -m gpucheck.summary OUTDIR`).

Standard library only: the GPU host has python3 and nothing installed for this."""
