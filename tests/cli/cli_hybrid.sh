#!/usr/bin/env bash
# Hybrids (docs/design.md 2.8) end to end: `favor apply --window --sinks` on data/'s heads
# (layer 0, 2 heads, L = 1024, d = 64, causal) equals an independent numpy implementation
# given favor's W to float64 rounding, features none equals windowed softmax, float32 is near
# float64, `apply --grad` with a hybrid writes dq, dk, dv (features none: masked softmax's
# gradient in numpy), `compare --match num_features` ranks hybrids with their w + s columns, and bad
# hybrid input is exit 2 with one line naming the flag or field.
set -euo pipefail
favor=$1; src=$2
py=/usr/bin/python3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
qkv=(--q "$src/data/layer0/q.npy" --k "$src/data/layer0/k.npy" --v "$src/data/layer0/v.npy")

"$favor" projection --projection orthogonal --m 48 --d 64 --seed 3 --trial 2 --out "$tmp/W.npy"
"$favor" apply "${qkv[@]}" --causal --features positive --projection orthogonal --m 48 --seed 3 --trial 2 \
  --window 16 --sinks 4 --out "$tmp/hyb.npy"
"$favor" apply "${qkv[@]}" --causal --features positive --projection orthogonal --m 48 --seed 3 --trial 2 \
  --window 16 --sinks 4 --dtype float32 --out "$tmp/hyb32.npy"
"$favor" apply "${qkv[@]}" --features positive --projection orthogonal --m 48 --seed 3 --trial 2 \
  --window 16 --sinks 4 --out "$tmp/hyb_nc.npy"
"$favor" apply "${qkv[@]}" --causal --features none --window 16 --sinks 4 --out "$tmp/none.npy"
"$py" - "$src" "$tmp" <<'PY'
import sys, numpy as np
src, t = sys.argv[1:]
q, k, v = (np.load(f"{src}/data/layer0/{n}.npy").astype(np.float64)[0] for n in "qkv")
W = np.load(f"{t}/W.npy")
H, L, d = q.shape
i, j = np.arange(L)[:, None], np.arange(L)[None, :]
def hybrid(x, y, vv, causal, w, s, remainder):
    x, y = x / d**0.25, y / d**0.25
    S = x @ y.T
    visible = (j <= i) if causal else np.ones((L, L), bool)
    exact = (((i - j < w) & (j <= i)) if causal else (np.abs(i - j) < w)) | (j < s)
    exact &= visible
    phi = lambda z: np.exp(z @ W.T - (z * z).sum(1, keepdims=True) / 2) / np.sqrt(W.shape[0])
    far = phi(x) @ phi(y).T if remainder else np.zeros((L, L))
    Kh = np.where(exact, np.exp(S), np.where(visible, far, 0.0))
    return (Kh @ vv) / Kh.sum(1, keepdims=True)
hyb, hyb32, hyb_nc, none = (np.load(f"{t}/{n}.npy") for n in ("hyb", "hyb32", "hyb_nc", "none"))
assert hyb.shape == (1, H, L, v.shape[-1]) and hyb.dtype == np.float64
for h in range(H):
    for got, causal, rem in ((hyb, True, True), (hyb_nc, False, True), (none, True, False)):
        ref = hybrid(q[h], k[h], v[h], causal, 16, 4, rem)
        err = np.abs(got[0, h] - ref).max() / np.abs(ref).max()
        assert err < 1e-12, (h, causal, rem, err)
    err32 = np.abs(hyb32[0, h] - hyb[0, h]).max() / np.abs(hyb[0, h]).max()
    assert err32 < 1e-4, err32
PY

# apply --grad with a hybrid (2.8): dq, dk, dv beside the output with q, k, v's shapes; for
# features none (window and sinks alone) they equal masked softmax's gradient written in numpy.
"$py" - "$src" "$tmp" <<'PY'
import sys, numpy as np
src, t = sys.argv[1:]
q = np.load(f"{src}/data/layer0/q.npy")
np.save(f"{t}/g.npy", np.random.default_rng(4).standard_normal(q.shape[:-1] + (np.load(f"{src}/data/layer0/v.npy").shape[-1],)))
PY
mkdir "$tmp/gp" "$tmp/gn"
"$favor" apply "${qkv[@]}" --causal --features positive --m 8 --window 4 --sinks 1 --grad "$tmp/g.npy" \
  --out "$tmp/gp/out.npy"
"$favor" apply "${qkv[@]}" --causal --features none --window 4 --sinks 1 --grad "$tmp/g.npy" --out "$tmp/gn/out.npy"
"$py" - "$src" "$tmp" <<'PY'
import sys, numpy as np
src, t = sys.argv[1:]
q, k, v = (np.load(f"{src}/data/layer0/{n}.npy").astype(np.float64) for n in "qkv")
G = np.load(f"{t}/g.npy")
L, d = q.shape[-2], q.shape[-1]
for sub in ("gp", "gn"):
    for n, x in (("dq", q), ("dk", k), ("dv", v)):
        a = np.load(f"{t}/{sub}/out_{n}.npy")
        assert a.shape == x.shape and np.isfinite(a).all() and np.abs(a).sum() > 0, (sub, n, a.shape)
i, j = np.arange(L)[:, None], np.arange(L)[None, :]
mask = (j <= i) & ((i - j < 4) | (j < 1))
for h in range(q.shape[1]):
    Q, K, V, g = q[0, h], k[0, h], v[0, h], G[0, h]
    S = np.where(mask, Q @ K.T / np.sqrt(d), -np.inf)
    A = np.exp(S - S.max(1, keepdims=True)); A /= A.sum(1, keepdims=True)
    O = A @ V
    dS = A * (g @ V.T - (g * O).sum(1, keepdims=True))
    ref = {"dq": dS @ K / np.sqrt(d), "dk": dS.T @ Q / np.sqrt(d), "dv": A.T @ g}
    for n, r in ref.items():
        got = np.load(f"{t}/gn/out_{n}.npy")[0, h]
        err = np.abs(got - r).max() / np.abs(r).max()
        assert err < 1e-12, (h, n, err)
PY

# Equal columns: num_features 64 gives positive m = 64, positive+w16+s4 m = 44, none+w64 its
# own 64; compare ranks all three at 64 columns.
cat > "$tmp/c.json" <<'JSON'
{"name": "h", "seed": 2, "inputs": {"source": "random", "L": 160, "d": 8, "scale": 1.5}, "causal": true,
 "variants": [{"features": "positive"}, {"features": "positive", "window": 16, "sinks": 4},
              {"features": "none", "window": 64}],
 "num_features": [64], "trials": 3, "metrics": ["output_rel_error"]}
JSON
"$favor" run "$tmp/c.json" --out "$tmp/run" --quiet
"$py" - "$tmp/run/errors.csv" <<'PY'
import sys, csv
rows = list(csv.DictReader(open(sys.argv[1])))
got = {(r["variant"], r["m"], r["num_features"]) for r in rows}
assert got == {("positive-iid", "64", "64"), ("positive-iid+w16+s4", "44", "64"), ("none+w64", "0", "64")}, got
PY
"$favor" compare "$tmp/run" --match num_features --metric output_rel_error > "$tmp/cmp.txt"
grep -q "positive-iid+w16+s4" "$tmp/cmp.txt" || fail "compare does not list the hybrid"
grep -q "none+w64" "$tmp/cmp.txt" || fail "compare does not list window-only"
# Non-causal, the same variants: a window of w holds 2w - 1 keys an interior row (|i - j| < w),
# so positive+w16+s4 spends 31 + 4 of 64 columns (m = 29) and none+w32 is a 63-column variant.
sed -e 's/"causal": true/"causal": false/' -e 's/"window": 64/"window": 32/' "$tmp/c.json" > "$tmp/nc.json"
"$favor" run "$tmp/nc.json" --out "$tmp/nc" --quiet
"$py" - "$tmp/nc/errors.csv" <<'PY'
import sys, csv
rows = list(csv.DictReader(open(sys.argv[1])))
got = {(r["variant"], r["m"], r["num_features"]) for r in rows}
assert got == {("positive-iid", "64", "64"), ("positive-iid+w16+s4", "29", "64"), ("none+w32", "0", "63")}, got
PY

failures=0
expect_error() {
  local name=$1 expect=$2; shift 2
  local err rc
  err=$("$favor" "$@" 2>&1 >/dev/null) && rc=0 || rc=$?
  local lines; lines=$(printf '%s' "$err" | grep -c '^' || true)
  if [ "$rc" -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -qF -- "$expect" <<<"$err"; then
    echo "FAIL $name: rc=$rc lines=$lines stderr=[$err] expected [$expect]" >&2; failures=$((failures + 1))
  fi
  if [ -e "$tmp/out" ]; then echo "FAIL $name: output left behind" >&2; failures=$((failures + 1)); rm -rf "$tmp/out"; fi
}
cfg() { printf '%s' "$2" > "$tmp/$1.json"; echo "$tmp/$1.json"; }
expect_error window-negative "apply: --window:" apply "${qkv[@]}" --features positive --m 8 --window -1 --out "$tmp/out"
# Blanks around a key count are refused as by every integer flag (issue 56), not read as 3.
expect_error window-blank "apply: --window: ' 3' is not an integer" apply "${qkv[@]}" --features positive --m 8 --window ' 3' --out "$tmp/out"
expect_error sinks-blank "apply: --sinks: '2 ' is not an integer" apply "${qkv[@]}" --features positive --m 8 --sinks '2 ' --out "$tmp/out"
# Over the memory budget, window-only softmax is told what to lower: not --m, which it has none of.
expect_error none-budget "lower --window or --sinks" apply "${qkv[@]}" --features none --window 512 --max-memory 1M --out "$tmp/out"
expect_error none-alone "apply: --features: 'none' needs" apply "${qkv[@]}" --features none --out "$tmp/out"
expect_error window-exact "apply: --window: applies to --features only" apply "${qkv[@]}" --exact --window 4 --out "$tmp/out"
expect_error topk-no-window "apply: --window: must be >= 1" apply "${qkv[@]}" --features positive --m 8 --support topk --out "$tmp/out"
expect_error grad-eps "apply: --grad: 'positive' has no gradient" apply "${qkv[@]}" --features positive --m 8 \
  --epsilon 1e-6 --window 4 --grad "$tmp/g.npy" --out "$tmp/out"
expect_error nystrom "apply: --window: does not apply to 'nystrom'" apply "${qkv[@]}" --features nystrom --m 8 --window 4 --out "$tmp/out"
expect_error kernel "variants[0].window: hybrids (window, sinks) run in approximation and timing experiments only" \
  run "$(cfg k '{"name": "k", "experiment": "kernel", "d": 4, "m": 4, "norm": [0.5], "angle": [0.0, 1.0], "trials": 2, "variants": [{"features": "positive", "window": 4}]}')" --out "$tmp/out"
expect_error timing-backward "variants[0].window: hybrids have no backward pass" \
  run "$(cfg t '{"name": "t", "experiment": "timing", "backward": true, "inputs": {"source": "random", "L": 64, "d": 8}, "variants": [{"features": "positive", "window": 4}], "m": 8}')" --out "$tmp/out"
expect_error budget "num_features: 16 columns: 'positive-iid+w16' (variants[0]) spends 31 on its window and sinks (a non-causal window of w holds 2w - 1 keys)" \
  run "$(cfg b '{"name": "b", "inputs": {"source": "random", "L": 64, "d": 8}, "variants": [{"features": "positive", "window": 16}], "num_features": [16, 32]}')" --out "$tmp/out"
# Window-only, non-causal, fewer keys than queries, no sinks: rows past Lk + w - 1 would see no
# key (0/0); refused up front by apply, validate and run, naming the rows (docs/design.md 2.8).
"$py" -c "import numpy as np; r = np.random.default_rng(2)
for n, rows, c in (('q', 40, 8), ('k', 20, 8), ('v', 20, 4)): np.save('$tmp/e' + n + '.npy', r.normal(size=(rows, c)))"
short=(--q "$tmp/eq.npy" --k "$tmp/ek.npy" --v "$tmp/ev.npy")
expect_error empty-rows "apply: --window: features none, window 8 and no sinks: query rows 27 to 39 have no key within the window (Lk = 20)" \
  apply "${short[@]}" --features none --window 8 --out "$tmp/out"
"$favor" apply "${short[@]}" --features none --window 21 --out "$tmp/e21.npy" || fail "window 21 covers every row, refused"
"$favor" apply "${short[@]}" --features none --window 8 --sinks 1 --out "$tmp/es.npy" || fail "a sink gives every row a key, refused"
ecfg=$(cfg e '{"name": "e", "inputs": {"source": "npy", "q": "eq.npy", "k": "ek.npy", "v": "ev.npy", "L": [24, 40]}, "variants": [{"features": "none", "window": 8}], "m": 4}')
expect_error empty-rows-validate "e.json: variants[0].window: features none, window 8 and no sinks: query rows 27 to 39" validate "$ecfg"
expect_error empty-rows-run "e.json: variants[0].window: features none, window 8 and no sinks: query rows 27 to 39" run "$ecfg" --out "$tmp/out"
[ "$failures" -eq 0 ] || exit 1
echo "cli_hybrid: ok"
