#!/usr/bin/python3
"""Figures of the kernel experiment's bias columns and unequal norms (docs/results.md).

Usage: /usr/bin/python3 scripts/plot_kernel_bias.py RESULT_DIR --out PNG

By the table's columns (RESULT_DIR/summary.csv of a kernel run):
  with `rel_bias_theory` and no `norm_y`  (configs/fixed_norm_bias.json): the measured relative
        bias (points, +- 2 standard errors of the mean over trials) against its closed form
        (lines; the Bessel kernel of fixed norms, 0 for Gaussian rows) vs d, one panel per norm;
  with `norm_x`, `norm_y` (configs/kernel_unequal_norms.json): the kernel MSE of every
        variant divided by the first variant's (oprf), vs norm_x / norm_y, one panel per angle,
        with the ratio's +- 2 standard errors (delta method, the two MSEs independent).
Log axes; the title names the band.
"""
import argparse
import csv
import math
import os
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt


def rows_of(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def bias_figure(rows, out):
    norms = sorted({float(r["norm"]) for r in rows})
    fig, axes = plt.subplots(1, len(norms), figsize=(5.5 * len(norms), 4.2), squeeze=False)
    feats = list(dict.fromkeys(r["features"] for r in rows))
    projs = list(dict.fromkeys(r["projection"] for r in rows))
    markers = "osD^v<>"
    for ax, n in zip(axes[0], norms):
        drawn = set()   # one closed-form line per (features, values): fixed-norm projections share it
        for v in dict.fromkeys(r["variant"] for r in rows):
            sel = sorted((r for r in rows if r["variant"] == v and float(r["norm"]) == n), key=lambda r: int(r["d"]))
            f, p = sel[0]["features"], sel[0]["projection"]
            c, mk = "C%d" % feats.index(f), markers[projs.index(p) % len(markers)]
            d = [int(r["d"]) for r in sel]
            off = 1.0 + 0.04 * (projs.index(p) - (len(projs) - 1) / 2)   # side by side at each d
            ax.errorbar([di * off for di in d], [float(r["rel_bias"]) for r in sel],
                        yerr=[2 * float(r["rel_bias_sem"]) for r in sel], fmt=mk, ms=4, color=c, capsize=2,
                        label="%s, %s: measured" % (f, p))
            th = tuple((di, float(r["rel_bias_theory"])) for di, r in zip(d, sel) if r["rel_bias_theory"])
            if th and (f, th) not in drawn:
                drawn.add((f, th))
                ax.plot([t[0] for t in th], [t[1] for t in th], "-", color=c, lw=1,
                        label="%s: closed form%s" % (f, " (fixed norms)" if any(t[1] for t in th) else " (0)"))
        ax.set_xscale("log", base=2)
        ax.axhline(0, color="k", lw=0.5)
        ax.set_xlabel("d")
        ax.set_ylabel("E[estimate] / SM - 1")
        ax.set_title("|x| = |y| = %g, angle %s" % (n, sel[0]["angle"] if sel else "?"), fontsize=10)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Relative bias vs d (points: mean over trials, bars: +-2 standard errors; lines: closed form)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def ratio_figure(rows, out):
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    base = variants[0]
    angles = sorted({float(r["angle"]) for r in rows})
    key = lambda r: (float(r["norm_x"]), float(r["norm_y"]), float(r["angle"]))
    ref = {key(r): r for r in rows if r["variant"] == base}
    fig, axes = plt.subplots(1, len(angles), figsize=(5 * len(angles), 4.2), squeeze=False)
    for ax, a in zip(axes[0], angles):
        for k, v in enumerate(variants[1:], start=1):
            sel = sorted((r for r in rows if r["variant"] == v and float(r["angle"]) == a),
                         key=lambda r: float(r["norm_x"]) / float(r["norm_y"]))
            x, y, e = [], [], []
            for r in sel:
                b = ref[key(r)]
                m, mb = float(r["mse"]), float(b["mse"])
                q = m / mb
                x.append(float(r["norm_x"]) / float(r["norm_y"]))
                y.append(q)
                e.append(2 * q * math.hypot(float(r["mse_sem"]) / m, float(b["mse_sem"]) / mb))
            ax.errorbar(x, y, yerr=e, fmt="o-", ms=4, lw=1, color="C%d" % k, capsize=2, label=v)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.axhline(1, color="k", lw=0.5)
        ax.set_xlabel("|x| / |y|  (|y| = %s)" % rows[0]["norm_y"])
        ax.set_ylabel("kernel MSE / %s's" % base)
        ax.set_title("angle %g, d = %s, m = %s" % (a, rows[0]["d"], rows[0]["m"]), fontsize=10)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Kernel MSE relative to %s with |x| != |y| (bars: +-2 standard errors of the ratio)" % base,
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main():
    ap = argparse.ArgumentParser(usage="plot_kernel_bias.py RESULT_DIR --out PNG",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("result_dir")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    path = os.path.join(a.result_dir, "summary.csv")
    if not os.path.isfile(path):
        ap.error("%s: no summary.csv" % a.result_dir)
    rows = rows_of(path)
    cols = rows[0].keys() if rows else []
    if "norm_y" in cols:
        ratio_figure(rows, a.out)
    elif "rel_bias_theory" in cols:
        bias_figure(rows, a.out)
    else:
        ap.error("%s: a kernel table with norm_x/norm_y or rel_bias columns is needed" % path)
    print("plot_kernel_bias.py: wrote %s" % a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
