#!/usr/bin/env bash
# Proves the regression gate on this host's real timing noise, end to end through ci/nightly.sh:
#  1. BASELINE runs to build a history, then UNCHANGED runs of the same build: none may raise a
#     confirmed alert (each must exit 0).
#  2. A build with a slowdown injected into one kernel (CMake's ATTNBENCH_INJECT_SLOWDOWN, test
#     builds only; built first, so that no build disturbs the timings between the phases),
#     nightly.sh from it on the same database until it exits 1 (at most 5 runs: a CPU kernel
#     needs its rerun and the next run to confirm, and a busy host's run waits for a later one):
#     the confirmed alerts must name that kernel alone.
# Usage: ci/gate-check.sh OUTDIR [--baseline N] [--unchanged N] [--inject KERNEL:PERCENT]
#        (defaults 10, 20, cpu.flash:10; extra nightly.sh environment passes through, e.g. OMP_NUM_THREADS)
# Writes OUTDIR/gate.sqlite, OUTDIR/nightly-NN.log and OUTDIR/summary.md. Exit 0 when both hold,
# 1 when one does not, 2 on a usage or build error.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: ci/gate-check.sh OUTDIR [--baseline N] [--unchanged N] [--inject KERNEL:PERCENT]" >&2; exit 2; }
[ $# -ge 1 ] || usage
out="$1"; shift
baseline=10 unchanged=20 inject="cpu.flash:10"
while [ $# -gt 0 ]; do
  case "$1" in
    --baseline) baseline="$2"; shift 2 ;;
    --unchanged) unchanged="$2"; shift 2 ;;
    --inject) inject="$2"; shift 2 ;;
    *) echo "ci/gate-check.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
[[ "$baseline" =~ ^[0-9]+$ && "$unchanged" =~ ^[0-9]+$ ]] || { echo "ci/gate-check.sh: --baseline and --unchanged take whole numbers" >&2; exit 2; }
[[ "$inject" =~ ^[A-Za-z0-9_.]+:[0-9.]+$ ]] || { echo "ci/gate-check.sh: --inject '$inject': accepted: KERNEL:PERCENT, e.g. cpu.flash:10" >&2; exit 2; }
slowed="${inject%%:*}"

mkdir -p "$out"
out="$(cd "$out" && pwd)"
db="$out/gate.sqlite"
rm -f "$db" "$out"/nightly-*.log
# CPU-only builds: the gate is proved on the CPU kernels; the CUDA kernels would only add build time.
export ATTNBENCH_DB="$db" ATTNBENCH_REPORT_DIR="$out/ci" ATTNBENCH_HTML_DIR="$out/report"
export ATTNBENCH_CMAKE_ARGS="-DATTNBENCH_CUDA=OFF"
summary="$out/summary.md"
start=$(date +%s)

run_nightly() {  # $1 build dir, $2 log name; echoes the exit code
  local code=0
  ATTNBENCH_BUILD_DIR="$1" ci/nightly.sh > "$out/$2" 2>&1 || code=$?
  echo "$code"
}
# The kernels named by the gating (error) alerts of a nightly log: confirmed performance alerts
# per shape and per kernel, accuracy and status alerts. The final verdict is the rerun's when there
# was one, else the regressions'.
confirmed_kernels() {
  local log="$1" verdicts
  if grep -q '^ci/nightly.sh: re-measuring the suspects' "$log"; then
    verdicts=$(sed -n '/^ci\/nightly.sh: re-measuring the suspects/,$p' "$log")
  else
    verdicts=$(cat "$log")
  fi
  echo "$verdicts" | awk '$1 == "error" { print $4 }' | sort -u
}

{
  echo "# Regression gate on real noise: $(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD)"
  echo
  echo "Host: $(nproc --all) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs);" \
       "OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}; baseline $baseline runs, then $unchanged unchanged, then $inject injected."
  echo
  echo "| nightly | build | exit | confirmed alerts | suspected | seconds |"
  echo "|---|---|---|---|---|---|"
} > "$summary"

cmake --preset ci -B build-gate -DATTNBENCH_CUDA=OFF >/dev/null
cmake --build build-gate --parallel "$(nproc --all)" --target attnbench >/dev/null
cmake --preset ci -B build-gate-slow -DATTNBENCH_CUDA=OFF -DATTNBENCH_INJECT_SLOWDOWN="$inject" >/dev/null
cmake --build build-gate-slow --parallel "$(nproc --all)" --target attnbench >/dev/null

n=0 false_alarms=0
for ((i = 1; i <= baseline + unchanged; i++)); do
  n=$((n + 1))
  log=$(printf 'nightly-%02d.log' "$n")
  t0=$(date +%s)
  code=$(run_nightly build-gate "$log")
  [ "$code" -eq 2 ] && { echo "ci/gate-check.sh: nightly $n exited 2 (see $out/$log)" >&2; exit 2; }
  kernels=$(confirmed_kernels "$out/$log" | paste -sd, -)
  suspected=$(grep -cE '^warning +SUSPECTED ' "$out/$log" || true)
  phase=$([ "$i" -le "$baseline" ] && echo baseline || echo unchanged)
  if [ "$phase" = unchanged ] && { [ "$code" -ne 0 ] || [ -n "$kernels" ]; }; then
    false_alarms=$((false_alarms + 1))
  fi
  echo "| $n | $phase | $code | ${kernels:-none} | $suspected | $(( $(date +%s) - t0 )) |" >> "$summary"
  echo "ci/gate-check.sh: nightly $n ($phase): exit $code, confirmed: ${kernels:-none}, $(( $(date +%s) - start )) s so far"
done

caught=0 named=""
for ((j = 1; j <= 5; j++)); do
  n=$((n + 1))
  log=$(printf 'nightly-%02d.log' "$n")
  t0=$(date +%s)
  code=$(run_nightly build-gate-slow "$log")
  kernels=$(confirmed_kernels "$out/$log" | paste -sd, -)
  suspected=$(grep -cE '^warning +SUSPECTED ' "$out/$log" || true)
  echo "| $n | $inject | $code | ${kernels:-none} | $suspected | $(( $(date +%s) - t0 )) |" >> "$summary"
  echo "ci/gate-check.sh: nightly $n ($inject): exit $code, confirmed: ${kernels:-none}"
  if [ "$code" -eq 1 ]; then caught=$j; named="$kernels"; break; fi
done

ok=1
{
  echo
  echo "- Unchanged nightlies with a confirmed alert or a non-zero exit: **$false_alarms of $unchanged**."
  if [ "$caught" -gt 0 ] && [ "$named" = "$slowed" ]; then
    echo "- Injected $inject: exit 1 at slowed nightly $caught of at most 5, confirmed alerts name **$named** alone:"
    echo
    echo '```'
    sed -n '/^ci\/nightly.sh: re-measuring the suspects/,$p' "$out/$log" | grep -E '^error ' | cut -c1-240
    echo '```'
  else
    echo "- Injected $inject: **not caught as required** (exit 1 at slowed nightly ${caught}, named: '${named:-none}')."
    ok=0
  fi
  echo
  echo "Total $(( $(date +%s) - start )) s."
} >> "$summary"
[ "$false_alarms" -eq 0 ] || ok=0
cat "$summary"
[ "$ok" -eq 1 ] && exit 0 || exit 1
