#!/usr/bin/python3
"""Fit favor's input family (docs/input_families.md) to a captured attention head.

    fit_family.py Q.npy K.npy [--batch B --head H | --all] [--rope-base B [--rope-layout half]]
                  [--causal] [--L N] [--seed S] [--m M] [--config OUT.json] [--json OUT.json]

Q, K: (L, d), (H, L, d) or (B, H, L, d) as captured (after RoPE). For each chosen head the
family's parameters are read off the head (after undoing RoPE when --rope-base is given: the
family applies RoPE last, as the model does):
  scale, key_scale  sqrt(trace(cov Q) / d), sqrt(trace(cov K) / d) / scale
  offset_q/k        |mean row| / scale (keys / (scale key_scale)), the noise E|mean - mu|^2 =
                    trace(cov) / L subtracted; offset_cos the cosine of the two means
  decay_q/k         the exponent alpha of eigenvalues (i+1)^-alpha whose sample at this L has
                    the head's effective rank (scripts/head_stats.py's erank, of the centred
                    rows): bisection on a seeded Gaussian sample, so the finite-L bias of the
                    sample spectrum is matched, not ignored
  key_norm_sigma    sqrt(Var log|k_i - mean| - the same variance of the sample without the
                    log-normal factor): the factor's log adds its variance sigma^2
  shared_basis      whether the cosine of the covariances of Q and K, tr(C_q C_k) /
                    (|C_q| |C_k|), is nearer the model's with one basis or with two
Standard errors come from a parametric bootstrap (refits of --boot samples drawn from the
fitted model). Prints one line per head; --config writes a favor config whose random inputs
are the twin of the first chosen head at --L (default the head's L), --json the fits.
  cluster_spread    with --key-clusters n only: k-means, then s^2 = r c / (1 + r c) from the
                    within / between sum of squares r and c = 1 - sum of squared cluster weights
                    (the number of clusters is not chosen by the fit)
"""
import argparse
import json
import math
import os
import sys

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):   # small products: threads only contend
    os.environ.setdefault(_var, "1")
import numpy as np  # noqa: E402

from head_stats import effective_rank, heads_of  # noqa: E402

PARAMS = ("scale", "key_scale", "decay_q", "decay_k", "offset_q", "offset_k", "offset_cos", "key_norm_sigma")


def unrope(x, base, layout):
    """Undo RoPE on x (L, d): row i's pairs rotated by -i base^(-2p/d). layout "interleaved"
    pairs (2p, 2p+1) (Su et al. 2021, favor's); "half" pairs (p, p + d/2) (rotate-half)."""
    L, d = x.shape
    ang = np.arange(L)[:, None] * base ** (-2.0 * np.arange(d // 2) / d)[None, :]
    c, s = np.cos(ang), np.sin(ang)
    a, b = (x[:, 0::2], x[:, 1::2]) if layout == "interleaved" else (x[:, : d // 2], x[:, d // 2:])
    out = np.empty_like(x)
    ra, rb = a * c + b * s, -a * s + b * c
    if layout == "interleaved":
        out[:, 0::2], out[:, 1::2] = ra, rb
    else:
        out[:, : d // 2], out[:, d // 2:] = ra, rb
    return out


def spectrum(alpha, d):
    """favor's eigenvalues (i+1)^-alpha scaled to mean 1 (input_families.cpp)."""
    lam = np.arange(1, d + 1, dtype=np.float64) ** -alpha
    return lam * d / lam.sum()


def log_norm_var(x):
    """Variance of log |row| (a row at the mean counts as norm 1e-300, not -inf)."""
    return float(np.log(np.maximum(np.linalg.norm(x, axis=1), 1e-300)).var())


class Calibration:
    """A seeded Gaussian sample of the head's size, to read the finite-L statistics of the
    model at any (alpha, sigma): singular values of the centred rows, Var log |row|."""

    def __init__(self, L, d, seed):
        rng = np.random.default_rng(seed)
        self.z = rng.standard_normal((L, d))
        self.g = rng.standard_normal(L)
        self.gram = {}

    def rows(self, alpha, sigma=0.0):
        x = self.z * np.sqrt(spectrum(alpha, self.z.shape[1]))[None, :]
        return x * np.exp(sigma * self.g - sigma * sigma)[:, None]

    def erank(self, alpha, sigma=0.0):
        """head_stats' effective rank of the centred rows, from the d x d Gram matrix of the
        centred sample (kept per sigma): diag(r) G diag(r), r = sqrt(lambda)."""
        if sigma not in self.gram:
            x = self.rows(0.0, sigma)
            x = x - x.mean(axis=0)
            self.gram[sigma] = x.T @ x
        r = np.sqrt(spectrum(alpha, self.z.shape[1]))
        s = np.sqrt(np.clip(np.linalg.eigvalsh(self.gram[sigma] * np.outer(r, r)), 0, None))
        p = s / s.sum()
        p = p[p > 0]
        return float(np.exp(-(p * np.log(p)).sum()))

    def log_norm_var(self, alpha):
        x = self.rows(alpha)
        return log_norm_var(x - x.mean(axis=0))

    def decay_for(self, target, sigma=0.0):
        """The alpha in [0, 16] whose sample has effective rank `target` (it falls with alpha)."""
        lo, hi = 0.0, 16.0
        if self.erank(lo, sigma) <= target:
            return 0.0
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if self.erank(mid, sigma) > target else (lo, mid)
        return 0.5 * (lo + hi)


def offset_of(x, scale):
    """|mean row| / scale, the sampling noise trace(cov) / L removed from its square."""
    m = x.mean(axis=0)
    noise = ((x - m) ** 2).sum() / x.shape[0] / x.shape[0]
    return math.sqrt(max(0.0, float(m @ m) - noise)) / scale, m


def basis_overlap(qc, kc, decay_q, decay_k):
    """Cosine of the two sample covariances, tr(C_q C_k) / (|C_q| |C_k|), and what the model
    predicts for it with a shared basis (lambda_q . lambda_k / (|lambda_q| |lambda_k|), the
    eigenvalues in the same order) and with independent Haar bases (its expectation
    sum(lambda_q) sum(lambda_k) / (d |lambda_q| |lambda_k|))."""
    d = qc.shape[1]
    cq, ck = qc.T @ qc, kc.T @ kc
    observed = float((cq * ck).sum() / (np.linalg.norm(cq) * np.linalg.norm(ck)))
    lq, lk = spectrum(decay_q, d), spectrum(decay_k, d)
    norms = np.linalg.norm(lq) * np.linalg.norm(lk)
    return observed, float(lq @ lk / norms), float(lq.sum() * lk.sum() / (d * norms))


def kmeans(x, n, seed, iterations=50, restarts=4):
    """Labels of Lloyd's k-means on the rows of x (k-means++ starts, seeded; the best of
    `restarts` by within-cluster sum of squares)."""
    rng = np.random.default_rng(seed)
    best, best_ss = None, np.inf
    for _ in range(restarts):
        centers = [x[rng.integers(len(x))]]
        for _ in range(n - 1):
            d2 = np.min([((x - c) ** 2).sum(axis=1) for c in centers], axis=0)
            centers.append(x[rng.choice(len(x), p=d2 / d2.sum())])
        centers = np.array(centers)
        labels = None
        for _ in range(iterations):
            new = np.argmin((centers ** 2).sum(axis=1)[None, :] - 2 * x @ centers.T, axis=1)
            if labels is not None and (new == labels).all():
                break
            labels = new
            centers = np.array([x[labels == c].mean(axis=0) if (labels == c).any() else centers[c] for c in range(n)])
        ss = ((x - centers[labels]) ** 2).sum()
        if ss < best_ss:
            best, best_ss = labels, ss
    return best


def cluster_spread(kc, n, seed):
    """(s, residuals, c) of keys in n clusters: with weights w_c, the between-cluster sum of
    squares has expectation (1 - s^2)(1 - sum w_c^2) T and the within one s^2 T (T the keys'
    total scale^2 d L), so s^2 = r c / (1 + r c), r = within / between, c = 1 - sum w_c^2."""
    labels = kmeans(kc, n, seed)
    means = np.array([kc[labels == c].mean(axis=0) for c in range(n)])
    resid = kc - means[labels]
    w = np.bincount(labels, minlength=n) / len(kc)
    r = (resid ** 2).sum() / (means[labels] ** 2).sum()
    c = 1 - (w ** 2).sum()
    return math.sqrt(r * c / (1 + r * c)), resid, c


def fit(q, k, seed=0, clusters=0):
    """The family's parameters of one head (RoPE already undone): a dict keyed by PARAMS plus
    shared_basis and the overlap it was decided on. With `clusters` n, the keys' decay is
    read off their within-cluster residuals and key_norm_sigma is left at 0."""
    L, d = q.shape
    qc, kc = q - q.mean(axis=0), k - k.mean(axis=0)
    scale = math.sqrt((qc ** 2).sum() / L / d)
    cal = Calibration(L, d, seed)
    p = {"scale": scale, "key_scale": math.sqrt((kc ** 2).sum() / L / d) / scale, "key_clusters": clusters}
    p["decay_q"] = cal.decay_for(effective_rank(qc))
    sigma = 0.0
    if clusters:
        p["cluster_spread"], resid, c = cluster_spread(kc, clusters, seed)
        p["key_scale"] = math.sqrt((resid ** 2).sum() / L / d) / p["cluster_spread"] / scale
        p["decay_k"] = cal.decay_for(effective_rank(resid))
    for _ in range(0 if clusters else 3):   # decay_k and sigma depend on each other: a few alternations settle
        p["decay_k"] = cal.decay_for(effective_rank(kc), sigma)
        excess = log_norm_var(kc) - cal.log_norm_var(p["decay_k"])
        sigma = math.sqrt(max(0.0, excess))
    p["key_norm_sigma"] = sigma
    p["offset_q"], mq = offset_of(q, scale)
    p["offset_k"], mk = offset_of(k, scale * p["key_scale"])
    if clusters:   # the centers' own weighted mean, E|.|^2 = (1 - s^2) (1 - c) d, is no offset
        p["offset_k"] = math.sqrt(max(0.0, p["offset_k"] ** 2 - (1 - p["cluster_spread"] ** 2) * (1 - c) * d))
    both = p["offset_q"] > 0 and p["offset_k"] > 0
    p["offset_cos"] = float(mq @ mk / (np.linalg.norm(mq) * np.linalg.norm(mk))) if both else None
    p["overlap"], shared, independent = basis_overlap(qc, resid if clusters else kc, p["decay_q"], p["decay_k"])
    p["shared_basis"] = abs(p["overlap"] - shared) < abs(p["overlap"] - independent)
    return p


def draw(p, L, d, rng):
    """A sample of the fitted model (before RoPE), for the bootstrap: the same definitions as
    input_families.cpp, with numpy's random numbers."""
    def basis():
        return np.linalg.qr(rng.standard_normal((d, d)))[0]
    bq = basis()
    bk = bq if p["shared_basis"] else basis()
    q = rng.standard_normal((L, d)) * np.sqrt(spectrum(p["decay_q"], d)) @ bq.T
    z = rng.standard_normal((L, d))
    if p["key_clusters"]:
        s = p["cluster_spread"]
        z = math.sqrt(1 - s * s) * rng.standard_normal((p["key_clusters"], d))[rng.integers(0, p["key_clusters"], L)] + s * z
    k = z * np.sqrt(spectrum(p["decay_k"], d)) @ bk.T
    k *= np.exp(p["key_norm_sigma"] * rng.standard_normal(L) - p["key_norm_sigma"] ** 2)[:, None]
    uq, v = rng.standard_normal(d), rng.standard_normal(d)
    uq /= np.linalg.norm(uq)
    c = p["offset_cos"] if p["offset_cos"] is not None else float(v @ uq / np.linalg.norm(v))
    v -= (v @ uq) * uq
    uk = c * uq + math.sqrt(max(0.0, 1 - c * c)) * v / np.linalg.norm(v)
    return p["scale"] * (q + p["offset_q"] * uq), p["scale"] * p["key_scale"] * (k + p["offset_k"] * uk)


def standard_errors(p, L, d, boot, seed):
    """Parametric bootstrap: the spread of refits of `boot` samples of the fitted model."""
    rng = np.random.default_rng(seed + 1)
    fits = [fit(*draw(p, L, d, rng), seed, p["key_clusters"]) for _ in range(boot)]
    return {k: float(np.std([f[k] for f in fits if f[k] is not None], ddof=1)) if boot > 1 else float("nan")
            for k in PARAMS + ("cluster_spread",) if all(f.get(k) is not None for f in fits)}


def family_keys(p, rope_base=None):
    """The favor `inputs` keys of a fit (4 significant digits; knobs at their default left out)."""
    r = lambda x: float(f"{x:.4g}")
    keys = {}
    for name in ("decay_q", "decay_k"):
        if r(p[name]) > 0:
            keys[name] = r(p[name])
    if keys:
        keys["shared_basis"] = bool(p["shared_basis"])
    for name in ("offset_q", "offset_k"):
        if r(p[name]) > 0:
            keys[name] = r(p[name])
    if p["offset_cos"] is not None and "offset_q" in keys and "offset_k" in keys:
        keys["offset_cos"] = r(p["offset_cos"])
    if r(p["key_norm_sigma"]) > 0:
        keys["key_norm_sigma"] = r(p["key_norm_sigma"])
    if r(p["key_scale"]) != 1:
        keys["key_scale"] = r(p["key_scale"])
    if rope_base is not None:
        keys["rope_base"] = rope_base
    if p["key_clusters"]:
        keys["key_clusters"], keys["cluster_spread"] = p["key_clusters"], r(p["cluster_spread"])
    return keys


def twin_config(p, L, d, seed, causal, m, rope_base, name):
    """A favor approximation config whose random inputs are the fitted twin at length L."""
    inputs = {"source": "random", "L": L, "d": d, "scale": float(f"{p['scale']:.4g}")}
    inputs.update(family_keys(p, rope_base))
    return {"name": name, "description": "input-family twin fitted by scripts/fit_family.py", "seed": seed,
            "inputs": inputs, "causal": causal, "m": m, "trials": 4,
            "variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "oprf"},
                         {"features": "sderf"}],
            "metrics": ["output_rel_error", "attention_tv"]}


def gen_flags(p, L, d, seed, rope_base):
    flags = [f"--L {L}", f"--d {d}", f"--seed {seed}", f"--scale {p['scale']:.4g}"]
    flags += [f"--family {k}={json.dumps(v)}" for k, v in family_keys(p, rope_base).items()]
    return " ".join(flags)


def fit_heads(q, k, heads, rope_base=None, layout="half", seed=0, boot=0, clusters=0):
    """[(batch, head), fit, standard errors] for the chosen (batch, head) pairs."""
    out = []
    for ((b, h), qh), (_, kh) in zip(heads_of(q), heads_of(k)):
        if heads is not None and (b, h) not in heads:
            continue
        qh, kh = np.asarray(qh, np.float64), np.asarray(kh, np.float64)
        if rope_base is not None:
            qh, kh = unrope(qh, rope_base, layout), unrope(kh, rope_base, layout)
        p = fit(qh, kh, seed, clusters)
        out.append(((b, h), p, standard_errors(p, *qh.shape, boot, seed) if boot else {}))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(usage="%(prog)s Q.npy K.npy [options]   (-h lists them)",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("q")
    ap.add_argument("k")
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--head", type=int, default=None, help="one head (default: all heads)")
    ap.add_argument("--rope-base", type=float, default=None, help="the model's RoPE base: undone before fitting")
    ap.add_argument("--rope-layout", choices=("half", "interleaved"), default="half",
                    help="rotate-half pairs (p, p + d/2) (Hugging Face, scripts/train_tiny_lm.py) or "
                         "interleaved (2p, 2p+1) (favor's)")
    ap.add_argument("--causal", action="store_true", help="the written config is causal")
    ap.add_argument("--L", type=int, default=None, help="length of the twin in the config (default: the head's)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the twin and of the calibration sample")
    ap.add_argument("--m", type=int, default=64, help="random features in the written config")
    ap.add_argument("--boot", type=int, default=8, help="bootstrap refits for the standard errors (0: none)")
    ap.add_argument("--key-clusters", type=int, default=0,
                    help="fit keys in this many clusters (k-means): cluster_spread, the keys' decay from the "
                         "within-cluster residuals; key_norm_sigma then 0")
    ap.add_argument("--config", default=None, help="write the twin config of the first chosen head here")
    ap.add_argument("--json", default=None, help="write the fits here")
    a = ap.parse_args(argv)
    q, k = np.load(a.q), np.load(a.k)
    if q.shape != k.shape or q.ndim < 2:
        sys.exit(f"fit_family.py: {a.q} {q.shape} and {a.k} {k.shape}: expected equal shapes (.., L, d)")
    if a.rope_base is not None and q.shape[-1] % 2:
        sys.exit(f"fit_family.py: --rope-base: needs an even d, got {q.shape[-1]}")
    heads = None if a.head is None else {(a.batch, a.head)}
    fits = fit_heads(q, k, heads, a.rope_base, a.rope_layout, a.seed, a.boot, a.key_clusters)
    if not fits:
        sys.exit(f"fit_family.py: --batch {a.batch} --head {a.head}: no such head in {a.q} {q.shape}")
    L, d = q.shape[-2:]
    for (b, h), p, se in fits:
        cells = []
        for name in PARAMS + ("cluster_spread",):
            if p.get(name) is None:
                continue
            cells.append(f"{name} {p[name]:.4g}" + (f" ± {se[name]:.2g}" if name in se else ""))
        print(f"batch {b} head {h}: " + ", ".join(cells) + f", shared_basis {p['shared_basis']} "
              f"(overlap {p['overlap']:.2f})")
        print(f"  favor gen {gen_flags(p, a.L or L, d, a.seed, a.rope_base)} --out DIR")
    if a.config:
        (b, h), p, _ = fits[0]
        cfg = twin_config(p, a.L or L, d, a.seed, a.causal, a.m, a.rope_base, f"twin_b{b}_h{h}")
        with open(a.config, "w") as f:
            json.dump(cfg, f, indent=2)
            f.write("\n")
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{"batch": b, "head": h, "fit": p, "se": se} for (b, h), p, se in fits], f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
