#!/usr/bin/python3
"""Statistics of one attention head's Q and K: what makes its attention unlike the
near-uniform attention of isotropic random inputs.

    head_stats.py Q.npy K.npy [--causal] [--scale S] [--csv OUT.csv]

Q, K: (L, d), (H, L, d) or (B, H, L, d) arrays; one row of statistics per (batch, head).
The logits are s_ij = scale * q_i . k_j with scale 1/sqrt(d) by default (favor's exact
attention), over the keys row i sees (j <= i when causal). Columns:
  entropy        mean over rows of the row entropy -sum_j A_ij ln A_ij (nats)
  log_L          ln L, the entropy of uniform attention over L keys (the largest possible)
  entropy_ratio  entropy / log_L (causal: against the mean of ln(i + 1) instead, the
                 uniform entropy of the rows' own visible key counts)
  max_weight     mean over rows of max_j A_ij (the largest attention weight of a row)
  key_norm_spread  max_j |k_j| / median_j |k_j|
  logit_std      standard deviation of the visible logits s_ij
  erank_q, erank_k  effective rank exp(-sum p ln p), p the singular values of Q (or K)
                 divided by their sum (Roy and Vetterli 2007); d for isotropic inputs, 1 for
                 rank one.
  first_share    mean over rows of A_i0, the weight on the first key (what a sink token
                 would take exactly)
  local16, local64  mean over rows of sum_{i-w < j <= i} A_ij (w = 16, 64): the weight an
                 exact window of the last w keys up to the row's own would cover (non-causal:
                 the same keys, the ones after i not counted)
Used by scripts/train_tiny_lm.py (the data/README.md table) and scripts/fit_family.py.
"""
import argparse
import math
import sys

import numpy as np

COLUMNS = ("entropy", "log_L", "entropy_ratio", "max_weight", "key_norm_spread", "logit_std",
           "erank_q", "erank_k", "first_share", "local16", "local64")


def effective_rank(x):
    s = np.linalg.svd(np.asarray(x, dtype=np.float64), compute_uv=False)
    p = s / s.sum()
    p = p[p > 0]
    return float(np.exp(-(p * np.log(p)).sum()))


def head_stats(q, k, causal=False, scale=None):
    """Statistics of one head: q (L, d), k (Lk, d); returns a dict keyed by COLUMNS."""
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    L, d = q.shape
    Lk = k.shape[0]
    s = (q @ k.T) * (1.0 / math.sqrt(d) if scale is None else scale)
    visible = np.tril(np.ones((L, Lk), dtype=bool)) if causal else np.ones((L, Lk), dtype=bool)
    s_masked = np.where(visible, s, -np.inf)
    a = np.exp(s_masked - s_masked.max(axis=1, keepdims=True))
    a /= a.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(a > 0, a * np.log(a), 0.0).sum(axis=1)
    uniform = np.log(visible.sum(axis=1)).mean()
    norms = np.linalg.norm(k, axis=1)
    return {
        "entropy": float(h.mean()),
        "log_L": math.log(Lk),
        "entropy_ratio": float(h.mean() / uniform) if uniform > 0 else float("nan"),
        "max_weight": float(a.max(axis=1).mean()),
        "key_norm_spread": float(norms.max() / np.median(norms)),
        "logit_std": float(s[visible].std()),
        "erank_q": effective_rank(q),
        "erank_k": effective_rank(k),
        "first_share": float(a[:, 0].mean()),
        **{f"local{w}": float(window_share(a, w)) for w in (16, 64)},
    }


def window_share(a, w):
    """Mean over rows i of sum_{i-w < j <= i} a_ij (a: L x Lk attention rows)."""
    L, Lk = a.shape
    i, j = np.arange(L)[:, None], np.arange(Lk)[None, :]
    return np.where((j <= i) & (j > i - w), a, 0.0).sum(axis=1).mean()


def heads_of(x):
    """(L, d), (H, L, d) or (B, H, L, d) -> list of ((b, h), (L, d) array)."""
    x = np.asarray(x)
    if x.ndim == 2:
        return [((0, 0), x)]
    if x.ndim == 3:
        return [((0, h), x[h]) for h in range(x.shape[0])]
    if x.ndim == 4:
        return [((b, h), x[b, h]) for b in range(x.shape[0]) for h in range(x.shape[1])]
    raise ValueError(f"expected 2 to 4 dimensions, got shape {x.shape}")


def all_head_stats(q, k, causal=False, scale=None):
    """One dict per (batch, head), with keys batch and head added."""
    rows = []
    for ((b, h), qh), (_, kh) in zip(heads_of(q), heads_of(k)):
        r = {"batch": b, "head": h}
        r.update(head_stats(qh, kh, causal, scale))
        rows.append(r)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("q")
    ap.add_argument("k")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--scale", type=float, default=None, help="logit scale (default 1/sqrt(d))")
    ap.add_argument("--csv", default=None, help="also write the table to this CSV file")
    a = ap.parse_args(argv)
    q, k = np.load(a.q), np.load(a.k)
    if q.shape[:-2] != k.shape[:-2] or q.shape[-1] != k.shape[-1]:
        sys.exit(f"head_stats.py: {a.q} {q.shape} and {a.k} {k.shape} do not fit together")
    rows = all_head_stats(q, k, a.causal, a.scale)
    keys = ["batch", "head", *COLUMNS]
    lines = [",".join(keys)] + [",".join(f"{r[c]:.6g}" for c in keys) for r in rows]
    print("\n".join(lines))
    if a.csv:
        with open(a.csv, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
