#!/usr/bin/env bash
# Measures whether interleaved timing cancels this host's noise (issue 41): PAIRS pairs of runs of
# the smoke suite on the CPU, one timed back to back (--no-interleave) and one interleaved (the
# kernels of each problem round-robin), alternating which comes first; then ci/noise_spread.py on
# each mode's database: the spread of the run levels, of the kernels' own moves beyond the level
# (what the gate's kernel-wide aggregates see as noise) and of each series beyond both.
# Usage: ci/noise-check.sh OUTDIR [--pairs N] [--neighbour]
#   --pairs N      pairs of runs (default 6)
#   --neighbour    a noisy neighbour while the runs last: two busy threads that switch on and off
#                  at random (0.2-3 s each way), as another job on a shared CI machine
# Uses build/bin/attnbench (ATTNBENCH overrides). Writes OUTDIR/back-to-back.sqlite,
# OUTDIR/interleaved.sqlite, OUTDIR/run-*.log and OUTDIR/summary.txt. Exit 0 when every run
# completed, 1 when one did not, 2 on a usage error.
set -euo pipefail
usage_line="usage: ci/noise-check.sh OUTDIR [--pairs N] [--neighbour]"
die() { echo "ci/noise-check.sh: $*" >&2; exit 2; }
[ $# -ge 1 ] || die "$usage_line"
case "$1" in
  -h|--help) echo "$usage_line"; exit 0 ;;
  -*) die "the first argument is OUTDIR, got '$1'; $usage_line" ;;
esac
out="$1"; shift
pairs=6 neighbour=0
while [ $# -gt 0 ]; do
  case "$1" in
    --pairs) [ $# -ge 2 ] || die "--pairs needs a value: a whole number >= 2"; pairs="$2"; shift 2 ;;
    --neighbour) neighbour=1; shift ;;
    *) die "unknown option '$1'; $usage_line" ;;
  esac
done
[[ "$pairs" =~ ^[0-9]+$ ]] && (( pairs >= 2 )) || die "--pairs '$pairs': accepted: a whole number >= 2"
root="$(cd "$(dirname "$0")/.." && pwd)"
attnbench="${ATTNBENCH:-$root/build/bin/attnbench}"
[ -x "$attnbench" ] || die "no attnbench at $attnbench: build first (cmake --preset ci && cmake --build build)"
mkdir -p "$out"
rm -f "$out/back-to-back.sqlite"* "$out/interleaved.sqlite"*

neighbour_pid=""
stop_neighbour() { [ -z "$neighbour_pid" ] || kill "$neighbour_pid" 2>/dev/null || true; }
trap stop_neighbour EXIT
if (( neighbour )); then
  python3 - <<'EOF' &
import multiprocessing, random, signal, sys, time
# Killed, the parent exits normally, and multiprocessing ends its daemonic busy processes with it.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
def busy(seed):
    rng = random.Random(seed)
    while True:
        end = time.monotonic() + rng.uniform(0.2, 3.0)
        while time.monotonic() < end:
            pass
        time.sleep(rng.uniform(0.2, 3.0))
for seed in (1, 2):
    multiprocessing.Process(target=busy, args=(seed,), daemon=True).start()
while True:
    time.sleep(3600)
EOF
  neighbour_pid=$!
  echo "ci/noise-check.sh: a noisy neighbour runs (pid $neighbour_pid)"
fi

status=0
run_one() {  # MODE INDEX
  local mode=$1 index=$2 flag=()
  [ "$mode" = back-to-back ] && flag=(--no-interleave)
  local start=$SECONDS
  if ! "$attnbench" run --suite smoke --devices cpu "${flag[@]}" --db "$out/$mode.sqlite" \
      > "$out/run-$index-$mode.log" 2>&1; then
    # Exit 1 is a failed case (still a complete run); anything else is not.
    grep -q "^attnbench run [0-9]*: " "$out/run-$index-$mode.log" || status=1
  fi
  echo "ci/noise-check.sh: pair $index, $mode: $((SECONDS - start)) s"
}
for ((i = 1; i <= pairs; i++)); do
  if (( i % 2 )); then run_one back-to-back "$i"; run_one interleaved "$i"
  else run_one interleaved "$i"; run_one back-to-back "$i"; fi
done
stop_neighbour
python3 "$root/ci/noise_spread.py" "$out/back-to-back.sqlite" "$out/interleaved.sqlite" \
  | tee "$out/summary.txt"
exit "$status"
