#!/usr/bin/env bash
# Finds the commit that made one kernel slower on one shape: `git bisect run` driven by
# attnbench.
#   ci/bisect.sh GOOD BAD --kernel K --shape S [--repetitions N] [--max-case-seconds S]
# GOOD and BAD are commits (GOOD fast, BAD slow). Each commit is checked out in a scratch
# worktree, built there (Release, its own build folder) and measured with
#   attnbench run --shape S --kernels K --repetitions N
# GOOD and BAD are measured first; a commit is good when its median is nearer GOOD's than BAD's
# (geometric midpoint). A commit that does not build, or fails the case, is skipped (exit 125).
# Results go to one database in the scratch folder and are read back with this checkout's
# attnbench, which reads every older schema.
#   ATTNBENCH_CMAKE_ARGS=".."  extra configure arguments (e.g. -DATTNBENCH_CUDA=OFF)
#   ATTNBENCH_BISECT_DIR=dir   scratch folder (default: a new temporary folder)
# Exit: 0 with the first slow commit printed; 2 on usage, when GOOD or BAD cannot be measured, when
# GOOD is not faster than BAD, or when git bisect names no commit.
set -euo pipefail

usage() {
  echo "usage: ci/bisect.sh GOOD BAD --kernel K --shape S [--repetitions N] [--max-case-seconds S]" >&2
  exit 2
}

# The median (s) of the newest result in a database; the CSV quotes shapes, which hold commas.
latest_median() {
  "$reader" export --run latest --format csv --db "$1" 2>/dev/null |
    python3 -c 'import csv, sys; rows = list(csv.DictReader(sys.stdin)); print(rows[0]["median_s"] if rows else "")'
}

# ---- one commit (called by git bisect run, inside the worktree) --------------------------------
if [ "${1:-}" = "--step" ]; then
  shift
  state="$1"  # the scratch folder
  # shellcheck source=/dev/null
  source "$state/settings"
  commit=$(git rev-parse --short HEAD)
  # shellcheck disable=SC2086
  if ! cmake -S . -B "$state/build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${ATTNBENCH_CMAKE_ARGS:-} \
         >"$state/build-$commit.log" 2>&1 ||
     ! cmake --build "$state/build" --target attnbench >>"$state/build-$commit.log" 2>&1; then
    echo "bisect: $commit does not build: skipped (see $state/build-$commit.log)"
    exit 125
  fi
  if ! "$state/build/bin/attnbench" run --shape "$shape" --kernels "$kernel" \
         --repetitions "$repetitions" --max-case-seconds "$max_case_seconds" --db "$state/bisect.sqlite" \
         >"$state/run-$commit.log" 2>&1; then
    echo "bisect: $commit: the case did not pass: skipped (see $state/run-$commit.log)"
    exit 125
  fi
  median=$(latest_median "$state/bisect.sqlite")
  # shellcheck disable=SC2154 # line comes from $state/settings
  verdict=$(awk -v m="$median" -v line="$line" 'BEGIN { print (m <= line) ? "good" : "bad" }')
  echo "bisect: $commit: median $median s: $verdict"
  [ "$verdict" = good ]
  exit $?
fi

# ---- the driver ---------------------------------------------------------------------------------
[ $# -ge 2 ] || usage
good="$1"
bad="$2"
shift 2
kernel=""
shape=""
repetitions=10
max_case_seconds=2
while [ $# -gt 0 ]; do
  case "$1" in
    --kernel) kernel="$2"; shift 2 ;;
    --shape) shape="$2"; shift 2 ;;
    --repetitions) repetitions="$2"; shift 2 ;;
    --max-case-seconds) max_case_seconds="$2"; shift 2 ;;
    *) echo "error: ci/bisect.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
if [ -z "$kernel" ] || [ -z "$shape" ]; then usage; fi
cd "$(dirname "$0")/.."
git rev-parse --verify -q "$good^{commit}" >/dev/null || { echo "error: GOOD '$good' is not a commit" >&2; exit 2; }
git rev-parse --verify -q "$bad^{commit}" >/dev/null || { echo "error: BAD '$bad' is not a commit" >&2; exit 2; }

state="${ATTNBENCH_BISECT_DIR:-$(mktemp -d /tmp/attnbench-bisect.XXXXXX)}"
mkdir -p "$state"
# This checkout's attnbench reads the results of every commit's (older schemas migrate).
# shellcheck disable=SC2086
cmake -S . -B "$state/reader" -G Ninja -DCMAKE_BUILD_TYPE=Release ${ATTNBENCH_CMAKE_ARGS:-} >/dev/null
cmake --build "$state/reader" --target attnbench >/dev/null
reader="$state/reader/bin/attnbench"
cp "$0" "$state/step.sh"  # the worktree changes under git bisect; this copy does not

worktree="$state/worktree"
git worktree add --detach "$worktree" "$bad" >/dev/null
trap 'git worktree remove --force "$worktree" >/dev/null 2>&1 || true' EXIT

{
  echo "kernel=$(printf '%q' "$kernel")"
  echo "shape=$(printf '%q' "$shape")"
  echo "repetitions=$repetitions"
  echo "max_case_seconds=$max_case_seconds"
  echo "reader=$(printf '%q' "$reader")"
  echo "line=0"
  echo "ATTNBENCH_CMAKE_ARGS=$(printf '%q' "${ATTNBENCH_CMAKE_ARGS:-}")"
} >"$state/settings"

# The two ends, measured the same way; the line between good and bad is their geometric mean.
measure() {  # echoes the median, or nothing when the commit did not build or pass (step exit 125)
  local code=0
  (cd "$worktree" && git checkout -q "$1" && bash "$state/step.sh" --step "$state" >/dev/null) || code=$?
  [ "$code" = 125 ] || latest_median "$state/bisect.sqlite"
}
good_median=$(measure "$good")
bad_median=$(measure "$bad")
if [ -z "$good_median" ] || [ -z "$bad_median" ]; then
  echo "error: could not measure $kernel on $shape at GOOD and BAD (GOOD: '$good_median' s, BAD: '$bad_median' s; logs: $state/build-*.log, $state/run-*.log)" >&2
  exit 2
fi
echo "bisect: GOOD $good: $good_median s, BAD $bad: $bad_median s"
if ! awk -v g="$good_median" -v b="$bad_median" 'BEGIN { exit !(g > 0 && b > g) }'; then
  echo "error: GOOD is not faster than BAD for $kernel on $shape: nothing to bisect" >&2
  exit 2
fi
sed -i "s/^line=.*/line=$(awk -v g="$good_median" -v b="$bad_median" 'BEGIN { print sqrt(g * b) }')/" "$state/settings"

cd "$worktree"
git bisect start "$bad" "$good" >/dev/null
git bisect run bash "$state/step.sh" --step "$state" | tee "$state/bisect.log"
first_bad=$(grep -m1 'is the first bad commit' "$state/bisect.log" | cut -d' ' -f1 || true)
git bisect reset >/dev/null 2>&1 || true
echo  # git's last line ("bisect found first bad commit") ends without a newline
if [ -z "$first_bad" ]; then
  echo "error: git bisect found no first slow commit for $kernel on $shape: see $state/bisect.log" >&2
  exit 2
fi
echo "bisect: first slow commit for $kernel on $shape: $(git log -1 --format='%H (%s)' "$first_bad")"
