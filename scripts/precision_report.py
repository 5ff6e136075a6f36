#!/usr/bin/python3
"""The break table of the half-precision study (scripts/precision_sweep.sh).

Usage: /usr/bin/python3 scripts/precision_report.py OUT
Reads OUT/<dtype>/summary.csv for float64, float32, float16, bfloat16 (one run of
configs/precision_scale_sweep.json each) and OUT/exact_floor.csv; writes OUT/breaks.csv
and OUT/breaks.md.

A variant breaks in a dtype at (L, scale) when some trial's output has a NaN/Inf entry
(nonfinite_mean > 0) or when its mean output_mse is more than 10x the same variant's
float64 mean output_mse at that (L, scale) (same W, same inputs before rounding): the
precision, not the estimator, is then what fails. The cause is "overflow" when
overflow_fraction_mean > 0 (features or the stored phi(K)^T [V, 1] hit Inf), "NaN" when
outputs are non-finite without overflow (a row's D is 0 because features or key sums
rounded to 0, or the output itself overflows where trig's D is near 0), "x<ratio>" when finite but more than 10x worse.
"""
import csv
import os
import sys

DTYPES = ("float16", "bfloat16", "float32")


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(s):
    return float(s) if s not in ("", None) else float("nan")


def main(out):
    runs = {dt: read(os.path.join(out, dt, "summary.csv")) for dt in ("float64",) + DTYPES}
    key = lambda r: (r["variant"], int(r["L"]), float(r["scale"]))
    f64 = {key(r): r for r in runs["float64"]}
    variants = list(dict.fromkeys(r["variant"] for r in runs["float64"]))
    Ls = sorted({int(r["L"]) for r in runs["float64"]})
    scales = sorted({float(r["scale"]) for r in runs["float64"]})
    rows = []
    for dt in DTYPES:
        for r in runs[dt]:
            k = key(r)
            base = num(f64[k]["output_mse_mean"])
            mse, nonfinite = num(r["output_mse_mean"]), num(r["nonfinite_mean"])
            over = num(r.get("overflow_fraction_mean", "0"))
            ratio = mse / base if base > 0 else float("nan")
            if nonfinite > 0:
                cause = "overflow" if over > 0 else "NaN"
            elif not ratio <= 10:
                cause = f"x{ratio:.3g}"
            else:
                cause = ""
            rows.append({"dtype": dt, "variant": k[0], "L": k[1], "scale": k[2], "output_mse": mse,
                         "float64_output_mse": base, "ratio": ratio, "nonfinite": nonfinite,
                         "overflow_fraction": over, "broken": cause})
    with open(os.path.join(out, "breaks.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)

    by = {(r["dtype"], r["variant"], r["L"], r["scale"]): r for r in rows}
    g = lambda x: f"{x:g}"
    md = ["# precision_scale_sweep: where each estimator breaks", "",
          "Smallest input scale at which the variant breaks (see scripts/precision_report.py: some "
          "output NaN/Inf, or output_mse > 10x the same variant's float64 output_mse), per dtype and L, "
          "with the cause: overflow (features or stored phi(K)^T [V, 1] hit Inf), NaN (non-finite "
          "outputs without overflow: D = 0 by underflow, or trig's D near 0), or the error ratio. '-': not broken up to "
          f"scale {g(scales[-1])}. d = 16, m = 256, orthogonal W, 3 trials.", ""]
    head = "| variant | " + " | ".join(f"{dt} L={L}" for dt in DTYPES for L in Ls) + " |"
    md += [head, "|" + "---|" * (1 + len(DTYPES) * len(Ls))]
    for v in variants:
        cells = []
        for dt in DTYPES:
            for L in Ls:
                first = next((by[(dt, v, L, s)] for s in scales if by[(dt, v, L, s)]["broken"]), None)
                cells.append("-" if first is None else f"{g(first['scale'])} ({first['broken']})")
        md.append(f"| {v} | " + " | ".join(cells) + " |")
    md += ["", f"Error ratio to float64 (output_mse of the dtype / output_mse in float64, mean over 3 trials), "
           f"L = {Ls[-1]}; nan or inf where the output had NaN/Inf:", ""]
    md += ["| variant | dtype | " + " | ".join(f"s={g(s)}" for s in scales) + " |", "|" + "---|" * (2 + len(scales))]
    for v in variants:
        for dt in ("float16", "bfloat16"):
            md.append(f"| {v} | {dt} | " + " | ".join(f"{by[(dt, v, Ls[-1], s)]['ratio']:.3g}" for s in scales) + " |")
    floor = read(os.path.join(out, "exact_floor.csv"))
    md += ["", "The floor: exact attention emulated in the dtype (favor apply --exact --dtype; scores and "
           "probabilities rounded, softmax in float32), output_rel_error against float64 exact attention, "
           f"L = {Ls[-1]}:", ""]
    md += ["| dtype | " + " | ".join(f"s={g(s)}" for s in scales) + " |", "|" + "---|" * (1 + len(scales))]
    for dt in DTYPES:
        vals = {float(r["scale"]): float(r["output_rel_error"]) for r in floor if r["dtype"] == dt and int(r["L"]) == Ls[-1]}
        md.append(f"| {dt} | " + " | ".join(f"{vals[s]:.3g}" for s in scales) + " |")
    with open(os.path.join(out, "breaks.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print(f"wrote {out}/breaks.csv, {out}/breaks.md")


if __name__ == "__main__":
    USAGE = "usage: precision_report.py OUT   (the directory scripts/precision_sweep.sh writes)"
    if sys.argv[1:] in (["-h"], ["--help"]):
        print(USAGE)
        sys.exit(0)
    if len(sys.argv) != 2 or sys.argv[1].startswith("-") or not os.path.isdir(sys.argv[1]):
        print(f"{USAGE}\nprecision_report.py: expected one directory, got {' '.join(sys.argv[1:]) or 'nothing'}",
              file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1])
