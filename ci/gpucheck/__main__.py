"""ci/gpu-check.sh's implementation (the shell script only finds python3 and calls this):

    gpu-check OUTDIR [--budget S] [--filter REGEX]   the check, on a GPU host
    gpu-check --plan [--device-model h100|h200]      the plan and its predicted seconds
    gpu-check --rehearse OUTDIR                      every step that needs no GPU, here
    gpu-check OUTDIR --experiment flash3             issue 38's experiment, not the claims
    gpu-check --plan --experiment flash3             its plan
"""

import argparse
import os
import sys
from pathlib import Path

from gpucheck import experiment, plan, run

ROOT = Path(__file__).resolve().parents[2]


def default_cli():
    return os.environ.get("ATTNBENCH_CLI") or str(ROOT / "build" / "bin" / "attnbench")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="ci/gpu-check.sh", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outdir", nargs="?", help="where the database, logs and summary.md go")
    parser.add_argument("--budget", type=float, default=plan.DEFAULT_BUDGET_S,
                        help=f"seconds for the whole check (default {plan.DEFAULT_BUDGET_S})")
    parser.add_argument("--filter", default="", help="regex narrowing the sanitizer and smoke cases")
    parser.add_argument("--plan", action="store_true", help="print the plan and exit")
    parser.add_argument("--device-model", default=None,
                        help="with --plan: the modeled GPU, h100 or h200 (default: the GPU "
                        "present, else attnbench's default, h200)")
    parser.add_argument("--cli", default=None, help="with --plan: the attnbench binary to plan with "
                        "(default $ATTNBENCH_CLI, else build/bin/attnbench)")
    parser.add_argument("--experiment", choices=experiment.EXPERIMENTS, default=None,
                        help="run an experiment's steps (gpucheck/experiment.py) in place of the "
                        "claims' steps")
    parser.add_argument("--rehearse", action="store_true",
                        help="run what needs no GPU (unpack, libraries, plan, summary) here")
    args = parser.parse_args(argv)
    if args.budget <= 0:
        parser.error(f"--budget {args.budget:g}: accepted: seconds > 0")
    if args.plan:
        cli = args.cli or default_cli()
        if not Path(cli).exists():
            parser.error(f"--plan needs an attnbench binary: {cli} does not exist (build it, or "
                         "give --cli)")
        planned = plan.experiment_steps(args.experiment) if args.experiment else \
            plan.steps(args.filter, plan.registry_kernels(cli))
        steps = plan.predict(planned, cli, args.device_model)
        print(plan.format_plan(steps, args.budget))
        return 0 if plan.plan_fits(steps) else 1
    if not args.outdir:
        parser.error("OUTDIR is required (or --plan)")
    return run.main_run(ROOT, args.outdir, args.budget, args.filter, args.rehearse,
                        args.experiment)


if __name__ == "__main__":
    sys.exit(main())
