"""favor.study: which estimator for a model's heads, from a capture, in one call (issue 41
item 1; docs/design.md section 9.3).

    favor.study("CAPTURE_DIR", out="DIR", budgets=(64, 256), grad=False, causal="auto")
    python3 -m favor study CAPTURE_DIR [--budgets 64,256] [--grad] [--causal auto|yes|no] [--out DIR]

CAPTURE_DIR is what scripts/capture_qkv.py writes (manifest.json, layer<i>/{q,k,v}.npy and,
captured with a loss, layer<i>/g.npy: the model's dLoss/dOut). For every captured layer and
feature budget F the study runs one favor config (DIR/layer<i>/F<F>/: every head of the
layer, the estimator families below at exactly F columns, `trials` trials), compares every
variant with uniform attention (the mean of the visible rows of V: the trivial baseline) by
`favor compare --match num_features --against uniform`, and writes DIR/report.md (per head
and budget: the best variant, its error as a ratio to uniform's and the verdict; FAVOR+'s
ratio; the gradients' cosines with grad=True), DIR/report.png (every variant's ratio per
head) and DIR/study.csv (the rows the report is made of).
"""
import json
import math
import os
import shutil
import tempfile

import numpy as np

from . import Error, compare as _compare, run as _run

__all__ = ["study", "default_variants", "trials_for"]

METRIC = "output_rel_error"
GRAD_METRICS = ["grad_cosine", "grad_q_rel_error", "grad_k_rel_error", "grad_v_rel_error"]
ALPHA = 0.05


def default_variants(F, d):
    """The estimator families at F columns (section 2, 2.8 of docs/design.md): random features
    alone (FAVOR+ positive, FAVOR++ oprf, FAVOR# sderf, random Fourier trig; orthogonal W, at
    m = F or F/2), an exact window of the last F keys alone, FAVOR+ beside a window of F/2, and
    the parameter-free relu(x) map (untrained T2R, d columns) beside a window of F - d."""
    v = [{"features": f, "projection": "orthogonal"} for f in ("positive", "oprf", "sderf", "trig")]
    v.append({"features": "none", "window": F})
    if F >= 4:
        v.append({"features": "positive", "projection": "orthogonal", "window": F // 2})
    if F > d:
        v.append({"features": "t2r", "window": F - d})
    return v


def _random(variant):
    """True when the variant draws W (its trials differ): a projection map."""
    return variant.get("features") not in ("none", "elu", "dpfp", "taylor2", "hedgehog", "t2r", "liger",
                                            "softmax_dim", "nystrom")


def trials_for(tests, alpha=ALPHA, margin=4):
    """Trials that let a verdict be reached with room: favor compare's one-sample sign-flip test
    has p_min = 2 / 2^n, Holm over `tests` rows needs tests * p_min < alpha (validate's power
    rule, docs/design.md section 4); n is the smallest with tests * 2 / 2^n <= alpha / margin
    (a difference whose trials are not all on one side still passes), at least 8."""
    n = 8
    while tests * 2.0 / 2.0 ** n > alpha / margin:
        n += 1
    return n


def _manifest(capture):
    path = os.path.join(capture, "manifest.json")
    try:
        with open(path) as f:
            man = json.load(f)
    except FileNotFoundError:
        raise Error(f"{capture}: no manifest.json (a capture of scripts/capture_qkv.py)") from None
    except (OSError, ValueError) as e:
        raise Error(f"{path}: {e}") from None
    if not isinstance(man, dict) or not str(man.get("format", "")).startswith("favor capture") \
            or not isinstance(man.get("layers"), list) or not man["layers"]:
        raise Error(f"{path}: not a favor capture manifest (format 'favor capture 1' with layers)")
    return man


def _config_variants(path):
    """The "variants" list of a favor config file."""
    try:
        with open(path) as f:
            v = json.load(f).get("variants")
    except (OSError, ValueError, AttributeError) as e:
        raise Error(f"variants: {path}: {getattr(e, 'strerror', None) or e}") from None
    if not isinstance(v, list) or not v:
        raise Error(f"variants: {path}: no \"variants\" list")
    return v


def _causal_of(layer, causal, path):
    if causal == "auto":
        return bool(layer["causal"])
    if causal in (True, "yes", "true"):
        if layer["L"] != layer["Lk"]:
            raise Error(f"{path}: layer {layer['index']}: causal needs as many keys as queries "
                        f"({layer['L']} and {layer['Lk']})")
        return True
    if causal in (False, "no", "false"):
        return False
    raise Error(f"causal: auto, yes or no, got {causal!r}")


def entropy_ratios(q, k, causal, block=512):
    """Per head (B, H flattened): the mean row entropy of softmax(q k^T / sqrt(d)) (causal
    rows over their visible keys) divided by the mean entropy of a uniform row, ln(visible
    keys): 0 for one-hot rows, 1 for uniform attention. float64, rows in blocks."""
    q = np.asarray(q, dtype=np.float64).reshape(-1, *q.shape[-2:])
    k = np.asarray(k, dtype=np.float64).reshape(-1, *k.shape[-2:])
    L, d = q.shape[-2:]
    Lk = k.shape[-2]
    visible = np.arange(1, L + 1) if causal else np.full(L, Lk)
    uniform = np.log(visible).mean()
    out = []
    for h in range(q.shape[0]):
        total = 0.0
        for r0 in range(0, L, block):
            s = q[h, r0:r0 + block] @ k[h].T / math.sqrt(d)
            if causal:
                s = np.where(np.arange(Lk)[None, :] <= np.arange(r0, r0 + len(s))[:, None], s, -np.inf)
            s -= s.max(axis=1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=1, keepdims=True)
            total += float(-(p * np.log(np.where(p > 0, p, 1.0))).sum())
        out.append(total / L / uniform if uniform > 0 else float("nan"))
    return out


def _config(capture, layer, F, variants, trials, causal, grad, seed, out):
    files = {w: os.path.abspath(os.path.join(capture, layer["files"][w]["path"])) for w in "qkv"}
    inputs = {"source": "npy", **files, "per_head": True}
    metrics = [METRIC, "attention_tv"]
    if grad:
        metrics += GRAD_METRICS
        g = layer.get("files", {}).get("g")
        if g:
            inputs["grad"] = os.path.abspath(os.path.join(capture, g["path"]))
    return {"name": f"study_layer{layer['index']}_F{F}",
            "description": f"favor study of {capture}: layer {layer['index']} ({layer.get('name', '')}), "
                           f"every head, the estimator families at F = {F} columns",
            "seed": seed, "inputs": inputs, "causal": causal, "variants": variants,
            "num_features": [F], "trials": trials, "metrics": metrics, "output_dir": out}


def study(capture, out=None, budgets=(64, 256), grad=False, causal="auto", trials=None, variants=None,
          seed=0, threads=None, layers=None, quiet=True):
    """Runs the study of a capture (module docstring) and returns the path of its report.md.

    budgets: feature columns F (each variant at exactly F: m = F for a map alone, the window's
    keys counted for hybrids). grad: also the gradient metrics, with the capture's upstream
    gradient g.npy where it has one (else favor's random G: said in the report). causal: "auto"
    (each layer as the model used it, from the manifest), "yes" or "no". trials: None picks
    trials_for(heads x random variants per layer and budget). variants: a list of favor variant
    dicts, or a function (F, d) -> list, instead of default_variants. layers: indices (default
    all). out: default out/study_<capture folder name>. A bad capture or argument raises
    favor.Error (one line); the report replaces an earlier one only when every run succeeded.
    """
    capture = os.fspath(capture)
    man = _manifest(capture)
    if isinstance(variants, (str, os.PathLike)):
        variants = _config_variants(os.fspath(variants))
    try:
        budgets = sorted({int(b) for b in (budgets.split(",") if isinstance(budgets, str) else budgets)})
    except (TypeError, ValueError):
        raise Error(f"budgets: positive integers, got {budgets!r}") from None
    if not budgets or budgets[0] < 1:
        raise Error(f"budgets: positive integers, got {budgets!r}")
    chosen = man["layers"] if layers is None else [lay for lay in man["layers"] if lay["index"] in set(layers)]
    if not chosen:
        raise Error(f"layers: none of {layers!r} in {capture}/manifest.json")
    out = os.path.abspath(out or os.path.join("out", "study_" + os.path.basename(os.path.abspath(capture))))
    grad_source = None
    if grad:
        has = [bool(lay.get("files", {}).get("g")) for lay in chosen]
        grad_source = (chosen[0]["upstream_gradient"]["loss"] if all(has) else
                       "favor's random G (docs/design.md section 7): the capture has no g.npy" if not any(has) else
                       "mixed: the capture's g.npy where present, else favor's random G")
    plan = []
    for lay in chosen:
        c = _causal_of(lay, causal, capture)
        heads = int(lay["B"]) * int(lay["H"])
        for F in budgets:
            vs = (variants(F, lay["d"]) if callable(variants) else
                  list(variants) if variants is not None else default_variants(F, lay["d"]))
            n_random = sum(_random(v) for v in vs)
            n = int(trials) if trials is not None else trials_for(max(1, heads * n_random))
            plan.append((lay, F, c, vs, n, heads * n_random))
    rows, settings = [], []
    for lay, F, c, vs, n, tests in plan:
        d = os.path.join(out, f"layer{lay['index']}", f"F{F}")
        _run(_config(capture, lay, F, vs, n, c, grad, seed, d), out=d, threads=threads)
        metrics = [METRIC] + (["grad_cosine"] if grad else [])
        _compare(d, metric=metrics, match="num_features", against="uniform", write=True)
        rows.append(_rows(d, lay, F, grad))
        settings.append({"layer": lay["index"], "F": F, "causal": c, "trials": n, "tests": tests,
                         "variants": [v.get("name") or _name(v) for v in vs]})
    import pandas as pd
    table = pd.concat(rows, ignore_index=True)
    ent = {}
    for lay in chosen:
        q, k = (np.load(os.path.join(capture, lay["files"][w]["path"]), mmap_mode="r") for w in "qk")
        c = _causal_of(lay, causal, capture)
        for h, r in enumerate(entropy_ratios(q, k, c)):
            ent[(lay["index"], h)] = r
    table["entropy_ratio"] = [ent[(int(a), int(b))] for a, b in zip(table["layer"], table["head"])]
    info = {"capture": os.path.abspath(capture), "budgets": budgets, "grad": bool(grad), "grad_source": grad_source,
            "trials_given": trials is not None,
            "alpha": ALPHA, "runs": settings, "seed": seed}
    _publish(out, table, info, man)
    return os.path.join(out, "report.md")


def _name(v):
    """favor's name of a variant (features-projection, +w<window>, +s<sinks>), as summary.csv has it."""
    n = v["features"] + (f"-{v['projection']}" if v.get("projection") else "")
    return n + (f"+w{v['window']}" if v.get("window") else "") + (f"+s{v['sinks']}" if v.get("sinks") else "")


def _rows(d, lay, F, grad):
    """One row per (head, variant) of a run: mean error, uniform's, ratio, verdict against uniform."""
    import pandas as pd
    s = pd.read_csv(os.path.join(d, "summary.csv"))
    c = pd.read_csv(os.path.join(d, f"comparisons_{METRIC}.csv"), dtype={"verdict": str}, keep_default_na=False)
    c = c[c["b"] == "uniform"]
    verdict = {(r["a"], int(r["head"])): r["verdict"] for _, r in c.iterrows()}
    r = pd.DataFrame({"layer": lay["index"], "head": s["head"].astype(int), "F": F, "variant": s["variant"],
                      "features": s["features"], "num_features": s["num_features"], "trials": s["trials"],
                      "error": s[f"{METRIC}_mean"], "uniform_error": s[f"baseline_{METRIC}"]})
    r = r[r["num_features"] == F].reset_index(drop=True)   # maps with their own F (elu: d) only at that budget
    s = s[s["num_features"] == F].reset_index(drop=True)
    r["ratio"] = r["error"] / r["uniform_error"]
    r["verdict"] = [verdict.get((v, h), "") for v, h in zip(r["variant"], r["head"])]
    if grad:
        gc = pd.read_csv(os.path.join(d, "comparisons_grad_cosine.csv"), dtype={"verdict": str},
                         keep_default_na=False)
        gc = gc[gc["b"] == "uniform"]
        gv = {(x["a"], int(x["head"])): x["verdict"] for _, x in gc.iterrows()}
        r["grad_cosine"] = s["grad_cosine_mean"]
        r["uniform_grad_cosine"] = s["baseline_grad_cosine"]
        r["grad_verdict"] = [gv.get((v, h), "") for v, h in zip(r["variant"], r["head"])]
    return r


def _fmt(x):
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.3g}"


VERDICT_WORDS = {"a better": "below uniform", "a worse": "above uniform", "n.s.": "n.s.", "underpowered": "underpowered",
                 "a=b": "equal", "": "-"}


def report_table(table, budgets):
    """The per-head Markdown table: per budget the best variant (lowest mean error), its ratio
    to uniform's error and its verdict, and FAVOR+'s (positive-orthogonal) ratio."""
    head = ["layer.head", "entropy ratio", "uniform's error"]
    for F in budgets:
        head += [f"best at F = {F}", "ratio", "verdict", "FAVOR+ ratio"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (layer, h), g in table.groupby(["layer", "head"], sort=True):
        row = [f"{layer}.{h}", f"{g['entropy_ratio'].iloc[0]:.3f}", f"{g['uniform_error'].iloc[0]:.4g}"]
        for F in budgets:
            gf = g[g["F"] == F]
            fin = gf[np.isfinite(gf["error"])]
            if fin.empty:
                row += ["-", "-", "-", "-"]
                continue
            best = fin.loc[fin["error"].idxmin()]
            plus = gf[gf["variant"] == "positive-orthogonal"]["ratio"]
            row += [best["variant"], _fmt(float(best["ratio"])), VERDICT_WORDS.get(best["verdict"], best["verdict"]),
                    _fmt(float(plus.iloc[0])) if len(plus) else "-"]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def grad_table(table, budgets):
    """Per head and budget: the variant whose gradient has the highest mean cosine with the
    exact gradient, that cosine, uniform attention's cosine, and the verdict against uniform."""
    head = ["layer.head"]
    for F in budgets:
        head += [f"best gradient at F = {F}", "cosine", "uniform's", "verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (layer, h), g in table.groupby(["layer", "head"], sort=True):
        row = [f"{layer}.{h}"]
        for F in budgets:
            gf = g[(g["F"] == F) & np.isfinite(g["grad_cosine"])]
            if gf.empty:
                row += ["-"] * 4
                continue
            best = gf.loc[gf["grad_cosine"].idxmax()]
            row += [best["variant"], _fmt(float(best["grad_cosine"])), _fmt(float(best["uniform_grad_cosine"])),
                    {"a better": "above uniform", "a worse": "below uniform"}.get(best["grad_verdict"],
                                                                                  best["grad_verdict"] or "-")]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _summary_lines(table, budgets):
    """Per budget: on how many heads the best variant, and a random-feature map alone (a map
    drawing W, no window or sinks), are below uniform by the verdict; the best one's ratios."""
    lines = []
    n = table.groupby(["layer", "head"]).ngroups
    alone = table["features"].map(lambda f: _random({"features": f})) & ~table["variant"].str.contains(r"\+[ws]\d")
    for F in budgets:
        t = table[(table["F"] == F) & np.isfinite(table["error"])]
        if t.empty:
            continue
        best = t.loc[t.groupby(["layer", "head"])["error"].idxmin()]
        rf = t[alone[t.index]]
        line = (f"- F = {F}: the best variant's error is below uniform's (verdict) on "
                f"{int((best['verdict'] == 'a better').sum())} of {n} heads (ratios {best['ratio'].min():.3g} to "
                f"{best['ratio'].max():.3g})")
        if len(rf):
            rbest = rf.loc[rf.groupby(["layer", "head"])["error"].idxmin()]
            line += (f"; the best random-feature map alone: ratios {rbest['ratio'].min():.3g} to "
                     f"{rbest['ratio'].max():.3g} (median {rbest['ratio'].median():.3g}), below uniform on "
                     f"{rf[rf['verdict'] == 'a better'].groupby(['layer', 'head']).ngroups} of {n} heads")
        lines.append(line + ".")
    return lines


YMAX = 3.0   # ratios above are named in the panel, not drawn (trig's can reach 10^3 on trained heads)


def _figure(table, budgets, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    heads = sorted({(int(a), int(b)) for a, b in zip(table["layer"], table["head"])})
    x = {hd: i for i, hd in enumerate(heads)}
    family = table["variant"].str.replace(r"\+w\d+", "+window", regex=True)   # the same map at every F
    families = list(dict.fromkeys(family))
    hybrid = any("+window" in f for f in families)
    fin = table["ratio"][np.isfinite(table["ratio"])]
    ymin = max(min(float(fin.min()) if len(fin) else 0.1, 0.5) * 0.8, 1e-4)
    fig, axes = plt.subplots(len(budgets), 1, figsize=(max(6.0, 0.42 * len(heads) + 2.5), 3.3 * len(budgets) + 0.6),
                             squeeze=False, sharey=True, sharex=True)
    axes = axes[:, 0]
    colors = plt.get_cmap("tab10" if len(families) <= 10 else "tab20").colors
    for ax, F in zip(axes, budgets):
        off = []
        for i, fam in enumerate(families):
            r = table[(table["F"] == F) & (family == fam)]
            if r.empty:
                continue
            name = r["variant"].iloc[0]
            bad = r[~np.isfinite(r["ratio"]) | (r["ratio"] > YMAX)]
            if len(bad):
                off.append(f"{name}: {len(bad)} head(s) " + (f"up to {bad['ratio'].max():.3g}"
                                                            if np.isfinite(bad["ratio"]).all() else "non-finite"))
            r = r[np.isfinite(r["ratio"]) & (r["ratio"] <= YMAX)]
            dx = (i - (len(families) - 1) / 2) * 0.5 / max(1, len(families))   # side by side within a head
            ax.plot([x[(int(a), int(b))] + dx for a, b in zip(r["layer"], r["head"])], r["ratio"],
                    "os^vDP*Xph<>"[i % 12], color=colors[i % len(colors)], ms=5, ls="none", label=fam)
        ax.axhline(1.0, color="0.4", ls=(0, (5, 3)), lw=1.2, label="uniform attention (mean of V) = 1")
        ax.set_yscale("log")
        ax.set_ylim(ymin, YMAX)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        if YMAX / ymin < 10:   # within a decade the minor ticks carry the labels
            ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax.tick_params(axis="y", which="minor", labelsize=7)
        else:
            ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xticks(range(len(heads)))
        ax.set_xticklabels([f"{a}.{b}" for a, b in heads], rotation=90 if len(heads) > 24 else 0, fontsize=8)
        ax.set_title(f"F = {F} columns" + (" (a window of w keys: w of them)" if hybrid else "")
                     + ("".join(f"\nabove the panel: {o}" for o in off)), fontsize=9)
        ax.grid(alpha=0.3, which="both")
    axes[-1].set_xlabel("layer.head")
    for ax in axes:
        ax.set_ylabel(f"{METRIC} / uniform's\n(below 1: better than the mean of V)", fontsize=8)
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8,
               title="+window: its window at each F" if hybrid else None, title_fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _publish(out, table, info, man):
    """report.md, report.png, study.csv and study.json written into a temporary folder inside
    out, then moved over the earlier ones."""
    budgets = info["budgets"]
    lay0 = man["layers"][0]
    trials = sorted({r["trials"] for r in info["runs"]})
    tests = max(r["tests"] for r in info["runs"])
    names = list(dict.fromkeys(v for r in info["runs"] for v in r["variants"]))
    rel = os.path.relpath(info["capture"])
    lines = [f"# favor study of {info['capture'] if rel.startswith('..') else rel}", "",
             f"Every head of {len({r['layer'] for r in info['runs']})} layer(s) ({lay0.get('module', '')}: H = {lay0['H']}, "
             f"B = {lay0['B']}, L = {lay0['L']}, d = {lay0['d']}; "
             + ", ".join(f"layer {r['layer']} {'causal' if r['causal'] else 'not causal'}"
                         for r in info["runs"] if r["F"] == budgets[0]) + ")"
             + (f"; with B = {lay0['B']} inputs a head is numbered b x H + h (input b, head h)." if lay0["B"] > 1 else "."),
             f"Variants at exactly F columns (a window's keys count as columns): {', '.join(names)}. "
             f"Metric: {METRIC}, mean over {'/'.join(map(str, trials))} trials, as a ratio to uniform attention's "
             "(the mean of the visible rows of V; below 1 is better than that trivial baseline). Verdict: "
             f"`favor compare --match num_features --against uniform` (one-sample sign-flip test of the trials, "
             f"Holm over each run's {tests} or fewer tested rows, alpha {ALPHA}; deterministic variants are exact "
             "differences). Trials: " + ("as given." if info["trials_given"] else
                                    "the smallest n with tests x 2/2^n <= alpha/4, at least 8 (favor.trials_for)."),
             "", "## Per head", ""]
    lines += _summary_lines(table, budgets) + [""] + report_table(table, budgets) + [""]
    if info["grad"]:
        lines += ["## Gradients", "",
                  f"Upstream gradient: {info['grad_source']}. grad_cosine: the cosine of the estimator's (dQ, dK, dV) "
                  "with exact attention's (higher is better; uniform attention's dQ = dK = 0).", ""]
        lines += grad_table(table, budgets) + [""]
    lines += ["Files: study.csv (every head x variant x budget row of these tables), study.json (the settings), "
              "layer<i>/F<F>/ (each run's result set and comparisons), report.png.", ""]
    kinds = {r["causal"] for r in info["runs"]}
    causal_words = "causal" if kinds == {True} else "not causal" if kinds == {False} else "causal and not"
    tmp = tempfile.mkdtemp(prefix=".report.", dir=out)
    try:
        with open(os.path.join(tmp, "report.md"), "w") as f:
            f.write("\n".join(lines))
        table.to_csv(os.path.join(tmp, "study.csv"), index=False)
        with open(os.path.join(tmp, "study.json"), "w") as f:
            json.dump(info, f, indent=2)
            f.write("\n")
        _figure(table, budgets, os.path.join(tmp, "report.png"),
                f"favor study of {os.path.basename(info['capture'])} ({causal_words}): every head, "
                "each variant's error / uniform's")
        for name in ("report.md", "study.csv", "study.json", "report.png"):
            os.replace(os.path.join(tmp, name), os.path.join(out, name))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
