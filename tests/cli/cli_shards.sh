#!/usr/bin/env bash
# A 4-way sharded run merged equals the unsharded run byte for byte (errors.csv and
# summary.csv; hybrids among the variants, docs/design.md 2.8); merge refuses inconsistent inputs; a kernel experiment merges too.
set -euo pipefail
favor=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cat > "$tmp/c.json" <<'JSON'
{"name": "shards", "seed": 5, "inputs": {"source": "random", "L": [64, 96], "d": 8, "scale": [0.5, 1.0]},
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig", "projection": "iid"},
              {"features": "hyperbolic", "projection": "iid"},
              {"features": "positive", "projection": "orthogonal", "window": 4, "sinks": 1}, {"features": "none", "window": 8}],
 "m": [8, 16, 32], "trials": 3, "metrics": ["output_mse", "attention_mse", "kernel_mse"]}
JSON
"$favor" run "$tmp/c.json" --out "$tmp/full" --quiet
for k in 0 1 2 3; do "$favor" run "$tmp/c.json" --shard $k/4 --threads 1 --out "$tmp/s$k" --quiet; done
"$favor" merge "$tmp/merged" "$tmp/s2" "$tmp/s0" "$tmp/s3" "$tmp/s1" --quiet
cmp "$tmp/full/errors.csv" "$tmp/merged/errors.csv" || fail "merged errors.csv differs"
cmp "$tmp/full/summary.csv" "$tmp/merged/summary.csv" || fail "merged summary.csv differs"
# Sweep pattern: one run per m, merged, equals the run over the m list.
for m in 8 16 32; do "$favor" run "$tmp/c.json" --m $m --out "$tmp/m$m" --quiet; done
"$favor" merge "$tmp/mm" "$tmp/m32" "$tmp/m8" "$tmp/m16" --quiet
cmp "$tmp/full/errors.csv" "$tmp/mm/errors.csv" || fail "m-sweep merge differs"
# Different seeds: refused with one line naming the difference, exit 2, nothing written.
"$favor" run "$tmp/c.json" --shard 0/4 --seed 6 --out "$tmp/other" --quiet
set +e
err=$("$favor" merge "$tmp/bad" "$tmp/s0" "$tmp/other" 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && grep -q "config differs .* in seed: 6 vs 5" <<<"$err" && [ ! -e "$tmp/bad" ] &&
  [ "$(ls -A "$tmp" | grep -c favor-)" = 0 ] || fail "inconsistent merge: rc=$rc [$err]"
# Kernel experiment shards.
cat > "$tmp/k.json" <<'JSON'
{"name": "k", "experiment": "kernel", "d": 4, "m": [4, 8], "norm": [0.5, 1.0], "angle": [0.5, 1.5, 2.5], "trials": 50,
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig", "projection": "iid"}]}
JSON
"$favor" run "$tmp/k.json" --out "$tmp/kfull" --quiet
for k in 0 1 2; do "$favor" run "$tmp/k.json" --shard $k/3 --out "$tmp/k$k" --quiet; done
"$favor" merge "$tmp/kmerged" "$tmp/k1" "$tmp/k0" "$tmp/k2" --quiet
cmp "$tmp/kfull/summary.csv" "$tmp/kmerged/summary.csv" || fail "kernel merge differs"
echo "cli_shards: ok"
