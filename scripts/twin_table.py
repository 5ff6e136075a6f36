#!/usr/bin/python3
"""Captured heads beside their fitted input-family twins: the head statistics
(scripts/head_stats.py) and the estimators' output errors (`favor run`) of each, in one
Markdown table (docs/input_families.md).

    twin_table.py [DATA_DIR] [--favor build/favor] [--heads N] [--m 64] [--trials 4]
                  [--rope-base B --rope-layout half|interleaved] [--causal] [--key-clusters N] [--seed S]
                  [--out FILE.md]
    twin_table.py --synthetic DIR ...    first writes synthetic heads into DIR and uses them

DATA_DIR (default: data/ of the repository) is searched for q.npy k.npy v.npy triples (one
per layer, shapes (B, H, L, d)); DATA_DIR/manifest.json, when present, gives causal (top level
or per layer) and the RoPE base (rope_base, rope_layout) unless the flags do. For each of the first --heads (layer, batch, head): the fit
(scripts/fit_family.py), the twin drawn by `favor gen` at the head's L with the fitted
family keys, head_stats of both, and `favor run` of positive (orthogonal), oprf and sderf at
m on the head (its own V) and on the twin (isotropic V: the family leaves V alone), each with
`trials` draws of W; output_rel_error means, and uniform attention's (the mean of V).
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys
import tempfile

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
import numpy as np  # noqa: E402

from fit_family import fit_heads, gen_flags, family_keys  # noqa: E402
from head_stats import head_stats  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STATS = ("entropy_ratio", "max_weight", "key_norm_spread", "logit_std", "erank_q", "erank_k")
VARIANTS = [{"features": "positive", "projection": "orthogonal"}, {"features": "oprf"}, {"features": "sderf"}]
VARIANT_NAMES = ("positive-orthogonal", "oprf-iid", "sderf-iid")


def synthetic_heads(out, L=1024, d=64, seed=0):
    """Four heads with a planted structure, written as DIR/synthetic/{q,k,v}.npy (1, 4, L, d)
    (returns each head's name, RoPE base (interleaved) and key clusters to fit):
    0 low rank (a few strong directions shared by Q and K), 1 an attention sink (one key of
    large norm aligned with the queries' mean), 2 positional (RoPE, base 10000, interleaved, on
    vectors with a common offset: attention falls with |i - j|), 3 clustered keys with queries
    near the centers. Clearly not from a trained model."""
    rng = np.random.default_rng(seed)
    q = np.empty((1, 4, L, d))
    k = np.empty_like(q)
    v = rng.standard_normal((1, 4, L, d))
    basis = np.linalg.qr(rng.standard_normal((d, d)))[0]
    w = np.array([4.0, 3.0, 2.0] + [0.3] * (d - 3))
    q[0, 0] = (rng.standard_normal((L, d)) * w) @ basis.T
    k[0, 0] = (rng.standard_normal((L, d)) * w) @ basis.T
    mean = rng.standard_normal(d)
    q[0, 1] = rng.standard_normal((L, d)) * 0.5 + mean
    k[0, 1] = rng.standard_normal((L, d)) * 0.5
    k[0, 1, 0] = 6.0 * mean
    c = rng.standard_normal(d) * 1.5
    pos = np.arange(L)[:, None] * 10000.0 ** (-2.0 * np.arange(d // 2) / d)[None, :]

    def rope(x):
        a, b = x[:, 0::2].copy(), x[:, 1::2].copy()
        x[:, 0::2], x[:, 1::2] = a * np.cos(pos) - b * np.sin(pos), a * np.sin(pos) + b * np.cos(pos)
        return x

    q[0, 2] = rope(rng.standard_normal((L, d)) * 0.5 + c)
    k[0, 2] = rope(rng.standard_normal((L, d)) * 0.5 + c)
    centers = rng.standard_normal((8, d)) * 1.2
    k[0, 3] = centers[rng.integers(0, 8, L)] + 0.4 * rng.standard_normal((L, d))
    q[0, 3] = centers[rng.integers(0, 8, L)] + 0.4 * rng.standard_normal((L, d))
    os.makedirs(os.path.join(out, "synthetic"), exist_ok=True)
    for name, x in (("q", q), ("k", k), ("v", v)):
        np.save(os.path.join(out, "synthetic", name + ".npy"), x)
    return [("low rank", None, 0), ("sink key", None, 0), ("positional (RoPE)", 10000.0, 0), ("clustered", None, 8)]


def favor_errors(favor, inputs, L, d, causal, m, trials, seed, work, tag):
    """Mean output_rel_error of each variant and uniform attention's, from `favor run`."""
    cfg = {"name": tag, "seed": seed, "inputs": inputs, "causal": causal, "m": m, "trials": trials,
           "variants": VARIANTS, "metrics": ["output_rel_error"]}
    path = os.path.join(work, tag + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    out = os.path.join(work, tag)
    subprocess.run([favor, "run", path, "--out", out, "--quiet", "--threads", "1"], check=True)
    import csv
    rows = list(csv.DictReader(open(os.path.join(out, "summary.csv"))))
    errs = {r["variant"]: float(r["output_rel_error_mean"]) for r in rows}
    errs["uniform"] = float(rows[0]["baseline_output_rel_error"])
    return errs


def one_head(favor, qh, kh, vh, fitted, causal, rope_base, a, work, tag):
    """(head row, twin row, family keys): statistics and errors of the head and its twin."""
    L, d = qh.shape
    for name, x in (("q", qh), ("k", kh), ("v", vh)):
        np.save(os.path.join(work, f"{tag}_{name}.npy"), x)
    npy = {"source": "npy", **{n: os.path.join(work, f"{tag}_{n}.npy") for n in "qkv"}}
    head = dict(head_stats(qh, kh, causal), **favor_errors(favor, npy, L, d, causal, a.m, a.trials, a.seed, work, tag))
    twin_dir = os.path.join(work, tag + "_twin")
    flags = gen_flags(fitted, L, d, a.seed, rope_base).split() + ["--dv", str(vh.shape[1]), "--out", twin_dir]
    subprocess.run([favor, "gen", *flags], check=True)
    tq, tk = np.load(os.path.join(twin_dir, "q.npy")), np.load(os.path.join(twin_dir, "k.npy"))
    inputs = {"source": "random", "L": L, "d": d, "d_v": vh.shape[1], "scale": float(f"{fitted['scale']:.4g}"),
              **family_keys(fitted, rope_base)}
    twin = dict(head_stats(tq, tk, causal), **favor_errors(favor, inputs, L, d, causal, a.m, a.trials, a.seed, work,
                                                           tag + "_twinrun"))
    return head, twin, family_keys(fitted, rope_base)


def fmt(x):
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def table(rows):
    cols = ["head", "inputs", *STATS, *VARIANT_NAMES, "uniform"]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for name, head, twin, _ in rows:
        for label, r in (("head", head), ("twin", twin)):
            out.append(f"| {name} | {label} | " + " | ".join(fmt(r[c]) for c in (*STATS, *VARIANT_NAMES, "uniform")) + " |")
    return "\n".join(out)


def distance(rows):
    """Per column, how far the twins are from their heads: entropy_ratio and max_weight (in
    [0, 1]) as |twin - head|, the others as the factor exp|log(twin / head)|; median and
    largest over heads."""
    lines = ["| column | measure | median | largest |", "|---|---|---|---|"]
    for c in (*STATS, *VARIANT_NAMES, "uniform"):
        if c in ("entropy_ratio", "max_weight"):
            f, what = [abs(t[c] - h[c]) for _, h, t, _ in rows], "abs. difference"
        else:
            f, what = [math.exp(abs(math.log(t[c] / h[c]))) for _, h, t, _ in rows if h[c] > 0 and t[c] > 0], "factor"
        lines.append(f"| {c} | {what} | {np.median(f):.3g} | {max(f):.3g} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(usage="%(prog)s [DATA_DIR] [options]   (-h lists them)",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("data", nargs="?", default=os.path.join(REPO, "data"))
    ap.add_argument("--synthetic", default=None, help="write synthetic heads into this directory and use them")
    ap.add_argument("--favor", default=os.path.join(REPO, "build", "favor"))
    ap.add_argument("--heads", type=int, default=1000, help="at most this many heads")
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--rope-base", type=float, default=None)
    ap.add_argument("--rope-layout", choices=("half", "interleaved"), default=None)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--key-clusters", type=int, default=0, help="fit every head's keys in this many clusters")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="write the Markdown here (default: print)")
    a = ap.parse_args(argv)
    if a.synthetic:
        synthetic = synthetic_heads(a.synthetic)
        a.data = a.synthetic
    manifest = {}
    if os.path.exists(os.path.join(a.data, "manifest.json")):
        manifest = json.load(open(os.path.join(a.data, "manifest.json")))
    # causal: the flag, else the manifest's (top level or, as scripts/capture_qkv.py writes it, per layer)
    causal = a.causal or bool(manifest.get("causal", False)) or \
        any(layer.get("causal", False) for layer in manifest.get("layers", []))
    rope_base = a.rope_base if a.rope_base is not None else manifest.get("rope_base")
    layout = a.rope_layout or manifest.get("rope_layout", "half")
    qs = sorted(glob.glob(os.path.join(a.data, "**", "q.npy"), recursive=True))
    if not qs:
        sys.exit(f"twin_table.py: {a.data}: no q.npy found")
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for qpath in qs:
            layer = os.path.relpath(os.path.dirname(qpath), a.data)
            q, k, v = (np.load(os.path.join(os.path.dirname(qpath), n + ".npy")) for n in "qkv")
            q, k, v = (x.reshape((1,) * (4 - x.ndim) + x.shape) for x in (q, k, v))
            for b in range(q.shape[0]):
                for h in range(q.shape[1]):
                    if len(rows) >= a.heads:
                        break
                    name, rb, lay, n = f"{layer} b{b} h{h}", rope_base, layout, a.key_clusters
                    if a.synthetic:
                        (name, rb, n), lay = synthetic[h], "interleaved"
                    (_, p, _), = fit_heads(q, k, {(b, h)}, rb, lay, a.seed, 0, n)
                    head, twin, keys = one_head(a.favor, *(x[b, h].astype(np.float64) for x in (q, k, v)), p, causal,
                                                rb, a, work, f"h{len(rows)}")
                    rows.append((name, head, twin, keys))
                    print(f"{name}: {json.dumps(keys)}", file=sys.stderr)
    text = table(rows) + "\n\nHow far each twin is from its head:\n\n" + distance(rows) + "\n\nFitted family keys:\n\n" + \
        "\n".join(f"- {n}: `{json.dumps(k)}`" for n, _, _, k in rows) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
