#!/usr/bin/env bash
# Set up, build, test: the command CI runs (.ci/run) and a new user runs first.
# Installs what is missing, configures build/ (Release, warnings are errors), builds, runs ctest
# without the `slow` label (PyTorch's tests skip with their reason unless `pip install torch` was
# done), then the emulated device's race and bounds builds and their tests, then builds the
# example plugin outside the tree and checks it. GPU tests skip with their
# reason on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

ci/install-deps.sh
cmake --preset ci
cmake --build build --parallel "$(nproc)"
ctest --test-dir build --label-exclude slow --output-on-failure --parallel "$(nproc)" --timeout 900

# The emulated device's race and bounds builds (ThreadSanitizer, AddressSanitizer; README "The
# race and bounds builds"): the in-house kernels over a representative subset, the planted races
# and the planted store past the end of out.
for build in race bounds; do
  cmake --preset "emu-$build" >/dev/null
  cmake --build "build-emu-$build" --parallel "$(nproc)" --target attnbench test_emu_sanitized
  ctest --test-dir "build-emu-$build" -L "emu-$build" --output-on-failure --timeout 900
done

# A user's plugin, built outside the tree as README's "Benchmark your own kernel" says, checked
# over the ctest suite beside a built-in kernel.
plugin_build=build/example-cpu-plugin
cmake -S examples/cpu_plugin -B "$plugin_build" -DATTNBENCH_DIR="$PWD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$plugin_build" >/dev/null
rm -f "$plugin_build/check.sqlite"
build/bin/attnbench check --suite ctest --devices cpu --plugin "$plugin_build/libexample_cpu_plugin.so" \
  --kernels 'example.*,cpu.naive' --db "$plugin_build/check.sqlite"

echo "ci/test.sh: passed in $(( $(date +%s) - start )) s"
