#!/usr/bin/env bash
# The whole test suite built with clang (Debian `clang`) in Release, in build-clang/: checks
# that the code compiles cleanly with a second compiler and that the golden values
# (tests/test_golden.cpp) hold there too. Installs clang if it is missing.
# Usage: scripts/test_clang.sh [-DVAR=VALUE]...   (extra cmake args; BUILD_DIR=build-clang by default)
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: scripts/test_clang.sh [-DVAR=VALUE]...   (extra cmake args; BUILD_DIR=build-clang by default)"; }
for arg in "$@"; do
  case $arg in
    -h|--help) usage; exit 0 ;;
    -D?*) ;;
    *) usage >&2; echo "test_clang.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
if ! command -v clang++ >/dev/null 2>&1; then
  echo "[test_clang] installing: clang"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends clang >/dev/null
fi
# setup.sh installs the other packages, configures and builds (Release unless BUILD_TYPE is set).
BUILD_DIR=${BUILD_DIR:-build-clang} scripts/setup.sh -DCMAKE_CXX_COMPILER=clang++ "$@"
(cd "${BUILD_DIR:-build-clang}" && ctest --output-on-failure -j "$(nproc)")
