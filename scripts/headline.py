#!/usr/bin/python3
"""A few lines about a favor result set, for scripts/run.sh: where it is, how many cells and
trials it holds, one line of headline numbers, and which files hold the full tables.

Usage: /usr/bin/python3 scripts/headline.py RESULT_DIR

Headline, by experiment kind (from RESULT_DIR/run.json):
  approximation  per variant, the mean over trials of output_rel_error (else output_mse,
                 else the first metric other than nonfinite, overflow_fraction, seconds) at the grid's last L, d and scale and the variant's
                 largest m (num_features with a num_features grid), then uniform
                 attention's on the same inputs;
                 per-head results are averaged over the heads.
  kernel         per variant, mse at the last d, the middle norm and angle of the grid and
                 the largest m.
  timing         per series, the median time at the largest L it ran, with its speedup over
                 exact attention.
Standard library only (csv, json), so it runs before numpy is installed.
"""
import csv
import json
import math
import os
import sys

USAGE = "usage: headline.py RESULT_DIR"


def rows_of(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(text):
    """A table cell as a number (None when empty)."""
    return float(text) if text not in ("", None) else None


def last(values):
    """The largest of a column's values, None when the column is empty (npy inputs: scale)."""
    present = [v for v in values if v is not None]
    return max(present) if present else None


def middle(values):
    """The middle of a column's distinct values (the lower one of an even count)."""
    distinct = sorted(set(values))
    return distinct[(len(distinct) - 1) // 2]


def fmt(x):
    if x is None:
        return "-"
    return str(int(x)) if math.isfinite(x) and x == int(x) and abs(x) < 1e7 else f"{x:.3g}"


def seconds(x):
    return f"{fmt(x)} s" if x >= 1 else f"{fmt(x * 1e3)} ms"


def approximation_line(rows, budget):
    # Else the first metric of an estimator's error or agreement (summary.csv's columns are in
    # the metric table's order, where nonfinite and overflow_fraction, counts of events, and
    # seconds come first or between).
    events = ("nonfinite", "overflow_fraction", "seconds")
    metric = next((m for m in ("output_rel_error", "output_mse") if f"{m}_mean" in rows[0]),
                  next((c[:-5] for c in rows[0] if c.endswith("_mean") and c[:-5] not in events),
                       next(c[:-5] for c in rows[0] if c.endswith("_mean"))))
    at = {k: last(num(r[k]) for r in rows) for k in ("L", "d", "scale")}
    here = [r for r in rows if all(num(r[k]) == v for k, v in at.items())]
    parts, baseline, budgets = [], [], set()
    for variant in dict.fromkeys(r["variant"] for r in here):
        mine = [r for r in here if r["variant"] == variant]
        top = last(num(r[budget]) for r in mine)
        cells = [r for r in mine if num(r[budget]) == top]
        values = [num(r[f"{metric}_mean"]) for r in cells]
        mean = None if None in values else sum(values) / len(values)
        parts.append((variant, mean, top))
        budgets.add(top)
        baseline += [num(r.get(f"baseline_{metric}")) for r in cells]
    heads = len({r.get("head") for r in here if r.get("head")})
    where = ", ".join(f"{k}={fmt(v)}" for k, v in at.items() if v is not None)
    if len(budgets) == 1:   # one budget for all: said once
        where += f", {budget}={fmt(budgets.pop())}"
        parts = [f"{v} {fmt(mean)}" for v, mean, _ in parts]
    else:
        parts = [f"{v} {fmt(mean)} ({budget} {fmt(top)})" for v, mean, top in parts]
    line = f"{metric} (mean over trials{f' and {heads} heads' if heads else ''}) at {where}: " + ", ".join(parts)
    baseline = [b for b in baseline if b is not None]
    if baseline:
        line += f"; uniform attention {fmt(sum(baseline) / len(baseline))}"
    return line


def kernel_line(rows):
    at = {"d": last(num(r["d"]) for r in rows),
          **{k: middle(num(r[k]) for r in rows) for k in ("norm", "angle")}}
    here = [r for r in rows if all(num(r[k]) == v for k, v in at.items())]
    parts = []
    for variant in dict.fromkeys(r["variant"] for r in here):
        mine = [r for r in here if r["variant"] == variant]
        top = max(mine, key=lambda r: num(r["m"]))
        parts.append(f"{variant} {fmt(num(top['mse']))} (m {top['m']})")
    where = ", ".join(f"{k}={fmt(v)}" for k, v in at.items())
    return f"kernel mse at {where} (sm = {fmt(num(here[0]['sm']))}): " + ", ".join(parts)


def timing_line(rows):
    series = {}
    for r in rows:
        if r["status"] == "ok":
            series[(r["variant"], r["d"], r["m"])] = r   # rows are L ascending inside a series
    parts = [f"{r['variant']} {seconds(num(r['median_s']))} at L={r['L']}"
             + (f" ({fmt(num(r['speedup_vs_exact']))}x exact)" if r["speedup_vs_exact"] and r["m"] else "")
             for r in series.values()]
    return "median time: " + ", ".join(parts)


def main(argv):
    if argv in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    if len(argv) != 1 or argv[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 2
    out = argv[0]
    try:
        with open(os.path.join(out, "run.json")) as f:
            run = json.load(f)
    except (OSError, ValueError) as e:
        print(f"headline.py: {out}/run.json: {e}", file=sys.stderr)
        return 2
    config, wall = run["config"], run.get("wall_seconds", 0)
    kind = config.get("experiment", "approximation")
    files = sorted(f for f in os.listdir(out) if not f.startswith("."))
    if kind == "timing":
        rows = rows_of(os.path.join(out, "timing.csv"))
        print(f"wrote {out}/ in {wall:.1f} s: {len(rows)} timed rows ({', '.join(files)})")
        print(timing_line(rows))
        print(f"full table: {out}/timing.md")
        return 0
    seeds = config.get("input_seeds")
    seeds = len(seeds) if isinstance(seeds, list) else (seeds or 1)
    count = f"{run['shard'].get('cells', '?')} {'cells' if kind == 'approximation' else '(norm, angle) points'}"
    count += f" x {seeds} input seeds" if seeds > 1 else ""
    print(f"wrote {out}/ in {wall:.1f} s: {count} x {config.get('trials')} trials ({', '.join(files)})")
    rows = rows_of(os.path.join(out, "summary.csv"))
    if kind == "approximation":
        print(approximation_line(rows, "num_features" if config.get("num_features") else "m"))
        print(f"full tables: {out}/summary.md, {out}/errors.csv; significance and ranking: "
              f"favor compare {out}")
    else:
        print(kernel_line(rows))
        print(f"full table: {out}/summary.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
