#!/usr/bin/env bash
# Writes the seed corpus of fuzz/merge_fuzz.cpp into fuzz/corpus/merge/: small real result
# sets (approximation shards, an npy per-head run, kernel shards, a sweep), each seed the
# files of its input directories joined by lines "@@" (run.json, errors.csv, summary.csv per
# directory; "-" for a missing file). Usage: scripts/make_merge_corpus.sh [FAVOR binary]
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: scripts/make_merge_corpus.sh [FAVOR_BINARY (default build/favor)]"; }
case ${1:-} in
  -h|--help) usage; exit 0 ;;
  -*) usage >&2; echo "make_merge_corpus.sh: unknown option '$1'" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { usage >&2; echo "make_merge_corpus.sh: one argument at most, got $#" >&2; exit 2; }
favor=${1:-build/favor}
[ -x "$favor" ] || { usage >&2; echo "make_merge_corpus.sh: $favor: not an executable (build it: scripts/setup.sh)" >&2; exit 2; }
out=fuzz/corpus/merge
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$out"
seed() {   # seed NAME DIR...
  local name=$1; shift
  local first=1
  : > "$out/$name"
  for d in "$@"; do
    for f in run.json errors.csv summary.csv; do
      [ $first = 1 ] || printf '\n@@\n' >> "$out/$name"
      first=0
      if [ -f "$d/$f" ]; then cat "$d/$f" >> "$out/$name"; else printf -- '-' >> "$out/$name"; fi
    done
  done
}
cat > "$tmp/a.json" <<'JSON'
{"name": "a", "seed": 1, "inputs": {"source": "random", "L": [8, 12], "d": 4, "scale": [0.5, 1]},
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "oprf", "name": "o", "epsilon": 1e-6}],
 "m": [4], "trials": 2, "metrics": ["output_mse", "attention_kl", "kernel_mse"]}
JSON
for k in 0 1; do "$favor" run "$tmp/a.json" --shard $k/2 --out "$tmp/a$k" --quiet; done
seed approx_2_shards "$tmp/a0" "$tmp/a1"
"$favor" run "$tmp/a.json" --set causal=true --out "$tmp/ac" --quiet
seed approx_causal "$tmp/ac"
for m in 4 8; do "$favor" run "$tmp/a.json" --m $m --set trials=1 --out "$tmp/m$m" --quiet; done
seed approx_sweep "$tmp/m4" "$tmp/m8"
"$favor" merge "$tmp/merged" "$tmp/m4" "$tmp/m8" --quiet
seed approx_merged "$tmp/merged"
"$favor" gen --L 6 --d 4 --out "$tmp/npy"
"${PYTHON:-/usr/bin/python3}" - "$tmp/npy" <<'PY'
import numpy as np, sys
d = sys.argv[1]
for n in "qkv":
    a = np.load(f"{d}/{n}.npy"); np.save(f"{d}/{n}.npy", np.stack([a, 0.5 * a]))
PY
cat > "$tmp/n.json" <<JSON
{"name": "n", "inputs": {"source": "npy", "q": "$tmp/npy/q.npy", "k": "$tmp/npy/k.npy", "v": "$tmp/npy/v.npy",
 "per_head": true}, "variants": [{"features": "trig"}], "m": 4, "trials": 2}
JSON
"$favor" run "$tmp/n.json" --out "$tmp/n" --quiet
seed npy_per_head "$tmp/n"
cat > "$tmp/k.json" <<'JSON'
{"name": "k", "experiment": "kernel", "d": 4, "m": [4], "norm": [0.5, 1], "angle": [0.5, 1.5], "trials": 5,
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "hyperbolic"}]}
JSON
for k in 0 1 2; do "$favor" run "$tmp/k.json" --shard $k/3 --out "$tmp/k$k" --quiet; done
seed kernel_3_shards "$tmp/k0" "$tmp/k1" "$tmp/k2"
ls -l "$out"
