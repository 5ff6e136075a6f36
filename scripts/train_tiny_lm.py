#!/usr/bin/python3
"""Train a tiny byte-level decoder-only transformer with rotary position embeddings on the
Python standard library sources that every Debian python3 ships, and report held-out bits
per byte beside a unigram and a bigram baseline.

    /usr/bin/python3 scripts/train_tiny_lm.py [--out data/tiny_lm.pt] [--seed 0]
        [--steps N] [--long-steps N] [--bench] [--threads 2]

Text: the files /usr/lib/python3.11/*.py (top level only), in sorted order; file i (0-based,
in that order) is held out when i % 10 == 9, the rest is the training text. Each file's
bytes are followed by one NUL byte (a document separator); the streams are the
concatenations in file order.

Model: TinyLM of scripts/tiny_lm.py (8 heads of dimension 64, RoPE; its docstring has the
architecture). Context: trained at 256 bytes for --steps steps (batch 16), then at 1024
bytes for --long-steps steps (batch 4); RoPE lets the model run at the longer context.
AdamW (lr 3e-3, betas 0.9/0.95, weight decay 0.1 on matrices), 30 warm-up steps, cosine
decay to lr/10 over all steps, gradient norm clipped at 1.

Seeding: torch.manual_seed(seed) for the initial weights; the training windows' start
offsets come from a torch.Generator seeded with seed + 1, drawn in step order, so the data
order is fixed. torch.set_num_threads(--threads, default 2).

Evaluation: held-out bits per byte = mean cross entropy / ln 2 over the first
--eval-bytes bytes (default 262144) of the held-out stream, in windows of 1024 predicted
bytes, each with its own preceding byte as the first input (every byte predicted once).
Baselines on the same bytes, counted on the training stream with add-one (Laplace)
smoothing: unigram p(b) = (c(b) + 1) / (N + 256); bigram p(b | a) = (c(a, b) + 1) /
(c(a) + 256), the first byte predicted by the unigram.

Writes --out (a plain state_dict of float16 tensors, read with torch.load(weights_only=True))
and its config and meta as JSON beside it (tiny_lm.save_tiny_lm: data/tiny_lm.json), and prints a
summary (also stored in meta). The weights are float16 to keep the file small; TinyLM
loads them into float32 (tiny_lm.load_tiny_lm); the held-out numbers are those of the float16
weights.

Then (or alone, from the saved weights, with --data-only) the data set in the folder of
--out (data/): scripts/capture_qkv.py's command line on EXCERPT (L = 1024 bytes of a
held-out file, causal, every layer and head) writes manifest.json, layer<i>/{q,k,v}.npy
and layer<i>.json; scripts/head_stats.py's head_stats gives the per-head table
(heads.csv), heads.png draws it, and README.md is written from the numbers (nothing in it
is typed by hand).
"""
import argparse
import glob
import math
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tiny_lm import CONFIG, TinyLM, config_path, load_tiny_lm, save_tiny_lm  # noqa: E402

TEXT_GLOB = "/usr/lib/python3.11/*.py"
EXCERPT = {"text": "/usr/lib/python3.11/heapq.py", "offset": 4096, "L": 1024}  # held out (file 69)
# --excerpts N captures the first N of these (held-out files, one excerpt each)
EXCERPTS = [EXCERPT] + [{"text": f"/usr/lib/python3.11/{name}.py", "offset": offset, "L": 1024}
                        for name, offset in (("datetime", 16384), ("zipfile", 16384), ("socket", 4096),
                                             ("locale", 8192))]
HELD_OUT_EVERY = 10  # file i is held out when i % 10 == 9


# ----------------------------------------------------------------------------- data

def text_files(pattern=TEXT_GLOB):
    files = sorted(glob.glob(pattern))
    if not files:
        sys.exit(f"train_tiny_lm.py: no files match {pattern}")
    return files


def split_streams(pattern=TEXT_GLOB):
    """(train bytes, held-out bytes, train files, held-out files); see the module doc."""
    train, held, ftrain, fheld = [], [], [], []
    for i, path in enumerate(text_files(pattern)):
        with open(path, "rb") as f:
            data = f.read() + b"\0"
        if i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1:
            held.append(data)
            fheld.append(path)
        else:
            train.append(data)
            ftrain.append(path)
    return b"".join(train), b"".join(held), ftrain, fheld


def as_tensor(b):
    return torch.frombuffer(bytearray(b), dtype=torch.uint8).long()


# ----------------------------------------------------------------------------- baselines

def baselines_bpb(train, held):
    """Add-one unigram and bigram bits per byte of held (bytes) counted on train (bytes)."""
    t = as_tensor(train)
    h = as_tensor(held)
    uni = torch.bincount(t, minlength=256).double()
    p_uni = (uni + 1) / (uni.sum() + 256)
    big = torch.bincount(t[:-1] * 256 + t[1:], minlength=65536).double().view(256, 256)
    p_big = (big + 1) / (big.sum(dim=1, keepdim=True) + 256)
    nll_uni = -p_uni[h].log2().sum()
    nll_big = -p_uni[h[0]].log2() - p_big[h[:-1], h[1:]].log2().sum()
    n = len(h)
    return float(nll_uni / n), float(nll_big / n)


@torch.no_grad()
def model_bpb(model, held, window=1024):
    """Bits per byte of held[1:] (every byte but the first predicted once, windows of
    `window` predictions, each starting from the byte before it)."""
    h = as_tensor(held)
    total, n = 0.0, 0
    for s in range(0, len(h) - 1, window):
        chunk = h[s:s + window + 1]
        logits = model(chunk[None, :-1])
        total += F.cross_entropy(logits[0], chunk[1:], reduction="sum").item()
        n += len(chunk) - 1
    return total / n / math.log(2), n


# ----------------------------------------------------------------------------- training

def lr_at(step, total, peak, warmup=30):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(argv=None):
    ap = argparse.ArgumentParser(usage="%(prog)s [--out PT] [--seed N] [--data-only] [--bench] [options]   "
                                 "(-h lists them)", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="data/tiny_lm.pt")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=160, help="steps at context 256, batch 16")
    ap.add_argument("--long-steps", type=int, default=16, help="then steps at 1024, batch 4")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--d-model", type=int, default=CONFIG["d_model"])
    ap.add_argument("--layers", type=int, default=CONFIG["n_layers"])
    ap.add_argument("--heads", type=int, default=CONFIG["n_heads"], help="per layer, each of dimension 64")
    ap.add_argument("--mlp", type=int, default=None, help="MLP width (default 4 d_model)")
    ap.add_argument("--batch", type=int, default=16, help="batch at context 256 (at 1024: a quarter)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval-bytes", type=int, default=262144)
    ap.add_argument("--excerpts", type=int, default=1, choices=range(1, len(EXCERPTS) + 1), metavar="N",
                    help=f"capture N held-out excerpts (1: at the folder's root; more: excerpt<i>/; at most "
                         f"{len(EXCERPTS)})")
    ap.add_argument("--capture-dtype", choices=["float32", "float16"], default=None,
                    help="store the captures in this dtype (default: the model's, float32)")
    ap.add_argument("--data-only", action="store_true",
                    help="skip training: capture, table, figure and README from --out")
    ap.add_argument("--bench", action="store_true",
                    help="time 5 steps at each context and exit (sizing the run)")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    if a.data_only:
        make_data(a.out, EXCERPTS[:a.excerpts], a.capture_dtype)
        return
    torch.manual_seed(a.seed)
    train, held, ftrain, fheld = split_streams()
    print(f"text: {len(ftrain)} training files ({len(train)} bytes), {len(fheld)} held-out "
          f"files ({len(held)} bytes), {TEXT_GLOB}", flush=True)
    config = dict(CONFIG, d_model=a.d_model, n_layers=a.layers, n_heads=a.heads,
                  mlp=a.mlp or 4 * a.d_model)
    if min(a.d_model, a.layers, a.heads, config["mlp"], a.batch) <= 0:
        sys.exit("train_tiny_lm.py: --d-model, --layers, --heads, --mlp and --batch must be positive")
    model = TinyLM(config)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"model: {nparams} parameters, {config}", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "emb" not in n]
    other = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "emb" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95))
    t = as_tensor(train)
    gen = torch.Generator().manual_seed(a.seed + 1)
    phases = [(256, a.batch, a.steps), (1024, max(1, a.batch // 4), a.long_steps)]
    if a.bench:
        phases = [(256, a.batch, 5), (1024, max(1, a.batch // 4), 5)]
    total = sum(p[2] for p in phases)
    wall0, cpu0 = time.time(), cpu_seconds()
    step = 0
    model.train()
    for ctx, batch, steps in phases:
        ph_wall, ph_cpu, ph_tok = time.time(), cpu_seconds(), 0
        for _ in range(steps):
            starts = torch.randint(0, len(t) - ctx - 1, (batch,), generator=gen)
            idx = starts[:, None] + torch.arange(ctx + 1)[None, :]
            xy = t[idx]
            for g in opt.param_groups:
                g["lr"] = lr_at(step, total, a.lr)
            logits = model(xy[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, 256), xy[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            ph_tok += batch * ctx
            if step % 25 == 0 or a.bench or step == total:
                w = time.time() - ph_wall
                print(f"step {step}/{total} ctx {ctx} loss {loss.item() / math.log(2):.3f} "
                      f"bits/byte, {ph_tok / max(w, 1e-9):.0f} tok/s wall, "
                      f"{time.time() - wall0:.0f} s wall, {cpu_seconds() - cpu0:.0f} s CPU",
                      flush=True)
    train_wall, train_cpu = time.time() - wall0, cpu_seconds() - cpu0
    if a.bench:
        return
    # Evaluate the weights as committed: rounded to float16 and read back into float32.
    sd = {k: v.half() for k, v in model.state_dict().items()}
    model.load_state_dict({k: v.float() for k, v in sd.items()})
    model.eval()
    ev = held[:a.eval_bytes]
    bpb, n = model_bpb(model, ev)
    uni, big = baselines_bpb(train, ev)
    meta = {"seed": a.seed, "steps": a.steps, "long_steps": a.long_steps, "lr": a.lr,
            "batch": a.batch, "long_batch": max(1, a.batch // 4),
            "threads": a.threads, "parameters": nparams,
            "train_files": len(ftrain), "train_bytes": len(train),
            "held_out_files": len(fheld), "held_out_bytes": len(held),
            "eval_bytes": len(ev), "held_out_bpb": bpb, "unigram_bpb": uni, "bigram_bpb": big,
            "train_wall_s": train_wall, "train_cpu_s": train_cpu,
            "torch": torch.__version__}
    print(f"held-out bits per byte (first {len(ev)} held-out bytes, {n} predicted): "
          f"model {bpb:.3f}, bigram {big:.3f}, unigram {uni:.3f} (add-one smoothing, counts "
          f"from the training files)")
    print(f"training: {train_wall:.0f} s wall, {train_cpu:.0f} s CPU (user+sys) on "
          f"{a.threads} threads")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    save_tiny_lm(a.out, sd, config, meta)
    print(f"wrote {a.out}")
    make_data(a.out, EXCERPTS[:a.excerpts], a.capture_dtype)


# ----------------------------------------------------------------------------- the data set

def make_data(weights, excerpts=(EXCERPT,), capture_dtype=None):
    """Capture each excerpt with the model at `weights` into its folder (one excerpt: the
    folder itself; several: excerpt<i>/), then the per-head table (heads.csv: with several
    excerpts the mean over them), the figure (heads.png) and README.md."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import json
    import numpy as np
    import capture_qkv
    import head_stats
    out = os.path.dirname(os.path.abspath(weights))
    mans, per_excerpt = [], []
    for e, ex in enumerate(excerpts):
        path, offset, L = ex["text"], ex["offset"], ex["L"]
        i = text_files().index(path)
        assert i % HELD_OUT_EVERY == HELD_OUT_EVERY - 1, f"{path} is not a held-out file"
        folder = out if len(excerpts) == 1 else os.path.join(out, f"excerpt{e}")
        capture_qkv.main(["--text", path, "--offset", str(offset), "--L", str(L),
                          "--out", folder, "--model", weights]
                         + (["--dtype", capture_dtype] if capture_dtype else []))
        with open(os.path.join(folder, "manifest.json")) as f:
            man = json.load(f)
        mans.append(man)
        rows = []
        for lay in man["layers"]:
            q = np.load(os.path.join(folder, lay["files"]["q"]["path"]))
            k = np.load(os.path.join(folder, lay["files"]["k"]["path"]))
            for r in head_stats.all_head_stats(q, k, causal=lay["causal"]):
                rows.append({"layer": lay["index"], **r})
        per_excerpt.append(rows)
    rows = [{c: (float(np.mean([ex[n][c] for ex in per_excerpt])) if c not in ("layer", "head", "batch")
                 else r[c]) for c in r} for n, r in enumerate(per_excerpt[0])]
    man = mans[0]
    keys = ["layer", "head", *head_stats.COLUMNS]
    with open(os.path.join(out, "heads.csv"), "w") as f:
        f.write(",".join(keys) + "\n")
        for r in rows:
            f.write(",".join(f"{r[c]:.6g}" for c in keys) + "\n")
    rel = os.path.relpath(out, os.path.join(here, ".."))
    plot_heads(rows, os.path.join(out, "heads.png"), man["layers"][0]["L"], man["layers"][0]["d"],
               "the tiny byte-level LM (data/)" if rel == "data" else
               f"the byte-level LM of {rel}/" + (f" (means over {len(excerpts)} excerpts)" if len(excerpts) > 1 else ""))
    census = census_of([out] if len(excerpts) == 1 else [os.path.join(out, f"excerpt{e}") for e in range(len(excerpts))],
                       out)
    model, meta = load_tiny_lm(weights)
    write_readme(out, meta, model.config, mans, rows, weights, census)


def census_of(folders, out=None):
    """favor.heads' census of each capture folder (its heads.csv, heads.md, heads.png written
    there, but in `out` itself, whose heads.csv and heads.png are this script's table):
    [(folder name, rows)] for the README (issue 55 item 3)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "python"))
    from favor import heads   # the built module (scripts/setup.sh)
    same = lambda f: out is not None and os.path.samefile(f, out)
    return [(os.path.basename(f), heads.census(f) if same(f) else heads.write(f)) for f in folders]


def census_lines(census, folder):
    """The README's census section: per capture the table of favor.heads.markdown."""
    from favor import heads
    lines = ["## Head census", "",
             "Per capture, `python3 -m favor heads` (favor.heads; definitions in its docstring): the weight on "
             "the last 16 / 64 / 256 keys, the sink share (first 4 keys), the row entropy (nats) and its ratio "
             "to the uniform row's, the induction score (mean weight on the key after the current token's "
             "earlier occurrence) and the retrieval score (blank: no copy targets on plain text), and the kind "
             "they imply. Also in each capture's heads.md / heads.png.", ""]
    for name, rows in census:
        lines += [f"### {folder}/{name}" if name != os.path.basename(folder) else f"### {folder}", "",
                  heads.markdown(rows), ""]
    return lines


def plot_heads(rows, png, L, d, title="the tiny byte-level LM (data/)"):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [f"L{r['layer']}H{r['head']}" for r in rows]
    x = range(len(rows))
    panels = [("entropy", "mean row entropy (nats)"), ("max_weight", "mean largest weight"),
              ("key_norm_spread", "key norm max / median"), ("logit_std", "logit std"),
              ("erank_q", "effective rank of Q"), ("erank_k", "effective rank of K"),
              ("first_share", "mean weight on the first key"),
              ("local64", "mean weight on the last 64 keys\n(dark: the last 16)")]
    fig, axes = plt.subplots(2, 4, figsize=(15, 6.5))
    for ax, (col, name) in zip(axes.flat, panels):
        ax.bar(x, [r[col] for r in rows], color="tab:blue")
        if col == "local64":
            ax.bar(x, [r["local16"] for r in rows], color="navy")
        ax.set_title(name, fontsize=10)
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, rotation=90, fontsize=8)
        if col == "entropy":
            ax.axhline(math.log(L), color="k", ls="--", lw=1, label=f"ln L = {math.log(L):.2f}")
            ax.axhline(math.log(L) / 2, color="tab:red", ls=":", lw=1.5,
                       label=f"ln L / 2 = {math.log(L) / 2:.2f}")
            ax.legend(fontsize=8)
        if col == "first_share":   # uniform causal attention: mean over rows of 1 / (i + 1)
            u = sum(1.0 / (i + 1) for i in range(L)) / L
            ax.axhline(u, color="k", ls="--", lw=1, label=f"uniform: {u:.4f}")
            ax.legend(fontsize=8)
        if col in ("max_weight", "local64"):
            ax.set_ylim(0, 1)
        if col.startswith("erank"):
            ax.axhline(d, color="k", ls="--", lw=1, label=f"d = {d}")
            ax.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Heads of {title}, causal, L = {L}: layer L, head H",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def write_readme(out, meta, config, mans, rows, weights, census=()):
    """README.md of the data folder from the numbers: one capture at the folder's root (mans
    of one manifest) or one per excerpt<i>/."""
    man = mans[0]
    lay0 = man["layers"][0]
    L = lay0["L"]
    logL = math.log(L)
    low = [r for r in rows if r["entropy"] < logL / 2]
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(out) for f in fs
                if f != "README.md")
    folder = os.path.relpath(out, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    several = len(mans) > 1
    where = "excerpt<e>/" if several else ""
    heads = config["n_layers"] * config["n_heads"]
    lines = [
        f"# {folder}/: a byte-level language model trained here, and its attention",
        "",
        "Written by `scripts/train_tiny_lm.py` (this file too: every number below is computed).",
        "",
        "## Files",
        "",
        f"- `{os.path.basename(weights)}`: the weights ({os.path.getsize(weights)} bytes, float16;"
        " a plain state_dict of tensors, which `load_tiny_lm` in `scripts/tiny_lm.py` reads with "
        "`torch.load(weights_only=True)` into float32); "
        f"`{os.path.basename(config_path(weights))}`: its config and training meta.",
        *([f"- `excerpt<e>/` for e = 0..{len(mans) - 1}: one capture per held-out excerpt (below), each "
           "with the files that follow."] if several else []),
        f"- `{where}manifest.json`: the capture (scripts/capture_qkv.py): per layer its module name, B, H, "
        "L, d, d_v, causal, dtype, the model's logit scale, the factor q was multiplied by, "
        "sha256 of every file; `input` gives the text, offset, sha256 of the bytes and of the model.",
        f"- `{where}layer<i>/q.npy, k.npy, v.npy`: (B, H, L, d) = "
        f"({lay0['B']}, {lay0['H']}, {L}, {lay0['d']}) "
        f"{lay0['dtype']}"
        + (f" (the model computes in {lay0['model_dtype']}; stored rounded to {lay0['dtype']} after the "
           "capture's self-check, so favor's exact reference is that of the rounded values)"
           if lay0.get("model_dtype", lay0["dtype"]) != lay0["dtype"] else "")
        + f", for i = 0..{len(man['layers']) - 1}: the q and k after "
        "RoPE and v that enter each layer's causal softmax (scale 1/sqrt(64), so q is as the "
        "model made it).",
        f"- `{where}layer<i>.json`: a favor config over the layer's heads "
        f"(`for c in {folder}/{where.replace('<e>', '0')}layer*.json; do build/favor run \"$c\"; done`).",
        "- `heads.csv`, `heads.png`: the per-head statistics below"
        + (f" (means over the {len(mans)} excerpts)." if several else "."),
        f"- In all {total / 1e6:.1f} MB (README.md aside).",
        "",
        "## The model and its training",
        "",
        f"Decoder-only transformer, bytes in and out (vocabulary 256), d_model {config['d_model']}, "
        f"{config['n_layers']} layers of {config['n_heads']} heads of dimension "
        f"{config['head_dim']} ({heads} heads), MLP {config['mlp']}, pre-LayerNorm, rotary position embeddings "
        f"(base {config['rope_base']:g}) on q and k, tied embeddings: {meta['parameters']} "
        "parameters.",
        f"Text: `{TEXT_GLOB}` (top level, sorted); file i held out when i % 10 == 9: "
        f"{meta['train_files']} training files ({meta['train_bytes']} bytes), "
        f"{meta['held_out_files']} held-out files ({meta['held_out_bytes']} bytes).",
        f"Seed {meta['seed']}: {meta['steps']} steps at context 256 (batch {meta.get('batch', 16)}), then "
        f"{meta['long_steps']} at context 1024 (batch {meta.get('long_batch', 4)}); AdamW, lr {meta['lr']:g}, "
        "cosine decay.",
        f"Training took {meta['train_cpu_s'] / 60:.1f} CPU minutes (user + sys) and "
        f"{meta['train_wall_s'] / 60:.1f} minutes wall on {meta['threads']} threads "
        f"(torch {meta['torch']}, run under `nice -n 10` on a 2-core machine shared with "
        "other builds, so the wall time is inflated).",
        "",
        f"Held-out bits per byte, on the first {meta['eval_bytes']} bytes of the held-out "
        "stream (every byte but the first predicted once, in windows of 1024):",
        "",
        "| predictor | bits per byte |",
        "|---|---|",
        f"| this model (float16 weights) | {meta['held_out_bpb']:.3f} |",
        f"| bigram, add-one smoothing, counted on the training files | {meta['bigram_bpb']:.3f} |",
        f"| unigram, add-one smoothing, counted on the training files | {meta['unigram_bpb']:.3f} |",
        "",
        "## The capture" + ("s" if several else ""),
        "",
    ]
    for e, m in enumerate(mans):
        inp = m["input"]
        lines.append(f"{'- `excerpt%d/`: ' % e if several else ''}Input: bytes {inp['offset']}.."
                     f"{inp['offset'] + inp['L'] - 1} of `{inp['text']}` (a held-out file), batch 1, causal, "
                     f"L = {L}.")
    lines += [
        "",
        f"Per head (scripts/head_stats.py, causal as the model uses them; ln L = {logL:.3f}"
        + (f"; means over the {len(mans)} excerpts" if several else "") + "): "
        "entropy = mean over rows of the row entropy (nats), ratio = entropy / mean ln(i + 1) "
        "(the uniform entropy of each row's visible keys), max w = mean largest attention "
        "weight of a row, spread = max / median key norm, logit std over the visible "
        "logits, erank = effective rank of Q and K (d = 64 for isotropic inputs); first = mean "
        "weight on the first key (what a sink token covers), last 16 / last 64 = mean weight on "
        "the last 16 / 64 keys up to the row's own (what an exact window of that width covers).",
        "",
        "| layer | head | entropy | < ln L / 2 | ratio | max w | spread | logit std | erank Q | erank K "
        "| first | last 16 | last 64 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['layer']} | {r['head']} | {r['entropy']:.3f} | "
                     f"{'yes' if r['entropy'] < logL / 2 else 'no'} | {r['entropy_ratio']:.3f} | "
                     f"{r['max_weight']:.3f} | {r['key_norm_spread']:.2f} | {r['logit_std']:.2f} | "
                     f"{r['erank_q']:.1f} | {r['erank_k']:.1f} | {r['first_share']:.3f} | "
                     f"{r['local16']:.3f} | {r['local64']:.3f} |")
    verdict = ("at least a quarter" if 4 * len(low) >= len(rows) else "fewer than a quarter")
    inp = man["input"]
    model_arg = os.path.join(folder, os.path.basename(weights))
    rounded = lay0.get("model_dtype", lay0["dtype"]) != lay0["dtype"]
    data_args = ((f" --excerpts {len(mans)}" if several else "")
                 + (f" --capture-dtype {lay0['dtype']}" if rounded else ""))
    arch = (f" --d-model {config['d_model']} --layers {config['n_layers']} --heads {config['n_heads']}"
            f" --steps {meta['steps']} --long-steps {meta['long_steps']} --out {model_arg}{data_args}"
            if folder != "data" else "")
    lines += [
        "",
        f"{len(low)} of {len(rows)} heads have a mean row entropy below ln L / 2 = "
        f"{logL / 2:.3f} ({verdict} of the heads).",
        "",
        "![per-head statistics](heads.png)",
        "",
        "## Remaking it",
        "",
        "```",
        f"nice -n 10 /usr/bin/python3 scripts/train_tiny_lm.py{arch}        # train, then everything below",
        f"/usr/bin/python3 scripts/train_tiny_lm.py --data-only{' --out ' + model_arg + data_args if arch else ''}"
        "       # from the committed weights",
        f"/usr/bin/python3 scripts/capture_qkv.py --text {inp['text']} --offset {inp['offset']} "
        f"--L {inp['L']} --out DIR --model {model_arg}"
        + (f" --dtype {lay0['dtype']}" if rounded else "")
        + "   # a capture alone",
        "```",
        "",
        "Retraining is seeded (weights, data order) and runs on 2 threads; whether it gives "
        "the same weights bit for bit on another CPU or torch build was not checked (the "
        "sha256 of the committed weights is in each manifest.json). The capture from the committed "
        "weights is deterministic up to torch's float32 kernels. "
        "tests/python/test_data.py checks the files against the manifests.",
        "",
    ]
    if census:
        lines += census_lines(census, folder)
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("\n".join(lines))
    print(f"{len(low)} of {len(rows)} heads below ln L / 2; wrote {out}/README.md, heads.csv, "
          "heads.png")


if __name__ == "__main__":
    main()
