#!/usr/bin/env bash
# Tensors in and out: `gen` + `projection` + `apply` reproduce a run's output_mse; a run on
# .npy inputs (heads, float32, Fortran order) equals the run on random inputs; every
# malformed .npy in tests/data/npy_bad is exit 2 with one line and no output left behind.
set -euo pipefail
favor=$1; src=$2
py=/usr/bin/python3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat > "$tmp/c.json" <<'JSON'
{"name": "rt", "seed": 9, "inputs": {"source": "random", "L": 200, "d": 8, "d_v": 5, "scale": 0.7},
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig", "projection": "iid"}],
 "m": 16, "trials": 2, "metrics": ["output_mse"]}
JSON
"$favor" run "$tmp/c.json" --out "$tmp/run" --quiet
"$favor" gen --L 200 --d 8 --dv 5 --scale 0.7 --seed 9 --out "$tmp/in"
"$favor" projection --projection orthogonal --m 16 --d 8 --seed 9 --trial 1 --out "$tmp/W.npy"
"$favor" apply --q "$tmp/in/q.npy" --k "$tmp/in/k.npy" --v "$tmp/in/v.npy" --exact --out "$tmp/exact.npy"
"$favor" apply --q "$tmp/in/q.npy" --k "$tmp/in/k.npy" --v "$tmp/in/v.npy" --features positive \
  --projection orthogonal --m 16 --seed 9 --trial 1 --out "$tmp/approx.npy"
"$py" - "$tmp" <<'PY'
import sys, csv, numpy as np
t = sys.argv[1]
q, k, v, W = (np.load(f"{t}/{n}.npy") for n in ("in/q", "in/k", "in/v", "W"))
exact, approx = np.load(f"{t}/exact.npy"), np.load(f"{t}/approx.npy")
assert exact.shape == (200, 5) and approx.shape == (200, 5) and exact.dtype == np.float64
rows = list(csv.DictReader(open(f"{t}/run/errors.csv")))
row = [r for r in rows if r["variant"] == "positive-orthogonal" and r["trial"] == "1"][0]
mse = float(np.mean((exact - approx) ** 2))
assert abs(mse - float(row["output_mse"])) <= 1e-12 * mse, (mse, row["output_mse"])
# Independent numpy implementation of FAVOR+ with favor's W: same output.
d = q.shape[1]; x = q / d**0.25; y = k / d**0.25
def phi(z): return np.exp(z @ W.T - (z * z).sum(1, keepdims=True) / 2) / np.sqrt(W.shape[0])
pq, pk = phi(x), phi(y)
out = (pq @ (pk.T @ v)) / (pq @ pk.sum(0))[:, None]
assert np.allclose(out, approx, rtol=1e-10, atol=1e-12), np.abs(out - approx).max()
s = np.exp(x @ y.T); ref = (s / s.sum(1, keepdims=True)) @ v
assert np.allclose(ref, exact, rtol=1e-12, atol=1e-14)
# Multi-head, float32, Fortran order: heads of one (2, 3, L, d) array.
rng = np.random.default_rng(0)
for name, dt in (("q", np.float32), ("k", np.float32), ("v", np.float64)):
    a = rng.standard_normal((2, 3, 64, 8 if name != "v" else 4)).astype(dt)
    np.save(f"{t}/h{name}.npy", np.asfortranarray(a))
PY
"$favor" apply --q "$tmp/hq.npy" --k "$tmp/hk.npy" --v "$tmp/hv.npy" --exact --dtype float32 --out "$tmp/hout.npy"
"$py" -c "
import numpy as np; o = np.load('$tmp/hout.npy'); assert o.shape == (2, 3, 64, 4) and o.dtype == np.float32, (o.shape, o.dtype)
q, k, v = (np.load('$tmp/h%s.npy' % n).astype(np.float64) for n in 'qkv')
s = np.exp(q @ k.swapaxes(-1, -2) / np.sqrt(8)); ref = (s / s.sum(-1, keepdims=True)) @ v
assert np.abs(ref - o).max() < 1e-5, np.abs(ref - o).max()"

# A run on .npy inputs (paths relative to the config) equals the run on the same random inputs.
cp "$tmp/in/"*.npy "$tmp/run/"
sed 's/"inputs": {[^}]*}/"inputs": {"source": "npy", "q": "q.npy", "k": "k.npy", "v": "v.npy"}/' "$tmp/c.json" > "$tmp/run/npy.json"
"$favor" run "$tmp/run/npy.json" --out "$tmp/npyrun" --quiet
cut -d, -f1-7,9- "$tmp/run/errors.csv" > "$tmp/a.csv"; cut -d, -f1-7,9- "$tmp/npyrun/errors.csv" > "$tmp/b.csv"
cmp "$tmp/a.csv" "$tmp/b.csv" || fail "npy run differs from random run"
# Per-head rows.
"$favor" run "$tmp/run/npy.json" --set inputs.q="\"$tmp/hq.npy\"" --set inputs.k="\"$tmp/hk.npy\"" \
  --set inputs.v="\"$tmp/hv.npy\"" --set inputs.per_head=true --out "$tmp/heads" --quiet
[ "$(($(wc -l < "$tmp/heads/errors.csv") - 1))" -eq $((2 * 2 * 6)) ] || fail "per_head rows"
head -1 "$tmp/heads/errors.csv" | grep -q ",head,trial," || fail "per_head column"

# Malformed files: exit 2, one line naming the file, no output directory.
n=0
for bad in "$src"/tests/data/npy_bad/*.npy "$src"/tests/data/npy_nan/*.npy; do
  [ -e "$bad" ] || continue
  n=$((n + 1))
  set +e
  err=$("$favor" run "$tmp/run/npy.json" --set inputs.q="\"$bad\"" --out "$tmp/badout" 2>&1 >/dev/null); rc=$?
  set -e
  lines=$(printf '%s' "$err" | grep -c '^' || true)
  [ $rc -eq 2 ] && [ "$lines" -eq 1 ] && grep -qF "$(basename "$bad")" <<<"$err" || fail "$bad: rc=$rc [$err]"
  [ ! -e "$tmp/badout" ] || fail "$bad: output directory created"
done
[ $n -ge 40 ] || fail "only $n malformed inputs in the corpus"
# Shape mismatches and causal length mismatch.
set +e
err=$("$favor" apply --q "$tmp/hq.npy" --k "$tmp/in/k.npy" --v "$tmp/in/v.npy" --exact --out "$tmp/x.npy" 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && grep -q "does not match the shape" <<<"$err" && [ ! -e "$tmp/x.npy" ] || fail "shape mismatch: rc=$rc [$err]"
echo "cli_npy: ok ($n malformed inputs)"
