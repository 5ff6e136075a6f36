"""--kind timing: wall time vs L, exact attention and each variant, the crossover marked."""
import math
import os

from .common import (FEATURE_COLOR, NullFormatter, _nz, die, finite_pos, fmt, np, plt, require,
    run_config, uniq, variant_order)


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
