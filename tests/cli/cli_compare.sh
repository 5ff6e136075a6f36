#!/usr/bin/env bash
# End-to-end: favor compare on a tiny approximation run. A variant run twice under two names
# is n.s. with p_value 1; trig-iid is significantly worse than positive-iid (8 and 16 trials);
# 4 trials give underpowered on every row, a warning, and validate warns first; the CSVs read
# with Python's csv module; ranking.csv and --summary; a bad --metric exits 2 with one line on
# stderr; only regular files are read (FIFO, /dev/zero, directory) and nan cells are counted;
# one pair of files per metric, never written through a planted link; errors of 1e300 give the
# verdicts of errors of 1; garbage key cells and a variant named uniform are refused.
set -euo pipefail
favor=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

grep -q "Welch t statistic" <<<"$("$favor" compare --help)" || fail "compare --help names the test"
cat > "$tmp/cmp.json" <<'JSON'
{"name": "cmp", "inputs": {"source": "random", "L": 128, "d": 8, "scale": 1},
 "variants": [{"features": "trig", "projection": "iid"}, {"features": "positive", "projection": "iid"},
              {"name": "positive-copy", "features": "positive", "projection": "iid"}],
 "m": 16, "trials": 8, "metrics": ["output_mse"]}
JSON
"$favor" run "$tmp/cmp.json" --out "$tmp/out" --quiet
"$favor" compare "$tmp/out" > "$tmp/stdout"
head -1 "$tmp/stdout" | grep -q "sign-flip permutation test" || fail "first line names the test: $(head -1 "$tmp/stdout")"
grep -q "^| a | b | L | d | m | scale | num_features_a | num_features_b | metric |" "$tmp/stdout" || fail "markdown table"
[ -s "$tmp/out/comparisons_output_mse.csv" ] || fail "comparisons_output_mse.csv missing"
ls "$tmp/out" | grep -q tmp && fail "temporary file left behind"
cp "$tmp/out/comparisons_output_mse.csv" "$tmp/first.csv"
"$favor" compare "$tmp/out" > /dev/null
cmp -s "$tmp/first.csv" "$tmp/out/comparisons_output_mse.csv" || fail "comparisons_output_mse.csv differs between runs"

PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
"$PY" - "$tmp/out/comparisons_output_mse.csv" <<'PY' || fail "comparisons_output_mse.csv content"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
cols = ["a", "b", "L", "d", "m", "scale", "num_features_a", "num_features_b", "metric", "mean_a", "mean_b",
        "n_a", "n_b", "nonfinite", "paired", "ratio", "ci95_low", "ci95_high", "ci_bonf_low", "ci_bonf_high",
        "p_value", "p_min", "p_holm", "p_holm_min", "verdict"]
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
assert float(same["ci95_low"]) == 1 and float(same["ci95_high"]) == 1, same
assert float(same["p_holm_min"]) < 0.05, same   # 6 x 2/256: a verdict was reachable
worse = by[("trig-iid", "positive-iid")]
assert worse["verdict"] == "a worse" and float(worse["p_holm"]) < 0.05, worse
assert float(worse["ratio"]) > 1 and float(worse["ci95_low"]) > 1, worse
assert worse["n_a"] == "8" and worse["n_b"] == "8", worse
assert worse["num_features_a"] == "32" and worse["num_features_b"] == "16", worse
rank = list(csv.DictReader(open(sys.argv[1].replace("comparisons", "ranking"), newline="")))
assert [r["variant"] for r in rank][-1] == "trig-iid", rank   # trig's error is the largest at scale 1
assert {r["variant"] for r in rank} == {"trig-iid", "positive-iid", "positive-copy", "uniform"}, rank
copy = {r["variant"]: r for r in rank}
assert copy["positive-iid"]["group"] == copy["positive-copy"]["group"], rank   # identical: one group
PY
"$favor" compare "$tmp/out" --summary > "$tmp/summary" 2> "$tmp/summary.err"
[ "$(wc -l < "$tmp/summary")" -eq 1 ] || fail "--summary: one line per cell: $(cat "$tmp/summary")"
grep -q "^L=128,d=8,m=16,scale=1 output_mse: best: .*; tied: .*; beat uniform: [0-3] of 3$" "$tmp/summary" ||
  fail "--summary line: $(cat "$tmp/summary")"

# 4 paired trials: the smallest sign-flip p is 2/16 > 0.05, so every row is underpowered, one
# warning line names the trials needed, and validate warns before the run.
verr=$("$favor" validate "$tmp/cmp.json" --set trials=4 2>&1 >/dev/null)
grep -q "warning: validate: with 4 trials no favor compare verdict is reachable" <<<"$verr" || fail "validate: $verr"
"$favor" validate "$tmp/cmp.json" --set trials=16 2>&1 >/dev/null | grep -q "no favor compare verdict" &&
  fail "validate warns with 16 trials"
"$favor" run "$tmp/cmp.json" --out "$tmp/four" --trials 4 --quiet
"$favor" compare "$tmp/four" > /dev/null 2> "$tmp/four.err"
[ "$(wc -l < "$tmp/four.err")" -eq 1 ] || fail "4 trials: one warning line: $(cat "$tmp/four.err")"
grep -q "6 of 6 rows underpowered.*trials per variant would reach it" "$tmp/four.err" || fail "4 trials: $(cat "$tmp/four.err")"
"$PY" - "$tmp/four/comparisons_output_mse.csv" <<'PY' || fail "4 trials: verdicts"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
assert rows and all(r["verdict"] == "underpowered" for r in rows), [r["verdict"] for r in rows]
assert all(float(r["p_min"]) == 0.125 for r in rows), rows
PY
# 16 trials: trig vs positive at scale 1 is significant.
"$favor" run "$tmp/cmp.json" --out "$tmp/sixteen" --trials 16 --quiet
"$favor" compare "$tmp/sixteen" > /dev/null
"$PY" - "$tmp/sixteen/comparisons_output_mse.csv" <<'PY' || fail "16 trials: trig vs positive, every pair"
import csv, sys
rows = {(r["a"], r["b"]): r for r in csv.DictReader(open(sys.argv[1], newline=""))}
r = rows[("trig-iid", "positive-iid")]
assert len(rows) == 6 and r["verdict"] == "a worse" and float(r["p_holm"]) < 0.05, r
PY
"$favor" compare "$tmp/sixteen" --pairs positive-iid:trig-iid > /dev/null
"$PY" - "$tmp/sixteen/comparisons_output_mse.csv" <<'PY' || fail "16 trials: --pairs"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
assert len(rows) == 1 and rows[0]["a"] == "positive-iid" and rows[0]["verdict"] == "a better", rows
assert float(rows[0]["p_holm"]) == float(rows[0]["p_value"]), rows   # a family of one
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
cmp -s "$tmp/first.csv" "$tmp/out/comparisons_output_mse.csv" || fail "a failed compare changed comparisons_output_mse.csv"

# Only regular files (issue 26 class 3): a FIFO errors.csv is refused without blocking, a
# symlink to /dev/zero is not read, a directory is named as one; results stay intact.
cp -r "$tmp/sixteen" "$tmp/hostile"
cp "$tmp/hostile/comparisons_output_mse.csv" "$tmp/hostile.before"
rm "$tmp/hostile/errors.csv"; mkfifo "$tmp/hostile/errors.csv"
err=$(timeout 10 "$favor" compare "$tmp/hostile" 2>&1 >/dev/null) && fail "FIFO accepted"
grep -q "errors.csv: is a FIFO, not a regular file" <<<"$err" || fail "FIFO: $err"
rm "$tmp/hostile/errors.csv"; ln -s /dev/zero "$tmp/hostile/errors.csv"
err=$(timeout 10 "$favor" compare "$tmp/hostile" 2>&1 >/dev/null) && fail "/dev/zero accepted"
grep -q "errors.csv: is a character device, not a regular file" <<<"$err" || fail "/dev/zero: $err"
rm "$tmp/hostile/errors.csv"; mkdir "$tmp/hostile/errors.csv"
expect_error directory "errors.csv: is a directory, not a regular file" compare "$tmp/hostile"
cp "$tmp/sixteen/errors.csv" "$tmp/hostile/summary.tmp"; rmdir "$tmp/hostile/errors.csv"
mv "$tmp/hostile/summary.tmp" "$tmp/hostile/errors.csv"; rm "$tmp/hostile/summary.csv"; mkfifo "$tmp/hostile/summary.csv"
err=$(timeout 10 "$favor" compare "$tmp/hostile" 2>&1 >/dev/null) && fail "FIFO summary.csv accepted"
grep -q "summary.csv: is a FIFO" <<<"$err" || fail "FIFO summary: $err"
cmp -s "$tmp/hostile.before" "$tmp/hostile/comparisons_output_mse.csv" || fail "a refused compare changed comparisons_output_mse.csv"
# nan / inf cells as favor writes them: counted per row, never dropped, never refused.
rm "$tmp/hostile/summary.csv"
awk -F, -v OFS=, 'NR > 1 && $1 == "positive-iid" && $9 == 2 { $11 = "nan" } NR > 1 && $1 == "trig-iid" && $9 == 5 { $11 = "inf" } 1' \
  "$tmp/sixteen/errors.csv" > "$tmp/hostile/errors.csv"
grep -q ",nan," "$tmp/hostile/errors.csv" && grep -q ",inf," "$tmp/hostile/errors.csv" || fail "nan cells not made"
"$favor" compare "$tmp/hostile" > /dev/null || fail "nan cells refused"
"$PY" - "$tmp/hostile/comparisons_output_mse.csv" <<'PY' || fail "nan cells"
import csv, sys
rows = {(r["a"], r["b"]): r for r in csv.DictReader(open(sys.argv[1], newline=""))}
r = rows[("trig-iid", "positive-iid")]
assert r["nonfinite"] == "a: 1 of 16; b: 1 of 16" and r["verdict"] == "non-finite" and r["p_value"] == "", r
r = rows[("positive-iid", "positive-copy")]
assert r["nonfinite"] == "a: 1 of 16" and r["n_a"] == "16", r
PY

# One pair of files per metric: comparing output_mse after attention_tv keeps attention_tv's.
"$favor" run "$tmp/cmp.json" --out "$tmp/two" --trials 8 --set 'metrics=["output_mse","attention_tv"]' --quiet
"$favor" compare "$tmp/two" --metric attention_tv > /dev/null
cp "$tmp/two/ranking_attention_tv.csv" "$tmp/tv.before"
"$favor" compare "$tmp/two" > /dev/null
for f in comparisons_attention_tv ranking_attention_tv comparisons_output_mse ranking_output_mse; do
  [ -s "$tmp/two/$f.csv" ] || fail "$f.csv missing"
done
[ -e "$tmp/two/comparisons.csv" ] && fail "comparisons.csv written"
cmp -s "$tmp/tv.before" "$tmp/two/ranking_attention_tv.csv" || fail "output_mse's compare replaced attention_tv's ranking"
grep -q ",attention_tv," "$tmp/two/comparisons_attention_tv.csv" && ! grep -q ",output_mse," "$tmp/two/comparisons_attention_tv.csv" ||
  fail "comparisons_attention_tv.csv holds other metrics"
# A link planted at an output: refused before anything is written, its target untouched.
echo keep > "$tmp/victim"
cp "$tmp/two/comparisons_output_mse.csv" "$tmp/mse.before"
rm "$tmp/two/ranking_output_mse.csv"; ln -s "$tmp/victim" "$tmp/two/ranking_output_mse.csv"
expect_error planted-link "ranking_output_mse.csv: is a symbolic link; favor writes its own files only as regular files" compare "$tmp/two"
[ "$(cat "$tmp/victim")" = keep ] || fail "compare wrote through a link"
cmp -s "$tmp/mse.before" "$tmp/two/comparisons_output_mse.csv" || fail "a refused compare changed comparisons_output_mse.csv"
ls "$tmp/two" | grep -q "\.tmp\." && fail "temporary file left behind"

# Scale-free: output_mse times 1e300 (no summary.csv: no baseline to scale) gives the same
# p-values and verdicts.
mkdir "$tmp/unit" "$tmp/huge"
cp "$tmp/sixteen/errors.csv" "$tmp/unit/errors.csv"
awk -F, -v OFS=, 'NR > 1 { $11 = sprintf("%.17g", $11 * 1e300) } 1' "$tmp/sixteen/errors.csv" > "$tmp/huge/errors.csv"
"$favor" compare "$tmp/unit" > /dev/null
"$favor" compare "$tmp/huge" > /dev/null
"$PY" - "$tmp/unit/comparisons_output_mse.csv" "$tmp/huge/comparisons_output_mse.csv" <<'PY' || fail "errors of 1e300"
import csv, sys
u, h = (list(csv.DictReader(open(f, newline=""))) for f in sys.argv[1:])
assert len(u) == len(h) == 3, (u, h)
for a, b in zip(u, h):
    assert [a[k] for k in ("a", "b", "p_value", "p_holm", "verdict")] == [b[k] for k in ("a", "b", "p_value", "p_holm", "verdict")], (a, b)
    assert abs(float(b["mean_a"]) / 1e300 / float(a["mean_a"]) - 1) < 1e-12, (a, b)
assert any(r["verdict"] == "a worse" for r in h), h
PY
# Garbage key cells (an edited table) and the baseline's name as a variant: refused.
awk -F, -v OFS=, 'NR == 3 { $4 = "12x8" } 1' "$tmp/sixteen/errors.csv" > "$tmp/unit/errors.csv"
expect_error garbage-L "errors.csv: line 3, column L: '12x8' is not a count" compare "$tmp/unit"
awk -F, -v OFS=, 'NR > 1 && $1 == "positive-copy" { $1 = "uniform" } 1' "$tmp/sixteen/errors.csv" > "$tmp/unit/errors.csv"
expect_error uniform-row "column variant: 'uniform' is not a variant name: must not be 'uniform'" compare "$tmp/unit"
sed 's/"name": "positive-copy"/"name": "uniform"/' "$tmp/cmp.json" > "$tmp/uniform.json"
expect_error uniform-config "uniform.json: variants[2].name: must not be 'uniform'" run "$tmp/uniform.json" --out "$tmp/never"
[ -e "$tmp/never" ] && fail "a refused run wrote its output"
echo "cli_compare: ok"
