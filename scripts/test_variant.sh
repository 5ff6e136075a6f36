#!/usr/bin/env bash
# The whole test suite in a build variant of its own, installing the Debian packages it needs
# if missing; scripts/test_clang.sh and scripts/test_blis.sh are its two single forms. Several
# variants combine in one build (CI: `clang blis`, one build instead of two):
#   clang  built with clang in Release (package clang): the code compiles cleanly with a second
#          compiler and the golden values (tests/experiments/test_golden.cpp) hold
#   blis   built with -DFAVOR_BLAS=blis (package libblis-dev): favor's products on BLIS, LAPACK
#          still OpenBLAS's; keeps the BLAS option of docs/speed.md building and its numbers
#          within the tests' tolerances
# The build directory is build-<variant>[-<variant>] (BUILD_DIR overrides it).
# Usage: scripts/test_variant.sh clang|blis [clang|blis] [-DVAR=VALUE]...   (extra cmake args;
# setup.sh installs the other packages, Release unless BUILD_TYPE is set)
set -euo pipefail
cd "$(dirname "$0")/.."
# Called as test_clang.sh or test_blis.sh, the usage names that script (VARIANT_SCRIPT).
usage() {
  if [ -n "${VARIANT_SCRIPT:-}" ]; then echo "usage: $VARIANT_SCRIPT [-DVAR=VALUE]...   (extra cmake args)"
  else echo "usage: scripts/test_variant.sh clang|blis [clang|blis] [-DVAR=VALUE]...   (extra cmake args)"; fi
}
bad() { usage >&2; echo "$(basename "${VARIANT_SCRIPT:-test_variant.sh}"): $1" >&2; exit 2; }
case ${1:-} in
  -h|--help) usage; exit 0 ;;
esac
variants=() packages=() flags=()
while [ $# -gt 0 ]; do
  case $1 in
    clang) packages+=(clang) flags+=(-DCMAKE_CXX_COMPILER=clang++) ;;
    blis) packages+=(libblis-dev) flags+=(-DFAVOR_BLAS=blis) ;;
    *) break ;;
  esac
  [[ " ${variants[*]} " != *" $1 "* ]] || bad "variant '$1' given twice"
  variants+=("$1"); shift
done
[ ${#variants[@]} -gt 0 ] || bad "the first argument is clang or blis, got '${1:-}'"
for arg in "$@"; do [[ $arg == -D?* ]] || bad "unknown argument '$arg' (extra cmake args are -DVAR=VALUE)"; done
unset VARIANT_SCRIPT   # the usage's name only: the suite's own script tests must not inherit it
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
name=$(IFS=-; echo "${variants[*]}")
if [ ${#missing[@]} -gt 0 ]; then
  echo "[test_$name] installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
build=${BUILD_DIR:-build-$name}
BUILD_DIR=$build scripts/setup.sh "${flags[@]}" "$@"
"$build/favor" --version
(cd "$build" && ctest --output-on-failure -j "$(nproc)")
