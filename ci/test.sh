#!/usr/bin/env bash
# Set up, build, test: the command CI runs (.ci/run) and a new user runs first.
# Installs what is missing, configures build/ (Release, warnings are errors), builds, runs ctest
# without the `slow` label. GPU tests skip with their reason on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

ci/install-deps.sh
cmake --preset ci
cmake --build build --parallel "$(nproc)"
ctest --test-dir build --label-exclude slow --output-on-failure --parallel "$(nproc)" --timeout 900

echo "ci/test.sh: passed in $(( $(date +%s) - start )) s"
