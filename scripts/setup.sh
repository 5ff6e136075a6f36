#!/usr/bin/env bash
# Installs the Debian packages favor needs (only the missing ones) and builds it in Release.
# Usage: scripts/setup.sh [extra cmake args...]   (BUILD_DIR=build by default)
set -euo pipefail
cd "$(dirname "$0")/.."
PACKAGES=(build-essential cmake pkg-config git libopenblas-dev liblapack-dev libxtensor-dev
          libxtensor-blas-dev libxsimd-dev libcli11-dev nlohmann-json3-dev catch2
          python3 python3-numpy python3-matplotlib python3-pandas python3-torch python3-pytest
          parallel)
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
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
