#!/usr/bin/env bash
# Half dtypes from the command line (docs/design.md section 2.6): `run --dtype float16`
# writes overflow_fraction; `gen --dtype float16` writes float32 files whose values are
# float16 numbers; `apply --exact --dtype float16` is the emulated reference (close to
# float64, not equal); an unshifted positive map on keys sharing a direction overflows in
# float16 (apply exits 3 or its output is far off) and the shifted one does not.
set -euo pipefail
favor=$1; src=$2
py=/usr/bin/python3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat > "$tmp/c.json" <<JSON
{"name": "h", "inputs": {"source": "random", "L": 64, "d": 8, "scale": [0.5, 1]},
 "variants": [{"features": "positive", "projection": "orthogonal"},
              {"features": "positive", "projection": "orthogonal", "shift": false, "name": "positive-noshift"}],
 "m": 16, "trials": 2, "metrics": ["output_mse"]}
JSON
for dt in float16 bfloat16 float32; do
  "$favor" run "$tmp/c.json" --dtype "$dt" --out "$tmp/run-$dt" --quiet || fail "run --dtype $dt"
done
head -1 "$tmp/run-float16/errors.csv" | grep -q ',nonfinite,overflow_fraction$' || fail "float16 errors.csv has no overflow_fraction"
head -1 "$tmp/run-float32/errors.csv" | grep -q ',nonfinite$' || fail "float32 errors.csv columns changed"
grep -q '"dtype": "bfloat16"' "$tmp/run-bfloat16/run.json" || fail "run.json does not record bfloat16"

"$favor" gen --L 32 --d 8 --seed 4 --dtype float16 --out "$tmp/g16"
"$favor" gen --L 32 --d 8 --seed 4 --out "$tmp/g64"
"$favor" apply --q "$tmp/g16/q.npy" --k "$tmp/g16/k.npy" --v "$tmp/g16/v.npy" --exact --dtype float16 --out "$tmp/e16.npy"
"$favor" apply --q "$tmp/g64/q.npy" --k "$tmp/g64/k.npy" --v "$tmp/g64/v.npy" --exact --out "$tmp/e64.npy"
"$py" - "$tmp" <<'PY' || fail "gen/apply float16 values"
import sys, numpy as np
t = sys.argv[1]
for n in "qkv":
    a, b = np.load(f"{t}/g16/{n}.npy"), np.load(f"{t}/g64/{n}.npy")
    assert a.dtype == np.float32, a.dtype
    assert np.array_equal(a, a.astype(np.float16).astype(np.float32)), f"{n}: not float16 values"
    assert np.array_equal(a, b.astype(np.float32).astype(np.float16).astype(np.float32)), f"{n}: not the rounded inputs"
e16, e64 = np.load(f"{t}/e16.npy"), np.load(f"{t}/e64.npy")
assert np.array_equal(e16, e16.astype(np.float16).astype(np.float32)), "output not float16 values"
rel = np.linalg.norm(e16 - e64) / np.linalg.norm(e64)
assert 0 < rel < 1e-2, rel      # half rounding: ~1e-3 (tests/attention/test_half_attention.cpp derives the bound)
PY

# Keys along W's first row (the fixture of tests/attention/test_half_attention.cpp, through files).
"$favor" projection --projection orthogonal --m 64 --d 16 --seed 7 --out "$tmp/W.npy"
"$favor" gen --L 1024 --d 16 --scale 0.5 --seed 5 --out "$tmp/a"
"$py" - "$tmp" <<'PY'
import sys, numpy as np
t = sys.argv[1]
k = np.load(f"{t}/a/k.npy") + 2.0 * np.load(f"{t}/W.npy")[0]
np.save(f"{t}/a/k.npy", k)
PY
qkv=(--q "$tmp/a/q.npy" --k "$tmp/a/k.npy" --v "$tmp/a/v.npy" --features positive --m 64 --seed 7)
"$favor" apply "${qkv[@]}" --dtype float16 --out "$tmp/s16.npy" || fail "shifted positive in float16"
"$favor" apply "${qkv[@]}" --out "$tmp/s64.npy"
set +e
"$favor" apply "${qkv[@]}" --param shift=false --dtype float16 --out "$tmp/u16.npy" 2> "$tmp/err"
rc=$?
set -e
[ "$rc" = 0 ] || [ "$rc" = 3 ] || fail "apply --param shift=false exit $rc: $(cat "$tmp/err")"
"$py" - "$tmp" <<'PY' || fail "break / save"
import sys, numpy as np
t = sys.argv[1]
s16, s64, u16 = (np.load(f"{t}/{n}.npy") for n in ("s16", "s64", "u16"))
assert np.isfinite(s16).all()
assert np.linalg.norm(s16 - s64) / np.linalg.norm(s64) < 2e-2
bad = ~np.isfinite(u16).all() or np.linalg.norm(u16 - s64) / np.linalg.norm(s64) > 0.5
assert bad, "the unshifted map did not break"
PY
set +e
"$favor" run "$tmp/c.json" --dtype float8 --out "$tmp/x" 2> "$tmp/err"
rc=$?
set -e
[ "$rc" = 2 ] || fail "--dtype float8: exit $rc, not 2"
[ "$(wc -l < "$tmp/err")" = 1 ] && grep -q 'run: --dtype: must be float32, float64, float16 or bfloat16' "$tmp/err" ||
  fail "--dtype float8: $(cat "$tmp/err")"
echo "cli_half: ok"
