#!/usr/bin/env python3
"""Random or fitted feature maps, with or without a window, on data/lm16's heads, held out (issue 40).

Fits hedgehog and t2r maps to every head of the model's capture of one text (data/lm16/excerpt0,
heapq.py: the training input) with scripts/fit_maps.py, alone and with an exact window in place
(LoLCATs' attention transfer), then measures every map on the captures of three other texts
(excerpt1..3: datetime.py, zipfile.py, socket.py) and, to show what fitting on the evaluation input
would hide, the fitted maps on the training capture too. Causal, L = 1024, metric
output_rel_error, at equal columns F = 32, 64, 128, 256 (feature columns + window keys), uniform
attention (the mean of the visible values) as the baseline, verdicts from `favor compare --match
num_features` (16 trials for the random maps). Then the model's loss with the fitted maps in
every layer (scripts/swap_in.py on the held-out windows, which hold none of the training text).

Writes OUT/fitted_maps/{excerpt1,excerpt2,excerpt3,train}/layer<i>/F<F>/ (favor result sets with
compare's tables), OUT/fitted_maps/fits/*.json (each fit's manifest: loss curves, train and
held-out loss per head), OUT/fitted_maps/swap_in/ (a swap-in result set), README.md and
fitted_maps.png. The weights go to out/fitted_maps_work/ (a fit is reused when its settings and
its capture's q match).

Usage: scripts/fitted_maps_study.py [--no-build] [--report-only] [--skip-swap-in] [OUT_DIR (default results)]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = "/usr/bin/python3"
METRIC = "output_rel_error"
CAPTURES = os.path.join("data", "lm16")
TRAIN = "excerpt0"                                   # the text the maps are fitted on
HELDOUT = ("excerpt1", "excerpt2", "excerpt3")       # the texts they are measured on
MODEL = os.path.join(CAPTURES, "tiny_lm.pt")
BUDGETS = (32, 64, 128, 256)
TRIALS = 16
D = 64                                               # the heads' dimension (checked against the captures)
STEPS, LR = 300, 0.02
# The fits: name -> (kind, width w, window in place). Columns: F (2w hedgehog, w t2r) + window.
FITS = {
    "hedgehog_w16": ("hedgehog", 16, 0), "hedgehog_w32": ("hedgehog", 32, 0), "hedgehog_w64": ("hedgehog", 64, 0),
    "hedgehog_w8_win16": ("hedgehog", 8, 16), "hedgehog_w16_win32": ("hedgehog", 16, 32),
    "hedgehog_w32_win64": ("hedgehog", 32, 64), "hedgehog_w64_win128": ("hedgehog", 64, 128),
    "t2r_w32_win32": ("t2r", 32, 32), "t2r_w64_win64": ("t2r", 64, 64),
    "t2r_w64": ("t2r", 64, 0), "t2r_w128": ("t2r", 128, 0),
}
RANDOM = (("positive", "orthogonal"), ("sderf", "orthogonal"), ("maclaurin", "iid"))
# Parameter-free maps and their columns at d = 64 (docs/design.md, equal feature budgets).
PARAMETER_FREE = {"liger": D, "softmax_dim": 2 * D, "hedgehog": 2 * D, "t2r": D}
FAMILIES = ["random features", "parameter-free", "fitted (untrained)", "fitted", "window only",
            "random + window", "parameter-free + window", "fitted + window"]


def die(msg):
    print("fitted_maps_study: " + msg, file=sys.stderr)
    sys.exit(2)


def run(cmd, **kw):
    r = subprocess.run(cmd, cwd=ROOT, **kw)
    if r.returncode != 0:
        die("failed (exit %d): %s" % (r.returncode, " ".join(map(str, cmd))))


def columns(kind, width, window):
    return (2 * width if kind == "hedgehog" else width) + window


def variants(budget, fitdir, layer, fitted_only=False):
    """(family, variant) pairs of one budget's run: each variant has exactly `budget` columns."""
    out = []
    if not fitted_only:
        for f, p in RANDOM:
            out.append(("random features", {"features": f, "projection": p, "name": f}))
            out.append(("random + window", {"features": f, "projection": p, "window": budget // 2,
                                            "name": "%s+w%d" % (f, budget // 2)}))
        out.append(("window only", {"features": "none", "window": budget, "name": "none+w%d" % budget}))
        for f, F in PARAMETER_FREE.items():
            name = f + "_untrained" if f in ("hedgehog", "t2r") else f
            if F == budget:
                out.append(("parameter-free", {"features": f, "name": name}))
            elif F < budget:
                out.append(("parameter-free + window", {"features": f, "window": budget - F,
                                                        "name": "%s+w%d" % (name, budget - F)}))
    for fit, (kind, width, window) in FITS.items():
        if columns(kind, width, window) != budget:
            continue
        ref = os.path.join(fitdir, fit + ".npz")
        v = {"features": kind, "weights": "%s:layer%d" % (ref, layer), "name": fit}
        if window:
            v["window"] = window
        out.append(("fitted + window" if window else "fitted", v))
        if not window and not fitted_only:
            out.append(("fitted (untrained)", {"features": kind, "weights": "%s:init.layer%d" % (ref, layer),
                                               "name": fit + "_init"}))
    return out


def family_of(name):
    """A variant's family from its name (the names variants() gives)."""
    base = name.replace("+fitted_on_eval_input", "")
    for fit, (kind, width, window) in FITS.items():
        if base == fit:
            return "fitted + window" if window else "fitted"
        if base == fit + "_init":
            return "fitted (untrained)"
    head = base.split("+w")[0]
    if head == "none":
        return "window only"
    if head in ("liger", "softmax_dim", "hedgehog_untrained", "t2r_untrained"):
        return "parameter-free + window" if "+w" in base else "parameter-free"
    return "random + window" if "+w" in base else "random features"


def config(capture, layer, budget, fitdir, outdir, cfgdir, fitted_only):
    """A run's config; its paths relative to the config's folder (favor resolves them from there),
    so run.json records paths relative to the repository."""
    rel = lambda p: os.path.relpath(p, cfgdir)
    return {"name": "fitted_maps", "seed": 0,
            "description": "fitted maps vs random and parameter-free maps, alone and with a window, "
                           "at %d columns (scripts/fitted_maps_study.py)" % budget,
            "inputs": {"source": "npy", "per_head": True, **{k: rel(os.path.join(capture, "layer%d" % layer, k + ".npy"))
                                                            for k in "qkv"}},
            "causal": True, "num_features": [budget], "trials": TRIALS, "metrics": [METRIC],
            "variants": [v for _, v in variants(budget, rel(fitdir), layer, fitted_only)],
            "output_dir": rel(outdir)}


def layers_of(capture):
    with open(os.path.join(ROOT, capture, "manifest.json")) as f:
        man = json.load(f)
    for lay in man["layers"]:
        if lay["d"] != D or not lay["causal"]:
            die("%s: layer %d has d = %d (causal %s); the study's budgets assume causal heads of d = %d"
                % (capture, lay["index"], lay["d"], lay["causal"], D))
    return [lay["index"] for lay in man["layers"]]


def fit_all(work, out):
    from capture_qkv import _sha256
    os.makedirs(os.path.join(out, "fits"), exist_ok=True)
    train = os.path.join(CAPTURES, TRAIN)
    train_q = _sha256(os.path.join(ROOT, train, "layer0", "q.npy"))   # a fit of another capture is redone
    for fit, (kind, width, window) in FITS.items():
        npz = os.path.join(work, "fit", fit + ".npz")
        want = {"kind": kind, "width": width, "window": window, "steps": STEPS, "lr": LR, "seed": 0}
        try:   # a fit already in the work folder with these settings, of the present training capture
            with open(npz[:-4] + ".json") as f:
                have = json.load(f)
            fitted_on = have["layers"]["layer0"]["fitted_on"]["q_sha256"]
            if os.path.isfile(npz) and all(have.get(k) == v for k, v in want.items()) and fitted_on == train_q:
                shutil.copy(npz[:-4] + ".json", os.path.join(out, "fits", fit + ".json"))
                continue
        except (OSError, ValueError, KeyError, TypeError):
            pass
        run([PY, "scripts/fit_maps.py", train, "--kind", kind, "--width", str(width), "--window", str(window),
             "--steps", str(STEPS), "--lr", str(LR), "--threads", "2", "--eval", os.path.join(CAPTURES, HELDOUT[0]),
             "--out", os.path.relpath(npz, ROOT)])
        shutil.copy(npz[:-4] + ".json", os.path.join(out, "fits", fit + ".json"))


def measure(favor, work, out):
    for part in HELDOUT + ("train",):
        capture = os.path.join(ROOT, CAPTURES, TRAIN if part == "train" else part)
        for i in layers_of(os.path.relpath(capture, ROOT)):
            for budget in BUDGETS:
                d = os.path.join(out, part, "layer%d" % i, "F%d" % budget)
                cfg = os.path.join(work, "configs", "%s_layer%d_F%d.json" % (part, i, budget))
                os.makedirs(os.path.dirname(cfg), exist_ok=True)
                c = config(capture, i, budget, os.path.join(work, "fit"), d, os.path.dirname(cfg), part == "train")
                if not c["variants"]:
                    continue
                with open(cfg, "w") as f:
                    json.dump(c, f, indent=1)
                if os.path.isdir(d):
                    shutil.rmtree(d)
                run([favor, "run", os.path.relpath(cfg, ROOT), "--quiet"])
                run([favor, "compare", os.path.relpath(d, ROOT), "--metric", METRIC, "--match", "num_features"],
                    stdout=subprocess.DEVNULL)
            print(os.path.join(out, part, "layer%d" % i))


def swap_in_variants(work):
    """The swap-in's variants: the fitted maps (each layer its own weights; not t2r alone, whose
    held-out rows can have no positive feature: 0 / 0, which the model cannot take) and, at the
    same columns, the window alone."""
    vs = []
    for fit, (kind, width, window) in FITS.items():
        if kind == "t2r" and not window:   # rows whose relu features are all 0: non-finite outputs
            continue
        v = {"name": fit, "features": kind, "weights": os.path.join("..", "fit", fit + ".npz")}   # from configs/
        if window:
            v["window"] = window
        vs.append(v)
    for b in BUDGETS:
        vs.append({"name": "none+w%d" % b, "features": "none", "window": b})
    return vs


def swap_in(work, out):
    cfg = os.path.join(work, "configs", "swap_in.json")
    with open(cfg, "w") as f:
        json.dump({"variants": swap_in_variants(work), "layers": ["all"], "windows": 64, "L": 1024, "trials": 1,
                   "seed": 0, "dtype": "float32", "model": os.path.relpath(os.path.join(ROOT, MODEL), os.path.dirname(cfg))},
                  f, indent=1)
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "build", "python"))
    run([PY, "scripts/swap_in.py", os.path.relpath(cfg, ROOT), "--out", os.path.join(out, "swap_in"), "--quiet"],
        env=env)


# ----------------------------------------------------------------------------- report

def load(out, part):
    """(summary rows, comparison rows) of a part, with layer and budget columns."""
    import pandas as pd
    frames, comps = [], []
    top = os.path.join(out, part)
    if not os.path.isdir(top):
        die("%s: missing (run scripts/fitted_maps_study.py without --report-only)" % top)
    for layer in sorted(int(d[5:]) for d in os.listdir(top) if d.startswith("layer")):
        for budget in BUDGETS:
            d = os.path.join(top, "layer%d" % layer, "F%d" % budget)
            if not os.path.isdir(d):
                continue
            s = pd.read_csv(os.path.join(d, "summary.csv"))
            s["layer"], s["part"] = layer, part
            s["family"] = [family_of(n) for n in s["variant"]]
            s["ratio"] = s[METRIC + "_mean"] / s["baseline_" + METRIC]
            frames.append(s)
            c = pd.read_csv(os.path.join(d, "comparisons_%s.csv" % METRIC), dtype=str, keep_default_na=False)
            c["layer"], c["part"] = layer, part
            comps.append(c)
    return pd.concat(frames, ignore_index=True), pd.concat(comps, ignore_index=True)


def verdict(comp, part, layer, head, F, a, b):
    """favor compare's verdict of a against b in one cell of a part, from a's side."""
    from hybrid_report import verdict as cell_verdict
    return cell_verdict(comp[comp["part"] == part], layer, head, F, a, b)


def short(v):
    return {"a better": "better", "a worse": "worse", "not significant": "n.s."}.get(v, v)


def tally(vs):
    """'3/3 better', or the verdicts' counts ('2 better, 1 n.s.')."""
    counts = {}
    for v in vs:
        counts[short(v)] = counts.get(short(v), 0) + 1
    if len(counts) == 1:
        k = next(iter(counts))
        return "%d/%d %s" % (counts[k], len(vs), k)
    return ", ".join("%d %s" % (n, k) for k, n in sorted(counts.items()))


def best_of(g, family, budget):
    """The variant of `family` with the least mean ratio over the held-out texts within `budget`
    columns (one with a non-finite output on some text is not a candidate): (variant, F,
    per-text rows) or None."""
    r = g[(g["family"] == family) & (g["num_features"] <= budget)]
    if r.empty:
        return None
    means = r.groupby(["variant", "num_features"])["ratio"].apply(lambda x: x.mean(skipna=False)).dropna()
    if means.empty:   # every candidate non-finite on some text
        return None
    variant, F = means.idxmin()
    return variant, int(F), r[(r["variant"] == variant) & (r["num_features"] == F)]


def fmt(x):
    """A ratio, or 'non-finite' where some cell's output was not finite (its error is NaN)."""
    return "non-finite" if x != x else "%.3f" % x


def best_table(df, comp, budget):
    """Per head: uniform's error (mean over texts), then per family its best variant within `budget`
    columns: mean ratio over the held-out texts, [min-max], and compare's verdicts against uniform
    on each text."""
    lines = ["| layer | head | uniform | " + " | ".join(FAMILIES) + " |",
             "|---|---|---|" + "---|" * len(FAMILIES)]
    tops = []
    for (layer, head), g in df.groupby(["layer", "head"]):
        cells, top = [], None
        for fam in FAMILIES:
            b = best_of(g, fam, budget)
            if b is None:
                cells.append("-")
                continue
            variant, F, rows = b
            vs = [verdict(comp, r["part"], layer, head, F, variant, "uniform") for _, r in rows.iterrows()]
            cells.append("%s (%d) %.3f [%.3f-%.3f] %s" % (variant, F, rows["ratio"].mean(), rows["ratio"].min(),
                                                         rows["ratio"].max(), tally(vs)))
            if top is None or rows["ratio"].mean() < top[2]["ratio"].mean():
                top = (variant, F, rows)
        tops.append((layer, head, top))
        lines.append("| %d | %d | %.3f | %s |" % (layer, head, g["baseline_" + METRIC].mean(), " | ".join(cells)))
    return lines, tops


def random_vs_fitted(df, comp):
    """Per budget: the best random estimator (alone or with a window) against the best fitted map
    (alone or with a window) at exactly that many columns, per head and text."""
    lines = ["| columns | best fitted better | n.s. | best fitted worse | (head, text) pairs |", "|---|---|---|---|---|"]
    for budget in BUDGETS:
        counts = {"a better": 0, "a worse": 0}
        n = 0
        for (part, layer, head), g in df.groupby(["part", "layer", "head"]):
            g = g[g["num_features"] == budget]
            rnd = g[g["family"].isin(["random features", "random + window"])]
            fit = g[g["family"].isin(["fitted", "fitted + window"])]
            if rnd.empty or fit.empty:
                continue
            a = fit.loc[fit["ratio"].idxmin(), "variant"]
            b = rnd.loc[rnd["ratio"].idxmin(), "variant"]
            v = verdict(comp, part, layer, head, budget, a, b)
            counts[v] = counts.get(v, 0) + 1
            n += 1
        if n:
            ns = n - counts["a better"] - counts["a worse"]
            lines.append("| %d | %d | %d | %d | %d |" % (budget, counts["a better"], ns, counts["a worse"], n))
    return lines


def fitted_vs_window(df, comp):
    """Per budget: the best fitted + window variant at exactly that many columns against the window
    alone at the same columns (both deterministic: the exact difference on each text)."""
    lines = []
    for budget in BUDGETS:
        counts, n = {}, 0
        for (part, layer, head), g in df.groupby(["part", "layer", "head"]):
            fw = g[(g["family"] == "fitted + window") & (g["num_features"] == budget)]
            wo = g[(g["family"] == "window only") & (g["num_features"] == budget)]
            if fw.empty or wo.empty:
                continue
            a, b = fw.loc[fw["ratio"].idxmin()], wo.loc[wo["ratio"].idxmin()]
            v = short(verdict(comp, part, layer, head, budget, a["variant"], b["variant"]))
            counts[v] = counts.get(v, 0) + 1
            n += 1
        if n:
            lines.append("- %d columns: fitted + window %s (of %d head x text pairs)." % (budget, ", ".join(
                "%s on %d" % (k, c) for k, c in sorted(counts.items())), n))
    return lines


def fit_lines(out, heads):
    lines = ["| fit | kind | w | window | columns | train loss | held-out loss (%s) | held-out - train | CPU s |" % HELDOUT[0],
             "|---|---|---|---|---|---|---|---|---|"]
    for fit, (kind, width, window) in FITS.items():
        with open(os.path.join(out, "fits", fit + ".json")) as f:
            m = json.load(f)
        lays = [l for k, l in m["layers"].items() if not k.startswith("init.")]
        tr = [x for l in lays for x in l["final_train_loss"]]
        ho = [x for l in lays for x in l["held_out"]["loss"]]
        cpu = sum(l["cpu_seconds"] for l in lays)
        lines.append("| %s | %s | %d | %d | %d | %.3f | %.3f | %+.3f | %.0f |" % (
            fit, kind, width, window, columns(kind, width, window), sum(tr) / len(tr), sum(ho) / len(ho),
            sum(ho) / len(ho) - sum(tr) / len(tr), cpu))
    return lines + ["", "Losses are means over the %d heads (nats per row)." % heads]


def swap_lines(out):
    import pandas as pd
    d = os.path.join(out, "swap_in")
    if not os.path.isfile(os.path.join(d, "summary.csv")):
        return ["(no swap-in result set: the study ran with --skip-swap-in)"]
    with open(os.path.join(d, "run.json")) as f:
        info = json.load(f)
    s = pd.read_csv(os.path.join(d, "summary.csv"))
    exact, uni = info["exact_bits_per_byte"], info["uniform_bits_per_byte"]["all"]
    col = [c for c in s.columns if c.startswith("delta_bits_per_byte") and c.endswith("_mean")][0]
    s["F"] = s["num_features"]
    lines = ["Model `%s`, %d held-out windows of %d bytes (scripts/swap_in.py's; none holds the training text: "
             "they end in datetime.py, the fit's text is heapq.py), every layer swapped: its own attention %.4f "
             "bits per byte, uniform attention %+.4f. Δ = bits per byte with the map minus the model's own; all "
             "these maps are deterministic, so the differences are exact on these windows (not a test across "
             "texts)." % (info["model"], info["windows"]["N"], info["windows"]["L"], exact, uni - exact), "",
             "| columns | variant | Δ bits per byte | / uniform's Δ |", "|---|---|---|---|"]
    for _, r in s.sort_values(["F", col]).iterrows():
        lines.append("| %d | %s | %+.4f | %.3f |" % (r["F"], r["variant"], r[col], r[col] / (uni - exact)))
    return lines


def plot(df, path):
    import matplotlib.pyplot as plt
    import numpy as np
    heads = sorted(set(zip(df["layer"], df["head"])))
    fig, axes = plt.subplots(len(BUDGETS), 1, figsize=(15, 3.1 * len(BUDGETS)), sharey=True, sharex=True)
    colors = plt.get_cmap("tab10")
    x = np.arange(len(heads))
    width = 0.84 / len(FAMILIES)
    for ax, budget in zip(axes, BUDGETS):
        for k, fam in enumerate(FAMILIES):
            vals = []
            for layer, head in heads:
                b = best_of(df[(df["layer"] == layer) & (df["head"] == head)], fam, budget)
                vals.append(b[2]["ratio"].mean() if b else np.nan)
            ax.bar(x + (k - len(FAMILIES) / 2 + 0.5) * width, vals, width, label=fam, color=colors(k))
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
        ax.axhline(0.25, color="gray", lw=0.8, ls=":")
        ax.set_yscale("log")
        ticks = [0.03, 0.1, 0.25, 0.5, 1.0, 2.0]
        ax.set_yticks(ticks)
        ax.set_yticklabels(["%g" % t for t in ticks])
        ax.set_ylim(0.02, 2.5)
        ax.minorticks_off()
        ax.set_ylabel("error / uniform's")
        ax.set_title("best of each family within %d columns" % budget, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    axes[-1].set_xticks(x)
    axes[-1].set_xticklabels(["L%dH%d" % h for h in heads])
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(FAMILIES), fontsize=8, frameon=False)
    fig.suptitle("data/lm16's 16 heads, causal, output_rel_error on 3 held-out texts (mean) / uniform's; "
                 "fits on a 4th text; dashed: uniform, dotted: 0.25x", fontsize=11)
    fig.tight_layout(rect=(0, 0.03, 1, 0.98))
    fig.savefig(path, dpi=100)


def report(out):
    import pandas as pd
    parts = [load(out, p) for p in HELDOUT]
    df = pd.concat([p[0] for p in parts], ignore_index=True)
    comp = pd.concat([p[1] for p in parts], ignore_index=True)
    tr, _ = load(out, "train")
    nheads = len(set(zip(df["layer"], df["head"])))
    text = ["# Random or fitted feature maps, with or without a window (issue 40)", "",
            "Written by scripts/fitted_maps_study.py from the result sets beside this file; every number is read "
            "from them.", "",
            "Causal, every head of data/lm16's model (%d heads, d = %d), L = 1024. Maps fitted with "
            "scripts/fit_maps.py on the capture of one text (`%s/%s`: the training input) and measured on the "
            "captures of three others (`%s`): the held-out texts. Metric output_rel_error; ratio = a variant's "
            "mean (%d trials for random maps; deterministic maps once) / uniform attention's (the mean of the "
            "visible values). Columns = F + w (a window key costs a score and a value row, like a feature "
            "column); each budget is its own run (`<text>/layer<i>/F<columns>/`), every variant in it at exactly "
            "that many columns; random + window = half the columns a window, half features. Verdicts against "
            "uniform: `favor compare --match num_features` (sign-flip permutation tests, Holm over the run's pairs, "
            "alpha 0.05; `exact` differences for deterministic pairs), one per held-out text. Fits: hedgehog "
            "[softmax(xA+b), softmax(-(xA+b))] and t2r relu(xA+b), per head and side, attention-transfer "
            "cross-entropy, Adam lr %g, %d full-batch steps, seed 0; `_init` = the fit's initial weights (A = I "
            "at w = d, else N(0, 1/d)), `_win<w>` fits made with that window in place. `dark` is sderf "
            "(docs/estimators.md), so it is not listed twice." % (
                nheads, D, CAPTURES, TRAIN, ", ".join(HELDOUT), TRIALS, LR, STEPS), ""]
    for budget in BUDGETS:
        lines, tops = best_table(df, comp, budget)
        text += ["## The best of each family within %d columns (mean ratio over the held-out texts [min-max], "
                 "verdicts against uniform per text)" % budget, ""] + lines + [""]
        hit = [t for t in tops if t[2][2]["ratio"].max() <= 0.25]
        text += ["Best at most 0.25x uniform on every held-out text within %d columns: %d of %d heads%s." % (
            budget, len(hit), len(tops), "" if len(hit) == len(tops) else "; not on: " + ", ".join(
                "layer %d head %d (%s, up to %.3f)" % (l, h, t[0], t[2]["ratio"].max())
                for l, h, t in tops if t[2]["ratio"].max() > 0.25)), ""]
    text += ["## Random or fitted, at equal columns", "",
             "Per head and held-out text, the best fitted map (alone or with a window) against the best random "
             "estimator (alone or with a window) at exactly F columns (compare's verdict: a one-sample sign-flip "
             "test of the random one's %d trials against the fitted constant, Holm over the run's pairs):" % TRIALS,
             ""] + random_vs_fitted(df, comp) + ["",
             "## Fitted + window against window only, at equal columns", "",
             "Per head and held-out text, the best fitted + window variant at exactly F columns against the window "
             "alone at F columns (both deterministic: the exact difference on that text):", ""] + fitted_vs_window(df, comp)
    text += ["", "## Does a fit carry to another text?", "",
             "Transfer loss (the fit's objective: cross-entropy of the exact rows against the estimate's) on the "
             "training capture and on a held-out one (fit_maps.py --eval):", ""] + fit_lines(out, nheads)
    text += ["", "Output error (ratio to uniform, mean over heads) of each fitted variant on the training text "
             "(`train/`: rows named +fitted_on_eval_input) and on the held-out texts:", "",
             "| variant | columns | training text | held-out texts (mean) | held-out, per text |", "|---|---|---|---|---|"]
    for fit in FITS:
        a = tr[tr["variant"] == fit + "+fitted_on_eval_input"]
        b = df[df["variant"] == fit]
        if len(a) and len(b):
            per = b.groupby("part")["ratio"].apply(lambda r: r.mean(skipna=False))
            text.append("| %s | %d | %s | %s | %s |" % (fit, b["num_features"].iloc[0], fmt(a["ratio"].mean(skipna=False)),
                                                      fmt(b["ratio"].mean(skipna=False)), ", ".join(fmt(per[p]) for p in HELDOUT)))
    bad = df[df["nonfinite_mean"] > 0].groupby("variant")
    if len(bad):
        text += ["", "Non-finite outputs on the held-out texts (their output_rel_error is NaN, so they are in no "
                 "table above): " + "; ".join("%s in %d of %d (head, text) cells (%.0f entries per cell on average)" % (
                     v, len(g), len(df[df["variant"] == v]), g["nonfinite_mean"].mean()) for v, g in bad) +
                 ". A relu map's row with every feature 0 has no attention row (0 / 0)."]
    text += ["", "## The model's loss with the fitted maps in every layer", ""] + swap_lines(out)
    text += ["", "![best per family](fitted_maps.png)", "",
             "Files: `<text>/layer<i>/F<columns>/` (favor result sets: errors.csv, summary.csv, run.json, "
             "compare's tables), `fits/<fit>.json` (the fits' manifests), `swap_in/` (the swap-in result set).", ""]
    plot(df, os.path.join(out, "fitted_maps.png"))
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("\n".join(text))
    print(os.path.join(out, "README.md"))


def main(argv):
    ap = argparse.ArgumentParser(prog="fitted_maps_study.py",
                                 usage="%(prog)s [--no-build] [--report-only] [--skip-swap-in] [OUT_DIR (default results)]")
    ap.add_argument("out", nargs="?", default="results")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--skip-swap-in", action="store_true", help="leave the swap-in result set as it is")
    a = ap.parse_args(argv)
    out = os.path.join(os.path.abspath(a.out), "fitted_maps")
    sys.path.insert(0, HERE)
    if not a.report_only:
        for c in (TRAIN,) + HELDOUT:
            if not os.path.isfile(os.path.join(ROOT, CAPTURES, c, "manifest.json")):
                die("%s: missing (the captures the study reads; data/lm16/README.md)" % os.path.join(CAPTURES, c))
        if not a.no_build:
            run(["scripts/setup.sh", "--target", "favor", "--target", "favor_python", "--target", "favor_python_files"])
        favor = os.environ.get("FAVOR", os.path.join(ROOT, "build", "favor"))
        work = os.path.join(ROOT, "out", "fitted_maps_work")
        fit_all(work, out)
        for part in HELDOUT + ("train",):
            if os.path.isdir(os.path.join(out, part)):
                shutil.rmtree(os.path.join(out, part))
        for old in ("heldout",):   # the first model's study (one held-out text) is replaced
            if os.path.isdir(os.path.join(out, old)):
                shutil.rmtree(os.path.join(out, old))
        measure(favor, work, out)
        if not a.skip_swap_in:
            swap_in(work, out)
    report(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
