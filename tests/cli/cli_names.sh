#!/usr/bin/env bash
# Variant names are one CSV cell. A name with a comma, a double quote, a newline (or any
# control character) or '|' is refused with one line naming the field; any other printable
# name (spaces, quotes ', ;, parentheses, UTF-8) is written as is, and Python's csv module
# and pandas read every table back with the same names and numeric columns.
set -euo pipefail
favor=$1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
config() {   # NAME0 NAME1 -> c.json
  /usr/bin/python3 - "$1" "$2" > "$tmp/c.json" <<'PY'
import json, sys
print(json.dumps({"name": "names", "seed": 1,
  "inputs": {"source": "random", "L": 16, "d": 4, "scale": [0.5, 1.0]},
  "variants": [{"features": "positive", "projection": "orthogonal", "name": sys.argv[1]},
               {"features": "trig", "name": sys.argv[2]}],
  "m": [4, 8], "trials": 2, "metrics": ["output_mse", "attention_tv"]}))
PY
}
for bad in 'a,b' 'say "hi"' $'two\nlines' $'tab\there' 'a|b' $'bell\a'; do
  config "$bad" "trig-iid"
  set +e
  err=$("$favor" run "$tmp/c.json" --out "$tmp/bad" 2>&1); rc=$?
  set -e
  [ $rc -eq 2 ] && [ "$(wc -l <<<"$err")" = 1 ] && grep -q "c.json: variants\[0\].name: must" <<<"$err" &&
    [ ! -e "$tmp/bad" ] || fail "name [$bad]: rc=$rc [$err]"
done
names=("pos orth (A=1/8)" "trig 'iid'; v2 α")
config "${names[@]}"
"$favor" run "$tmp/c.json" --out "$tmp/run" --quiet
for k in 0 1 2; do "$favor" run "$tmp/c.json" --shard $k/3 --out "$tmp/s$k" --quiet; done
"$favor" merge "$tmp/merged" "$tmp"/s{2,0,1} --quiet
cmp "$tmp/run/errors.csv" "$tmp/merged/errors.csv" || fail "merge with these names differs"
"$favor" compare "$tmp/run" > /dev/null
/usr/bin/python3 - "$tmp/run" "${names[@]}" <<'PY'
import csv, sys
import pandas as pd
d, names = sys.argv[1], sys.argv[2:]
for f in ["errors.csv", "summary.csv", "comparisons_output_mse.csv"]:
    with open(f"{d}/{f}", newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert all(len(r) == len(rows[0]) for r in rows), f"{f}: ragged rows"
    df = pd.read_csv(f"{d}/{f}", keep_default_na=False)
    assert len(df) == len(rows) - 1, f
    col = "a" if f.startswith("comparisons") else "variant"
    got = list(dict.fromkeys(df[col]))
    assert got == names, f"{f}: {got} != {names}"
df = pd.read_csv(f"{d}/errors.csv")
for c in ["L", "d", "m", "num_features", "trial", "seed", "output_mse", "attention_tv", "nonfinite"]:
    assert pd.api.types.is_numeric_dtype(df[c]), c
s = pd.read_csv(f"{d}/summary.csv")
assert pd.api.types.is_float_dtype(s["output_mse_mean"]) and len(s) == 8
PY
echo "cli_names: ok"
