"""favor.models: the recall models trained here (data/mqar/, scripts/train_mqar.py) and their task.

    from favor.models import load_mqar, mqar_batch, recall
    model, meta = load_mqar("data/mqar/L64_kv4_d64/model.pt")
    tokens, labels = mqar_batch(256, 64, 4, 256, seed=meta["check"]["seed"])
    recall(model, tokens, labels)          # == meta["check"]["recall"]
    favor.swap_in(model, (tokens, labels), variants, metric="recall")   # with favor's attention

MQAR (multi-query associative recall, Zoology's data/multiquery_ar.py, random_non_queries=False):
an example of length L holds `pairs` key-value pairs k1 v1 ... kp vp (keys distinct, from
[1, V/2); values distinct, from [V/2, V)), then every key once more as a query at position
2 pairs + 2 g, the gaps g in [0, (L - 2 pairs) / 2) drawn without replacement with
p(g) proportional to a (g + 1)^(a - 1), a = 0.01; every other position holds 0. The label at a
query position is its key's value, -100 (ignored) elsewhere; recall is the top-1 accuracy on
the query positions.

The model (MQARModel): token embedding + learned absolute position embedding, a token shift
(x + a causal depthwise convolution of width 2, so each position sees its predecessor's
token), then n_layers pre-LayerNorm attention-only blocks (x + attn(LN(x)), no MLP), a final
LayerNorm and an untied linear read-out to the V logits. Each attention layer (CausalAttention)
has q_proj / k_proj / v_proj / out_proj linear layers (scripts/capture_qkv.py's layout 2) and
follows favor.swap_in's protocol (attention_fn; docs/design.md section 9.1).

torch is imported with this module (it is not imported by ``import favor``).
"""
import json
import os
import pickle
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

POWER_A = 0.01   # Zoology's power_a: p(g) ~ a (g + 1)^(a - 1)


def _error(msg):
    """favor.Error (a ValueError) when loaded as favor.models; a ValueError when
    scripts/train_mqar.py loads this file alone (it needs torch and numpy, not the extension)."""
    fav = sys.modules.get("favor")
    return getattr(fav, "Error", ValueError)(msg)


def mqar_batch(n, L, pairs, vocab=256, seed=0):
    """n MQAR examples (the module docstring): (tokens, labels), torch int64 tensors (n, L),
    labels -100 off the query positions. seed: an int, or a numpy Generator to draw from (the
    training stream). The same seed gives the same batch."""
    if vocab % 2 or not 1 <= pairs < vocab // 2 or L % 2 or 4 * pairs > L or n < 1:
        raise _error(f"mqar_batch: needs an even vocab, 1 <= pairs < vocab / 2, an even L >= 4 pairs and n >= 1; "
                     f"got n {n}, L {L}, pairs {pairs}, vocab {vocab}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    half, ctx, space = vocab // 2, 2 * pairs, (L - 2 * pairs) // 2
    keys = rng.random((n, half - 1)).argsort(axis=1)[:, :pairs] + 1
    values = rng.random((n, vocab - half)).argsort(axis=1)[:, :pairs] + half
    p = POWER_A * np.arange(1, space + 1, dtype=np.float64) ** (POWER_A - 1)
    # Weighted draws without replacement (Efraimidis-Spirakis): the `pairs` smallest E / p,
    # E exponential, are distributed as numpy's sequential choice(replace=False, p=p).
    gaps = (rng.exponential(size=(n, space)) / p).argsort(axis=1)[:, :pairs]
    tokens = np.zeros((n, L), dtype=np.int64)
    tokens[:, 0:ctx:2], tokens[:, 1:ctx:2] = keys, values
    labels = np.full((n, L), -100, dtype=np.int64)
    where = ctx + 2 * gaps
    np.put_along_axis(tokens, where, keys, axis=1)
    np.put_along_axis(labels, where, values, axis=1)
    return torch.from_numpy(tokens), torch.from_numpy(labels)


class CausalAttention(nn.Module):
    """Causal multi-head self-attention: x (B, L, d_model) -> (B, L, d_model).
    q, k, v = q_proj(x), k_proj(x), v_proj(x) split into num_heads heads (B, H, L, head_dim);
    softmax(q k^T * scale, causal) v with scale = head_dim ** -0.5, or attention_fn(q, k, v,
    scale, True) when favor.swap_in sets it; heads joined, then out_proj."""
    is_causal = True
    attention_fn = None

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.scale = self.head_dim ** -0.5
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (
            nn.Linear(d_model, d_model, bias=False) for _ in range(4))

    def forward(self, x):
        B, L, _ = x.shape
        q, k, v = (p(x).view(B, L, self.num_heads, self.head_dim).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        if self.attention_fn is not None:
            o = self.attention_fn(q, k, v, self.scale, True)
        else:
            s = (q * self.scale) @ k.transpose(-1, -2)
            mask = torch.ones(L, L, dtype=torch.bool, device=x.device).triu(1)
            o = s.masked_fill(mask, float("-inf")).softmax(dim=-1) @ v
        return self.out_proj(o.transpose(1, 2).reshape(B, L, self.num_heads * self.head_dim))


class MQARModel(nn.Module):
    """tokens (B, L) int64 -> logits (B, L, vocab); config keys vocab, d_model, n_heads,
    n_layers, max_len (the module docstring has the architecture)."""

    def __init__(self, config):
        super().__init__()
        c = self.config = dict(config)
        d = c["d_model"]
        self.emb = nn.Embedding(c["vocab"], d)
        self.pos = nn.Embedding(c["max_len"], d)
        self.shift = nn.Conv1d(d, d, kernel_size=2, groups=d)   # a x_{t-1} + b x_t + c per channel
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(c["n_layers"]))
        self.attns = nn.ModuleList(CausalAttention(d, c["n_heads"]) for _ in range(c["n_layers"]))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, c["vocab"], bias=False)
        for w in (self.emb.weight, self.pos.weight, self.head.weight,
                  *(p.weight for a in self.attns for p in (a.q_proj, a.k_proj, a.v_proj, a.out_proj))):
            nn.init.normal_(w, std=0.02)

    def forward(self, tokens):
        return self.head(self.hidden(tokens))

    def hidden(self, tokens):
        """The final LayerNorm's output (B, L, d_model), which head maps to the logits."""
        L = tokens.shape[1]
        x = self.emb(tokens) + self.pos(torch.arange(L, device=tokens.device))
        x = x + self.shift(F.pad(x.transpose(1, 2), (1, 0))).transpose(1, 2)
        for norm, attn in zip(self.norms, self.attns):
            x = x + attn(norm(x))
        return self.ln_f(x)


def query_loss(logits, labels):
    """Mean cross entropy over the query positions (labels != -100): logits (B, L, V)."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)


@torch.no_grad()
def recall_counts(model, tokens, labels):
    """Per example, int64 tensors (n,): hits (its query positions, labels != -100, where the
    argmax of model's logits is the label) and queries. tokens, labels (n, L) int64."""
    q = labels != -100
    hit = (model(tokens).argmax(dim=-1) == labels) & q
    return hit.sum(dim=1), q.sum(dim=1)


def recall(model, tokens, labels, batch=64):
    """Top-1 accuracy of model's logits on the query positions (labels != -100): tokens,
    labels (n, L) int64 (as mqar_batch returns them), run in batches of `batch` examples."""
    hit = total = 0
    for s in range(0, tokens.shape[0], batch):
        h, q = recall_counts(model, tokens[s:s + batch], labels[s:s + batch])
        hit += int(h.sum())
        total += int(q.sum())
    return hit / total


def config_path(weights):
    """The JSON beside a weights file: DIR/model.pt -> DIR/model.json."""
    return os.path.splitext(weights)[0] + ".json"


def save_mqar(weights, model, meta):
    """Writes model's state_dict (float32 tensors, torch.save: readable with
    torch.load(weights_only=True)) to `weights` and {"config": model.config, **meta} as JSON
    beside it."""
    torch.save({k: v.detach().float().contiguous() for k, v in model.state_dict().items()}, weights)
    with open(config_path(weights), "w") as f:
        json.dump({"config": model.config, **meta}, f, indent=2)
        f.write("\n")


def load_mqar(weights):
    """(MQARModel in eval mode, float32; its JSON: config, recipe and recorded recall) from a
    weights file of scripts/train_mqar.py and the model.json beside it. The weights are read
    with torch.load(weights_only=True) (tensors only: loading runs no code)."""
    try:
        sd = torch.load(weights, map_location="cpu", weights_only=True)
        with open(config_path(weights)) as f:
            meta = json.load(f)
        model = MQARModel(meta["config"])
        model.load_state_dict(sd)
    except (OSError, RuntimeError, ValueError, KeyError, TypeError, pickle.UnpicklingError) as e:
        raise _error(f"{weights}: cannot load the MQAR model: {type(e).__name__}: {e}".splitlines()[0]) from None
    return model.eval(), meta
