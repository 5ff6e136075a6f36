#!/usr/bin/python3
"""Capture the Q, K, V that enter softmax in a PyTorch model's attention layers, as .npy files
favor reads, with a manifest and one favor config per layer.

Python:
    from capture_qkv import capture
    manifest = capture(model, *args, out="DIR", causal=None, qkv_fn=None, layers=None,
                       loss_fn=None, out_proj=None, **kwargs)

runs model(*args, **kwargs) once (under torch.no_grad) and writes, per attention layer
(numbered 0, 1, ... in the order of model.named_modules()):
  DIR/layer<i>/q.npy, k.npy, v.npy   (B, H, L, d), (B, H, Lk, d), (B, H, Lk, d_v), in the
                                     model's dtype (float32 or float64; others as float32),
                                     or store_dtype (float16) after the self-check
  DIR/layer<i>/g.npy                 (B, H, L, d_v) with loss_fn: the upstream gradient
                                     dLoss/dOut of the layer's heads (below), float32 (float64
                                     for a float64 model; never store_dtype)
  DIR/layer<i>.json                  a favor config: exact-vs-estimator comparison on the
                                     layer's heads (`favor run DIR/layer<i>.json`)
  DIR/manifest.json                  layer names, B, H, L, Lk, d, d_v, causal (and
                                     "causal_from", below), dtype, the model's logit scale,
                                     the factor q was multiplied by, sha256 of every file,
                                     how each layer was captured, the self-check's result
                                     ("check", below)
and returns the manifest (a dict). DIR: a missing or empty folder, or an earlier capture
(a manifest.json of format "favor capture 1"), whose manifest.json, layer<i>/ and
layer<i>.json are replaced and whose other files stay; any other folder is refused before the
model runs. The files are written into a temporary folder beside DIR (.DIR.capture-*) and
moved in at the end, the earlier capture's manifest out first and the new one in last: DIR
holds the earlier capture until then, a whole new one after, and no manifest.json only if
killed during those renames. All layers: `for c in DIR/layer*.json; do favor run "$c";
done` (one favor config per layer because a favor npy input is one (B, H, L, d) set of heads
of one length).

Scaling: favor's exact attention is softmax(q k^T / sqrt(d)) v. A model whose logits are
s q k^T with s != 1/sqrt(d) is written as q * s * sqrt(d) (k and v as they are), so favor's
exact attention on the files equals the model's; the manifest records s ("scale") and the
factor ("q_multiplied_by").

Which modules are attention layers (layers=None: detected, outermost first; a detected
module's submodules are not searched further):
  1. torch.nn.MultiheadAttention: q, k, v from in_proj_weight / in_proj_bias (or
     q_proj_weight, k_proj_weight, v_proj_weight), batch_first or not, scale 1/sqrt(d).
     Causal: attn_mask equal to the causal mask (boolean upper triangle True, or float
     upper triangle -inf and 0 elsewhere), or is_causal=True (torch >= 2 passes it);
     no attn_mask: not causal. Refused (one line, naming the layer): any other attn_mask,
     key_padding_mask, add_bias_kv, add_zero_attn.
  2. Separate projections: a module with children q_proj, k_proj, v_proj (Hugging Face
     Llama, OPT, BART, ...) or query, key, value (BERT, ViT): forward hooks record the
     projections' outputs; heads from the first of the attributes num_heads,
     num_attention_heads, n_heads, n_head (head_dim: attribute head_dim or
     attention_head_size, else width / heads); fewer key/value heads (num_key_value_heads,
     grouped-query attention) are repeated to the query heads. Scale: attribute scaling or
     scale if it is a number, else 1/sqrt(d).
  3. A fused projection: a child named qkv or c_attn (GPT-2) whose output (..., 3 E) is
     split into q, k, v of width E each, in that order, then into heads as in 2.
  Layouts 2 and 3 capture the projections' outputs; a module that transforms them further
  inside its forward (rotary embeddings, q/k normalisation) would be captured wrongly, so a
  module with an attribute or child whose name contains "rotary" or "rope" is refused
  unless qkv_fn handles it.
  4. Anything else: qkv_fn(module, args, kwargs) is called (before the detection) on every
     module in layers, or on every module when layers is None, with the module's own
     positional and keyword arguments; it returns None (not an attention layer, or one to
     detect) or (q, k, v) or (q, k, v, scale): torch tensors (B, H, L, d), (B, H, Lk, d),
     (B, H, Lk, d_v), exactly the tensors whose softmax(scale q k^T) v the module computes
     (scale default 1/sqrt(d)). Example: scripts/tiny_lm.py's tiny_qkv, used by the
     command line below.
  layers: a list of module names (as in model.named_modules()) to capture instead of the
  detected ones; each must be an attention layer by 1-4.

Self-check (every layer, output_check): the capture rebuilds the layer's attention output
from the captured q, k, v, softmax(scale q k^T) v in float64 with the layer's causal mask,
heads concatenated, through its out projection where it has one (the first child named
out_proj, o_proj, c_proj, proj or out; an nn.Linear in float64, another module in the
layer's dtype; out_proj= names another child, or is a callable of the layer returning its out
projection or None), and compares it with the layer's own output in the same forward (the
first entry of a tuple output). A layer whose causality is not declared (below) is rebuilt
with and without the causal mask: exactly one must match (both: refused, pass causal=). A
failing check with no out projection found says so, naming an nn.Linear child through which
it would pass. They must agree within sqrt(u) * max |own output|, u the unit roundoff of
the output's dtype (2^-24 float32, 2^-53 float64, 2^-11 float16, 2^-8 bfloat16): the
layer's own rounding stays far below (data/'s model: 1e-6 against 4e-4), while q, k or v
that are not what enters the softmax (rotary embeddings applied inside forward under any
name, a wrong scale, head split, causal declaration or out projection, a mask) are off by
O(1) relative. Otherwise CaptureError names the layer and nothing is written. The manifest
records each layer's "check": rebuilt_through, max_abs_diff, max_abs_output, tolerance,
rule, passed (and other_mask_diff, the rejected mask's difference, where the check decided
causality). A layer whose output cannot be rebuilt so (another shape) is refused; pass
qkv_fn.

Upstream gradient (loss_fn, issue 41 item 2): the gradient metrics (grad_*, docs/design.md
section 3) take G = dLoss/dOut, the gradient of the model's loss with respect to the layer's
attention output per head (before its out projection). With loss_fn the capture runs the model
a second time with autograd on and takes the gradient of loss_fn's scalar with respect to
each captured layer's own output (the tensor the self-check compares), carried back through
its out projection where the self-check rebuilt one (an nn.Linear y = x W^T + b: dL/dx =
dL/dy W, in float64; another module is refused), split into heads as the self-check joins
them: G of the concatenated heads (B, L, H d_v) -> (B, H, L, d_v). loss_fn is a callable
taking the model's output and returning a scalar tensor, or "next_token": the next-token
cross-entropy of a causal LM, args[0] the token ids (B, L) and the output (or its first entry,
or its .logits) the logits (B, L, V): mean over the B (L - 1) predicted positions. The
manifest's per-layer "upstream_gradient" records the loss and the file. The parameters'
.grad are not touched (torch.autograd.grad). Both forwards start from one seed (drawn from
the caller's generator inside torch.random.fork_rng, which restores it afterwards), so dropout
in training mode draws the same masks; each layer's output in the gradient pass must equal the
captured one within the self-check's tolerance, else CaptureError naming the layer.

Masks: layouts 2 and 3 read the projections' outputs, which no mask touches, so a call of
the layer or of a projection with a non-None argument whose name contains "mask" (by
keyword or position: attention_mask, padding_mask, ...) is refused, naming the module;
MultiheadAttention's masks as in 1. With qkv_fn a mask that changes the output fails the
self-check. favor's attention is unmasked or causal; masks are refused, not honoured.

Causal (per layer): the causal= argument when given (True/False for every layer); else
MultiheadAttention's mask as above; else the module's attribute is_causal, causal or
is_decoder (the first present; Hugging Face decoders set is_causal); else the self-check's
proof (above), never assumed. The manifest's causal_from says which: "argument", "the call's
attn_mask / is_causal", "attribute <name>" or "self-check".
favor's causal attention is row i sees keys j <= i, so a causal layer needs Lk == L.

Each layer<i>.json's output_dir is out/capture_<DIR name>_layer<i> under the working
directory of the capture, written relative to DIR (a config's relative paths are taken from
its folder, docs/design.md section 5).

Command line, for the committed tiny model (scripts/tiny_lm.py, trained by
scripts/train_tiny_lm.py; the weights read with torch.load(weights_only=True), the config
from the .json beside them):
    /usr/bin/python3 scripts/capture_qkv.py --text FILE --L N --out DIR
        [--model data/tiny_lm.pt] [--offset BYTES]
reads N bytes of FILE from --offset (default 0) and captures every layer of the model run
on them (batch 1, causal), with the next-token cross-entropy's upstream gradient (g.npy;
--no-grad leaves it out).
"""
import argparse
import hashlib
import inspect
import json
import math
import os
import re
import shutil
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))


class CaptureError(Exception):
    """A user-facing error: the message names the layer or file."""


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _heads_attr(m):
    for a in ("num_heads", "num_attention_heads", "n_heads", "n_head"):
        v = getattr(m, a, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def _kv_heads_attr(m, heads):
    for a in ("num_key_value_heads", "n_kv_heads", "num_kv_heads"):
        v = getattr(m, a, None)
        if isinstance(v, int) and v > 0:
            return v
    return heads


def _scale_attr(m):
    for a in ("scaling", "scale"):
        v = getattr(m, a, None)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    return None


def _causal_attr(m):
    """(value, attribute name) of the first causal attribute the module has, or (None, None)."""
    for a in ("is_causal", "causal", "is_decoder"):
        v = getattr(m, a, None)
        if isinstance(v, bool):
            return v, a
    return None, None


def _rotary_like(m):
    names = list(vars(m).keys()) + [n for n, _ in m.named_children()]
    names += [n for n in dir(type(m)) if not n.startswith("__")]
    return [n for n in names if "rotary" in n.lower() or "rope" in n.lower()]


def _layout(m):
    """The detected layout of a module, or None."""
    if isinstance(m, torch.nn.MultiheadAttention):
        return "MultiheadAttention"
    ch = dict(m.named_children())
    if all(n in ch for n in ("q_proj", "k_proj", "v_proj")):
        return "q_proj/k_proj/v_proj"
    if all(n in ch for n in ("query", "key", "value")):
        return "query/key/value"
    for n in ("qkv", "c_attn"):
        if n in ch:
            return n
    return None


def _split_heads(x, heads, name, what):
    """(B, L, H*d) -> (B, H, L, d)."""
    if x.dim() != 3:
        raise CaptureError(f"{name}: {what} output has shape {tuple(x.shape)}, expected "
                           "(batch, length, width); pass qkv_fn for this layout")
    B, L, W = x.shape
    if W % heads:
        raise CaptureError(f"{name}: {what} width {W} is not a multiple of {heads} heads")
    return x.reshape(B, L, heads, W // heads).transpose(1, 2)


def _mha_causal(mask, L, Lk, name):
    if mask is None:
        return False
    if mask.dim() != 2 or tuple(mask.shape) != (L, Lk):
        raise CaptureError(f"{name}: attn_mask of shape {tuple(mask.shape)} is not supported "
                           f"(only the causal ({L}, {Lk}) mask); pass qkv_fn")
    upper = torch.ones(L, Lk, dtype=torch.bool, device=mask.device).triu(1)
    if mask.dtype == torch.bool:
        ok = torch.equal(mask, upper)
    else:
        ok = bool(torch.all(torch.isneginf(mask[upper]))) and bool(torch.all(mask[~upper] == 0))
    if not ok or L != Lk:
        raise CaptureError(f"{name}: attn_mask is not the causal mask (True / -inf above the "
                           "diagonal, False / 0 elsewhere); other masks are not supported")
    return True


def _mha_qkv(m, name, args, kwargs):
    """q, k, v (B, H, L, d) and causal of a MultiheadAttention call."""
    names = ("query", "key", "value", "key_padding_mask", "need_weights", "attn_mask",
             "average_attn_weights", "is_causal")
    call = dict(zip(names, args))
    call.update(kwargs)
    if call.get("key_padding_mask") is not None:
        raise CaptureError(f"{name}: key_padding_mask is not supported")
    if m.bias_k is not None or m.add_zero_attn:
        raise CaptureError(f"{name}: add_bias_kv / add_zero_attn are not supported")
    query, key, value = call["query"], call["key"], call["value"]
    if query.dim() != 3:
        raise CaptureError(f"{name}: unbatched input {tuple(query.shape)} is not supported")
    if not m.batch_first:
        query, key, value = (t.transpose(0, 1) for t in (query, key, value))
    H = m.num_heads
    if m._qkv_same_embed_dim:
        wq, wk, wv = m.in_proj_weight.chunk(3)
    else:
        wq, wk, wv = m.q_proj_weight, m.k_proj_weight, m.v_proj_weight
    bq = bk = bv = None
    if m.in_proj_bias is not None:
        bq, bk, bv = m.in_proj_bias.chunk(3)
    F = torch.nn.functional
    q = _split_heads(F.linear(query, wq, bq), H, name, "q")
    k = _split_heads(F.linear(key, wk, bk), H, name, "k")
    v = _split_heads(F.linear(value, wv, bv), H, name, "v")
    causal = _mha_causal(call.get("attn_mask"), q.shape[2], k.shape[2], name)
    if call.get("is_causal"):
        causal = True
    return q, k, v, causal


_PROJECTIONS = {"q_proj/k_proj/v_proj": ("q_proj", "k_proj", "v_proj"),
                "query/key/value": ("query", "key", "value"), "qkv": ("qkv",), "c_attn": ("c_attn",)}


class _Recorder:
    """Wraps the forward of the layers to capture and, for the projection layouts, of their
    projections, recording each call's arguments and output. torch 1.13's forward hooks do
    not see keyword arguments, hence wrappers."""

    def __init__(self, named, layout):
        self.named, self.layout = named, layout
        self.calls = {n: [] for n, _ in named}   # name -> [(args, kwargs, output)]
        self.proj = {}                           # name -> {child: [(args, kwargs, output)]}
        self.undo = []

    def __enter__(self):
        for name, m in self.named:
            self._wrap(m, self.calls[name])
            for kid in _PROJECTIONS.get(self.layout[name], ()):
                self._wrap(getattr(m, kid), self.proj.setdefault(name, {}).setdefault(kid, []))
        return self

    def _wrap(self, m, record):
        orig = m.forward

        def wrapper(*args, **kwargs):
            out = orig(*args, **kwargs)
            record.append((args, kwargs, out))
            return out
        own = vars(m).get("forward")  # an instance-level forward set by someone else
        m.forward = wrapper
        self.undo.append((m, own))

    def __exit__(self, *exc):
        for m, own in reversed(self.undo):
            if own is None:
                del m.forward  # the class's forward shows again
            else:
                m.forward = own
        return False


def _find_layers(model, qkv_fn, layers):
    """[(name, module, layout)]; layout "qkv_fn" when the user function is to decide."""
    mods = dict(model.named_modules())
    if layers is not None:
        out = []
        for n in layers:
            if n not in mods:
                raise CaptureError(f"layers: no module named {n!r} in the model")
            lay = _layout(mods[n])
            if lay is None and qkv_fn is None:
                raise CaptureError(f"layers: module {n!r} ({type(mods[n]).__name__}) is not a "
                                   "supported attention layout; pass qkv_fn")
            out.append((n, mods[n], lay))
        return out
    out, taken = [], []
    for n, m in model.named_modules():
        if any(n.startswith(t + ".") for t in taken):
            continue
        lay = _layout(m)
        if lay is not None or qkv_fn is not None:
            out.append((n, m, lay))
            if lay is not None:
                taken.append(n)
    return out


def _to_numpy(t):
    t = t.detach().cpu()
    if t.dtype not in (torch.float32, torch.float64):
        t = t.float()
    return np.ascontiguousarray(t.numpy())


def _check_qkv(name, q, k, v, causal):
    if not (q.dim() == k.dim() == v.dim() == 4):
        raise CaptureError(f"{name}: q, k, v must be (B, H, L, d); got {tuple(q.shape)}, "
                           f"{tuple(k.shape)}, {tuple(v.shape)}")
    if q.shape[:2] != k.shape[:2] or k.shape[:3] != v.shape[:3] or q.shape[3] != k.shape[3]:
        raise CaptureError(f"{name}: q {tuple(q.shape)}, k {tuple(k.shape)}, v "
                           f"{tuple(v.shape)} do not fit together")
    if causal and q.shape[2] != k.shape[2]:
        raise CaptureError(f"{name}: causal with {q.shape[2]} queries and {k.shape[2]} keys; "
                           "favor's causal attention needs as many")
    for w, t in (("q", q), ("k", k), ("v", v)):
        if not torch.isfinite(t).all():
            raise CaptureError(f"{name}: {w} has non-finite entries")


# Unit roundoff u of the dtypes a layer computes in (its output's dtype).
UNIT_ROUNDOFF = {torch.float64: 2.0 ** -53, torch.float32: 2.0 ** -24, torch.float16: 2.0 ** -11,
                 torch.bfloat16: 2.0 ** -8}
# Out projections a layer may apply to its heads' concatenated outputs (children by name).
_OUT_PROJECTIONS = ("out_proj", "o_proj", "c_proj", "proj", "out")


def _own_output(m, output):
    """The layer's own attention output as (B, L, width): the first entry of a tuple output,
    (L, B, E) transposed for a MultiheadAttention that is not batch_first."""
    o = output[0] if isinstance(output, (tuple, list)) and output else output
    if not torch.is_tensor(o):
        return None
    if isinstance(m, torch.nn.MultiheadAttention) and not m.batch_first and o.dim() == 3:
        o = o.transpose(0, 1)
    return o


def _out_projection(name, m, out_proj=None):
    """(name, projection) of the layer's out projection, or (None, None) for none: out_proj None
    takes the first child named in _OUT_PROJECTIONS; a str names the child; a callable of the
    layer returns the projection (a module or function of (B, L, H dv)) or None."""
    kids = dict(m.named_children())
    if out_proj is None:
        n = next((n for n in _OUT_PROJECTIONS if n in kids), None)
        return n, kids.get(n)
    if isinstance(out_proj, str):
        if out_proj not in kids:
            raise CaptureError(f"{name}: out_proj={out_proj!r}: the layer has no child of that name "
                               f"(its children: {', '.join(kids) or 'none'})")
        return out_proj, kids[out_proj]
    if not callable(out_proj):
        raise CaptureError(f"out_proj: a child's name or a callable of the layer, got {out_proj!r}")
    p = out_proj(m)
    if p is None:
        return None, None
    if not callable(p):
        raise CaptureError(f"{name}: out_proj returned {type(p).__name__}, not a module or function")
    return next((n for n, c in kids.items() if c is p), getattr(p, "__name__", type(p).__name__)), p


def _rebuilt_output(proj, q, k, v, scale, causal):
    """softmax(scale q k^T) v from the captured tensors, in float64, heads concatenated
    (B, L, H dv), through the out projection proj where there is one (an nn.Linear in float64,
    another module in the layer's dtype)."""
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    if causal:
        L, Lk = s.shape[-2:]
        s = s.masked_fill(torch.ones(L, Lk, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    o = s.softmax(-1) @ v.double()
    B, H, L, dv = o.shape
    o = o.transpose(1, 2).reshape(B, L, H * dv)
    if isinstance(proj, torch.nn.Linear):
        b = None if proj.bias is None else proj.bias.double()
        return torch.nn.functional.linear(o, proj.weight.double(), b)
    return o if proj is None else proj(o.to(q.dtype)).double()


def output_check(name, m, q, k, v, scale, causal, output, proj=(None, None)):
    """Checks a capture against the layer itself (docs/design.md section 9, capture): the
    attention rebuilt from q, k, v (_rebuilt_output, through proj = _out_projection()) must
    equal the layer's own output on the same input within sqrt(u) * max |own output|, u the
    unit roundoff of the output's dtype (2^-24 for float32): a layer computing in that dtype
    keeps more than half its digits, while a capture that misses a transformation of q or k
    (rotary embeddings applied inside forward), a scale, a mask or the out projection is off
    by O(1) relative. causal None (not declared): rebuilt with and without the causal mask,
    exactly one must match. Returns the manifest's record and the causal flag; raises
    CaptureError naming the layer otherwise."""
    pname, p = proj
    own = _own_output(m, output)
    if own is None:
        raise CaptureError(f"{name}: cannot check the capture: the layer's output is not a tensor; pass qkv_fn")
    u = UNIT_ROUNDOFF.get(own.dtype, 2.0 ** -24)
    size = float(own.double().abs().max())
    tol = math.sqrt(u) * size
    options = [causal] if causal is not None else [False] + ([True] if q.shape[2] == k.shape[2] else [])

    def diff(p, c):   # max |own - rebuilt| through projection p with mask c; inf for another shape
        rebuilt = _rebuilt_output(p, q, k, v, scale, c)
        return float((own.double() - rebuilt).abs().max()) if rebuilt.shape == own.shape else math.inf

    diffs = {c: diff(p, c) for c in options}
    passed = [c for c in options if diffs[c] <= tol]
    through = f" through {pname}" if pname else ""
    if len(passed) == 2:
        raise CaptureError(f"{name}: the attention rebuilt from the captured q, k, v{through} matches the "
                           f"layer's own output both with and without the causal mask (differences "
                           f"{diffs[False]:.3g}, {diffs[True]:.3g}, tolerance {tol:.3g}); pass causal=True or False")
    if not passed and pname is None:
        # An out projection under a name the capture does not know: say so, naming a child that fits.
        width = q.shape[1] * v.shape[3]
        fits = [n for n, kid in m.named_children() if isinstance(kid, torch.nn.Linear)
                and kid.in_features == width and min(diff(kid, c) for c in options) <= tol]
        if fits:
            raise CaptureError(f"{name}: no out projection found (no child named {', '.join(_OUT_PROJECTIONS)}), "
                               f"and the attention rebuilt from the captured q, k, v equals the layer's output "
                               f"through its child {fits[0]!r}: pass out_proj={fits[0]!r} (or a callable of the "
                               "layer returning its out projection)")
    if not passed:
        other = "" if pname else (" (or out_proj=, if its out projection is not a child named "
                                  f"{', '.join(_OUT_PROJECTIONS)})")
        best = min(diffs.values())
        if best == math.inf:
            shape = tuple(_rebuilt_output(p, q, k, v, scale, options[0]).shape)
            raise CaptureError(f"{name}: cannot check the capture: the layer's output has shape "
                               f"{tuple(own.shape)}, the attention rebuilt from q, k, v{through} {shape}; "
                               "pass qkv_fn" + other)
        masks = " with or without the causal mask" if len(options) == 2 else ""
        raise CaptureError(f"{name}: the attention rebuilt from the captured q, k, v{through}{masks} "
                           f"differs from the layer's own output by {best:.3g} (max |output| {size:.3g}, "
                           f"tolerance {tol:.3g}): q, k or v is not what enters the softmax (rotary embeddings "
                           "or a mask inside forward? dropout: model.eval()?); pass qkv_fn" + other)
    c = passed[0]
    record = {"rebuilt_through": pname, "max_abs_diff": diffs[c], "max_abs_output": size,
              "tolerance": tol, "rule": "max |own - rebuilt| <= sqrt(u) max |own|, u = "
              f"{u:.3g} ({str(own.dtype).replace('torch.', '')})", "passed": True}
    if len(options) == 2:   # the check decided the mask: the other one's difference proves it
        record["other_mask_diff"] = diffs[not c]
    return record, c


def _mask_arguments(fn, args, kwargs):
    """The names of a call's arguments whose name contains "mask" and that are not None."""
    try:
        sig = inspect.signature(fn)
        bound = sig.bind_partial(*args, **kwargs).arguments
    except (TypeError, ValueError):
        return [n for n, x in kwargs.items() if "mask" in n.lower() and x is not None]
    names = []
    for n, x in bound.items():
        if sig.parameters[n].kind is inspect.Parameter.VAR_KEYWORD:
            names += [k for k, y in x.items() if "mask" in k.lower() and y is not None]
        elif "mask" in n.lower() and x is not None:
            names.append(n)
    return names


def _refuse_masks(name, m, call, proj):
    """Layouts 2 and 3 read the projections' outputs, which no mask has touched: a mask
    passed to the layer or to a projection is refused rather than ignored."""
    for who, mod, calls in [(name, m, [call])] + [(f"{name}.{kid}", getattr(m, kid), c)
                                                   for kid, c in proj.items()]:
        for cargs, ckwargs, _ in calls:
            masks = _mask_arguments(type(mod).forward, (mod,) + tuple(cargs), ckwargs)
            if masks:
                raise CaptureError(f"{who}: called with {masks[0]}: masks are not captured "
                                   "(favor's attention is unmasked or causal); pass qkv_fn")


def _projection_qkv(name, m, lay, proj):
    """q, k, v (B, H, L, d), scale and how, from the recorded projection outputs (layouts 2, 3)."""
    rot = _rotary_like(m)
    if rot:
        raise CaptureError(f"{name}: has {rot[0]!r}: rotary embeddings are applied "
                           "after the projections; pass qkv_fn")
    heads = _heads_attr(m)
    if heads is None:
        raise CaptureError(f"{name}: no attribute num_heads / num_attention_heads "
                           "/ n_heads / n_head; pass qkv_fn")
    for kid, calls in proj.items():
        if len(calls) != 1:
            raise CaptureError(f"{name}.{kid}: called {len(calls)} times in one forward of "
                               f"{name}; pass qkv_fn")
    outs = {kid: calls[0][2] for kid, calls in proj.items()}
    if lay in ("q_proj/k_proj/v_proj", "query/key/value"):
        q, k, v = (outs[kid] for kid in lay.split("/"))
    else:
        fused = outs[lay]
        if fused.shape[-1] % 3:
            raise CaptureError(f"{name}: {lay} width {fused.shape[-1]} is not 3 E")
        q, k, v = fused.split(fused.shape[-1] // 3, dim=-1)
    kvh = _kv_heads_attr(m, heads)
    q = _split_heads(q, heads, name, "q")
    k = _split_heads(k, kvh, name, "k")
    v = _split_heads(v, kvh, name, "v")
    how = f"forward hooks on {lay} outputs, split into {heads} heads"
    if kvh != heads:
        if heads % kvh:
            raise CaptureError(f"{name}: {heads} heads and {kvh} key/value heads")
        k = k.repeat_interleave(heads // kvh, dim=1)
        v = v.repeat_interleave(heads // kvh, dim=1)
        how += f", {kvh} key/value heads repeated"
    return q, k, v, _scale_attr(m), how


def _layer_qkv(name, m, lay, call, proj, qkv_fn):
    """(q, k, v, scale or None, causal or None, how) of one recorded call, or None when the
    module is not an attention layer."""
    cargs, ckwargs, _ = call
    res = qkv_fn(m, cargs, ckwargs) if qkv_fn is not None else None
    if res is not None:
        q, k, v, scale = res if len(res) == 4 else (*res, None)
        return q, k, v, scale, None, "qkv_fn"
    if lay is None:
        return None
    if lay == "MultiheadAttention":
        q, k, v, causal = _mha_qkv(m, name, cargs, ckwargs)
        return q, k, v, None, causal, ("torch.nn.MultiheadAttention: in_proj of the call's "
                                       f"query/key/value, batch_first={m.batch_first}")
    _refuse_masks(name, m, call, proj)
    q, k, v, scale, how = _projection_qkv(name, m, lay, proj)
    return q, k, v, scale, None, how


def next_token_loss(output, tokens):
    """A causal LM's next-token cross-entropy: logits (B, L, V) (the output, its first entry or
    its .logits) against tokens[:, 1:], mean over the B (L - 1) predicted positions."""
    logits = getattr(output, "logits", None)
    if logits is None:
        logits = output[0] if isinstance(output, (tuple, list)) else output
    if not torch.is_tensor(logits) or logits.dim() != 3 or not torch.is_tensor(tokens) or tokens.dim() != 2 \
            or tuple(logits.shape[:2]) != tuple(tokens.shape) or tokens.dtype.is_floating_point:
        raise CaptureError("loss_fn='next_token' needs token ids (B, L) as the first argument and logits "
                           f"(B, L, V) as the output; got {getattr(tokens, 'shape', type(tokens).__name__)} "
                           f"and {getattr(logits, 'shape', type(logits).__name__)}; pass a loss_fn callable")
    if tokens.shape[1] < 2:
        raise CaptureError("loss_fn='next_token' needs at least 2 tokens")
    V = logits.shape[-1]
    if logits.dtype not in (torch.float32, torch.float64):
        logits = logits.float()
    return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, V), tokens[:, 1:].reshape(-1))


class _OutputGrad:
    """Wraps the forward of the captured layers for the gradient pass: each layer's own output
    tensor (the self-check's) is kept, made to require grad where nothing upstream does."""

    def __init__(self, named):
        self.named, self.outputs, self.undo = named, {}, []

    def __enter__(self):
        for name, m in self.named:
            orig = m.forward

            def wrapper(*args, _orig=orig, _name=name, **kwargs):
                out = _orig(*args, **kwargs)
                first = isinstance(out, (tuple, list)) and out
                o = out[0] if first else out
                if torch.is_tensor(o) and o.is_floating_point():
                    if not o.requires_grad:   # frozen weights: a zero leaf puts the output in the graph
                        o = o + torch.zeros((), dtype=o.dtype, device=o.device, requires_grad=True)
                        out = type(out)([o, *out[1:]]) if first else o
                    self.outputs.setdefault(_name, []).append(o)
                return out
            own = vars(m).get("forward")
            m.forward = wrapper
            self.undo.append((m, own))
        return self

    def __exit__(self, *exc):
        for m, own in reversed(self.undo):
            if own is None:
                del m.forward
            else:
                m.forward = own
        return False


def _upstream_gradients(model, args, kwargs, captured, loss_fn):
    """{layer name: dLoss/dOut (B, H, L, d_v) float64} of the captured layers (module docstring,
    "Upstream gradient"), and the loss's description and value."""
    if loss_fn == "next_token":
        what = "next-token cross-entropy (mean over the B (L - 1) predicted positions)"

        def fn(output):
            return next_token_loss(output, args[0] if args else None)
    elif callable(loss_fn):
        what, fn = f"loss_fn {getattr(loss_fn, '__name__', type(loss_fn).__name__)}", loss_fn
    else:
        raise CaptureError(f"loss_fn: a callable or 'next_token', got {loss_fn!r}")
    rec = _OutputGrad([(c["name"], c["module"]) for c in captured])
    with torch.enable_grad():
        with rec:
            output = model(*args, **kwargs)
        loss = fn(output)
        if not torch.is_tensor(loss) or loss.numel() != 1:   # its shape or type, never its values
            got = f"shape {tuple(loss.shape)}" if torch.is_tensor(loss) else type(loss).__name__
            raise CaptureError(f"loss_fn must return a scalar tensor, got {got}")
        if not torch.isfinite(loss).all():
            raise CaptureError(f"loss_fn returned a non-finite loss ({float(loss)})")
        names = [c["name"] for c in captured]
        outs = [rec.outputs.get(n, [None])[0] for n in names]
        missing = [n for n, o in zip(names, outs) if o is None]
        if missing:
            raise CaptureError(f"{missing[0]}: no tensor output in the gradient pass")
        grads = torch.autograd.grad(loss, outs, allow_unused=True)
    result = {}
    for c, o, gy in zip(captured, outs, grads):
        name, m, v, p = c["name"], c["module"], c["v"], c["proj"]
        # The gradient is of this pass: it must be the captured forward (a model that draws
        # differently, e.g. dropout from another generator, is refused)
        again = _own_output(m, o.detach())
        tol = c["check"]["tolerance"]
        gap = float((again.double() - c["own"].double()).abs().max()) if again.shape == c["own"].shape else math.inf
        if not gap <= tol:
            raise CaptureError(f"{name}: the gradient pass's output differs from the captured forward's by "
                               f"{gap:.3g} (tolerance {tol:.3g}): the model does not compute the same twice "
                               "(randomness outside torch's generator? model.eval()); pass loss_fn=None")
        if gy is None:
            raise CaptureError(f"{name}: the loss does not depend on this layer's output")
        if isinstance(m, torch.nn.MultiheadAttention) and not m.batch_first and gy.dim() == 3:
            gy = gy.transpose(0, 1)
        gy = gy.double()
        if p is not None:
            if not isinstance(p, torch.nn.Linear):
                raise CaptureError(f"{name}: the upstream gradient cannot be carried back through "
                                   f"{c['check']['rebuilt_through']} ({type(p).__name__}, not an nn.Linear); "
                                   "pass loss_fn=None")
            gy = gy @ p.weight.detach().double()   # y = x W^T + b: dL/dx = dL/dy W
        B, H, L, dv = v.shape
        if tuple(gy.shape) != (B, L, H * dv):
            raise CaptureError(f"{name}: the output's gradient has shape {tuple(gy.shape)}, expected "
                               f"{(B, L, H * dv)} (the heads' outputs joined)")
        g = gy.reshape(B, L, H, dv).transpose(1, 2)
        if not torch.isfinite(g).all():
            raise CaptureError(f"{name}: the upstream gradient has non-finite entries")
        result[name] = g
    return result, {"loss": what, "value": float(loss)}


def capture(model, *args, out, causal=None, qkv_fn=None, layers=None, store_dtype=None, loss_fn=None,
            out_proj=None, manifest_extra=None, **kwargs):
    """Run model(*args, **kwargs) and write the q/k/v of its attention layers under out.
    See the module docstring. store_dtype ("float16"): the files rounded to it after the
    self-check (half the bytes; favor's exact reference is then that of the rounded values).
    loss_fn (a callable of the output, or "next_token"): also write each layer's upstream
    gradient dLoss/dOut (g.npy). out_proj (a child's name, or a callable of the layer returning
    its out projection or None): the out projection where it is not a child named out_proj,
    o_proj, c_proj, proj or out. manifest_extra: a dict of keys added to the manifest.
    Returns the manifest (dict). Raises CaptureError."""
    _earlier_capture(out)   # a folder that is neither empty nor a capture: refused before running
    found = _find_layers(model, qkv_fn, layers)
    rec = _Recorder([(n, m) for n, m, _ in found], {n: lay for n, _, lay in found})
    # Both passes (this one and the gradient's) start from one seed, so dropout in training mode
    # draws the same masks in both; fork_rng gives the caller's random state back afterwards.
    with torch.random.fork_rng():
        seed = int(torch.randint(2 ** 62, ()))
        torch.manual_seed(seed)
        with torch.no_grad():
            with rec:
                model(*args, **kwargs)
            captured = [c for c in (_capture_layer(name, m, lay, rec, qkv_fn, causal, out_proj)
                                    for name, m, lay in found) if c is not None]
        if not captured:
            raise CaptureError("no attention layer was found or called (MultiheadAttention, "
                               "q_proj/k_proj/v_proj, query/key/value, qkv, c_attn); pass qkv_fn")
        grads, loss = None, None
        if loss_fn is not None:
            torch.manual_seed(seed)
            grads, loss = _upstream_gradients(model, args, kwargs, captured, loss_fn)
    return _write(out, captured, store_dtype, grads, loss, manifest_extra)


def _capture_layer(name, m, lay, rec, qkv_fn, causal, out_proj):
    """The captured layer (a dict for _write), or None when the module was not called or is not
    an attention layer. Causal: the argument, else the call's mask (MultiheadAttention), else a
    causal attribute, else what the self-check proves."""
    calls = rec.calls[name]
    if not calls:
        return None
    if len(calls) > 1:
        raise CaptureError(f"{name}: called {len(calls)} times in one forward; "
                           "capture one call per layer (pass layers)")
    got = _layer_qkv(name, m, lay, calls[0], rec.proj.get(name, {}), qkv_fn)
    if got is None:
        return None
    q, k, v, scale, layer_causal, how = got
    causal_from = "the call's attn_mask / is_causal"
    if causal is not None:
        layer_causal, causal_from = bool(causal), "argument"
    elif layer_causal is None:
        layer_causal, attr = _causal_attr(m)
        causal_from = f"attribute {attr}" if attr else "self-check"
    _check_qkv(name, q, k, v, bool(layer_causal))
    d = q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    proj = _out_projection(name, m, out_proj)
    check, layer_causal = output_check(name, m, q, k, v, scale, layer_causal, calls[0][2], proj)
    factor = scale * math.sqrt(d)
    if abs(factor - 1.0) > 1e-12:
        q = q * factor
    return dict(name=name, module=m, how=how, q=q, k=k, v=v, scale=scale, factor=factor, causal=layer_causal,
                causal_from=causal_from, check=check, proj=proj[1], own=_own_output(m, calls[0][2]))


# The entries a capture writes into its folder (besides manifest.json).
_CAPTURE_ENTRY = re.compile(r"layer[0-9]+(\.json)?")


def _earlier_capture(out):
    """The entries of the earlier capture in out (manifest.json first, then layer<i>/ and
    layer<i>.json), [] for a missing or empty folder; CaptureError for anything else."""
    if not os.path.lexists(out):
        return []
    if not os.path.isdir(out):
        raise CaptureError(f"out: {out} exists and is not a folder")
    names = os.listdir(out)
    if not names:
        return []
    try:
        with open(os.path.join(out, "manifest.json")) as f:
            fmt = json.load(f).get("format")
    except (OSError, ValueError, AttributeError):
        fmt = None
    if fmt != "favor capture 1":
        raise CaptureError(f"out: {out} is neither empty nor an earlier capture (a manifest.json of format "
                           "'favor capture 1'); remove it or choose another folder")
    return ["manifest.json"] + sorted(n for n in names if _CAPTURE_ENTRY.fullmatch(n))


def _install(new, out, old):
    """Moves the capture written in the folder new into out: the earlier capture's entries into
    the folder old (its manifest first), then the new entries in (the manifest last), so that out
    holds either a whole capture or no manifest.json; out's other files stay."""
    earlier = _earlier_capture(out)   # again: out may have changed while the model ran
    os.makedirs(out, exist_ok=True)
    os.mkdir(old)
    for n in earlier:
        os.rename(os.path.join(out, n), os.path.join(old, n))
    for n in sorted(os.listdir(new), key=lambda n: n == "manifest.json"):
        os.rename(os.path.join(new, n), os.path.join(out, n))


def _write(out, captured, store_dtype=None, grads=None, loss=None, manifest_extra=None):
    """Writes the capture into a temporary folder beside out, then moves it into out (_install);
    the temporary is removed whatever happens."""
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(os.path.abspath(out))}.capture-", dir=parent)
    try:
        manifest = _write_files(os.path.join(tmp, "new"), out, captured, store_dtype, grads, loss, manifest_extra)
        _install(os.path.join(tmp, "new"), out, os.path.join(tmp, "old"))
    except OSError as e:   # disk full, permissions: one line naming the file
        raise CaptureError(f"out: {e.filename or out}: {e.strerror}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return manifest


def _write_files(folder, out, captured, store_dtype, grads, loss, manifest_extra):
    """The capture's files in folder (created), named and configured for their place out."""
    os.mkdir(folder)
    layers = []
    for i, c in enumerate(captured):
        name, q, k, v, causal = c["name"], c["q"], c["k"], c["v"], c["causal"]
        sub = f"layer{i}"
        os.mkdir(os.path.join(folder, sub))
        files = {}
        model_dtype = str(_to_numpy(v[..., :0]).dtype)
        tensors = [("q", q), ("k", k), ("v", v)] + ([("g", grads[name])] if grads else [])
        for w, t in tensors:
            a = _to_numpy(t)
            if w == "g":   # the gradient in the model's dtype (float64 stays), never rounded to store_dtype
                a = a.astype(model_dtype if model_dtype == "float64" else "float32")
            elif store_dtype:
                a = a.astype(store_dtype)
            rel = f"{sub}/{w}.npy"
            np.save(os.path.join(folder, rel), a)
            files[w] = {"path": rel, "shape": list(a.shape), "dtype": str(a.dtype),
                        "sha256": _sha256(os.path.join(folder, rel))}
        B, H, L, d = q.shape
        cfg = {
            "name": f"capture_{os.path.basename(os.path.abspath(out))}_{sub}",
            "description": f"favor estimators vs exact attention on the heads of {name!r}",
            "inputs": {"source": "npy", "q": f"{sub}/q.npy", "k": f"{sub}/k.npy", "v": f"{sub}/v.npy",
                       "per_head": True},
            "causal": bool(causal),
            "m": [64, 256],
            "trials": 3,
            "variants": [{"features": "positive", "projection": "orthogonal"},
                         {"features": "trig", "projection": "orthogonal"}],
            "metrics": ["output_rel_error", "attention_tv"],
            # out/<name> under the working directory (never the committed results/: issue 36
            # item 8), written relative to the config's
            # folder (design.md section 5: a config's relative paths are taken from there)
            "output_dir": os.path.relpath(os.path.join(
                os.getcwd(), "out", f"capture_{os.path.basename(os.path.abspath(out))}_{sub}"),
                os.path.abspath(out)),
        }
        cfg_path = os.path.join(folder, f"{sub}.json")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f, indent=2)
            f.write("\n")
        layer = {"index": i, "name": name, "module": type(c["module"]).__name__, "dir": sub,
                 "B": B, "H": H, "L": L, "Lk": k.shape[2], "d": d, "d_v": v.shape[3],
                 "causal": bool(causal), "causal_from": c["causal_from"], "dtype": files["q"]["dtype"],
                 "model_dtype": model_dtype,
                 "scale": c["scale"], "q_multiplied_by": c["factor"], "how": c["how"],
                 "config": f"{sub}.json",
                 "config_sha256": _sha256(cfg_path), "check": c["check"], "files": files}
        if grads:
            layer["upstream_gradient"] = {
                "file": files["g"]["path"], "loss": loss["loss"], "loss_value": loss["value"],
                "of": "dLoss/dOut of the layer's heads (B, H, L, d_v), before its out projection",
                "carried_through": c["check"]["rebuilt_through"]}
        layers.append(layer)
    manifest = {
        "format": "favor capture 1",
        "made_by": "scripts/capture_qkv.py capture()",
        "torch": torch.__version__,
        "note": ("q, k, v are the tensors that enter the model's softmax (after any rotary "
                 "embedding), q multiplied by scale * sqrt(d) so that favor's exact attention "
                 "softmax(q k^T / sqrt(d)) v equals the model's softmax(scale q k^T) v"),
        "run_all": "for c in DIR/layer*.json; do favor run \"$c\"; done",
        "layers": layers,
        **(manifest_extra or {}),
    }
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return manifest


def main(argv=None):
    ap = argparse.ArgumentParser(usage="%(prog)s --text FILE --L N --out DIR [--offset BYTES] [--model PT] "
                                 "[--dtype float16]",
                                 description="Capture Q/K/V of the committed tiny model "
                                 "(scripts/tiny_lm.py) on a text excerpt")
    ap.add_argument("--text", required=True, help="the text file (read as bytes)")
    ap.add_argument("--L", type=int, required=True, help="number of bytes (sequence length)")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--offset", type=int, default=0, help="first byte of the excerpt")
    ap.add_argument("--model", default=os.path.join(HERE, "..", "data", "tiny_lm.pt"),
                    help="weights (a state_dict read with weights_only=True; config in the .json beside it)")
    ap.add_argument("--dtype", choices=["float32", "float16"], default=None,
                    help="store the files in this dtype (default: the model's)")
    ap.add_argument("--no-grad", action="store_true",
                    help="leave out the upstream gradient of the next-token loss (layer<i>/g.npy)")
    a = ap.parse_args(argv)

    def fail(msg):   # one line, exit 2 (as argparse's usage errors)
        print(f"capture_qkv.py: {msg}", file=sys.stderr)
        sys.exit(2)
    sys.path.insert(0, HERE)
    import tiny_lm as tl
    if a.L < 1 or a.offset < 0:
        fail("--L must be >= 1 and --offset >= 0")
    try:
        with open(a.text, "rb") as f:
            f.seek(a.offset)
            data = f.read(a.L)
    except OSError as e:
        fail(f"--text {a.text}: {e.strerror}")
    if len(data) < a.L:
        fail(f"--text {a.text}: only {len(data)} bytes from offset {a.offset}, --L {a.L} asked")
    torch.set_num_threads(2)
    model, _ = tl.load_tiny_lm(a.model)
    tokens = torch.tensor(list(data), dtype=torch.long)[None, :]
    inp = {"text": a.text, "offset": a.offset, "L": a.L, "sha256_of_bytes": hashlib.sha256(data).hexdigest(),
           "model": os.path.relpath(a.model), "model_sha256": _sha256(a.model),
           "model_config": os.path.relpath(tl.config_path(a.model)),
           "model_config_sha256": _sha256(tl.config_path(a.model))}
    try:
        m = capture(model, tokens, out=a.out, qkv_fn=tl.tiny_qkv, store_dtype=a.dtype,
                    loss_fn=None if a.no_grad else "next_token", manifest_extra={"input": inp})
    except CaptureError as e:
        fail(str(e))
    print(f"wrote {len(m['layers'])} layers to {a.out}/")


if __name__ == "__main__":
    main()
