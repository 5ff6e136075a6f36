#!/usr/bin/python3
"""What the approximation does to the model, and which head metric predicts it (issue 39 item 3).

The ladder: the model's held-out bits per byte with the attention of each layer alone, and of
all layers, computed by FAVOR+ (positive, orthogonal), FAVOR++ (oprf, orthogonal), FAVOR# (sderf,
orthogonal) at every feature budget, the parameter-free maps (elu, taylor2, hedgehog untrained)
at their own, and the hybrids (an exact window of the last B keys alone; positive features
with a window of B/2 keys and m = B/2), uniform attention the baseline (favor.swap_in; verdicts
from favor compare --match num_features --against uniform on delta_bits_per_byte).

The link: the same estimators and budgets on the model's captured heads (favor run on each
capture's layers: output_rel_error, attention_tv, attention_kl, mean over the heads, the
captures and the trials), and per layer the Spearman rank correlation between each head metric
and the layer's delta bits per byte over the (estimator, budget) points, with a 95% interval
(Fisher z with the Fieller-Hartley-Pearson variance 1.06 / (n - 3)).

Two swap-in result sets: OUT/ladder/ (every layer set of --layers at --budgets with --trials: the
link's points; few trials) and OUT/powered/ (all layers at --powered-budgets with --powered-trials,
enough for compare's verdicts against uniform: a sign-flip test over n trials reaches p = 2/2^n,
and Holm multiplies by the family's size, 20 rows at 5 budgets: n = 10 gives 0.039). Writes also
OUT/heads/excerpt<e>_layer<l>/ (favor result sets), OUT/link.csv, OUT/ladder.png and
OUT/powered.png (scripts/plot.py), OUT/link.png, OUT/study.json (settings and minutes per part)
and OUT/README.md (every number computed here). --parts runs some parts and keeps the others.

    PYTHONPATH=build/python /usr/bin/python3 scripts/swap_in_study.py [--model data/lm16/tiny_lm.pt]
        [--captures 'data/lm16/excerpt*'] [--out results/swap_in] [--windows 64] [--trials 2]
        [--budgets 32,128,512] [--layers all,0,1,2,3] [--powered-trials 10]
        [--powered-budgets 32,64,128,256,512] [--parts ladder,powered,heads] [--threads 2]
        [--report-only]
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
HEAD_METRICS = ["output_rel_error", "attention_tv", "attention_kl"]
RANDOM = {"FAVOR+": ("positive", "orthogonal"), "FAVOR++": ("oprf", "orthogonal"),
          "FAVOR#": ("sderf", "orthogonal")}
FIXED = ["elu", "taylor2", "hedgehog"]


def die(msg):
    print(f"swap_in_study.py: {msg}", file=sys.stderr)
    sys.exit(2)


def variants(budgets):
    """The estimators as swap-in variants (names are the tables' variant names; the windows
    alone share the name "window" and the hybrids "FAVOR+window": each budget is its own cell)."""
    out = [{"name": name, "features": f, "projection": p, "m": list(budgets)} for name, (f, p) in RANDOM.items()]
    out += [{"name": f, "features": f} for f in FIXED]
    out += [{"name": "window", "features": "none", "window": b} for b in budgets]
    out += [{"name": "FAVOR+window", "features": "positive", "projection": "orthogonal", "window": b // 2,
             "m": [b // 2]} for b in budgets if b >= 2]
    return out


def run_groups(budgets):
    """The estimators of variants() as favor run configs' (variants, m grid): the random maps
    at m = budgets, the maps without m at m = 1 (unused), each window alone and each window +
    FAVOR+ on its own (one name per config)."""
    plain = lambda v: {k: x for k, x in v.items() if k != "m"}
    vs = variants(budgets)
    return ([([plain(v) for v in vs if v["name"] in RANDOM], list(budgets)),
             ([plain(v) for v in vs if v["name"] in FIXED], [1])]
            + [([plain(v)], v.get("m", [1])) for v in vs if v["name"] in ("window", "FAVOR+window")])


def ranks(a):
    """Ranks 1..n, ties given their average rank."""
    a = np.asarray(a, dtype=float)
    r = np.empty(len(a))
    r[np.argsort(a, kind="mergesort")] = np.arange(1, len(a) + 1)
    for v in np.unique(a):
        tie = a == v
        if tie.sum() > 1:
            r[tie] = r[tie].mean()
    return r


def spearman(x, y):
    """Spearman's rho and its 95% interval: Fisher z with variance 1.06 / (n - 3) (Fieller,
    Hartley and Pearson 1957); (rho, low, high, n)."""
    n = len(x)
    rho = float(np.corrcoef(ranks(x), ranks(y))[0, 1]) if n > 1 else math.nan
    if n < 4 or not np.isfinite(rho):
        return rho, math.nan, math.nan, n
    z, se = math.atanh(max(min(rho, 1 - 1e-12), -1 + 1e-12)), math.sqrt(1.06 / (n - 3))
    return rho, math.tanh(z - 1.96 * se), math.tanh(z + 1.96 * se), n


def swap(a, model, windows, out, part, spec, trials, budgets):
    """One swap-in result set OUT/PART (layer sets SPEC, TRIALS, BUDGETS) and compare's tables
    on it: PART "ladder" (the link's points) or "powered" (enough trials for compare's verdicts)."""
    import favor
    layers = [x if x == "all" else int(x) for x in spec.split(",")]
    favor.swap_in(model, windows, variants(budgets), layers=layers, trials=trials, seed=0,
                  out=os.path.join(out, part), threads=a.threads, progress=True,
                  model_name=os.path.relpath(a.model, ROOT))
    favor.compare(os.path.join(out, part), metric="delta_bits_per_byte", match="num_features",
                  against="uniform", write=True)
    return {"layers": spec, "trials": trials, "budgets": budgets}


def head_runs(a, out):
    """favor run of every estimator on every captured layer (mean over heads) -> OUT/heads/."""
    import favor
    # Relative --captures are under the repository, named from the working directory (as favor.run
    # resolves a config dict's paths: from the repository they stay as given, no path of this machine).
    pattern = a.captures if os.path.isabs(a.captures) else os.path.relpath(os.path.join(ROOT, a.captures))
    captures = sorted(glob.glob(pattern))
    if not captures:
        die(f"--captures {a.captures}: no folder matches")
    for e, cap in enumerate(captures):
        man = json.load(open(os.path.join(cap, "manifest.json")))
        for lay in man["layers"]:
            inputs = {"source": "npy", **{w: os.path.join(cap, lay["files"][w]["path"]) for w in "qkv"}}
            for g, (vs, ms) in enumerate(run_groups(a.budgets)):   # one run per m grid
                cfg = {"experiment": "approximation", "causal": True, "seed": 0, "trials": a.trials,
                       "metrics": HEAD_METRICS, "m": ms, "inputs": inputs, "variants": vs}
                favor.run(cfg, out=os.path.join(out, "heads", f"excerpt{e}_layer{lay['index']}", f"group{g}"),
                          threads=a.threads)
    return len(captures)


def link(out):
    """Per layer (and all layers): Spearman of each head metric against delta bits per byte over
    the (estimator, budget) points the ladder and the head runs share."""
    import pandas as pd
    lad = pd.read_csv(os.path.join(out, "ladder", "summary.csv"), dtype={"layers": str})
    heads = []
    for d in sorted(glob.glob(os.path.join(out, "heads", "excerpt*_layer*", "group*"))):
        s = pd.read_csv(os.path.join(d, "summary.csv"))
        s["layer"] = int(os.path.dirname(d).rsplit("_layer", 1)[1])
        heads.append(s)
    h = pd.concat(heads)
    hm = h.groupby(["layer", "variant", "num_features"])[[f"{m}_mean" for m in HEAD_METRICS]].mean().reset_index()
    rows, points = [], []
    for label in lad["layers"].unique():
        y = lad[lad["layers"] == label][["variant", "num_features", "delta_bits_per_byte_mean"]]
        x = hm if label == "all" else hm[hm["layer"] == int(label)]
        x = x.groupby(["variant", "num_features"]).mean(numeric_only=True).reset_index()
        j = y.merge(x, on=["variant", "num_features"])
        for _, r in j.iterrows():
            points.append({"layers": label, "variant": r["variant"], "num_features": int(r["num_features"]),
                           "delta_bits_per_byte": r["delta_bits_per_byte_mean"],
                           **{m: r[f"{m}_mean"] for m in HEAD_METRICS}})
        for m in HEAD_METRICS:
            ok = j[f"{m}_mean"].notna()
            rho, lo, hi, n = spearman(j.loc[ok, f"{m}_mean"].to_numpy(), j.loc[ok, "delta_bits_per_byte_mean"].to_numpy())
            rows.append({"layers": label, "metric": m, "n": n, "rho": rho, "ci95_low": lo, "ci95_high": hi})
    pd.DataFrame(rows).to_csv(os.path.join(out, "link.csv"), index=False)
    pd.DataFrame(points).to_csv(os.path.join(out, "link_points.csv"), index=False)
    return pd.DataFrame(rows), pd.DataFrame(points)


def fmt(x, digits=3):
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def plot_link(points, rho, path):
    """One panel per layer set: each head metric's rank against delta bits per byte."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sets = list(dict.fromkeys(points["layers"]))
    fig, axes = plt.subplots(1, len(sets), figsize=(3.6 * len(sets), 3.6), squeeze=False)
    colors = {"output_rel_error": "tab:blue", "attention_tv": "tab:orange", "attention_kl": "tab:green"}
    for ax, label in zip(axes[0], sets):
        p = points[points["layers"] == label]
        for m in HEAD_METRICS:
            ok = p[m].notna()
            r = rho[(rho["layers"] == label) & (rho["metric"] == m)].iloc[0]
            ax.scatter(p.loc[ok, m], p.loc[ok, "delta_bits_per_byte"], s=14, color=colors[m],
                       label=f"{m}: ρ = {r['rho']:.2f} [{r['ci95_low']:.2f}, {r['ci95_high']:.2f}]")
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=0.01)
        top = p["delta_bits_per_byte"].max()
        ax.set_ylim(min(-0.01, p["delta_bits_per_byte"].min() * 1.5), top * 3)
        ax.set_title(f"layers {label}", fontsize=10)
        ax.set_xlabel("head metric (mean over heads, excerpts, trials)", fontsize=8)
        ax.legend(fontsize=6.5, loc="lower right")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("Δ bits per byte (swap-in)")
    fig.suptitle("Does a head-level error predict the model's loss? One point per (estimator, budget)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def ladder_tables(out, part, budgets, with_ci):
    """The markdown tables of one swap-in result set OUT/PART: per layer set, Δ bits per byte
    per estimator and budget, its ratio to uniform's Δ and compare's verdict against uniform
    (with_ci: and the ratio's simultaneous interval, ci_bonf)."""
    import pandas as pd
    s = pd.read_csv(os.path.join(out, part, "summary.csv"), dtype={"layers": str})
    cmp = pd.read_csv(os.path.join(out, part, "comparisons_delta_bits_per_byte.csv"), dtype={"layers": str})
    lines = []
    for label in dict.fromkeys(s["layers"]):
        sub = s[s["layers"] == label]
        u = sub["baseline_delta_bits_per_byte"].iloc[0]
        lines += [f"### Layers {label} (uniform: Δ = {u:+.4f})", "",
                  "| estimator | " + " | ".join(f"F = {b}" for b in budgets) + " | other F |",
                  "|---|" + "---|" * (len(budgets) + 1)]
        for name in dict.fromkeys(sub["variant"]):
            cells, other = [], []
            for _, r in sub[sub["variant"] == name].iterrows():
                f = r["num_features"]
                ratio = f"{r['delta_bits_per_byte_mean'] / u:.2f}x"
                c = cmp[(cmp["layers"] == label) & (cmp["a"] == name) & (cmp["b"] == "uniform")
                        & (cmp["num_features"] == f)]
                # the --against uniform family's verdict (ranking's vs_uniform is Holm over every pair)
                word = c["verdict"].iloc[0].removeprefix("a ") if len(c) else ""
                if with_ci and len(c) and c["paired"].iloc[0] != "exact":
                    ratio += f" [{c['ci_bonf_low'].iloc[0]:.2f}, {c['ci_bonf_high'].iloc[0]:.2f}]"
                text = f"{r['delta_bits_per_byte_mean']:+.4f} ({ratio}; {word})"
                (cells if f in budgets else other).append((f, text))
            row = [dict(cells).get(b, "") for b in budgets]
            lines.append(f"| {name} | " + " | ".join(row) + " | "
                         + "; ".join(f"F = {f}: {t}" for f, t in other) + " |")
        lines.append("")
    return lines


def hybrid_vs_window(out, part):
    """FAVOR+ with a window against the window alone at equal columns: favor compare --pairs
    FAVOR+window:window (its own family: one row per cell) -> OUT/PART_hybrid_vs_window.csv and
    the README's lines."""
    import favor
    c = favor.compare(os.path.join(out, part), metric="delta_bits_per_byte", match="num_features",
                      pairs="FAVOR+window:window")["comparisons"]
    c.to_csv(os.path.join(out, f"{part}_hybrid_vs_window.csv"), index=False)
    lines = ["| layers | F | FAVOR+window | window alone | difference | p_holm | verdict |", "|---|---|---|---|---|---|---|"]
    for _, r in c.iterrows():
        lines.append(f"| {r['layers']} | {int(r['num_features'])} | {r['mean_a']:+.4f} | {r['mean_b']:+.4f} | "
                     f"{r['mean_a'] - r['mean_b']:+.4f} | {fmt(r['p_holm'])} | {r['verdict']} |")
    return lines + [""]


def plot_ladder(out, part):
    subprocess.run([sys.executable, os.path.join(HERE, "plot.py"), os.path.join(out, part), "--metric",
                    "delta_bits_per_byte", "--x", "num_features", "--out", os.path.join(out, f"{part}.png")],
                   check=True, capture_output=True)


def report(out):
    """OUT/README.md, ladder.png and powered.png (scripts/plot.py) and link.png from the result sets."""
    info = json.load(open(os.path.join(out, "ladder", "run.json")))
    study = json.load(open(os.path.join(out, "study.json")))
    lad, pw = study["parts"]["ladder"], study["parts"].get("powered")
    if pw is not None and not os.path.isdir(os.path.join(out, "powered")):
        die(f"{out}/study.json names a powered part but {out}/powered/ is missing")
    rho, points = link(out)
    plot_ladder(out, "ladder")
    if pw:
        plot_ladder(out, "powered")
    plot_link(points, rho, os.path.join(out, "link.png"))
    exact = info["exact_bits_per_byte"]
    minutes = lambda sec: f"{sec / 60:.1f} min"
    lines = [
        "# What the approximation does to the model",
        "",
        "Written by `scripts/swap_in_study.py` (every number computed from the result sets here).",
        "",
        f"Model `{info['model']}` ({info['attention_layers']} layers of {info['heads']['0']} heads, d = {info['d']}); "
        f"{info['windows']['N']} held-out windows of {info['windows']['L']} bytes (scripts/swap_in.py's); "
        f"its own attention: **{exact:.4f} bits per byte**. favor.swap_in (W drawn per layer and trial), "
        f"{info['dtype']}, {info['threads']} threads.",
        "",
        "Uniform attention (each swapped layer's output the mean of the visible values): "
        + "; ".join(f"layers {k}: {v:.4f} ({v - exact:+.4f})" for k, v in info["uniform_bits_per_byte"].items()) + ".",
        "",
        "Δ = bits per byte with the estimator in the layers named minus the model's own; mean over the trials, "
        "then its ratio to uniform attention's Δ in the same layers; the verdict against uniform is `favor compare "
        "--match num_features --against uniform` on delta_bits_per_byte (permutation tests over the trials, paired "
        f"on the same {info['windows']['N']} windows, Holm over the family of the result set). Budget = feature columns F (a window of "
        "w keys costs w). The deterministic maps and the windows alone are constants on these windows: their "
        "difference from uniform is exact (`better`/`worse`), a statement about these windows, not a test.",
        "",
    ]
    if pw:
        lines += [f"## All layers swapped, {pw['trials']} trials: the verdicts", "",
                  f"`powered/`: every estimator in all layers at F = {', '.join(map(str, pw['budgets']))}, "
                  f"{pw['trials']} trials per random estimator and budget ({minutes(pw['seconds'])}). In brackets: "
                  "the ratio's simultaneous 95% interval (bootstrap over the trials, Bonferroni over the family).",
                  "", *ladder_tables(out, "powered", pw["budgets"], True), "![all layers](powered.png)", "",
                  "### FAVOR+ beside a window, against the window alone at equal columns", "",
                  "`favor compare --pairs FAVOR+window:window` (a window of F/2 keys and m = F/2 features "
                  "against the last F keys alone; the window is a constant, so a one-sample sign-flip test of "
                  "the hybrid's trials; Holm over these rows; `a worse`: the hybrid costs more bits).", "",
                  *hybrid_vs_window(out, "powered")]
    lines += [f"## Each layer alone and all layers, {lad['trials']} trials: the ladder", "",
              f"`ladder/`: layer sets {lad['layers']}, F = {', '.join(map(str, lad['budgets']))}, "
              f"{lad['trials']} trials per random estimator and budget ({minutes(lad['seconds'])})."
              + (" With so few trials compare can reach no verdict for the random estimators (`underpowered`): "
                 "these points serve the link below; the verdicts are the section above's." if lad["trials"] < 6 else ""),
              "", *ladder_tables(out, "ladder", lad["budgets"], False), "![the ladder](ladder.png)", "",
              "## Which head metric predicts the damage", "",
              "Per layer set, Spearman's ρ between a head metric (favor run on the model's captures: "
              f"`{study['captures']}`, mean over the layer's heads, the captures and {study['heads']['trials']} "
              "trials; for `all`, the mean over the layers) and the ladder's Δ bits per byte, over the (estimator, "
              "budget) points both have; 95% interval by Fisher z with variance 1.06 / (n − 3). attention_kl "
              "has no value for the windows alone (a key outside the window gets weight 0: an infinite "
              "divergence), so its n is smaller. The points are not independent (one estimator at several "
              f"budgets), so the intervals are optimistic; a ρ of 1 has a degenerate interval "
              f"({minutes(study['heads']['seconds'])} for the head runs).", "",
              "| layers | metric | n | ρ | 95% interval |", "|---|---|---|---|---|"]
    for _, r in rho.iterrows():
        lines.append(f"| {r['layers']} | {r['metric']} | {r['n']} | {fmt(r['rho'])} | "
                     f"[{fmt(r['ci95_low'])}, {fmt(r['ci95_high'])}] |")
    best = rho.loc[rho.groupby("layers")["rho"].idxmax()]
    lines += ["", "Highest ρ per layer set: " + "; ".join(f"layers {r['layers']}: {r['metric']} ({fmt(r['rho'])})"
                                                          for _, r in best.iterrows()) + ".",
              "", "![the link](link.png)", "",
              "Files: `ladder/` and `powered/` (swap-in result sets: errors.csv, summary.csv, windows.csv, "
              "run.json, compare's tables against uniform), `powered_hybrid_vs_window.csv`, `heads/excerpt<e>_layer<l>/group<g>/` (the head runs), `link.csv`, "
              "`link_points.csv`, `study.json`.", ""]
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {out}/README.md and the figures")


def main(argv=None):
    ap = argparse.ArgumentParser(usage="%(prog)s [--model PT] [--captures GLOB] [--out DIR] [options]   (-h lists them)",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "data", "lm16", "tiny_lm.pt"))
    ap.add_argument("--captures", default="data/lm16/excerpt*", help="capture folders (a glob under the repository)")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "swap_in"))
    ap.add_argument("--windows", type=int, default=64)
    ap.add_argument("--trials", type=int, default=2, help="ladder/ and the head runs")
    ap.add_argument("--budgets", default="32,128,512", help="ladder/ and the head runs")
    ap.add_argument("--layers", default="all,0,1,2,3", help="ladder/'s layer sets")
    ap.add_argument("--powered-trials", type=int, default=10, help="powered/ (all layers)")
    ap.add_argument("--powered-budgets", default="32,64,128,256,512", help="powered/")
    ap.add_argument("--parts", default="ladder,powered,heads",
                    help="what to run (the others are kept from OUT): ladder, powered, heads")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--report-only", action="store_true", help="only link.csv, the figures and README from OUT")
    a = ap.parse_args(argv)
    try:
        a.budgets = sorted({int(b) for b in a.budgets.split(",")})
        a.powered_budgets = sorted({int(b) for b in a.powered_budgets.split(",")})
    except ValueError:
        die("--budgets / --powered-budgets: integers separated by commas")
    parts = [p for p in a.parts.split(",") if p]
    if not parts or set(parts) - {"ladder", "powered", "heads"}:
        die(f"--parts {a.parts}: a comma-separated subset of ladder, powered, heads")
    import torch
    torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "study.json")
    if not a.report_only:
        study = json.load(open(path)) if os.path.exists(path) else {}
        fixed = {"model": os.path.relpath(a.model, ROOT), "captures": a.captures, "windows": a.windows,
                 "threads": a.threads}
        if study and any(study.get(k) != v for k, v in fixed.items()) and set(parts) != {"ladder", "powered", "heads"}:
            die(f"{path} was made with another model, captures, windows or threads: run every part")
        study.update(fixed)
        study.setdefault("parts", {})
        settings = {"ladder": (a.layers, a.trials, a.budgets),
                    "powered": ("all", a.powered_trials, a.powered_budgets)}
        if {"ladder", "powered"} & set(parts):   # the model and windows, loaded once for both
            from swap_in import held_out_windows
            from tiny_lm import load_tiny_lm
            model, _ = load_tiny_lm(a.model)
            windows = held_out_windows(a.windows, 1024)
        for part in ("ladder", "powered"):
            if part in parts:
                t0 = time.time()
                study["parts"][part] = {**swap(a, model, windows, a.out, part, *settings[part]),
                                        "seconds": time.time() - t0}
        if "heads" in parts:
            t0 = time.time()
            head_runs(a, a.out)
            study["heads"] = {"trials": a.trials, "budgets": a.budgets, "seconds": time.time() - t0}
        with open(path, "w") as f:
            json.dump(study, f, indent=2)
            f.write("\n")
    report(a.out)   # link.csv, the figures and README


if __name__ == "__main__":
    main()
