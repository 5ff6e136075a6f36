#!/usr/bin/env python3
"""numpy side of tests/cli/cli_metrics.sh, beside metrics_numpy_check.py: favor run's metrics with keys longer than the queries
(Lk != L: cross-attention, a cache), with inputs.L, and row-sampled (query_rows), recomputed from
their definitions (docs/design.md sections 3, 3.1 and 5).

  metrics_numpy_lk_check.py prepare DIR   writes DIR/cross/{q,k,v,G}.npy (q (2, 24, 8), k and v
                                          of Lk = 40 rows, G the upstream gradient),
                                          DIR/self/ (L = Lk = 40), DIR/short/ (L = 40, Lk = 16) and
                                          one config per case, DIR/cases/<case>.json; prints the
                                          trial indices the cases use (one per line)
  metrics_numpy_lk_check.py check DIR     reads those, DIR/W<t>.npy (`favor projection`) and each
                                          run's DIR/runs/<case>/{errors,summary}.csv, and compares
                                          every cell with numpy

What numpy computes (the formulas of metrics_numpy_check.py, which this imports: no shifts, the
L x Lk matrices in float64): a problem of L query rows takes q's first L rows and, for
self-attention files (Lk = L in the files), the first L keys and values; other files keep every
key (design.md 5, inputs.L). Row-sampled problems (L > query_rows = N) are evaluated on the rows
favor's row draw gives, re-derived here from its specification (design.md 3.1 and 7: SplitMix64
stream keys, uniform_at; non-causal the N rows of smallest uniform, causal one uniform row per
stratum): each metric the metric of those rows, its `_row_sem` the delete-a-group jackknife of
3.1 (G = N groups of one row here), the uniform-attention baseline the same on those rows.
Numbers agree to relative 1e-9 (row SEMs 1e-7: their pseudo-values cancel), absolute 1e-12.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts")]
import metrics_numpy_check as base  # noqa: E402  (the definitions and the cell comparison)
from golden_values import stream_key, tag, uniform_at  # noqa: E402  (rng.hpp's streams)

np = base.np
SEED, M, D, DV = base.SEED, base.M, base.D, 5
HEADS = 2
CROSS_L, CROSS_LK, SELF_L, SHORT_LK = 24, 40, 40, 16
FULL = base.METRICS
OUT = ["output_mse", "output_rel_error"]
GRADS = ["grad_q_rel_error", "grad_k_rel_error", "grad_v_rel_error", "grad_cosine"]
# case: inputs, causal, per_head, trials, inputs.L (None: the files' length), query_rows, metrics.
CASES = {
    "cross": ("cross", False, False, 2, None, None, FULL),
    "cross_L_per_head": ("cross", False, True, 2, [16, 24], None, FULL),
    "self_L": ("self", False, True, 2, [16], None, FULL),
    "self_L_causal": ("self", True, False, 2, [24], None, FULL),
    "cross_rows_output": ("cross", False, False, 3, None, 10, OUT),
    "cross_rows_all": ("cross", False, True, 2, None, 10, FULL),
    "self_rows_output": ("self", False, False, 2, None, 12, OUT),
    "self_rows_output_causal": ("self", True, True, 2, [24, 40], 12, OUT),
    "cross_grad": ("cross", False, False, 2, [16, 24], None, ["output_mse"] + GRADS),   # with inputs.grad
    "short_L": ("short", False, False, 2, [24, 40], None, FULL),   # fewer keys than queries, at every L
}
RTOL_GRAD = 1e-6   # the estimator's dQ, dK by central differences (step 1e-5: errors ~1e-10)
RTOL_SEM = 1e-7
STATS = ("_mean", "_std", "_sem", "_median", "_p10", "_p90")


# ---------------------------------------------------------------------------------------------
# favor's row draw (lib/src/metrics/row_sample.cpp) from its specification (design.md 3.1, 7), on the
# stream functions scripts/golden_values.py re-derives independently (rng.hpp).

def query_rows(L, N, causal):
    """favor's sampled rows (input seed 0: npy inputs), and whether they are stratified."""
    if N >= L:
        return list(range(L)), False
    key = stream_key([SEED, tag("query-rows"), L, N])
    if causal:
        return [k * L // N + min((k + 1) * L // N - k * L // N - 1,
                                 int(uniform_at(key, k) * ((k + 1) * L // N - k * L // N))) for k in range(N)], True
    u = sorted((uniform_at(key, i), i) for i in range(L))
    return sorted(i for _, i in u[:N]), False


def row_sem(full, deleted, N, L, stratified):
    """The jackknife standard error of design.md 3.1 (sets of 8 groups when stratified)."""
    if N >= L:
        return 0.0
    G = len(deleted)
    p = G * full - (G - 1) * np.array(deleted)

    def collapsed(x):
        return len(x) / (len(x) - 1) * float(((x - x.mean()) ** 2).sum())
    if not stratified:
        var = collapsed(p) / G / G
    else:
        var, g = 0.0, 0
        while g < G:
            k = G - g if G - g < 16 else 8
            var += collapsed(p[g:g + k])
            g += k
        var /= G * G
    return float(np.sqrt((1 - N / L) * var))


# ---------------------------------------------------------------------------------------------

def prepare(top):
    rng = np.random.default_rng(20261127)
    scales = np.array([1.0, 0.7])[:, None, None]
    sets = {"cross": (CROSS_L, CROSS_LK), "self": (SELF_L, SELF_L), "short": (SELF_L, SHORT_LK)}
    for name, (L, Lk) in sets.items():
        os.makedirs(os.path.join(top, name), exist_ok=True)
        arrays = {"q": rng.standard_normal((HEADS, L, D)) * scales, "k": rng.standard_normal((HEADS, Lk, D)) * scales,
                  "v": rng.standard_normal((HEADS, Lk, DV))}
        arrays["G"] = rng.standard_normal((HEADS, L, DV))   # inputs.grad: the output's shape
        for n, a in arrays.items():
            np.save(os.path.join(top, name, n + ".npy"), a)
    os.makedirs(os.path.join(top, "cases"), exist_ok=True)
    variants = [dict({"name": n, "features": f, "projection": "orthogonal"}, **({"A": A} if A is not None else {}))
                for n, f, A in base.VARIANTS]
    for case, (inputs, causal, per_head, trials, Ls, N, metrics) in CASES.items():
        folder = os.path.abspath(os.path.join(top, inputs))
        ins = {"source": "npy", "per_head": per_head, **{n: os.path.join(folder, n + ".npy") for n in ("q", "k", "v")}}
        if Ls:
            ins["L"] = Ls
        if any(c in GRADS for c in metrics):
            ins["grad"] = os.path.join(folder, "G.npy")
        cfg = {"name": case, "seed": SEED, "m": M, "trials": trials, "causal": causal, "metrics": metrics,
               "variants": variants, "inputs": ins}
        if N:
            cfg["query_rows"] = N
        base.write_case(top, case, cfg)
    return base.print_trials(max(c[3] for c in CASES.values()))


def exact_grads(q, k, v, G):
    """Exact attention's dQ, dK, dV for the upstream gradient G (non-causal; design.md 2.7)."""
    A = base.exact_attention(q, k, False)[3]
    dA = G @ v.T
    dS = A * (dA - (dA * A).sum(1, keepdims=True))
    return dS @ k / np.sqrt(q.shape[1]), dS.T @ q / np.sqrt(q.shape[1]), A.T @ G


def estimator_grads(q, k, v, G, kind, W, A_oprf, h=1e-5):
    """The estimator's: dV = A_hat^T G, dQ and dK by central differences of sum(G * A_hat V)."""
    def A_hat(qq, kk):
        s = qq.shape[1] ** -0.25
        K = base.features(kind, qq * s, W, A_oprf) @ base.features(kind, kk * s, W, A_oprf).T
        return K / K.sum(1, keepdims=True)

    def diff(x, loss):
        g = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            e = np.zeros_like(x)
            e[i] = h
            g[i] = (loss(x + e) - loss(x - e)) / (2 * h)
        return g
    dq = diff(q, lambda x: float((G * (A_hat(x, k) @ v)).sum()))
    dk = diff(k, lambda x: float((G * (A_hat(q, x) @ v)).sum()))
    return dq, dk, A_hat(q, k).T @ G


def grad_metrics(g, gh, columns):
    """grad_{q,k,v}_rel_error and grad_cosine of the gradients gh against g (section 3)."""
    r = {c: float(np.linalg.norm(a - b) / np.linalg.norm(a)) for c, a, b in zip(GRADS[:3], g, gh)}
    flat, flat_h = np.concatenate([a.ravel() for a in g]), np.concatenate([a.ravel() for a in gh])
    norm_h = np.linalg.norm(flat_h)
    r["grad_cosine"] = float(flat @ flat_h / (np.linalg.norm(flat) * norm_h)) if norm_h > 0 else 0.0
    return {c: r[c] for c in columns if c in GRADS}


def metrics_of(A, Ah, mask, v, rows, columns):
    """The metrics of the query rows `rows` (A, Ah, mask: all rows)."""
    r = base.attention_metrics(A[rows], Ah[rows], mask[rows], v)
    return {c: r[c] for c in columns}


def sampled(A, Ah, mask, v, L, N, causal, columns, sem_columns):
    """Row-sampled metrics and their _row_sem (N >= L: every row, SEM 0)."""
    rows, strat = query_rows(L, N, causal) if N else (list(range(L)), False)
    full = metrics_of(A, Ah, mask, v, rows, columns)
    if N:
        deleted = [metrics_of(A, Ah, mask, v, rows[:g] + rows[g + 1:], sem_columns) for g in range(len(rows))]
        for c in sem_columns:
            undefined = full[c] is None or any(x[c] is None for x in deleted)
            full[c + "_row_sem"] = None if undefined else row_sem(full[c], [x[c] for x in deleted], len(rows), L, strat)
    return full


def problem(q, k, v, L, Ls_set):
    """The problem at L: q's first L rows; k, v cut too only for self-attention files."""
    Lk = (L if k.shape[0] == q.shape[0] else k.shape[0]) if Ls_set else k.shape[0]
    return q[:L], k[:Lk], v[:Lk]


def check_case(top, case, chk, Ws, stats):
    inputs, causal, per_head, trials, Ls, N, metrics = CASES[case]
    q_all, k_all, v_all, d, _ = base.load_inputs(top, inputs)
    grads = [c for c in metrics if c in GRADS]
    G_all = np.load(os.path.join(top, inputs, "G.npy")).reshape(q_all.shape[:2] + (DV,)) if grads else None
    plain = [c for c in metrics if c not in GRADS]
    columns = plain + ["nonfinite"] + grads   # the metric table's order
    sem_cols = plain if N else []
    base_cols = [c for c in base.BASELINE if c in metrics] + grads
    base_sem = list(base_cols) if N else []
    H = q_all.shape[0]
    Lgrid = Ls or [q_all.shape[1]]
    key_cols = ["variant", "features", "projection", "L", "d", "m", "num_features", "scale"]
    err_cols = columns + [c + "_row_sem" for c in sem_cols]
    expected, baselines = [], {}
    for L in Lgrid:
        per = []
        for h in range(H):
            q, k, v = problem(q_all[h], k_all[h], v_all[h], L, bool(Ls))
            _, _, mask, A = base.exact_attention(q, k, causal)
            U = mask / mask.sum(1, keepdims=True)
            per.append(sampled(A, U, mask, v, L, N, causal, [c for c in base_cols if c not in GRADS], base_sem))
            if grads:   # uniform attention: dQ = dK = 0, dV = U^T G
                g = exact_grads(q, k, v, G_all[h][:L])
                per[-1].update(grad_metrics(g, (0 * g[0], 0 * g[1], U.T @ G_all[h][:L]), grads))
        names = base_cols + [c + "_row_sem" for c in base_sem]
        baselines[str(L)] = per if per_head else [base.combine(per, names)]
    for name, kind, A_oprf in base.VARIANTS:
        for L in Lgrid:
            for t in range(trials):
                heads = []
                for h in range(H):
                    q, k, v = problem(q_all[h], k_all[h], v_all[h], L, bool(Ls))
                    x, y, mask, A = base.exact_attention(q, k, causal)
                    K = np.where(mask, base.features(kind, x, Ws[t], A_oprf) @ base.features(kind, y, Ws[t], A_oprf).T, 0.0)
                    heads.append(sampled(A, K / K.sum(1, keepdims=True), mask, v, L, N, causal, plain + ["nonfinite"],
                                         sem_cols))
                    if grads:
                        G = G_all[h][:L]
                        heads[-1].update(grad_metrics(exact_grads(q, k, v, G),
                                                      estimator_grads(q, k, v, G, kind, Ws[t], A_oprf), grads))
                    stats["keys"].add((case, L, k.shape[0]))
                rows = list(enumerate(heads)) if per_head else [(None, base.combine(heads, err_cols))]
                for h, vals in rows:
                    keys = {"variant": name, "features": kind, "projection": "orthogonal", "L": str(L), "d": str(d),
                            "m": str(M), "num_features": str(base.num_features(kind, M)), "scale": ""}
                    if per_head:
                        keys["head"] = str(h)
                    keys.update({"trial": str(t), "seed": str(SEED)})
                    expected.append((keys, vals))
    group_keys = key_cols + (["head"] if per_head else [])
    fname = "%s/errors.csv" % case
    if not os.path.isfile(os.path.join(top, "runs", case, "summary.csv")):
        chk.fail(case, "no result set (the run failed)")
        return
    header, rows = base.read_csv(os.path.join(top, "runs", case, "errors.csv"))
    want = group_keys + ["trial", "seed"] + err_cols
    if header != want or len(rows) != len(expected):
        chk.fail(fname, "header %s with %d rows, expected %s with %d" % (header, len(rows), want, len(expected)))
        return
    col = {c: i for i, c in enumerate(header)}
    for n, (row, (keys, vals)) in enumerate(zip(rows, expected), start=2):
        for c, w in keys.items():
            chk.text("%s line %d column %s" % (fname, n, c), row[col[c]], w)
        for c in err_cols:
            number(chk, "%s line %d (%s L %s) column %s" % (fname, n, base.describe_keys(keys), keys["L"], c),
                   row[col[c]], vals[c], c)
    groups = {}
    for keys, vals in expected:
        groups.setdefault(tuple(keys[c] for c in group_keys), []).append(vals)
    stat_cols = columns
    want = group_keys + ["trials"] + [c + s for c in stat_cols for s in STATS] + \
        [c + "_row_sem" for c in sem_cols] + ["baseline_" + c for c in base_cols] + \
        ["baseline_" + c + "_row_sem" for c in base_sem]
    fname = "%s/summary.csv" % case
    header, rows = base.read_csv(os.path.join(top, "runs", case, "summary.csv"))
    if header != want or len(rows) != len(groups):
        chk.fail(fname, "header %s with %d rows, expected %s with %d" % (header, len(rows), want, len(groups)))
        return
    col = {c: i for i, c in enumerate(header)}
    for n, (row, (gkey, vals)) in enumerate(zip(rows, groups.items()), start=2):
        keys = dict(zip(group_keys, gkey))
        where = "%s line %d (%s L %s)" % (fname, n, base.describe_keys(keys), keys["L"])
        for c, w in keys.items():
            chk.text("%s column %s" % (where, c), row[col[c]], w)
        for c in stat_cols:
            for s, w in zip(STATS, base.trial_stats([x[c] for x in vals])):
                number(chk, "%s column %s" % (where, c + s), row[col[c + s]], w, c)
        for c in sem_cols:
            sems = [x[c + "_row_sem"] for x in vals]
            number(chk, "%s column %s_row_sem" % (where, c), row[col[c + "_row_sem"]],
                   None if None in sems else float(np.mean(sems)), c + "_row_sem")
        bl = baselines[keys["L"]][int(keys["head"]) if per_head else 0]
        for c in base_cols + [c + "_row_sem" for c in base_sem]:
            number(chk, "%s column baseline_%s" % (where, c), row[col["baseline_" + c]], bl[c], c)
            if bl[c] is None or not np.isfinite(bl[c]):
                chk.fail(where, "numpy's baseline_%s is not finite" % c)
    stats["cases"] += 1
    stats["rows"] += len(expected)


def number(chk, where, got, want, column):
    """A cell; row SEMs to RTOL_SEM (their pseudo-values G theta - (G - 1) theta_(g) cancel),
    the estimators' gradient metrics to RTOL_GRAD (numpy's central differences)."""
    rtol = RTOL_SEM if column.endswith("_row_sem") else RTOL_GRAD if column in GRADS else None
    if rtol:
        rtol, base.RTOL = base.RTOL, rtol
        try:
            chk.number(where, got, want)
        finally:
            base.RTOL = rtol
    else:
        chk.number(where, got, want)


def check(top):
    trials = max(c[3] for c in CASES.values())
    Ws = [np.load(os.path.join(top, "W%d.npy" % t)) for t in range(trials)]
    chk = base.Checker()
    stats = {"cases": 0, "rows": 0, "keys": set()}
    for case in CASES:
        check_case(top, case, chk, Ws, stats)
    # Coverage: keys longer than the queries with and without inputs.L, and cut with them.
    for want in (("cross", CROSS_L, CROSS_LK), ("cross_L_per_head", 16, CROSS_LK), ("self_L", 16, 16),
                 ("short_L", 24, SHORT_LK)):
        if want not in stats["keys"]:
            chk.fail("coverage", "no problem (case, L, Lk) = %s" % (want,))
    return chk.report("metrics_numpy_lk_check.py", "%d cases, %d errors.csv rows, %d cells match numpy"
                      % (stats["cases"], stats["rows"], chk.compared))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("prepare", "check"):
        sys.exit("usage: metrics_numpy_lk_check.py prepare|check DIR")
    sys.exit(prepare(sys.argv[2]) if sys.argv[1] == "prepare" else check(sys.argv[2]))
