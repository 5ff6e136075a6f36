#!/usr/bin/env bash
# End-to-end: scripts/plot.py draws a PNG from a tiny approximation run (m sweep with two
# scales, and an L sweep) and from a tiny kernel run (Fig. 2 layout and --kind angle); it exits 2 on a missing/broken table.
# Usage: tests/cli_plot.sh FAVOR_BINARY SOURCE_DIR   (python: $FAVOR_PYTHON, default /usr/bin/python3)
set -euo pipefail
favor=$1; src=$2
py=${FAVOR_PYTHON:-/usr/bin/python3}
plot="$src/scripts/plot.py"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$py" -c 'import numpy, matplotlib' 2>/dev/null \
  || fail "$py lacks numpy/matplotlib (Debian python3-numpy python3-matplotlib; or set FAVOR_PYTHON)"

is_png() {  # non-empty file starting with the PNG signature
  [ -s "$1" ] && [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]
}

cat > "$tmp/approx.json" <<'JSON'
{"name": "tiny_plot", "inputs": {"source": "random", "L": 64, "d": 8, "scale": [0.5, 1.0]},
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig", "projection": "iid"}],
 "m": [8, 16], "trials": 2, "metrics": ["output_mse", "kernel_mse"]}
JSON
"$favor" run "$tmp/approx.json" --out "$tmp/approx" --quiet
out=$("$py" "$plot" "$tmp/approx") || fail "plot.py on approximation results"
[ "$out" = "$tmp/approx/tiny_plot.png" ] || fail "default output path: '$out'"
is_png "$tmp/approx/tiny_plot.png" || fail "no PNG for the approximation run"
"$py" "$plot" "$tmp/approx" --metric kernel_mse --out "$tmp/kmse.png" >/dev/null || fail "--metric kernel_mse"
is_png "$tmp/kmse.png" || fail "no PNG for --metric kernel_mse"

"$favor" run "$tmp/approx.json" --out "$tmp/sweepL" --quiet --set 'inputs.L=[32,64]' --set inputs.scale=0.5 --m 8
"$py" "$plot" "$tmp/sweepL" --out "$tmp/L.png" >/dev/null || fail "plot.py on an L sweep"
is_png "$tmp/L.png" || fail "no PNG for the L sweep"

cat > "$tmp/kernel.json" <<'JSON'
{"name": "tiny_kernel", "experiment": "kernel", "d": 4, "m": 4, "norm": [0.5, 1.0],
 "angle": [-2.0, -1.0, 0.0, 1.0, 2.0], "trials": 20,
 "variants": [{"features": "trig", "projection": "iid"}, {"features": "positive", "projection": "orthogonal"}]}
JSON
"$favor" run "$tmp/kernel.json" --out "$tmp/kernel" --quiet
"$py" "$plot" "$tmp/kernel" --out "$tmp/kernel.png" >/dev/null || fail "plot.py on kernel results"
is_png "$tmp/kernel.png" || fail "no PNG for the kernel run"
out=$("$py" "$plot" "$tmp/kernel" --kind angle) || fail "plot.py --kind angle on kernel results"
[ "$out" = "$tmp/kernel/tiny_kernel_vs_angle.png" ] || fail "--kind angle default output path: '$out'"
is_png "$out" || fail "no PNG for --kind angle"
set +e
"$py" "$plot" "$tmp/approx" --kind angle --out "$tmp/bad.png" 2>"$tmp/err" >/dev/null; rc=$?
set -e
[ $rc -eq 2 ] && [ ! -e "$tmp/bad.png" ] || fail "--kind angle on an approximation table: exit $rc, want 2"

# Bad input: exit 2 with one line on stderr.
mkdir "$tmp/empty"
set +e
"$py" "$plot" "$tmp/empty" 2>"$tmp/err" >/dev/null; rc=$?
set -e
[ $rc -eq 2 ] || fail "missing summary.csv: exit $rc, want 2"
[ "$(wc -l < "$tmp/err")" -eq 1 ] && grep -q "summary.csv" "$tmp/err" || fail "missing summary.csv message: $(cat "$tmp/err")"
printf 'variant,L,d,m,scale\nx,1,2\n' > "$tmp/empty/summary.csv"
set +e
"$py" "$plot" "$tmp/empty" 2>"$tmp/err" >/dev/null; rc=$?
set -e
[ $rc -eq 2 ] || fail "broken summary.csv: exit $rc, want 2"
ls "$tmp/empty" | grep -q '\.png$' && fail "PNG written for a broken table"
echo "cli_plot: ok"
