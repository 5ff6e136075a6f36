#!/usr/bin/env bash
# The metric columns against numpy: output_mse, output_rel_error, attention_mse, attention_tv,
# attention_kl (blank where some A_hat <= 0), negative_fraction, nonfinite, their summary
# statistics (mean, std, sem, median, p10, p90) and the uniform-attention baseline_<metric>
# columns, recomputed from the definitions by tests/metrics_numpy_check.py for positive,
# hyperbolic, trig and oprf (fixed A) with orthogonal W: one head and several heads, causal
# and not, per_head rows and head averages.
set -euo pipefail
favor=$1; src=$2
py=/usr/bin/python3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$favor" gen --L 48 --d 8 --dv 5 --scale 1 --seed 3 --out "$tmp/single"
trials=$("$py" "$src/tests/metrics_numpy_check.py" prepare "$tmp") || fail "prepare"
for t in $trials; do
  "$favor" projection --projection orthogonal --m 12 --d 8 --seed 3 --trial "$t" --out "$tmp/W$t.npy"
done
n=0
for cfg in "$tmp"/cases/*.json; do
  case=$(basename "$cfg" .json)
  "$favor" run "$cfg" --out "$tmp/runs/$case" --quiet || fail "favor run $case"
  n=$((n + 1))
done
[ "$n" -ge 6 ] || fail "only $n cases"
"$py" "$src/tests/metrics_numpy_check.py" check "$tmp" || fail "metrics differ from numpy"
echo "cli_metrics: ok"
