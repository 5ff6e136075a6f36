"""The command line of scripts/plot.py: arguments, the kind picked, the one plot function called."""
import argparse
import os
import sys

from .common import (METRICS, PROG, default_out, die, read_run, read_summary, require, run_config,
    uniq)
from .gradient import gradient_plot
from .series import DRAWN, FIGURE, write_data
from .approx import approx_plot
from .kernel import angle_plot, kernel_plot
from .timing import timing_plot
from .precision import precision_plot


def main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, usage="%(prog)s RESULT_DIR [options]   (-h lists them)",
                                 description="Plot a favor result directory "
                                 "(summary.csv or timing.csv, + run.json) as a PNG.")
    ap.add_argument("result_dir", metavar="RESULT_DIR")
    ap.add_argument("--out", metavar="PNG", help="output file (default beside RESULT_DIR: "
                    "<parent>/<RESULT_DIR name>[suffix].png)")
    ap.add_argument("--kind", choices=["auto", "m", "L", "scale", "kernel", "angle", "timing", "precision", "gradient"],
                    default="auto")
    ap.add_argument("--metric", default=None,
                    help="approximation metric to plot (default output_mse, else the first present)")
    ap.add_argument("--stat", choices=["mean", "median"], default="mean",
                    help="mean (band: ± std of the trials; default) or median "
                         "(band: 10th to 90th percentile)")
    ap.add_argument("--x", choices=["m", "num_features"], default="m", dest="x",
                    help="x axis of --kind m: m, or num_features (feature columns: cost)")
    ap.add_argument("--ratio", action="store_true",
                    help="draw the metric divided by baseline_<metric> (uniform attention)")
    ap.add_argument("--heads", choices=["auto", "facet", "mean"], default="auto",
                    help="per-head results: one panel per head, or the mean over heads")
    ap.add_argument("--layout", choices=["auto", "fig4", "plain"], default="auto",
                    help="--kind m: the Performer Fig. 4 two-panel layout (auto: only for "
                         "exactly trig/positive x iid/orthogonal) or one panel per cell")
    ap.add_argument("--data", metavar="JSON", help="also write every series drawn (x, y, band, "
                    "label, panel) to this file")
    a = ap.parse_args(argv)
    DRAWN.clear()
    FIGURE.clear()

    if a.data and a.kind in ("precision", "timing"):
        die(f"--data applies to summary.csv plots, not --kind {a.kind}")
    if a.kind == "precision":
        out = a.out or default_out(a.result_dir, "")
        precision_plot(a.result_dir, out)
        print(out)
        return 0
    run = read_run(a.result_dir) if os.path.isdir(a.result_dir) else {}
    cfg = run_config(run)
    kind = a.kind
    has_summary = os.path.isfile(os.path.join(a.result_dir, "summary.csv"))
    has_timing = os.path.isfile(os.path.join(a.result_dir, "timing.csv"))
    if kind == "auto" and has_timing and not has_summary:
        kind = "timing"
    if kind == "timing":
        if a.data:
            die("--data applies to summary.csv plots, not timing.csv")
        if a.metric is not None or a.stat != "mean" or a.x != "m" or a.ratio:
            die("--metric, --stat, --x and --ratio do not apply to --kind timing")
        path, header, table = read_summary(a.result_dir, "timing.csv",
                                           ("variant", "dtype", "status"))
        out = a.out or default_out(a.result_dir, "_timing" if has_summary else "")
        _check_outdir(out)
        try:
            timing_plot(path, header, table, run, out)
        except OSError as e:
            die(f"{out}: cannot write: {e}")
        print(out)
        return 0

    path, header, table = read_summary(a.result_dir)
    is_kernel = "angle" in header and "norm" in header
    mkey = "num_features" if "num_features" in cfg else "m"  # a num_features grid
    if kind == "gradient":
        if is_kernel or a.metric is not None or a.stat != "mean" or a.ratio or a.layout != "auto":
            die("--kind gradient takes a summary.csv of an approximation run and no --metric, --stat, "
                "--ratio or --layout")
        out = a.out or default_out(a.result_dir, "_gradient")
        _check_outdir(out)
        try:
            gradient_plot(path, header, table, cfg, out, mkey if mkey != "m" else a.x)
        except OSError as e:
            die(f"{out}: cannot write: {e}")
        if a.data:
            write_data(a.data, out, {"result_dir": a.result_dir, "kind": kind})
        print(out)
        return 0
    if kind == "auto":
        if is_kernel:
            kind = "kernel"
        else:
            require(path, header, ["variant", "L", "d", mkey, "scale"])
            kind = next((k for k in ("m", "L", "scale")
                         if len(uniq(table, mkey if k == "m" else k)) > 1), "m")
    kernel_kind = kind in ("kernel", "angle")
    if kernel_kind and not is_kernel:
        die(f"{path}: not a kernel table (no norm/angle columns); use --kind m, L or scale")
    if not kernel_kind and is_kernel:
        die(f"{path}: a kernel table can only be drawn with --kind kernel or angle")
    if a.x != "m":
        if kind != "m":
            die(f"--x {a.x} applies to --kind m only (this plot is --kind {kind})")
        if a.x not in header:
            die(f"{path}: --x {a.x} needs a {a.x} column, absent from this table (use --x m)")

    suffix = "_vs_angle" if kind == "angle" else ""
    metric = None
    if not kernel_kind:
        present = [mt for mt in METRICS if f"{mt}_mean" in header or f"{mt}_median" in header]
        extra = [h[:-5] for h in header if h.endswith("_mean") and h[:-5] not in present]
        present += extra
        if a.metric is None:
            metric = "output_mse" if "output_mse" in present else (present[0] if present else None)
            if metric is None:
                die(f"{path}: no <metric>_mean columns")
        else:
            metric = a.metric
            if metric not in present:
                die(f"{path}: no {metric}_mean column (present: {', '.join(present) or 'none'})")
            if metric != "output_mse":
                suffix += f"_{metric}"
        if a.stat != "mean":
            suffix += f"_{a.stat}"
        if a.ratio:
            suffix += "_ratio"
        if a.x != "m":
            suffix += f"_vs_{a.x}"
        elif a.kind != "auto":
            suffix += f"_vs_{kind}"
    else:
        if a.metric is not None:
            print(f"{PROG}: note: --metric ignored for kernel tables", file=sys.stderr)
        if a.stat != "mean" or a.ratio or a.heads != "auto" or a.layout != "auto":
            die(f"{path}: --stat, --ratio, --heads and --layout do not apply to kernel tables")

    out = a.out or default_out(a.result_dir, suffix)
    _check_outdir(out)
    try:
        if kind == "kernel":
            kernel_plot(path, header, table, cfg, out)
        elif kind == "angle":
            angle_plot(path, header, table, cfg, out)
        else:
            approx_plot(path, header, table, cfg, kind, metric, out, stat=a.stat,
                        xkey=(mkey if mkey != "m" else a.x) if kind == "m" else None,
                        ratio=a.ratio, heads=a.heads, layout=a.layout, mkey=mkey)
    except OSError as e:
        die(f"{out}: cannot write: {e}")
    if a.data:
        write_data(a.data, out, {"result_dir": a.result_dir, "kind": kind, "metric": metric,
                                 "stat": a.stat, "ratio": a.ratio})
    print(out)
    return 0


def _check_outdir(out):
    outdir = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(outdir):
        die(f"--out {out}: directory {outdir} does not exist")
