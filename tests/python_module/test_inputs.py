"""How import favor reads q, k, v: layout= as the CLI's --layout (its refusal of an (B, L, H, d)
array read as (B, H, L, d), its warning, its messages, its numbers), byte-swapped arrays,
torch tensors (requires_grad, bfloat16, the dtype rule of docs/design.md section 9), and
texts that are not UTF-8 (paths in messages and results)."""
import os
import subprocess
import warnings

import numpy as np
import pytest

import favor

FAVOR = os.environ["FAVOR"]


def cli(*args, cwd=None):
    return subprocess.run([FAVOR, *map(str, args)], capture_output=True, text=True, cwd=cwd)


def save(d, **arrays):
    """Arrays saved as files named q, k, v (the CLI then names them as the module does)."""
    for n, a in arrays.items():
        with open(d / n, "wb") as f:
            np.save(f, a)


def blhd(seed, B=2, L=12, H=3, d=4, dv=5):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(B, L, H, d)) * 0.6, rng.normal(size=(B, L, H, d)) * 0.6, rng.normal(size=(B, L, H, dv)))


def bhld(a):
    return np.ascontiguousarray(a.transpose(0, 2, 1, 3))


@pytest.mark.parametrize("kw", [dict(exact=True), dict(features="positive", m=16, seed=2)], ids=["exact", "positive"])
def test_layout_equals_cli_and_transpose(tmp_path, kw):
    q, k, v = blhd(1)
    save(tmp_path, q=q, k=k, v=v)
    args = ["--exact"] if kw.get("exact") else ["--features", "positive", "--m", 16, "--seed", 2]
    r = cli("apply", "--q", "q", "--k", "k", "--v", "v", "--layout", "BLHD", "--causal", *args, "--out", "o.npy",
            cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got = favor.attention(q, k, v, layout="BLHD", causal=True, **kw)
    assert got.shape == (2, 12, 3, 5)   # the layout's order, as apply --layout writes it
    assert got.tobytes() == np.load(tmp_path / "o.npy").tobytes()
    want = favor.attention(bhld(q), bhld(k), bhld(v), causal=True, **kw)
    assert got.tobytes() == np.ascontiguousarray(bhld(want)).tobytes()


def test_layout_grad_and_features(tmp_path):
    q, k, v = blhd(2)
    g = np.random.default_rng(3).normal(size=(2, 3, 12, 5))   # favor's order
    # g read in the layout, dq, dk, dv returned in it (apply --layout --grad's rule)
    a = favor.attention_grad(q, k, v, np.ascontiguousarray(bhld(g)), layout="BLHD", features="positive", m=8, seed=1)
    b = favor.attention_grad(bhld(q), bhld(k), bhld(v), g, features="positive", m=8, seed=1)
    assert all(x.shape == (2, 12, 3, y.shape[-1]) for x, y in zip(a, b))
    assert all(x.tobytes() == np.ascontiguousarray(bhld(y)).tobytes() for x, y in zip(a, b))
    phi = favor.features(k, "positive", m=8, seed=1, side="key", other=q, layout="BLHD")
    want = favor.features(bhld(k), "positive", m=8, seed=1, side="key", other=bhld(q))
    assert phi.tobytes() == np.ascontiguousarray(bhld(want)).tobytes()
    lq = q[0, :, 0]   # (L, d) with layout "LD": the identity
    assert favor.features(lq, "trig", m=8, seed=1, layout="LD").tobytes() == \
        favor.features(lq, "trig", m=8, seed=1).tobytes()


def test_pytorch_layout_without_layout_is_refused_as_the_cli_refuses_it(tmp_path):
    """A (B, L, H, d) array with fewer rows than heads was read as (B, H, L, d) without a word."""
    rng = np.random.default_rng(4)
    q, k, v = (rng.normal(size=(1, 6, 3, 4)) for _ in range(3))   # (B, L, H, d): L = 6, H = 3
    save(tmp_path, q=q, k=k, v=v)
    r = cli("apply", "--q", "q", "--k", "k", "--v", "v", "--exact", "--out", "o.npy", cwd=tmp_path)
    assert r.returncode == 2 and "set --layout to \"BLHD\"" in r.stderr, r.stderr
    for call in (lambda: favor.attention(q, k, v, exact=True),
                 lambda: favor.attention_grad(q, k, v, np.ones((1, 6, 3, 4)), exact=True)):
        with pytest.raises(favor.Error) as e:
            call()
        assert "favor: " + str(e.value) + "\n" == r.stderr
    with pytest.raises(favor.Error) as e:
        favor.features(q, "positive", m=8)
    assert str(e.value).startswith("q: shape (1, 6, 3, 4) read as (B, H, L, d) gives 6 heads of L = 3 rows")
    # with the layout named, read as it is
    assert favor.attention(q, k, v, exact=True, layout="BLHD").shape == (1, 6, 3, 4)


def test_layout_warning_and_bad_layout_as_the_cli(tmp_path):
    rng = np.random.default_rng(5)
    q, k, v = (rng.normal(size=(2, 6, 8)) for _ in range(3))   # (H, L, d): L = 6 < d = 8
    save(tmp_path, q=q, k=k, v=v)
    r = cli("apply", "--q", "q", "--k", "k", "--v", "v", "--exact", "--out", "o.npy", cwd=tmp_path)
    assert r.returncode == 0 and r.stderr.startswith("favor: warning: "), r.stderr
    with pytest.warns(UserWarning) as w:
        favor.attention(q, k, v, exact=True)
    assert [f"favor: warning: {x.message}\n" for x in w] == [r.stderr]
    for bad in ("BLXD", "BLLD", "BH"):
        r = cli("apply", "--q", "q", "--k", "k", "--v", "v", "--exact", "--layout", bad, "--out", "o.npy", cwd=tmp_path)
        with pytest.raises(favor.Error) as e:
            favor.attention(q, k, v, exact=True, layout=bad)
        assert r.returncode == 2 and "favor: " + str(e.value) + "\n" == r.stderr
    r = cli("apply", "--q", "q", "--k", "k", "--v", "v", "--exact", "--layout", "BLHD", "--out", "o.npy", cwd=tmp_path)
    with pytest.raises(favor.Error) as e:   # rank 3 with a 4-axis layout
        favor.attention(q, k, v, exact=True, layout="BLHD")
    assert r.returncode == 2 and "favor: " + str(e.value) + "\n" == r.stderr


@pytest.mark.parametrize("dt", [">f8", ">f4", ">f2"])
def test_byte_swapped_arrays_are_read(dt):
    q, k, v = blhd(6)
    native = [a.astype(dt[1:]) for a in (q, k, v)]
    swapped = [a.astype(dt) for a in (q, k, v)]
    assert not swapped[0].dtype.isnative
    for kw in (dict(exact=True), dict(features="positive", m=8, seed=1, dtype="float32")):
        assert favor.attention(*swapped, layout="BLHD", **kw).tobytes() == \
            favor.attention(*native, layout="BLHD", **kw).tobytes()


def npz_with_member(path, raw_name):
    """An .npz whose one member's name is the bytes raw_name (+ .npy), which need not be UTF-8
    (zipfile writes names as UTF-8: a same-length placeholder is patched)."""
    import io
    import zipfile
    buf = io.BytesIO()
    np.save(buf, np.ones((4, 2)))
    placeholder = b"Z" * len(raw_name)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(placeholder.decode() + ".npy", buf.getvalue())
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data.replace(placeholder + b".npy", raw_name + b".npy"))


def test_non_utf8_message_survives(tmp_path):
    """favor's message holds the bytes of a name that is not UTF-8 (an archive member's): the
    module's favor.Error keeps them (decoded as os.fsdecode does), the same line as the CLI's,
    where a strict decode gave an exception without a message."""
    npz_with_member(tmp_path / "x.npz", b"caf\xe9")
    cfg = tmp_path / "c.json"
    cfg.write_text('{"name": "u", "inputs": {"source": "npy", "q": "x.npz", "k": "x.npz", "v": "x.npz"}, '
                   '"variants": [{"features": "positive"}], "m": 4}')
    r = subprocess.run([FAVOR, "validate", str(cfg)], capture_output=True)
    assert r.returncode == 2 and b"caf\xe9" in r.stderr, r.stderr
    with pytest.raises(favor.Error) as e:
        favor.validate(cfg)
    assert b"favor: " + os.fsencode(str(e.value)) + b"\n" == r.stderr


def test_non_utf8_argument_refused_as_the_cli_refuses_it(tmp_path):
    """A path or value that is not UTF-8 (a str with surrogate escapes, as os.fsdecode makes
    it) is refused with one line naming the keyword, as the CLI refuses such an argument,
    where it was a TypeError from the bindings; nothing is written."""
    raw = os.fsencode(str(tmp_path)) + b"/caf\xe9"   # Latin-1: not UTF-8
    r = subprocess.run([os.fsencode(FAVOR), b"validate", raw + b".json"], capture_output=True)
    assert r.returncode == 2 and b"not valid UTF-8 (byte 0xe9 at offset" in r.stderr
    shown = str(tmp_path) + "/caf\\xe9"
    cfg = {"name": "u", "seed": 1, "inputs": {"source": "random", "L": 8, "d": 4},
           "variants": [{"features": "positive"}], "m": 4, "trials": 2, "metrics": ["output_mse"]}
    for call, what, text in ((lambda: favor.validate(os.fsdecode(raw + b".json")), "config", shown + ".json"),
                             (lambda: favor.run(cfg, out=os.fsdecode(raw)), "out", shown),
                             (lambda: favor.run(cfg, out=tmp_path / "o", set=["name=caf\udce9"]), "set", "name=caf\\xe9")):
        with pytest.raises(favor.Error) as e:
            call()
        msg = str(e.value)
        assert msg.startswith(f"{what} '{text}': not valid UTF-8 (byte 0xe9 at offset ") and "\n" not in msg, msg
        assert msg.endswith("; favor records names and values in run.json, which holds UTF-8 only: rename it")
    assert sorted(os.listdir(tmp_path)) == []


# ----------------------------------------------------------------------------- torch tensors

torch = pytest.importorskip("torch")


def test_torch_requires_grad_is_refused():
    q, k, v = (torch.randn(2, 8, 4, requires_grad=True) for _ in range(3))
    with pytest.raises(favor.Error) as e:
        favor.attention(q, k, v, exact=True)
    assert str(e.value) == ("q: a torch tensor that requires grad: favor computes no torch gradients "
                            "(favor.attention_grad gives them); pass q.detach()")
    out = favor.attention(q.detach(), k.detach(), v.detach(), exact=True)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32


@pytest.mark.parametrize("dt", ["float64", "float32", "float16", "bfloat16"])
def test_torch_dtype_kept(dt):
    """torch inputs: the computation runs in their dtype unless dtype= says otherwise, and the
    result is a torch tensor of it (favor's float32 output rounded for the half dtypes)."""
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, 10, 2, 4, generator=g).to(getattr(torch, dt)) for _ in range(3))
    out = favor.attention(q, k, v, features="positive", m=8, seed=1, layout="BLHD")
    wide = [x.float().numpy() if dt == "bfloat16" else x.numpy() for x in (q, k, v)]
    want = favor.attention(*wide, features="positive", m=8, seed=1, layout="BLHD", dtype=dt)
    assert out.dtype == getattr(torch, dt) and out.shape == (1, 10, 2, 4)   # in the layout
    assert torch.equal(out, torch.from_numpy(want).to(out.dtype))
    # dtype= given: the computation and the result in it
    assert favor.attention(q, k, v, exact=True, dtype="float64", layout="BLHD").dtype == torch.float64


def test_torch_strided_and_mixed():
    g = torch.Generator().manual_seed(8)
    x = torch.randn(1, 12, 2, 4, generator=g)
    t = x.transpose(1, 2)   # (B, H, L, d) view of a (B, L, H, d) tensor, not contiguous
    a = favor.attention(t, t, t, exact=True)
    b = favor.attention(x, x, x, exact=True, layout="BLHD")   # returned in the layout
    assert torch.equal(a, b.transpose(1, 2))
    with pytest.raises(favor.Error, match=r"^q, k, v: torch inputs of different dtypes \(q float32, k float64, "
                                          r"v float32\); pass dtype=$"):
        favor.attention(t, t.double(), t, exact=True)
    phi, s = favor.features(t, "positive", m=8, seed=1, log_scale=True)
    assert phi.dtype == torch.float32 and s.dtype == torch.float64
