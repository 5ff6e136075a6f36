"""What every figure kind shares: reading a result set, labels, styles, colours, small text and drawing helpers.
numpy and matplotlib are imported here once (one clear line when they are missing)."""

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
    "bits_per_byte": "model's held-out bits per byte, attention swapped in",
    "delta_bits_per_byte": "Δ bits per byte against the model's own attention",
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
    "bits_per_byte": "bits per byte",
    "delta_bits_per_byte": "Δ bits per byte",
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


def read_summary(result_dir, name="summary.csv", text_cols=("variant", "features", "projection", "layers")):
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
    if isinstance(v, str):   # a text key: a swap-in's layers
        return v
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


def _shade(color, f):
    """Blend a colour towards white by f in [0, 1]."""
    r, g, b = matplotlib.colors.to_rgb(color)
    return (r + (1 - r) * f, g + (1 - g) * f, b + (1 - b) * f)


def _nz(v, default=float("nan")):
    return default if v is None else v
