#!/usr/bin/env python3
"""numpy side of tests/cli/cli_metrics.sh: recompute favor's attention metrics from their definitions.

  metrics_numpy_check.py prepare DIR   writes DIR/heads/{q,k,v}.npy (a (2, 3, L, d) float64 multi-head
                                       set) and one config per case, DIR/cases/<case>.json; prints
                                       the trial indices the cases use (one per line)
  metrics_numpy_check.py check DIR     reads DIR/single/{q,k,v}.npy (`favor gen`), DIR/heads/*.npy,
                                       DIR/W<t>.npy (`favor projection ... --trial t`) and each run's
                                       DIR/runs/<case>/{errors,summary}.csv, and compares every
                                       number with a direct numpy computation

The numpy side uses no shifts and forms the L x L matrices (float64 is ample at these sizes):
x = q / d^(1/4), y = k / d^(1/4), A = softmax(x y^T) (row i sees j <= i when causal), A_hat the
row-normalised phi(x) phi(y)^T on the visible pairs, Out = A V, Out_hat = A_hat V. The baseline is
uniform attention, A_hat_ij = 1/n_i. Rows without "head" average every metric over the heads (KL
blank when it is blank for some head: the average of +inf is +inf); summary.csv adds the trial
statistics (std with n - 1, numpy's default linear quantiles) and the baseline columns.

Numbers must agree to relative 1e-9 (absolute 1e-12 near 0). Exit status 0 when everything
matches; otherwise the first mismatch (file, row, column, both values) and a count on stderr.
"""
import csv
import json
import os
import sys

try:
    import numpy as np
except ImportError:
    sys.exit("metrics_numpy_check.py: numpy is required (use /usr/bin/python3 or install python3-numpy)")

SEED, M, D = 3, 12, 8
HEADS_SHAPE = (2, 3)            # batch x heads of the multi-head set
HEADS_L, HEADS_DV = 40, 4
# Per-head input scales: the small ones keep trig's A_hat positive, so its KL is defined on some
# heads only; the others make it undefined.
HEAD_SCALES = np.array([[1.0, 0.6, 1.2], [0.8, 0.05, 1.0]])
METRICS = ["output_mse", "output_rel_error", "attention_mse", "attention_tv", "attention_kl", "negative_fraction"]
COLUMNS = METRICS + ["nonfinite"]
BASELINE = ["output_mse", "output_rel_error", "attention_mse", "attention_tv", "attention_kl"]
VARIANTS = [  # name, features, A (oprf only)
    ("positive-orthogonal", "positive", None),
    ("hyperbolic-orthogonal", "hyperbolic", None),
    ("trig-orthogonal", "trig", None),
    ("oprf-orthogonal", "oprf", -0.1),
]
# case: inputs ("single" = favor gen, "heads" = the multi-head set), causal, per_head, trials.
# Two trials make the median equal the mean; the 3-trial case tells them apart.
CASES = {
    "single": ("single", False, False, 2),
    "single_causal": ("single", True, False, 2),
    "heads_per_head": ("heads", False, True, 2),
    "heads_mean": ("heads", False, False, 3),
    "heads_per_head_causal": ("heads", True, True, 2),
    "heads_mean_causal": ("heads", True, False, 2),
}
RTOL, ATOL = 1e-9, 1e-12


def prepare(top):
    rng = np.random.default_rng(20261121)
    os.makedirs(os.path.join(top, "heads"), exist_ok=True)
    os.makedirs(os.path.join(top, "cases"), exist_ok=True)
    s = HEAD_SCALES[:, :, None, None]
    q = rng.standard_normal(HEADS_SHAPE + (HEADS_L, D)) * s
    k = rng.standard_normal(HEADS_SHAPE + (HEADS_L, D)) * s
    v = rng.standard_normal(HEADS_SHAPE + (HEADS_L, HEADS_DV))
    for name, a in (("q", q), ("k", k), ("v", v)):
        np.save(os.path.join(top, "heads", name + ".npy"), a.astype(np.float64))
    variants = []
    for name, features, A in VARIANTS:
        var = {"name": name, "features": features, "projection": "orthogonal"}
        if A is not None:
            var["A"] = A
        variants.append(var)
    for case, (inputs, causal, per_head, trials) in CASES.items():
        folder = os.path.abspath(os.path.join(top, inputs))
        cfg = {"name": case, "seed": SEED, "m": M, "trials": trials, "causal": causal, "metrics": METRICS,
               "variants": variants,
               "inputs": {"source": "npy", "per_head": per_head,
                          **{n: os.path.join(folder, n + ".npy") for n in ("q", "k", "v")}}}
        write_case(top, case, cfg)
    return print_trials(max(c[3] for c in CASES.values()))


def write_case(top, case, cfg):
    with open(os.path.join(top, "cases", case + ".json"), "w") as f:
        json.dump(cfg, f, indent=1)


def print_trials(trials):
    """prepare's output: the trial indices (one per line) whose W the check reads."""
    for t in range(trials):
        print(t)
    return 0


# ---------------------------------------------------------------------------------------------
# The definitions, directly.

def features(kind, z, W, A):
    m, d = W.shape
    P = z @ W.T
    half = 0.5 * (z * z).sum(1, keepdims=True)
    if kind == "positive":
        return np.exp(P - half) / np.sqrt(m)
    if kind == "hyperbolic":
        return np.hstack([np.exp(P), np.exp(-P)]) * np.exp(-half) / np.sqrt(2 * m)
    if kind == "trig":
        return np.exp(half) * np.hstack([np.sin(P), np.cos(P)]) / np.sqrt(m)
    if kind == "oprf":
        w2 = (W * W).sum(1)[None, :]
        return (1 - 4 * A) ** (d / 4) * np.exp(A * w2 + np.sqrt(1 - 4 * A) * P - half) / np.sqrt(m)
    raise ValueError(kind)


def num_features(kind, m):
    return 2 * m if kind in ("trig", "hyperbolic") else m


def visible(L, Lk, causal):
    return np.tril(np.ones((L, Lk), dtype=bool)) if causal else np.ones((L, Lk), dtype=bool)


def attention_metrics(A, Ah, mask, V):
    """Every metric of one head from the exact A and the estimate Ah (zero off the mask)."""
    out, out_h = A @ V, Ah @ V
    r = {}
    r["output_mse"] = float(np.mean((out - out_h) ** 2))
    r["output_rel_error"] = float(np.linalg.norm(out - out_h) / np.linalg.norm(out))
    diff = (A - Ah)[mask]
    r["attention_mse"] = float(np.mean(diff ** 2))
    r["attention_tv"] = float(np.mean(0.5 * np.abs(A - Ah).sum(1)))
    if np.all(Ah[mask] > 0):
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(mask, A * np.log(A / np.where(mask, Ah, 1.0)), 0.0)
        r["attention_kl"] = float(np.mean(terms.sum(1)))
    else:
        r["attention_kl"] = None
    r["negative_fraction"] = float(np.count_nonzero(Ah[mask] < 0) / np.count_nonzero(mask))
    r["nonfinite"] = float(np.count_nonzero(~np.isfinite(out_h)))
    return r


def exact_attention(q, k, causal):
    d = q.shape[1]
    x, y = q / d ** 0.25, k / d ** 0.25
    mask = visible(q.shape[0], k.shape[0], causal)
    S = np.where(mask, np.exp(x @ y.T), 0.0)
    return x, y, mask, S / S.sum(1, keepdims=True)


def head_values(q, k, v, kind, W, A_oprf, causal):
    x, y, mask, A = exact_attention(q, k, causal)
    K = np.where(mask, features(kind, x, W, A_oprf) @ features(kind, y, W, A_oprf).T, 0.0)
    return attention_metrics(A, K / K.sum(1, keepdims=True), mask, v)


def head_baseline(q, k, v, causal):
    _, _, mask, A = exact_attention(q, k, causal)
    U = mask / mask.sum(1, keepdims=True)          # uniform over the visible keys
    r = attention_metrics(A, U, mask, v)
    # Out_hat of the baseline is the (cumulative, when causal) mean of V: the same thing.
    want = np.cumsum(v, 0) / np.arange(1, len(v) + 1)[:, None] if causal else np.broadcast_to(v.mean(0), v.shape)
    assert np.allclose(U @ v, want, rtol=1e-13, atol=1e-15)
    return {c: r[c] for c in BASELINE}


def combine(heads, columns):
    """The row of a multi-head run without per_head: means over heads (nonfinite summed)."""
    out = {}
    for c in columns:
        vals = [h[c] for h in heads]
        if any(x is None for x in vals):
            out[c] = None
        elif c == "nonfinite":
            out[c] = float(sum(vals))
        else:
            out[c] = float(np.mean(vals))
    return out


def load_inputs(top, inputs):
    q, k, v = (np.load(os.path.join(top, inputs, n + ".npy")) for n in ("q", "k", "v"))
    assert q.dtype == np.float64, q.dtype
    d = q.shape[-1]
    lead = q.shape[:-2]
    q, k, v = (a.reshape((-1,) + a.shape[-2:]) for a in (q, k, v))
    return q, k, v, d, lead


# ---------------------------------------------------------------------------------------------
# Comparison.

class Checker:
    def __init__(self):
        self.failures = []
        self.compared = 0

    def fail(self, where, msg):
        self.failures.append("%s: %s" % (where, msg))

    def number(self, where, got_text, want):
        """A CSV cell against a value (None = blank)."""
        self.compared += 1
        if want is None:
            if got_text != "":
                self.fail(where, "favor %r, numpy blank" % got_text)
            return
        if got_text == "":
            self.fail(where, "favor blank, numpy %r" % want)
            return
        got = float(got_text)
        if not np.isfinite(want) or not np.isfinite(got):
            if not (got == want or (np.isnan(got) and np.isnan(want))):
                self.fail(where, "favor %r, numpy %r" % (got, want))
            return
        if abs(got - want) > max(RTOL * max(abs(got), abs(want)), ATOL):
            rel = abs(got - want) / max(abs(want), 1e-300)
            self.fail(where, "favor %r, numpy %r (rel. diff %.3g)" % (got, want, rel))

    def report(self, prog, ok_line):
        """Exit status: 0 and ok_line when every cell matched, else 1 and the first mismatches."""
        if not self.failures:
            print("%s: %s" % (prog, ok_line))
            return 0
        print("%s: FIRST MISMATCH %s" % (prog, self.failures[0]), file=sys.stderr)
        for msg in self.failures[1:10]:
            print("%s: also %s" % (prog, msg), file=sys.stderr)
        print("%s: %d of %d cells differ" % (prog, len(self.failures), self.compared), file=sys.stderr)
        return 1

    def text(self, where, got, want):
        self.compared += 1
        if got != want:
            self.fail(where, "favor %r, expected %r" % (got, want))


def read_csv(path):
    with open(path, newline="") as f:
        r = csv.reader(f)
        header = next(r)
        return header, [row for row in r]


def trial_stats(values):
    """mean, std, sem, median, p10, p90 of the non-blank values; blanks when there are none."""
    xs = np.array([x for x in values if x is not None])
    if xs.size == 0:
        return [None] * 6
    std = float(np.std(xs, ddof=1)) if xs.size > 1 else float("nan")
    sem = std / np.sqrt(xs.size) if xs.size > 1 else float("nan")
    return [float(np.mean(xs)), std, sem, float(np.median(xs)), float(np.quantile(xs, 0.1)),
            float(np.quantile(xs, 0.9))]


def check_case(top, case, chk, Ws, stats):
    inputs, causal, per_head, trials = CASES[case]
    q, k, v, d, lead = load_inputs(top, inputs)
    H = q.shape[0]
    L = q.shape[1]
    rundir = os.path.join(top, "runs", case)

    # Expected errors.csv rows, in favor's order: variant, trial, head.
    key_cols = ["variant", "features", "projection", "L", "d", "m", "num_features", "scale"]
    want_cols = key_cols + (["head"] if per_head else []) + ["trial", "seed"] + COLUMNS
    expected = []          # (keys dict, values dict)
    for name, kind, A_oprf in VARIANTS:
        for t in range(trials):
            heads = [head_values(q[h], k[h], v[h], kind, Ws[t], A_oprf, causal) for h in range(H)]
            rows = list(enumerate(heads)) if per_head else [(None, combine(heads, COLUMNS))]
            for h, vals in rows:
                keys = {"variant": name, "features": kind, "projection": "orthogonal", "L": str(L), "d": str(d),
                        "m": str(M), "num_features": str(num_features(kind, M)), "scale": "", "trial": str(t),
                        "seed": str(SEED)}
                if per_head:
                    keys["head"] = str(h)
                expected.append((keys, vals))
                for h_vals in (heads if not per_head else [vals]):
                    kl = h_vals["attention_kl"]
                    stats["kl_defined" if kl is not None else "kl_blank"].add(kind)

    path = os.path.join(rundir, "errors.csv")
    fname = "%s/errors.csv" % case
    header, rows = read_csv(path)
    if header != want_cols:
        chk.fail(fname, "header %s, expected %s" % (header, want_cols))
        return
    if len(rows) != len(expected):
        chk.fail(fname, "%d rows, expected %d" % (len(rows), len(expected)))
        return
    col = {c: i for i, c in enumerate(header)}
    for n, (row, (keys, vals)) in enumerate(zip(rows, expected), start=2):
        for c, w in keys.items():
            chk.text("%s line %d column %s" % (fname, n, c), row[col[c]], w)
        for c in COLUMNS:
            chk.number("%s line %d (%s) column %s" % (fname, n, describe_keys(keys), c), row[col[c]], vals[c])

    # Expected summary.csv: one row per (variant[, head]), baselines joined on (L, d, scale[, head]).
    base_heads = [head_baseline(q[h], k[h], v[h], causal) for h in range(H)]
    baselines = base_heads if per_head else [combine(base_heads, BASELINE)]
    group_keys = key_cols + (["head"] if per_head else [])
    want_cols = group_keys + ["trials"]
    for c in COLUMNS:
        want_cols += [c + s for s in ("_mean", "_std", "_sem", "_median", "_p10", "_p90")]
    want_cols += ["baseline_" + c for c in BASELINE]
    groups = {}
    for keys, vals in expected:
        groups.setdefault(tuple(keys[c] for c in group_keys), []).append(vals)
    fname = "%s/summary.csv" % case
    header, rows = read_csv(os.path.join(rundir, "summary.csv"))
    if header != want_cols:
        chk.fail(fname, "header %s, expected %s" % (header, want_cols))
        return
    if len(rows) != len(groups):
        chk.fail(fname, "%d rows, expected %d" % (len(rows), len(groups)))
        return
    col = {c: i for i, c in enumerate(header)}
    for n, (row, (gkey, vals)) in enumerate(zip(rows, groups.items()), start=2):
        keys = dict(zip(group_keys, gkey))
        for c, w in keys.items():
            chk.text("%s line %d column %s" % (fname, n, c), row[col[c]], w)
        chk.text("%s line %d column trials" % (fname, n), row[col["trials"]], str(len(vals)))
        where = "%s line %d (%s)" % (fname, n, describe_keys(keys))
        for c in COLUMNS:
            for s, w in zip(("_mean", "_std", "_sem", "_median", "_p10", "_p90"), trial_stats([x[c] for x in vals])):
                chk.number("%s column %s" % (where, c + s), row[col[c + s]], w)
        base = baselines[int(keys["head"])] if per_head else baselines[0]
        for c in BASELINE:
            chk.number("%s column baseline_%s" % (where, c), row[col["baseline_" + c]], base[c])
    stats["cases"] += 1
    stats["rows"] += len(expected)


def describe_keys(keys):
    s = "%s" % keys["variant"]
    if "trial" in keys:
        s += " trial %s" % keys["trial"]
    if "head" in keys:
        s += " head %s" % keys["head"]
    return s


def check(top):
    trials = max(c[3] for c in CASES.values())
    Ws = [np.load(os.path.join(top, "W%d.npy" % t)) for t in range(trials)]
    for W in Ws:
        assert W.shape == (M, D) and W.dtype == np.float64, (W.shape, W.dtype)
    chk = Checker()
    stats = {"cases": 0, "rows": 0, "kl_defined": set(), "kl_blank": set()}
    for case in CASES:
        check_case(top, case, chk, Ws, stats)
    # The test must exercise both sides of the KL rule: defined for the positive maps, blank for
    # trig on the heads whose A_hat has entries <= 0.
    for kind in ("positive", "hyperbolic", "oprf"):
        if kind not in stats["kl_defined"] or kind in stats["kl_blank"]:
            chk.fail("coverage", "attention_kl of %s should be defined everywhere" % kind)
    if "trig" not in stats["kl_blank"]:
        chk.fail("coverage", "no trig case with a blank attention_kl")
    return chk.report("metrics_numpy_check.py", "%d cases, %d errors.csv rows, %d cells match numpy (trig KL defined on %s)"
                      % (stats["cases"], stats["rows"], chk.compared,
                         "some heads" if "trig" in stats["kl_defined"] else "no head"))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("prepare", "check"):
        sys.exit("usage: metrics_numpy_check.py prepare|check DIR")
    sys.exit(prepare(sys.argv[2]) if sys.argv[1] == "prepare" else check(sys.argv[2]))
