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

Model (TinyLM below): vocabulary 256 (bytes), d_model 128, 4 layers, 2 heads of dimension
64 (8 heads in all), MLP 4x with GELU, pre-LayerNorm, RoPE (base 10000, rotate-half on the head dimension) on
q and k, causal softmax attention with the logit scale 1/sqrt(64), input and output
embeddings tied. Context: trained at 256 bytes for --steps steps (batch 16), then at 1024
bytes for --long-steps steps (batch 4); RoPE lets the model run at the longer context.
AdamW (lr 3e-3, betas 0.9/0.95, weight decay 0.1 on matrices), 50 warm-up steps, cosine
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

Writes --out (torch.save of {"config", "state_dict" in float16, "meta"}) and prints a
summary (also stored in meta). The weights are float16 to keep the file small; TinyLM
loads them into float32 (load_tiny_lm).
"""
import argparse
import glob
import math
import os
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

TEXT_GLOB = "/usr/lib/python3.11/*.py"
HELD_OUT_EVERY = 10  # file i is held out when i % 10 == 9

CONFIG = {"vocab": 256, "d_model": 128, "n_layers": 4, "n_heads": 2, "head_dim": 64,
          "mlp": 512, "rope_base": 10000.0, "context": 1024}


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


# ----------------------------------------------------------------------------- model

def rope(x, base):
    """Rotary position embedding, rotate-half form: x (B, H, L, d), position = row index."""
    L, d = x.shape[-2], x.shape[-1]
    half = d // 2
    inv = base ** (-torch.arange(half, dtype=torch.float64) / half)
    ang = torch.arange(L, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class RotaryCausalAttention(nn.Module):
    """Causal multi-head self-attention with RoPE on q and k.

    qkv(x) returns the tensors that enter the softmax: q, k (after RoPE) and v, each
    (B, H, L, head_dim); the logits are q k^T * scale with scale = head_dim ** -0.5.
    forward(x): x (B, L, d_model), returns (B, L, d_model) = out(softmax(...) v, heads
    concatenated)."""
    is_causal = True

    def __init__(self, d_model, n_heads, head_dim, rope_base):
        super().__init__()
        self.n_heads, self.head_dim, self.rope_base = n_heads, head_dim, rope_base
        self.scale = head_dim ** -0.5
        # Named wqkv (not qkv / c_attn) on purpose: capture_qkv's fused-projection layout
        # would take its output before RoPE. This module is captured through qkv() instead.
        self.wqkv = nn.Linear(d_model, 3 * n_heads * head_dim, bias=False)
        self.out = nn.Linear(n_heads * head_dim, d_model, bias=False)

    def qkv(self, x):
        B, L, _ = x.shape
        q, k, v = self.wqkv(x).view(B, L, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        return rope(q, self.rope_base), rope(k, self.rope_base), v

    def forward(self, x):
        B, L, _ = x.shape
        q, k, v = self.qkv(x)
        s = (q @ k.transpose(-1, -2)) * self.scale
        mask = torch.ones(L, L, dtype=torch.bool, device=x.device).triu(1)
        a = s.masked_fill(mask, float("-inf")).softmax(dim=-1)
        o = (a @ v).transpose(1, 2).reshape(B, L, self.n_heads * self.head_dim)
        return self.out(o)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln1 = nn.LayerNorm(c["d_model"])
        self.attn = RotaryCausalAttention(c["d_model"], c["n_heads"], c["head_dim"], c["rope_base"])
        self.ln2 = nn.LayerNorm(c["d_model"])
        self.mlp = nn.Sequential(nn.Linear(c["d_model"], c["mlp"]), nn.GELU(),
                                 nn.Linear(c["mlp"], c["d_model"]))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    """Byte-level decoder-only transformer: tokens (B, L) int64 -> logits (B, L, 256)."""

    def __init__(self, c=CONFIG):
        super().__init__()
        self.config = dict(c)
        self.emb = nn.Embedding(c["vocab"], c["d_model"])
        self.blocks = nn.ModuleList(Block(c) for _ in range(c["n_layers"]))
        self.ln_f = nn.LayerNorm(c["d_model"])
        nn.init.normal_(self.emb.weight, std=0.02)
        for b in self.blocks:
            for lin in (b.attn.wqkv, b.attn.out, b.mlp[0], b.mlp[2]):
                nn.init.normal_(lin.weight, std=0.02)
            nn.init.normal_(b.attn.out.weight, std=0.02 / math.sqrt(2 * c["n_layers"]))
            nn.init.normal_(b.mlp[2].weight, std=0.02 / math.sqrt(2 * c["n_layers"]))

    def forward(self, tokens):
        x = self.emb(tokens)
        for b in self.blocks:
            x = b(x)
        return self.ln_f(x) @ self.emb.weight.t()


def tiny_qkv(module, args, kwargs):
    """capture_qkv's user function for TinyLM: (q, k, v, scale) of a RotaryCausalAttention
    called as module(x); None for any other module."""
    if not isinstance(module, RotaryCausalAttention):
        return None
    x = args[0] if args else kwargs["x"]
    q, k, v = module.qkv(x)
    return q, k, v, module.scale


def load_tiny_lm(path):
    """The committed model in float32, eval mode, and its saved meta."""
    try:
        blob = torch.load(path, map_location="cpu")
    except (OSError, RuntimeError) as e:
        sys.exit(f"{path}: cannot load the model: {e}")
    model = TinyLM(blob["config"])
    model.load_state_dict({k: v.float() for k, v in blob["state_dict"].items()})
    return model.eval(), blob.get("meta", {})


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

def lr_at(step, total, peak, warmup=50):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p)))


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="data/tiny_lm.pt")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--steps", type=int, default=300, help="steps at context 256, batch 16")
    ap.add_argument("--long-steps", type=int, default=30, help="then steps at 1024, batch 4")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval-bytes", type=int, default=262144)
    ap.add_argument("--bench", action="store_true",
                    help="time 5 steps at each context and exit (sizing the run)")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    train, held, ftrain, fheld = split_streams()
    print(f"text: {len(ftrain)} training files ({len(train)} bytes), {len(fheld)} held-out "
          f"files ({len(held)} bytes), {TEXT_GLOB}", flush=True)
    model = TinyLM()
    nparams = sum(p.numel() for p in model.parameters())
    print(f"model: {nparams} parameters, {CONFIG}", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "emb" not in n]
    other = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "emb" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95))
    t = as_tensor(train)
    gen = torch.Generator().manual_seed(a.seed + 1)
    phases = [(256, 16, a.steps), (1024, 4, a.long_steps)]
    if a.bench:
        phases = [(256, 16, 5), (1024, 4, 5)]
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
    torch.save({"config": CONFIG, "state_dict": sd, "meta": meta}, a.out)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
