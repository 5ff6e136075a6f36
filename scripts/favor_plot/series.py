"""The series of the metric kinds (m, L, scale): statistics and bands, per-head means, the
Fig. 4 split, the uniform baseline, and the record of every series drawn (--data)."""
import json
import math

from .common import (BASELINE_STYLE, MAX_HEAD_PANELS, METRIC_NAME, die, fmt, np, require, uniq,
    variant_order)


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
HIGHER_IS_BETTER = {"grad_cosine", "recall", "delta_recall", "task_score", "delta_task_score"}


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
