#!/usr/bin/env bash
# End-to-end: favor compare on a tiny approximation run. A variant run twice under two names
# is n.s. with p_value 1; trig-iid is significantly worse than positive-iid; the CSV reads
# with Python's csv module; a bad --metric exits 2 with one line on stderr.
set -euo pipefail
favor=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$favor" compare --help | grep -q "Welch t statistic" || fail "compare --help names the test"
cat > "$tmp/cmp.json" <<'JSON'
{"name": "cmp", "inputs": {"source": "random", "L": 128, "d": 8, "scale": 1},
 "variants": [{"features": "trig", "projection": "iid"}, {"features": "positive", "projection": "iid"},
              {"name": "positive-copy", "features": "positive", "projection": "iid"}],
 "m": 16, "trials": 8, "metrics": ["output_mse"]}
JSON
"$favor" run "$tmp/cmp.json" --out "$tmp/out" --quiet
"$favor" compare "$tmp/out" > "$tmp/stdout"
head -1 "$tmp/stdout" | grep -q "sign-flip permutation test" || fail "first line names the test: $(head -1 "$tmp/stdout")"
grep -q "^| a | b | L | d | m | scale | metric |" "$tmp/stdout" || fail "markdown table"
[ -s "$tmp/out/comparisons.csv" ] || fail "comparisons.csv missing"
ls "$tmp/out" | grep -q tmp && fail "temporary file left behind"
cp "$tmp/out/comparisons.csv" "$tmp/first.csv"
"$favor" compare "$tmp/out" > /dev/null
cmp -s "$tmp/first.csv" "$tmp/out/comparisons.csv" || fail "comparisons.csv differs between runs"

PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
"$PY" - "$tmp/out/comparisons.csv" <<'PY' || fail "comparisons.csv content"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
cols = ["a", "b", "L", "d", "m", "scale", "metric", "mean_a", "mean_b", "n_a", "n_b", "paired",
        "ratio", "ci_low", "ci_high", "p_value", "p_holm", "verdict"]
assert list(rows[0].keys()) == cols, list(rows[0].keys())
by = {(r["a"], r["b"]): r for r in rows}
pairs = [r for r in rows if r["b"] != "uniform"]
assert len(pairs) == 3, rows
# Each variant against uniform attention (summary.csv's baseline_output_mse): one-sample rows.
base = [r for r in rows if r["b"] == "uniform"]
assert len(base) == 3 and all(r["paired"] == "one-sample" and r["n_b"] == "" for r in base), base
same = by[("positive-iid", "positive-copy")]
assert same["paired"] == "yes" and same["verdict"] == "n.s.", same
assert float(same["p_value"]) == 1 and float(same["ratio"]) == 1, same
assert float(same["ci_low"]) == 1 and float(same["ci_high"]) == 1, same
worse = by[("trig-iid", "positive-iid")]
assert worse["verdict"] == "a>b" and float(worse["p_holm"]) < 0.05, worse
assert float(worse["ratio"]) > 1 and float(worse["ci_low"]) > 1, worse
assert worse["n_a"] == "8" and worse["n_b"] == "8", worse
PY

# expect_error NAME EXPECTED_SUBSTRING favor-args...: exit 2, one line on stderr naming the problem.
expect_error() {
  local name=$1 expect=$2; shift 2
  local err rc=0
  err=$("$favor" "$@" 2>&1 >/dev/null) || rc=$?
  [ "$rc" -eq 2 ] || fail "$name: exit $rc ($err)"
  [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] || fail "$name: not one line: $err"
  grep -qF -- "$expect" <<<"$err" || fail "$name: [$err] lacks [$expect]"
}
expect_error bad-metric "--metric: unknown metric 'output_mes', did you mean 'output_mse'?" compare "$tmp/out" --metric output_mes
expect_error absent-metric "errors.csv: no column 'attention_mse'" compare "$tmp/out" --metric attention_mse
expect_error bad-alpha "--alpha: must be in (0, 1)" compare "$tmp/out" --alpha 1.5
mkdir "$tmp/kernel"
expect_error no-errors "compare needs an approximation result's errors.csv" compare "$tmp/kernel"
sed -i '3s/,[^,]*,\([0-9]*\)$/,oops,\1/' "$tmp/out/errors.csv"
expect_error bad-value "errors.csv: line 3, column output_mse: 'oops' is not a number" compare "$tmp/out"
cmp -s "$tmp/first.csv" "$tmp/out/comparisons.csv" || fail "a failed compare changed comparisons.csv"
echo "cli_compare: ok"
