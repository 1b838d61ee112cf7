#!/usr/bin/env bash
# The main job: build Release, calibrate the devices, run the `nightly` suite on the GPUs present
# (the `smoke` suite on the CPU when there is none), store to results/attnbench.sqlite and print
# the summary. The exit code is attnbench's: 0 clean, 1 failures, 2 usage/infrastructure error or
# nothing measured.
#   ATTNBENCH_DB=path     database (default results/attnbench.sqlite)
#   ATTNBENCH_SUITE=name  force a suite
#   extra arguments go to `attnbench run` (e.g. --kernels 'cpu.*')
set -euo pipefail
cd "$(dirname "$0")/.."

ci/install-deps.sh
cmake --preset ci >/dev/null
cmake --build build --parallel "$(nproc)"

attnbench=build/bin/attnbench
db="${ATTNBENCH_DB:-results/attnbench.sqlite}"
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
"$attnbench" run --suite "$suite" --db "$db" "$@"
code=$?
set -e
echo "ci/nightly.sh: attnbench exited $code (suite $suite, database $db)"
exit $code
