"""--kind gradient: output and gradient errors vs m, uniform dashed, the bias against its floor."""
import math
import os

from .common import (BASELINE_LABEL, BASELINE_STYLE, METRIC_NAME, _wrap, assign_colors, die, fmt,
    np, plt, uniq, variant_order, x_label)
from .series import FIGURE, record


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
