#!/usr/bin/env bash
# The README's test command: set up (install + build, tests included), then run ctest.
# FAVOR_SANITIZE=1 also builds and runs the whole suite under ASan + UBSan (build-asan/:
# scripts/test_sanitize.sh).
# Usage: scripts/test.sh   (no arguments; CI runs exactly this)
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: scripts/test.sh   (no arguments; FAVOR_SANITIZE=1 adds the ASan + UBSan pass)"; }
case $# in
  0) ;;
  *) if [ "$1" = -h ] || [ "$1" = --help ]; then usage; exit 0; fi
     usage >&2; echo "test.sh: takes no arguments, got '$1'" >&2; exit 2 ;;
esac
scripts/setup.sh
(cd build && ctest --output-on-failure -j "$(nproc)")
if [ "${FAVOR_SANITIZE:-0}" = "1" ]; then scripts/test_sanitize.sh; fi
