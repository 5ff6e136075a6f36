#!/usr/bin/python3
"""Compare the CSV tables of two result directories cell by cell.

Usage: scripts/diff_results.py OLD_DIR NEW_DIR [--rtol 1e-12] [--atol 0] [--ignore COL ...]

Numbers agree when |a - b| <= atol + rtol * max(|a|, |b|); text cells must be equal. Columns
that exist on one side only are reported, not compared. Prints the worst relative difference
per file and column and exits 1 if any cell is outside the tolerance (2 on unreadable input).
"""
import argparse
import csv
import math
import os
import sys

NONDETERMINISTIC = {"seconds", "seconds_mean", "seconds_std", "seconds_sem", "seconds_median",
                    "seconds_p10", "seconds_p90", "median_s", "min_s", "max_s", "gflops",
                    "speedup_vs_exact", "peak_bytes", "projection_s", "features_s", "kv_s",
                    "normalise_s", "gemm_ratio", "status", "backward_s", "backward_ratio"}


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def as_float(s):
    try:
        return float(s)
    except ValueError:
        return None


def compare(old, new, rtol, atol, ignore):
    ho, ro = read(old)
    hn, rn = read(new)
    if len(ro) != len(rn):
        print(f"{new}: {len(rn)} rows, {old} has {len(ro)}")
        return False
    ok = True
    for c in sorted(set(ho) ^ set(hn)):
        print(f"{new}: column {c} only in {'old' if c in ho else 'new'}")
    for c in [c for c in hn if c in ho and c not in ignore and c not in NONDETERMINISTIC]:
        i, j = ho.index(c), hn.index(c)
        worst = 0.0
        for k, (a, b) in enumerate(zip(ro, rn)):
            x, y = as_float(a[i]), as_float(b[j])
            if x is None or y is None or math.isnan(x) or math.isnan(y) or math.isinf(x) or math.isinf(y):
                if a[i] != b[j]:
                    print(f"{new}: row {k + 2} column {c}: {a[i]!r} != {b[j]!r}")
                    ok = False
                continue
            diff = abs(x - y)
            scale = max(abs(x), abs(y))
            if diff > atol + rtol * scale:
                print(f"{new}: row {k + 2} column {c}: {a[i]} vs {b[j]} (relative {diff / scale:.3g})")
                ok = False
            if scale > 0:
                worst = max(worst, diff / scale)
        if worst > 0:
            print(f"  {os.path.basename(new)} {c}: worst relative difference {worst:.3g}")
    return ok


def main():
    p = argparse.ArgumentParser(usage="%(prog)s OLD_DIR NEW_DIR [--rtol R] [--atol A] [--ignore COL ...]",
                                description=__doc__.splitlines()[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--rtol", type=float, default=1e-12)
    p.add_argument("--atol", type=float, default=0.0)
    p.add_argument("--ignore", nargs="*", default=[])
    a = p.parse_args()
    ok = True
    found = False
    for name in sorted(os.listdir(a.old)):
        if not name.endswith(".csv"):
            continue
        other = os.path.join(a.new, name)
        if not os.path.exists(other):
            print(f"{other}: missing")
            ok = False
            continue
        found = True
        ok = compare(os.path.join(a.old, name), other, a.rtol, a.atol, set(a.ignore)) and ok
    if not found:
        print(f"{a.old}: no CSV tables", file=sys.stderr)
        sys.exit(2)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
