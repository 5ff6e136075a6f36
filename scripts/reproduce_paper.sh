#!/usr/bin/env bash
# Regenerates results/ (or --out DIR): runs configs/default.json and every paper config, and
# draws the paper configs' figures.
# Deterministic: a second run gives identical CSVs (run.json records the time and host, so it
# differs). Timings depend on the machine: timing_vs_L is re-measured only with --timing; its
# figure is redrawn from the timing.csv found in the output otherwise.
# Usage: scripts/reproduce_paper.sh [--no-build] [--plots-only] [--timing] [--out DIR]
#   --no-build    use the existing build/favor (default: scripts/setup.sh builds it first)
#   --plots-only  redraw every figure from the tables already in the output; run no experiment
#   --timing      also re-measure timing_vs_L (about 30 s of wall time, all cores)
#   --out DIR     write DIR/<config name>/ instead of results/<config name>/ (the committed
#                 results); DIR (relative to the current directory) is created if missing
set -euo pipefail
usage() { echo "usage: scripts/reproduce_paper.sh [--no-build] [--plots-only] [--timing] [--out DIR]"; }
bad() { usage >&2; echo "reproduce_paper.sh: $1" >&2; exit 2; }
build=1 run=1 timing=0 out=results
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --no-build) build=0 ;;
    --plots-only) build=0 run=0 ;;
    --timing) timing=1 ;;
    --out) [ $# -ge 2 ] && [ -n "$2" ] || bad "--out needs a directory"; out=$2; shift ;;
    --out=?*) out=${1#--out=} ;;
    *) bad "unknown argument '$1'" ;;
  esac
  shift
done
out=${out%/}
case $out in /*|results) ;; *) out=$PWD/$out ;; esac   # a given DIR: from the current directory
cd "$(dirname "$0")/.."
[ "$run" = 1 ] || [ "$timing" = 0 ] || bad "--plots-only and --timing exclude each other"
[ "$run" = 1 ] || [ -d "$out" ] || bad "--plots-only: $out: no such directory"
[ "$build" = 0 ] || scripts/setup.sh --target favor
favor=${FAVOR:-build/favor}
py=/usr/bin/python3
has_col() {  # has_col RESULT_DIR COLUMN: summary.csv has that column
  local h; h=$(head -n 1 "$1/summary.csv" | tr -d '\r')
  [[ ",$h," == *",$2,"* ]]
}

# The main command's config: scripts/run.sh writes it to out/default/, the committed copy is
# results/default/ (its tables only: no comparisons or figure).
if [ "$run" = 1 ]; then
  "$favor" run configs/default.json --out "$out/default" --quiet
  echo "[reproduce] default: $out/default"
fi

configs=(configs/fig2_kernel_mse_ratio.json configs/fig4_output_mse_vs_m.json
         configs/scale_sweep.json configs/L_sweep.json
         configs/beyond_kernel_mse.json configs/beyond_output_mse_vs_m.json
         configs/sota_kernel_mse.json configs/sota_output_mse_vs_m.json
         configs/field_output_mse.json configs/field_trained_heads.json
         configs/new_projections_output_mse.json
         configs/gradient_vs_m.json configs/gradient_trained_heads.json)
for c in "${configs[@]}"; do
  [ -f "$c" ] || continue
  name=$(basename "$c" .json)
  dir=$out/$name
  start=$(date +%s)
  [ "$run" = 0 ] || "$favor" run "$c" --out "$dir" --quiet
  # Significance of every pairwise difference and against uniform attention and the ranking
  # per cell, per metric (comparisons_<metric>.csv, ranking_<metric>.csv). Fig. 4's m grid pairs trig's 2m feature columns
  # with positive's m at the next m: compared at equal feature columns (--match num_features).
  match=(); [ "$name" != fig4_output_mse_vs_m ] || match=(--match num_features)
  [ "$run" = 0 ] || [ ! -f "$dir/errors.csv" ] || "$favor" compare "$dir" --metric all "${match[@]}" > /dev/null
  [ -f "$dir/summary.csv" ] || { echo "[reproduce] $name: no $dir/summary.csv, skipped" >&2; continue; }
  # the paper's Fig. 4 panels (trig/positive x iid/orthogonal; the title names what they leave out)
  layout=(); [ "$name" != fig4_output_mse_vs_m ] || layout=(--layout fig4)
  case $name in gradient_*) ;; *) "$py" scripts/plot.py "$dir" "${layout[@]}" --out "$dir/$name.png" ;; esac
  case $name in
    beyond_kernel_mse|sota_kernel_mse)  # many estimators side by side: kernel MSE vs angle, one panel per (m, norm)
      "$py" scripts/plot.py "$dir" --kind angle --out "$dir/${name}_vs_angle.png" ;;
    fig4_output_mse_vs_m)  # at equal cost (feature columns), and the median with p10-p90
      ! has_col "$dir" num_features ||
        "$py" scripts/plot.py "$dir" --x num_features --out "$dir/${name}_vs_num_features.png"
      ! has_col "$dir" output_mse_median ||
        "$py" scripts/plot.py "$dir" --stat median --out "$dir/${name}_median.png"
      ! has_col "$dir" attention_tv_mean ||
        "$py" scripts/plot.py "$dir" --metric attention_tv --out "$dir/${name}_attention_tv.png" ;;
    sota_output_mse_vs_m)
      "$py" scripts/plot.py "$dir" --metric output_rel_error --out "$dir/sota_output_rel_error_vs_m.png" ;;
    field_output_mse)  # every estimator against uniform attention at equal feature columns
      "$py" scripts/plot.py "$dir" --ratio --out "$dir/${name}_ratio.png" ;;
    field_trained_heads)  # the same on data/lm16's heads: relative error over uniform attention's
      "$py" scripts/plot.py "$dir" --ratio --metric output_rel_error --out "$dir/$name.png" ;;
    gradient_vs_m|gradient_trained_heads)  # gradient errors beside the output's, bias vs its floor
      "$py" scripts/plot.py "$dir" --kind gradient --out "$dir/$name.png" ;;
    L_sweep|scale_sweep)  # relative error ||Out - Out_hat||_F / ||Out||_F; scale: ratio to uniform
      [ "$name" != scale_sweep ] || ! has_col "$dir" baseline_output_mse ||
        "$py" scripts/plot.py "$dir" --ratio --out "$dir/${name}_ratio.png"
      ! has_col "$dir" output_rel_error_mean ||
        "$py" scripts/plot.py "$dir" --metric output_rel_error --out "$dir/${name}_output_rel_error.png"
      ! has_col "$dir" attention_tv_mean ||
        "$py" scripts/plot.py "$dir" --metric attention_tv --out "$dir/${name}_attention_tv.png" ;;
  esac
  echo "[reproduce] $name: $(( $(date +%s) - start )) s"
done

# The kernel experiment's bias columns and unequal norms (tables plot.py does not draw: the
# relative bias vs d against its closed form; MSE relative to oprf vs |x| / |y|).
for name in fixed_norm_bias kernel_unequal_norms; do
  dir=$out/$name
  start=$(date +%s)
  [ "$run" = 0 ] || "$favor" run "configs/$name.json" --out "$dir" --quiet
  [ -f "$dir/summary.csv" ] || { echo "[reproduce] $name: no $dir/summary.csv, skipped" >&2; continue; }
  "$py" scripts/plot_kernel_bias.py "$dir" --out "$dir/$name.png" > /dev/null
  echo "[reproduce] $name: $(( $(date +%s) - start )) s"
done
# Tables only: kernel MSE at pairs sampled from data/lm16's captured heads (one point per pair),
# and the new projections' kernel MSE and bias (docs/estimators.md's numbers).
for name in kernel_pairs_trained new_projections_kernel; do
  [ "$run" = 0 ] || "$favor" run "configs/$name.json" --out "$out/$name" --quiet
done

# Performer Fig. 3 counterpart: wall time vs L, exact vs FAVOR (machine-dependent).
dir=$out/timing_vs_L
if [ "$timing" = 1 ]; then
  start=$(date +%s)
  "$favor" run configs/timing_vs_L.json --out "$dir" --quiet
  echo "[reproduce] timing_vs_L: $(( $(date +%s) - start )) s"
fi
[ ! -f "$dir/timing.csv" ] || "$py" scripts/plot.py "$dir" --kind timing --out "$dir/timing_vs_L.png"
