#!/usr/bin/env bash
# Installs what attnbench needs to build and test, from Debian's packages, when it is missing.
# A fresh machine of the project's kind has g++, CMake and CUDA; the rest comes from here.
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
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
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
