#!/usr/bin/env bash
# The whole test suite in a build variant of its own, installing the Debian package it needs
# if missing; scripts/test_clang.sh and scripts/test_blis.sh are its two forms (CI runs both).
#   clang  built with clang in Release, in build-clang/ (package clang): the code compiles
#          cleanly with a second compiler and the golden values (tests/test_golden.cpp) hold
#   blis   built with -DFAVOR_BLAS=blis, in build-blis/ (package libblis-dev): favor's products
#          on BLIS, LAPACK still OpenBLAS's; keeps the BLAS option of docs/speed.md building
#          and its numbers within the tests' tolerances
# Usage: scripts/test_variant.sh clang|blis [-DVAR=VALUE]...   (extra cmake args; BUILD_DIR
# overrides the build directory; setup.sh installs the other packages, Release unless
# BUILD_TYPE is set)
set -euo pipefail
cd "$(dirname "$0")/.."
# Called as test_clang.sh or test_blis.sh, the usage names that script (VARIANT_SCRIPT).
usage() {
  if [ -n "${VARIANT_SCRIPT:-}" ]; then echo "usage: $VARIANT_SCRIPT [-DVAR=VALUE]...   (extra cmake args)"
  else echo "usage: scripts/test_variant.sh clang|blis [-DVAR=VALUE]...   (extra cmake args)"; fi
}
bad() { usage >&2; echo "$(basename "${VARIANT_SCRIPT:-test_variant.sh}"): $1" >&2; exit 2; }
case ${1:-} in
  -h|--help) usage; exit 0 ;;
  clang) package=clang flag=-DCMAKE_CXX_COMPILER=clang++ ;;
  blis) package=libblis-dev flag=-DFAVOR_BLAS=blis ;;
  *) bad "the first argument is clang or blis, got '${1:-}'" ;;
esac
variant=$1; shift
for arg in "$@"; do [[ $arg == -D?* ]] || bad "unknown argument '$arg' (extra cmake args are -DVAR=VALUE)"; done
unset VARIANT_SCRIPT   # the usage's name only: the suite's own script tests must not inherit it
if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
  echo "[test_$variant] installing: $package"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$package" >/dev/null
fi
build=${BUILD_DIR:-build-$variant}
BUILD_DIR=$build scripts/setup.sh "$flag" "$@"
"$build/favor" --version
(cd "$build" && ctest --output-on-failure -j "$(nproc)")
