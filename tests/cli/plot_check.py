#!/usr/bin/python3
"""cli_plot: scripts/plot.py drawn in this one process, its plotted series checked.

Usage: plot_check.py FAVOR_BINARY SOURCE_DIR (tests/cli/cli_plot.sh runs it).

Result sets in a temporary directory: favor makes approx (m sweep, two scales, trig/positive x
iid/orthogonal), sweepL (L sweep), heads (npy per_head: a head column) and kernel (kernel
experiment), each well under a second; timing is the committed results/timing_vs_L (a timing
run measures the machine's gemm rate first, seconds of a 2048^3 product) with a skipped cell
appended. Each plot is drawn with --data; the series drawn are compared with summary.csv: x
and y of every line, band edges, ratio = metric / baseline, one series per head, kernel points
at their measured angles, the layout, the default output beside the result set. Bad input exits
2 with one line on stderr. Prints "plot_check: ok".
"""
import contextlib
import csv
import importlib.util
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

FAVOR, SRC = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("plot", os.path.join(SRC, "scripts", "plot.py"))
plot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plot)
# The series are checked from the sidecars (--data). Rendering (the layout engine runs then) is
# most of the time (about 1 s a figure): the first figure is rendered, at low resolution
# (draw(..., render=True)); the others write only the PNG signature, which is all the checks read.
_savefig = plot.plt.Figure.savefig
RENDER = [False]


def _save(fig, out, **kw):
    if RENDER[0]:
        _savefig(fig, out, **{**kw, "dpi": 30})
    else:
        with open(out, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n")


plot.plt.Figure.savefig = _save

def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def run(*args):
    """plot.main(args) in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = plot.main([str(a) for a in args])
        except SystemExit as e:
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == b"\x89PNG\r\n\x1a\n"


def draw(name, result, *args, render=False):
    """Plot result with args and --data; return the sidecar (checked: PNG written)."""
    os.makedirs(os.path.join(TMP, "data"), exist_ok=True)
    data = os.path.join(TMP, "data", name + ".json")
    RENDER[0] = render
    try:
        rc, out, err = run(result, *args, "--data", data)
    finally:
        RENDER[0] = False
    if rc != 0:
        fail(f"{name}: plot.py {result} {' '.join(args)}: exit {rc}: {err.strip()}")
    png = out.strip()
    if not (os.path.isfile(png) and is_png(png)):
        fail(f"{name}: no PNG at {png!r}")
    with open(data) as f:
        d = json.load(f)
    if d["png"] != png:
        fail(f"{name}: sidecar png {d['png']} != printed {png}")
    return d


def refuse(what, *args, expect=None):
    """plot.py exits 2 with one line on stderr (containing expect) and writes no PNG."""
    bad = os.path.join(TMP, "bad.png")
    rc, _, err = run(*args, "--out", bad)
    if rc != 2:
        fail(f"{what}: exit {rc}, want 2 ({err.strip()})")
    if len(err.strip().splitlines()) != 1:
        fail(f"{what}: want one line on stderr, got: {err!r}")
    if expect and expect not in err:
        fail(f"{what}: message lacks {expect!r}: {err.strip()}")
    if os.path.exists(bad):
        fail(f"{what}: PNG written")


# --- the result sets --------------------------------------------------------------------

APPROX = {"name": "tiny_plot", "inputs": {"source": "random", "L": 64, "d": 8, "scale": [0.5, 1.0]},
          "variants": [{"features": "positive", "projection": "iid"},
                       {"features": "positive", "projection": "orthogonal"},
                       {"features": "trig", "projection": "iid"}, {"features": "trig", "projection": "orthogonal"}],
          "m": [8, 16], "trials": 2, "metrics": ["output_mse", "output_rel_error", "kernel_mse"]}
HEADS = {"name": "tiny_heads", "inputs": {"source": "npy", "q": "q.npy", "k": "k.npy", "v": "v.npy", "per_head": True},
         "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "trig", "projection": "iid"}],
         "m": [8, 16], "trials": 3}
GRAD = dict(HEADS, name="tiny_grad", metrics=["output_rel_error", "grad_q_rel_error", "grad_k_rel_error",
                                              "grad_v_rel_error", "grad_bias_rel"])
KERNEL = {"name": "tiny_kernel", "experiment": "kernel", "d": 4, "m": 4, "norm": [0.5, 1.0],
          "angle": [-2.0, -1.0, 0.0, 0.5, 1.0, 2.0], "trials": 20,
          "variants": [{"features": "trig", "projection": "iid"}, {"features": "positive", "projection": "iid"},
                       {"features": "positive", "projection": "orthogonal"}]}


def favor_run(config, name, *flags):
    """favor run of config (a dict, written to TMP/name.json) into TMP/name."""
    path = os.path.join(TMP, name + ".json")
    with open(path, "w") as f:
        json.dump(config, f)
    r = subprocess.run([FAVOR, "run", path, "--out", os.path.join(TMP, name), "--quiet", *flags],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"favor run {name}: exit {r.returncode}: {r.stderr.strip()}")


def make_results():
    favor_run(APPROX, "approx")
    favor_run(APPROX, "sweepL", "--set", "inputs.L=[32,64]", "--set", "inputs.scale=0.5", "--m", "8")
    rng = np.random.default_rng(0)
    for n in "qkv":
        np.save(os.path.join(TMP, f"{n}.npy"), 0.7 * rng.standard_normal((3, 32, 8)))
    favor_run(HEADS, "heads")
    favor_run(GRAD, "grad")
    favor_run(KERNEL, "kernel")
    # timing: the committed result set, and a cell the budget skipped (empty times)
    timing = os.path.join(TMP, "timing")
    shutil.copytree(os.path.join(SRC, "results", "timing_vs_L"), timing,
                    ignore=shutil.ignore_patterns("*.png"))
    with open(os.path.join(timing, "timing.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    skip = {k: "" for k in rows[0]}
    skip.update(variant="exact", L=str(2 * max(int(r["L"]) for r in rows)), d=rows[0]["d"], dtype=rows[0]["dtype"],
                threads=rows[0]["threads"], repeats=rows[0]["repeats"], status="skipped: over time budget")
    with open(os.path.join(timing, "timing.csv"), "a", newline="") as f:
        csv.DictWriter(f, fieldnames=list(rows[0])).writerow(skip)


# --- the checks -------------------------------------------------------------------------

def table(result):
    with open(os.path.join(result, "summary.csv"), newline="") as f:
        return list(csv.DictReader(f))


def num(v):
    return float("nan") if v in ("", None) else float(v)


def close(a, b, what):
    if a is None and (b is None or not math.isfinite(b)):
        return
    if a is None or b is None or not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-300):
        fail(f"{what}: drawn {a}, table {b}")


def lines(d, kind="line"):
    return [s for s in d["series"] if s["kind"] == kind]


def check_lines(d, rows, xcol, ycol, what, key=None, lo=None, hi=None, base=None):
    """Every line: one per variant and panel, each point equal to its table row (y = ycol,
    divided by base if given); key(series, row) says whether a row belongs to a series."""
    seen = set()
    for s in lines(d):
        mine = [r for r in rows if r["variant"] == s["variant"] and (key is None or key(s, r))]
        ident = (s["variant"], json.dumps(s["panel"], sort_keys=True), s.get("m"))
        if ident in seen:
            fail(f"{what}: two series for {ident}")
        seen.add(ident)
        by_x = {}
        for r in mine:
            if num(r[xcol]) in by_x:
                fail(f"{what}: {s['variant']} {s['panel']}: two table rows at {xcol} = {r[xcol]} "
                     "in one series (joined across a key)")
            by_x[num(r[xcol])] = r
        if sorted(s["x"]) != s["x"] or set(s["x"]) != set(by_x):
            fail(f"{what}: {s['variant']} {s['panel']}: x {s['x']} != table {sorted(by_x)}")
        for i, x in enumerate(s["x"]):
            r = by_x[x]
            div = num(r[base]) if base else 1.0
            close(s["y"][i], num(r[ycol]) / div, f"{what}: {s['variant']} at {x}")
            if lo:
                close(s["lo"][i], lo(r) / div, f"{what}: band low of {s['variant']} at {x}")
            if hi:
                close(s["hi"][i], hi(r) / div, f"{what}: band high of {s['variant']} at {x}")
    if not seen:
        fail(f"{what}: no series drawn")
    return seen


def panel_key(k):
    return lambda s, r: num(r[k]) == s["panel"][k]


def mean_std_band(metric):
    """The drawn band of --stat mean on a log axis: mean -+ std, low edge clipped at mean/10."""
    m = lambda r: num(r[f"{metric}_mean"])
    sd = lambda r: num(r[f"{metric}_std"])
    return (lambda r: m(r) - sd(r) if m(r) - sd(r) > m(r) / plot.CLIP_FACTOR else m(r) / plot.CLIP_FACTOR,
            lambda r: m(r) + sd(r))


def copy_result(src, dst, keep=lambda r: True, cfg_edit=None, drop=lambda c: False):
    """A copy of a result set: summary rows kept, columns dropped, config edited."""
    os.makedirs(dst, exist_ok=True)
    rows = [dict(r) for r in table(src) if keep(r)]
    hdr = [c for c in rows[0] if not drop(c)]
    with open(os.path.join(dst, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=hdr, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(src, "run.json")) as f:
        run_json = json.load(f)
    (cfg_edit or (lambda c: None))(run_json["config"])
    with open(os.path.join(dst, "run.json"), "w") as f:
        json.dump(run_json, f)
    return dst


def check_approx():
    src = os.path.join(TMP, "approx")
    rows = table(src)
    before = set(os.listdir(src))
    d = draw("approx", src, render=True)
    if d["png"] != src + ".png":
        fail(f"default output beside the result set: {d['png']}, want {src}.png")
    if set(os.listdir(src)) != before:
        fail("plot.py wrote into the result directory")
    if d["layout"] != "fig4" or "Performer Fig. 4" not in d["title"]:
        fail(f"trig/positive x iid/orthogonal: layout {d['layout']}, title {d['title']!r}")
    lo, hi = mean_std_band("output_mse")
    check_lines(d, rows, "m", "output_mse_mean", "approx", panel_key("scale"), lo, hi)
    if any(s["band"] != "band: ± one std of the trials" for s in lines(d)):
        fail("approx: band label")

    # three of the four variants: a plain layout whose title names them
    three = copy_result(src, os.path.join(TMP, "three"), keep=lambda r: r["variant"] != "positive-iid")
    d = draw("three", three)
    if d["layout"] != "plain" or "Fig. 4" in d["title"] or "trig-iid" not in d["title"]:
        fail(f"three variants: layout {d['layout']}, title {d['title']!r}")
    if {s["variant"] for s in lines(d)} != {r["variant"] for r in table(three)}:
        fail("three variants: not every variant drawn")
    check_lines(d, table(three), "m", "output_mse_mean", "three", panel_key("scale"), lo, hi)
    d = draw("forced", three, "--layout", "fig4")
    if d["layout"] != "fig4":
        fail("--layout fig4 not honoured")

    # ratio to uniform attention
    d = draw("ratio", src, "--ratio")
    if not d["png"].endswith("approx_ratio.png"):
        fail(f"--ratio default output: {d['png']}")
    check_lines(d, rows, "m", "output_mse_mean", "--ratio", panel_key("scale"), lo, hi,
                base="baseline_output_mse")
    base = lines(d, "baseline")
    if not base or any(s["y"] != [1.0] or s["label"] != plot.BASELINE_LABEL for s in base):
        fail(f"--ratio: line at 1 labelled {plot.BASELINE_LABEL!r}: {base}")
    if "/ output MSE (uniform attention: mean of V)" not in d["ylabel"] or "below 1: better" not in d["ylabel"]:
        fail(f"--ratio y label: {d['ylabel']!r}")
    if "above 1: better" not in plot.ratio_label("grad_cosine", {"stat": "mean"}):
        fail("--ratio: grad_cosine is higher-is-better")
    # plot.py's HIGHER_IS_BETTER is the metric table's direction, as `favor list` prints it.
    listed = subprocess.run([FAVOR, "list"], capture_output=True, text=True, check=True).stdout
    higher = {line.split()[0] for line in listed.splitlines() if line.endswith("(higher is better)")}
    if higher != plot.HIGHER_IS_BETTER:
        fail(f"plot.HIGHER_IS_BETTER {plot.HIGHER_IS_BETTER} != favor list's {higher}")

    # median with its percentiles, on the columns the table has
    d = draw("median", src, "--stat", "median", "--out", os.path.join(TMP, "median.png"))
    check_lines(d, rows, "m", "output_mse_median", "--stat median", panel_key("scale"),
                lambda r: num(r["output_mse_p10"]), lambda r: num(r["output_mse_p90"]))
    if any(s["band"] != "band: 10th to 90th percentile of the trials" for s in lines(d)):
        fail("--stat median: band label")
    d = draw("numf", src, "--x", "num_features", "--out", os.path.join(TMP, "numf.png"))
    check_lines(d, rows, "num_features", "output_mse_mean", "--x num_features", panel_key("scale"))
    d = draw("kmse", src, "--metric", "kernel_mse", "--out", os.path.join(TMP, "kmse.png"))
    check_lines(d, rows, "m", "kernel_mse_mean", "--metric kernel_mse", panel_key("scale"))

    # a num_features grid in the config: x is num_features, each variant at its own m; with
    # input_seeds the statistics are over (input seed, trial) values, and the band says so
    def to_grid(cfg):
        cfg["num_features"] = cfg.pop("m")
        cfg["input_seeds"] = 3
    grid = copy_result(src, os.path.join(TMP, "fgrid"), cfg_edit=to_grid)
    d = draw("fgrid", grid)
    check_lines(d, rows, "num_features", "output_mse_mean", "num_features grid", panel_key("scale"))
    if any(s["band"] != "band: ± one std of the trials of 3 input draws" for s in lines(d)):
        fail(f"input_seeds: band label {lines(d)[0]['band']!r}")

    # optional columns absent
    lean = copy_result(src, os.path.join(TMP, "lean"), drop=lambda c: c == "num_features"
                       or c.startswith("baseline_") or c.endswith(("_median", "_p10", "_p90")))
    refuse("--stat median without its columns", lean, "--stat", "median", expect="output_mse_median")
    refuse("--x num_features without the column", lean, "--x", "num_features", expect="num_features")
    refuse("--ratio without baseline_output_mse", lean, "--ratio", expect="baseline_output_mse")
    d = draw("lean", lean, "--out", os.path.join(TMP, "lean.png"))
    if lines(d, "baseline"):
        fail("baseline drawn without a baseline column")
    refuse("--x num_features with --kind scale", src, "--kind", "scale", "--x", "num_features")
    refuse("--kind angle on an approximation table", src, "--kind", "angle")
    refuse("--heads on a table without heads", src, "--heads", "facet", expect="head")
    d = draw("scale", src, "--kind", "scale", "--metric", "output_rel_error",
             "--out", os.path.join(TMP, "rel.png"))
    check_lines(d, rows, "scale", "output_rel_error_mean", "--kind scale", panel_key("m"))


def check_heads():
    src = os.path.join(TMP, "heads")
    rows = table(src)
    heads = sorted({int(r["head"]) for r in rows})
    d = draw("heads", src)
    if d["heads"] != "facet":
        fail(f"per-head result: {d['heads']}, want facet")
    seen = check_lines(d, rows, "m", "output_mse_mean", "per-head facets",
                       lambda s, r: int(r["head"]) == s["panel"]["head"])
    variants = {r["variant"] for r in rows}
    if len(seen) != len(variants) * len(heads) or \
            {s["panel"]["head"] for s in lines(d)} != set(heads):
        fail(f"per-head facets: {len(seen)} series, want one per variant and head")
    if any("head" not in s["panel"] for s in lines(d)):
        fail("per-head facets: a series without its head")

    d = draw("heads_mean", src, "--heads", "mean", "--ratio", "--out", os.path.join(TMP, "hm.png"))
    if "mean over 3 heads" not in d["title"].lower():
        fail(f"--heads mean: no note in the title: {d['title']!r}")
    for s in lines(d):
        for i, x in enumerate(s["x"]):
            per = [num(r["output_mse_mean"]) / num(r["baseline_output_mse"]) for r in rows
                   if r["variant"] == s["variant"] and num(r["m"]) == x]
            if len(per) != len(heads):
                fail(f"--heads mean: {s['variant']} at m = {x}: {len(per)} heads")
            close(s["y"][i], sum(per) / len(per), f"--heads mean: {s['variant']} at {x}")
            close(s["lo"][i], min(per), f"--heads mean: lowest head of {s['variant']} at {x}")
            close(s["hi"][i], max(per), f"--heads mean: highest head of {s['variant']} at {x}")
        if s["band"] != "band: lowest to highest head":
            fail(f"--heads mean: band label {s['band']!r}")
    # the head column lost: rows of several heads at one m would be joined: refused
    nohead = copy_result(src, os.path.join(TMP, "nohead"), drop=lambda c: c == "head")
    refuse("several rows at one x", nohead, expect="summary.csv")


def check_kernel():
    src = os.path.join(TMP, "kernel")
    rows = table(src)
    measured = lambda s, panel: sorted(num(r["angle"]) for r in rows if r["variant"] == s["variant"]
                                       and num(r["norm"]) == panel["norm"]
                                       and num(r["m"]) == panel["m"] and num(r["mse"]) > 0)
    for name, args in (("kernel", ()), ("angle", ("--kind", "angle"))):
        d = draw(name, src, *args, "--out", os.path.join(TMP, name + ".png"))
        pts = lines(d, "points")
        if not pts:
            fail(f"{name}: no kernel points drawn")
        for s in pts:
            ok = measured(s, s["panel"])
            every = s["panel"].get("panel") == "slice"  # else points without theory are left out
            if not set(s["x"]) <= set(ok) or (every and sorted(s["x"]) != ok):
                fail(f"{name}: {s['variant']} drawn at angles {s['x']}, measured at {ok}")
            if s["panel"].get("panel") == "empirical / theory":
                continue
            for x, y in zip(s["x"], s["y"]):
                r = next(r for r in rows if r["variant"] == s["variant"] and num(r["angle"]) == x
                         and num(r["norm"]) == s["panel"]["norm"] and num(r["m"]) == s["panel"]["m"])
                close(y, num(r["mse"]), f"{name}: {s['variant']} at angle {x}")
        if any(s["band"] != plot.SEM_BAND for s in pts):
            fail(f"{name}: bar label")
    refuse("--ratio on a kernel table", src, "--ratio")


def check_gradient():
    """--kind gradient: every series is its column's mean over the heads at each m."""
    src = os.path.join(TMP, "grad")
    rows = table(src)
    d = draw("gradient", src, "--kind", "gradient")
    series = lines(d, "gradient")
    cols = {s["col"] for s in series}
    want = {"output_rel_error_mean", "grad_q_rel_error_mean", "grad_k_rel_error_mean", "grad_v_rel_error_mean",
            "grad_bias_rel", "grad_bias_floor"}
    if cols != want:
        fail(f"gradient: columns drawn {sorted(cols)}, want {sorted(want)}")
    for s in series:
        mine = [r for r in rows if r["variant"] == s["label"]]
        xs = sorted({num(r["m"]) for r in mine})
        if len(s["x"]) != len(xs):
            fail(f"gradient {s['label']} {s['col']}: {len(s['x'])} points, table has {len(xs)}")
        for x, dx, dy in zip(xs, s["x"], s["y"]):
            close(dx, x, f"gradient {s['label']} x")
            close(dy, float(np.mean([num(r[s["col"]]) for r in mine if num(r["m"]) == x])),
                  f"gradient {s['label']} {s['col']} at m = {x}")
    refuse("--kind gradient without gradient metrics", os.path.join(TMP, "approx"), "--kind", "gradient",
           expect="gradient metrics")


def check_timing_and_errors():
    src = os.path.join(TMP, "timing")
    rc, out, err = run(src)
    lines = out.strip().splitlines()
    # the figure's path last; before it one line per series whose crossover L* lies between
    # two measured lengths
    if rc != 0 or not lines or lines[-1] != src + ".png" or not is_png(src + ".png") or \
            not all("crossover L* = " in x for x in lines[:-1]):
        fail(f"timing: exit {rc}, output {out.strip()!r} ({err.strip()})")
    refuse("--stat median on a timing table", src, "--kind", "timing", "--stat", "median")
    refuse("--kind timing without timing.csv", os.path.join(TMP, "approx"), "--kind", "timing")
    empty = os.path.join(TMP, "empty")
    os.makedirs(empty, exist_ok=True)
    refuse("missing summary.csv", empty, expect="summary.csv")
    with open(os.path.join(empty, "summary.csv"), "w") as f:
        f.write("variant,L,d,m,scale\nx,1,2\n")
    refuse("broken summary.csv", empty, expect="summary.csv")
    for name in ("sweepL",):
        src = os.path.join(TMP, name)
        d = draw(name, src, "--metric", "output_rel_error", "--out", os.path.join(TMP, "L.png"))
        check_lines(d, table(src), "L", "output_rel_error_mean", "L sweep")


with tempfile.TemporaryDirectory(prefix="cli_plot.") as TMP:
    make_results()
    check_approx()
    check_heads()
    check_kernel()
    check_gradient()
    check_timing_and_errors()
print("plot_check: ok")
