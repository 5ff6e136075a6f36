"""--kind kernel (the Performer Fig. 2 heat map, slice and ratio) and --kind angle (kernel MSE vs
angle), with the closed forms they draw."""
import math
import os

from .common import (FEATURE_COLOR, KERNEL_KEYS, LogNorm, SEM_BAND, _nz, _shade, assign_colors,
    die, finite_pos, fmt, np, plt, require, uniq, variant_order)
from .series import record


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
