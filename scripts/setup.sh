#!/usr/bin/env bash
# Installs the Debian packages favor, its tests and its scripts need (only the missing ones)
# and builds it in Release (BUILD_DIR=build, BUILD_TYPE=Release by default).
# Usage: scripts/setup.sh [--target T]... [-DVAR=VALUE]...
#   --target T   build only target T (e.g. favor: what scripts/run.sh needs); default: all
#   -DVAR=VALUE  passed to cmake (e.g. -DFAVOR_MARCH=x86-64-v3, -DFAVOR_SANITIZE=ON)
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: scripts/setup.sh [--target T]... [-DVAR=VALUE]..."; }
bad() { usage >&2; echo "setup.sh: $1" >&2; exit 2; }
targets=() cmake_args=()
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --target) [ $# -ge 2 ] || bad "--target needs a value"; targets+=(--target "$2"); shift 2 ;;
    --target=*) targets+=(--target "${1#--target=}"); shift ;;
    -D?*) cmake_args+=("$1"); shift ;;
    *) bad "unknown argument '$1'" ;;
  esac
done
PACKAGES=(build-essential cmake pkg-config git libopenblas-dev liblapack-dev libxtensor-dev
          libxtensor-blas-dev libxsimd-dev libcli11-dev nlohmann-json3-dev catch2 zlib1g-dev
          python3 python3-numpy python3-matplotlib python3-pandas python3-torch python3-pytest
          parallel python3-dev pybind11-dev python3-pybind11)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[setup] installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} "${cmake_args[@]}" >/dev/null
cmake --build "$BUILD_DIR" "${targets[@]}" -j "$(nproc)"
