#!/usr/bin/env bash
# Regenerates results/: runs every paper config and draws its figure. Deterministic: a
# second run gives identical CSVs (run.json records the time and host, so it differs).
# Usage: scripts/reproduce_paper.sh [--no-build]
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${1:-}" = "--no-build" ] || scripts/setup.sh
favor=${FAVOR:-build/favor}
configs=(configs/fig2_kernel_mse_ratio.json configs/fig4_output_mse_vs_m.json
         configs/scale_sweep.json configs/L_sweep.json
         configs/beyond_kernel_mse.json configs/beyond_output_mse_vs_m.json)
for c in "${configs[@]}"; do
  [ -f "$c" ] || continue
  name=$(basename "$c" .json)
  start=$(date +%s)
  "$favor" run "$c" --out "results/$name" --quiet
  /usr/bin/python3 scripts/plot.py "results/$name" --out "results/$name/$name.png"
  # Many estimators side by side: also kernel MSE vs angle, one panel per (m, norm).
  [ "$name" != beyond_kernel_mse ] ||
    /usr/bin/python3 scripts/plot.py "results/$name" --kind angle --out "results/$name/${name}_vs_angle.png"
  echo "[reproduce] $name: $(( $(date +%s) - start )) s"
done
