#!/usr/bin/env bash
# The whole test suite built with -DFAVOR_BLAS=blis (favor's products on Debian's BLIS,
# LAPACK still OpenBLAS's) in build-blis/: keeps the BLAS option of docs/speed.md building
# and its numbers within the tests' tolerances. Installs libblis-dev if it is missing.
# Usage: scripts/test_blis.sh [-DVAR=VALUE]...   (extra cmake args; BUILD_DIR=build-blis by default)
case ${1:-} in
  -h|--help) echo "usage: scripts/test_blis.sh [-DVAR=VALUE]...   (extra cmake args; BUILD_DIR=build-blis by default)"; exit 0 ;;
esac
VARIANT_SCRIPT=scripts/test_blis.sh exec "$(dirname "$0")/test_variant.sh" blis "$@"
