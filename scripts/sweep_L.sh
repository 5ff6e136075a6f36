#!/usr/bin/env bash
# Sweep the sequence length from the shell: one `favor run` per L, then one `favor merge`.
# Random inputs for each L are the first L rows of one stream, so the runs are independent.
# Usage: scripts/sweep_L.sh CONFIG.json OUT_DIR "256 1024 4096 16384" [extra favor run flags]
set -euo pipefail
cd "$(dirname "$0")/.."
config=$1 out=$2 values=$3; shift 3
favor=${FAVOR:-build/favor}
parts=()
for L in $values; do
  "$favor" run "$config" --L "$L" --out "$out/parts/L$L" --quiet "$@"
  parts+=("$out/parts/L$L")
done
"$favor" merge "$out" "${parts[@]}"
