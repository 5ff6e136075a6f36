#!/usr/bin/env bash
# The linear-attention baselines elu, dpfp and nystrom end to end: `favor apply` (with
# --param, causal for elu and dpfp) against numpy implementations; a run on .npy inputs equals
# the run on the same random inputs; sharded runs merge byte for byte; plot.py and compare
# read the tables; bad flags and configs exit 2 with one line.
set -euo pipefail
favor=$1; src=$2
py=/usr/bin/python3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$favor" gen --L 128 --d 8 --dv 4 --scale 0.7 --seed 3 --out "$tmp/in"
qkv=(--q "$tmp/in/q.npy" --k "$tmp/in/k.npy" --v "$tmp/in/v.npy")
"$favor" apply "${qkv[@]}" --exact --out "$tmp/exact.npy"
"$favor" apply "${qkv[@]}" --exact --causal --out "$tmp/exact_c.npy"
"$favor" apply "${qkv[@]}" --features elu --out "$tmp/elu.npy"
"$favor" apply "${qkv[@]}" --features elu --causal --out "$tmp/elu_c.npy"
"$favor" apply "${qkv[@]}" --features dpfp --param nu=2 --out "$tmp/dpfp.npy"
"$favor" apply "${qkv[@]}" --features dpfp --param nu=2 --causal --out "$tmp/dpfp_c.npy"
"$favor" apply "${qkv[@]}" --features nystrom --m 16 --out "$tmp/ny16.npy"
"$favor" apply "${qkv[@]}" --features nystrom --m 16 --param iterations=40 --out "$tmp/ny16_40.npy"
"$favor" apply "${qkv[@]}" --features nystrom --m 128 --param pinv=exact --out "$tmp/ny_full.npy"
"$favor" apply "${qkv[@]}" --features nystrom --m 16 --dtype float32 --out "$tmp/ny16_f32.npy"
"$py" - "$tmp" <<'PY'
import sys, numpy as np
t = sys.argv[1]
q, k, v = (np.load(f"{t}/in/{n}.npy") for n in "qkv")
L, d = q.shape; x = q / d**0.25; y = k / d**0.25
def sm(s): s = s - s.max(-1, keepdims=True); e = np.exp(s); return e / e.sum(-1, keepdims=True)
def linear(pq, pk, causal):
    a = pq @ pk.T
    if causal: a = np.tril(a)
    return (a / a.sum(1, keepdims=True)) @ v
elu = lambda z: np.where(z > 0, z + 1, np.exp(z))
def dpfp(z, nu):
    r = np.concatenate([np.maximum(z, 0), np.maximum(-z, 0)], -1)
    return np.concatenate([r * np.roll(r, s, axis=-1) for s in range(1, nu + 1)], -1)
def close(name, ref, rtol=1e-10):
    out = np.load(f"{t}/{name}.npy")
    assert out.shape == ref.shape, (name, out.shape)
    err = np.abs(out - ref).max() / np.abs(ref).max()
    assert err < rtol, (name, err)
close("elu", linear(elu(x), elu(y), False)); close("elu_c", linear(elu(x), elu(y), True))
close("dpfp", linear(dpfp(x, 2), dpfp(y, 2), False)); close("dpfp_c", linear(dpfp(x, 2), dpfp(y, 2), True))
def itinv(K, n):
    I = np.eye(len(K)); Z = K.T / (np.abs(K).sum(0).max() * np.abs(K).sum(1).max())
    for _ in range(n):
        KZ = K @ Z; Z = 0.25 * Z @ (13 * I - KZ @ (15 * I - KZ @ (7 * I - KZ)))
    return Z
def nystrom(m, n):
    ql = x.reshape(m, L // m, d).mean(1); kl = y.reshape(m, L // m, d).mean(1)
    return sm(x @ kl.T) @ itinv(sm(ql @ kl.T), n) @ (sm(ql @ y.T) @ v)
close("ny16", nystrom(16, 6)); close("ny16_40", nystrom(16, 40))
close("ny_full", sm(x @ y.T) @ v, 1e-8)                    # m = L, exact pinv: exact attention
close("ny16_f32", nystrom(16, 6), 1e-4)
assert np.load(f"{t}/ny16_f32.npy").dtype == np.float32
exact = np.load(f"{t}/exact.npy")
assert np.abs(exact - sm(x @ y.T) @ v).max() < 1e-12
PY

# Runs: random inputs and the same tensors as .npy give the same rows (scale column aside).
cat > "$tmp/c.json" <<'JSON'
{"name": "bl", "seed": 3, "inputs": {"source": "random", "L": 128, "d": 8, "d_v": 4, "scale": 0.7},
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "elu"},
              {"features": "dpfp", "nu": 2}, {"features": "nystrom"}],
 "m": [8, 16], "trials": 2}
JSON
"$favor" run "$tmp/c.json" --out "$tmp/run" --quiet
"$py" - "$tmp" <<'PY'
import csv, sys, numpy as np
t = sys.argv[1]
rows = list(csv.DictReader(open(f"{t}/run/errors.csv")))
by = lambda var, m, tr: [r for r in rows if r["variant"] == var and r["m"] == m and r["trial"] == tr][0]
for var in ("elu", "dpfp", "nystrom"):
    r = by(var, "16", "0")
    assert r["projection"] == "", r
    assert r["kernel_mse_theory"] == "", r
    # deterministic: every trial gives the same numbers
    assert {k: v for k, v in r.items() if k not in ("trial",)} == {k: v for k, v in by(var, "16", "1").items() if k not in ("trial",)}
for var in ("elu", "dpfp"):   # m does not matter: rows repeat across m
    a, b = by(var, "8", "0"), by(var, "16", "0")
    assert all(a[c] == b[c] for c in ("output_mse", "attention_mse", "kernel_mse")), (a, b)
ny = by("nystrom", "16", "0")
assert ny["kernel_mse"] == "" and float(ny["output_mse"]) > 0, ny   # no kernel: no kernel_mse
# output_mse of the nystrom row equals the apply output's
mse = float(np.mean((np.load(f"{t}/ny16.npy") - np.load(f"{t}/exact.npy")) ** 2))
assert abs(mse - float(ny["output_mse"])) <= 1e-12 * mse, (mse, ny["output_mse"])
PY
cp "$tmp/in/"*.npy "$tmp/run/"
sed 's/"inputs": {[^}]*}/"inputs": {"source": "npy", "q": "q.npy", "k": "k.npy", "v": "v.npy"}/' "$tmp/c.json" > "$tmp/run/npy.json"
"$favor" run "$tmp/run/npy.json" --out "$tmp/npyrun" --quiet
cut -d, -f1-7,9- "$tmp/run/errors.csv" > "$tmp/a.csv"; cut -d, -f1-7,9- "$tmp/npyrun/errors.csv" > "$tmp/b.csv"
cmp "$tmp/a.csv" "$tmp/b.csv" || fail "npy run differs from random run"
# Causal runs: elu and dpfp.
"$favor" run "$tmp/c.json" --set causal=true --set 'variants=[{"features": "elu"}, {"features": "dpfp"}]' \
  --out "$tmp/causal" --quiet
[ "$(($(wc -l < "$tmp/causal/errors.csv") - 1))" -eq 8 ] || fail "causal rows"

# Shards merge byte for byte; plot.py and compare read the tables.
for s in 0 1 2; do "$favor" run "$tmp/c.json" --shard $s/3 --out "$tmp/s$s" --quiet; done
"$favor" merge "$tmp/merged" "$tmp/s1" "$tmp/s2" "$tmp/s0" --quiet
cmp "$tmp/run/errors.csv" "$tmp/merged/errors.csv" || fail "merged errors.csv differs"
cmp "$tmp/run/summary.csv" "$tmp/merged/summary.csv" || fail "merged summary.csv differs"
if "$py" -c 'import matplotlib' 2>/dev/null; then
  "$py" "$src/scripts/plot.py" "$tmp/run" --out "$tmp/bl.png" >/dev/null || fail "plot.py"
  [ -s "$tmp/bl.png" ] || fail "no PNG"
  "$py" "$src/scripts/plot.py" "$tmp/run" --metric kernel_mse --out "$tmp/k.png" >/dev/null 2>&1 || fail "plot.py kernel_mse"
fi
"$favor" compare "$tmp/run" --metric all > /dev/null || fail "compare"

# Bad flags and configs: exit 2, one line, nothing written.
expect_error() {
  local name=$1 expect=$2; shift 2
  local err rc
  set +e; err=$("$favor" "$@" 2>&1 >/dev/null); rc=$?; set -e
  local lines; lines=$(printf '%s' "$err" | grep -c '^' || true)
  [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && grep -qF -- "$expect" <<<"$err" || fail "$name: rc=$rc [$err] expected [$expect]"
  [ ! -e "$tmp/x.npy" ] && [ ! -e "$tmp/xout" ] || fail "$name: output written"
}
expect_error elu-projection "apply: --projection: does not apply to 'elu' (it uses no random projection)" \
  apply "${qkv[@]}" --features elu --projection iid --out "$tmp/x.npy"
expect_error elu-m "apply: --m: does not apply to 'elu'" apply "${qkv[@]}" --features elu --m 16 --out "$tmp/x.npy"
expect_error nystrom-m "apply: --m: missing" apply "${qkv[@]}" --features nystrom --out "$tmp/x.npy"
expect_error nystrom-causal "apply: --causal: 'nystrom' has no causal form" \
  apply "${qkv[@]}" --features nystrom --m 8 --causal --out "$tmp/x.npy"
expect_error nystrom-big-m "apply: --m: 'nystrom' takes m landmarks" \
  apply "${qkv[@]}" --features nystrom --m 256 --out "$tmp/x.npy"
expect_error nu-big "apply: --param nu: must be <= 2d - 1 = 15" \
  apply "${qkv[@]}" --features dpfp --param nu=16 --out "$tmp/x.npy"
expect_error nu-text "apply: --param nu: must be an integer" apply "${qkv[@]}" --features dpfp --param nu=two --out "$tmp/x.npy"
expect_error param-other-map "apply: --param nu: applies only to features 'dpfp'" \
  apply "${qkv[@]}" --features elu --param nu=2 --out "$tmp/x.npy"
expect_error param-format "apply: --param: expected KEY=VALUE" apply "${qkv[@]}" --features dpfp --param nu --out "$tmp/x.npy"
expect_error param-own-flag "apply: --param A: use --A" apply "${qkv[@]}" --features oprf --m 8 --param A=0 --out "$tmp/x.npy"
expect_error pinv "apply: --param pinv: must be \"iterative\"" \
  apply "${qkv[@]}" --features nystrom --m 8 --param pinv=svd --out "$tmp/x.npy"
printf '%s' '{"name": "n", "inputs": {"source": "npy", "q": "q.npy", "k": "k.npy", "v": "v.npy"}, "variants": [{"features": "nystrom"}], "m": 256}' > "$tmp/run/big.json"
expect_error npy-big-m "big.json: m: 'nystrom' takes m landmarks" run "$tmp/run/big.json" --out "$tmp/xout"
# Cross-attention files (k shorter than q): inputs.L cuts q, the run keeps every key (key_rows),
# and validate checks m against those keys as the run does (it took Lk = inputs.L before).
"$py" -c "import numpy as np; r = np.random.default_rng(1)
for n, rows, c in (('q', 40, 8), ('k', 20, 8), ('v', 20, 4)): np.save('$tmp/run/x' + n + '.npy', r.normal(size=(rows, c)))"
printf '%s' '{"name": "x", "inputs": {"source": "npy", "q": "xq.npy", "k": "xk.npy", "v": "xv.npy", "L": [32]}, "variants": [{"features": "nystrom"}], "m": 30}' > "$tmp/run/cross.json"
expect_error npy-cross-m "cross.json: m: 'nystrom' takes m landmarks, means of m segments of the rows, so m <= L; got m = 30 with Lk = 20" \
  validate "$tmp/run/cross.json"
expect_error causal-config "c.json: causal: 'nystrom' (variants[3]) has no causal form" \
  run "$tmp/c.json" --set causal=true --out "$tmp/xout"
expect_error projection-config "c.json: variants[1].projection: does not apply to 'elu'" \
  run "$tmp/c.json" --set 'variants.1.projection="iid"' --out "$tmp/xout"
echo "cli_baselines: ok"
