#!/usr/bin/python3
"""The model's loss with favor's attention swapped in: favor.swap_in on held-out windows of the
byte-level model of data/ (scripts/tiny_lm.py), from a JSON config, written as a favor result
set that `favor compare` and scripts/plot.py read.

    PYTHONPATH=build/python /usr/bin/python3 scripts/swap_in.py CONFIG.json --out DIR
        [--model PT] [--windows N] [--trials T] [--seed S] [--threads 2] [--quiet]

CONFIG: {"variants": [...], "layers": ["all", 0, 1], "windows": 64, "L": 1024, "trials": 8,
"seed": 0, "dtype": "float32", "model": "data/tiny_lm.pt", "batch": 8}; only "variants" is
required (a run's variant objects plus "m", an integer or a list, and "dtype"; favor.swap_in's
docstring). The flags override the config's keys. Relative paths in the config (model, a
fitted map's weights) are taken against the config's folder.

Windows: window w holds bytes w L .. (w + 1) L of the held-out stream of
scripts/train_tiny_lm.py (the held-out files, each followed by a NUL), its first L bytes in and
its last L predicted, so every byte but the first is predicted once, as the held-out bits per
byte in data/README.md are (windows = all the stream holds gives that number).

Prints the model's own and uniform attention's bits per byte, a line per cell (the mean delta
bits per byte over the trials and its ratio to uniform's), and the time of one setting (every
swapped layer over all windows, one trial): issue 39's speed figure.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

KEYS = {"variants", "layers", "windows", "L", "trials", "seed", "dtype", "model", "batch"}


def fail(msg):
    print(f"swap_in.py: {msg}", file=sys.stderr)
    sys.exit(2)


def held_out_windows(n, L):
    """(n, L + 1) token ids: window w = held-out bytes w L .. (w + 1) L."""
    from train_tiny_lm import split_streams
    _, held, _, _ = split_streams()
    h = np.frombuffer(held, dtype=np.uint8).astype(np.int64)
    most = (len(h) - 1) // L
    if n > most:
        fail(f"windows: {n} windows of {L} bytes need {n * L + 1} held-out bytes; the stream has {len(h)} "
             f"(at most {most} windows)")
    return np.stack([h[w * L:w * L + L + 1] for w in range(n)])


def main(argv=None):
    ap = argparse.ArgumentParser(usage="%(prog)s CONFIG.json --out DIR [options]   (-h lists them)",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("--out", required=True)
    ap.add_argument("--model")
    ap.add_argument("--windows", type=int)
    ap.add_argument("--trials", type=int)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    try:
        with open(a.config) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{a.config}: {e}")
    if not isinstance(cfg, dict):
        fail(f"{a.config}: must be a JSON object")
    unknown = sorted(set(cfg) - KEYS)
    if unknown:
        fail(f"{a.config}: {unknown[0]}: unknown key (known: {', '.join(sorted(KEYS))})")
    if "variants" not in cfg:
        fail(f"{a.config}: variants: missing")
    base = os.path.dirname(os.path.abspath(a.config))
    for k, v in (("model", a.model), ("windows", a.windows), ("trials", a.trials), ("seed", a.seed)):
        if v is not None:
            cfg[k] = v
    model_path = cfg.get("model", os.path.join(HERE, "..", "data", "tiny_lm.pt"))
    if a.model is None and "model" in cfg:
        model_path = os.path.join(base, model_path)
    variants = []
    for v in cfg["variants"] if isinstance(cfg["variants"], list) else [cfg["variants"]]:
        if isinstance(v, dict) and isinstance(v.get("weights"), str):
            v = dict(v, weights=os.path.join(base, v["weights"]))
        variants.append(v)
    for k in ("windows", "L", "trials", "batch"):
        if k in cfg and (not isinstance(cfg[k], int) or isinstance(cfg[k], bool) or cfg[k] < 1):
            fail(f"{a.config}: {k}: a positive integer, got {cfg[k]!r}")

    import torch
    import favor
    from tiny_lm import load_tiny_lm
    torch.set_num_threads(a.threads)
    model, _ = load_tiny_lm(model_path)
    windows = held_out_windows(cfg.get("windows", 64), cfg.get("L", 1024))
    t0 = time.time()
    try:
        r = favor.swap_in(model, windows, variants, layers=cfg.get("layers", "all"), trials=cfg.get("trials", 1),
                          seed=cfg.get("seed", 0), dtype=cfg.get("dtype", "float32"), out=a.out,
                          batch=cfg.get("batch", 8), threads=a.threads, progress=not a.quiet,
                          model_name=os.path.relpath(model_path))
    except favor.Error as e:
        fail(str(e))
    info, s = r["info"], r["summary"]
    print(f"{os.path.relpath(model_path)}: {info['windows']['N']} held-out windows of {info['windows']['L']} bytes; "
          f"exact attention {info['exact_bits_per_byte']:.4f} bits/byte")
    for label, u in info["uniform_bits_per_byte"].items():
        print(f"  uniform attention in layers {label}: {u:.4f} bits/byte ({u - info['exact_bits_per_byte']:+.4f})")
    for _, row in s.iterrows():
        ratio = row["delta_bits_per_byte_mean"] / row["baseline_delta_bits_per_byte"]
        print(f"  layers {row['layers']}: {row['variant']} m={row['m']} (F={row['num_features']}): "
              f"{row['delta_bits_per_byte_mean']:+.4f} bits/byte over {row['trials']} trial(s), "
              f"{ratio:.3f}x uniform's")
    sec = info["seconds"]
    print(f"time: {sec['total']:.1f} s in all ({time.time() - t0:.1f} s here); one setting (the swapped layers over "
          f"{info['windows']['N']} windows, one trial): median {sec['per_setting_median']:.1f} s on "
          f"{info['threads']} threads; wrote {a.out}")


if __name__ == "__main__":
    main()
