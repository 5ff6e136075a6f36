#!/usr/bin/python3
"""Heads a window cannot serve: the recall study (issue 55 item 6).

On every MQAR model of data/mqar/ (favor.models.load_mqar), the model's recall on held-out
examples with the attention of layer 0, layer 1 or all layers swapped (favor.swap_in,
metric "recall") for: favor's exact attention (a check: it must give the model's own recall),
an exact window of the last w keys alone and with 4 sinks, every random-feature family
(positive, hyperbolic, trig, oprf, gerf, sderf; iid and orthogonal W) at --ms, hybrids (a
window of L/8 keys with a positive or sderf remainder at --ms), taylor2 (Based's map), and
uniform attention (the baseline every table carries). Recall is against state per head
(swap_in's state_bytes column: exact 2 L d, a window w (d + d_v), F columns F (d_v + 1), a
hybrid the sum; float32, 4 bytes a number).

Per cell it writes OUT/<cell>/ (a swap-in result set: errors.csv, summary.csv, windows.csv,
run.json; OUT/<cell>/verdicts/layers<set>/ each layer set's rows with favor compare's
comparisons_recall.csv / ranking_recall.csv against uniform),
OUT/<cell>.png (recall vs state, a panel per layer set), and at the end OUT/README.md (every
number computed from the tables: the ladder per cell and layer set, the verdicts, the census
of the cell's capture beside it, Based's published points) and OUT/study.json (settings and
minutes per cell). Verdicts: favor compare --against uniform --metric recall (a sign-flip
test over the trials with Holm's correction over one layer set's rows; maps with no projection
draw nothing, so their trials are one value copied and carry no test of their own).

    PYTHONPATH=build/python nice -n 10 /usr/bin/python3 scripts/recall_study.py
        [--cells L64_kv4_d64,...] [--out results/recall] [--examples 1000] [--trials 12]
        [--ms 16,64,256,1024,4096] [--cell-ms CELL=16,64,256,1024 ...] [--threads 2]
        [--small CELL,...] [--report-only]

--small CELL gives that cell a small ladder (exact, the windows, FAVOR+ and FAVOR#
orthogonal, taylor2; layer sets all and 1; no head runs): what a long cell costs here.
A run adds its cells to OUT/study.json; --report-only rewrites the verdicts, figures and
README of the cells named from the tables.
"""
import argparse
import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

FAMILIES = ["positive", "hyperbolic", "trig", "oprf", "gerf", "sderf"]
PROJECTIONS = ["orthogonal", "iid"]
HYBRID_REMAINDERS = ["positive", "sderf"]
SINKS = 4
TEST_SEED = 2     # data/mqar's test batches: mqar_batch(n, L, pairs, seed=2), held out of training
LAYER_SETS = ["all", 0, 1]
# --small cells (a long cell, whose full ladder costs hours here): exact, the windows, FAVOR+
# and FAVOR# (orthogonal) and taylor2, in the retrieval layer and in both; no head runs.
SMALL_FAMILIES = ["positive", "sderf"]
SMALL_SETS = ["all", 1]
# The head errors the link ranks against the recall lost (the loss-aware ones need the capture's g.npy).
HEAD_METRICS = ["output_rel_error", "output_rel_error_read", "loss_delta_abs"]
# Based (arXiv 2402.18668) Figure 2, read off the figure (+-0.03; ../shared/reference/heads_and_recall.md):
# (state bytes, recall) of sliding-window attention and of Based.
BASED_WINDOW = [(2 ** 16, 0.51), (2 ** 17, 0.65), (2 ** 18, 0.80), (2 ** 19, 0.94), (2 ** 20, 1.0)]
BASED_BASED = [(2 ** 16.5, 0.97), (2 ** 17, 1.0)]


def die(msg):
    print(f"recall_study.py: {msg}", file=sys.stderr)
    sys.exit(2)


def windows_of(L):
    """The window sizes of the ladder: L/16 .. L/2 keys."""
    return [L // 16, L // 8, L // 4, L // 2]


def ladder(L, ms, small=False):
    """The swap-in variants of one cell (favor.swap_in's variant dicts; names are the tables')."""
    out = [{"name": "exact", "features": "exact"}]
    out += [{"name": "window", "features": "none", "window": w} for w in windows_of(L)]
    out += [{"name": "window+sinks", "features": "none", "window": w - SINKS, "sinks": SINKS}
            for w in windows_of(L) if w > SINKS]
    if small:
        out += [{"name": f"{f}-orthogonal", "features": f, "projection": "orthogonal", "m": list(ms)}
                for f in SMALL_FAMILIES]
    else:
        out += [{"name": f"{f}-{p}", "features": f, "projection": p, "m": list(ms)} for f in FAMILIES for p in PROJECTIONS]
        out += [{"name": f"{f}+window", "features": f, "projection": "orthogonal", "window": L // 8, "m": list(ms)}
                for f in HYBRID_REMAINDERS]
    out.append({"name": "taylor2", "features": "taylor2"})
    return out


def layer_sets(settings, cell):
    """The layer sets a cell was swapped in (a --small cell: all and the retrieval layer)."""
    return [str(x) for x in (SMALL_SETS if settings["cells"][cell].get("ladder") == "small" else LAYER_SETS)]


def run_cell(favor, cell, out, examples, trials, ms, threads, small=False, dtype="float32"):
    """One cell's swap-in result set and its verdicts; returns the seconds it took."""
    import favor.models as fm
    t0 = time.time()
    model, meta = fm.load_mqar(os.path.join(ROOT, "data", "mqar", cell, "model.pt"))
    task = meta["task"]
    tokens, labels = fm.mqar_batch(examples, task["L"], task["pairs"], task["vocab"], seed=TEST_SEED)
    own = fm.recall(model, tokens, labels)
    print(f"[recall_study] {cell}: the model's own recall {own:.4f} on {examples} examples", file=sys.stderr, flush=True)
    favor.swap_in(model, (tokens, labels), ladder(task["L"], ms, small), layers=SMALL_SETS if small else LAYER_SETS,
                  trials=trials, seed=0, dtype=dtype,
                  metric="recall", out=os.path.join(out, cell), batch=64, threads=threads, progress=True,
                  model_name=f"data/mqar/{cell}/model.pt")
    compare(favor, out, cell, [str(x) for x in (SMALL_SETS if small else LAYER_SETS)])
    return time.time() - t0


def trained_with(cell):
    """The models of data/mqar/ trained with an approximation on the cell's task
    (scripts/train_mqar.py --attention): [(folder name, its attention record)]."""
    import glob
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "data", "mqar", cell + "_*", "model.json"))):
        with open(path) as f:
            att = json.load(f).get("attention")
        if att:
            out.append((os.path.basename(os.path.dirname(path)), att))
    return out


def run_trained(favor, out, cell, examples, trials, threads, dtype="float32"):
    """Each model trained with an approximation, measured with that approximation in all layers
    (W redrawn per trial as the swap-in draws it) on the cell's held-out examples -> OUT/trained/<name>/."""
    import favor.models as fm
    for name, att in trained_with(cell):
        model, meta = fm.load_mqar(os.path.join(ROOT, "data", "mqar", name, "model.pt"))
        task = meta["task"]
        tokens, labels = fm.mqar_batch(examples, task["L"], task["pairs"], task["vocab"], seed=TEST_SEED)
        variant = {"name": f"{att['features']}-{att['projection']}", "features": att["features"],
                   "projection": att["projection"], "m": att["m"]}
        favor.swap_in(model, (tokens, labels), [variant], layers=["all"], trials=trials, seed=0, metric="recall", dtype=dtype,
                      out=os.path.join(out, "trained", name), batch=64, threads=threads,
                      model_name=f"data/mqar/{name}/model.pt")


def permutation_p(a, b, draws=65536, seed=0):
    """Two-sided two-sample permutation test of mean(a) - mean(b): (1 + #{|diff*| >= |diff|}) /
    (1 + draws) over random splits of the pooled values."""
    import numpy as np
    a, b = np.asarray(a, float), np.asarray(b, float)
    pooled, n = np.concatenate([a, b]), len(a)
    rng = np.random.default_rng(seed)
    obs = abs(a.mean() - b.mean())
    perm = np.argsort(rng.random((draws, len(pooled))), axis=1)
    x = pooled[perm]
    diffs = np.abs(x[:, :n].mean(axis=1) - x[:, n:].mean(axis=1))
    return (1 + int((diffs >= obs - 1e-15).sum())) / (1 + draws)


def trained_lines(out, cell):
    """The report's table: post-hoc swap vs trained with the approximation, at equal state."""
    import pandas as pd
    rows = trained_with(cell)
    if not rows:
        return []
    post = pd.read_csv(os.path.join(out, cell, "errors.csv"), dtype={"layers": str})
    post_s = pd.read_csv(os.path.join(out, cell, "summary.csv"), dtype={"layers": str})
    lines = ["### Post-hoc swap or training with the approximation (all layers, equal state)", "",
             "The softmax-trained model with the approximation swapped into both layers, against the same "
             "architecture and recipe trained with it from the start (scripts/train_mqar.py --attention: "
             "favor.torch, W redrawn every step), both measured with it on these held-out examples, W redrawn "
             "per trial. p: two-sample permutation test of the difference of the trials' means.", "",
             "| approximation | m | state bytes | post-hoc recall | trained-with recall | p |", "|---|---|---|---|---|---|"]
    for name, att in rows:
        v = f"{att['features']}-{att['projection']}"
        t = pd.read_csv(os.path.join(out, "trained", name, "errors.csv"), dtype={"layers": str})
        a = post[(post.variant == v) & (post.m == att["m"]) & (post.layers == "all")].recall
        b = t.recall
        state = post_s[(post_s.variant == v) & (post_s.m == att["m"]) & (post_s.layers == "all")].state_bytes
        if not len(a) or not len(state):
            continue
        lines.append(f"| {v} | {att['m']} | {int(state.iloc[0])} | {a.mean():.3f} | {b.mean():.3f} "
                     f"([{name}](../../data/mqar/{name}/)) | {permutation_p(a, b):.2g} |")
    return lines + [""]


def compare(favor, out, cell, sets):
    """favor compare's verdicts against uniform on recall, one family per layer set: each layer
    set's rows (errors.csv, summary.csv, run.json) copied to OUT/<cell>/verdicts/layers<set>/
    and compared there (writes its comparisons_recall.csv / ranking_recall.csv). Holm over one
    panel's ~70 tested rows: 12 trials that agree in sign reach p 2 / 2^12 = 4.9e-4, which a
    family of the whole table (~210 rows) cannot pass (every row `underpowered`)."""
    import shutil
    import pandas as pd
    src = os.path.join(out, cell)
    for label in sets:
        d = os.path.join(src, "verdicts", f"layers{label}")
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
        for name in ("errors.csv", "summary.csv"):
            t = pd.read_csv(os.path.join(src, name), dtype={"layers": str}, keep_default_na=False)
            t[t.layers == label].to_csv(os.path.join(d, name), index=False)
        shutil.copyfile(os.path.join(src, "run.json"), os.path.join(d, "run.json"))
        favor.compare(d, metric="recall", against="uniform", write=True)


def verdicts(out, cell, sets):
    """The per-layer-set comparisons of compare(), one table."""
    import pandas as pd
    return pd.concat([pd.read_csv(os.path.join(out, cell, "verdicts", f"layers{x}", "comparisons_recall.csv"),
                                  dtype={"layers": str}) for x in sets])


def run_groups(L, ms):
    """The ladder's approximations as favor run configs' (variants, m grid): a run config holds
    one variant of a name, so each window (and window + sinks) is its own; exact is the
    reference of a run, not a variant."""
    plain = lambda v: {k: x for k, x in v.items() if k != "m"}
    vs = [v for v in ladder(L, ms) if v["name"] != "exact"]
    grids = [([plain(v) for v in vs if "m" in v], list(ms))]
    return grids + [([plain(v)], [1]) for v in vs if "m" not in v]


def head_runs(favor, out, cell, ms, trials, threads):
    """favor run of the ladder on each captured layer of the cell (capture/layer<l>/ with its
    upstream gradient g.npy): the head errors, unweighted and loss-aware -> OUT/<cell>/heads/."""
    cap = os.path.join(ROOT, "data", "mqar", cell, "capture")
    with open(os.path.join(cap, "manifest.json")) as f:
        man = json.load(f)
    L = man["layers"][0]["L"]
    for lay in man["layers"]:
        files = lay["files"]
        inputs = {"source": "npy", **{w: os.path.relpath(os.path.join(cap, files[w]["path"])) for w in "qkv"},
                  "grad": os.path.relpath(os.path.join(cap, files["g"]["path"]))}
        for g, (vs, grid) in enumerate(run_groups(L, ms)):
            cfg = {"experiment": "approximation", "causal": True, "seed": 0, "trials": trials,
                   "metrics": HEAD_METRICS, "m": grid, "inputs": inputs, "variants": vs}
            favor.run(cfg, out=os.path.join(out, cell, "heads", f"layer{lay['index']}", f"group{g}"), threads=threads)


def link(out, cell):
    """Per layer: Spearman's rho of each head error against the recall the layer's swap loses
    (-delta_recall) over the (variant, columns) points the swap-in and the head runs share."""
    import glob
    import pandas as pd
    from swap_in_study import spearman
    lad = pd.read_csv(os.path.join(out, cell, "summary.csv"), dtype={"layers": str})
    rows, points = [], []
    for layer_dir in sorted(glob.glob(os.path.join(out, cell, "heads", "layer*"))):
        layer = os.path.basename(layer_dir)[len("layer"):]
        h = pd.concat([pd.read_csv(os.path.join(d, "summary.csv"))
                       for d in sorted(glob.glob(os.path.join(layer_dir, "group*")))])
        x = h.groupby(["variant", "num_features"])[[f"{m}_mean" for m in HEAD_METRICS]].mean().reset_index()
        y = lad[lad.layers == layer][["variant", "num_features", "delta_recall_mean"]]
        j = y.merge(x, on=["variant", "num_features"])
        for _, r in j.iterrows():
            points.append({"layer": int(layer), "variant": r.variant, "num_features": int(r.num_features),
                           "recall_lost": -r.delta_recall_mean, **{m: r[f"{m}_mean"] for m in HEAD_METRICS}})
        for m in HEAD_METRICS:
            ok = j[f"{m}_mean"].notna()
            rho, lo, hi, n = spearman(j.loc[ok, f"{m}_mean"].to_numpy(), -j.loc[ok, "delta_recall_mean"].to_numpy())
            rows.append({"layer": int(layer), "metric": m, "n": n, "rho": rho, "ci95_low": lo, "ci95_high": hi})
    pd.DataFrame(rows).to_csv(os.path.join(out, cell, "link.csv"), index=False)
    pd.DataFrame(points).to_csv(os.path.join(out, cell, "link_points.csv"), index=False)
    return pd.DataFrame(rows)


def tables(out, cell, sets):
    import pandas as pd
    d = os.path.join(out, cell)
    s = pd.read_csv(os.path.join(d, "summary.csv"), dtype={"layers": str})
    c = verdicts(out, cell, sets)
    with open(os.path.join(d, "run.json")) as f:
        info = json.load(f)
    return s, c, info


def plot_cell(out, cell, s, info, sets):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(sets), figsize=(5.2 * len(sets), 4.6), sharey=True)
    colours = dict(zip(FAMILIES, plt.cm.tab10.colors))
    for ax, label in zip(axes, sets):
        p = s[s.layers == label]
        for f in FAMILIES:
            for proj, style in (("orthogonal", "-"), ("iid", ":")):
                r = p[p.variant == f"{f}-{proj}"].sort_values("state_bytes")
                if len(r):
                    ax.errorbar(r.state_bytes, r.recall_mean, yerr=1.96 * r.recall_sem.fillna(0), ls=style,
                                marker="o", ms=3, color=colours[f], lw=1.2,
                                label=f"{f} ({proj})" if label == sets[0] else None)
        for name, colour, marker in (("window", "black", "s"), ("window+sinks", "0.5", "D"),
                                     ("positive+window", colours["positive"], "^"),
                                     ("sderf+window", colours["sderf"], "v")):
            r = p[p.variant == name].sort_values("state_bytes")
            if len(r):
                ax.plot(r.state_bytes, r.recall_mean, ls="--", marker=marker, ms=5, color=colour, lw=1.5,
                        label=name if label == sets[0] else None)
        for name, marker in (("exact", "*"), ("taylor2", "P")):
            r = p[p.variant == name]
            if len(r):
                ax.plot(r.state_bytes, r.recall_mean, marker, ms=11, color="crimson" if name == "exact" else "teal",
                        label=name if label == sets[0] else None)
        u = p.baseline_recall.iloc[0]
        ax.axhline(u, color="0.6", ls="--", lw=1, label="uniform" if label == sets[0] else None)
        if label == "all":
            ax.plot(*zip(*BASED_WINDOW), "x", color="black", ms=7, label="Based Fig. 2: sliding window")
            ax.plot(*zip(*BASED_BASED), "+", color="teal", ms=9, label="Based Fig. 2: Based")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("state per head (bytes, float32)")
        ax.set_title(f"layers {label} swapped")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"recall ({info['windows']['N']} held-out examples; 95% CI over trials)")
    fig.legend(loc="lower center", ncol=6, fontsize=7, frameon=False)
    fig.suptitle(f"MQAR {cell}: recall with the attention swapped after softmax training "
                 f"(exact: {info['exact_recall']:.3f})", fontsize=10)
    fig.tight_layout(rect=(0, 0.14, 1, 0.96))
    fig.savefig(os.path.join(out, f"{cell}.png"), dpi=110)
    plt.close(fig)


def fmt(x, digits=3):
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def verdict_of(c, variant, m, label):
    """favor compare's verdict of variant at m in layer set label against uniform ("" if none)."""
    r = c[(c.a == variant) & (c.m == m) & (c.layers == label)]
    if not len(r):
        return ""
    p = r.p_holm.iloc[0]
    return r.verdict.iloc[0] + ("" if math.isnan(p) else f" (p {p:.2g})")


def mark(c, variant, m, label):
    """The table's mark of favor compare's verdict against uniform: + better, - worse, none n.s."""
    v = verdict_of(c, variant, m, label)
    return " +" if v.startswith("a better") else " -" if v.startswith("a worse") else ""


def cell_report(out, cell, s, c, info, sets):
    lines = [f"## {cell}", ""]
    with open(os.path.join(ROOT, "data", "mqar", cell, "model.json")) as f:
        queries = info["windows"]["N"] * json.load(f)["task"]["pairs"]
    census = os.path.join(ROOT, "data", "mqar", cell, "capture", "heads.md")
    lines += [f"The model's own recall on these {info['windows']['N']} held-out examples (seed {TEST_SEED}): "
              f"**{info['exact_recall']:.4f}**; uniform attention in all layers "
              f"{info['uniform_recall']['all']:.4f}; {queries} queries, so a recall r has a binomial SE "
              f"sqrt(r (1 - r) / {queries}) over the examples, at most {0.5 / math.sqrt(queries):.4f}. "
              f"![recall vs state]({cell}.png)", ""]
    if os.path.exists(census):
        with open(census) as f:
            rows = [l for l in f.read().splitlines() if l.startswith("|")]
        lines += ["The census of its capture (data/mqar/%s/capture/heads.md):" % cell, ""] + rows + [""]
    for label in sets:
        p = s[s.layers == label]
        ms = sorted(int(m) for m in p[p.variant == f"{FAMILIES[0]}-orthogonal"].m)
        lines += [f"### Layers {label} swapped: recall (mean over {int(p.trials.max())} trials; state per head in "
                  "bytes)", "", "| variant | " + " | ".join(f"m = {m}" for m in ms) + " |",
                  "|---|" + "---|" * len(ms)]
        for v in [f"{f}-{pr}" for f in FAMILIES for pr in PROJECTIONS] + [f"{f}+window" for f in HYBRID_REMAINDERS]:
            if v not in set(p.variant):
                continue
            r = p[p.variant == v].set_index("m")
            lines.append(f"| {v} | " + " | ".join(
                f"{fmt(r.recall_mean[m])}{mark(c, v, m, label)} ({int(r.state_bytes[m])})" if m in r.index else ""
                for m in ms) + " |")
        lines += ["", "| exact-state variant | columns | state bytes | recall |", "|---|---|---|---|"]
        for v in ("exact", "window", "window+sinks", "taylor2"):
            for _, r in p[p.variant == v].sort_values("state_bytes").iterrows():
                lines.append(f"| {v} | {int(r.num_features)} | {int(r.state_bytes)} | "
                             f"{fmt(r.recall_mean)}{mark(c, v, int(r.m), label)} |")
        lines.append(f"| uniform | | | {fmt(p.baseline_recall.iloc[0])} |")
        lines.append("")
    lines += trained_lines(out, cell)
    if not os.path.isdir(os.path.join(out, cell, "heads")):
        return lines + ["A small ladder (--small): no head runs on the capture, so no link of head errors to recall.", ""]
    lk = link(out, cell)
    lines += ["### Which head error predicts the recall lost", "",
              "Spearman's rho between each head error on the capture (favor run of the same variants on "
              "capture/layer<l>/, mean over trials; loss-aware errors from its g.npy = dLoss/dOut) and the "
              "recall that swapping that layer alone loses (-delta_recall), over the (variant, columns) points "
              "both have; 95% interval from Fisher's z (variance 1.06 / (n - 3)).", "",
              "| layer | head error | points | rho | 95% interval |", "|---|---|---|---|---|"]
    for _, r in lk.iterrows():
        lines.append(f"| {r.layer} | {r.metric} | {r.n} | {fmt(r.rho)} | [{fmt(r.ci95_low)}, {fmt(r.ci95_high)}] |")
    lines.append("")
    for layer in sorted(lk.layer.unique()):
        by = lk[lk.layer == layer].set_index("metric").rho
        best = by.idxmax()
        lost = -s[s.layers == str(layer)].delta_recall_mean.min()
        lines.append(f"- Layer {layer}: the head error that ranks the variants most like the recall lost is "
                     f"{best} (rho {by[best]:.3f}; output_rel_error {by['output_rel_error']:.3f}, "
                     f"loss_delta_abs {by['loss_delta_abs']:.3f}); the most recall a swap of this layer alone "
                     f"loses is {lost:.3f}" + (" (next to nothing: the ranks are mostly noise)." if lost < 0.05 else "."))
    lines.append("")
    return lines


def report(out, cells, settings):
    lines = ["# Heads a window cannot serve: MQAR recall with the attention swapped", "",
             "Written by `scripts/recall_study.py` (every number computed from the tables here). "
             "Metric: recall (top-1 accuracy on the query positions) of a 2-layer attention model trained "
             "with softmax attention (data/mqar/), with the attention of the layer set computed by each "
             "variant, on held-out examples; state per head in bytes (float32). Verdicts: "
             "`favor compare --against uniform --metric recall` (<cell>/verdicts/layers<set>/comparisons_recall.csv): "
             "a value marked + is better than uniform attention (Holm over the layer set's rows, alpha 0.05), - worse, "
             "unmarked not shown different. The trials redraw W on the same held-out examples: the "
             "examples' own sampling error is the binomial SE over the queries given per cell. A cell's "
             "windows.csv (a row per example, trial and setting: 75-97 MB) is not committed; the script "
             "writes it.", "",
             "Based's Figure 2 points (drawn in each cell's 'all' panel) differ in setup: there each mixer is "
             "trained with the model (V = 8192), here every approximation is swapped into a model trained "
             "with softmax attention, V = 256; their state is per layer of their model.", ""]
    for cell in cells:
        sets = layer_sets(settings, cell)
        s, c, info = tables(out, cell, sets)
        plot_cell(out, cell, s, info, sets)
        lines += cell_report(out, cell, s, c, info, sets)
    lines += ["## Settings", "", "```", json.dumps(settings, indent=2), "```", ""]
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("\n".join(lines))


def main(argv=None):
    ap = argparse.ArgumentParser(usage="%(prog)s [--cells C,...] [--out DIR] [--report-only] [options]   (-h lists them)",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default="L64_kv4_d64,L64_kv4_d128_h2,L256_kv16_d64")
    ap.add_argument("--out", default="results/recall")
    ap.add_argument("--examples", type=int, default=1000)
    ap.add_argument("--trials", type=int, default=12)
    ap.add_argument("--ms", default="16,64,256,1024,4096")
    ap.add_argument("--cell-ms", action="append", default=[], help="CELL=m,m,...: that cell's m grid")
    ap.add_argument("--link-trials", type=int, default=4, help="trials of the head runs on the captures")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--small", default="", help="CELL,...: those cells get the small ladder (exact, windows, "
                    "FAVOR+ and FAVOR# orthogonal, taylor2; layer sets all and 1; no head runs)")
    ap.add_argument("--dtype", default="float32", help="the approximations' dtype (favor.swap_in's dtype=)")
    ap.add_argument("--report-only", action="store_true")
    a = ap.parse_args(argv)
    sys.path.insert(0, os.path.join(ROOT, "build", "python"))
    import favor
    cells = [c for c in a.cells.split(",") if c]
    cell_ms = {}
    for spec in a.cell_ms:
        name, _, ms = spec.partition("=")
        cell_ms[name] = [int(m) for m in ms.split(",")]
    ms = [int(m) for m in a.ms.split(",")]
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "study.json")
    settings = json.load(open(path)) if os.path.exists(path) else {"cells": {}}
    small = {c for c in a.small.split(",") if c}
    if not a.report_only:
        for cell in cells:
            grid = cell_ms.get(cell, ms)
            secs = run_cell(favor, cell, a.out, a.examples, a.trials, grid, a.threads, cell in small, a.dtype)
            t0 = time.time()
            if cell not in small:
                head_runs(favor, a.out, cell, grid, a.link_trials, a.threads)
            run_trained(favor, a.out, cell, a.examples, a.trials, a.threads, a.dtype)
            secs += time.time() - t0
            settings["cells"][cell] = {"examples": a.examples, "trials": a.trials, "ms": grid, "seed": 0,
                                       "test_seed": TEST_SEED, "threads": a.threads, "minutes": round(secs / 60, 1)}
            if a.dtype != "float32":
                settings["cells"][cell]["dtype"] = a.dtype
            if cell in small:
                settings["cells"][cell]["ladder"] = "small"
            else:
                settings["cells"][cell]["link_trials"] = a.link_trials
            with open(path, "w") as f:
                json.dump(settings, f, indent=2)
                f.write("\n")
    done = [c for c in cells if c in settings["cells"]]
    if a.report_only:
        for cell in done:
            compare(favor, a.out, cell, layer_sets(settings, cell))
    report(a.out, done, settings)


if __name__ == "__main__":
    main()
