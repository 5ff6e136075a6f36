#!/usr/bin/env bash
# Sweeps one grid value from the shell: one `favor run` per value, then one `favor merge`.
# Each run is independent (inputs and W depend only on their own seeds and sizes), so the
# loop body can go to any machine; the merge equals a single run over the list.
# The runs go to OUT_DIR.parts/<m|L><value>/ (beside OUT_DIR: favor replaces OUT_DIR whole
# and will not write into a directory that holds other directories).
# Usage: scripts/sweep.sh --m|--L CONFIG.json OUT_DIR "v1 v2 ..." [extra favor run flags]
# Paths are relative to the current directory. (scripts/sweep_m.sh and scripts/sweep_L.sh
# are the two forms.)
set -euo pipefail
# Called as sweep_m.sh or sweep_L.sh (SWEEP_SCRIPT set, the flag given by it), the usage and
# the errors name that script.
usage() {
  if [ -n "${SWEEP_SCRIPT:-}" ]; then echo "usage: $SWEEP_SCRIPT CONFIG.json OUT_DIR \"v1 v2 ...\" [favor run flags...]"
  else echo "usage: scripts/sweep.sh --m|--L CONFIG.json OUT_DIR \"v1 v2 ...\" [favor run flags...]"; fi
}
bad() { usage >&2; echo "$(basename "${SWEEP_SCRIPT:-sweep.sh}"): $1" >&2; exit 2; }
added=0 after=" after --m or --L"   # the wrapper added its --m or --L
[ -z "${SWEEP_SCRIPT:-}" ] || { added=1 after=""; }
case ${1:-} in -h|--help) usage; exit 0 ;; esac
[ "$added" = 0 ] || case ${2:-} in -h|--help) usage; exit 0 ;; esac
[ $# -ge 4 ] || bad "expected CONFIG.json OUT_DIR VALUES$after, got $(( $# - added )) argument(s)"
flag=$1 config=$2 out=$3 values=$4; shift 4
case "$flag" in --m|--L) ;; *) bad "first argument must be --m or --L, got '$flag'" ;; esac
[ -f "$config" ] || bad "$config: no such config file"
[ -n "${values// /}" ] || bad "no values to sweep"
favor=${FAVOR:-$(dirname "$0")/../build/favor}
parts=()
for value in $values; do
  part="${out%/}.parts/${flag#--}$value"
  "$favor" run "$config" "$flag" "$value" --out "$part" --quiet "$@"
  parts+=("$part")
done
"$favor" merge "$out" "${parts[@]}"
