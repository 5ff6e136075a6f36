#!/usr/bin/env bash
# The README's GNU parallel sweep: 4 shards run by `parallel`, merged, equal a single run byte
# for byte; without one shard, the merge is refused; scripts/sweep_m.sh does the same by m. Skipped (exit 77) without GNU parallel
# (Debian package `parallel`; scripts/setup.sh installs it).
set -euo pipefail
favor=$1
command -v parallel >/dev/null || { echo "cli_parallel: skipped (no GNU parallel)"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cat > "$tmp/c.json" <<'JSON'
{"name": "par", "seed": 4, "inputs": {"source": "random", "L": [64, 128], "d": 8, "scale": [0.25, 0.5, 1.0]},
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig", "projection": "iid"}],
 "m": [8, 16, 32], "trials": 3, "metrics": ["output_mse", "attention_tv"]}
JSON
"$favor" run "$tmp/c.json" --out "$tmp/single" --quiet
parallel --will-cite "$favor" run "$tmp/c.json" --shard {}/4 --threads 1 --out "$tmp/shards/{}" --quiet ::: 0 1 2 3
"$favor" merge "$tmp/merged" "$tmp"/shards/* --quiet
for f in errors.csv summary.csv; do cmp "$tmp/single/$f" "$tmp/merged/$f" || fail "parallel sweep: $f differs"; done
rm -rf "$tmp/shards/2"
set +e
err=$("$favor" merge "$tmp/m2" "$tmp"/shards/* 2>&1); rc=$?
set -e
[ $rc = 2 ] && grep -q "shard(s) 2 of 4 missing" <<<"$err" || fail "missing shard: rc=$rc [$err]"
# scripts/sweep_m.sh: one run per m, merged.
FAVOR=$favor "$2/scripts/sweep_m.sh" "$tmp/c.json" "$tmp/sweep" "8 16 32" --quiet >/dev/null
for f in errors.csv summary.csv; do cmp "$tmp/single/$f" "$tmp/sweep/$f" || fail "sweep_m.sh: $f differs"; done
echo "cli_parallel: ok"
