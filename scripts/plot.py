#!/usr/bin/python3
"""Plot a favor result directory (summary.csv + run.json) as a PNG.

Usage: /usr/bin/python3 scripts/plot.py RESULT_DIR [--out PNG] [--kind auto|m|L|scale|kernel|angle]
                                       [--metric output_mse]

Kinds (auto picks from the table):
  kernel  kernel experiments (norm/angle columns): the Performer Fig. 2 heat map of
          r(phi, l) = MSE_trig / MSE_pos (closed form), the slice at the norm closest to 1
          (closed forms + empirical points), and empirical / theory per variant.
  m       metric vs number of random features m (log-log, mean and mean +- std band), one
          line per variant, one panel per other varying key (scale, L, d): Fig. 4 style.
  L       metric vs sequence length L (log x), one line per variant (and per m).
  scale   metric vs input scale (log y), one line per variant; panels per other keys.
  angle   kernel experiments, for comparing many estimators: kernel MSE vs angle (log y,
          +- one standard error), one line per variant, one panel per (m, norm), with the
          iid positive Lemma 2 curve for reference.
auto: kernel if the table is a kernel table, else m if several m, else L if several L,
else scale if several scales, else m.

Default output: RESULT_DIR/<config name>.png (suffixed with _<metric> / _<kind> when a
non-default metric or kind is asked for). Exit 2 with one line on stderr on bad input.
Needs numpy and matplotlib (Debian python3-matplotlib): run it with /usr/bin/python3.
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
METRICS = ["output_mse", "attention_mse", "kernel_mse", "negative_fraction", "nonfinite",
           "seconds"]
METRIC_LABEL = {
    "output_mse": "output MSE (mean over L x d_v entries)",
    "attention_mse": "attention-matrix MSE (mean over L x L entries)",
    "kernel_mse": "kernel MSE of SM(x, y) (mean over L x L pairs)",
    "negative_fraction": "share of negative attention entries",
    "nonfinite": "non-finite output entries (count)",
    "seconds": "estimator wall time per cell (s)",
}
XLABEL = {
    "m": "number of random features m",
    "L": "sequence length L (tokens)",
    "scale": "input scale (std of Q, K, V entries)",
}
FEATURE_COLOR = {"trig": "C0", "positive": "C1", "hyperbolic": "C2", "relu": "C4",
                 "oprf": "C5", "exact": "k"}
PROJ_MARKER = {"iid": "o", "orthogonal": "s", "orthogonal-fixed": "^",
               "orthogonal-nosignfix": "v", "simplex": "P", "hadamard": "X",
               "hadamard-fixed": "<", "givens": "*"}
PROJ_LINESTYLE = {"iid": "-", "orthogonal": "--", "orthogonal-fixed": ":",
                  "orthogonal-nosignfix": "-.", "simplex": "-.", "hadamard": "-.",
                  "hadamard-fixed": ":", "givens": "-."}
LINESTYLES = ["-", "--", ":", "-."]
CLIP_FACTOR = 10.0  # log axes: the band's lower edge is clipped at mean / CLIP_FACTOR


# ----------------------------------------------------------------------------- input

def parse_number(text, where):
    text = text.strip()
    if text == "":
        return None
    try:
        return float(text)  # accepts nan, inf, -inf
    except ValueError:
        die(f"{where}: not a number: {text!r}")


def read_summary(result_dir):
    path = os.path.join(result_dir, "summary.csv")
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
    text_cols = {"variant", "features", "projection"}
    table = []
    for i, r in enumerate(rows[1:], start=2):
        if len(r) != len(header):
            die(f"{path}: line {i}: {len(r)} cells, header has {len(header)}")
        rec = {}
        for h, c in zip(header, r):
            rec[h] = c.strip() if h in text_cols else parse_number(c, f"{path}: line {i}, column {h}")
        table.append(rec)
    return path, header, table


def read_run_json(result_dir):
    path = os.path.join(result_dir, "run.json")
    if not os.path.isfile(path):
        return {}
    try:
        with open(path) as f:
            run = json.load(f)
        cfg = run.get("config", {})
        return cfg if isinstance(cfg, dict) else {}
    except (OSError, ValueError) as e:
        print(f"{PROG}: warning: {path}: ignored ({e})", file=sys.stderr)
        return {}


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
    colours no feature map uses."""
    names = variant_order(table)
    first = {}
    for r in table:
        first.setdefault(r["variant"], r)
    styles, used, per_color = {}, set(), {}
    spare = [c for c in [f"C{i}" for i in (3, 6, 7, 8, 9, 4, 0, 2, 5)]
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


def default_out(result_dir, cfg, suffix):
    name = cfg.get("name") if isinstance(cfg.get("name"), str) and cfg.get("name") else None
    if not name:
        name = os.path.basename(os.path.normpath(os.path.abspath(result_dir))) or "plot"
    name = "".join(c if (c.isalnum() or c in "-_.") else "_" for c in name)
    return os.path.join(result_dir, name + suffix + ".png")


# ----------------------------------------------------------------------------- approximation

def approx_plot(path, header, table, cfg, kind, metric, out):
    require(path, header, ["variant", "L", "d", "m", "scale"])
    mean_c, std_c = f"{metric}_mean", f"{metric}_std"
    require(path, header, [mean_c])
    has_std = std_c in header
    theory_c = "kernel_mse_theory" if metric == "kernel_mse" and "kernel_mse_theory" in header else None

    keys = ["L", "d", "m", "scale"]
    varying = [k for k in keys if len(uniq(table, k)) > 1]
    line_extra = ["m"] if (kind in ("L",) and "m" in varying) else []
    panel_keys = [k for k in keys if k in varying and k != kind and k not in line_extra]
    # scale-kind: several m become panels (brief: one line per variant)
    panels = sorted({tuple(r[k] for k in panel_keys) for r in table})
    if len(panels) > 12:
        die(f"{path}: {len(panels)} panels ({', '.join(panel_keys)} vary); "
            "pick a subset or another --kind")

    styles = assign_colors(table)
    linestyles = {r["variant"]: PROJ_LINESTYLE.get(r.get("projection"), "-.") for r in table}
    variants = variant_order(table)
    extra_vals = uniq(table, "m") if line_extra else [None]

    n = len(panels)
    ncols = 2 if n == 4 else min(n, 3)
    nrows = math.ceil(n / ncols)
    width = 4.6 * ncols + 2.6  # room for a legend on the right
    height = 3.9 * nrows + 0.8
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), squeeze=False,
                             constrained_layout=True)
    flat = axes.ravel()
    for ax in flat[n:]:
        ax.set_visible(False)

    # y scale: log unless some plotted mean is <= 0
    means_all = [r[mean_c] for r in table if r.get(mean_c) is not None and math.isfinite(r[mean_c])]
    logy = bool(means_all) and all(v > 0 for v in means_all)
    clipped = False
    logx = kind in ("m", "L")
    if kind == "scale":
        xs = uniq(table, "scale")
        logx = bool(xs) and xs[0] > 0 and xs[-1] / xs[0] >= 10

    handles = {}
    theory_handle = None
    skipped = []
    for ax, pv in zip(flat, panels):
        prow = [r for r in table if tuple(r[k] for k in panel_keys) == pv]
        for vi, v in enumerate(variants):
            for ei, ev in enumerate(extra_vals):
                rows = [r for r in prow if r["variant"] == v and (ev is None or r["m"] == ev)]
                if not rows:
                    continue
                rows.sort(key=lambda r: r[kind])
                x = np.array([r[kind] for r in rows], float)
                y = np.array([np.nan if r.get(mean_c) is None else r[mean_c] for r in rows], float)
                s = np.array([np.nan if (not has_std or r.get(std_c) is None) else r[std_c]
                              for r in rows], float)
                ok = np.isfinite(y) & (y > 0 if logy else True)
                if not ok.any():
                    skipped.append(v)
                    continue
                color, marker = styles[v]
                ls = linestyles.get(v, "-")
                if ev is not None and len(extra_vals) > 1:
                    color = _shade(color, 0.6 * (1 - ei / (len(extra_vals) - 1)))
                label = v if ev is None else f"{v}, m={fmt(ev)}"
                nonfin = [r.get("nonfinite_mean") for r in rows if r.get("nonfinite_mean")]
                if nonfin and any(q and q > 0 for q in nonfin):
                    label += " (non-finite outputs)"
                h, = ax.plot(x[ok], y[ok], ls=ls, marker=marker, color=color, ms=5, lw=1.6,
                             label=label)
                handles.setdefault(label, h)
                band = ok & np.isfinite(s)
                if band.any():
                    lo = y - s
                    hi = y + s
                    if logy:
                        clip = lo < y / CLIP_FACTOR
                        clipped = clipped or bool((clip & band).any())
                        lo = np.where(clip, y / CLIP_FACTOR, lo)
                    if band.sum() == 1:  # a single point: a band has no width, draw a bar
                        ax.errorbar(x[band], y[band], yerr=[y[band] - lo[band], hi[band] - y[band]],
                                    fmt="none", ecolor=color, alpha=0.5, capsize=4, lw=1.2)
                    else:
                        ax.fill_between(x[band], lo[band], hi[band], color=color, alpha=0.13, lw=0)
                if theory_c:
                    t = np.array([np.nan if r.get(theory_c) is None else r[theory_c] for r in rows], float)
                    tok = np.isfinite(t) & (t > 0 if logy else True)
                    if tok.any():
                        th, = ax.plot(x[tok], t[tok], ls=(0, (2, 2)), color=color, lw=1.0, alpha=0.8)
                        theory_handle = th
        if logx:
            ax.set_xscale("log")
            xv = uniq(prow, kind)
            if xv and len(xv) <= 12:
                ax.set_xticks(xv)
                ax.set_xticklabels([fmt(q) for q in xv])
                ax.xaxis.set_minor_formatter(NullFormatter())
        if logy:
            ax.set_yscale("log")
        ax.set_xlabel(XLABEL[kind])
        ax.grid(True, which="major", alpha=0.3)
        if panel_keys:
            ax.set_title(", ".join(f"{k} = {fmt(q)}" for k, q in zip(panel_keys, pv)), fontsize=10)
    for r in range(nrows):
        axes[r][0].set_ylabel(METRIC_LABEL.get(metric, metric))

    # legend to the right of the last panel of the first row
    band_note = "band: mean ± std" + (f" (lower edge clipped at mean / {CLIP_FACTOR:g} where std > "
                                      f"{1 - 1 / CLIP_FACTOR:.0%} of mean)" if clipped else "")
    if theory_handle is not None:
        handles["dotted: kernel_mse_theory (Lemma 2 closed form for iid W)"] = \
            plt.Line2D([], [], ls=(0, (2, 2)), color="0.3", lw=1.0)
    if has_std:
        handles[band_note] = plt.Rectangle((0, 0), 1, 1, color="0.5", alpha=0.25)
    axes[0][ncols - 1 if n >= ncols else n - 1].legend(
        list(handles.values()), [_wrap(k) for k in handles.keys()], loc="upper left",
        bbox_to_anchor=(1.02, 1.0), fontsize=8.5, frameon=False)

    fixed = []
    for k, label in (("L", "L"), ("d", "d"), ("m", "m"), ("scale", "scale")):
        vals = uniq(table, k)
        if len(vals) == 1 and k != kind:
            fixed.append(f"{label} = {fmt(vals[0])}")
    trials = uniq(table, "trials")
    if len(trials) == 1:
        fixed.append(f"{fmt(trials[0])} trials")
    inputs = cfg.get("inputs") if isinstance(cfg.get("inputs"), dict) else {}
    if inputs.get("d_v") is not None:
        fixed.insert(min(2, len(fixed)), f"d_v = {inputs['d_v']}")
    if cfg.get("dtype"):
        fixed.append(str(cfg["dtype"]))
    name = cfg.get("name") or os.path.basename(os.path.normpath(os.path.abspath(os.path.dirname(path))))
    what = {"m": "vs number of random features", "L": "vs sequence length",
            "scale": "vs input scale"}[kind]
    fig.suptitle(f"{name}: {metric} {what}\n" + ", ".join(fixed), fontsize=11)
    if skipped:
        print(f"{PROG}: note: no plottable {metric} values for: {', '.join(sorted(set(skipped)))}",
              file=sys.stderr)
    fig.savefig(out, dpi=150)
    plt.close(fig)


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

    # (b) slice: closed forms + empirical points
    feats = {r["features"] for r in table}
    phid = np.linspace(-np.pi, np.pi, 1201)
    trig, pos, hyp = mse_closed_forms(l1, phid, m0)
    curves = [("trig", trig, "MSE_trig (Lemma 2)"), ("positive", pos, "MSE_pos (Lemma 2)")]
    if "hyperbolic" in feats:
        curves.append(("hyperbolic", hyp, "MSE_hyp (Lemma 2)"))
    emp_vals = []
    for f, y, lab in curves:
        y = np.where(y > 0, y, np.nan)
        ax1.plot(phid, y, color=FEATURE_COLOR.get(f, "0.3"), lw=1.3, alpha=0.75, label=lab)
    jitter = _jitter(variants, sl)
    for v in variants:
        rows = sorted([r for r in sl if r["variant"] == v], key=lambda r: r["angle"])
        if not rows:
            continue
        color, marker = styles[v]
        x = np.array([r["angle"] for r in rows]) + jitter.get(v, 0.0)
        y = np.array([_nz(r["mse"]) for r in rows])
        e = np.array([_nz(r["mse_sem"], 0.0) for r in rows])
        ok = np.isfinite(y) & (y > 0)
        emp_vals += list(y[ok])
        ortho = all(r.get("mse_theory") is None for r in rows)
        ax1.errorbar(x[ok], y[ok], yerr=np.minimum(e[ok], y[ok] * 0.999), fmt=marker, color=color,
                     ms=5 if not ortho else 6, mfc="white" if ortho else color, mew=1.3,
                     capsize=2, lw=1.0, ls="none", label=f"{v} (empirical ± sem)")
        b = np.array([_nz(r.get("theorem2_bound")) for r in rows])
        bok = np.isfinite(b) & (b > 0)
        if bok.any():
            xb = x[bok] - jitter.get(v, 0.0)
            dense = theorem2_closed_form(l1, phid, m0, d0) if m0 <= d0 else None
            if dense is not None and np.allclose(theorem2_closed_form(l1, xb, m0, d0), b[bok],
                                                 rtol=1e-6, atol=0):
                ax1.plot(phid, np.where(dense > 0, dense, np.nan), ls="--", color=color, lw=1.2,
                         label=f"{v}: Theorem 2 bound")
            else:  # m > d (per-block bound) or an unknown form: join the table's values
                ax1.plot(xb, b[bok], ls="--", color=color, lw=1.2,
                         label=f"{v}: Theorem 2 bound (table values)")
    ax1.set_yscale("log")
    top = np.nanmax([np.nanmax(np.where(c[1] > 0, c[1], np.nan)) for c in curves] + emp_vals)
    low = min(emp_vals) / 5 if emp_vals else top * 1e-6
    ax1.set_ylim(max(low, top * 1e-8), top * 3)
    ax1.set_xlim(-np.pi, np.pi)
    _pi_ticks(ax1)
    ax1.set_xlabel("angle φ between x and y (rad)")
    ax1.set_ylabel("MSE of the SM(x, y) estimate")
    ax1.set_title(f"slice l = {fmt(l1)}:  m = {fmt(m0)}, d = {fmt(d0)}", fontsize=10)
    ax1.grid(True, alpha=0.3)
    ax1.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)

    # (c) empirical / theory per variant (all norms: one line style per norm)
    any_ratio = False
    norm_styles = {n: LINESTYLES[i % len(LINESTYLES)] for i, n in enumerate(norms)}
    for v in variants:
        color, marker = styles[v]
        for nv in norms:
            rows = sorted([r for r in table if r["variant"] == v and r["norm"] == nv
                           and r["m"] == m0 and r["d"] == d0], key=lambda r: r["angle"])
            if not rows:
                continue
            ref = [r.get("mse_theory") for r in rows]
            ortho = all(t is None for t in ref)
            if ortho:
                ref = [r.get("theorem2_bound") for r in rows]
            pts = [(r["angle"] + jitter.get(v, 0.0), _nz(r["mse"]) / t, _nz(r["mse_sem"], 0.0) / t)
                   for r, t in zip(rows, ref) if t is not None and t > 0 and math.isfinite(t)]
            pts = [p for p in pts if math.isfinite(p[1])]
            if not pts:
                continue
            any_ratio = True
            x, y, e = map(np.array, zip(*pts))
            lab = f"{v}{' / Thm 2 bound' if ortho else ''}"
            if len(norms) > 1:
                lab += f", l = {fmt(nv)}"
            ax2.errorbar(x, y, yerr=e, fmt=marker, ls=norm_styles[nv], color=color, ms=4.5,
                         mfc="white" if ortho else color, capsize=2, lw=1.0, label=lab)
    ax2.axhline(1.0, color="k", lw=0.8)
    ax2.set_xlim(-np.pi, np.pi)
    _pi_ticks(ax2)
    ax2.set_xlabel("angle φ between x and y (rad)")
    ax2.set_ylabel("empirical MSE / theory")
    ax2.set_title("empirical / Lemma 2 (orthogonal: / Theorem 2 bound)", fontsize=10)
    ax2.grid(True, alpha=0.3)
    if any_ratio:
        ax2.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16),
                   ncol=2 if len(norms) > 1 else 1, frameon=False)
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
            jit = _jitter(variants, rows)
            ys = []
            for v in variants:
                vr = sorted((r for r in rows if r["variant"] == v), key=lambda r: r["angle"])
                # x + y = 0 (angle pi): positive-type estimators are exact, MSE ~ 1e-31 is
                # rounding; such points are left out (noted in the title), not drawn.
                vr = [r for r in vr if finite_pos(r["mse"]) and r["mse"] > 1e-12 * r["sm"] ** 2]
                if not vr:
                    continue
                color, marker = styles[v]
                x = np.array([r["angle"] for r in vr]) + jit.get(v, 0.0)
                y = np.array([r["mse"] for r in vr])
                e = np.array([_nz(r["mse_sem"], 0.0) for r in vr])
                ys += list(y * 0.7) + list(y + e)
                h = ax.errorbar(x, y, yerr=np.minimum(e, y * 0.999), marker=marker, color=color,
                                ms=5, lw=1.2, capsize=2.5, label=v)
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
                 f"{', '.join(fmt(t) for t in trials)} trials per point (± one standard error); "
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


def _jitter(variants, rows):
    """Small horizontal offsets so overlapping error bars of variants stay visible."""
    present = [v for v in variants if any(r["variant"] == v for r in rows)]
    k = len(present)
    if k <= 1:
        return {}
    step = 0.035
    return {v: (i - (k - 1) / 2) * step for i, v in enumerate(present)}


def _pi_ticks(ax):
    ax.set_xticks([-np.pi, -np.pi / 2, 0, np.pi / 2, np.pi])
    ax.set_xticklabels(["−π", "−π/2", "0", "π/2", "π"])


# ----------------------------------------------------------------------------- main

def main(argv=None):
    ap = argparse.ArgumentParser(prog=PROG, description="Plot a favor result directory "
                                 "(summary.csv + run.json) as a PNG.")
    ap.add_argument("result_dir", metavar="RESULT_DIR")
    ap.add_argument("--out", metavar="PNG", help="output file (default RESULT_DIR/<name>.png)")
    ap.add_argument("--kind", choices=["auto", "m", "L", "scale", "kernel", "angle"], default="auto")
    ap.add_argument("--metric", default=None,
                    help="approximation metric to plot (default output_mse, else the first present)")
    a = ap.parse_args(argv)

    path, header, table = read_summary(a.result_dir)
    cfg = read_run_json(a.result_dir)
    is_kernel = "angle" in header and "norm" in header
    kind = a.kind
    if kind == "auto":
        if is_kernel:
            kind = "kernel"
        else:
            require(path, header, ["variant", "L", "d", "m", "scale"])
            kind = next((k for k in ("m", "L", "scale") if len(uniq(table, k)) > 1), "m")
    kernel_kind = kind in ("kernel", "angle")
    if kernel_kind and not is_kernel:
        die(f"{path}: not a kernel table (no norm/angle columns); use --kind m, L or scale")
    if not kernel_kind and is_kernel:
        die(f"{path}: a kernel table can only be drawn with --kind kernel or angle")

    suffix = "_vs_angle" if kind == "angle" else ""
    metric = None
    if not kernel_kind:
        present = [mt for mt in METRICS if f"{mt}_mean" in header]
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
        if a.kind != "auto":
            suffix += f"_vs_{kind}"
    elif a.metric is not None:
        print(f"{PROG}: note: --metric ignored for kernel tables", file=sys.stderr)

    out = a.out or default_out(a.result_dir, cfg, suffix)
    outdir = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(outdir):
        die(f"--out {out}: directory {outdir} does not exist")
    try:
        if kind == "kernel":
            kernel_plot(path, header, table, cfg, out)
        elif kind == "angle":
            angle_plot(path, header, table, cfg, out)
        else:
            approx_plot(path, header, table, cfg, kind, metric, out)
    except OSError as e:
        die(f"{out}: cannot write: {e}")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
