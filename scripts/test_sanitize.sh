#!/usr/bin/env bash
# The whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer, in build-asan/
# (RelWithDebInfo; setup.sh installs what is missing). `FAVOR_SANITIZE=1 scripts/test.sh` runs
# scripts/test.sh and then this; CI calls the two one after the other.
# Usage: scripts/test_sanitize.sh   (no arguments)
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: scripts/test_sanitize.sh   (no arguments; the suite under ASan + UBSan in build-asan/)"; }
case $# in
  0) ;;
  *) if [ "$1" = -h ] || [ "$1" = --help ]; then usage; exit 0; fi
     usage >&2; echo "test_sanitize.sh: takes no arguments, got '$1'" >&2; exit 2 ;;
esac
BUILD_DIR=build-asan BUILD_TYPE=RelWithDebInfo scripts/setup.sh -DFAVOR_SANITIZE=ON
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
   ctest --output-on-failure -j "$(nproc)")
