#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/<name>_fuzz.cpp) with clang, ASan and UBSan, then runs each
# one for a fixed time.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      SECONDS per target (default 300); TARGETs like
#                                              npy_fuzz (default: every fuzz/*_fuzz.cpp)
# Environment:
#   BUILD_DIR   build directory (default <repo>/build-fuzz)
#   CXX         compiler (default clang++; must be clang with libFuzzer, e.g. libclang-rt-14-dev)
#   FUZZ_ARGS   extra libFuzzer flags, appended last so they override the defaults below
#
# Corpora: <name>_fuzz is seeded (read-only) from fuzz/corpus/<name>/, tests/data/<name>/ and
# tests/data/<name>_*/ (for npy_fuzz: tests/data/npy_bad, npy_good, npy_nan);
# new interesting inputs go to $BUILD_DIR/corpus/<target>/ (kept between runs), crashes to
# $BUILD_DIR/artifacts/<target>/. Rerun one crash with: $BUILD_DIR/<target> <artifact file>.
# Exit status: 0 if no target found a crash, leak, timeout or oversized allocation.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage() { echo "usage: scripts/fuzz.sh [SECONDS (default 300)] [TARGET...]   (targets: fuzz/*_fuzz.cpp, e.g. npy_fuzz)"; }
bad() { usage >&2; echo "fuzz.sh: $1" >&2; exit 2; }
case ${1:-} in -h|--help) usage; exit 0 ;; esac
SECONDS_PER_TARGET=${1:-300}
[[ $SECONDS_PER_TARGET =~ ^[1-9][0-9]*$ ]] || bad "SECONDS must be a positive integer, got '$SECONDS_PER_TARGET'"
shift || true
BUILD_DIR=${BUILD_DIR:-$ROOT/build-fuzz}
CXX=${CXX:-clang++}

if [[ $# -gt 0 ]]; then
  TARGETS=("$@")
  for target in "${TARGETS[@]}"; do
    [[ -f $ROOT/fuzz/$target.cpp && $target == *_fuzz ]] || bad "no fuzz target '$target' (fuzz/$target.cpp)"
  done
else
  TARGETS=()
  for src in "$ROOT"/fuzz/*_fuzz.cpp; do TARGETS+=("$(basename "$src" .cpp)"); done
fi
[[ ${#TARGETS[@]} -gt 0 ]] || { echo "fuzz.sh: no fuzz/*_fuzz.cpp targets" >&2; exit 2; }

cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DFAVOR_FUZZ=ON -DFAVOR_TESTS=OFF >/dev/null
cmake --build "$BUILD_DIR" --target "${TARGETS[@]}" -j "$(nproc)"

# Per-target -max_len (libFuzzer's default grows from 4 KB): the parsers whose bugs need long
# inputs (JSON nested deeper than kMaxJsonDepth: a crash needed > 100 KB of brackets).
max_len_of() {
  case $1 in
    journal_fuzz|set_fuzz|compare_fuzz) echo 262144 ;;
    *) echo "" ;;
  esac
}

status=0
for target in "${TARGETS[@]}"; do
  prefix=${target%_fuzz}
  corpus=$BUILD_DIR/corpus/$target
  artifacts=$BUILD_DIR/artifacts/$target
  mkdir -p "$corpus" "$artifacts"
  seeds=()
  for dir in "$ROOT"/fuzz/corpus/"$prefix" "$ROOT"/tests/data/"$prefix" "$ROOT"/tests/data/"$prefix"_*/; do
    [[ -d $dir ]] && seeds+=("${dir%/}")
  done
  max_len=$(max_len_of "$target")
  echo "== $target: ${SECONDS_PER_TARGET}s, corpus $corpus, seeds: ${seeds[*]:-none}${max_len:+, max_len $max_len}"
  # Defaults: 10 s per input is a hang; one allocation over 512 MB is a bug for a parser of
  # inputs this small; the final stats give the number of executions.
  # shellcheck disable=SC2086
  if ! "$BUILD_DIR/$target" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -malloc_limit_mb=512 \
       -print_final_stats=1 -artifact_prefix="$artifacts/" ${max_len:+-max_len=$max_len} ${FUZZ_ARGS:-} \
       "$corpus" "${seeds[@]}"; then
    echo "== $target: FAILED (see $artifacts)" >&2
    status=1
  else
    echo "== $target: no crash in ${SECONDS_PER_TARGET}s"
  fi
done
exit $status
