#!/usr/bin/env bash
# The studies on a model's captured heads (default data/lm16/excerpt0: the byte-level LM of
# data/lm16/, 4 layers x 4 heads, its capture of the first held-out excerpt):
# - "On attention from a trained model" (docs/results.md): `favor study` (python3 -m favor study,
#   docs/design.md 9.3) of the capture with the estimators of configs/trained_heads.json (causal,
#   as the model uses its heads) and of configs/trained_heads_noncausal.json (--causal no), at
#   F = 64, 128, 256 columns (elu and dpfp at their own F = 64 and 128), 16 trials, verdicts
#   against uniform attention. Writes OUT_DIR/trained_heads/ and OUT_DIR/trained_heads_noncausal/
#   (report.md, report.png, study.csv, study.json, layer<i>/F<F>/; a few minutes on 2 cores).
# - --hybrid: "Attention as deployed" (issue 38, docs/results.md): hybrids (an exact window and
#   sink tokens, a feature-map remainder) of configs/hybrid_trained_heads{,_w64,_w256,_fixed}.json,
#   causal, at equal columns F + w + s, compared with --match num_features in three families
#   (against uniform; each hybrid against window-only, and against features-only: hybrid_compare);
#   scripts/hybrid_report.py.
#   Writes OUT_DIR/hybrid_trained_heads/<part>/layer<i>/ (part: main, w64, w256, fixed), its
#   README.md and figures (about 25 min on 2 cores, most of it the compare families).
# --capture DIR: another capture (DIR/manifest.json and DIR/layer<i>/{q,k,v}.npy, as
# scripts/capture_qkv.py writes them). --report-only (with --hybrid): the report from earlier runs.
# Usage: scripts/trained_heads.sh [--hybrid] [--no-build] [--report-only] [--capture DIR] [OUT_DIR (default results)]
set -euo pipefail
usage() { echo "usage: scripts/trained_heads.sh [--hybrid] [--no-build] [--report-only] [--capture DIR] [OUT_DIR (default results)]"; }
bad() { usage >&2; echo "trained_heads.sh: $1" >&2; exit 2; }
build=1 run=1 hybrid=0 out="" data=""
while [ $# -gt 0 ]; do
  arg=$1; shift
  case $arg in
    -h|--help) usage; exit 0 ;;
    --capture) [ $# -ge 1 ] && [ -n "$1" ] || bad "--capture needs a directory"; data=$1; shift ;;
    --hybrid) hybrid=1 ;;
    --no-build) build=0 ;;
    --report-only) build=0 run=0 ;;
    -*) bad "unknown option '$arg'" ;;
    *) [ -z "$out" ] || bad "one OUT_DIR only, got '$out' and '$arg'"; out=$arg ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
if [ "$PWD" != "$root" ]; then   # a relative OUT_DIR or --capture is from the current directory
  case $out in ""|/*) ;; *) out=$PWD/$out ;; esac
  case $data in ""|/*) ;; *) data=$PWD/$data ;; esac
fi   # (from the repository they stay relative: run.json records no path of this machine)
cd "$root"
data=${data:-data/lm16/excerpt0}
out=${out:-results}
targets=(--target favor)   # favor study also needs the Python module
[ "$hybrid" = 1 ] || targets+=(--target favor_python --target favor_python_files)
[ "$build" = 0 ] || scripts/setup.sh "${targets[@]}"
favor=${FAVOR:-build/favor}
py=/usr/bin/python3
[ -d "$data" ] || { echo "trained_heads.sh: --capture $data: no such directory" >&2; exit 2; }
layers=$(ls -d "$data"/layer*/ 2> /dev/null | sed 's#.*/layer\([0-9]*\)/$#\1#' | sort -n || true)
[ -n "$layers" ] || { echo "trained_heads.sh: no $data/layer*/ (the captured heads)" >&2; exit 2; }
# run_layers NAME CONFIG COMPARE_FLAGS...: CONFIG on every layer into $out/NAME/layer<i>, then favor
# compare with those flags (COMPARE_FLAGS "hybrid": hybrid_compare below).
run_layers() {
  local name=$1 config=$2 i dir; shift 2
  for i in $layers; do
    dir=$out/$name/layer$i
    "$favor" run "$config" --out "$dir" --quiet \
      --set "inputs.q=$data/layer$i/q.npy" --set "inputs.k=$data/layer$i/k.npy" --set "inputs.v=$data/layer$i/v.npy"
    if [ "$1" = hybrid ]; then hybrid_compare "$dir"; else "$favor" compare "$dir" "$@" > /dev/null; fi
    echo "$dir"
  done
}
# hybrid_compare DIR: the hybrid study's compare families (one family of every pair is too large
# for 16 trials to reach a verdict on 16 heads): each ablation family by --pairs, kept as
# ablation_<kind>_output_rel_error.csv, then every variant against uniform (comparisons_ and
# ranking_output_rel_error.csv).
hybrid_compare() {
  local dir=$1 kind pairs
  for kind in window features; do
    pairs=$("$py" scripts/hybrid_report.py --pairs-of "$dir" --kind "$kind")
    [ -n "$pairs" ] || continue
    "$favor" compare "$dir" --metric output_rel_error --match num_features --pairs "$pairs" > /dev/null
    mv "$dir/comparisons_output_rel_error.csv" "$dir/ablation_${kind}_output_rel_error.csv"
  done
  "$favor" compare "$dir" --metric output_rel_error --match num_features --against uniform > /dev/null
}
if [ "$hybrid" = 1 ]; then
  if [ "$run" = 1 ]; then
    for part in main w64 w256 fixed; do
      config=configs/hybrid_trained_heads.json
      [ "$part" = main ] || config=configs/hybrid_trained_heads_$part.json
      run_layers "hybrid_trained_heads/$part" "$config" hybrid
    done
  fi
  "$py" scripts/hybrid_report.py "$out/hybrid_trained_heads" "$data"
  exit 0
fi
# The estimators' study: favor study with each config's variants (its report replaces the
# per-layer runs and report script this study had before issue 41).
[ "$run" = 1 ] || bad "--report-only is for --hybrid (favor study writes its report with its runs)"
for name in trained_heads trained_heads_noncausal; do
  causal=auto
  [ "$name" = trained_heads ] || causal=no
  PYTHONPATH=${FAVOR_PYTHONPATH:-build/python} "$py" -m favor study "$data" --budgets 64,128,256 --trials 16 \
    --variants "configs/$name.json" --causal "$causal" --out "$out/$name"
done
