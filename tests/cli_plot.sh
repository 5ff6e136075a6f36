#!/usr/bin/env bash
# End-to-end: scripts/plot.py draws a PNG from a tiny approximation run (m sweep with two
# scales in the Fig. 4 layout, and an L sweep), from a tiny kernel run (Fig. 2 layout and
# --kind angle) and from a tiny timing run (--kind timing, with a skipped cell); --stat
# median, --x num_features, baseline_<metric> and output_rel_error on a copy of the table
# with those columns; it exits 2 with one line on a missing/broken table and when --stat
# median or --x num_features lack their columns.
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
 "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig", "projection": "iid"},
              {"features": "trig", "projection": "orthogonal"}],
 "m": [8, 16], "trials": 2, "metrics": ["output_mse", "kernel_mse"]}
JSON
"$favor" run "$tmp/approx.json" --out "$tmp/approx" --quiet
out=$("$py" "$plot" "$tmp/approx") || fail "plot.py on approximation results"
[ "$out" = "$tmp/approx/tiny_plot.png" ] || fail "default output path: '$out'"
is_png "$tmp/approx/tiny_plot.png" || fail "no PNG for the approximation run"
"$py" "$plot" "$tmp/approx" --metric kernel_mse --out "$tmp/kmse.png" >/dev/null || fail "--metric kernel_mse"
is_png "$tmp/kmse.png" || fail "no PNG for --metric kernel_mse"

# Columns the table may lack: drop them (absent) or add plausible values (present), so the
# checks below hold whether or not this favor writes them.
cols() {  # cols SRC_DIR DST_DIR drop|add
  mkdir -p "$2" && cp "$1/run.json" "$2/"
  "$py" - "$1/summary.csv" "$2/summary.csv" "$3" <<'PY'
import csv, sys
src, dst, mode = sys.argv[1:]
rows = list(csv.DictReader(open(src, newline="")))
hdr = list(rows[0])
opt = lambda c: c in ("num_features",) or c.startswith("baseline_") or c.endswith(("_median", "_p10", "_p90")) \
    or c.startswith("output_rel_error_")
if mode == "drop":
    hdr = [c for c in hdr if not opt(c)]
else:
    for r in rows:
        mse = float(r["output_mse_mean"])
        new = {"num_features": int(r["m"]) * (2 if r["features"] in ("trig", "hyperbolic") else 1),
               "baseline_output_mse": 4e-4, "output_mse_median": mse / 2, "output_mse_p10": mse / 5,
               "output_mse_p90": mse * 2, "output_rel_error_mean": mse ** 0.5,
               "output_rel_error_std": mse ** 0.5 / 3, "baseline_output_rel_error": 0.02}
        for k, v in new.items():
            r.setdefault(k, v)
    hdr += [k for k in rows[0] if k not in hdr]
w = csv.DictWriter(open(dst, "w", newline=""), fieldnames=hdr, extrasaction="ignore")
w.writeheader()
w.writerows(rows)
PY
}
one_line_exit2() {  # one_line_exit2 WHAT PLOT_ARGS...: exit 2, one line on stderr, no PNG
  local what=$1; shift
  set +e
  "$py" "$plot" "$@" --out "$tmp/bad.png" 2>"$tmp/err" >/dev/null; local rc=$?
  set -e
  [ $rc -eq 2 ] || fail "$what: exit $rc, want 2"
  [ "$(wc -l < "$tmp/err")" -eq 1 ] || fail "$what: want one line on stderr, got: $(cat "$tmp/err")"
  [ ! -e "$tmp/bad.png" ] || fail "$what: PNG written"
}
cols "$tmp/approx" "$tmp/lean" drop
one_line_exit2 "--stat median without _median/_p10/_p90 columns" "$tmp/lean" --stat median
grep -q "output_mse_median" "$tmp/err" || fail "--stat median message: $(cat "$tmp/err")"
one_line_exit2 "--x num_features without a num_features column" "$tmp/lean" --x num_features
grep -q "num_features" "$tmp/err" || fail "--x num_features message: $(cat "$tmp/err")"
"$py" "$plot" "$tmp/lean" --out "$tmp/lean.png" >/dev/null || fail "plot.py without baseline column"
is_png "$tmp/lean.png" || fail "no PNG without baseline column"
cols "$tmp/approx" "$tmp/rich" add
out=$("$py" "$plot" "$tmp/rich" --stat median) || fail "--stat median"
[ "$out" = "$tmp/rich/tiny_plot_median.png" ] || fail "--stat median default output path: '$out'"
is_png "$out" || fail "no PNG for --stat median"
out=$("$py" "$plot" "$tmp/rich" --x num_features) || fail "--x num_features"
[ "$out" = "$tmp/rich/tiny_plot_vs_num_features.png" ] || fail "--x num_features default output path: '$out'"
is_png "$out" || fail "no PNG for --x num_features"
"$py" "$plot" "$tmp/rich" --kind scale --metric output_rel_error --out "$tmp/rel.png" >/dev/null \
  || fail "--kind scale --metric output_rel_error"
is_png "$tmp/rel.png" || fail "no PNG for --metric output_rel_error"
one_line_exit2 "--x num_features with --kind scale" "$tmp/rich" --kind scale --x num_features

"$favor" run "$tmp/approx.json" --out "$tmp/sweepL" --quiet --set 'inputs.L=[32,64]' --set inputs.scale=0.5 --m 8
"$py" "$plot" "$tmp/sweepL" --out "$tmp/L.png" >/dev/null || fail "plot.py on an L sweep"
is_png "$tmp/L.png" || fail "no PNG for the L sweep"
cols "$tmp/sweepL" "$tmp/sweepL_rich" add
"$py" "$plot" "$tmp/sweepL_rich" --metric output_rel_error --out "$tmp/Lrel.png" >/dev/null \
  || fail "--kind L --metric output_rel_error"
is_png "$tmp/Lrel.png" || fail "no PNG for the L sweep's relative error"

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
out=$("$py" "$plot" "$tmp/timing") || fail "plot.py on timing results"
[ "$out" = "$tmp/timing/tiny_timing.png" ] || fail "timing default output path: '$out'"
is_png "$out" || fail "no PNG for the timing run"
one_line_exit2 "--stat median on a timing table" "$tmp/timing" --kind timing --stat median
one_line_exit2 "--kind timing without timing.csv" "$tmp/approx" --kind timing

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
