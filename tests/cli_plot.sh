#!/usr/bin/env bash
# End-to-end: favor makes tiny result sets (an m sweep with two scales, trig/positive x
# iid/orthogonal; an L sweep; per-head npy inputs; a kernel run; a timing run with a skipped
# cell) and tests/plot_check.py draws them with scripts/plot.py --data, in one process, and
# checks every series drawn against summary.csv (x, y, bands, ratio to uniform attention,
# one series per head, kernel points at their measured angles, the layout, the default
# output beside the result set) and that bad input exits 2 with one line.
# Usage: tests/cli_plot.sh FAVOR_BINARY SOURCE_DIR   (python: $FAVOR_PYTHON, default /usr/bin/python3)
set -euo pipefail
favor=$1; src=$2
py=${FAVOR_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$py" -c 'import numpy, matplotlib' 2>/dev/null \
  || fail "$py lacks numpy/matplotlib (Debian python3-numpy python3-matplotlib; or set FAVOR_PYTHON)"

cat > "$tmp/approx.json" <<'JSON'
{"name": "tiny_plot", "inputs": {"source": "random", "L": 64, "d": 8, "scale": [0.5, 1.0]},
 "variants": [{"features": "positive", "projection": "iid"}, {"features": "positive", "projection": "orthogonal"},
              {"features": "trig", "projection": "iid"}, {"features": "trig", "projection": "orthogonal"}],
 "m": [8, 16], "trials": 2, "metrics": ["output_mse", "output_rel_error", "kernel_mse"]}
JSON
"$favor" run "$tmp/approx.json" --out "$tmp/approx" --quiet
"$favor" run "$tmp/approx.json" --out "$tmp/sweepL" --quiet --set 'inputs.L=[32,64]' --set inputs.scale=0.5 --m 8

"$py" - "$tmp" <<'PY'
import numpy as np, sys
rng = np.random.default_rng(0)
for n in "qkv":
    np.save(f"{sys.argv[1]}/{n}.npy", 0.7 * rng.standard_normal((3, 32, 8)))
PY
cat > "$tmp/heads.json" <<'JSON'
{"name": "tiny_heads", "inputs": {"source": "npy", "q": "q.npy", "k": "k.npy", "v": "v.npy", "per_head": true},
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig", "projection": "iid"}],
 "m": [8, 16], "trials": 3}
JSON
"$favor" run "$tmp/heads.json" --out "$tmp/heads" --quiet

cat > "$tmp/kernel.json" <<'JSON'
{"name": "tiny_kernel", "experiment": "kernel", "d": 4, "m": 4, "norm": [0.5, 1.0],
 "angle": [-2.0, -1.0, 0.0, 0.5, 1.0, 2.0], "trials": 20,
 "variants": [{"features": "trig", "projection": "iid"}, {"features": "positive", "projection": "iid"},
              {"features": "positive", "projection": "orthogonal"}]}
JSON
"$favor" run "$tmp/kernel.json" --out "$tmp/kernel" --quiet

cat > "$tmp/timing.json" <<'JSON'
{"name": "tiny_timing", "experiment": "timing", "dtype": "float32",
 "inputs": {"source": "random", "L": [64, 128, 256], "d": 8, "d_v": 8, "scale": 1.0},
 "variants": [{"features": "exact"}, {"features": "positive", "projection": "orthogonal", "name": "FAVOR+"}],
 "m": 16, "repeats": 2, "warmup": 1, "time_budget_s": 5}
JSON
"$favor" run "$tmp/timing.json" --out "$tmp/timing" --quiet
# a cell the budget skipped: empty times
"$py" - "$tmp/timing/timing.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
skip = {k: "" for k in rows[0]}
skip.update(variant="exact", L="512", d=rows[0]["d"], dtype=rows[0]["dtype"], threads=rows[0]["threads"],
            repeats=rows[0]["repeats"], status="skipped: over time budget")
w = csv.DictWriter(open(sys.argv[1], "a", newline=""), fieldnames=list(rows[0]))
w.writerow(skip)
PY

"$py" "$src/tests/plot_check.py" "$tmp" "$src/scripts/plot.py" || fail "plot_check.py"
echo "cli_plot: ok"
