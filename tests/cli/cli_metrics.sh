#!/usr/bin/env bash
# The metric columns against numpy: output_mse, output_rel_error, attention_mse, attention_tv,
# attention_kl (blank where some A_hat <= 0), negative_fraction, nonfinite, their summary
# statistics (mean, std, sem, median, p10, p90) and the uniform-attention baseline_<metric>
# columns, recomputed from the definitions by tests/cli/metrics_numpy_check.py for positive,
# hyperbolic, trig and oprf (fixed A) with orthogonal W: one head and several heads, causal
# and not, per_head rows and head averages; by tests/cli/metrics_numpy_lk_check.py with keys
# longer than the queries (Lk != L), inputs.L, and row-sampled runs (the _row_sem columns),
# with and without pairwise metrics. Then causal attention with Lk != L, which run refuses as
# apply does (one line, exit 2, nothing written), with and without inputs.L.
set -euo pipefail
favor=$1; src=$2
py=/usr/bin/python3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
checks=(metrics_numpy_check metrics_numpy_lk_check)

"$favor" gen --L 48 --d 8 --dv 5 --scale 1 --seed 3 --out "$tmp/single"
trials=$(for c in "${checks[@]}"; do "$py" "$src/tests/cli/$c.py" prepare "$tmp" || echo fail; done | sort -u)
grep -q fail <<<"$trials" && fail "prepare"
for t in $trials; do
  "$favor" projection --projection orthogonal --m 12 --d 8 --seed 3 --trial "$t" --out "$tmp/W$t.npy"
done
n=0
for cfg in "$tmp"/cases/*.json; do
  case=$(basename "$cfg" .json)
  "$favor" run "$cfg" --out "$tmp/runs/$case" --quiet || fail "favor run $case"
  n=$((n + 1))
done
[ "$n" -ge 14 ] || fail "only $n cases"
for c in "${checks[@]}"; do
  "$py" "$src/tests/cli/$c.py" check "$tmp" || fail "metrics differ from numpy ($c.py)"
done

# Causal with Lk != L (q 24 rows, k and v 40): refused by run, whatever inputs.L, and apply alike.
want="favor: $tmp/cross/k.npy: causal attention needs q and k of one length, got 40 here and 24 in q ($tmp/cross/q.npy)"
for L in 24 ''; do
  set +e
  err=$("$favor" run "$tmp/cases/cross.json" --set causal=true ${L:+--L "$L"} --out "$tmp/bad" 2>&1); rc=$?
  set -e
  [ $rc -eq 2 ] && [ "$err" = "$want" ] && [ ! -e "$tmp/bad" ] ||
    fail "run: causal with Lk != L (inputs.L '$L') not refused: rc=$rc [$err]"
done
set +e
err=$("$favor" apply --q "$tmp/cross/q.npy" --k "$tmp/cross/k.npy" --v "$tmp/cross/v.npy" --exact --causal \
  --out "$tmp/a.npy" 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && [ "$err" = "$want" ] && [ ! -e "$tmp/a.npy" ] || fail "apply: causal with Lk != L not refused: rc=$rc [$err]"
echo "cli_metrics: ok"
