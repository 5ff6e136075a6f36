#!/usr/bin/env bash
# The half-precision study (docs/results.md "Half precision", docs/design.md section 2.6):
# configs/precision_scale_sweep.json run once per dtype (dtype is not a grid axis of a
# config) into OUT/<dtype>/, the emulated exact attention's own error per (L, scale) and
# dtype into OUT/exact_floor.csv, then the break table (OUT/breaks.md, .csv) and the figure
# (OUT/precision_scale_sweep.png).
# Usage: scripts/precision_sweep.sh [OUT] [extra favor run flags]   (OUT default
# results/precision_scale_sweep; about 1.5 minutes on 2 cores)
set -euo pipefail
usage() { echo "usage: scripts/precision_sweep.sh [OUT (default results/precision_scale_sweep)] [favor run flags...]"; }
case ${1:-} in
  -h|--help) usage; exit 0 ;;
  -*) usage >&2; echo "precision_sweep.sh: the first argument is OUT, got '$1'" >&2; exit 2 ;;
esac
out=results/precision_scale_sweep   # of the repository
if [ $# -gt 0 ]; then   # a given OUT: from the current directory
  out=$1; shift
  case $out in /*) ;; *) out=$PWD/$out ;; esac
fi
cd "$(dirname "$0")/.."
favor=${FAVOR:-build/favor}
py=/usr/bin/python3
cfg=configs/precision_scale_sweep.json
for dt in float64 float32 float16 bfloat16; do
  "$favor" run "$cfg" --dtype "$dt" --out "$out/$dt" --quiet "$@"
done
# The exact floor: favor apply --exact in each dtype on the run's own inputs (favor gen
# writes exactly those), against float64 exact attention.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
read -r Ls scales d dv seed < <("$py" -c "
import json, sys
c = json.load(open('$cfg'))
i = c['inputs']
print(','.join(map(str, i['L'])), ','.join(map(str, i['scale'])), i['d'], i.get('d_v', i['d']), c.get('seed', 0))")
echo "dtype,L,scale,output_mse,output_rel_error" > "$tmp/floor.csv"
for L in ${Ls//,/ }; do
  for s in ${scales//,/ }; do
    g="$tmp/in-$L-$s"
    "$favor" gen --L "$L" --d "$d" --dv "$dv" --scale "$s" --seed "$seed" --out "$g"
    for dt in float64 float32 float16 bfloat16; do
      "$favor" apply --q "$g/q.npy" --k "$g/k.npy" --v "$g/v.npy" --exact --dtype "$dt" --out "$g/$dt.npy"
    done
    "$py" - "$g" "$L" "$s" >> "$tmp/floor.csv" <<'PY'
import sys, numpy as np
g, L, s = sys.argv[1:]
ref = np.load(f"{g}/float64.npy")
for dt in ("float32", "float16", "bfloat16"):
    o = np.load(f"{g}/{dt}.npy").astype(np.float64)
    print(f"{dt},{L},{s},{np.mean((o - ref) ** 2)!r},{np.linalg.norm(o - ref) / np.linalg.norm(ref)!r}")
PY
  done
done
cp "$tmp/floor.csv" "$out/exact_floor.csv"
"$py" scripts/precision_report.py "$out"
"$py" scripts/plot.py "$out" --kind precision --out "$out/precision_scale_sweep.png"
