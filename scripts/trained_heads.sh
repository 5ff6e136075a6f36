#!/usr/bin/env bash
# The study "On attention from a trained model" (docs/results.md): every estimator of
# configs/trained_heads.json (causal, as the model uses its heads) and
# configs/trained_heads_noncausal.json on every layer of data/ (the tiny byte-level LM's
# captured heads), at equal feature budgets, then `favor compare` (comparisons_<metric>.csv,
# ranking_<metric>.csv) and scripts/trained_heads_report.py (figure and table against head entropy).
# Usage: scripts/trained_heads.sh [--no-build] [--report-only] [OUT_DIR (default results)]
#   writes OUT_DIR/trained_heads/layer<i>/, OUT_DIR/trained_heads_noncausal/layer<i>/ and
#   OUT_DIR/trained_heads.md, OUT_DIR/trained_heads_vs_entropy.png (a few minutes on 2 cores)
set -euo pipefail
usage() { echo "usage: scripts/trained_heads.sh [--no-build] [--report-only] [OUT_DIR (default results)]"; }
bad() { usage >&2; echo "trained_heads.sh: $1" >&2; exit 2; }
build=1 run=1 out=""
for arg in "$@"; do
  case $arg in
    -h|--help) usage; exit 0 ;;
    --no-build) build=0 ;;
    --report-only) build=0 run=0 ;;
    -*) bad "unknown option '$arg'" ;;
    *) [ -z "$out" ] || bad "one OUT_DIR only, got '$out' and '$arg'"; out=$arg ;;
  esac
done
case $out in ""|/*) ;; *) out=$PWD/$out ;; esac   # a given OUT_DIR: from the current directory
cd "$(dirname "$0")/.."
out=${out:-results}
[ "$build" = 0 ] || scripts/setup.sh --target favor
favor=${FAVOR:-build/favor}
py=/usr/bin/python3
layers=$(ls -d data/layer*/ | sed 's#data/layer\([0-9]*\)/#\1#' | sort -n)
[ -n "$layers" ] || { echo "trained_heads.sh: no data/layer*/ (the captured heads)" >&2; exit 2; }
if [ "$run" = 1 ]; then
  for name in trained_heads trained_heads_noncausal; do
    for i in $layers; do
      dir=$out/$name/layer$i
      "$favor" run "configs/$name.json" --out "$dir" --quiet \
        --set "inputs.q=data/layer$i/q.npy" --set "inputs.k=data/layer$i/k.npy" --set "inputs.v=data/layer$i/v.npy"
      "$favor" compare "$dir" --metric output_rel_error --metric attention_tv --metric attention_kl > /dev/null
      echo "$dir"
    done
  done
fi
"$py" scripts/trained_heads_report.py "$out" data
