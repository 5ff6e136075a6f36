#!/usr/bin/env bash
# The whole test suite built with clang (Debian `clang`) in Release, in build-clang/: checks
# that the code compiles cleanly with a second compiler and that the golden values
# (tests/experiments/test_golden.cpp) hold there too. Installs clang if it is missing.
# Usage: scripts/test_clang.sh [-DVAR=VALUE]...   (extra cmake args; BUILD_DIR=build-clang by default)
case ${1:-} in
  -h|--help) echo "usage: scripts/test_clang.sh [-DVAR=VALUE]...   (extra cmake args; BUILD_DIR=build-clang by default)"; exit 0 ;;
esac
VARIANT_SCRIPT=scripts/test_clang.sh exec "$(dirname "$0")/test_variant.sh" clang "$@"
