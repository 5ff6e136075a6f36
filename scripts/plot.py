#!/usr/bin/python3
"""Plot a favor result directory (summary.csv or timing.csv, + run.json) as a PNG.

Usage: /usr/bin/python3 scripts/plot.py RESULT_DIR [--out PNG] [--data JSON]
           [--kind auto|m|L|scale|kernel|angle|timing|precision|gradient] [--metric output_mse]
           [--stat mean|median] [--x m|num_features] [--ratio] [--heads auto|facet|mean]
           [--layout auto|fig4|plain]

Kinds (auto picks from the table):
  kernel  kernel experiments (norm/angle columns): the Performer Fig. 2 heat map of
          r(phi, l) = MSE_trig / MSE_pos (closed form), the slice at the norm closest to 1
          (closed forms + empirical points, over the angles measured), and empirical / theory.
          Points are drawn at the angle they were measured at (variants at one angle are
          told apart by colour, marker and size, never shifted sideways); bars: ± one
          standard error of the mean.
  m       metric vs number of random features m (log-log), one line per variant, one panel
          per other varying key (scale, L, d), titled with the variants compared. When the
          variants are exactly trig and positive features, each iid and orthogonal, the
          Performer Fig. 4 layout: left "orthogonal vs iid" (per feature map), right
          "positive vs trig" (one projection); --layout fig4 forces it (variants outside it
          are named in the title), --layout plain refuses it. When run.json's config has a
          num_features grid (each variant at its own m), x is num_features.
  L       metric vs sequence length L (log x), one line per variant (and per m).
  scale   metric vs input scale (log y), one line per variant; panels per other keys.
  angle   kernel experiments, for comparing many estimators: kernel MSE vs angle (log y,
          ± one standard error of the mean), one line per variant at the angles measured,
          one panel per (m, norm), with the
          iid positive Lemma 2 curve for reference.
  timing  timing.csv (experiment "timing"): wall time vs L (log-log), exact attention and
          each FAVOR variant, median with min-max bars, the crossover L marked (the smallest
          L from which the variant stays faster than exact). The Performer Fig. 3 counterpart.
  precision  the half-precision study (scripts/precision_sweep.sh): RESULT_DIR holds
          breaks.csv (scripts/precision_report.py); one panel per feature map, one row per
          dtype (float16, bfloat16, float32) and stabiliser (max shift, none, the official
          epsilon), one column per input scale at the largest L, each cell coloured: fine,
          finite but > 10x float64's output_mse, NaN/Inf without overflow, overflow.
  gradient  the gradient metrics (a run with grad_* metrics) vs m (or num_features): one
          panel each for output_rel_error and grad_q/k/v_rel_error (mean over the trials,
          and over heads for per-head tables), uniform attention dashed grey (1 for dQ and
          dK: its gradient there is 0), and with grad_bias_rel a last panel of the bias
          (solid) against its Monte Carlo floor grad_bias_floor (dotted); one row of panels
          per other varying key (scale, L, d). A panel whose series go above 30 (relative
          errors of a blown-up ratio estimator) ends at 30 and names them. Never picked by auto.
auto: timing if the directory holds timing.csv and no summary.csv; kernel if the table is
a kernel table, else m if several m, else L if several L, else scale if several scales,
else m.

--stat mean (default): <metric>_mean with a band of ± one <metric>_std ("band: ± one std
of the trials", the spread, not the standard error of the mean). --stat median:
<metric>_median with a band from <metric>_p10 to <metric>_p90. --x num_features (--kind m
only): x is the number of feature columns (2m for trig and hyperbolic, m otherwise), to
compare at equal cost. A column baseline_<metric> (uniform attention on the same inputs) is
drawn as a dashed grey line in every panel. --ratio: the statistic and its band divided by
baseline_<metric> of the same row, uniform attention at 1 (the y label says what is divided
by what, and which side of 1 is better: below for the errors, above for grad_cosine). With input_seeds in the config the statistics are over the trials of every input
draw, and the band says so.

Per-head results (summary.csv with a head column, "per_head": true): --heads facet draws one
panel per head; --heads mean the mean over heads of each head's value (ratio with --ratio),
with a band from the lowest to the highest head and a note in the title; auto facets up to
8 heads (and 12 panels), else averages. A series never joins two rows at one x: a table
where it would (a key plot.py does not split on varies) exits 2.

Default output: beside the result set, not in it (favor run replaces RESULT_DIR whole):
<parent of RESULT_DIR>/<RESULT_DIR name>.png, suffixed with _<metric>, _median, _ratio,
_vs_num_features, _vs_<kind> (_timing for a timing table beside a summary) when a
non-default option is asked for; the path is printed. --data JSON also writes every series
drawn (kind, panel, label, variant, x, y, band edges lo/hi, band label) with the figure's
title, layout and y label, for tests/cli/plot_check.py. Exit 2 with one line on stderr on bad
input. Needs numpy and matplotlib (Debian python3-matplotlib): run it with /usr/bin/python3.
"""
import argparse
import csv
import json
import math
import os
import sys

PROG = "plot.py"


def die(msg, code=2):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(code)


try:
    import numpy as np
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm
    from matplotlib.ticker import NullFormatter
except ImportError as e:  # pragma: no cover - depends on the interpreter
    die(f"needs numpy and matplotlib ({e}); run it with /usr/bin/python3 "
        "(Debian python3-numpy, python3-matplotlib)")

APPROX_KEYS = ["variant", "features", "projection", "L", "d", "m", "scale", "trials"]
KERNEL_KEYS = ["variant", "features", "projection", "d", "m", "norm", "angle", "trials",
               "sm", "mse", "mse_sem", "mse_theory"]
METRICS = ["output_mse", "output_rel_error", "attention_mse", "kernel_mse",
           "negative_fraction", "nonfinite", "seconds"]
# metric -> y-axis label
METRIC_LABEL = {
    "output_mse": "output MSE (mean over L x d_v entries)",
    "output_rel_error": r"relative output error $\Vert O - \hat{O}\Vert_F \,/\, \Vert O\Vert_F$",
    "attention_mse": "attention-matrix MSE (mean over L x L entries)",
    "attention_tv": "attention total variation\n(mean over rows of ½ Σ_j |A_ij − Â_ij|)",
    "attention_kl": "attention KL(A ‖ Â): mean over rows (nats)",
    "overflow_fraction": "share of ±Inf feature entries",
    "kernel_mse": "kernel MSE of SM(x, y) (mean over L x L pairs)",
    "negative_fraction": "share of negative attention entries",
    "nonfinite": "non-finite output entries (count)",
    "seconds": "estimator wall time per cell (s)",
}
# metric -> short name for titles
METRIC_NAME = {
    "output_mse": "output MSE",
    "output_rel_error": "relative output error",
    "attention_mse": "attention-matrix MSE",
    "attention_tv": "attention total variation",
    "attention_kl": "attention KL divergence",
    "overflow_fraction": "share of overflowed feature entries",
    "kernel_mse": "kernel MSE",
    "negative_fraction": "share of negative attention entries",
    "nonfinite": "non-finite outputs",
    "seconds": "estimator time",
    "grad_q_rel_error": "relative error of dQ",
    "grad_k_rel_error": "relative error of dK",
    "grad_v_rel_error": "relative error of dV",
    "grad_cosine": "cosine of (dQ, dK, dV)",
}
XLABEL = {
    "m": "number of random features m",
    "num_features": "feature columns (cost): 2m for trig and hyperbolic, m otherwise",
    "L": "sequence length L (tokens)",
    "scale": "input scale (std of Q, K, V entries)",
}
BASELINE_LABEL = "uniform attention (mean of V)"


def x_label(xkey, rows, cfg):
    """The x axis's label; for feature counts, what F is for the maps in `rows`, read from
    their m and num_features columns: a map at a single count while the axis has several has
    its own F (elu, taylor2, hedgehog: F fixed by d)."""
    if xkey not in ("m", "num_features"):
        return XLABEL.get(xkey, xkey)
    pairs = {}
    for r in rows:
        f, m, F = r.get("features"), r.get("m"), r.get("num_features")
        if f and m is not None and F is not None:
            pairs.setdefault(f, set()).add((m, F))
    several = len({r.get(xkey) for r in rows}) > 1
    own = sorted(f for f, ps in pairs.items() if several and len(ps) == 1)
    own_text = f"{', '.join(own)}: {'its' if len(own) == 1 else 'their'} own F" if own else ""
    if xkey == "m":
        return XLABEL["m"] + (f" ({own_text})" if own else "")
    groups = {}
    for f, ps in pairs.items():
        if f not in own:
            ratios = {F / m for m, F in ps if m}
            k = ratios.pop() if len(ratios) == 1 else None
            groups.setdefault("F = m" if k == 1 else f"F = {k:g}m" if k else "F of its own m", []).append(f)
    parts = [g if len(groups) == 1 else f"{g} for {', '.join(sorted(fs))}" for g, fs in groups.items()]
    return "feature columns F (cost): " + "; ".join(parts + ([own_text] if own else []))
SEM_BAND = "bars: ± one standard error of the mean"
BASELINE_STYLE = {"color": "0.45", "ls": (0, (5, 3)), "lw": 1.4}
FEATURE_COLOR = {"trig": "C0", "positive": "C1", "hyperbolic": "C2", "relu": "C4",
                 "oprf": "C5", "exact": "k"}
PROJ_MARKER = {"iid": "o", "orthogonal": "s", "orthogonal-fixed": "^",
               "orthogonal-nosignfix": "v", "simplex": "P", "hadamard": "X",
               "hadamard-fixed": "<", "givens": "*", "simplex-plus": "p", "qmc": "h"}
PROJ_LINESTYLE = {"iid": "-", "orthogonal": "--", "orthogonal-fixed": ":",
                  "orthogonal-nosignfix": "-.", "simplex": "-.", "hadamard": "-.",
                  "hadamard-fixed": ":", "givens": "-.", "simplex-plus": "-.", "qmc": "--"}
CLIP_FACTOR = 10.0  # log axes: the band's lower edge is clipped at mean / CLIP_FACTOR
MAX_HEAD_PANELS = 8  # --heads auto: one panel per head up to this many heads, else the mean


# ----------------------------------------------------------------------------- input

def parse_number(text, where):
    text = text.strip()
    if text == "":
        return None
    try:
        return float(text)  # accepts nan, inf, -inf
    except ValueError:
        die(f"{where}: not a number: {text!r}")


def read_summary(result_dir, name="summary.csv", text_cols=("variant", "features", "projection")):
    path = os.path.join(result_dir, name)
    if not os.path.isdir(result_dir):
        die(f"{result_dir}: not a directory")
    if not os.path.isfile(path):
        die(f"{path}: missing (expected a favor result directory)")
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        die(f"{path}: unreadable: {e}")
    rows = [r for r in rows if r and any(c.strip() for c in r)]
    if not rows:
        die(f"{path}: empty")
    header = [h.strip() for h in rows[0]]
    if "variant" not in header:
        die(f"{path}: header has no 'variant' column: {','.join(header)[:200]}")
    if len(rows) < 2:
        die(f"{path}: no data rows")
    text_cols = set(text_cols)
    table = []
    for i, r in enumerate(rows[1:], start=2):
        if len(r) != len(header):
            die(f"{path}: line {i}: {len(r)} cells, header has {len(header)}")
        rec = {}
        for h, c in zip(header, r):
            rec[h] = c.strip() if h in text_cols else parse_number(c, f"{path}: line {i}, column {h}")
        table.append(rec)
    return path, header, table


def read_run(result_dir):
    """The whole run.json ({} if absent or unreadable)."""
    path = os.path.join(result_dir, "run.json")
    if not os.path.isfile(path):
        return {}
    try:
        with open(path) as f:
            run = json.load(f)
        return run if isinstance(run, dict) else {}
    except (OSError, ValueError) as e:
        print(f"{PROG}: warning: {path}: ignored ({e})", file=sys.stderr)
        return {}


def run_config(run):
    cfg = run.get("config", {})
    return cfg if isinstance(cfg, dict) else {}


def require(path, header, cols):
    missing = [c for c in cols if c not in header]
    if missing:
        die(f"{path}: missing column(s) {', '.join(missing)}")


# ----------------------------------------------------------------------------- helpers

def fmt(v):
    if v is None:
        return "?"
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return f"{v:g}"


def uniq(table, key):
    vals = {r.get(key) for r in table if r.get(key) is not None}
    return sorted(vals)


def finite_pos(x):
    return x is not None and math.isfinite(x) and x > 0


def variant_style(rows_or_row):
    r = rows_or_row
    color = FEATURE_COLOR.get(r.get("features"), None)
    marker = PROJ_MARKER.get(r.get("projection"), "D")
    return color, marker


def variant_order(table):
    seen = []
    for r in table:
        if r["variant"] not in seen:
            seen.append(r["variant"])
    return seen


def assign_colors(table):
    """Colour by feature map for the first two variants of a map (iid vs orthogonal reads
    as one family); further variants of the same map, or a repeated (colour, marker), get
    colours no feature map uses (nor grey, kept for the uniform-attention baseline)."""
    names = variant_order(table)
    first = {}
    for r in table:
        first.setdefault(r["variant"], r)
    styles, used, per_color = {}, set(), {}
    spare = [c for c in [f"C{i}" for i in (3, 6, 8, 9, 4, 0, 2, 5)]
             if c not in {FEATURE_COLOR.get(first[n].get("features")) for n in names}]
    cycle = iter((spare or ["C3"]) * 10)
    for n in names:
        color, marker = variant_style(first[n])
        if color is None or (color, marker) in used or per_color.get(color, 0) >= 2:
            color = next(cycle)
        per_color[color] = per_color.get(color, 0) + 1
        used.add((color, marker))
        styles[n] = (color, marker)
    return styles


def default_out(result_dir, suffix):
    """<parent of RESULT_DIR>/<RESULT_DIR name><suffix>.png: beside the result set, not in
    it (favor run replaces a result directory whole, plots inside it included)."""
    full = os.path.normpath(os.path.abspath(result_dir))
    name = os.path.basename(full) or "plot"
    return os.path.join(os.path.dirname(full), name + suffix + ".png")


GRAD_TOP = 30.0  # --kind gradient: the y axis ends here when some series goes above
GRAD_PANELS = ["output_rel_error", "grad_q_rel_error", "grad_k_rel_error", "grad_v_rel_error"]


def head_mean(rows, xkey, col):
    """x and the mean over heads (rows at one x) of column col, sorted by x; NaN where a
    head's value is blank."""
    by_x = {}
    for r in rows:
        v = r.get(col)
        by_x.setdefault(r[xkey], []).append(float("nan") if v is None else v)
    xs = sorted(by_x)
    return np.array(xs, float), np.array([np.mean(by_x[x]) for x in xs], float)


def gradient_plot(path, header, table, cfg, out, xkey):
    """--kind gradient (see the module docstring)."""
    metrics = [m for m in GRAD_PANELS if f"{m}_mean" in header]
    if not any(m.startswith("grad_") for m in metrics):
        die(f"{path}: no grad_q/k/v_rel_error_mean columns (a run with the gradient metrics)")
    bias = "grad_bias_rel" in header and "grad_bias_floor" in header
    panels = metrics + (["grad_bias_rel"] if bias else [])
    others = [k for k in ("scale", "L", "d") if len(uniq(table, k)) > 1]
    groups = sorted({tuple(r.get(k) for k in others) for r in table})
    fig, axes = plt.subplots(len(groups), len(panels), figsize=(3.6 * len(panels), 3.4 * len(groups) + 0.9),
                             squeeze=False, constrained_layout=True)
    styles = assign_colors(table)
    heads = "head" in header
    for gi, g in enumerate(groups):
        rows_g = [r for r in table if tuple(r.get(k) for k in others) == g]
        where = ", ".join(f"{k} = {fmt(v)}" for k, v in zip(others, g))
        for ci, metric in enumerate(panels):
            ax = axes[gi][ci]
            cols = [("grad_bias_rel", "-"), ("grad_bias_floor", ":")] if metric == "grad_bias_rel" \
                else [(f"{metric}_mean", "-")]
            top, off, low = GRAD_TOP, [], math.inf   # errors above GRAD_TOP (a ratio estimator's blow-up) are named, not drawn
            for v in variant_order(rows_g):
                rv = [r for r in rows_g if r["variant"] == v]
                color, marker = styles[v]
                for col, ls in cols:
                    x, y = head_mean(rv, xkey, col)
                    keep = np.isfinite(y) & (y > 0)
                    if not keep.any():
                        continue
                    if (y[keep] > top).any() and v not in off:
                        off.append(v)
                    low = min(low, float(y[keep].min()))
                    ax.plot(x[keep], y[keep], ls=ls, marker=marker, ms=4, color=color,
                            label=v if ls == "-" else None)
                    record("gradient", f"{metric} {where}".strip(), v, x, y, col=col)
            if off:
                ax.set_ylim(bottom=min(low, 1.0) / 1.5, top=top)
                ax.text(0.02, 0.98, "above " + fmt(top) + ": " + ", ".join(off), transform=ax.transAxes,
                        fontsize=6.5, va="top", ha="left", color="0.3")
            base = f"baseline_{metric}"
            if base in header:
                x, y = head_mean(rows_g, xkey, base)
                if np.isfinite(y).all() and (y > 0).all():
                    ax.axhline(float(np.mean(y)), **BASELINE_STYLE, label=BASELINE_LABEL)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel(_wrap(x_label(xkey, rows_g, cfg), 40), fontsize=8)
            title = {"grad_bias_rel": "bias of the mean gradient (solid)\nvs its Monte Carlo floor (dotted)"}.get(
                metric, METRIC_NAME.get(metric, metric))
            ax.set_title(title + (f"\n{where}" if where else ""), fontsize=9)
            ax.grid(True, which="both", alpha=0.25)
    axes[0][0].legend(fontsize=7, loc="best")
    name = cfg.get("name") or os.path.basename(os.path.normpath(os.path.abspath(os.path.dirname(path))))
    trials = uniq(table, "trials")
    lines = [f"{name}: gradient error beside output error vs {'feature columns' if xkey == 'num_features' else 'm'}",
             "relative Frobenius errors of dQ, dK, dV for an upstream gradient G ~ N(0, 1); mean over "
             + (f"{fmt(trials[0])} trials" if len(trials) == 1 else "the trials")
             + (" and over heads" if heads else "") + ("; causal" if cfg.get("causal") else "")]
    fig.suptitle("\n".join(lines), fontsize=10)
    FIGURE.update(title="\n".join(lines), layout="gradient", ylabel="relative error")
    fig.savefig(out, dpi=130)
    plt.close(fig)


# ----------------------------------------------------------------------------- drawn data

DRAWN = []  # every series drawn, for --data: dicts with panel, label, x, y, band
FIGURE = {}  # the figure's title, layout and y label, for --data


def record(kind, panel, label, x, y, lo=None, hi=None, band=None, **extra):
    """Note a drawn series (x, y and the band's edges as plain lists; NaN as None)."""
    clean = lambda a: None if a is None else \
        [None if (q is None or not math.isfinite(float(q))) else float(q) for q in a]
    DRAWN.append({"kind": kind, "panel": panel, "label": label, "x": clean(x), "y": clean(y),
                  "lo": clean(lo), "hi": clean(hi), "band": band, **extra})


def write_data(path, png, meta):
    try:
        with open(path, "w") as f:
            json.dump({"png": png, **meta, **FIGURE, "series": DRAWN}, f, indent=1)
    except OSError as e:
        die(f"--data {path}: cannot write: {e}")


# ----------------------------------------------------------------------------- approximation

def values_word(cfg):
    """What the statistics of summary.csv are over: the trials, or with input_seeds in the
    config the (input seed, trial) values."""
    seeds = cfg.get("input_seeds")
    n = len(seeds) if isinstance(seeds, list) else seeds
    return "the trials" if n in (None, 1) else f"the trials of {fmt(n)} input draws"


def stat_spec(path, header, metric, stat, over="the trials"):
    """Columns for the statistic drawn: the line (center) and the band (lo/hi or +- std);
    over: what the statistics are over (values_word)."""
    if stat == "median":
        cols = [f"{metric}_median", f"{metric}_p10", f"{metric}_p90"]
        missing = [c for c in cols if c not in header]
        if missing:
            die(f"{path}: --stat median needs column(s) {', '.join(missing)}, "
                "absent from this table (use --stat mean)")
        return {"stat": "median", "center": cols[0], "lo": cols[1], "hi": cols[2], "std": None,
                "over": over, "band": f"band: 10th to 90th percentile of {over}"}
    require(path, header, [f"{metric}_mean"])
    std = f"{metric}_std" if f"{metric}_std" in header else None
    return {"stat": "mean", "center": f"{metric}_mean", "lo": None, "hi": None, "std": std,
            "over": over, "band": f"band: ± one std of {over}" if std else None}


def spec_title(spec):
    return f"{spec['stat']} of {spec['over']}" + (f", {spec['band']}" if spec["band"] else "")


def drawn_values(table, spec, base_c, ratio):
    """Copies of the rows with the values drawn: _y (the statistic), _lo/_hi (the band's
    edges), _base (uniform attention's value); with ratio, all divided by base_c's value
    (so _base is 1)."""
    nan = float("nan")
    val = lambda r, c: nan if (c is None or r.get(c) is None) else r[c]
    out = []
    for r in table:
        y = val(r, spec["center"])
        if spec["std"]:
            lo, hi = y - val(r, spec["std"]), y + val(r, spec["std"])
        else:
            lo, hi = val(r, spec["lo"]), val(r, spec["hi"])
        base = val(r, base_c)
        if ratio:
            div = base if (math.isfinite(base) and base > 0) else nan
            y, lo, hi, base = y / div, lo / div, hi / div, 1.0
        out.append({**r, "_y": y, "_lo": lo, "_hi": hi, "_base": base})
    return out


def average_heads(table, keys):
    """One row per (variant, keys) from per-head rows: _y the mean over heads (NaN if any
    head's is), _lo/_hi the lowest and highest head's _y, _base the mean over heads."""
    groups = {}
    for r in table:
        groups.setdefault((r["variant"],) + tuple(r.get(k) for k in keys), []).append(r)
    out = []
    for rows in groups.values():
        ys = np.array([r["_y"] for r in rows], float)
        finite = ys[np.isfinite(ys)]
        out.append({**rows[0], "head": None, "heads": len(rows), "_y": float(ys.mean()),
                    "_lo": float(finite.min()) if finite.size else float("nan"),
                    "_hi": float(finite.max()) if finite.size else float("nan"),
                    "_base": float(np.mean([r["_base"] for r in rows]))})
    return out


def series(rows, xkey, path, where):
    """x, line, band low, band high, sorted by x. Two rows at one x in one series would be
    joined into a vertical zig-zag: refused (a key plot.py does not know varies)."""
    rows = sorted((r for r in rows if r.get(xkey) is not None), key=lambda r: r[xkey])
    xs = [r[xkey] for r in rows]
    dup = next((q for q, n in zip(xs, xs[1:]) if q == n), None)
    if dup is not None:
        die(f"{path}: several rows of {where} at {xkey} = {fmt(dup)} in one panel "
            "(a column plot.py does not split on varies)")
    col = lambda c: np.array([r[c] for r in rows], float)
    return col(xkey), col("_y"), col("_lo"), col("_hi")


FIG4 = {("trig", "iid"), ("trig", "orthogonal"), ("positive", "iid"), ("positive", "orthogonal")}


def fig4_split(table, layout):
    """Performer Fig. 4 layout: (left variants: orthogonal vs iid, right variants: positive
    vs trig, right projection), or None. auto: only when the variants are exactly trig and
    positive, each iid and orthogonal; fig4: whenever trig and positive share a projection
    and a map is drawn both iid and orthogonal (the other variants are left out)."""
    if layout == "plain":
        return None
    projs, info = {}, {}
    for r in table:
        projs.setdefault(r.get("features"), set()).add(r.get("projection"))
        info.setdefault(r["variant"], (r.get("features"), r.get("projection")))
    if layout == "auto" and (len(info) != 4 or set(info.values()) != FIG4):
        return None
    paired = {f for f, p in projs.items() if {"iid", "orthogonal"} <= p}
    if not paired or not {"trig", "positive"} <= set(projs):
        return None
    shared = [p for p in ["orthogonal", "iid"] + sorted(q for q in projs["trig"] if q)
              if p in projs["trig"] and p in projs["positive"]]
    if not shared:
        return None
    proj = shared[0]
    variants = variant_order(table)
    left = [v for v in variants if info[v][0] in paired and info[v][1] in ("iid", "orthogonal")]
    right = [v for v in variants if info[v][1] == proj]
    return left, right, proj


def compared(table):
    """What a plain layout compares, for its title."""
    names = variant_order(table)
    if len(names) <= 4:
        return " vs ".join(names)
    feats = list(dict.fromkeys(r.get("features") for r in table if r.get("features")))
    return f"{len(names)} estimators ({', '.join(feats)})"


def draw_baseline(ax, rows, xkey, logy):
    """Dashed grey line of uniform attention's value (_base, one number per cell): a
    horizontal line when it does not change along x, else joined per x. Returns the handle
    or None."""
    pts = [(r[xkey], r["_base"]) for r in rows
           if r.get(xkey) is not None and math.isfinite(r["_base"]) and (r["_base"] > 0 or not logy)]
    if not pts:
        return None
    vals = np.array([p[1] for p in pts])
    if np.ptp(vals) <= 1e-9 * max(abs(vals).max(), 1e-300):
        return ax.axhline(vals.mean(), zorder=1.5, **BASELINE_STYLE)
    xs = sorted({p[0] for p in pts})
    ys = [np.mean([p[1] for p in pts if p[0] == q]) for q in xs]
    h, = ax.plot(xs, ys, zorder=1.5, **BASELINE_STYLE)
    return h


# The metrics whose higher values are better (the metric table's higher_is_better, which
# `favor list` marks "(higher is better)"; tests/cli/plot_check.py checks the two agree): every
# other metric is an error, lower is better.
HIGHER_IS_BETTER = {"grad_cosine"}


def ratio_label(metric, spec):
    name = METRIC_NAME.get(metric, metric)
    better = "above" if metric in HIGHER_IS_BETTER else "below"
    return (f"{spec['stat']} {name} (estimator, over trials)\n/ {name} (uniform attention: mean of V)"
            f"\n{better} 1: better than uniform attention")


def head_mode(path, header, table, heads, n_other):
    """'facet', 'mean' or None (no head column): auto facets up to MAX_HEAD_PANELS heads
    and 12 panels, else averages."""
    if "head" not in header:
        if heads != "auto":
            die(f"{path}: --heads {heads} needs a head column (a per_head result)")
        return None
    n = len(uniq(table, "head"))
    if heads == "auto":
        return "facet" if n <= MAX_HEAD_PANELS and n * n_other <= 12 else "mean"
    return heads


def approx_plot(path, header, table, cfg, kind, metric, out, stat="mean", xkey=None,
                ratio=False, heads="auto", layout="auto", mkey="m"):
    """kind m, L or scale; mkey is the feature-count cell key (num_features when the
    config has a num_features grid: each variant then has its own m)."""
    require(path, header, ["variant", "L", "d", mkey, "scale"])
    spec = stat_spec(path, header, metric, stat, values_word(cfg))
    kind_key = mkey if kind == "m" else kind
    xkey = xkey or kind_key
    if xkey != kind_key:
        require(path, header, [xkey])
    base_c = f"baseline_{metric}"
    if ratio and base_c not in header:
        die(f"{path}: --ratio needs column {base_c} (uniform attention on the same inputs), "
            "absent from this table")
    base_c = base_c if base_c in header else None
    theory_c = "kernel_mse_theory" if (metric == "kernel_mse" and stat == "mean" and not ratio
                                      and "kernel_mse_theory" in header) else None

    keys = ["L", "d", mkey, "scale"]
    varying = [k for k in keys if len(uniq(table, k)) > 1]
    line_extra = [mkey] if (kind == "L" and mkey in varying) else []
    panel_keys = [k for k in keys if k in varying and k != kind_key and k not in line_extra]
    n_other = len({tuple(r[k] for k in panel_keys) for r in table})
    hmode = head_mode(path, header, table, heads, n_other)
    table = drawn_values(table, spec, base_c, ratio)
    band_note = spec["band"]
    head_note = None
    if hmode == "facet":
        panel_keys.append("head")
        head_note = f"one panel per head; {spec_title(spec)}"
    elif hmode == "mean":
        nh = len(uniq(table, "head"))
        table = average_heads(table, keys)
        band_note = "band: lowest to highest head"
        head_note = (f"mean over {nh} heads of each head's {'ratio' if ratio else spec['stat']}"
                     " (per-head result; band: lowest to highest head)")
    combos = sorted({tuple(r[k] for k in panel_keys) for r in table})
    variants = variant_order(table)
    split = fig4_split(table, layout) if kind == "m" else None
    if layout == "fig4" and not split:
        die(f"{path}: --layout fig4 needs trig and positive features with a shared projection "
            "and a map drawn both iid and orthogonal, and --kind m")
    prefix = lambda pv: ", ".join(f"{k} = {fmt(q)}" for k, q in zip(panel_keys, pv))
    panels = []  # (row, col, panel-key values, variants, title)
    if split:
        left, right, proj = split
        if len(combos) > 6:
            die(f"{path}: {len(combos)} rows of panels ({', '.join(panel_keys)} vary); "
                "pick a subset or another --kind")
        for i, pv in enumerate(combos):
            p = prefix(pv) + ": " if panel_keys else ""
            panels.append((i, 0, pv, left, f"{p}orthogonal vs iid"))
            panels.append((i, 1, pv, right, f"{p}positive vs trig ({proj} projections)"))
        nrows, ncols = len(combos), 2
        omitted = [v for v in variants if v not in left and v not in right]
    else:
        if len(combos) > 12:
            die(f"{path}: {len(combos)} panels ({', '.join(panel_keys)} vary); "
                "pick a subset or another --kind" + (" or --heads mean" if hmode else ""))
        n = len(combos)
        ncols = 2 if n == 4 else min(n, 3)
        nrows = math.ceil(n / ncols)
        for i, pv in enumerate(combos):
            panels.append((i // ncols, i % ncols, pv, variants, prefix(pv) or None))
        omitted = []

    styles = assign_colors(table)
    linestyles = {r["variant"]: PROJ_LINESTYLE.get(r.get("projection"), "-.") for r in table}
    extra_vals = uniq(table, mkey) if line_extra else [None]

    width = 4.6 * ncols + 2.6  # room for a legend on the right
    height = 3.9 * nrows + 0.8
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), squeeze=False,
                             constrained_layout=True, sharey="row" if split else False)
    used = {(p[0], p[1]) for p in panels}
    for r_ in range(nrows):
        for c_ in range(ncols):
            if (r_, c_) not in used:
                axes[r_][c_].set_visible(False)

    # y scale: log unless some plotted value is <= 0
    vals = [r["_y"] for r in table if math.isfinite(r["_y"])]
    logy = bool(vals) and all(v > 0 for v in vals)
    clipped = False
    logx = kind in ("m", "L")
    if kind == "scale":
        xs = uniq(table, "scale")
        logx = bool(xs) and xs[0] > 0 and xs[-1] / xs[0] >= 10

    handles = {}
    theory_handle = None
    baseline_handle = None
    skipped = []
    for (ri, ci, pv, pvariants, title) in panels:
        ax = axes[ri][ci]
        panel = dict(zip(panel_keys, pv), **({"side": title.split(": ")[-1]} if split else {}))
        prow = [r for r in table if tuple(r[k] for k in panel_keys) == pv]
        for v in pvariants:
            for ei, ev in enumerate(extra_vals):
                rows = [r for r in prow if r["variant"] == v and (ev is None or r[mkey] == ev)]
                if not rows:
                    continue
                x, y, lo, hi = series(rows, xkey, path,
                                      f"{v}" + (f", {prefix(pv)}" if panel_keys else ""))
                ok = np.isfinite(x) & np.isfinite(y) & (y > 0 if logy else True)
                if not ok.any():
                    skipped.append(v)
                    continue
                color, marker = styles[v]
                ls = linestyles.get(v, "-")
                if ev is not None and len(extra_vals) > 1:
                    color = _shade(color, 0.6 * (1 - ei / (len(extra_vals) - 1)))
                label = v if ev is None else f"{v}, {mkey}={fmt(ev)}"
                nonfin = [r.get("nonfinite_mean") for r in rows if r.get("nonfinite_mean")]
                if nonfin and any(q and q > 0 for q in nonfin):
                    label += " (non-finite outputs)"
                h, = ax.plot(x[ok], y[ok], ls=ls, marker=marker, color=color, ms=5, lw=1.6,
                             label=label, zorder=3)
                handles.setdefault(label, h)
                band = ok & np.isfinite(lo) & np.isfinite(hi)
                if band.any():
                    if logy:
                        clip = ~(lo > y / CLIP_FACTOR) if spec["std"] else ~(lo > 0)
                        clipped = clipped or bool((clip & band).any())
                        lo = np.where(clip, y / CLIP_FACTOR, lo)
                    if band.sum() == 1:  # a single point: a band has no width, draw a bar
                        ax.errorbar(x[band], y[band], yerr=[y[band] - lo[band], hi[band] - y[band]],
                                    fmt="none", ecolor=color, alpha=0.5, capsize=4, lw=1.2)
                    else:
                        ax.fill_between(x[band], lo[band], hi[band], color=color, alpha=0.13, lw=0)
                record("line", panel, label, x[ok], y[ok], np.where(band, lo, np.nan)[ok],
                       np.where(band, hi, np.nan)[ok], band_note, variant=v,
                       **({mkey: ev} if ev is not None else {}))
                if theory_c:
                    t = np.array([np.nan if r.get(theory_c) is None else r[theory_c]
                                  for r in sorted(rows, key=lambda r: r[xkey])], float)
                    tok = np.isfinite(t) & (t > 0 if logy else True)
                    if tok.any():
                        th, = ax.plot(x[tok], t[tok], ls=(0, (2, 2)), color=color, lw=1.0, alpha=0.8)
                        theory_handle = th
        if ratio:
            baseline_handle = ax.axhline(1.0, zorder=1.5, **BASELINE_STYLE)
            record("baseline", panel, BASELINE_LABEL, None, [1.0])
        elif base_c:
            bh = draw_baseline(ax, prow, xkey, logy)
            baseline_handle = baseline_handle or bh
        if logx:
            ax.set_xscale("log")
            xv = uniq([r for r in prow if r["variant"] in pvariants], xkey)
            if xv and len(xv) <= 12:
                ax.set_xticks(xv)
                ax.set_xticklabels([fmt(q) for q in xv])
                ax.xaxis.set_minor_formatter(NullFormatter())
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel(_wrap(x_label(xkey, [r for r in prow if r["variant"] in pvariants], cfg), 48))
        ax.grid(True, which="major", alpha=0.3)
        if title:
            ax.set_title(title, fontsize=10)
        if ci == 0:
            ax.set_ylabel(ratio_label(metric, spec) if ratio else METRIC_LABEL.get(metric, metric))
        elif split:
            ax.tick_params(labelleft=True)

    # legend to the right of the last panel of the first row
    if baseline_handle is not None:
        handles[BASELINE_LABEL + (" = 1" if ratio else "")] = baseline_handle
    if theory_handle is not None:
        handles["dotted: kernel_mse_theory (Lemma 2 closed form for iid W)"] = \
            plt.Line2D([], [], ls=(0, (2, 2)), color="0.3", lw=1.0)
    if band_note:
        if clipped and spec["std"]:
            note = (f"{band_note} (lower edge clipped at mean / {CLIP_FACTOR:g} where "
                    f"std > {1 - 1 / CLIP_FACTOR:.0%} of mean)")
        elif clipped:
            note = f"{band_note} (lower edge clipped where <= 0)"
        else:
            note = band_note
        handles[note] = plt.Rectangle((0, 0), 1, 1, color="0.5", alpha=0.25)
    last = max(p[1] for p in panels if p[0] == 0)
    axes[0][last].legend(
        list(handles.values()), [_wrap(k) for k in handles.keys()], loc="upper left",
        bbox_to_anchor=(1.02, 1.0), fontsize=8.5, frameon=False)

    fixed = []
    for k, label in (("scale", "input scale"), ("L", "L"), ("d", "d"), (mkey, mkey)):
        vals = uniq(table, k)
        if len(vals) == 1 and k != kind_key:
            fixed.append(f"{label} = {fmt(vals[0])}")
    inputs = cfg.get("inputs") if isinstance(cfg.get("inputs"), dict) else {}
    if inputs.get("d_v") is not None:
        at = next((i + 1 for i, f in enumerate(fixed) if f.startswith("d =")), len(fixed))
        fixed.insert(at, f"d_v = {inputs['d_v']}")
    trials = uniq(table, "trials")
    if len(trials) == 1:
        fixed.append(f"{fmt(trials[0])} trials")
    if cfg.get("dtype"):
        fixed.append(str(cfg["dtype"]))
    family = [f"{k} = {fmt(v) if not isinstance(v, (str, bool)) else str(v).lower()}" for k, v in inputs.items()
              if k not in ("source", "L", "d", "d_v", "scale", "q", "k", "v", "per_head")]
    if family:   # input-family knobs (docs/input_families.md)
        fixed.extend(["inputs: " + family[0]] + family[1:])
    if cfg.get("query_rows") is not None:   # row-sampled metrics (docs/design.md 3.1)
        sem = f"{metric}_row_sem"
        sems = [r.get(sem) for r in table if finite_pos(r.get(sem))]
        fixed.append(f"{fmt(cfg['query_rows'])} sampled query rows per L" +
                     (f" (row SEM up to {max(sems):.2g})" if sems else ""))
    name = cfg.get("name") or os.path.basename(os.path.normpath(os.path.abspath(os.path.dirname(path))))
    what = {"m": "vs number of random features m", "L": "vs sequence length",
            "scale": "vs input scale", "num_features": "vs number of feature columns (cost)"}
    what = what[xkey if xkey == "num_features" else kind]
    shown = METRIC_NAME.get(metric, metric) + (" / uniform attention's" if ratio else "")
    line2 = "trig vs positive, iid vs orthogonal (Performer Fig. 4 layout)" if split \
        else compared(table)
    lines = [f"{name}: {shown} {what}", line2] + _join_wrapped(fixed, int(width * 12))
    stat_text = head_note or spec_title(spec)
    if len(lines[-1]) + 2 + len(stat_text) <= int(width * 12):
        lines[-1] += "; " + stat_text
    else:
        lines += _wrap(stat_text[0].upper() + stat_text[1:], int(width * 12)).split("\n")
    if omitted:
        lines.append(f"not in either panel: {', '.join(omitted)}")
    fig.suptitle("\n".join(lines), fontsize=11)
    FIGURE.update(title="\n".join(lines), layout="fig4" if split else "plain",
                  ylabel=axes[0][0].get_ylabel(), heads=hmode)
    if skipped:
        print(f"{PROG}: note: no plottable {metric} values for: {', '.join(sorted(set(skipped)))}",
              file=sys.stderr)
    fig.savefig(out, dpi=150)
    plt.close(fig)


def _join_wrapped(parts, width):
    """Join title parts with ", " into lines of at most about width characters."""
    lines, cur = [], ""
    for p in parts:
        if cur and len(cur) + 2 + len(p) > width:
            lines.append(cur + ",")
            cur = p
        else:
            cur = f"{cur}, {p}" if cur else p
    return lines + ([cur] if cur else [])


def _wrap(text, width=34):
    if len(text) <= width:
        return text
    words, lines, cur = text.split(" "), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    lines.append(cur)
    return "\n".join(lines)


# ----------------------------------------------------------------------------- kernel

def mse_closed_forms(l, phi, m):
    """Lemma 2 MSEs for |x| = |y| = l at angle phi with m iid random vectors."""
    c = np.cos(phi)
    z2 = 2 * l * l * (1 + c)
    u2 = 2 * l * l * (1 - c)
    sm = np.exp(l * l * c)
    trig = np.exp(z2) / sm ** 2 * (-np.expm1(-u2)) ** 2 / (2 * m)
    pos = np.exp(z2) * sm ** 2 * (-np.expm1(-z2)) / m
    hyp = -np.expm1(-z2) * pos / 2
    return trig, pos, hyp


def theorem2_closed_form(l, phi, m, d):
    """Theorem 2 upper bound on the MSE of orthogonal positive features (m <= d)."""
    _, pos, _ = mse_closed_forms(l, phi, m)
    sm = np.exp(l * l * np.cos(phi))
    return pos - 2 * (m - 1) / (m * (d + 2)) * (sm - np.exp(-l * l)) ** 2


def ratio_closed_form(l, phi):
    c = np.cos(phi)
    num = np.exp(-4 * l * l * c) * (-np.expm1(-2 * l * l * (1 - c))) ** 2
    den = 2 * (-np.expm1(-2 * l * l * (1 + c)))
    with np.errstate(divide="ignore", invalid="ignore"):
        return num / den


def kernel_plot(path, header, table, cfg, out):
    require(path, header, KERNEL_KEYS)
    styles = assign_colors(table)
    variants = variant_order(table)
    norms = uniq(table, "norm")
    ms = uniq(table, "m")
    ds = uniq(table, "d")
    if not norms:
        die(f"{path}: no norm values")
    l1 = min(norms, key=lambda v: (abs(v - 1.0), v))
    m0 = ms[0] if ms else None
    d0 = ds[0] if ds else None
    sl = [r for r in table if r["norm"] == l1 and r["m"] == m0 and r["d"] == d0]
    notes = []
    if len(ms) > 1 or len(ds) > 1:
        notes.append(f"slice panels show m = {fmt(m0)}, d = {fmt(d0)} only")

    fig, (ax0, ax1, ax2) = plt.subplots(1, 3, figsize=(16.5, 6.2), constrained_layout=True,
                                        gridspec_kw={"width_ratios": [1.05, 1.25, 1.0]})
    try:  # a little air between the heat map's colorbar and the slice's y label
        fig.get_layout_engine().set(wspace=0.05)
    except AttributeError:  # matplotlib < 3.6
        fig.set_constrained_layout_pads(wspace=0.05)

    # (a) heat map of r(phi, l)
    nphi, nl = 600, 300
    phi = -np.pi + (np.arange(nphi) + 0.5) * (2 * np.pi / nphi)
    ll = (np.arange(nl) + 0.5) * (2.0 / nl)
    P, Lg = np.meshgrid(phi, ll)
    R = ratio_closed_form(Lg, P)
    vmin, vmax = 1e-4, 1e4
    Rc = np.clip(np.nan_to_num(R, nan=vmax, posinf=vmax), vmin, vmax)
    im = ax0.pcolormesh(P, Lg, Rc, norm=LogNorm(vmin=vmin, vmax=vmax), cmap="RdBu_r",
                        shading="auto", rasterized=True)
    cs = ax0.contour(P, Lg, R, levels=[1.0], colors="k", linewidths=1.0)
    ax0.clabel(cs, fmt={1.0: "r = 1"}, fontsize=8)
    ax0.axhline(l1, color="k", ls="--", lw=0.9)
    ax0.text(-np.pi + 0.1, l1 + 0.04, f"slice l = {fmt(l1)}", fontsize=8, va="bottom")
    ax0.set_xlim(-np.pi, np.pi)
    ax0.set_ylim(0, 2)
    _pi_ticks(ax0)
    ax0.set_xlabel("angle φ between x and y (rad)")
    ax0.set_ylabel("length l = |x| = |y|")
    ax0.set_title("r(φ, l) = MSE_trig / MSE_pos (Lemma 2)", fontsize=10)
    cb = fig.colorbar(im, ax=ax0, extend="both", pad=0.02)
    cb.set_label("r  (> 1: positive features better)", fontsize=9)

    # (b) slice l = l1 over the angles measured: closed forms (lines), empirical (markers)
    feats = {r["features"] for r in table}
    angles = [r["angle"] for r in sl] or [-np.pi, np.pi]
    a0, a1 = min(angles), max(angles)
    sizes = marker_sizes(variants, sl)
    pad = 0.03 * max(a1 - a0, 1e-9)
    phid = np.linspace(a0, a1, 1201)
    trig, pos, hyp = mse_closed_forms(l1, phid, m0)
    curves = [("trig", trig), ("positive", pos)]
    if "hyperbolic" in feats:
        curves.append(("hyperbolic", hyp))
    line_entries = [(None, "closed form, Lemma 2 (iid W):")]
    mark_entries = [(None, f"empirical mean ({'/'.join(fmt(q) for q in uniq(sl, 'trials'))} "
                           "trials),\nbars: ± one standard error of the mean:")]
    emp = []  # (x, y) of every empirical point drawn or left out
    for f, y in curves:
        h, = ax1.plot(phid, np.where(y > 0, y, np.nan), color=FEATURE_COLOR.get(f, "0.3"), lw=1.4,
                      alpha=0.8)
        line_entries.append((h, f"{f} features"))
    for v in variants:
        rows = sorted([r for r in sl if r["variant"] == v], key=lambda r: r["angle"])
        if not rows:
            continue
        color, marker = styles[v]
        x = np.array([r["angle"] for r in rows])
        y = np.array([_nz(r["mse"]) for r in rows])
        e = np.array([_nz(r["mse_sem"], 0.0) for r in rows])
        ok = np.isfinite(y) & (y > 0)
        emp += list(zip(x[ok], y[ok]))
        ortho = all(r.get("mse_theory") is None for r in rows)
        h = ax1.errorbar(x[ok], y[ok], yerr=np.minimum(e[ok], y[ok] * 0.999), fmt=marker,
                         color=color, ms=sizes[v], mfc="white" if ortho else color,
                         mew=1.3, capsize=2, lw=1.0, ls="none", zorder=3)
        record("points", {"panel": "slice", "norm": l1, "m": m0, "d": d0}, v, x[ok], y[ok],
               y[ok] - e[ok], y[ok] + e[ok], SEM_BAND, variant=v)
        mark_entries.append((h, v))
        b = np.array([_nz(r.get("theorem2_bound")) for r in rows])
        bok = np.isfinite(b) & (b > 0)
        if bok.any():
            xb = x[bok]
            dense = theorem2_closed_form(l1, phid, m0, d0) if m0 <= d0 else None
            if dense is not None and np.allclose(theorem2_closed_form(l1, xb, m0, d0), b[bok],
                                                 rtol=1e-6, atol=0):
                h, = ax1.plot(phid, np.where(dense > 0, dense, np.nan), ls="--", color=color, lw=1.2)
                line_entries.append((h, f"Theorem 2 bound ({v})"))
            else:  # m > d (per-block bound) or an unknown form: join the table's values
                h, = ax1.plot(xb, b[bok], ls="--", color=color, lw=1.2)
                line_entries.append((h, f"Theorem 2 bound ({v}, table values)"))
    ax1.set_yscale("log")
    emp_vals = [q[1] for q in emp]
    top = np.nanmax([np.nanmax(np.where(c[1] > 0, c[1], np.nan)) for c in curves] + emp_vals)
    low = max(min(emp_vals) / 5 if emp_vals else top * 1e-6, top * 1e-8)
    ax1.set_ylim(low, top * 3)
    below = [q for q in emp if q[1] < low]
    if below:
        ax1.text(0.02, 0.02, f"{len(below)} point{'s' if len(below) > 1 else ''} below the axis "
                 f"(MSE < {low:.0e}, where the estimate is (nearly) exact)", fontsize=7.5,
                 color="0.3", transform=ax1.transAxes, va="bottom", ha="left")
    ax1.set_xlim(a0 - pad, a1 + pad)
    _pi_ticks(ax1, a0, a1)
    ax1.set_xlabel("angle φ between x and y (rad)")
    ax1.set_ylabel("MSE of the SM(x, y) estimate")
    ax1.set_title(f"slice l = |x| = |y| = {fmt(l1)}:  m = {fmt(m0)}, d = {fmt(d0)}", fontsize=10)
    ax1.grid(True, alpha=0.3)
    _two_column_legend(ax1, line_entries, mark_entries)

    # (c) empirical / theory per variant: one colour per variant, lighter for smaller l
    any_ratio = False
    drawn_angles = []
    shade = {n: 0.6 * (1 - i / (len(norms) - 1)) if len(norms) > 1 else 0.0
             for i, n in enumerate(norms)}
    var_entries = [(None, "estimator:")]
    norm_entries = [(None, "length l = |x| = |y|:")]
    for v in variants:
        color, marker = styles[v]
        drawn = False
        for nv in norms:
            rows = sorted([r for r in table if r["variant"] == v and r["norm"] == nv
                           and r["m"] == m0 and r["d"] == d0], key=lambda r: r["angle"])
            if not rows:
                continue
            ref = [r.get("mse_theory") for r in rows]
            ortho = all(t is None for t in ref)
            if ortho:
                ref = [r.get("theorem2_bound") for r in rows]
            pts = [(r["angle"], _nz(r["mse"]) / t, _nz(r["mse_sem"], 0.0) / t)
                   for r, t in zip(rows, ref) if t is not None and t > 0 and math.isfinite(t)]
            pts = [p for p in pts if math.isfinite(p[1])]
            if not pts:
                continue
            any_ratio = drawn = True
            x, y, e = map(np.array, zip(*pts))
            drawn_angles += [r["angle"] for r, t in zip(rows, ref)
                             if t is not None and t > 0 and math.isfinite(t)]
            c = _shade(color, shade[nv])
            ax2.errorbar(x, y, yerr=e, fmt=marker, ls="-", color=c, ms=sizes.get(v, 5) - 0.5,
                         mfc="white" if ortho else c, capsize=2, lw=1.0)
            record("points", {"panel": "empirical / theory", "norm": nv, "m": m0, "d": d0}, v,
                   x, y, y - e, y + e, SEM_BAND, variant=v)
        if drawn:
            ortho = all(r.get("mse_theory") is None for r in table if r["variant"] == v)
            var_entries.append((plt.Line2D([], [], color=color, marker=marker, ms=5,
                                           mfc="white" if ortho else color, lw=1.0), v))
    if len(norms) > 1:
        for nv in norms:
            g = _shade("0.2", shade[nv])
            norm_entries.append((plt.Line2D([], [], color=g, lw=2.0), f"l = {fmt(nv)}"))
    ax2.axhline(1.0, color="k", lw=0.8)
    b0, b1 = (min(drawn_angles), max(drawn_angles)) if drawn_angles else (a0, a1)
    pad2 = 0.03 * max(b1 - b0, 1e-9)
    ax2.set_xlim(b0 - pad2, b1 + pad2)
    _pi_ticks(ax2, b0, b1)
    ax2.set_xlabel("angle φ between x and y (rad)")
    ax2.set_ylabel("empirical MSE / theory (bars: ± one sem / theory)")
    ax2.set_title("empirical / Lemma 2 (orthogonal: / Theorem 2 bound)", fontsize=10)
    ax2.grid(True, alpha=0.3)
    if any_ratio:
        _two_column_legend(ax2, var_entries, norm_entries if len(norms) > 1 else [])
    else:
        ax2.text(0.5, 0.5, "no theory values in the table", ha="center", transform=ax2.transAxes)

    name = cfg.get("name") or os.path.basename(os.path.normpath(os.path.abspath(os.path.dirname(path))))
    trials = uniq(table, "trials")
    bits = [f"d = {', '.join(fmt(q) for q in ds)}", f"m = {', '.join(fmt(q) for q in ms)}",
            f"norms = {', '.join(fmt(q) for q in norms)}",
            f"{', '.join(fmt(q) for q in trials)} trials per point"]
    fig.suptitle(f"{name}: softmax-kernel estimators vs angle (Performer Fig. 2)\n" + ", ".join(bits)
                 + ("; " + "; ".join(notes) if notes else ""), fontsize=11)
    fig.savefig(out, dpi=150)
    plt.close(fig)


def angle_plot(path, header, table, cfg, out):
    """Kernel MSE vs angle for every variant: one panel per (m, norm), shared d."""
    require(path, header, KERNEL_KEYS)
    styles = assign_colors(table)
    variants = variant_order(table)
    ms, norms, ds = uniq(table, "m"), uniq(table, "norm"), uniq(table, "d")
    if not ms or not norms:
        die(f"{path}: no m or norm values")
    d0 = ds[0]
    fig, axes = plt.subplots(len(ms), len(norms), figsize=(4.6 * len(norms) + 2.6, 3.4 * len(ms) + 0.9),
                             squeeze=False, constrained_layout=True)
    handles = {}
    phi = np.linspace(0, np.pi, 400)
    for i, m in enumerate(ms):
        for j, l in enumerate(norms):
            ax = axes[i][j]
            rows = [r for r in table if r["m"] == m and r["norm"] == l and r["d"] == d0]
            sizes = marker_sizes(variants, rows)
            ys = []
            for v in variants:
                vr = sorted((r for r in rows if r["variant"] == v), key=lambda r: r["angle"])
                # x + y = 0 (angle pi): positive-type estimators are exact, MSE ~ 1e-31 is
                # rounding; such points are left out (noted in the title), not drawn.
                vr = [r for r in vr if finite_pos(r["mse"]) and r["mse"] > 1e-12 * r["sm"] ** 2]
                if not vr:
                    continue
                color, marker = styles[v]
                x = np.array([r["angle"] for r in vr])
                y = np.array([r["mse"] for r in vr])
                e = np.array([_nz(r["mse_sem"], 0.0) for r in vr])
                ys += list(y * 0.7) + list(y + e)
                h = ax.errorbar(x, y, yerr=np.minimum(e, y * 0.999), marker=marker, color=color,
                                ms=sizes[v], mfc="none", mew=1.3, lw=1.2, capsize=2.5, label=v)
                record("points", {"m": m, "norm": l, "d": d0}, v, x, y, y - e, y + e, SEM_BAND,
                       variant=v)
                handles.setdefault(v, h)
            _, pos, _ = mse_closed_forms(l, phi, m)
            h, = ax.plot(phi, pos, color="0.35", lw=0.9, ls=(0, (2, 2)))
            handles.setdefault("positive iid, Lemma 2", h)
            ax.set_yscale("log")
            if ys:  # the data, not the Lemma 2 curve (which falls to 0 at pi), set the range
                ax.set_ylim(min(ys) / 1.5, max(ys) * 1.5)
            ax.set_xlim(-0.15, np.pi + 0.15)
            ax.set_xticks([0, np.pi / 3, np.pi / 2, 2 * np.pi / 3, np.pi])
            ax.set_xticklabels(["0", "π/3", "π/2", "2π/3", "π"])
            ax.grid(True, which="major", alpha=0.3)
            ax.set_title(f"m = {fmt(m)}, |x| = |y| = {fmt(l)}", fontsize=10)
            if i == len(ms) - 1:
                ax.set_xlabel("angle between x and y (rad)")
            if j == 0:
                ax.set_ylabel("MSE of the SM(x, y) estimate")
    name = cfg.get("name", os.path.basename(os.path.normpath(os.path.dirname(path))))
    trials = uniq(table, "trials")
    fig.suptitle(f"{name}: kernel MSE vs angle, d = {fmt(d0)}, "
                 f"{', '.join(fmt(t) for t in trials)} trials per point, bars: ± one standard error of the mean; "
                 "points with MSE < 1e-12 SM² (x + y = 0: exact) left out")
    axes[0][-1].legend(list(handles.values()), list(handles.keys()), loc="upper left",
                       bbox_to_anchor=(1.03, 1.0), fontsize=9)
    fig.savefig(out, dpi=150)
    plt.close(fig)


def _shade(color, f):
    """Blend a colour towards white by f in [0, 1]."""
    r, g, b = matplotlib.colors.to_rgb(color)
    return (r + (1 - r) * f, g + (1 - g) * f, b + (1 - b) * f)


def _nz(v, default=float("nan")):
    return default if v is None else v


def marker_sizes(variants, rows, big=9.0, small=4.0):
    """Marker sizes falling from big to small in drawing order, so variants measured at
    the same angle stay visible (each drawn inside the one before it), at the angle they
    were measured at: no sideways offsets."""
    present = [v for v in variants if any(r["variant"] == v for r in rows)]
    k = len(present)
    return {v: big - (big - small) * i / max(k - 1, 1) for i, v in enumerate(present)}


def _pi_ticks(ax, lo=-np.pi, hi=np.pi):
    """Ticks at the multiples of pi/4 (pi/2 on wide ranges) from lo to hi."""
    step = 4 if hi - lo <= np.pi * 1.01 else 2
    names = {0: "0", 1: "π/4", 2: "π/2", 3: "3π/4", 4: "π"} if step == 4 else \
        {0: "0", 1: "π/2", 2: "π"}
    ks = range(math.ceil(lo / np.pi * step - 1e-6), math.floor(hi / np.pi * step + 1e-6) + 1)
    ax.set_xticks([k * np.pi / step for k in ks])
    ax.set_xticklabels([("−" if k < 0 else "") + names[abs(k)] for k in ks])


def _two_column_legend(ax, left, right):
    """A legend below ax: two columns of (handle, label) entries; an entry with handle None
    is a column heading (bold, no symbol). Columns are padded to the same length."""
    n = max(len(left), len(right))
    blank = lambda: (plt.Line2D([], [], ls="none"), "")
    col = lambda c: [(h if h is not None else plt.Line2D([], [], ls="none"), t) for h, t in c] + \
        [blank() for _ in range(n - len(c))]
    entries = col(left) + (col(right) if right else [])
    heads = {i for i, (h, _) in enumerate(left) if h is None} | \
        {n + i for i, (h, _) in enumerate(right) if h is None}
    leg = ax.legend([e[0] for e in entries], [e[1] for e in entries], ncol=2 if right else 1,
                    fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False,
                    handlelength=2.2, columnspacing=1.5)
    for i, t in enumerate(leg.get_texts()):
        if i in heads:
            t.set_fontweight("bold")
            t.set_position((-30, 0))
    return leg


# ----------------------------------------------------------------------------- timing

def crossover(exact_pts, var_pts):
    """Smallest L from which the variant stays faster than exact (median vs median), over
    the L where both were measured; None if it is not faster at the largest such L.
    Returns (L, previous common L or None)."""
    common = sorted(set(exact_pts) & set(var_pts))
    cross, prev = None, None
    for i in range(len(common) - 1, -1, -1):
        if var_pts[common[i]] < exact_pts[common[i]]:
            cross, prev = common[i], (common[i - 1] if i > 0 else None)
        else:
            break
    return cross, prev


def crossover_interpolated(exact_pts, var_pts, cross, prev):
    """The crossover L* (docs/design.md section 6, timing): where the time ratio
    variant / exact, linear in log L and log ratio between the last common L where the
    variant is slower (prev) and the first from which it stays faster (cross), is 1.
    None when there is no such pair (faster at every L measured, or never)."""
    if cross is None or prev is None:
        return None
    r0, r1 = var_pts[prev] / exact_pts[prev], var_pts[cross] / exact_pts[cross]
    x0, x1 = math.log(prev), math.log(cross)
    return math.exp(x0 + (x1 - x0) * math.log(r0) / (math.log(r0) - math.log(r1)))


def timing_plot(path, header, table, run, out):
    require(path, header, ["variant", "L", "median_s", "min_s", "max_s"])
    cfg = run_config(run)
    env = run.get("environment") if isinstance(run.get("environment"), dict) else {}
    feats = {}
    for v in cfg.get("variants", []) if isinstance(cfg.get("variants"), list) else []:
        if isinstance(v, dict):
            nm = v.get("name") or "-".join(str(v[k]) for k in ("features", "projection") if v.get(k))
            feats[nm] = v.get("features")
    is_exact = lambda v: v == "exact" or feats.get(v) == "exact"

    # panels: one per (d, dtype, threads) combination; lines: exact, and each (variant, m)
    pkeys = [k for k in ("d", "dtype", "threads") if k in header and len(uniq(table, k)) > 1]
    combos = sorted({tuple(r.get(k) for k in pkeys) for r in table}, key=str)
    if len(combos) > 6:
        die(f"{path}: {len(combos)} panels ({', '.join(pkeys)} vary); pick a subset")
    ms = [q for q in uniq(table, "m")] if "m" in header else []
    variants = variant_order(table)
    exact_names = [v for v in variants if is_exact(v)]
    approx_names = [v for v in variants if not is_exact(v)]
    spare = iter(["C3", "C4", "C5", "C6", "C8", "C9", "C7"] * 4)
    colors = {}
    for v in approx_names:
        c = FEATURE_COLOR.get(feats.get(v) or v.split("-")[0])
        colors[v] = c if c and c not in colors.values() else next(spare)

    n = len(combos)
    fig, axes = plt.subplots(1, n, figsize=(7.6 * n + 0.4, 6.0), squeeze=False,
                             constrained_layout=True)
    notes = []
    for ax, pv in zip(axes[0], combos):
        prow = [r for r in table if tuple(r.get(k) for k in pkeys) == pv]
        exact_pts = {}
        lines = [(v, None) for v in exact_names] + \
                [(v, mm) for v in approx_names for mm in (ms or [None])]
        cross_marks = []
        for v, mm in lines:
            rows = sorted((r for r in prow if r["variant"] == v and (mm is None or r.get("m") == mm)
                           and finite_pos(r.get("median_s"))), key=lambda r: r["L"])
            if not rows:
                continue
            x = np.array([r["L"] for r in rows], float)
            y = np.array([r["median_s"] for r in rows], float)
            lo = np.array([_nz(r.get("min_s"), r["median_s"]) for r in rows], float)
            hi = np.array([_nz(r.get("max_s"), r["median_s"]) for r in rows], float)
            ex = is_exact(v)
            color = "k" if ex else colors[v]
            label = v if (ex or len(ms) <= 1) else f"{v}, m = {fmt(mm)}"
            missing = sorted({r["L"] for r in prow if r["variant"] == v and not finite_pos(r.get("median_s"))
                              and (mm is None or r.get("m") == mm)})
            if missing:
                label += f" (not run at L = {', '.join(fmt(q) for q in missing)})"
            ax.errorbar(x, y, yerr=[np.maximum(y - lo, 0), np.maximum(hi - y, 0)],
                        color=color, marker="o" if ex else "sD^v<>"[ms.index(mm) % 6 if mm in ms else 0], ms=5,
                        lw=1.8 if ex else 1.5, ls="-" if ex else ["--", "-.", ":"][ms.index(mm) % 3 if mm in ms else 0],
                        capsize=3, label=label, zorder=3)
            pts = dict(zip(x.tolist(), y.tolist()))
            if ex:
                exact_pts.update(pts)
            elif exact_pts:
                c, prev = crossover(exact_pts, pts)
                cross_marks.append((label, color, c, prev, crossover_interpolated(exact_pts, pts, c, prev), mm))
        for i, (label, color, c, prev, star, mm) in enumerate(cross_marks):
            name = label.split(" (")[0]
            if c is None:
                notes.append(f"{name} not faster than exact at the largest L measured by both")
                continue
            # FLOP model: FAVOR's flops (linear in L) equal exact's at L = m + F (dv = d): 2m for
            # maps of m columns, 3m for trig and hyperbolic (2m columns); timing.md's note.
            k = 2 if feats.get(name.split(",")[0]) in ("trig", "hyperbolic") else 1
            model = f"; FLOP model {'3m' if k == 2 else '2m'} = {fmt((1 + k) * mm)}" \
                if isinstance(mm, (int, float)) else ""
            ax.axvline(star if star else c, color=color, ls=":", lw=1.6, zorder=2)
            if star:
                text = f"{name}: L* = {star:.0f}{model}\n(faster from L = {fmt(c)}, slower at {fmt(prev)})"
                print(f"{name}: crossover L* = {star:.1f} (log-log interpolation between L = {fmt(prev)} "
                      f"and {fmt(c)}){model}" + (f", L* / model = {star / ((1 + k) * mm):.2f}" if model else ""))
            else:
                text = f"{name} faster than exact\nfrom L = {fmt(c)} (every L measured){model}"
            ax.annotate(text, xy=(c, 0.97 - 0.12 * i), xycoords=("data", "axes fraction"),
                        xytext=(6, 0), textcoords="offset points", ha="left", va="top",
                        fontsize=8.5, color=color,
                        bbox=dict(boxstyle="round,pad=0.25", fc="white", ec="none", alpha=0.85))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        xv = uniq([r for r in prow if finite_pos(r.get("median_s"))], "L")
        if xv and len(xv) <= 14:
            ax.set_xticks(xv)
            ax.set_xticklabels([fmt(q) for q in xv], rotation=0 if len(xv) <= 8 else 45)
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("sequence length L (tokens)")
        ax.set_ylabel("wall time per attention call (s)")
        ax.grid(True, which="major", alpha=0.3)
        ax.grid(True, which="minor", axis="y", alpha=0.1)
        if pkeys:
            ax.set_title(", ".join(f"{k} = {fmt(q) if not isinstance(q, str) else q}"
                                   for k, q in zip(pkeys, pv)), fontsize=10)
        ax.legend(loc="lower right", fontsize=8.5, title="median of the repeats, bars: min to max",
                  title_fontsize=8.5)

    fixed = []
    for k in ("d", "m", "dtype", "threads"):
        vals = uniq(table, k) if k in header else []
        if len(vals) == 1:
            q = vals[0]
            fixed.append(f"{fmt(q)} threads" if k == "threads" else
                         (q if isinstance(q, str) else f"{k} = {fmt(q)}"))
    inputs = cfg.get("inputs") if isinstance(cfg.get("inputs"), dict) else {}
    if inputs.get("d_v") is not None:
        at = next((i + 1 for i, f in enumerate(fixed) if f.startswith("d =")), 0)
        fixed.insert(at, f"d_v = {inputs['d_v']}")
    reps = uniq(table, "repeats") if "repeats" in header else []
    if len(reps) == 1:
        fixed.append(f"{fmt(reps[0])} repeats")
    if env.get("cpu"):
        fixed.append(f"CPU: {env['cpu']}")
    name = cfg.get("name") or os.path.basename(os.path.normpath(os.path.abspath(os.path.dirname(path))))
    causal = " causal" if cfg.get("causal") else ""
    title = f"{name}: exact vs FAVOR{causal} attention time over sequence length " \
            f"(Performer Fig. 3 counterpart)\n" + ", ".join(fixed)
    if notes:
        title += "\n" + "; ".join(notes)
    fig.suptitle(title, fontsize=11)
    fig.savefig(out, dpi=150)
    plt.close(fig)


# ----------------------------------------------------------------------------- main

def precision_plot(result_dir, out):
    path = os.path.join(result_dir, "breaks.csv")
    if not os.path.isfile(path):
        die(f"{path}: missing (run scripts/precision_report.py {result_dir} first)")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    Lmax = max(int(r["L"]) for r in rows)
    rows = [r for r in rows if int(r["L"]) == Lmax]
    stab = lambda v: "no shift" if v.endswith("-noshift") else "official eps" if v.endswith("-official") else \
        "plain" if v == "relu" else "max shift"
    fam = lambda v: v.split("-")[0]
    families = list(dict.fromkeys(fam(r["variant"]) for r in rows))
    scales = sorted({float(r["scale"]) for r in rows})
    dtypes = ["float16", "bfloat16", "float32"]
    # 0 fine, 1 finite but > 10x float64's error, 2 NaN/Inf without overflow, 3 overflow.
    code = lambda r: (3 if float(r["overflow_fraction"]) > 0 else 2) if float(r["nonfinite"]) > 0 else \
        (1 if r["broken"] else 0)
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch
    cmap = ListedColormap(["#cfe8cf", "#f4b942", "#8e6bb8", "#c0392b"])
    ncol = 4
    nrow = (len(families) + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 2.9 * nrow), squeeze=False)
    for ax, fm in zip(axes.flat, families):
        stabs = [st for st in ("max shift", "plain", "no shift", "official eps")
                 if any(fam(r["variant"]) == fm and stab(r["variant"]) == st for r in rows)]
        labels, grid = [], []
        for dt in dtypes:
            for st in stabs:
                by = {float(r["scale"]): code(r) for r in rows
                      if r["dtype"] == dt and fam(r["variant"]) == fm and stab(r["variant"]) == st}
                labels.append(f"{dt}, {st}")
                grid.append([by[s] for s in scales])
        ax.imshow(np.array(grid), cmap=cmap, vmin=-0.5, vmax=3.5, aspect="auto")
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels(labels, fontsize=7)
        ax.set_xticks(range(len(scales)))
        ax.set_xticklabels([f"{s:g}" for s in scales], fontsize=7)
        for y in range(len(stabs), len(labels), len(stabs)):
            ax.axhline(y - 0.5, color="white", lw=2)
        ax.set_title(fm, fontsize=10)
    for ax in axes.flat[len(families):]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("input scale (entries N(0, scale^2))", fontsize=8)
    handles = [Patch(color=cmap(0), label="fine (within 10x of float64's output_mse)"),
               Patch(color=cmap(1), label="finite, > 10x float64's error"),
               Patch(color=cmap(2), label="NaN/Inf output, no feature or sum overflow (D = 0 by underflow, or near 0)"),
               Patch(color=cmap(3), label="overflow (features or phi(K)^T [V, 1] hit Inf)")]
    fig.legend(handles=handles, loc="lower center", ncol=2, frameon=False, fontsize=9)
    fig.suptitle(f"Which estimator survives which precision: L = {Lmax}, d = 16, m = 256, 3 trials "
                 "(official eps: 1e-6 after max(w.x); relu 1e-3)", fontsize=11)
    fig.tight_layout(rect=(0, 0.08, 1, 0.96))
    try:
        fig.savefig(out, dpi=110)
    except OSError as e:
        die(f"{out}: cannot write: {e}")
    plt.close(fig)


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


if __name__ == "__main__":
    sys.exit(main())
