"""--kind m, L, scale: a metric vs m (or num_features), L or the input scale, one line per variant."""
import math
import os
import sys

from .common import (BASELINE_LABEL, BASELINE_STYLE, CLIP_FACTOR, METRIC_LABEL, METRIC_NAME,
    NullFormatter, PROG, PROJ_LINESTYLE, _join_wrapped, _shade, _wrap, assign_colors, die,
    finite_pos, fmt, np, plt, require, uniq, variant_order, x_label)
from .series import (FIGURE, average_heads, compared, draw_baseline, drawn_values, fig4_split,
    head_mode, ratio_label, record, series, spec_title, stat_spec, values_word)


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

    keys = ["L", "d", mkey, "scale"] + (["layers"] if "layers" in header else [])   # layers: a swap-in's
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
