#!/usr/bin/env bash
# The timing experiment's "backward" switch (docs/design.md sections 5 and 6): without it the
# columns are the old ones (a config written before it gives the same table); with it
# backward_s and backward_ratio sit before status, filled for exact and for maps with a
# gradient, empty for nystrom (no gradient, as the gradient metrics leave theirs), and
# backward_ratio = backward_s / median_s; a bad value or the key outside timing: one line, exit 2.
set -euo pipefail
favor=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

old='variant,L,d,m,dtype,threads,repeats,median_s,min_s,max_s,gflops,gemm_ratio,speedup_vs_exact,peak_bytes,projection_s,features_s,kv_s,normalise_s,status'
new='variant,L,d,m,dtype,threads,repeats,median_s,min_s,max_s,gflops,gemm_ratio,speedup_vs_exact,peak_bytes,projection_s,features_s,kv_s,normalise_s,backward_s,backward_ratio,status'
nys=', {"features": "nystrom"}'
write() {   # write NAME EXTRA_KEYS [MORE_VARIANTS (default nystrom)]
    local more=${3-$nys}
    cat > "$tmp/$1.json" <<JSON
{"name": "$1", "experiment": "timing", "dtype": "float32", "inputs": {"source": "random", "L": [40, 150], "d": 4},
 "m": 4, "repeats": 1, "warmup": 0$2,
 "variants": [{"features": "exact"}, {"features": "positive"}$more]}
JSON
}
write plain ''
write off ', "backward": false'
write on ', "backward": true'
write causal ', "backward": true, "causal": true' ''
for c in plain off on causal; do "$favor" run "$tmp/$c.json" --out "$tmp/$c" --quiet --threads 2; done
for c in plain off; do
    [ "$(head -1 "$tmp/$c/timing.csv")" = "$old" ] || fail "$c: header $(head -1 "$tmp/$c/timing.csv")"
    grep -q '"backward"' "$tmp/$c/run.json" && fail "$c: run.json records backward"
done
[ "$(head -1 "$tmp/on/timing.csv")" = "$new" ] || fail "on: header $(head -1 "$tmp/on/timing.csv")"
grep -q '"backward": true' "$tmp/on/run.json" || fail "on: run.json lacks backward"
grep -q 'backward_s is the median' "$tmp/on/timing.md" || fail "on: timing.md does not say what backward_s is"
[ "$(head -1 "$tmp/causal/timing.csv")" = "$new" ] || fail "causal: header $(head -1 "$tmp/causal/timing.csv")"
/usr/bin/python3 - "$tmp/on/timing.csv" "$tmp/causal/timing.csv" <<'PY'
import csv, sys
on, causal = (list(csv.DictReader(open(f))) for f in sys.argv[1:])
assert len(on) == 6 and len(causal) == 4, (len(on), len(causal))
for r in on + causal:
    assert r["status"] == "ok", r
    if r["variant"] == "nystrom":
        assert r["backward_s"] == "" and r["backward_ratio"] == "", r
        continue
    b, m, ratio = float(r["backward_s"]), float(r["median_s"]), float(r["backward_ratio"])
    assert b > 0 and abs(ratio - b / m) <= 1e-3 * ratio, r   # the cells print 6 significant digits
PY

refused() {   # refused NAME EXPECTED_TEXT: exit 2, one line naming the field, nothing written
    set +e; out=$("$favor" run "$tmp/$1.json" --out "$tmp/r$1" --quiet 2>&1); rc=$?; set -e
    [ "$rc" = 2 ] || fail "$1: exit $rc, expected 2 ($out)"
    [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "$1: more than one line: $out"
    case "$out" in *"$2"*) ;; *) fail "$1: '$out' lacks '$2'";; esac
    [ ! -e "$tmp/r$1" ] || fail "$1: wrote $tmp/r$1"
}
write bad ', "backward": 1'
refused bad "backward"
cat > "$tmp/approx.json" <<'JSON'
{"name": "a", "inputs": {"source": "random", "L": 8, "d": 4}, "m": 4, "backward": true,
 "variants": [{"features": "positive"}], "metrics": ["output_mse"]}
JSON
refused approx "backward"
echo ok
