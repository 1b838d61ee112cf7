#!/usr/bin/env bash
# Installs what attnbench needs to build and test when it is missing: Debian's packages, then
# pinned PyPI wheels. A fresh machine of the project's kind has g++, CMake, CUDA and python3; the
# rest comes from here. Quiet and quick (no network) when everything is present.
set -euo pipefail

packages=(
  cmake g++ ninja-build pkg-config git
  libopenblas-openmp-dev   # BLAS for the CPU kernels; the OpenMP build nests inside our threads
  libsqlite3-dev           # the results store
  libtomlplusplus-dev      # suite files
  libcli11-dev             # the command line
  libbenchmark-dev         # Google Benchmark drives the timing
  libgtest-dev             # the tests
  nlohmann-json3-dev       # the parent <-> worker protocol
  libboost-context-dev     # the emulated device's fibers (kernels/emu/)
  chromium                 # headless, for the report's browser test (reports/tests/test_browser.py)
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "ci/install-deps.sh: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    sudo=sudo
    command -v sudo >/dev/null || { echo "error: need root (or sudo) to install: ${missing[*]}" >&2; exit 2; }
  else
    sudo=
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Optional: ccache lets ci/test.sh's bounds build reuse the race build's uninstrumented objects
# (about 45 s on 2 cores). Without it (no package source, no root) everything still builds.
if ! command -v ccache >/dev/null; then
  if [ "$(id -u)" -eq 0 ] || command -v sudo >/dev/null; then
    sudo_optional=$([ "$(id -u)" -eq 0 ] || echo sudo)
    { $sudo_optional apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive $sudo_optional apt-get install -y -qq \
        --no-install-recommends ccache; } >/dev/null 2>&1 ||
      echo "ci/install-deps.sh: ccache not installed (optional)"
  fi
fi

# PyPI wheels, pinned, into the python3 on PATH (kernels/CMakeLists.txt and tests/CMakeLists.txt
# look there):
#   nvidia-cudnn-frontend  cudnn-frontend's C++ headers for cudnn.sdpa. 1.32.0 compiles against
#                          cuDNN 9.19 and gates each feature on the cuDNN it loads at run time
#                          (cudnnGetVersion), so it also drives the newer cuDNN of a GPU host.
#   nvidia-cuda-cuobjdump  cuobjdump for the static checks of the CUDA kernels (`ctest -L static`);
#                          13.4 reads the sm_80/sm_90a cubins CUDA 13.0 writes.
#   nvidia-cuda-nvdisasm   nvdisasm, which `cuobjdump --dump-sass` runs: the SASS checks (HMMA and
#                          LDSM in cuda.flash2's kernels); the same release as cuobjdump.
wheels=(
  nvidia-cudnn-frontend==1.32.0
  nvidia-cuda-cuobjdump==13.4.92
  nvidia-cuda-nvdisasm==13.4.92
)
#   numpy                  the example Python kernel (examples/python/numpy_attention.py) that
#                          tests the Python-kernel mechanism in CI.
#   torch                  only with ATTNBENCH_WITH_TORCH=1 (CI sets it): the PyTorch peers
#                          (torch.*). PyPI's build is the CUDA one: 5.2 GB, 94 s to install here.
wheels+=(numpy==2.4.6)
if [ "${ATTNBENCH_WITH_TORCH:-0}" = 1 ]; then
  wheels+=(torch==2.15.0)
fi
# The HTML report's pins (matplotlib, jinja2, pytest for its tests): reports/requirements.txt.
while read -r pin; do
  wheels+=("$pin")
done < <(grep -E '^[A-Za-z0-9_.-]+==' "$(dirname "$0")/../reports/requirements.txt")
if ! command -v python3 >/dev/null; then
  echo "error: python3 is needed to install ${wheels[*]}" >&2
  exit 2
fi
missing_wheels=$(python3 - "${wheels[@]}" <<'PYTHON'
import importlib.metadata
import sys

for pin in sys.argv[1:]:
    name, version = pin.split("==")
    try:
        if importlib.metadata.version(name) == version:
            continue
    except importlib.metadata.PackageNotFoundError:
        pass
    print(pin)
PYTHON
)
if [ -n "$missing_wheels" ]; then
  echo "ci/install-deps.sh: installing ${missing_wheels//$'\n'/ }"
  # shellcheck disable=SC2086  # one argument per pin
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
    $missing_wheels
fi
