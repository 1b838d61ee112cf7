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
# Exit: 0 with the first bad commit printed, 2 on usage or when GOOD is not faster than BAD.
set -euo pipefail

usage() {
  echo "usage: ci/bisect.sh GOOD BAD --kernel K --shape S [--repetitions N] [--max-case-seconds S]" >&2
  exit 2
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
  median=$("$reader" export --run latest --format csv --db "$state/bisect.sqlite" | awk -F, 'NR == 2 { print $8 }')
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
[ -n "$kernel" ] && [ -n "$shape" ] || usage
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
measure() {
  (cd "$worktree" && git checkout -q "$1" && bash "$state/step.sh" --step "$state" >/dev/null) || true
  "$reader" export --run latest --format csv --db "$state/bisect.sqlite" | awk -F, 'NR == 2 { print $8 }'
}
good_median=$(measure "$good")
bad_median=$(measure "$bad")
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
echo "bisect: first slow commit for $kernel on $shape: ${first_bad:-see $state/bisect.log}"
