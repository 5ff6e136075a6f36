#!/usr/bin/python3
"""Plain numpy implementation of the Fig. 4-style sweep of favor_bench (output MSE only).

The grid of bench/favor_bench.cpp's fig4 sweep: L = 4096, d = d_v = 16, N(0, 1) inputs,
m in {16, 24, 35, 51, 75, 110, 161, 256} (16 * 2^(4k/7) rounded: 16..256 in 8 steps), 15 trials,
6 variants (trig, positive, hyperbolic, each iid and orthogonal), float64. Exact softmax attention once, then per (variant, m, trial):
draw W, feature maps (with the same max shifts as favor), linear attention, output MSE.
It uses numpy's own random generator (not favor's streams): the same amount and kind of work,
not the same numbers. Prints the wall time, for the speed ratio in docs/speed.md:

    /usr/bin/python3 scripts/numpy_fig4.py            # numpy with its BLAS' default threads
"""
import sys
import time

import numpy as np

USAGE = "usage: numpy_fig4.py   (no arguments; prints the MSE per (variant, m) and the wall time)"

L, D, DV = 4096, 16, 16
MS = [16, 24, 35, 51, 75, 110, 161, 256]
TRIALS = 15
VARIANTS = [(f, p) for f in ("trig", "positive", "hyperbolic") for p in ("iid", "orthogonal")]


def draw_w(rng, projection, m, d):
    if projection == "iid":
        return rng.standard_normal((m, d))
    blocks = []
    for _ in range((m + d - 1) // d):
        q, r = np.linalg.qr(rng.standard_normal((d, d)))
        q = q * np.sign(np.diag(r))          # Haar: columns times sign(diag R)
        blocks.append(q.T)
    w = np.concatenate(blocks, axis=0)[:m]
    norms = np.sqrt(rng.chisquare(d, size=m))  # chi(d) row norms
    return w * norms[:, None]


def features(kind, x, w, is_query):
    m = w.shape[0]
    p = x @ w.T
    x2 = 0.5 * np.sum(x * x, axis=1, keepdims=True)
    if kind == "trig":
        return np.concatenate([np.sin(p), np.cos(p)], axis=1) * (np.exp(x2) / np.sqrt(m))
    if kind == "positive":
        e = p - x2
    else:
        e = np.concatenate([p - x2, -p - x2], axis=1)
    shift = e.max(axis=1, keepdims=True) if is_query else e.max()
    return np.exp(e - shift) / np.sqrt(e.shape[1] if kind == "hyperbolic" else m)


def linear_attention(pq, pk, v):
    kv = pk.T @ np.concatenate([v, np.ones((v.shape[0], 1))], axis=1)
    num = pq @ kv
    return num[:, :-1] / num[:, -1:]


def main():
    if sys.argv[1:] in (["-h"], ["--help"]):
        print(USAGE)
        return
    if len(sys.argv) > 1:
        print(f"{USAGE}\nnumpy_fig4.py: takes no arguments, got '{sys.argv[1]}'", file=sys.stderr)
        sys.exit(2)
    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((L, D)) for _ in range(3))
    x, y = q / D ** 0.25, k / D ** 0.25
    s = x @ y.T
    a = np.exp(s - s.max(axis=1, keepdims=True))
    exact = (a @ v) / a.sum(axis=1, keepdims=True)
    del s, a
    mse = {}
    for kind, proj in VARIANTS:
        for m in MS:
            errs = []
            for _ in range(TRIALS):
                w = draw_w(rng, proj, m, D)
                out = linear_attention(features(kind, x, w, True), features(kind, y, w, False), v)
                errs.append(np.mean((exact - out) ** 2))
            mse[(kind, proj, m)] = np.mean(errs)
    wall = time.perf_counter() - t0
    for (kind, proj, m), e in mse.items():
        print(f"{kind}-{proj}\tm={m}\toutput_mse={e:.4g}")
    print(f"numpy wall time: {wall:.3f} s")


if __name__ == "__main__":
    main()
