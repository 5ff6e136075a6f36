"""scripts/capture_qkv.py: favor's exact attention on the captured tensors equals each layer's
own attention output (through its output projection where it has one), for every supported
layout, causal and not; a wrong scale or head split is caught by the same comparison.

Run: /usr/bin/python3 -m pytest -q tests/python  (FAVOR=path/to/favor; default build/favor)
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import capture_qkv  # noqa: E402
import tiny_lm  # noqa: E402

FAVOR = os.environ.get("FAVOR", os.path.join(ROOT, "build", "favor"))
TOL = 1e-5


# ----------------------------------------------------------------------------- test models

def softmax_attention(q, k, v, scale, causal):
    """q, k (B, H, L, d), v (B, H, L, dv) -> (B, L, H * dv)."""
    s = (q @ k.transpose(-1, -2)) * scale
    if causal:
        L, Lk = s.shape[-2:]
        s = s.masked_fill(torch.ones(L, Lk, dtype=torch.bool).triu(1), float("-inf"))
    o = s.softmax(-1) @ v
    B, H, L, dv = o.shape
    return o.transpose(1, 2).reshape(B, L, H * dv)


def heads(x, h):
    B, L, W = x.shape
    return x.view(B, L, h, W // h).transpose(1, 2)


class HFSeparate(nn.Module):
    """Hugging Face style: q_proj/k_proj/v_proj/o_proj, num_heads, scaling, is_causal,
    optionally fewer key/value heads (grouped-query attention)."""

    def __init__(self, E, H, causal, scaling=None, kv_heads=None):
        super().__init__()
        self.num_heads, self.head_dim = H, E // H
        self.num_key_value_heads = kv_heads or H
        self.scaling = self.head_dim ** -0.5 if scaling is None else scaling
        self.is_causal = causal
        self.q_proj = nn.Linear(E, E)
        self.k_proj = nn.Linear(E, self.num_key_value_heads * self.head_dim)
        self.v_proj = nn.Linear(E, self.num_key_value_heads * self.head_dim)
        self.o_proj = nn.Linear(E, E)

    def forward(self, hidden_states, attention_mask=None):
        q = heads(self.q_proj(hidden_states), self.num_heads)
        k = heads(self.k_proj(hidden_states), self.num_key_value_heads)
        v = heads(self.v_proj(hidden_states), self.num_key_value_heads)
        rep = self.num_heads // self.num_key_value_heads
        k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
        return self.o_proj(softmax_attention(q, k, v, self.scaling, self.is_causal))


class BertSelf(nn.Module):
    """BERT style: query/key/value, num_attention_heads, attention_head_size; no output
    projection, returns a tuple."""

    def __init__(self, E, H):
        super().__init__()
        self.num_attention_heads, self.attention_head_size = H, E // H
        self.query, self.key, self.value = nn.Linear(E, E), nn.Linear(E, E), nn.Linear(E, E)

    def forward(self, hidden_states):
        H = self.num_attention_heads
        q, k, v = (heads(f(hidden_states), H) for f in (self.query, self.key, self.value))
        return (softmax_attention(q, k, v, 1 / math.sqrt(self.attention_head_size), False),)


class GPT2Attn(nn.Module):
    """GPT-2 style fused c_attn (split into 3 along the width) and c_proj, n_head, causal."""
    is_causal = True

    def __init__(self, E, H):
        super().__init__()
        self.n_head = H
        self.c_attn, self.c_proj = nn.Linear(E, 3 * E), nn.Linear(E, E)

    def forward(self, x):
        q, k, v = self.c_attn(x).split(x.shape[-1], dim=-1)
        q, k, v = heads(q, self.n_head), heads(k, self.n_head), heads(v, self.n_head)
        return self.c_proj(softmax_attention(q, k, v, q.shape[-1] ** -0.5, True))


class TimmAttn(nn.Module):
    """timm ViT style fused qkv reshaped (B, N, 3, H, d), num_heads, scale, proj."""

    def __init__(self, E, H, scale=None):
        super().__init__()
        self.num_heads = H
        self.scale = (E // H) ** -0.5 if scale is None else scale
        self.qkv, self.proj = nn.Linear(E, 3 * E), nn.Linear(E, E)

    def forward(self, x):
        B, N, E = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, E // self.num_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        return self.proj(softmax_attention(q, k, v, self.scale, False))


class Stack(nn.Module):
    """Two attention layers with a nonlinearity between them; MHA layers get the mask."""

    def __init__(self, layers, mha_mask=None, mha_kwargs=None):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.mha_mask, self.mha_kwargs = mha_mask, mha_kwargs or {}

    def forward(self, x):
        for m in self.layers:
            if isinstance(m, nn.MultiheadAttention):
                y = m(x, x, x, need_weights=False, attn_mask=self.mha_mask, **self.mha_kwargs)[0]
            else:
                y = m(x)
                y = y[0] if isinstance(y, tuple) else y
            x = torch.tanh(x + y)
        return x


def output_projection(m):
    """The module's output projection as a function of (B, L, H*dv), and the layout of its
    output (batch_first)."""
    if isinstance(m, nn.MultiheadAttention):
        return m.out_proj, m.batch_first
    for n in ("o_proj", "out_proj", "c_proj", "proj", "out"):
        if hasattr(m, n):
            return getattr(m, n), True
    return (lambda t: t), True


# ----------------------------------------------------------------------------- helpers

def favor_exact(d, causal, tmp):
    out = os.path.join(tmp, "o.npy")
    cmd = [FAVOR, "apply", "--q", f"{d}/q.npy", "--k", f"{d}/k.npy", "--v", f"{d}/v.npy",
           "--exact", "--out", out] + (["--causal"] if causal else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}: {r.stderr}"
    return np.load(out)


def run_and_record(model, x, layer_types):
    """The model's output and each attention layer's own output (forward hooks)."""
    outs = {}
    hooks = []
    for name, m in model.named_modules():
        if isinstance(m, layer_types):
            def hook(mod, inp, out, name=name):
                o = out[0] if isinstance(out, tuple) else out
                outs[name] = o.detach().clone()
            hooks.append(m.register_forward_hook(hook))
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    return outs


def layer_errors(model, x, tmp, layer_types, q_override=None, **capture_kwargs):
    """Capture, then per layer the max abs difference between the module's output and
    favor's exact attention on the capture through the module's output projection."""
    mods = dict(model.named_modules())
    own = run_and_record(model, x, layer_types)
    out = os.path.join(tmp, "cap")
    man = capture_qkv.capture(model, x, out=out, **capture_kwargs)
    errs = []
    for lay in man["layers"]:
        d = os.path.join(out, lay["dir"])
        if q_override is not None:
            q_override(d, lay)
        o = favor_exact(d, lay["causal"], tmp)
        B, H, L, dv = o.shape
        o = torch.from_numpy(o.transpose(0, 2, 1, 3).reshape(B, L, H * dv).astype(np.float32))
        proj, batch_first = output_projection(mods[lay["name"]])
        with torch.no_grad():
            y = proj(o)
        if not batch_first:
            y = y.transpose(0, 1)
        ref = own[lay["name"]]
        assert y.shape == ref.shape, (lay["name"], y.shape, ref.shape)
        errs.append((lay["name"], float((y - ref).abs().max()), float(ref.abs().max())))
    return man, errs


def assert_close(errs):
    for name, err, size in errs:
        assert err <= TOL * max(1.0, size), f"layer {name}: max |favor - model| = {err:.3g}"


# ----------------------------------------------------------------------------- the layouts

E, H, L, B = 32, 4, 12, 2


def causal_bool(n):
    return torch.ones(n, n, dtype=torch.bool).triu(1)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("mask", ["none", "bool", "float"])
def test_multihead_attention(tmp_path, batch_first, mask):
    torch.manual_seed(1)
    attn_mask = {"none": None, "bool": causal_bool(L),
                 "float": torch.zeros(L, L).masked_fill(causal_bool(L), float("-inf"))}[mask]
    model = Stack([nn.MultiheadAttention(E, H, batch_first=batch_first) for _ in range(2)],
                  mha_mask=attn_mask)
    x = torch.randn(B, L, E) if batch_first else torch.randn(L, B, E)
    man, errs = layer_errors(model, x, str(tmp_path), nn.MultiheadAttention)
    assert [l["causal"] for l in man["layers"]] == [mask != "none"] * 2
    assert [l["name"] for l in man["layers"]] == ["layers.0", "layers.1"]
    assert man["layers"][0]["H"] == H and man["layers"][0]["L"] == L and man["layers"][0]["B"] == B
    assert_close(errs)


@pytest.mark.parametrize("causal", [True, False])
def test_separate_projections_hf(tmp_path, causal):
    torch.manual_seed(2)
    # scaling 0.3 != 1/sqrt(8): the capture must fold it into q
    model = Stack([HFSeparate(E, H, causal, scaling=0.3), HFSeparate(E, H, causal, kv_heads=2)])
    man, errs = layer_errors(model, torch.randn(B, L, E), str(tmp_path), HFSeparate)
    l0, l1 = man["layers"]
    assert l0["scale"] == pytest.approx(0.3) and l0["q_multiplied_by"] == pytest.approx(0.3 * math.sqrt(8))
    assert l1["q_multiplied_by"] == pytest.approx(1.0)
    assert l0["causal"] is causal and l1["causal"] is causal
    assert_close(errs)


def test_query_key_value_bert(tmp_path):
    torch.manual_seed(3)
    model = Stack([BertSelf(E, H), BertSelf(E, H)])
    man, errs = layer_errors(model, torch.randn(B, L, E), str(tmp_path), BertSelf)
    assert [l["causal"] for l in man["layers"]] == [False, False]
    assert_close(errs)


def test_query_key_value_causal_argument(tmp_path):
    """causal= overrides the detection: BertSelf itself is not causal, so a causal capture
    does not rebuild its output and the capture's self-check refuses it, naming the layer."""
    torch.manual_seed(3)
    model = Stack([BertSelf(E, H)])
    with pytest.raises(capture_qkv.CaptureError, match=r"^layers\.0: the attention rebuilt"):
        capture_qkv.capture(model, torch.randn(B, L, E), out=str(tmp_path / "a"), causal=True)
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("kind", ["c_attn", "qkv"])
def test_fused_projection(tmp_path, kind):
    torch.manual_seed(4)
    if kind == "c_attn":
        model, typ, causal = Stack([GPT2Attn(E, H), GPT2Attn(E, H)]), GPT2Attn, True
    else:
        model, typ, causal = Stack([TimmAttn(E, H, scale=0.2), TimmAttn(E, H)]), TimmAttn, False
    man, errs = layer_errors(model, torch.randn(B, L, E), str(tmp_path), typ)
    assert [l["causal"] for l in man["layers"]] == [causal, causal]
    assert_close(errs)


def test_user_function_rotary(tmp_path):
    """TinyLM (RoPE inside the attention's forward) through its user function tiny_qkv."""
    torch.manual_seed(5)
    cfg = dict(tiny_lm.CONFIG, d_model=32, n_layers=2, n_heads=2, head_dim=16, mlp=64)
    model = tiny_lm.TinyLM(cfg).eval()
    tokens = torch.randint(0, 256, (B, L))
    man, errs = layer_errors(model, tokens, str(tmp_path), tiny_lm.RotaryCausalAttention,
                             qkv_fn=tiny_lm.tiny_qkv)
    assert [l["name"] for l in man["layers"]] == ["blocks.0.attn", "blocks.1.attn"]
    assert [l["causal"] for l in man["layers"]] == [True, True]
    assert [l["check"]["rebuilt_through"] for l in man["layers"]] == ["out", "out"]
    assert_close(errs)
    # causal=False is a wrong declaration here: the self-check refuses it
    with pytest.raises(capture_qkv.CaptureError, match=r"^blocks\.0\.attn: the attention rebuilt"):
        capture_qkv.capture(model, tokens, out=str(tmp_path / "b"), qkv_fn=tiny_lm.tiny_qkv,
                            causal=False)


# ----------------------------------------------------------------------------- mistakes fail

def test_wrong_scale_fails(tmp_path):
    """The comparison is sensitive: dropping the model's scaling (q as projected, not
    multiplied by scale * sqrt(d)) makes it fail."""
    torch.manual_seed(2)
    model = Stack([HFSeparate(E, H, True, scaling=0.3)])

    def unscale(d, lay):
        q = np.load(f"{d}/q.npy")
        np.save(f"{d}/q.npy", (q / lay["q_multiplied_by"]).astype(q.dtype))
    _, errs = layer_errors(model, torch.randn(B, L, E), str(tmp_path), HFSeparate,
                           q_override=unscale)
    assert errs[0][1] > 1e-3


def test_wrong_head_split_fails(tmp_path):
    """Splitting the width as (d, H) instead of (H, d) makes the comparison fail."""
    torch.manual_seed(4)
    model = Stack([GPT2Attn(E, H)])

    def resplit(d, lay):
        for w in "qkv":
            a = np.load(f"{d}/{w}.npy")  # (B, H, L, d)
            Bn, Hn, Ln, dn = a.shape
            flat = a.transpose(0, 2, 1, 3).reshape(Bn, Ln, Hn * dn)
            np.save(f"{d}/{w}.npy", np.ascontiguousarray(
                flat.reshape(Bn, Ln, dn, Hn).transpose(0, 3, 1, 2)))
    _, errs = layer_errors(model, torch.randn(B, L, E), str(tmp_path), GPT2Attn,
                           q_override=resplit)
    assert errs[0][1] > 1e-3


# ----------------------------------------------------------------------------- files, errors

def test_manifest_and_configs(tmp_path):
    torch.manual_seed(6)
    model = Stack([GPT2Attn(E, H), GPT2Attn(E, H)])
    out = str(tmp_path / "cap")
    man = capture_qkv.capture(model, torch.randn(B, L, E), out=out)
    with open(os.path.join(out, "manifest.json")) as f:
        assert json.load(f)["layers"] == json.loads(json.dumps(man["layers"]))
    for lay in man["layers"]:
        for w, info in lay["files"].items():
            a = np.load(os.path.join(out, info["path"]))
            assert list(a.shape) == info["shape"] == [B, H, L, E // H]
            assert info["sha256"] == capture_qkv._sha256(os.path.join(out, info["path"]))
        chk = lay["check"]   # the self-check's record
        assert chk["passed"] and chk["rebuilt_through"] == "c_proj"
        assert chk["max_abs_diff"] <= chk["tolerance"] == pytest.approx(2.0 ** -12 * chk["max_abs_output"])
        cfg = os.path.join(out, lay["config"])
        r = subprocess.run([FAVOR, "validate", cfg], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert "ok" in r.stdout


def test_rotary_without_function_is_refused(tmp_path):
    cfg = dict(tiny_lm.CONFIG, d_model=32, n_layers=1, n_heads=2, head_dim=16, mlp=64)
    model = tiny_lm.TinyLM(cfg)

    class Fused(nn.Module):  # a fused layout that also holds a rotary table
        def __init__(self):
            super().__init__()
            self.num_heads, self.qkv, self.rotary_emb = 2, nn.Linear(8, 24), nn.Identity()

        def forward(self, x):
            return self.qkv(x)
    with pytest.raises(capture_qkv.CaptureError, match="rotary"):
        capture_qkv.capture(Fused(), torch.randn(1, 4, 8), out=str(tmp_path / "a"))
    with pytest.raises(capture_qkv.CaptureError, match="no attention layer"):
        capture_qkv.capture(model, torch.randint(0, 256, (1, 4)), out=str(tmp_path / "b"))


def test_other_mask_is_refused(tmp_path):
    m = Stack([nn.MultiheadAttention(E, H, batch_first=True)],
              mha_mask=torch.zeros(L, L, dtype=torch.bool).tril(-1))
    with pytest.raises(capture_qkv.CaptureError, match="layers.0: attn_mask is not the causal"):
        capture_qkv.capture(m, torch.randn(B, L, E), out=str(tmp_path / "a"))


def test_command_line_errors(tmp_path):
    script = os.path.join(ROOT, "scripts", "capture_qkv.py")
    short = tmp_path / "short.txt"
    short.write_bytes(b"abc")
    long = tmp_path / "long.txt"
    long.write_bytes(b"abcdefgh" * 4)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    for args, msg in ((["--text", str(tmp_path / "missing.txt")], "missing.txt"),
                      (["--text", str(short)], "only 3 bytes"),
                      (["--text", str(long), "--out", str(mine)], "is neither empty nor an earlier capture")):
        r = subprocess.run([sys.executable, script, "--out", str(tmp_path / "o"), *args, "--L", "16"],
                           capture_output=True, text=True)
        assert r.returncode == 2
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and msg in lines[0], r.stderr
    assert sorted(os.listdir(tmp_path)) == ["long.txt", "mine", "short.txt"] and os.listdir(mine) == ["notes.txt"]


def test_model_unchanged_after_capture(tmp_path):
    """capture() removes its wrappers and hooks: the model computes the same afterwards and
    keeps no instance-level forward."""
    torch.manual_seed(7)
    model = Stack([GPT2Attn(E, H), nn.MultiheadAttention(E, H, batch_first=True)])
    x = torch.randn(B, L, E)
    with torch.no_grad():
        before = model(x)
    capture_qkv.capture(model, x, out=str(tmp_path / "a"))
    with torch.no_grad():
        assert torch.equal(model(x), before)
    for m in model.modules():
        assert "forward" not in vars(m)
        assert not m._forward_hooks


# ----------------------------------------------------------------------------- the self-check

class InlineRotary(HFSeparate):
    """Llama-like q_proj/k_proj/v_proj/o_proj with RoPE applied inline in forward and no
    attribute or child named like rope / rotary: the projections' outputs are not what
    enters the softmax, which only the capture's self-check can see."""

    def forward(self, hidden_states):
        q = tiny_lm.rope(heads(self.q_proj(hidden_states), self.num_heads), 10000.0)
        k = tiny_lm.rope(heads(self.k_proj(hidden_states), self.num_heads), 10000.0)
        v = heads(self.v_proj(hidden_states), self.num_heads)
        return self.o_proj(softmax_attention(q, k, v, self.scaling, self.is_causal))


def test_inline_rotary_is_refused_naming_the_layer(tmp_path):
    torch.manual_seed(8)
    model = Stack([HFSeparate(E, H, True), InlineRotary(E, H, True)])
    assert capture_qkv._rotary_like(model.layers[1]) == []   # the name test cannot see it
    with pytest.raises(capture_qkv.CaptureError) as e:
        capture_qkv.capture(model, torch.randn(B, 64, E), out=str(tmp_path / "a"))
    msg = str(e.value)
    assert msg.startswith("layers.1: the attention rebuilt from the captured q, k, v through o_proj "
                          "differs from the layer's own output by ") and "\n" not in msg, msg
    assert not (tmp_path / "a").exists()   # nothing written


def test_tiny_model_passes_the_check(tmp_path):
    """data/'s committed model, captured through tiny_qkv, passes the self-check with the
    margin its float32 arithmetic gives (differences ~1e-6 against tolerances ~1e-4)."""
    model, _ = tiny_lm.load_tiny_lm(os.path.join(ROOT, "data", "tiny_lm.pt"))
    tokens = torch.tensor(list(b"def heappush(heap, item):\n    heap.append(item)\n" * 3))[None, :]
    man = capture_qkv.capture(model, tokens, out=str(tmp_path / "a"), qkv_fn=tiny_lm.tiny_qkv)
    assert len(man["layers"]) == 4
    for lay in man["layers"]:
        chk = lay["check"]
        assert chk["passed"] and chk["rebuilt_through"] == "out" and "float32" in chk["rule"]
        assert chk["max_abs_diff"] <= chk["tolerance"] / 10, lay["name"]


def test_check_tolerance_follows_the_dtype(tmp_path):
    """A float64 model is held to sqrt(2^-53) relative; the same layers in float64 pass."""
    torch.manual_seed(9)
    model = Stack([GPT2Attn(E, H)]).double()
    man = capture_qkv.capture(model, torch.randn(B, L, E, dtype=torch.float64), out=str(tmp_path / "a"))
    chk = man["layers"][0]["check"]
    assert chk["tolerance"] == pytest.approx(2.0 ** -26.5 * chk["max_abs_output"])
    assert chk["max_abs_diff"] <= chk["tolerance"] and "float64" in chk["rule"]


def test_wrong_user_function_is_refused(tmp_path):
    """A qkv_fn that reports a wrong scale is caught by the self-check."""
    torch.manual_seed(5)
    cfg = dict(tiny_lm.CONFIG, d_model=32, n_layers=1, n_heads=2, head_dim=16, mlp=64)
    model = tiny_lm.TinyLM(cfg).eval()

    def wrong_scale(m, args, kwargs):
        r = tiny_lm.tiny_qkv(m, args, kwargs)
        return None if r is None else (*r[:3], 2 * r[3])
    with pytest.raises(capture_qkv.CaptureError, match=r"^blocks\.0\.attn: the attention rebuilt"):
        capture_qkv.capture(model, torch.randint(0, 256, (1, L)), out=str(tmp_path / "a"),
                            qkv_fn=wrong_scale)


class MaskedProj(nn.Linear):
    """A projection that takes a padding mask (zeroes the masked positions' outputs)."""

    def forward(self, x, padding_mask=None):
        y = super().forward(x)
        return y if padding_mask is None else y * padding_mask[..., None]


class MaskedHF(HFSeparate):
    """HFSeparate whose forward honours an attention_mask over the keys, and whose
    projections can take a padding mask."""

    def __init__(self, E, H, proj_mask=False):
        super().__init__(E, H, False)
        self.q_proj, self.k_proj, self.v_proj = MaskedProj(E, E), MaskedProj(E, E), MaskedProj(E, E)
        self.proj_mask = proj_mask

    def forward(self, hidden_states, attention_mask=None):
        pm = {"padding_mask": attention_mask} if self.proj_mask else {}
        q = heads(self.q_proj(hidden_states, **pm), self.num_heads)
        k = heads(self.k_proj(hidden_states, **pm), self.num_heads)
        v = heads(self.v_proj(hidden_states, **pm), self.num_heads)
        s = (q @ k.transpose(-1, -2)) * self.scaling
        if attention_mask is not None:
            s = s.masked_fill(attention_mask[:, None, None, :] == 0, float("-inf"))
        o = (s.softmax(-1) @ v).transpose(1, 2).reshape(hidden_states.shape)
        return self.o_proj(o)


class CallWithMask(nn.Module):
    def __init__(self, layer, positional):
        super().__init__()
        self.layer, self.positional = layer, positional

    def forward(self, x, mask):
        return self.layer(x, mask) if self.positional else self.layer(x, attention_mask=mask)


@pytest.mark.parametrize("positional", [False, True])
@pytest.mark.parametrize("proj_mask", [False, True])
def test_masks_are_refused(tmp_path, positional, proj_mask):
    """A mask passed to the layer (by keyword or position) or to its projections is refused
    with one line naming where it went, not ignored; no mask: captured and checked."""
    torch.manual_seed(10)
    model = CallWithMask(MaskedHF(E, H, proj_mask), positional)
    x, mask = torch.randn(B, L, E), torch.ones(B, L)
    mask[0, -3:] = 0
    with pytest.raises(capture_qkv.CaptureError) as e:
        capture_qkv.capture(model, x, mask, out=str(tmp_path / "a"))
    assert str(e.value) == ("layer: called with attention_mask: masks are not captured (favor's "
                            "attention is unmasked or causal); pass qkv_fn")
    man = capture_qkv.capture(model, x, None, out=str(tmp_path / "b"))
    assert man["layers"][0]["check"]["passed"]


def test_projection_mask_is_refused(tmp_path):
    torch.manual_seed(10)
    m = MaskedHF(E, H)

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = m

        def forward(self, x, mask):
            q = m.q_proj(x, padding_mask=mask)   # a projection called with a mask
            return m(x) + 0 * q
    x, mask = torch.randn(B, L, E), torch.ones(B, L)
    with pytest.raises(capture_qkv.CaptureError, match=r"^attn\.q_proj: called with padding_mask: masks"):
        capture_qkv.capture(Outer(), x, mask, out=str(tmp_path / "a"))


# ----------------------------------------------------------------------------- upstream gradient

def _heads_perturbed_loss(model, layer, args, loss_fn, D, eps):
    """loss_fn(model(*args)) with the layer's heads' output (B, H, L, dv) moved by eps * D: a
    forward pre-hook adds it to the input of the layer's out projection where the module calls
    one; MultiheadAttention applies out_proj functionally, so its output moves by eps D W^T."""
    B_, H_, L_, dv = D.shape
    joined = D.transpose(1, 2).reshape(B_, L_, H_ * dv)
    if isinstance(layer, nn.MultiheadAttention):
        def hook(m, inp, out):
            shift = eps * joined @ m.out_proj.weight.T
            return (out[0] + (shift if m.batch_first else shift.transpose(0, 1)), *out[1:])
        handle = layer.register_forward_hook(hook)
    else:
        proj = output_projection(layer)[0]
        handle = proj.register_forward_pre_hook(lambda m, inp: (inp[0] + eps * joined, *inp[1:]))
    try:
        with torch.no_grad():
            return float(loss_fn(model(*args)))
    finally:
        handle.remove()


@pytest.mark.parametrize("which", ["stack", "mha", "tiny_lm"])
def test_upstream_gradient_is_the_loss_derivative(tmp_path, which):
    """g.npy is dLoss/dOut of each layer's heads: its inner product with a random direction D
    equals the central difference of the loss with the heads' output moved along D (float64
    model, eps 1e-5: agreement to ~1e-8 relative), for a fused-projection layer, a
    MultiheadAttention that is not batch_first (functional out_proj, transposed output) and
    the tiny LM with the next-token loss; the manifest records the loss."""
    torch.manual_seed(11)
    if which != "tiny_lm":
        model = Stack([GPT2Attn(E, H), nn.MultiheadAttention(E, H, batch_first=True)] if which == "stack" else
                      [nn.MultiheadAttention(E, H) for _ in range(2)]).double().eval()

        def loss_fn(out):
            return (out ** 2).mean()
        x = torch.randn(*((B, L) if which == "stack" else (L, B)), E, dtype=torch.float64)
        args, kwargs = (x,), dict(loss_fn=loss_fn)
        layers = list(model.layers)
    else:
        cfg = dict(tiny_lm.CONFIG, d_model=32, n_layers=2, n_heads=2, head_dim=16, mlp=64)
        model = tiny_lm.TinyLM(cfg).double().eval()
        tokens = torch.randint(0, 256, (1, 24))
        args, kwargs = (tokens,), dict(loss_fn="next_token", qkv_fn=tiny_lm.tiny_qkv)

        def loss_fn(out):
            return capture_qkv.next_token_loss(out, tokens)
        layers = [b.attn for b in model.blocks]
    man = capture_qkv.capture(model, *args, out=str(tmp_path / "a"), **kwargs)
    assert len(man["layers"]) == 2
    for lay, layer in zip(man["layers"], layers):
        up = lay["upstream_gradient"]
        assert up["file"] == f"{lay['dir']}/g.npy" and lay["files"]["g"]["dtype"] == "float64"
        G = np.load(tmp_path / "a" / up["file"])
        assert G.shape == (lay["B"], lay["H"], lay["L"], lay["d_v"])
        for seed in range(2):
            D = torch.from_numpy(np.random.default_rng(seed).standard_normal(G.shape))
            eps = 1e-5
            fd = (_heads_perturbed_loss(model, layer, args, loss_fn, D, eps)
                  - _heads_perturbed_loss(model, layer, args, loss_fn, D, -eps)) / (2 * eps)
            assert float((torch.from_numpy(G) * D).sum()) == pytest.approx(fd, rel=1e-7, abs=1e-12), lay["name"]


def test_upstream_gradient_refusals(tmp_path):
    """'next_token' on a model that does not take token ids, and a loss that is not a scalar,
    are one CaptureError each, and nothing is written."""
    torch.manual_seed(2)
    model = Stack([GPT2Attn(E, H)]).eval()
    with pytest.raises(capture_qkv.CaptureError, match="next_token.*token ids"):
        capture_qkv.capture(model, torch.randn(B, L, E), out=str(tmp_path / "a"), loss_fn="next_token")
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("loss, said", [(lambda out: out, f"must return a scalar tensor, got shape ({B}, {L}, {E})"),
                                        (lambda out: 1.5, "must return a scalar tensor, got float"),
                                        (lambda out: out.sum() * float("nan"), "returned a non-finite loss (nan)")])
def test_loss_that_is_not_a_finite_scalar_is_one_line(tmp_path, loss, said):
    """A loss_fn returning a vector, a number or a non-finite loss: one line naming what it got
    (the shape, never the tensor's values), nothing written."""
    torch.manual_seed(2)
    model = Stack([GPT2Attn(E, H)]).eval()
    with pytest.raises(capture_qkv.CaptureError) as e:
        capture_qkv.capture(model, torch.randn(B, L, E), out=str(tmp_path / "b"), loss_fn=loss)
    assert str(e.value) == "loss_fn " + said
    assert not (tmp_path / "b").exists()
