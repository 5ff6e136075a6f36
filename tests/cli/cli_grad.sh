#!/usr/bin/env bash
# `favor apply --grad`: OUT_dq.npy, OUT_dk.npy, OUT_dv.npy beside --out OUT.npy with the shapes of q, k, v (heads
# kept, float32 files with --dtype float32); what has no gradient is refused with one line,
# exit 2, before any output is written. The values are checked in tests/python
# (test_backward_torch.py) and tests/attention/test_backward.cpp.
set -euo pipefail
favor=$1; src=$2
py=/usr/bin/python3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$py" - "$tmp" <<'PY'
import sys, numpy as np
t, rng = sys.argv[1], np.random.default_rng(3)
for n, shape in [("q", (2, 12, 4)), ("k", (2, 9, 4)), ("v", (2, 9, 3)), ("g", (2, 12, 3)), ("bad", (2, 12, 4))]:
    np.save(f"{t}/{n}.npy", 0.5 * rng.standard_normal(shape))
PY
args=(--q "$tmp/q.npy" --k "$tmp/k.npy" --v "$tmp/v.npy")
mkdir "$tmp/e" "$tmp/p" "$tmp/r"
"$favor" apply "${args[@]}" --exact --grad "$tmp/g.npy" --out "$tmp/e/out.npy"
"$favor" apply "${args[@]}" --features positive --m 8 --dtype float32 --grad "$tmp/g.npy" --out "$tmp/p/out.npy"
"$py" - "$tmp" <<'PY'
import sys, numpy as np
t = sys.argv[1]
for sub, dt in [("e", np.float64), ("p", np.float32)]:
    for n, shape in [("dq", (2, 12, 4)), ("dk", (2, 9, 4)), ("dv", (2, 9, 3))]:
        a = np.load(f"{t}/{sub}/out_{n}.npy")
        assert a.shape == shape and a.dtype == dt and np.isfinite(a).all() and np.abs(a).sum() > 0, (sub, n, a.shape)
PY

refused() {   # refused EXPECTED_TEXT FLAGS...: exit 2, one line naming it, nothing written
    local want=$1; shift
    set +e; out=$("$favor" apply "${args[@]}" "$@" --out "$tmp/r/out.npy" 2>&1); rc=$?; set -e
    [ "$rc" = 2 ] || fail "$*: exit $rc, expected 2 ($out)"
    [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "$*: more than one line: $out"
    case "$out" in *"$want"*) ;; *) fail "$*: '$out' lacks '$want'";; esac
    [ -z "$(ls "$tmp/r")" ] || fail "$*: wrote $(ls "$tmp/r")"
}
refused "'nystrom' has no gradient" --features nystrom --m 4 --grad "$tmp/g.npy"
refused "no gradient with --dtype float16" --exact --dtype float16 --grad "$tmp/g.npy"
refused "epsilon > 0 is added after a shift" --features positive --m 4 --epsilon 1e-6 --grad "$tmp/g.npy"
refused "has shape (2, 12, 4), expected (2, 12, 3)" --exact --grad "$tmp/bad.npy"
# The gradient metrics of a run: config errors are one line naming the field, exit 2, no output.
run_refused() {   # run_refused EXPECTED_TEXT CONFIG_JSON
    printf '%s\n' "$2" > "$tmp/c.json"
    for cmd in validate run; do
        flags=(); [ "$cmd" = validate ] || flags=(--out "$tmp/run")
        set +e; out=$("$favor" $cmd "$tmp/c.json" "${flags[@]}" 2>&1 >/dev/null); rc=$?; set -e
        [ "$rc" = 2 ] || fail "$cmd $2: exit $rc, expected 2 ($out)"
        [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "$cmd $2: more than one line: $out"
        case "$out" in *"$1"*) ;; *) fail "$cmd: '$out' lacks '$1'";; esac
        [ ! -e "$tmp/run" ] || fail "$cmd $2: wrote $tmp/run"
    done
}
npy='"source": "npy", "q": "q.npy", "k": "k.npy", "v": "v.npy"'
base='"variants": [{"features": "positive"}], "m": 4, "trials": 2'
run_refused "bad.npy has shape (2, 12, 4), expected (2, 12, 3)" \
    "{\"inputs\": {$npy, \"grad\": \"bad.npy\"}, $base, \"metrics\": [\"grad_cosine\"]}"
run_refused "inputs.grad: given, but no metric reads it" "{\"inputs\": {$npy, \"grad\": \"g.npy\"}, $base}"
run_refused "inputs.grad: applies only to source \"npy\"" \
    "{\"inputs\": {\"source\": \"random\", \"L\": 8, \"d\": 4, \"grad\": \"g.npy\"}, $base, \"metrics\": [\"grad_cosine\"]}"
run_refused "metrics: the gradient metrics need dtype float32 or float64" \
    "{\"inputs\": {$npy}, $base, \"dtype\": \"bfloat16\", \"metrics\": [\"grad_bias_rel\"]}"
printf '%s\n' "{\"inputs\": {$npy, \"grad\": \"g.npy\"}, $base, \"metrics\": [\"grad_q_rel_error\", \"grad_bias_rel\"]}" > "$tmp/c.json"
"$favor" run "$tmp/c.json" --out "$tmp/run" --quiet
head -1 "$tmp/run/errors.csv" | grep -q 'grad_q_rel_error,grad_bias_rel,grad_bias_floor' || fail "gradient columns: $(head -1 "$tmp/run/errors.csv")"
grep -q '"grad": ".*g.npy"' "$tmp/run/run.json" || fail "run.json does not record inputs.grad"
# inputs.grad is read in inputs.layout, as q, k, v are: the same tensors stored (L, H, .) give
# the same errors.csv (before, G was read by rank and refused, or misread when L = H).
"$py" - "$tmp" <<'PY'
import sys, numpy as np
t = sys.argv[1]
for n in "qkvg":
    np.save(f"{t}/{n}_lhd.npy", np.load(f"{t}/{n}.npy").transpose(1, 0, 2))
PY
sed -e 's/"q.npy"/"q_lhd.npy"/; s/"k.npy"/"k_lhd.npy"/; s/"v.npy"/"v_lhd.npy"/; s/"g.npy"/"g_lhd.npy", "layout": "LHD"/' \
  "$tmp/c.json" > "$tmp/c_lhd.json"
grep -q '"layout": "LHD"' "$tmp/c_lhd.json" || fail "the LHD config was not made: $(cat "$tmp/c_lhd.json")"
"$favor" validate "$tmp/c_lhd.json" > /dev/null || fail "validate refused inputs.grad in the layout LHD"
"$favor" run "$tmp/c_lhd.json" --out "$tmp/run_lhd" --quiet
cmp -s "$tmp/run/errors.csv" "$tmp/run_lhd/errors.csv" || fail "inputs.grad in the layout LHD: errors.csv differs"
echo "cli_grad: ok"
