"""favor.swap_in (docs/design.md section 9): the model of data/ with its attention swapped.
favor's exact attention gives the model's own bits per byte (to 1e-6); uniform attention gives
a value computed here by hand from the weights; the result set is one `favor compare` reads;
the refusals name the layer, the variant and the window; a failed swap-in leaves earlier
results as they were."""
import copy
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import favor

torch = pytest.importorskip("torch")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from tiny_lm import load_tiny_lm  # noqa: E402

FAVOR = os.environ.get("FAVOR", os.path.join(ROOT, "build", "favor"))


@pytest.fixture(scope="module")
def model():
    m, _ = load_tiny_lm(os.path.join(ROOT, "data", "tiny_lm.pt"))
    return m


def windows(n=3, L=48, seed=0):
    """n windows of L + 1 bytes of this file's text (any bytes would do)."""
    with open(__file__, "rb") as f:
        text = np.frombuffer(f.read(), dtype=np.uint8).astype(np.int64)
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, len(text) - L - 1, size=n)
    return np.stack([text[s:s + L + 1] for s in starts])


def own_bits(model, w):
    """The model's bits per predicted byte of each window, exact attention, by plain torch."""
    with torch.no_grad():
        t = torch.as_tensor(w)
        logp = torch.log_softmax(model(t[:, :-1]).double(), dim=-1)
        nll = -logp.gather(-1, t[:, 1:, None])[..., 0]
    return (nll.mean(dim=1) / math.log(2)).numpy()


def uniform_bits_by_hand(sd, c, tokens):
    """Bits per byte of one window with uniform causal attention in every layer (each position's
    attention output = the mean of v over positions 0..i), from the state dict in numpy float64:
    embedding, per block LayerNorm, qkv (only v is used), the mean, out, LayerNorm, GELU MLP;
    final LayerNorm and the tied output embedding."""
    from math import erf, sqrt
    P = {k: v.double().numpy() for k, v in sd.items()}

    def ln(x, w, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * w + b

    gelu = np.vectorize(lambda z: 0.5 * z * (1 + erf(z / sqrt(2))))
    x_in, y = tokens[:-1], tokens[1:]
    L, H, hd = len(x_in), c["n_heads"], c["head_dim"]
    x = P["emb.weight"][x_in]
    for i in range(c["n_layers"]):
        p = f"blocks.{i}."
        h = ln(x, P[p + "ln1.weight"], P[p + "ln1.bias"])
        v = (h @ P[p + "attn.wqkv.weight"].T).reshape(L, 3, H, hd)[:, 2]        # (L, H, hd)
        o = np.cumsum(v, axis=0) / np.arange(1, L + 1)[:, None, None]          # uniform causal attention
        x = x + o.reshape(L, H * hd) @ P[p + "attn.out.weight"].T
        h = ln(x, P[p + "ln2.weight"], P[p + "ln2.bias"])
        x = x + gelu(h @ P[p + "mlp.0.weight"].T + P[p + "mlp.0.bias"]) @ P[p + "mlp.2.weight"].T + P[p + "mlp.2.bias"]
    logits = ln(x, P["ln_f.weight"], P["ln_f.bias"]) @ P["emb.weight"].T
    m = logits.max(-1, keepdims=True)
    logp = logits - m - np.log(np.exp(logits - m).sum(-1, keepdims=True))
    return -logp[np.arange(L), y].mean() / math.log(2)


def test_exact_attention_swapped_in_gives_the_models_own_bits(model):
    w = windows()
    r = favor.swap_in(model, w, [{"features": "exact"}], layers=["all", 2], trials=1)
    own = own_bits(model, w)
    # the reference itself: the same float32 model (another call, so another order of float32
    # sums in torch's kernels is possible: ~1e-8)
    assert abs(r["info"]["exact_bits_per_byte"] - own.mean()) < 1e-6
    win = r["windows"]
    for layers in ("all", "2"):
        got = win[(win["variant"] == "exact") & (win["layers"].astype(str) == layers)]
        assert len(got) == len(w)
        # favor's exact float32 attention against torch's: both float32, so the model's bits agree
        # to float32 rounding of the logits, far inside 1e-6
        np.testing.assert_allclose(got["bits_per_byte"].to_numpy(), own, rtol=0, atol=1e-6)
    assert (r["errors"]["delta_bits_per_byte"].abs() < 1e-6).all()


def test_uniform_attention_against_a_hand_computed_value(model):
    m64 = copy.deepcopy(model).double()   # float64 throughout: hand and swap-in agree to ~1e-12
    w = windows(n=2, L=24, seed=3)
    r = favor.swap_in(m64, w, [{"features": "positive", "m": 4}], layers="all", trials=1)
    sd = {k: v for k, v in model.state_dict().items()}
    want = [uniform_bits_by_hand(sd, model.config, w[i]) for i in range(len(w))]
    win = r["windows"]
    got = win[win["variant"] == "uniform"]["bits_per_byte"].to_numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)
    s = r["summary"]
    assert s["baseline_bits_per_byte"].iloc[0] == pytest.approx(np.mean(want), abs=1e-10)
    assert s["baseline_delta_bits_per_byte"].iloc[0] == pytest.approx(np.mean(want) - own_bits(m64, w).mean(),
                                                                      abs=1e-10)


def test_result_set_is_one_compare_reads(model, tmp_path):
    out = tmp_path / "swap"
    w = windows(n=2, L=32)
    variants = [{"features": "positive", "projection": "orthogonal", "m": [8, 16]},
                {"features": "trig", "projection": "orthogonal", "m": 8},
                {"features": "none", "window": 8}]
    r = favor.swap_in(model, w, variants, layers=["all", 0], trials=3, seed=5, out=out)
    e = r["errors"]
    # per layer set: positive at 2 m, trig, none+w8 (one m: its 8 window columns) x 3 trials
    assert len(e) == 2 * 4 * 3
    assert set(e["layers"].astype(str)) == {"all", "0"}
    assert set(e[e["variant"] == "none+w8"]["num_features"]) == {8}
    assert set(e[e["variant"] == "trig-orthogonal"]["num_features"]) == {16}
    # trials draw new W: the random variants' trials differ, the deterministic one's do not
    pos = e[(e["variant"] == "positive-orthogonal") & (e["m"] == 8) & (e["layers"].astype(str) == "all")]
    assert pos["bits_per_byte"].nunique() == 3
    assert e[e["variant"] == "none+w8"].groupby("layers")["bits_per_byte"].nunique().max() == 1
    for f in ("errors.csv", "summary.csv", "windows.csv", "run.json"):
        assert (out / f).is_file()
    c = favor.compare(out, metric="delta_bits_per_byte", match="num_features")
    rk = c["ranking"]
    assert {"uniform", "positive-orthogonal", "trig-orthogonal", "none+w8"} <= set(rk["variant"])
    assert set(rk["layers"].astype(str)) == {"all", "0"}
    # the command line reads it too
    p = subprocess.run([FAVOR, "compare", str(out), "--metric", "bits_per_byte"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "layers=all" in p.stdout and "layers=0" in p.stdout
    # and scripts/plot.py draws it: a panel per layer set
    png = tmp_path / "swap.png"
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "plot.py"), str(out), "--metric",
                        "delta_bits_per_byte", "--x", "num_features", "--out", str(png), "--data",
                        str(tmp_path / "series.json")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    panels = {json.dumps(s["panel"], sort_keys=True) for s in json.loads((tmp_path / "series.json").read_text())["series"]}
    assert len(panels) == 2 and png.stat().st_size > 0


def test_refusals_name_layer_variant_and_window(model, tmp_path):
    w = windows(n=2, L=16)
    with pytest.raises(favor.Error, match=r"^swap_in: layers: no layer 4 \(the model has 4 attention layers: 0..3\)$"):
        favor.swap_in(model, w, [{"features": "positive", "m": 4}], layers=[0, 4])
    with pytest.raises(favor.Error, match=r"swap_in: variants\[0\].features: unknown"):
        favor.swap_in(model, w, [{"features": "positve", "m": 4}])
    with pytest.raises(favor.Error, match=r"variants\[0\].m: does not apply to 'elu'"):
        favor.swap_in(model, w, [{"features": "elu", "m": 4}])
    # a fitted map of another dimension (d = 8 weights; the heads have d = 64)
    rng = np.random.default_rng(0)
    npz = tmp_path / "h.npz"
    np.savez(npz, **{f"layer{i}.{s}_{p}": rng.normal(size=(2, 8, 6) if p == "A" else (2, 6))
                     for i in range(4) for s in "qk" for p in "Ab"})
    (tmp_path / "h.json").write_text(json.dumps({"kind": "hedgehog", "layers": {
        f"layer{i}": {"heads": 2, "fitted_on": None} for i in range(4)}}))
    with pytest.raises(favor.Error, match=r"swap_in: hedgehog \(m = \d+\), layer 0: .*d = 8"):
        favor.swap_in(model, w, [{"features": "hedgehog", "weights": str(npz)}])
    # a non-finite output: v scaled up past float16's range, attention computed in float16
    big = copy.deepcopy(model)
    with torch.no_grad():
        big.blocks[1].attn.wqkv.weight.mul_(1e4)
    with pytest.raises(favor.Error, match=r"swap_in: positive-iid \(m = 4\), trial 0: layer 1's attention output is "
                                          r"not finite in window 0 "):
        favor.swap_in(big, w, [{"features": "positive", "m": 4, "dtype": "float16"}], layers="all")


def test_a_failed_swap_in_leaves_earlier_results(model, tmp_path):
    out = tmp_path / "r"
    w = windows(n=1, L=16)
    favor.swap_in(model, w, [{"features": "positive", "m": 4}], out=out)
    before = {f: (out / f).read_bytes() for f in os.listdir(out)}
    with pytest.raises(favor.Error):
        favor.swap_in(model, w, [{"features": "positive", "m": 4}], layers=9, out=out)
    big = copy.deepcopy(model)
    with torch.no_grad():
        big.blocks[0].attn.wqkv.weight.mul_(1e4)
    with pytest.raises(favor.Error):
        favor.swap_in(big, w, [{"features": "positive", "m": 4, "dtype": "float16"}], out=out)
    assert {f: (out / f).read_bytes() for f in os.listdir(out)} == before
    assert [p for p in os.listdir(tmp_path) if p != "r"] == []   # no temporary folder left behind


def test_the_script_gives_one_line_errors(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text('{"variants": [{"features": "positive", "m": 4}], "layers": [7], "windows": 1, "L": 16}')
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(favor.__file__)))
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "swap_in.py"), str(cfg), "--out",
                        str(tmp_path / "o"), "--quiet"], capture_output=True, text=True, env=env)
    assert p.returncode == 2
    assert p.stderr == "swap_in.py: swap_in: layers: no layer 7 (the model has 4 attention layers: 0..3)\n"
    assert not (tmp_path / "o").exists()
    keep = tmp_path / "keep"   # a folder of the user's: refused in one line, kept
    keep.mkdir()
    (keep / "notes.txt").write_text("mine")
    cfg.write_text('{"variants": [{"features": "positive", "m": 4}], "windows": 1, "L": 16}')
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "swap_in.py"), str(cfg), "--out", str(keep),
                        "--quiet"], capture_output=True, text=True, env=env)
    assert p.returncode == 2
    assert p.stderr == (f"swap_in.py: swap_in: out '{keep}': not empty and not a swap-in result directory (it holds "
                        "notes.txt, and swap_in replaces it whole); choose another out\n")
    assert os.listdir(keep) == ["notes.txt"]


def test_out_is_replaced_only_when_it_is_a_swap_in_result_set(model, tmp_path):
    """out is replaced whole, so only a missing or empty folder or a swap-in result set (also one
    `favor compare` wrote into) is; a folder of anything else is refused before any work, intact."""
    w, v = windows(n=1, L=8), [{"features": "positive", "m": 4}]
    thesis = tmp_path / "thesis"
    thesis.mkdir()
    (thesis / "thesis.tex").write_text("years of work")
    with pytest.raises(favor.Error, match=r"^swap_in: out '.*thesis': not empty and not a swap-in result directory "
                                          r"\(it holds thesis.tex, and swap_in replaces it whole\); choose another out$"):
        favor.swap_in(model, w, v, out=thesis)
    (tmp_path / "sub" / "data").mkdir(parents=True)   # a folder inside, even in a swap-in's set
    (tmp_path / "sub" / "run.json").write_text('{"kind": "swap_in"}')
    with pytest.raises(favor.Error, match=r"^swap_in: out '.*sub': not empty .*\(it holds data, "):
        favor.swap_in(model, w, v, out=tmp_path / "sub")
    (tmp_path / "run").mkdir()   # a favor run's result set: the same file names, another kind
    (tmp_path / "run" / "run.json").write_text('{"kind": "kernel"}')
    with pytest.raises(favor.Error, match=r"^swap_in: out '.*run': not empty and not a swap-in result directory "
                                          r"\(no run.json of kind swap_in\); choose another out$"):
        favor.swap_in(model, w, v, out=tmp_path / "run")
    assert [p.read_text() for p in thesis.iterdir()] == ["years of work"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run", "sub", "thesis"]
    empty = tmp_path / "empty"
    empty.mkdir()
    favor.swap_in(model, w, v, out=empty)
    favor.compare(empty, metric="delta_bits_per_byte", write=True)
    favor.swap_in(model, w, v, out=empty)   # a swap-in result set, compare's files in it
    assert sorted(os.listdir(empty)) == ["errors.csv", "run.json", "summary.csv", "windows.csv"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "run", "sub", "thesis"]


def test_out_refuses_the_working_directory_and_mount_points(model, tmp_path, monkeypatch):
    """"." (or a folder holding it) and a mount point cannot be renamed away: one line, nothing
    written (once an OSError and stray .old-* folders beside it)."""
    w, v = windows(n=1, L=8), [{"features": "positive", "m": 4}]
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    for out in (".", "..", str(tmp_path)):
        with pytest.raises(favor.Error, match=r"^swap_in: out '.*': is the working directory or holds it; swap_in "
                                              r"replaces its output directory whole, so use a directory inside it$"):
            favor.swap_in(model, w, v, out=out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd"] and not os.listdir(tmp_path / "cwd")
    mount = next((p for p in ("/proc", "/sys", "/dev") if os.path.ismount(p)), None)
    if mount:
        with pytest.raises(favor.Error, match=rf"^swap_in: out '{mount}': is a mount point; "):
            favor.swap_in(model, w, v, out=mount)


def test_out_refuses_the_root(model, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = sorted(os.listdir("/"))
    with pytest.raises(favor.Error, match=r"^swap_in: out '/': cannot be an output directory \(it has no parent"):
        favor.swap_in(model, windows(n=1, L=8), [{"features": "positive", "m": 4}], out="/")
    assert sorted(os.listdir("/")) == before


def test_model_modes_and_torch_threads_are_restored(model):
    """swap_in puts the model in eval mode and sets torch's threads for its work; both are as they
    were after it, module by module, also when it raises."""
    w, v = windows(n=1, L=8), [{"features": "positive", "m": 4, "dtype": "float16"}]
    m = copy.deepcopy(model).train()
    m.blocks[0].eval()   # a mixed state
    modes = [x.training for x in m.modules()]
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        favor.swap_in(m, w, v, threads=2)
        assert [x.training for x in m.modules()] == modes and torch.get_num_threads() == 1
        with torch.no_grad():
            m.blocks[1].attn.wqkv.weight.mul_(1e4)   # float16 attention overflows
        with pytest.raises(favor.Error, match="not finite"):
            favor.swap_in(m, w, v, threads=2)
        assert [x.training for x in m.modules()] == modes and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)


def test_rows_name_the_projection_the_attention_used(model):
    """A variant without "projection" takes the config's default (iid) in its row name AND in its
    attention: it equals the same variant with "projection": "iid" given, not orthogonal's."""
    r = favor.swap_in(model, windows(n=2, L=16), [
        {"features": "positive", "m": 4}, {"features": "positive", "projection": "iid", "m": 4, "name": "given-iid"},
        {"features": "positive", "projection": "orthogonal", "m": 4}], trials=2)
    e = r["errors"]
    bits = {n: e[e["variant"] == n]["bits_per_byte"].tolist() for n in set(e["variant"])}
    assert set(bits) == {"positive-iid", "given-iid", "positive-orthogonal"}
    assert set(e[e["variant"] == "positive-iid"]["projection"]) == {"iid"}
    assert bits["positive-iid"] == bits["given-iid"]
    assert bits["positive-iid"] != bits["positive-orthogonal"]
