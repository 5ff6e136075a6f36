#!/usr/bin/env bash
# The whole test suite built with -DFAVOR_BLAS=blis (favor's products on Debian's BLIS,
# LAPACK still OpenBLAS's) in build-blis/: keeps the BLAS option of docs/speed.md building
# and its numbers within the tests' tolerances. Installs libblis-dev if it is missing.
# Usage: scripts/test_blis.sh [-DVAR=VALUE]...   (extra cmake args; BUILD_DIR=build-blis by default)
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: scripts/test_blis.sh [-DVAR=VALUE]...   (extra cmake args; BUILD_DIR=build-blis by default)"; }
for arg in "$@"; do
  case $arg in
    -h|--help) usage; exit 0 ;;
    -D?*) ;;
    *) usage >&2; echo "test_blis.sh: unknown argument '$arg'" >&2; exit 2 ;;
  esac
done
if ! dpkg-query -W -f='${Status}' libblis-dev 2>/dev/null | grep -q "install ok installed"; then
  echo "[test_blis] installing: libblis-dev"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends libblis-dev >/dev/null
fi
BUILD_DIR=${BUILD_DIR:-build-blis} scripts/setup.sh -DFAVOR_BLAS=blis "$@"
"${BUILD_DIR:-build-blis}/favor" --version
(cd "${BUILD_DIR:-build-blis}" && ctest --output-on-failure -j "$(nproc)")
