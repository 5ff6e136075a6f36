"""favor.torch (issue 41 item 3): the forward is favor.attention's, the backward favor's
analytic gradient; gradcheck (central finite differences of the forward, float64) for every map
whose parameters do not depend on the data, torch autograd of an independent torch FAVOR+ with
the same W, the layer's redrawing, layouts and refusals."""
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import favor  # noqa: E402
import favor.torch as ft  # noqa: E402

SRC = Path(__file__).resolve().parents[2]

# Every map with a backward whose parameters are fixed numbers (data-independent): the gradient
# of its forward is the whole gradient, so finite differences must agree. The maps fitted to the
# data (oprf's "optimal" A, gerf's optimal A and t, sderf, saderf, aderf, dark, the "optimal"
# lambda / p of the discrete maps) are checked here with their parameters given as numbers.
MAPS = [dict(features="positive", m=8), dict(features="trig", m=4), dict(features="hyperbolic", m=4),
        dict(features="relu", m=8), dict(features="oprf", m=8, A=-0.2), dict(features="gerf", m=8, A=-0.1, t=0.9),
        dict(features="poisson", m=8, **{"lambda": 1.0}), dict(features="geometric", m=8, p=0.5),
        dict(features="maclaurin", m=8, projection="iid"), dict(features="elu"), dict(features="dpfp"),
        dict(features="taylor2"), dict(features="hedgehog"), dict(features="t2r"), dict(features="liger"),
        dict(features="softmax_dim"), dict(exact=True),
        dict(features="positive", m=8, window=2, sinks=1), dict(features="none", window=3, sinks=1)]


def qkv(shape=(2, 7, 4), dv=3, dtype=torch.float64, seed=0, positive=False):
    """q, k, v requiring grad; positive=True: q, k entries in [0.3, 1.1] (the relu maps' rows then
    have no zero feature sum, and no entry sits at a kink)."""
    g = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(*shape, generator=g, dtype=dtype) * 0.8 for _ in range(2))
    if positive:
        q, k = (0.3 + 0.8 * torch.rand(*shape, generator=g, dtype=dtype) for _ in range(2))
    v = torch.randn(*shape[:-1], dv, generator=g, dtype=dtype)
    return [t.requires_grad_(True) for t in (q, k, v)]


def name(kw):
    return "exact" if kw.get("exact") else kw["features"] + ("+window" if "window" in kw else "")


@pytest.mark.parametrize("kw", MAPS, ids=[name(kw) for kw in MAPS])
@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_gradcheck(kw, causal):
    if kw.get("features") == "none" and not causal:
        kw = dict(kw, window=7)   # a window-only row must see a key (non-causal: |i - j| < w)
    inputs = qkv(positive=kw.get("features") in ("relu", "dpfp", "t2r"))
    fn = lambda q, k, v: ft.attention(q, k, v, seed=3, causal=causal, **kw)
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-7, rtol=1e-5)


def favor_plus(q, k, v, W, causal):
    """FAVOR+ written in torch (Performer eq. 5 / Lemma 1): phi(x) = exp(W x - |x|^2 / 2) / sqrt(m)
    on x = q / d^(1/4), Out = D^-1 phi(Q) (phi(K)^T V), prefix sums when causal."""
    d = q.shape[-1]
    x, y = q / d ** 0.25, k / d ** 0.25
    phi = lambda z: torch.exp(z @ W.T - (z * z).sum(-1, keepdim=True) / 2) / math.sqrt(W.shape[0])
    pq, pk = phi(x), phi(y)
    if causal:
        kv = torch.cumsum(pk.unsqueeze(-1) * v.unsqueeze(-2), dim=-3)   # (.., L, m, dv)
        num = (pq.unsqueeze(-1) * kv).sum(-2)
        den = (pq * torch.cumsum(pk, dim=-2)).sum(-1, keepdim=True)
    else:
        num = pq @ (pk.transpose(-1, -2) @ v)
        den = pq @ pk.sum(-2, keepdim=True).transpose(-1, -2)
    return num / den


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_equals_torch_favor_plus(causal):
    """Output and gradients equal torch autograd of an independent FAVOR+ given the same W."""
    q, k, v = qkv(shape=(2, 3, 24, 8), dv=5, seed=1)
    W = torch.from_numpy(favor.projection("orthogonal", 16, 8, 7, 2))
    out = ft.attention(q, k, v, features="positive", m=16, projection="orthogonal", seed=7, trial=2, causal=causal)
    ref = favor_plus(q, k, v, W, causal)
    assert torch.allclose(out, ref, rtol=0, atol=1e-12)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    mine = torch.autograd.grad(out, (q, k, v), g)
    theirs = torch.autograd.grad(ref, (q, k, v), g)
    for a, b in zip(mine, theirs):
        assert torch.allclose(a, b, rtol=0, atol=1e-11 * b.abs().max().item())


def test_float32_and_layout():
    """float32 in, float32 out and gradients; layout="BLHD" equals the permuted call."""
    q, k, v = (t.detach().float().requires_grad_(True) for t in qkv(shape=(1, 2, 16, 8), dv=8, seed=2))
    out = ft.attention(q, k, v, features="positive", m=16, causal=True)
    out.sum().backward()
    assert out.dtype == torch.float32 and q.grad.dtype == torch.float32
    perm = lambda t: t.detach().permute(0, 2, 1, 3).requires_grad_(True)   # (B, H, L, d) -> (B, L, H, d)
    qb, kb, vb = perm(q), perm(k), perm(v)
    outb = ft.attention(qb, kb, vb, features="positive", m=16, causal=True, layout="BLHD")
    outb.sum().backward()
    assert torch.equal(outb.permute(0, 2, 1, 3), out)
    assert torch.equal(qb.grad.permute(0, 2, 1, 3), q.grad)


def test_layer_redraw():
    """redraw=True: a new W for each training call (trial 0, 1, ...), the last one kept in eval."""
    q, k, v = (t.detach() for t in qkv(seed=3))
    layer = ft.Attention(features="positive", m=8, seed=5, redraw=True)
    a, b = layer(q, k, v), layer(q, k, v)
    assert not torch.equal(a, b)
    assert torch.equal(a, favor.attention(q, k, v, features="positive", m=8, seed=5, trial=0))
    assert torch.equal(b, favor.attention(q, k, v, features="positive", m=8, seed=5, trial=1))
    layer.eval()
    assert torch.equal(layer(q, k, v), b) and torch.equal(layer(q, k, v), b)
    fixed = ft.Attention(features="positive", m=8, seed=5)
    assert torch.equal(fixed(q, k, v), fixed(q, k, v))
    assert "redraw=True" in repr(layer)


def test_refusals():
    q, k, v = qkv()
    with pytest.raises(favor.Error, match=r"^q: a tensor on meta: favor computes on the CPU"):
        ft.attention(q.detach().to("meta"), k, v, features="positive", m=8)
    with pytest.raises(favor.Error, match=r"^k: dtype float32, q's is float64"):
        ft.attention(q, k.detach().float(), v, features="positive", m=8)
    with pytest.raises(favor.Error, match=r"^q: dtype float16"):
        ft.attention(q.detach().half(), k.detach().half(), v.detach().half(), features="positive", m=8)
    with pytest.raises(favor.Error, match=r"^v: favor.torch takes torch tensors"):
        ft.attention(q, k, v.detach().numpy(), features="positive", m=8)
    for bad in (q.detach().numpy(), [[1.0]]):   # q itself not a tensor: one line, not an AttributeError
        with pytest.raises(favor.Error, match=r"^q: favor.torch takes torch tensors"):
            ft.attention(bad, k, v, features="positive", m=8)
    out = ft.attention(q, k, v, features="nystrom", m=3)   # nystrom has a forward, not a backward
    with pytest.raises(favor.Error, match="nystrom"):
        out.sum().backward()


SECOND = [dict(features="positive", m=8), dict(exact=True), dict(features="positive", m=8, window=2)]


@pytest.mark.parametrize("kw", SECOND, ids=[name(kw) for kw in SECOND])
def test_second_derivative_raises(kw):
    """favor's backward is once-differentiable: a gradient asked with create_graph=True (a gradient
    penalty, a Hessian-vector product) raises favor.Error instead of returning a gradient without a
    graph that adds nothing, for the saved-state backward, exact and a hybrid; plain backward works."""
    q, k, v = qkv()
    out = ft.attention(q, k, v, seed=0, **kw)
    with pytest.raises(favor.Error, match="no second derivative"):
        torch.autograd.grad(out.sum(), q, create_graph=True)
    dq, = torch.autograd.grad(ft.attention(q, k, v, seed=0, **kw).sum(), q)
    assert dq.grad_fn is None and torch.isfinite(dq).all()


def test_example_trains(tmp_path):
    """examples/torch_attention.py: the README's example fine-tunes data/lm16's model with FAVOR+
    beside a window in every layer; a short run must lower the loss."""
    r = subprocess.run([sys.executable, str(SRC / "examples" / "torch_attention.py"), "--steps", "4", "--L", "128",
                        "--batch", "2"], capture_output=True, text=True, cwd=tmp_path,
                       env=dict(os.environ, PYTHONPATH=str(Path(favor.__file__).resolve().parents[1])))
    assert r.returncode == 0, r.stderr
    losses = [float(line.split()[-1]) for line in r.stdout.splitlines() if line.startswith("step")]
    assert len(losses) == 5 and losses[-1] < losses[0], r.stdout


# The saved forward (issue 41 item 4, docs/design.md 9.2): where favor's backward can start from
# the forward's state, favor.torch keeps it and its gradients are attention_grad's, bit for bit.
SAVED = dict(features="positive", projection="orthogonal", m=16, seed=2, trial=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
@pytest.mark.parametrize("shape", [(600, 8), (2, 3, 40, 8)], ids=["L,d", "B,H,L,d"])
def test_saved_equals_recompute(shape, causal, dtype):
    """The output is favor.attention's and the gradients favor.attention_grad's (which runs the
    forward again), bit for bit; L = 600 spans several of the backward's row blocks."""
    q, k, v = (t.detach().to(dtype).requires_grad_(True) for t in qkv(shape=shape, dv=6, seed=5))
    assert favor._attention(True, q.detach(), k.detach(), v.detach(), causal=causal, **SAVED)[1] is not None
    out = ft.attention(q, k, v, causal=causal, **SAVED)
    assert torch.equal(out, favor.attention(q.detach(), k.detach(), v.detach(), causal=causal, **SAVED))
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(6), dtype=dtype)
    mine = torch.autograd.grad(out, (q, k, v), g)
    theirs = favor.attention_grad(q.detach(), k.detach(), v.detach(), g, causal=causal, **SAVED)
    for a, b in zip(mine, theirs):
        assert a.dtype == dtype and torch.equal(a, b)


def test_saved_layout_and_strided_g():
    """layout="BLHD" through the saved path, and an upstream gradient that is not contiguous
    (out.sum()'s, expanded with stride 0): attention_grad's numbers."""
    q, k, v = (t.detach().float().permute(0, 2, 1, 3).requires_grad_(True) for t in qkv(shape=(2, 3, 24, 8), dv=8, seed=7))
    kw = dict(SAVED, layout="BLHD", causal=True)
    out = ft.attention(q, k, v, **kw)
    out.sum().backward()
    ones = torch.ones(out.shape, dtype=out.dtype)
    theirs = favor.attention_grad(q.detach(), k.detach(), v.detach(), ones, **kw)
    for a, b in zip((q.grad, k.grad, v.grad), theirs):
        assert torch.equal(a, b)


def test_saved_state_reuse():
    """The state is only read: a second backward (retain_graph) gives the same gradients; without
    retain_graph autograd refuses it, and a backward after an in-place change of the output (the
    state's memory) is refused by autograd's version check, as for torch's own exp."""
    q, k, v = qkv(shape=(32, 8), dv=4, seed=8)
    out = ft.attention(q, k, v, **SAVED)
    g = torch.randn(out.shape, generator=torch.Generator().manual_seed(9), dtype=out.dtype)
    first = torch.autograd.grad(out, (q, k, v), g, retain_graph=True)
    second = torch.autograd.grad(out, (q, k, v), g)
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        torch.autograd.grad(out, (q, k, v), g)
    out = ft.attention(q, k, v, **SAVED)
    out.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward(g)


def test_saved_where_it_serves():
    """The state is kept for maps with a gradient in float32 / float64; exact attention, hybrids
    (window, sinks) and maps without a gradient keep none (their backward is attention_grad's)."""
    q, k, v = (t.detach() for t in qkv(seed=10))
    saved = lambda **kw: favor._attention(True, q, k, v, seed=0, **kw)[1] is not None
    assert saved(features="positive", m=8) and saved(features="trig", m=4) and saved(features="elu")
    assert not saved(exact=True)
    assert not saved(features="positive", m=8, window=2, sinks=1)
    assert not saved(features="nystrom", m=3)
    assert not saved(features="positive", m=8, dtype="float16")


def test_saved_upstream_refusals():
    """A saved backward checks g as attention_grad does, with its messages."""
    q, k, v = (t.detach() for t in qkv(shape=(2, 7, 4), seed=11))
    out, saved = favor._attention(True, q, k, v, **SAVED)
    bad = torch.ones(out.shape, dtype=out.dtype)
    bad[1, 2, 0] = float("nan")
    for g in (bad, torch.ones(2, 7, 4, dtype=out.dtype)):
        with pytest.raises(favor.Error) as mine:
            favor._attention_backward(saved, g)
        with pytest.raises(favor.Error) as theirs:
            favor.attention_grad(q, k, v, g, **SAVED)
        assert str(mine.value) == str(theirs.value)


def test_kept_draws():
    """The library keeps its last draws of W (a pure function of its arguments): a second call gives
    the same matrix, not the memory of the first (which the caller may change)."""
    first = favor.projection("orthogonal", 24, 8, 12, 3)
    expected = first.copy()
    first[:] = 0
    assert np.array_equal(favor.projection("orthogonal", 24, 8, 12, 3), expected)
    assert not np.array_equal(favor.projection("orthogonal", 24, 8, 12, 4), expected)
