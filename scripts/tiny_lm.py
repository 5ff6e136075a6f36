#!/usr/bin/python3
"""The tiny byte-level language model of data/: its architecture, the user function that
captures its attention, and the loader of the committed weights. Imported by
scripts/train_tiny_lm.py (which trains it) and scripts/capture_qkv.py (whose command line
captures it), so neither imports the other.

Model (TinyLM): vocabulary 256 (bytes), d_model 128, 4 layers, 2 heads of dimension 64 (8
heads in all), MLP 4x with GELU, pre-LayerNorm, RoPE (base 10000, rotate-half on the head
dimension) on q and k, causal softmax attention with the logit scale 1/sqrt(64), input and
output embeddings tied (CONFIG below).

Run as a script, it prints the configuration, parameter count and saved meta of a weights
file:
    /usr/bin/python3 scripts/tiny_lm.py [WEIGHTS (default data/tiny_lm.pt)]
"""
import argparse
import json
import math
import os
import pickle
import sys

import torch
import torch.nn as nn

CONFIG = {"vocab": 256, "d_model": 128, "n_layers": 4, "n_heads": 2, "head_dim": 64,
          "mlp": 512, "rope_base": 10000.0, "context": 1024}


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
    concatenated).

    attention_fn: None (the exact softmax above), or a function (q, k, v, scale, causal) ->
    (B, H, L, head_dim) that forward uses in its place: favor.swap_in's protocol (it sets and
    restores it; docs/design.md section 9)."""
    is_causal = True
    attention_fn = None

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
        if self.attention_fn is not None:
            o = self.attention_fn(q, k, v, self.scale, True)
        else:
            s = (q @ k.transpose(-1, -2)) * self.scale
            mask = torch.ones(L, L, dtype=torch.bool, device=x.device).triu(1)
            o = s.masked_fill(mask, float("-inf")).softmax(dim=-1) @ v
        o = o.transpose(1, 2).reshape(B, L, self.n_heads * self.head_dim)
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


def config_path(weights):
    """The JSON file beside a weights file that holds its config and meta: X.pt -> X.json."""
    return os.path.splitext(weights)[0] + ".json"


def save_tiny_lm(path, state_dict, config, meta):
    """Writes the weights as a plain state_dict of tensors (torch.save, readable with
    torch.load(weights_only=True): no pickled code) and config and meta as JSON beside them."""
    torch.save({k: v.contiguous() for k, v in state_dict.items()}, path)
    with open(config_path(path), "w") as f:
        json.dump({"config": config, "meta": meta}, f, indent=2)
        f.write("\n")


def load_tiny_lm(path):
    """The committed model in float32, eval mode, and its saved meta. The weights are read
    with torch.load(weights_only=True) (tensors only: a weights file cannot run code)."""
    try:
        sd = torch.load(path, map_location="cpu", weights_only=True)
        with open(config_path(path)) as f:
            blob = json.load(f)
    except (OSError, RuntimeError, ValueError, pickle.UnpicklingError) as e:
        sys.exit(f"{path}: cannot load the model: {e}")
    model = TinyLM(blob["config"])
    model.load_state_dict({k: v.float() for k, v in sd.items()})
    return model.eval(), blob.get("meta", {})


def main(argv=None):
    ap = argparse.ArgumentParser(usage="%(prog)s [WEIGHTS]", description=__doc__.split("\n")[0])
    ap.add_argument("weights", nargs="?",
                    default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "tiny_lm.pt"),
                    help="a state_dict file of scripts/train_tiny_lm.py, its config and meta in the .json beside it "
                         "(default data/tiny_lm.pt)")
    a = ap.parse_args(argv)
    model, meta = load_tiny_lm(a.weights)
    print(f"{os.path.relpath(a.weights)}: {sum(p.numel() for p in model.parameters())} parameters, "
          f"config {model.config}")
    for key, value in meta.items():
        print(f"  {key}: {value}")


if __name__ == "__main__":
    main()
