"""--kind precision: the half-precision study's breaks.csv as a grid of coloured cells."""
import csv
import os

from .common import die, np, plt


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
