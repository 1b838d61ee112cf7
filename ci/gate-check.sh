#!/usr/bin/env bash
# Proves the regression gate on this host's real timing noise, end to end through ci/nightly.sh:
#  1. BASELINE runs to build a history, then UNCHANGED runs of the same build: none may raise a
#     confirmed alert (each must exit 0).
#  2. For each injected kernel, a build with a slowdown injected into that kernel alone (CMake's
#     ATTNBENCH_INJECT_SLOWDOWN, test builds only; all built first, so that no build disturbs the
#     timings between the phases), nightly.sh from it until it exits 1 (at most 5 runs: a CPU
#     kernel needs its rerun and the next run to confirm, and a busy host's run waits for a later
#     one): the confirmed alerts must name that kernel alone. Every injection starts from the same
#     point: a copy of the database as it was after the unchanged runs.
# Usage: ci/gate-check.sh OUTDIR [--baseline N] [--unchanged N]
#          [--inject KERNEL:PERCENT|random:PERCENT] [--injections N] [--seed N]
# Besides catching or missing, it states what the host lets the gate see: the spread of its run
# levels and each kernel's detectable change (the gate's own statement, issue 41).
#   --baseline N, --unchanged N  nightlies of the unchanged build (defaults 10 and 20)
#   --inject KERNEL:PERCENT      slow that kernel by PERCENT % (default cpu.flash:10)
#   --inject random:PERCENT      slow kernels drawn at random from the build's CPU kernels (those
#                                `attnbench list kernels` names cpu.*; smoke runs them all)
#   --injections N               with random: N distinct kernels, each checked alone (default 1)
#   --seed N                     the draw's seed (default: today's UTC date, YYYYMMDD); the draw is
#                                random.Random(N).sample(sorted CPU kernels, N injections), printed
# Extra nightly.sh environment passes through, e.g. OMP_NUM_THREADS.
# Writes into OUTDIR: gate.sqlite (baseline and unchanged), gate-after-unchanged.sqlite (its copy
# after them), gate-inject-KERNEL.sqlite per injection, nightly-NN.log, build-gate*.log (the
# builds), the reports ci/ + report/ (unchanged build) and ci-inject-KERNEL/ +
# report-inject-KERNEL/, and summary.md.
# Builds build-gate and build-gate-slow-KERNEL in the checkout. Exit 0 when no unchanged nightly
# raised a confirmed alert and every injection was caught naming its kernel alone, 1 when not,
# 2 on a usage or build error.
set -euo pipefail
caller_dir="$PWD"
cd "$(dirname "$0")/.."

usage_line="usage: ci/gate-check.sh OUTDIR [--baseline N] [--unchanged N] [--inject KERNEL:PERCENT|random:PERCENT] [--injections N] [--seed N]"
usage() { echo "$usage_line" >&2; exit 2; }
die() { echo "ci/gate-check.sh: $*" >&2; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in
  -h|--help) echo "$usage_line"; exit 0 ;;
  -*) die "the first argument is OUTDIR, got '$1'; $usage_line" ;;
esac
out="$1"; shift
baseline=10 unchanged=20 inject="cpu.flash:10" injections=1 seed=""
while [ $# -gt 0 ]; do
  case "$1" in
    --baseline|--unchanged|--inject|--injections|--seed)
      if [ $# -lt 2 ]; then
        case "$1" in
          --inject) die "--inject needs a value: KERNEL:PERCENT or random:PERCENT, e.g. cpu.flash:10 or random:10" ;;
          --injections) die "--injections needs a value: a whole number >= 1" ;;
          *) die "$1 needs a value: a whole number" ;;
        esac
      fi
      case "$1" in
        --baseline) baseline="$2" ;;
        --unchanged) unchanged="$2" ;;
        --inject) inject="$2" ;;
        --injections) injections="$2" ;;
        --seed) seed="$2" ;;
      esac
      shift 2 ;;
    *) die "unknown argument '$1'; $usage_line" ;;
  esac
done
[[ "$baseline" =~ ^[0-9]+$ && "$unchanged" =~ ^[0-9]+$ ]] || die "--baseline and --unchanged take whole numbers (got '$baseline', '$unchanged')"
[[ "$inject" =~ ^[A-Za-z0-9_.]+:[0-9]+(\.[0-9]+)?$ ]] || die "--inject '$inject': accepted: KERNEL:PERCENT or random:PERCENT, e.g. cpu.flash:10 or random:10"
[[ "$injections" =~ ^[1-9][0-9]*$ ]] || die "--injections '$injections': accepted: a whole number >= 1"
[ -z "$seed" ] || [[ "$seed" =~ ^[0-9]+$ ]] || die "--seed '$seed': accepted: a whole number, e.g. 20261203"
target="${inject%%:*}" percent="${inject##*:}"
if [ "$target" != random ] && [ "$injections" -ne 1 ]; then
  die "--injections $injections needs --inject random:PERCENT (--inject $inject names one kernel)"
fi
[ -n "$seed" ] || seed=$(date -u +%Y%m%d)

case "$out" in /*) ;; *) out="$caller_dir/$out" ;; esac
mkdir -p "$out"
out="$(cd "$out" && pwd)"
db="$out/gate.sqlite" snapshot="$out/gate-after-unchanged.sqlite"
for f in "$db" "$snapshot" "$out"/gate-inject-*.sqlite; do rm -f "$f" "$f-wal" "$f-shm"; done
rm -f "$out"/nightly-*.log "$out"/build-*.log
rm -rf "$out"/ci-inject-* "$out"/report-inject-*
# CPU-only builds: the gate is proved on the CPU kernels; the CUDA kernels would only add build time.
export ATTNBENCH_CMAKE_ARGS="-DATTNBENCH_CUDA=OFF"
summary="$out/summary.md"
start=$(date +%s)

build() {  # $1 build dir, then extra configure arguments; the output goes to OUTDIR/DIR.log
  local dir="$1" log="$out/$1.log"; shift
  if ! { cmake --preset ci -B "$dir" -DATTNBENCH_CUDA=OFF "$@" &&
         cmake --build "$dir" --parallel "$(nproc --all)" --target attnbench; } > "$log" 2>&1; then
    die "building $dir failed (see $log)"
  fi
}
run_nightly() {  # $1 build dir, $2 log name, $3 database, $4 report suffix; echoes the exit code
  local code=0
  ATTNBENCH_BUILD_DIR="$1" ATTNBENCH_DB="$3" ATTNBENCH_REPORT_DIR="$out/ci$4" \
    ATTNBENCH_HTML_DIR="$out/report$4" ci/nightly.sh > "$out/$2" 2>&1 || code=$?
  echo "$code"
}
# The gating (error) alerts of a nightly log: confirmed performance alerts per shape and per
# kernel, accuracy and status alerts. The final verdict is the rerun's when there was one, else the
# regressions'.
gating_lines() {
  local log="$1"
  if grep -q '^ci/nightly.sh: re-measuring the suspects' "$log"; then
    sed -n '/^ci\/nightly.sh: re-measuring the suspects/,$p' "$log" | awk '$1 == "error"'
  else
    awk '$1 == "error"' "$log"
  fi
}
# The triage prints one line per kernel and device, "<severity> <kernel> on <device>: <what>",
# its shapes indented beneath.
confirmed_kernels() { gating_lines "$1" | awk '{ print $2 }' | sort -u | paste -sd, -; }
# Suspicions the newest nightly left open (warnings: not annotated), from its stored alerts.
suspected_count() {
  python3 -c 'import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print(db.execute("SELECT count(*) FROM alerts WHERE state = ? AND severity = ? AND run_id = "
                 "(SELECT max(id) FROM runs WHERE rerun_of IS NULL)",
                 ("suspected", "warning")).fetchone()[0])' "$1"
}

# What this host does to the gate (issue 41), from a database: the spread of its nightlies' run
# levels (their common speed factor), and what the gate can see of each kernel at the newest
# analysed nightly (its triage's detectable change within 3 nightlies, and the target). With a
# kernel: that kernel's line alone.
host_sight() {
  python3 - "$@" <<'PY'
import json, math, sqlite3, statistics, sys
db = sqlite3.connect(sys.argv[1])
kernel = sys.argv[2] if len(sys.argv) > 2 else ""
row = db.execute("SELECT detectable_json FROM run_triage WHERE run_id = (SELECT max(run_id) "
                 "FROM run_triage)").fetchone()
sight = json.loads(row[0]) if row else {}
kernels = sight.get("kernels", [])
if kernel:
    said = [k for k in kernels if k["kernel"] == kernel]
    print(said[0]["text"] if said else "not judged")
    sys.exit(0)
levels = [math.expm1(level) * 100 for (level,) in db.execute(
    "SELECT level FROM run_levels JOIN runs ON runs.id = run_levels.run_id "
    "WHERE runs.rerun_of IS NULL ORDER BY run_levels.run_id")]
if levels:
    spread = statistics.pstdev(levels) if len(levels) > 1 else 0.0
    print(f"Run levels of {len(levels)} nightlies (the speed factor every series shared): "
          f"{min(levels):+.1f} % to {max(levels):+.1f} %, sd {spread:.1f} %.")
else:
    print("Run levels: none stored (too few series with a history).")
print()
if not kernels:
    print("What the gate can see: not stated (no kernel with a history yet).")
    sys.exit(0)
target = sight.get("target", 0.05) * 100
print(f"What the gate can see of each kernel at the newest nightly (target {target:.1f} % within "
      "3 nightlies):")
print()
print("| kernel | device | can see | meets the target |")
print("|---|---|---|---|")
for k in kernels:
    print(f"| {k['kernel']} | {k['device']} | {k['text']} | {'no' if k['misses_target'] else 'yes'} |")
PY
}

# The unchanged build first: its binary names the CPU kernels to draw from.
build build-gate
mapfile -t cpu_kernels < <(env -u ATTNBENCH_TEST_KERNELS build-gate/bin/attnbench list kernels |
                           awk '$1 ~ /^cpu\./ && $2 == "[cpu]" { print $1 }' | sort)
[ "${#cpu_kernels[@]}" -gt 0 ] || die "build-gate/bin/attnbench list kernels names no cpu.* kernel"
if [ "$target" = random ]; then
  [ "$injections" -le "${#cpu_kernels[@]}" ] ||
    die "--injections $injections: this build has only ${#cpu_kernels[@]} CPU kernels (${cpu_kernels[*]})"
  mapfile -t injected < <(python3 -c '
import random, sys
seed, count, kernels = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
print("\n".join(random.Random(seed).sample(kernels, count)))' "$seed" "$injections" "${cpu_kernels[@]}")
  [ "${#injected[@]}" -eq "$injections" ] || die "drawing $injections of ${cpu_kernels[*]} with seed $seed failed"
  draw="drawn with seed $seed from ${#cpu_kernels[@]} CPU kernels: $(printf '%s\n' "${injected[@]}" | paste -sd, - | sed 's/,/, /g')"
else
  grep -qxF "$target" <<< "$(printf '%s\n' "${cpu_kernels[@]}")" ||
    die "--inject '$inject': '$target' is not a CPU kernel of this build; accepted: random or one of $(printf '%s\n' "${cpu_kernels[@]}" | paste -sd, - | sed 's/,/, /g')"
  injected=("$target")
  draw="$target, named by --inject"
fi
echo "ci/gate-check.sh: injecting +$percent % into the kernels $draw"

{
  echo "# Regression gate on real noise: $(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD)"
  echo
  echo "Host: $(nproc --all) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs);" \
       "OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset}; baseline $baseline runs, then $unchanged unchanged, then" \
       "${#injected[@]} injection(s) of +$percent %, each from the database after the unchanged runs."
  echo
  echo "Injected: $draw."
  echo
  echo "## Baseline and unchanged"
  echo
  echo "Database $(basename "$db"), build build-gate, reports ci/ and report/. An unchanged nightly"
  echo "that exits non-zero counts as one with a confirmed alert."
  echo
  echo "| nightly | build | exit | confirmed alerts | suspected | seconds |"
  echo "|---|---|---|---|---|---|"
} > "$summary"

for kernel in "${injected[@]}"; do
  build "build-gate-slow-$kernel" -DATTNBENCH_INJECT_SLOWDOWN="$kernel:$percent"
done
build_seconds=$(( $(date +%s) - start ))
echo "ci/gate-check.sh: built build-gate and ${#injected[@]} slowed build(s) in $build_seconds s"

n=0 false_alarms=0 nightly_seconds=()
for ((i = 1; i <= baseline + unchanged; i++)); do
  n=$((n + 1))
  log=$(printf 'nightly-%02d.log' "$n")
  t0=$(date +%s)
  code=$(run_nightly build-gate "$log" "$db" "")
  [ "$code" -ne 2 ] || die "nightly $n exited 2 (see $out/$log)"
  if [ "$n" -eq 1 ]; then  # the suite must run every injected kernel, or no injection can be caught
    ran=$(build-gate/bin/attnbench show latest --db "$db" | awk 'table && $1 ~ /^[a-z]+\./ { print $1 } /^-+$/ { table = 1 }' | sort -u) ||
      die "attnbench show latest --db $db failed after nightly 1"
    for kernel in "${injected[@]}"; do
      grep -qxF "$kernel" <<< "$ran" || die "nightly 1's suite did not run $kernel (see $out/$log)"
    done
  fi
  kernels=$(confirmed_kernels "$out/$log")
  suspected=$(suspected_count "$db")
  phase=$([ "$i" -le "$baseline" ] && echo baseline || echo unchanged)
  if [ "$phase" = unchanged ] && { [ "$code" -ne 0 ] || [ -n "$kernels" ]; }; then
    false_alarms=$((false_alarms + 1))
  fi
  seconds=$(( $(date +%s) - t0 )); nightly_seconds+=("$seconds")
  echo "| $n | $phase | $code | ${kernels:-none} | $suspected | $seconds |" >> "$summary"
  echo "ci/gate-check.sh: nightly $n ($phase): exit $code, confirmed: ${kernels:-none}, $seconds s, $(( $(date +%s) - start )) s so far"
done
{
  echo
  echo "## What this host lets the gate see"
  echo
  host_sight "$db"
} >> "$summary"
# Every injection starts from this point. A backup, not a file copy: the store runs in WAL mode.
python3 -c 'import sqlite3, sys
src, dst = sqlite3.connect(sys.argv[1]), sqlite3.connect(sys.argv[2])
src.backup(dst); dst.close(); src.close()' "$db" "$snapshot"

caught_ok=0 index=0
for kernel in "${injected[@]}"; do
  index=$((index + 1))
  kdb="$out/gate-inject-$kernel.sqlite"
  cp "$snapshot" "$kdb"
  {
    echo
    echo "## Injection $index of ${#injected[@]}: $kernel +$percent %"
    echo
    echo "Database $(basename "$kdb") (from $(basename "$snapshot")), build build-gate-slow-$kernel,"
    echo "reports ci-inject-$kernel/ and report-inject-$kernel/."
    echo
    echo "| nightly | slowed | exit | confirmed alerts | suspected | seconds |"
    echo "|---|---|---|---|---|---|"
  } >> "$summary"
  caught=0 named="" caught_log=""
  stated=$(host_sight "$snapshot" "$kernel")
  for ((j = 1; j <= 5; j++)); do
    n=$((n + 1))
    log=$(printf 'nightly-%02d.log' "$n")
    t0=$(date +%s)
    code=$(run_nightly "build-gate-slow-$kernel" "$log" "$kdb" "-inject-$kernel")
    kernels=$(confirmed_kernels "$out/$log")
    suspected=$(suspected_count "$kdb")
    seconds=$(( $(date +%s) - t0 )); nightly_seconds+=("$seconds")
    echo "| $n | $j of 5 | $code | ${kernels:-none} | $suspected | $seconds |" >> "$summary"
    echo "ci/gate-check.sh: nightly $n ($kernel +$percent %, slowed $j): exit $code, confirmed: ${kernels:-none}, $seconds s"
    if [ "$code" -eq 1 ]; then caught=$j named="$kernels" caught_log="$out/$log"; break; fi
  done
  {
    echo
    if [ "$caught" -gt 0 ] && [ "$named" = "$kernel" ]; then
      caught_ok=$((caught_ok + 1))
      echo "- **Caught**: exit 1 at slowed nightly $caught of at most 5, confirmed alerts name **$named** alone (the gate had stated it could see $stated):"
      echo
      echo '```'
      gating_lines "$caught_log" | cut -c1-240
      echo '```'
    elif [ "$caught" -gt 0 ]; then
      echo "- **Not caught as required**: exit 1 at slowed nightly $caught, but the confirmed alerts name '${named:-none}' (the gate had stated it could see $stated of $kernel)."
    else
      echo "- **Not caught**: no exit 1 in 5 slowed nightlies (the gate had stated it could see $stated of $kernel)."
    fi
  } >> "$summary"
done

{
  echo
  echo "## Result"
  echo
  echo "Total $(( $(date +%s) - start )) s, of which the builds $build_seconds s; nightlies took $(printf '%s\n' "${nightly_seconds[@]}" | sort -n | paste -sd' ' - |
        awk '{ s = 0; for (i = 1; i <= NF; i++) s += $i; if (NF) printf "%d-%d s, mean %.0f s", $1, $NF, s / NF; else printf "none" }')."
  echo
  echo "Unchanged nightlies with a confirmed alert: $false_alarms of $unchanged"
  echo
  echo "Injections caught naming the injected kernel alone: $caught_ok of ${#injected[@]}"
} >> "$summary"
cat "$summary"
[ "$false_alarms" -eq 0 ] && [ "$caught_ok" -eq "${#injected[@]}" ] && exit 0 || exit 1
