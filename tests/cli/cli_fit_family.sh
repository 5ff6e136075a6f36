#!/usr/bin/env bash
# End-to-end: `favor gen --family` draws a head with known input-family parameters (every
# knob but clusters, RoPE interleaved; then one with clustered keys), scripts/fit_family.py
# recovers each parameter within 4 of its own bootstrap standard errors and writes a config that `favor validate` accepts and
# whose twin is drawn by gen again; gen's --family errors are one line, exit 2, nothing written.
# Usage: tests/cli/cli_fit_family.sh FAVOR_BINARY SOURCE_DIR   (python: $FAVOR_PYTHON, default /usr/bin/python3)
set -euo pipefail
favor=$1; src=$2
py=${FAVOR_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
"$py" -c 'import numpy' 2>/dev/null || fail "$py lacks numpy (Debian python3-numpy; or set FAVOR_PYTHON)"

"$favor" gen --L 4096 --d 32 --seed 5 --scale 0.7 --out "$tmp/head" \
  --family decay_q=1.2 --family decay_k=0.8 --family offset_q=2 --family offset_k=5 --family offset_cos=0.5 \
  --family key_norm_sigma=0.6 --family key_scale=1.5 --family rope_base=10000
"$py" "$src/scripts/fit_family.py" "$tmp/head/q.npy" "$tmp/head/k.npy" --rope-base 10000 --rope-layout interleaved \
  --boot 10 --json "$tmp/fit.json" --config "$tmp/twin.json" --L 65536 > "$tmp/fit.txt" || fail "fit_family.py"
cat "$tmp/fit.txt"
# recovered FIT.json '{"param": true value, ...}': each within 4 bootstrap se, shared_basis true
recovered() {
"$py" - "$1" "$2" <<'PY'
import json, sys
truth = json.loads(sys.argv[2])
f = json.load(open(sys.argv[1]))[0]
bad = []
for k, v in truth.items():
    got, se = f["fit"][k], f["se"][k]
    # 4 bootstrap standard errors (a floor of 1e-3 relative: the se itself is estimated)
    if not abs(got - v) <= 4 * max(se, 1e-3 * abs(v)):
        bad.append(f"{k}: {got:.4g} vs {v} (se {se:.2g})")
if not f["fit"]["shared_basis"]:
    bad.append("shared_basis: False vs True")
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
}
recovered "$tmp/fit.json" '{"scale": 0.7, "key_scale": 1.5, "decay_q": 1.2, "decay_k": 0.8, "offset_q": 2.0,
  "offset_k": 5.0, "offset_cos": 0.5, "key_norm_sigma": 0.6}' || fail "parameters not recovered"
# Clustered keys: fitted with --key-clusters (k-means), cluster_spread and the rest recovered.
"$favor" gen --L 4096 --d 32 --seed 3 --scale 0.8 --out "$tmp/clustered" --family key_clusters=6 \
  --family cluster_spread=0.4 --family decay_q=1 --family decay_k=0.7 --family key_scale=1.3
"$py" "$src/scripts/fit_family.py" "$tmp/clustered/q.npy" "$tmp/clustered/k.npy" --key-clusters 6 --boot 10 \
  --json "$tmp/fitc.json" > "$tmp/fitc.txt" || fail "fit_family.py --key-clusters"
cat "$tmp/fitc.txt"
recovered "$tmp/fitc.json" '{"scale": 0.8, "key_scale": 1.3, "decay_q": 1.0, "decay_k": 0.7, "cluster_spread": 0.4,
  "offset_k": 0.0}' || fail "clustered parameters not recovered"
# --rope-layout half undoes rotate-half RoPE (pairs (p, p + d/2), as scripts/train_tiny_lm.py and
# Hugging Face apply it): rotated constant rows come back constant; interleaved does not undo it.
"$py" - "$src/scripts" <<'PY' || fail "unrope half layout"
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from fit_family import unrope
L, d, base = 50, 8, 100.0
x = np.tile(np.linspace(-1, 1, d), (L, 1))
ang = np.arange(L)[:, None] * base ** (-np.arange(d // 2) / (d // 2))[None, :]
x1, x2 = x[:, : d // 2], x[:, d // 2:]
rotated = np.concatenate([x1 * np.cos(ang) - x2 * np.sin(ang), x1 * np.sin(ang) + x2 * np.cos(ang)], axis=1)
assert np.abs(unrope(rotated, base, "half") - x).max() < 1e-12
assert np.abs(unrope(rotated, base, "interleaved") - x).max() > 0.1
PY
# The written config draws the twin at L = 65536 with the fitted keys; gen draws it too.
"$favor" validate "$tmp/twin.json" > "$tmp/validate.txt" || fail "favor validate on the fitted config"
grep -q '"rope_base": 10000' "$tmp/validate.txt" || fail "fitted config lacks rope_base"
flags=$(sed -n 's/^  favor gen \(.*\) --out DIR$/\1/p' "$tmp/fit.txt" | head -1)
[ -n "$flags" ] || fail "fit_family.py printed no favor gen line"
# shellcheck disable=SC2086
"$favor" gen $flags --out "$tmp/twin" || fail "favor gen with the printed flags"
[ -s "$tmp/twin/q.npy" ] || fail "twin not written"

# gen's --family errors: one line naming the flag, exit 2, nothing written.
check_error() {  # expected-prefix args...
  local want=$1; shift
  set +e; "$favor" gen --L 8 --out "$tmp/bad" "$@" 2> "$tmp/err"; local rc=$?; set -e
  [ $rc -eq 2 ] || fail "gen $* exited $rc, expected 2"
  [ "$(wc -l < "$tmp/err")" -eq 1 ] || fail "gen $*: not one line: $(cat "$tmp/err")"
  grep -q "^favor: $want" "$tmp/err" || fail "gen $*: got $(cat "$tmp/err"), expected favor: $want"
  [ ! -e "$tmp/bad" ] || fail "gen $* wrote $tmp/bad"
}
check_error "gen: --family decay_q: must be >= 0" --d 4 --family decay_q=-1
check_error "gen: --family rope_base: rotates pairs of coordinates: needs an even d" --d 5 --family rope_base=100
check_error "gen: --family decay: unknown key" --d 4 --family decay=1
check_error "gen: --family: expected KEY=VALUE" --d 4 --family decay_q
echo "ok"
