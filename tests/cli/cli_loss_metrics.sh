#!/usr/bin/env bash
# The loss-aware errors (issue 55 item 5; docs/design.md section 3) against numpy: loss_delta
# = sum over i, c of G_ic (Out_hat - Out)_ic, loss_delta_abs = |loss_delta|, both per head and
# summed over heads, and output_rel_error_read (the rows G reads), for FAVOR+ (its Out_hat from
# `favor apply` at the run's seed and trial) and for the uniform baseline (Out_hat the mean of
# the visible values), causal, per head and combined; non-causal with Lk != L on a hybrid (window
# + features); a G of zeros leaves output_rel_error_read blank; query_rows with them is refused in
# one line, exit 2.
set -euo pipefail
favor=$1; src=$2
py=/usr/bin/python3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
"$py" - "$tmp" <<'PY'
import sys, numpy as np
t, rng = sys.argv[1], np.random.default_rng(5)
H, L, d, dv = 2, 40, 8, 4
for n, c in (("q", d), ("k", d), ("v", dv)):
    np.save(f"{t}/{n}.npy", 0.6 * rng.standard_normal((H, L, c)))
g = rng.standard_normal((H, L, dv))
g[:, :10] = 0.0   # the loss reads rows 10..39 only (an MQAR model reads its query positions)
g[:, 25:30] = 0.0
np.save(f"{t}/g.npy", g)
np.save(f"{t}/zeros.npy", np.zeros((H, L, dv)))
PY
cat > "$tmp/c.json" <<'JSON'
{"name": "loss", "seed": 7, "causal": true,
 "inputs": {"source": "npy", "q": "q.npy", "k": "k.npy", "v": "v.npy", "grad": "g.npy", "per_head": true},
 "variants": [{"features": "positive"}], "m": [16], "trials": 2,
 "metrics": ["loss_delta", "loss_delta_abs", "output_rel_error_read", "output_rel_error"]}
JSON
"$favor" run "$tmp/c.json" --out "$tmp/run" --quiet
for t in 0 1; do
  "$favor" apply --q "$tmp/q.npy" --k "$tmp/k.npy" --v "$tmp/v.npy" --features positive --projection iid --m 16 --seed 7 --trial $t \
    --causal --out "$tmp/out$t.npy"
done
"$py" - "$tmp" <<'PY'
import sys, csv, numpy as np
t = sys.argv[1]
q, k, v, g = (np.load(f"{t}/{n}.npy") for n in ("q", "k", "v", "g"))
H, L, d = q.shape
s = q @ k.transpose(0, 2, 1) / np.sqrt(d)
s = np.where(np.tril(np.ones((L, L), bool)), s, -np.inf)
a = np.exp(s - s.max(-1, keepdims=True))
exact = (a / a.sum(-1, keepdims=True)) @ v
uniform = np.cumsum(v, axis=1) / np.arange(1, L + 1)[None, :, None]
read = np.any(g != 0, axis=-1)
def want(out, h):
    dl = float(np.sum(g[h] * (out[h] - exact[h])))
    e, o = exact[h][read[h]], out[h][read[h]]
    return {"loss_delta": dl, "loss_delta_abs": abs(dl),
            "output_rel_error_read": np.linalg.norm(o - e) / np.linalg.norm(e)}
def close(x, y, what):
    assert abs(x - y) <= 1e-9 * max(1.0, abs(y)), (what, x, y)
rows = list(csv.DictReader(open(f"{t}/run/errors.csv")))
assert len(rows) == 4, len(rows)
for r in rows:
    w = want(np.load(f"{t}/out{r['trial']}.npy"), int(r["head"]))
    for c, y in w.items():
        close(float(r[c]), y, (c, r["trial"], r["head"]))
# The restricted error differs from the whole one (rows 0..9 and 25..29 are left out).
assert all(r["output_rel_error_read"] != r["output_rel_error"] for r in rows)
summ = list(csv.DictReader(open(f"{t}/run/summary.csv")))
for r in summ:
    h = int(r["head"])
    for c, y in want(uniform, h).items():
        close(float(r["baseline_" + c]), y, ("baseline", c, h))
PY
# Combined over heads: loss_delta and loss_delta_abs summed, output_rel_error_read averaged.
sed 's/"per_head": true/"per_head": false/' "$tmp/c.json" > "$tmp/all.json"
"$favor" run "$tmp/all.json" --out "$tmp/all" --quiet
"$py" - "$tmp" <<'PY'
import sys, csv
t = sys.argv[1]
per = list(csv.DictReader(open(f"{t}/run/errors.csv")))
for r in csv.DictReader(open(f"{t}/all/errors.csv")):
    mine = [p for p in per if p["trial"] == r["trial"]]
    for c, f in (("loss_delta", sum), ("loss_delta_abs", sum), ("output_rel_error_read", lambda x: sum(x) / len(x))):
        y = f([float(p[c]) for p in mine])
        assert abs(float(r[c]) - y) <= 1e-12 * max(1.0, abs(y)), (c, r[c], y)
PY
# A G of zeros: no row is read, so output_rel_error_read is blank (loss_delta is 0).
sed 's/"grad": "g.npy"/"grad": "zeros.npy"/' "$tmp/c.json" > "$tmp/z.json"
"$favor" run "$tmp/z.json" --out "$tmp/z" --quiet
"$py" - "$tmp" <<'PY'
import sys, csv
for r in csv.DictReader(open(f"{sys.argv[1]}/z/errors.csv")):
    assert r["output_rel_error_read"] == "" and float(r["loss_delta"]) == 0.0, r
PY
# Non-causal, keys longer than the queries (Lk = 56, L = 40), and a hybrid (positive + a window of 3:
# the hybrid path's output), against numpy's exact attention and `favor apply`'s Out_hat.
"$py" - "$tmp" <<'PY'
import sys, numpy as np
t, rng = sys.argv[1], np.random.default_rng(9)
for n, rows, c in (("lq", 40, 8), ("lk", 56, 8), ("lv", 56, 4), ("lg", 40, 4)):
    np.save(f"{t}/{n}.npy", 0.6 * rng.standard_normal((2, rows, c)))
PY
cat > "$tmp/nc.json" <<'JSON'
{"name": "nc", "seed": 3, "causal": false,
 "inputs": {"source": "npy", "q": "lq.npy", "k": "lk.npy", "v": "lv.npy", "grad": "lg.npy", "per_head": true},
 "variants": [{"features": "positive", "projection": "iid", "window": 3}], "m": [16], "trials": 1,
 "metrics": ["loss_delta", "loss_delta_abs", "output_rel_error_read"]}
JSON
"$favor" run "$tmp/nc.json" --out "$tmp/nc" --quiet
"$favor" apply --q "$tmp/lq.npy" --k "$tmp/lk.npy" --v "$tmp/lv.npy" --features positive --projection iid --m 16 \
  --window 3 --seed 3 --trial 0 --out "$tmp/nc_out.npy"
"$py" - "$tmp" <<'PY'
import sys, csv, numpy as np
t = sys.argv[1]
q, k, v, g, o = (np.load(f"{t}/{n}.npy") for n in ("lq", "lk", "lv", "lg", "nc_out"))
s = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
a = np.exp(s - s.max(-1, keepdims=True))
exact = (a / a.sum(-1, keepdims=True)) @ v
rows = list(csv.DictReader(open(f"{t}/nc/errors.csv")))
assert len(rows) == 2
for r in rows:
    h = int(r["head"])
    dl = float(np.sum(g[h] * (o[h] - exact[h])))
    rel = np.linalg.norm(o[h] - exact[h]) / np.linalg.norm(exact[h])
    for c, y in (("loss_delta", dl), ("loss_delta_abs", abs(dl)), ("output_rel_error_read", rel)):
        assert abs(float(r[c]) - y) <= 1e-9 * max(1.0, abs(y)), (c, h, r[c], y)
PY
sed 's/"trials": 2/"trials": 2, "query_rows": 8/' "$tmp/c.json" > "$tmp/rows.json"
set +e; err=$("$favor" run "$tmp/rows.json" --out "$tmp/rows" 2>&1 >/dev/null); rc=$?; set -e
[ "$rc" = 2 ] && [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] && [[ $err == *"query_rows: loss_delta"* ]] ||
  fail "query_rows with loss_delta: rc=$rc [$err]"
[ ! -e "$tmp/rows" ] || fail "query_rows with loss_delta wrote an output"
echo "ok: loss_delta, loss_delta_abs, output_rel_error_read = numpy"
