#!/usr/bin/env bash
# Equal feature budgets and input replication through the CLI: --num-features resolves m per
# map (trig m = F/2 beside positive m = F), --m with --num-features is refused (exit 2, one
# line, nothing written), validate counts input seeds, and a 3-way sharded run with
# input_seeds merged through the files equals the unsharded run byte for byte (errors.csv,
# summary.csv, baselines.csv), as does a merged sweep over input seeds.
set -euo pipefail
favor=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cat > "$tmp/c.json" <<'JSON'
{"name": "budgets", "seed": 4, "inputs": {"source": "random", "L": [32, 48], "d": 8, "scale": 0.5},
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig", "projection": "orthogonal"},
              {"features": "elu"}],
 "m": [8, 16], "trials": 2, "input_seeds": [0, 2, 5], "metrics": ["output_mse", "attention_tv"]}
JSON
# Equal budgets: one F = 32 cell holds positive at m = 32 and trig at m = 16; elu at F = d = 8.
"$favor" run "$tmp/c.json" --num-features 32 --set input_seeds=1 --out "$tmp/f" --quiet
cut -d, -f1,6,7 "$tmp/f/summary.csv" | sort -u > "$tmp/f.keys"
printf '%s\n' "elu,8,8" "positive-orthogonal,32,32" "trig-orthogonal,16,32" "variant,m,num_features" | cmp - "$tmp/f.keys" ||
  fail "num_features cells: $(cat "$tmp/f.keys")"
[ ! -e "$tmp/f/baselines.csv" ] && ! head -1 "$tmp/f/errors.csv" | grep -q input_seed || fail "input_seeds=1 added a column or file"
set +e
err=$("$favor" run "$tmp/c.json" --m 8 --num-features 16 --out "$tmp/bad" 2>&1); rc=$?
err2=$("$favor" run "$tmp/c.json" --num-features 33 --out "$tmp/bad" 2>&1); rc2=$?
set -e
[ $rc -eq 2 ] && [ "$(wc -l <<<"$err")" = 1 ] && grep -q "^favor: run: --m and --num-features" <<<"$err" &&
  [ $rc2 -eq 2 ] && grep -q "num_features: 33 columns: 'trig' (variants\[1\])" <<<"$err2" && [ ! -e "$tmp/bad" ] ||
  fail "budget refusals: rc=$rc [$err] rc2=$rc2 [$err2]"
grep -q "ok, 12 cells x 3 input seeds x 2 trials" <<<"$("$favor" validate "$tmp/c.json")" || fail "validate count"
# Input seeds: shards and a sweep over input seeds merge into the whole run.
"$favor" run "$tmp/c.json" --out "$tmp/full" --quiet
for k in 0 1 2; do "$favor" run "$tmp/c.json" --shard $k/3 --threads 1 --out "$tmp/s$k" --quiet; done
"$favor" merge "$tmp/merged" "$tmp/s2" "$tmp/s0" "$tmp/s1" --quiet
"$favor" run "$tmp/c.json" --set 'input_seeds=[2,5]' --out "$tmp/e25" --quiet
"$favor" run "$tmp/c.json" --set input_seeds=1 --out "$tmp/e0" --quiet
"$favor" merge "$tmp/sweep" "$tmp/e25" "$tmp/e0" --quiet
for f in errors.csv summary.csv baselines.csv; do
  cmp "$tmp/full/$f" "$tmp/merged/$f" || fail "sharded $f differs"
  cmp "$tmp/full/$f" "$tmp/sweep/$f" || fail "input-seed sweep $f differs"
done
head -1 "$tmp/full/errors.csv" | grep -q ",scale,input_seed,trial,seed," || fail "errors.csv columns"
echo "cli_budgets: ok"
