#!/usr/bin/env bash
# ci/gpu-check.sh OUTDIR [--budget S] [--filter REGEX]
# ci/gpu-check.sh --plan [--device-model h100|h200]   (default: the GPU present, else h200)
# ci/gpu-check.sh --rehearse OUTDIR
#
# The one command that proves the GPU side on a host with a GPU and no package registry (CUDA 13,
# CMake, compute-sanitizer, python3 with PyTorch and its pip cuDNN; no -dev packages), inside a
# budget (default 300 s). Steps, most valuable first, each planned from attnbench's cost model:
#   setup      the bundle (ci/make-gpu-bundle.sh), refused unless built from this checkout's
#              sources; cuDNN from PyTorch's wheel, cuBLAS from the toolkit; pre-checks (ctest,
#              compute-sanitizer, cuDNN and the CUDA it was built for, cuBLAS, NVML): a missing
#              piece disables the steps that need it, with its reason
#   figures    calibrate; the figure shapes of every claim, for the kernels it names, with
#              energy; the timer tests (host-clock agreement, an L2 flush that bills nothing)
#   ctest      `ctest -L gpu`: every GPU kernel over the ctest suite, the executor, isolation
#   sanitizer  compute-sanitizer memcheck, racecheck and synccheck on tiny shapes
#   gpu-smoke  the small suite, timed
# A step that does not fit what is left of the budget is recorded "not reached: budget". OUTDIR
# gets attnbench.sqlite, evidence.json, the tests' XML, logs.tar.gz and summary.md (a row per id of
# GPU-CLAIMS.md), rewritten after every step and on SIGTERM/SIGINT; a short table is printed
# last. Exit: 0 every step and claim passed; 1 one failed; 2 no GPU, bad usage, or no bundle.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
command -v python3 >/dev/null || { echo "gpu-check: python3 is not on PATH" >&2; exit 2; }
export PYTHONPATH="$root/ci${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
exec python3 -m gpucheck "$@"
