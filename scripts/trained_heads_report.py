#!/usr/bin/python3
"""Figure and table of the trained-heads study (scripts/trained_heads.sh).

    trained_heads_report.py OUT_DIR DATA_DIR

Reads OUT_DIR/trained_heads/layer<i>/ (causal) and OUT_DIR/trained_heads_noncausal/layer<i>/
(summary.csv per head, comparisons_<metric>.csv from `favor compare`) and the captured heads in
DATA_DIR/layer<i>/{q,k}.npy; writes
  OUT_DIR/trained_heads_vs_entropy.png  each estimator's output_rel_error divided by uniform
        attention's (the mean of the visible rows of V) on the same head, against the head's
        mean row entropy / the uniform entropy of its rows (scripts/head_stats.py), one panel
        per (causal or not, feature budget F);
  OUT_DIR/trained_heads.md  per head and budget: uniform attention's error, the estimator with
        the lowest mean error and its ratio to uniform's, and the estimators whose error is
        below uniform's by `favor compare`'s verdict (a better against uniform, Holm-adjusted).
Every number comes from those files.
"""
import argparse
import glob
import math
import os
import sys

import numpy as np
import pandas as pd
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import matplotlib.ticker

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
from head_stats import all_head_stats  # noqa: E402

METRIC = "output_rel_error"
STUDIES = [("trained_heads", True, "causal"), ("trained_heads_noncausal", False, "non-causal")]


def die(msg):
    print(f"trained_heads_report.py: {msg}", file=sys.stderr)
    sys.exit(2)


def budget_column(df):
    return "num_features" if "num_features" in df.columns else "m"


def load_study(out, name, causal, data):
    """Rows of every layer's summary.csv, with layer, head entropy ratio and verdicts."""
    frames = []
    for d in sorted(glob.glob(os.path.join(out, name, "layer*")), key=lambda p: int(p.rsplit("layer", 1)[1])):
        layer = int(d.rsplit("layer", 1)[1])
        s = pd.read_csv(os.path.join(d, "summary.csv"))
        if "head" not in s.columns:
            die(f"{d}/summary.csv: no head column (the configs set per_head)")
        q = np.load(os.path.join(data, f"layer{layer}", "q.npy"))
        k = np.load(os.path.join(data, f"layer{layer}", "k.npy"))
        stats = all_head_stats(q, k, causal=causal)
        s["layer"] = layer
        s["entropy_ratio"] = [stats[int(h)]["entropy_ratio"] for h in s["head"]]
        s["entropy"] = [stats[int(h)]["entropy"] for h in s["head"]]
        s["beats_uniform"] = verdicts(d, s)
        frames.append(s)
    if not frames:
        die(f"{out}/{name}: no layer*/ result sets (run scripts/trained_heads.sh)")
    return pd.concat(frames, ignore_index=True)


def verdicts(d, s):
    """Per summary row: favor compare's verdict of the variant against uniform attention."""
    path = os.path.join(d, f"comparisons_{METRIC}.csv")
    if not os.path.isfile(path):
        die(f"{path}: missing (run favor compare {d})")
    c = pd.read_csv(path, dtype=str, keep_default_na=False)
    c = c[(c["b"] == "uniform") & (c["metric"] == METRIC)]
    key = budget_column(s)   # compare keys its cells by the same column
    if key not in c.columns:
        die(f"{path}: no {key} column (rerun favor compare {d})")
    got = {(r["a"], int(r["head"]), int(float(r[key]))): r["verdict"] for _, r in c.iterrows()}
    return [got.get((r["variant"], int(r["head"]), int(r[key])), "") for _, r in s.iterrows()]


YLIM = (0.3, 3.0)   # ratios to uniform attention's error drawn; beyond, named in the panel


def fixed_budget(df):
    """Rows of maps whose F is set by d (elu, dpfp: one cell at their own F)."""
    return df["features"].isin(["elu", "dpfp"])


def figure(studies, out, data):
    budgets = sorted({int(b) for df in studies.values() for b in df.loc[~fixed_budget(df), budget_column(df)]})
    fig, axes = plt.subplots(len(studies), len(budgets), figsize=(5.2 * len(budgets), 4.2 * len(studies)),
                             squeeze=False, sharey=True)
    variants = list(dict.fromkeys(v for df in studies.values() for v in df["variant"]))
    colors = {v: f"C{i % 10}" for i, v in enumerate(variants)}
    markers = dict(zip(variants, "os^vDP*Xph<>d8H"))
    for ri, (label, df) in enumerate(studies.items()):
        key = budget_column(df)
        for ci, F in enumerate(budgets):
            ax = axes[ri][ci]
            off = []
            for v in variants:
                r = df[df["variant"] == v]
                fixed = not r.empty and bool(fixed_budget(r).iloc[0])
                r = (r if fixed else r[r[key] == F]).sort_values("entropy_ratio")
                if r.empty:
                    continue
                y = r[f"{METRIC}_mean"] / r[f"baseline_{METRIC}"]
                if (y > YLIM[1]).any() or (y < YLIM[0]).any():
                    off.append(f"{v}: {y.min():.3g} to {y.max():.3g}")
                if y.isna().any():   # a head whose output had NaN/Inf entries (summary's nonfinite)
                    off.append(f"{v}: not drawn on {int(y.isna().sum())} head(s), non-finite output")
                own = f" (its own F = {int(r[key].iloc[0])})" if fixed else ""
                ax.plot(r["entropy_ratio"], y, marker=markers[v], color=colors[v], lw=0.7, ms=5,
                        label=v + own, ls=":" if fixed else "-")
            ax.axhline(1.0, color="0.45", ls=(0, (5, 3)), lw=1.4, label="uniform attention (mean of V) = 1")
            ax.set_yscale("log")
            ax.set_ylim(*YLIM)
            ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            if off:
                ax.text(0.02, 0.97, "not in the panel:\n" + "\n".join(off), transform=ax.transAxes, va="top",
                        fontsize=7, color="0.3")
            ax.set_title(f"{label}, F = {F} feature columns")
            ax.set_xlabel("head's mean row entropy / uniform entropy of its rows")
            ax.grid(alpha=0.3, which="both")
            if ci == 0:
                ax.set_ylabel(f"{METRIC} (estimator, mean of {int(df['trials'].iloc[0])} trials)\n"
                              f"/ {METRIC} (uniform attention)")
    handles, labels = {}, {}
    for row in axes:
        for ax in row:
            for h, l in zip(*ax.get_legend_handles_labels()):
                handles.setdefault(l, h)
    fig.legend(list(handles.values()), list(handles.keys()), loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    L, d = np.load(os.path.join(data, "layer0", "q.npy"), mmap_mode="r").shape[-2:]
    fig.suptitle(f"Estimators on a trained LM's heads ({os.path.relpath(data, ROOT)}), L = {L}, d = {d}, one point per head:\n"
                 "relative output error divided by uniform attention's on the same head (below 1: better than the mean of V)")
    fig.tight_layout()
    path = os.path.join(out, "trained_heads_vs_entropy.png")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path


def ratio(g, v):
    r = g[g["variant"] == v]
    return float((r[f"{METRIC}_mean"] / r[f"baseline_{METRIC}"]).iloc[0]) if len(r) else float("nan")


def table(studies, out, data):
    lines = ["# Trained heads: estimators against uniform attention", "",
             f"Metric: {METRIC}, mean of the trials, divided by uniform attention's on the same head (below 1: "
             "better than the mean of the visible rows of V). 'best' is the softmax estimator (a random feature "
             "map) with the lowest mean at that feature budget F; 'below uniform' lists every variant whose error "
             "`favor compare` finds below uniform attention's (one-sample sign-flip test of its trials, "
             "Holm-adjusted over the layer's comparisons, alpha 0.05; elu, dpfp and nystrom are deterministic: "
             "their difference is exact). elu and dpfp run at their own F (d and 2d). Written by "
             "scripts/trained_heads_report.py from results/trained_heads*/layer*/ (heads of "
             f"{os.path.relpath(data, ROOT)}).", ""]
    for label, df in studies.items():
        key = budget_column(df)
        budgets = sorted({int(b) for b in df.loc[~fixed_budget(df), key]})
        fixed = list(dict.fromkeys(df.loc[fixed_budget(df), "variant"]))
        det = [v for v in fixed + (["nystrom"] if "nystrom" in set(df["variant"]) else [])]
        head = ["layer.head", "entropy ratio", "uniform's error"]
        for F in budgets:
            head += [f"best at F = {F}", "ratio"] + (["nystrom"] if "nystrom" in det else [])
        head += [f"{v} (F = {int(df.loc[df['variant'] == v, key].iloc[0])})" for v in fixed] + ["below uniform"]
        lines += [f"## {label}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for (layer, h), g in df.groupby(["layer", "head"]):
            row = [f"{layer}.{h}", f"{g['entropy_ratio'].iloc[0]:.3f}", f"{g[f'baseline_{METRIC}'].iloc[0]:.4g}"]
            below = []
            for F in budgets:
                gf = g[(g[key] == F) & ~fixed_budget(g)]
                rnd = gf[~gf["variant"].isin(det)]
                best = rnd.loc[rnd[f"{METRIC}_mean"].idxmin()]
                row += [best["variant"], f"{ratio(gf, best['variant']):.3g}"]
                if "nystrom" in det:
                    row.append(f"{ratio(gf, 'nystrom'):.3g}")
                below += [f"{v} ({F})" for v, vd in zip(gf["variant"], gf["beats_uniform"]) if vd == "a better"]
            row += [f"{ratio(g, v):.3g}" for v in fixed]
            below += [v for v, vd in zip(g.loc[fixed_budget(g), "variant"], g.loc[fixed_budget(g), "beats_uniform"])
                      if vd == "a better"]
            lines.append("| " + " | ".join(row + [", ".join(below) or "-"]) + " |")
        lines.append("")
    path = os.path.join(out, "trained_heads.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path


def main():
    ap = argparse.ArgumentParser(usage="%(prog)s OUT_DIR DATA_DIR   (scripts/trained_heads.sh runs it)",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("out", metavar="OUT_DIR", help="holds trained_heads*/layer<i>/; the figure and table go here")
    ap.add_argument("data", metavar="DATA_DIR", help="the captured heads, DATA_DIR/layer<i>/{q,k}.npy")
    a = ap.parse_args()
    out, data = a.out, a.data
    studies = {label: load_study(out, name, causal, data) for name, causal, label in STUDIES
               if os.path.isdir(os.path.join(out, name))}
    if not studies:
        die(f"{out}: no trained_heads*/ result sets")
    print(figure(studies, out, data))
    print(table(studies, out, data))


if __name__ == "__main__":
    main()
