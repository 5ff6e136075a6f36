"""scripts/capture_qkv.py on models and folders that mislead it (issue 56): causality not
declared, an out projection under an unknown name, a capture interrupted while writing, a folder
that is not a capture, a model whose gradient pass is not the captured forward (dropout in
training mode). No favor binary needed.

Run: /usr/bin/python3 -m pytest -q tests/python/test_capture_hostile.py
"""
import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

# test_capture puts scripts/ on sys.path; its models and helpers are reused here
from test_capture import BertSelf, GPT2Attn, HFSeparate, Stack, heads, softmax_attention  # noqa: E402
import capture_qkv  # noqa: E402

E, H, L, B = 32, 4, 12, 2


class Undeclared(nn.Module):
    """A hand-written layer: q_proj/k_proj/v_proj/o_proj, num_heads, causal or not inside
    forward, and no attribute saying which."""

    def __init__(self, causal):
        super().__init__()
        self.num_heads, self._mask = H, causal
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(E, E) for _ in range(4))

    def forward(self, x):
        q, k, v = (heads(p(x), H) for p in (self.q_proj, self.k_proj, self.v_proj))
        return self.o_proj(softmax_attention(q, k, v, (E // H) ** -0.5, self._mask))


@pytest.mark.parametrize("causal", [True, False])
def test_undeclared_causality_is_proven_by_the_check(tmp_path, causal):
    """No causal= and no causal attribute: the self-check rebuilds the output with and without
    the mask and keeps the one that matches (today: taken as non-causal, so a causal layer is
    refused)."""
    torch.manual_seed(1)
    model = Stack([Undeclared(causal)])
    man = capture_qkv.capture(model, torch.randn(B, L, E), out=str(tmp_path / "a"))
    lay = man["layers"][0]
    assert lay["causal"] is causal and lay["causal_from"] == "self-check"
    chk = lay["check"]
    assert chk["max_abs_diff"] <= chk["tolerance"] < chk["other_mask_diff"]


def test_undecidable_causality_is_refused(tmp_path):
    """L = 1: the output is the same with and without the mask; refused, naming the layer."""
    torch.manual_seed(1)
    with pytest.raises(capture_qkv.CaptureError) as e:
        capture_qkv.capture(Stack([Undeclared(True)]), torch.randn(B, 1, E), out=str(tmp_path / "a"))
    msg = str(e.value)
    assert msg.startswith("layers.0: ") and "both with and without the causal mask" in msg and "causal=" in msg
    assert "\n" not in msg and not (tmp_path / "a").exists()


class WoLayer(nn.Module):
    """Llama-like weights under other names (wq, wk, wv, wo), captured through a qkv_fn."""
    is_causal = True

    def __init__(self):
        super().__init__()
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(E, E) for _ in range(4))

    def qkv(self, x):
        return tuple(heads(p(x), H) for p in (self.wq, self.wk, self.wv))

    def forward(self, x):
        return self.wo(softmax_attention(*self.qkv(x), (E // H) ** -0.5, True))


def wo_qkv(m, args, kwargs):
    return m.qkv(args[0]) if isinstance(m, WoLayer) else None


def test_unknown_out_projection_is_named(tmp_path):
    """An out projection named wo: the refusal says no out projection was found and how to give
    it (today it blames q, k, v and says "pass qkv_fn" to a user who passed it); out_proj= a
    name or a callable then captures, and the gradient is carried back through it."""
    torch.manual_seed(2)
    model = Stack([WoLayer()]).double()
    x = torch.randn(B, L, E, dtype=torch.float64)
    with pytest.raises(capture_qkv.CaptureError) as e:
        capture_qkv.capture(model, x, out=str(tmp_path / "a"), qkv_fn=wo_qkv)
    msg = str(e.value)
    assert msg.startswith("layers.0: no out projection found") and "out_proj='wo'" in msg, msg
    assert "qkv_fn" not in msg and "\n" not in msg and not (tmp_path / "a").exists()
    loss = lambda out: (out ** 2).mean()   # noqa: E731
    for i, how in enumerate(["wo", lambda m: m.wo]):
        man = capture_qkv.capture(model, x, out=str(tmp_path / f"b{i}"), qkv_fn=wo_qkv, out_proj=how, loss_fn=loss)
        lay = man["layers"][0]
        assert lay["check"]["rebuilt_through"] == "wo" and lay["upstream_gradient"]["carried_through"] == "wo"
    with pytest.raises(capture_qkv.CaptureError, match=r"^layers\.0: out_proj='w0': the layer has no child"):
        capture_qkv.capture(model, x, out=str(tmp_path / "c"), qkv_fn=wo_qkv, out_proj="w0")


# ----------------------------------------------------------------------------- the folder

def folder_bytes(folder):
    return {os.path.relpath(os.path.join(d, f), folder): open(os.path.join(d, f), "rb").read()
            for d, _, files in os.walk(folder) for f in files}


def test_interrupted_capture_leaves_the_earlier_one_intact(tmp_path, monkeypatch):
    """A capture that stops half-way through writing (here np.save raising at the third file)
    leaves the earlier capture in the folder byte for byte and no temporary beside it (today the
    folder then holds new q.npy, k.npy under the old manifest, which a study reads silently)."""
    torch.manual_seed(3)
    out = str(tmp_path / "cap")
    capture_qkv.capture(Stack([GPT2Attn(E, H), GPT2Attn(E, H)]), torch.randn(B, L, E), out=out)
    before = folder_bytes(out)
    saves = []

    def failing_save(*a, **k):
        saves.append(1)
        if len(saves) == 3:
            raise KeyboardInterrupt
        return np_save(*a, **k)
    np_save = np.save
    monkeypatch.setattr(capture_qkv.np, "save", failing_save)
    with pytest.raises(KeyboardInterrupt):
        capture_qkv.capture(Stack([GPT2Attn(E, H)]), torch.randn(B, L, E), out=out)
    assert folder_bytes(out) == before
    assert os.listdir(tmp_path) == ["cap"]


def test_a_folder_that_is_not_a_capture_is_refused(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep")
    with pytest.raises(capture_qkv.CaptureError) as e:
        capture_qkv.capture(Stack([GPT2Attn(E, H)]), torch.randn(B, L, E), out=str(out))
    assert str(e.value).startswith(f"out: {out} is neither empty nor an earlier capture") and "\n" not in str(e.value)
    assert os.listdir(out) == ["notes.txt"] and sorted(os.listdir(tmp_path)) == ["mine"]
    empty = tmp_path / "empty"
    empty.mkdir()
    capture_qkv.capture(Stack([GPT2Attn(E, H)]), torch.randn(B, L, E), out=str(empty))
    assert (empty / "manifest.json").exists()


def test_an_earlier_capture_is_replaced_and_other_files_kept(tmp_path):
    """Recapturing into a capture folder that also holds other files (data/: the model, README):
    the earlier capture's entries are replaced as a whole (its layer1 does not outlive it), the
    other files stay."""
    torch.manual_seed(4)
    out = tmp_path / "cap"
    capture_qkv.capture(Stack([GPT2Attn(E, H), GPT2Attn(E, H)]), torch.randn(B, L, E), out=str(out))
    (out / "tiny_lm.pt").write_bytes(b"weights")
    man = capture_qkv.capture(Stack([GPT2Attn(E, H)]), torch.randn(B, L, E), out=str(out))
    assert sorted(os.listdir(out)) == ["layer0", "layer0.json", "manifest.json", "tiny_lm.pt"]
    assert json.loads((out / "manifest.json").read_text())["layers"] == json.loads(json.dumps(man["layers"]))
    assert (out / "tiny_lm.pt").read_bytes() == b"weights" and sorted(os.listdir(tmp_path)) == ["cap"]


# ----------------------------------------------------------------------------- the gradient pass

class DropoutThenLayer(nn.Module):
    """Dropout on the layer's input: in training mode each forward draws new masks."""

    def __init__(self, layer):
        super().__init__()
        self.drop, self.layer = nn.Dropout(0.5), layer

    def forward(self, x):
        return self.layer(self.drop(x))[0]


def test_training_mode_dropout_gradient_is_of_the_captured_forward(tmp_path):
    """BertSelf (no out projection) after a dropout, in training mode, loss |out|^2 / 2: dLoss/dOut
    is the layer's output, so g.npy must equal softmax(q k^T / sqrt(d)) v of the captured q, k, v
    (today the gradient pass draws other masks: g is ~100% off)."""
    torch.manual_seed(5)
    model = DropoutThenLayer(BertSelf(E, H)).double().train()
    x = torch.randn(B, L, E, dtype=torch.float64)
    out = tmp_path / "a"
    capture_qkv.capture(model, x, out=str(out), loss_fn=lambda y: (y ** 2).sum() / 2)
    q, k, v, g = (torch.from_numpy(np.load(out / "layer0" / f"{w}.npy")) for w in "qkvg")
    want = torch.softmax(q @ k.transpose(-1, -2) / (E // H) ** 0.5, -1) @ v
    assert float((g - want).abs().max()) <= 1e-12 * float(want.abs().max())


class Drifting(nn.Module):
    """A model whose every forward differs (a call counter added to the input): its gradient pass
    cannot be the captured forward."""

    def __init__(self):
        super().__init__()
        self.layer, self.calls = GPT2Attn(E, H), 0

    def forward(self, x):
        self.calls += 1
        return self.layer(x + self.calls)


def test_a_gradient_pass_that_differs_is_refused(tmp_path):
    torch.manual_seed(6)
    with pytest.raises(capture_qkv.CaptureError) as e:
        capture_qkv.capture(Drifting(), torch.randn(B, L, E), out=str(tmp_path / "a"), loss_fn=lambda y: y.sum())
    msg = str(e.value)
    assert msg.startswith("layer: the gradient pass's output differs from the captured forward's") and "\n" not in msg
    assert not (tmp_path / "a").exists()


def test_the_callers_random_state_is_left_alone(tmp_path):
    """The capture reseeds its two passes inside torch.random.fork_rng: the caller's generator
    continues as if no capture had run."""
    model = DropoutThenLayer(BertSelf(E, H)).train()
    x = torch.randn(B, L, E)
    torch.manual_seed(7)
    capture_qkv.capture(model, x, out=str(tmp_path / "a"), loss_fn=lambda y: y.sum())
    after = torch.rand(3)
    torch.manual_seed(7)
    assert torch.equal(after, torch.rand(3))


def test_hf_separate_still_takes_its_attribute(tmp_path):
    """A declared is_causal is taken as declared (and recorded as such)."""
    torch.manual_seed(8)
    man = capture_qkv.capture(Stack([HFSeparate(E, H, True)]), torch.randn(B, L, E), out=str(tmp_path / "a"))
    assert man["layers"][0]["causal"] is True and man["layers"][0]["causal_from"] == "attribute is_causal"
