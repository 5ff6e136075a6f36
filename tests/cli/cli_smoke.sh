#!/usr/bin/env bash
# End-to-end: the CLI on a tiny config writes every table; --help works on each subcommand.
set -euo pipefail
favor=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

for sub in run validate list; do "$favor" $sub --help >/dev/null || fail "$sub --help"; done
grep -q "orthogonal-nosignfix" <<<"$("$favor" list)" || fail "list"
"$favor" validate "$src/configs/default.json" >/dev/null || fail "validate default"

cat > "$tmp/tiny.json" <<'JSON'
{"name": "tiny", "inputs": {"source": "random", "L": 128, "d": 8},
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig", "projection": "iid"}],
 "m": [8, 16], "trials": 2, "metrics": ["output_mse", "attention_mse", "kernel_mse", "negative_fraction", "seconds"]}
JSON
"$favor" run "$tmp/tiny.json" --out "$tmp/out" --quiet --set inputs.scale=0.5 --m 8,16 --trials 3 --threads 2
for f in errors.csv summary.csv summary.md run.json; do [ -s "$tmp/out/$f" ] || fail "missing $f"; done
head -1 "$tmp/out/errors.csv" | grep -qx "variant,features,projection,L,d,m,num_features,scale,trial,seed,output_mse,attention_mse,kernel_mse,kernel_mse_theory,negative_fraction,nonfinite,seconds" || fail "errors.csv header: $(head -1 "$tmp/out/errors.csv")"
[ "$(wc -l < "$tmp/out/errors.csv")" -eq $((1 + 2 * 2 * 3)) ] || fail "errors.csv rows"
grep -q '"scale": \[' "$tmp/out/run.json" || fail "run.json resolved config"
# summary.md is read by people (issue 56): constant keys said once, each metric one "mean ± sem"
# column equal to summary.csv's mean and sem at the digits shown; the table of 9 columns, not 60.
/usr/bin/python3 - "$tmp/out" <<'PY' || fail "summary.md is not the readable summary of summary.csv"
import csv, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(f"{d}/summary.csv")))
md = open(f"{d}/summary.md").read().splitlines()
assert "In every row: L = 128, d = 8, scale = 0.5, trials = 3" in md[2], md[2]
table = [l.strip("|").split("|") for l in md if l.startswith("| ")]
head, body = [c.strip() for c in table[0]], table[1:]
assert head[:5] == ["variant", "features", "projection", "m", "num_features"], head
assert len(body) == len(rows) and len(head) <= 12, (len(body), head)
for r, cells in zip(rows, body):
    cell = dict(zip(head, (c.strip() for c in cells)))
    for metric in ("output_mse", "attention_mse", "kernel_mse"):
        mean, sem = cell[metric].split(" ± ")
        assert float(mean) == float(f"{float(r[metric + '_mean']):.4g}"), (metric, mean, r[metric + "_mean"])
        assert float(sem) == float(f"{float(r[metric + '_sem']):.2g}"), (metric, sem, r[metric + "_sem"])
PY
ls "$tmp/out" | grep -q tmp && fail "temporary file left behind"
# --quiet prints nothing
[ -z "$("$favor" run "$tmp/tiny.json" --out "$tmp/out2" --quiet 2>&1)" ] || fail "--quiet printed"
echo "cli_smoke: ok"
