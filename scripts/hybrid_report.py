#!/usr/bin/python3
"""Figures and tables of the hybrid study (scripts/trained_heads.sh --hybrid, issue 38).

    hybrid_report.py STUDY_DIR DATA_DIR

Reads STUDY_DIR/<part>/layer<i>/ (part: main, w64, w256, fixed; summary.csv per head, run.json's
resolved variants, comparisons_output_rel_error.csv of `favor compare --match num_features`) and
DATA_DIR/manifest.json (which heads are causal); writes into STUDY_DIR:
  hybrid_vs_columns.png  per head, output_rel_error / uniform attention's (the mean of the
        visible rows of V) of the best variant of each family using at most B columns
        (F + w + s), B = 32 .. 512;
  hybrid_window_sweep.png  per head, at 128 and 512 columns, the error ratio against the window
        w (best over the sinks s), for the random remainders: where the window stops paying;
  README.md  per head: uniform's error; the best random-features-only, window-only and hybrid
        variant within 128 columns, each with its ratio to uniform and favor compare's verdict
        against uniform (Holm-adjusted, exact for deterministic variants); the equal-cost
        ablation at 64 and 256 columns (hybrid against window only and against features only);
        the deterministic remainders; the study's claims, computed from those rows.
Every number comes from those files.
"""
import argparse
import glob
import json
import os
import sys

import pandas as pd
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import matplotlib.ticker as ticker

METRIC = "output_rel_error"
PARTS = ["main", "w64", "w256", "fixed"]
BUDGETS = [32, 64, 128, 256, 512]
CLAIM_BUDGET, CLAIM_RATIO = 128, 0.4   # issue 38: the best hybrid within 128 columns at <= 0.4x uniform
RANDOM = ["positive", "sderf"]
# The ablation's compare families (trained_heads.sh --hybrid): each hybrid with a random remainder
# against each window-only variant, and against each features-only one, at equal columns.
ABLATIONS = ["window", "features"]
FAMILIES = [  # (label, selector on the rows, colour, marker)
    ("positive, no window", lambda r: (r.features == "positive") & (r.w == 0) & (r.s == 0), "tab:gray", "o"),
    ("sderf, no window", lambda r: (r.features == "sderf") & (r.w == 0) & (r.s == 0), "tab:brown", "o"),
    ("window only (none)", lambda r: r.features == "none", "black", "s"),
    ("positive + window/sinks", lambda r: (r.features == "positive") & (r.w + r.s > 0), "tab:blue", "^"),
    ("sderf + window/sinks", lambda r: (r.features == "sderf") & (r.w + r.s > 0), "tab:orange", "v"),
    ("elu + window/sinks", lambda r: r.features == "elu", "tab:green", "D"),
    ("hedgehog + window/sinks", lambda r: r.features == "hedgehog", "tab:purple", "P"),
]


def die(msg):
    print(f"hybrid_report.py: {msg}", file=sys.stderr)
    sys.exit(2)


def read_csv(path, **kw):
    if not os.path.isfile(path):
        die(f"{path}: missing (run scripts/trained_heads.sh --hybrid)")
    return pd.read_csv(path, **kw)


def load_part(study, part):
    """Every layer's summary rows of one part, with its variants' features, w, s and verdicts."""
    frames, verdicts = [], []
    for d in sorted(glob.glob(os.path.join(study, part, "layer*")), key=lambda p: int(p.rsplit("layer", 1)[1])):
        layer = int(d.rsplit("layer", 1)[1])
        s = read_csv(os.path.join(d, "summary.csv"))
        if "head" not in s.columns:
            die(f"{d}/summary.csv: no head column (the configs set per_head)")
        with open(os.path.join(d, "run.json")) as f:
            variants = {v["name"]: v for v in json.load(f)["config"]["variants"]}
        s["features"] = [variants[n]["features"] for n in s["variant"]]
        s["w"] = [int(variants[n].get("window", 0)) for n in s["variant"]]
        s["s"] = [int(variants[n].get("sinks", 0)) for n in s["variant"]]
        s["layer"], s["part"] = layer, part
        s["ratio"] = s[f"{METRIC}_mean"] / s[f"baseline_{METRIC}"]
        frames.append(s)
        # against uniform, then the ablation families where the study has them (a study compared
        # in one family of every pair, before the families were split, has only the first)
        names = [f"comparisons_{METRIC}.csv"] + [n for n in (f"ablation_{k}_{METRIC}.csv" for k in ABLATIONS)
                                                  if os.path.isfile(os.path.join(d, n))]
        for name in names:
            c = read_csv(os.path.join(d, name), dtype=str, keep_default_na=False)
            c["layer"] = layer
            verdicts.append(c)
    if not frames:
        die(f"{study}/{part}: no layer*/ result sets (run scripts/trained_heads.sh --hybrid)")
    return pd.concat(frames, ignore_index=True), pd.concat(verdicts, ignore_index=True)


def verdict(comp, layer, head, F, a, b):
    """favor compare's verdict of a against b in the cell (layer, head, F), from a's side."""
    c = comp[(comp["layer"] == layer) & (comp["head"] == str(head)) & (comp["num_features"].astype(float) == F)]
    flip = {"a better": "a worse", "a worse": "a better"}
    hit = c[(c["a"] == a) & (c["b"] == b)]
    if len(hit):
        return hit.iloc[0]["verdict"]
    hit = c[(c["a"] == b) & (c["b"] == a)]
    return flip.get(hit.iloc[0]["verdict"], hit.iloc[0]["verdict"]) if len(hit) else "not compared"


def best(rows, budget):
    """The row of least mean error among `rows` with at most `budget` columns (None if none)."""
    r = rows[rows["num_features"] <= budget]
    return None if r.empty else r.loc[r[f"{METRIC}_mean"].idxmin()]


def heads(df):
    return sorted({(int(l), int(h)) for l, h in zip(df["layer"], df["head"])})


def head_grid(n):
    cols = min(4, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.0 * rows), sharex=True, squeeze=False)
    return fig, axes.ravel()


def finish_grid(fig, axes, n, xlabel, title, ncol, path):
    """Labels, one legend below the panels, the title; saves the figure."""
    for ax in axes[n:]:
        ax.axis("off")
    for ax in axes[::4]:
        ax.set_ylabel(f"{METRIC} / uniform's")
    for ax in axes[-4:]:
        ax.set_xlabel(xlabel)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 0.97))
    fig.savefig(path, dpi=130)
    plt.close(fig)


def log_axes(ax, ticks, at, title):
    ax.axhline(1.0, color="red", lw=0.8, ls="--", label="uniform attention (mean of V)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xticks(at, [str(t) for t in ticks])
    ax.xaxis.set_minor_locator(ticker.NullLocator())
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)


def plot_vs_columns(df, path, where):
    hs = heads(df)
    fig, axes = head_grid(len(hs))
    for ax, (layer, head) in zip(axes, hs):
        h = df[(df["layer"] == layer) & (df["head"] == head)]
        for label, sel, colour, marker in FAMILIES:
            rows = h[sel(h)]
            pts = [(b, best(rows, b)) for b in BUDGETS]
            pts = [(b, r["ratio"]) for b, r in pts if r is not None]
            if pts:
                ax.plot(*zip(*pts), marker=marker, color=colour, label=label, lw=1.2, ms=4)
        ax.axhline(CLAIM_RATIO, color="0.6", lw=0.8, ls=":", label=f"{CLAIM_RATIO}x uniform")
        log_axes(ax, BUDGETS, BUDGETS, f"layer {layer} head {head} (uniform {h[f'baseline_{METRIC}'].iloc[0]:.2f})")
    finish_grid(fig, axes, len(hs), "columns F + w + s (best within)",
                f"Hybrids on {where}'s causal heads: the best of each family within a column budget "
                "(lower is better; mean of the trials)", 5, path)


def plot_window_sweep(df, path):
    hs = heads(df)
    fig, axes = head_grid(len(hs))
    colours = {"positive": "tab:blue", "sderf": "tab:orange"}
    ticks = [0, 4, 16, 64, 256]
    for ax, (layer, head) in zip(axes, hs):
        h = df[(df["layer"] == layer) & (df["head"] == head)]
        for f in RANDOM:
            for budget, ls in [(512, "-"), (128, "--")]:
                rows = h[(h["features"] == f) & (h["num_features"] == budget)]
                pts = sorted((w, g["ratio"].min()) for w, g in rows.groupby("w"))
                if pts:   # w + 1 on the log axis, so that w = 0 has a place
                    ax.plot([w + 1 for w, _ in pts], [r for _, r in pts], ls=ls, marker="o", ms=3.5,
                            color=colours[f], label=f"{f} remainder, {budget} columns")
        none = h[(h["features"] == "none") & h["w"].isin(ticks)].groupby("w")["ratio"].min()
        ax.plot([w + 1 for w in none.index], none.values, ls="", marker="s", ms=4, color="black",
                label="window only (none), its own w + s columns")
        log_axes(ax, ticks, [t + 1 for t in ticks], f"layer {layer} head {head}")
    finish_grid(fig, axes, len(hs), "window w (best over sinks s)",
                "Where the window stops paying: the error at a fixed column budget against the window "
                "(lower is better)", 3, path)


def cell(r, comp, against="uniform"):
    """'name (F) ratio verdict' of a summary row against `against` in its own cell."""
    if r is None:
        return "-", "-", "-"
    v = verdict(comp[r["part"]], r["layer"], r["head"], r["num_features"], r["variant"], against)
    return f"{r['variant']} ({int(r['num_features'])})", f"{r['ratio']:.3f}", v


def within_table(df, comp):
    """Per head, the best of each kind within CLAIM_BUDGET columns, against uniform."""
    lines = [f"| layer | head | uniform's {METRIC} | features only, best | ratio | verdict | window only, best | ratio | verdict "
             "| hybrid, best | ratio | verdict |", "|" + "---|" * 12]
    claims = []
    for layer, head in heads(df):
        h = df[(df["layer"] == layer) & (df["head"] == head)]
        kinds = [h[h["features"].isin(RANDOM) & (h["w"] + h["s"] == 0)], h[h["features"] == "none"],
                 h[(h["features"] != "none") & (h["w"] + h["s"] > 0)]]
        got = [best(k, CLAIM_BUDGET) for k in kinds]
        row = [str(layer), str(head), f"{h[f'baseline_{METRIC}'].iloc[0]:.3f}"]
        for r in got:
            row += list(cell(r, comp))
        lines.append("| " + " | ".join(row) + " |")
        claims.append((layer, head, got))
    return lines, claims


def ablation_rows(df, comp):
    """At equal columns B, per run (part) holding window-only and hybrid cells at exactly B: the
    best hybrid (random remainder) against the best window-only cell and, where the run has
    them, the best features-only cell, with compare's verdicts (one family per run)."""
    out = []
    for layer, head in heads(df):
        for b in BUDGETS:
            for part in PARTS:
                at = df[(df["layer"] == layer) & (df["head"] == head) & (df["part"] == part) & (df["num_features"] == b)]
                win = best(at[at["features"] == "none"], b)
                hyb = best(at[at["features"].isin(RANDOM) & (at["w"] + at["s"] > 0)], b)
                if win is None or hyb is None:
                    continue
                feat = best(at[at["features"].isin(RANDOM) & (at["w"] + at["s"] == 0)], b)
                vs = lambda o: verdict(comp[part], layer, head, b, hyb["variant"], o["variant"]).replace("a ", "hybrid ")
                out.append(dict(layer=layer, head=head, b=b, win=win, hyb=hyb, feat=feat,
                                vs_win=vs(win), vs_feat=vs(feat) if feat is not None else "-"))
    return out


def ablation_table(rows):
    lines = ["| layer | head | columns | window only, best | ratio | features only, best | ratio | hybrid, best | ratio "
             "| hybrid vs window only | hybrid vs features only |", "|" + "---|" * 11]
    for r in rows:
        feat = [r["feat"]["variant"], f"{r['feat']['ratio']:.3f}"] if r["feat"] is not None else ["-", "-"]
        lines.append("| " + " | ".join([str(r["layer"]), str(r["head"]), str(r["b"]), r["win"]["variant"],
                                        f"{r['win']['ratio']:.3f}"] + feat +
                                       [r["hyb"]["variant"], f"{r['hyb']['ratio']:.3f}", r["vs_win"], r["vs_feat"]]) + " |")
    return lines


def fixed_table(df, comp):
    """The deterministic remainders: per head, the best of each map (at its own F + w + s)."""
    maps = sorted(set(df.loc[df["part"] == "fixed", "features"]))
    lines = ["| layer | head | " + " | ".join(f"{m}: best (columns) | ratio" for m in maps) + " |",
             "|" + "---|" * (2 + 2 * len(maps))]
    for layer, head in heads(df):
        h = df[(df["layer"] == layer) & (df["head"] == head) & (df["part"] == "fixed")]
        row = [str(layer), str(head)]
        for m in maps:
            r = best(h[h["features"] == m], float("inf"))
            row += [f"{r['variant']} ({int(r['num_features'])})", f"{r['ratio']:.3f}"]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def claim_lines(claims, ablation):
    hits = [(l, h, g[2]) for l, h, g in claims if g[2] is not None and g[2]["ratio"] <= CLAIM_RATIO]
    miss = [(l, h, g[2]) for l, h, g in claims if g[2] is None or g[2]["ratio"] > CLAIM_RATIO]
    out = [f"- The best hybrid within {CLAIM_BUDGET} columns is at most {CLAIM_RATIO}x uniform's {METRIC} on "
           f"{len(hits)} of {len(claims)} causal heads" + (":" if not miss else "; not on:")]
    out += [f"  layer {l} head {h}: {r['variant']} at {int(r['num_features'])} columns, {r['ratio']:.3f}x"
            for l, h, r in miss if r is not None]
    win_better = sum(1 for _, _, g in claims if g[1] is not None and g[2] is not None and g[1]["ratio"] <= g[2]["ratio"])
    out.append(f"- Window only is the best kind within {CLAIM_BUDGET} columns on {win_better} of {len(claims)} heads "
               "(by mean; the ablation table tests it at equal columns).")
    for b in BUDGETS:
        got = [r["vs_win"] for r in ablation if r["b"] == b]
        if got:
            out.append(f"- At {b} columns, the best hybrid of a run against window only at the same columns: " +
                       ", ".join(f"{v} in {got.count(v)}" for v in sorted(set(got))) +
                       f" of {len(got)} comparisons (head x run).")
    feats = [g[0]["ratio"] for _, _, g in claims if g[0] is not None]
    if feats:
        out.append(f"- Random features alone within {CLAIM_BUDGET} columns: {min(feats):.3f}x to {max(feats):.3f}x uniform.")
    return out


def ablation_pairs(result_dir, kind):
    """`favor compare --pairs` of one ablation family of a result set (run.json's variants): every
    hybrid with a random remainder (a) against every window-only (kind "window") or features-only
    (kind "features") variant (b)."""
    with open(os.path.join(result_dir, "run.json")) as f:
        vs = json.load(f)["config"]["variants"]
    support = lambda v: int(v.get("window", 0)) + int(v.get("sinks", 0))
    hyb = [v["name"] for v in vs if v["features"] in RANDOM and support(v) > 0]
    other = [v["name"] for v in vs if (v["features"] == "none" if kind == "window" else
                                        v["features"] in RANDOM and support(v) == 0)]
    return ",".join(f"{a}:{b}" for a in hyb for b in other)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 usage="%(prog)s STUDY_DIR DATA_DIR | --pairs-of RESULT_DIR --kind window|features")
    ap.add_argument("study", nargs="?")
    ap.add_argument("data", nargs="?")
    ap.add_argument("--pairs-of", help="print the --pairs list of an ablation family of RESULT_DIR and stop")
    ap.add_argument("--kind", choices=ABLATIONS)
    a = ap.parse_args()
    if a.pairs_of:
        if not a.kind:
            ap.error("--pairs-of needs --kind")
        print(ablation_pairs(a.pairs_of, a.kind))
        return
    if not a.study or not a.data:
        ap.error("STUDY_DIR and DATA_DIR are required")
    parts = {p: load_part(a.study, p) for p in PARTS}
    df = pd.concat([parts[p][0] for p in PARTS], ignore_index=True)
    comp = {p: parts[p][1] for p in PARTS}
    with open(os.path.join(a.data, "manifest.json")) as f:
        manifest = json.load(f)
    if not all(layer.get("causal", True) for layer in manifest.get("layers", [])):
        die(f"{a.data}/manifest.json: a layer is not causal (the study runs every head causal)")
    where = os.path.relpath(os.path.abspath(a.data), os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    plot_vs_columns(df, os.path.join(a.study, "hybrid_vs_columns.png"), where)
    plot_window_sweep(df, os.path.join(a.study, "hybrid_window_sweep.png"))
    trials = sorted(set(int(t) for t in df.loc[df["part"] != "fixed", "trials"]))
    within, claims = within_table(df, comp)
    ablation = ablation_rows(df, comp)
    text = [f"# Hybrids on the heads of {where}/'s model (issue 38)", "",
            "Written by scripts/hybrid_report.py from the result sets beside this file "
            "(scripts/trained_heads.sh --hybrid); every number is read from them.", "",
            f"Causal, every head of {where}/'s {len(heads(df))} heads (L = {int(df['L'].iloc[0])}, d = {int(df['d'].iloc[0])}); "
            f"metric {METRIC}; ratio = the variant's mean over {', '.join(map(str, trials))} trials / uniform attention's "
            "(the mean of the visible rows of V: the baseline). Columns = F + w + s (a window or sink key costs a score "
            "and a value row, like a feature column). Verdicts: `favor compare --match num_features` (sign-flip "
            "permutation tests, alpha 0.05; `exact`: both sides deterministic, the difference is exact), Holm within "
            "each of a run's families: every variant against uniform (`--against uniform`), and for the ablation each "
            "hybrid against each window-only variant and against each features-only one at equal columns (`--pairs`; "
            "trained_heads.sh). Results compared in one family of every pair (before session 18) are read as they "
            "are.", "", "## Claims", ""] + claim_lines(claims, ablation)
    text += ["", f"## Within {CLAIM_BUDGET} columns, against uniform", ""] + within
    text += ["", "## The ablation at equal columns: window only, features only, both", "",
             "Per run (main: w <= 16; w64, w256: those windows), the best cell of each kind at exactly that many "
             "columns; verdicts within the run's compare family.", ""] + ablation_table(ablation)
    text += ["", "## The deterministic remainders (their own F + w + s; 2 trials, every trial equal)", ""] + fixed_table(df, comp)
    text += ["", "![best per family against columns](hybrid_vs_columns.png)", "",
             "![error against the window](hybrid_window_sweep.png)", ""]
    with open(os.path.join(a.study, "README.md"), "w") as f:
        f.write("\n".join(text))


if __name__ == "__main__":
    main()
