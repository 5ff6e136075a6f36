#!/usr/bin/env bash
# Sweep the number of random features from the shell: one `favor run` per m, then one
# `favor merge`. Each run is independent (W depends only on seed, projection, m, d, trial),
# so the loop body can go to any machine; the merge equals a single run over the list.
# Usage: scripts/sweep_m.sh CONFIG.json OUT_DIR "16 32 64 128 256" [extra favor run flags]
set -euo pipefail
cd "$(dirname "$0")/.."
config=$1 out=$2 values=$3; shift 3
favor=${FAVOR:-build/favor}
parts=()
for m in $values; do
  "$favor" run "$config" --m "$m" --out "$out/parts/m$m" --quiet "$@"
  parts+=("$out/parts/m$m")
done
"$favor" merge "$out" "${parts[@]}"
