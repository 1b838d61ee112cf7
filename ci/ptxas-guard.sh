#!/usr/bin/env bash
# The compiler launcher of the Hopper kernels (kernels/CMakeLists.txt): runs the nvcc command it
# is given and fails it when ptxas serialized wgmma. ptxas says so only as an "info" line
# ("Potential Performance Loss: wgmma.mma_async instructions are serialized ...", or a
# warpgroup.arrive / warpgroup.wait it injected), which no -Werror turns into an error, and a
# serialized pipeline is a kernel that waits for each wgmma: a correctness-neutral, several-fold
# slowdown that only the build can see. tests/gpu/static/wgmma_serialized_control.cu is the
# negative control (ctest -R PtxasGuard).
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" >"$log" 2>&1
status=$?
cat "$log" >&2
if grep -qE "wgmma\.mma_async instructions are serialized|warpgroup\.(arrive|wait) is injected" "$log"; then
  echo "ptxas-guard: ptxas serialized wgmma (above); treated as an error" >&2
  exit 1
fi
exit "$status"
