#!/usr/bin/env bash
# The main job: build Release, calibrate the devices, run the `nightly` suite on the GPUs present
# (the `smoke` suite on the CPU when there is none), store to results/attnbench.sqlite, then the
# regression gate: judge the run against its history (`attnbench regressions`), re-measure the
# suspects at once on the same chip (`attnbench rerun --suspects`), decide, and write the HTML
# report (`python3 -m reports build`).
# Exit code: 0 clean; 1 failures or confirmed regressions; 2 usage/infrastructure error or
# nothing measured.
#   ATTNBENCH_DB=path          database (default results/attnbench.sqlite)
#   ATTNBENCH_SUITE=name       force a suite
#   ATTNBENCH_BUILD_DIR=dir    build folder (default build, with the `ci` preset)
#   ATTNBENCH_CMAKE_ARGS=".."  extra configure arguments (e.g. -DATTNBENCH_CUDA=OFF)
#   ATTNBENCH_REPORT_DIR=dir   JUnit XML and Markdown summaries (default: next to the database)
#   ATTNBENCH_FAIL_ON=suspected  also fail on unconfirmed suspicions (default: confirmed)
#   ATTNBENCH_HTML_DIR=dir     the HTML report (default: report/ next to the database)
#   extra arguments go to `attnbench run` (e.g. --kernels 'cpu.*', --shard 2/4, --require-gpu)
# On a host shared with other jobs, OMP_NUM_THREADS=1 keeps the CPU kernels' timings free of
# OpenMP barrier stalls (a descheduled thread costs a whole scheduler tick).
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir="${ATTNBENCH_BUILD_DIR:-build}"
ci/install-deps.sh
# shellcheck disable=SC2086  # ATTNBENCH_CMAKE_ARGS is a list of arguments
cmake --preset ci -B "$build_dir" ${ATTNBENCH_CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" --parallel "$(nproc)" --target attnbench

attnbench="$build_dir/bin/attnbench"
db="${ATTNBENCH_DB:-results/attnbench.sqlite}"
reports="${ATTNBENCH_REPORT_DIR:-$(dirname "$db")}"
fail_on="${ATTNBENCH_FAIL_ON:-confirmed}"
html="${ATTNBENCH_HTML_DIR:-$(dirname "$db")/report}"
mkdir -p "$reports"
if [ -n "${ATTNBENCH_SUITE:-}" ]; then
  suite="$ATTNBENCH_SUITE"
elif "$attnbench" list devices | grep -q '^cuda:'; then
  suite=nightly
else
  suite=smoke
  echo "ci/nightly.sh: no GPU found; running the smoke suite on the CPU"
fi

"$attnbench" calibrate --db "$db"
set +e
"$attnbench" run --suite "$suite" --db "$db" --junit "$reports/run.junit.xml" \
  --summary-md "$reports/run.md" "$@"
run_code=$?
set -e
echo "ci/nightly.sh: attnbench run exited $run_code (suite $suite, database $db)"
if [ "$run_code" -eq 2 ]; then
  exit 2  # nothing measured, or the run could not start: no verdict to give
fi

# The gate. The run just stored is the newest run that is not a rerun.
gate=(--run latest --db "$db" --fail-on "$fail_on" --junit "$reports/regressions.junit.xml"
      --summary-md "$reports/regressions.md")
verdicts="$reports/regressions.txt"
set +e
"$attnbench" regressions "${gate[@]}" | tee "$verdicts"
gate_code=${PIPESTATUS[0]}
set -e
if [ "$gate_code" -ne 2 ]; then
  # Suspects are re-measured at once, on the same chip: a rerun that trips again (with a
  # Mann-Whitney test against the baseline run's repetitions) confirms; one that does not makes
  # the suspicion an outlier. `rerun --suspects` chooses them itself from the stored alerts (and
  # with none, judges nothing new and prints the same verdict), so no text is parsed here.
  echo "ci/nightly.sh: re-measuring the suspects"
  set +e
  "$attnbench" rerun --suspects "${gate[@]}"
  gate_code=$?
  set -e
fi
echo "ci/nightly.sh: regression gate exited $gate_code"

# The team reads the result as a web page: a static site from the database alone. A report that
# cannot be built is an infrastructure error, but never hides the verdict on the kernels.
report_code=0
python3 -m reports build --db "$db" --out "$html" || report_code=2

if [ "$gate_code" -eq 2 ]; then
  exit 2
elif [ "$run_code" -eq 1 ] || [ "$gate_code" -eq 1 ]; then
  exit 1
fi
exit $report_code
