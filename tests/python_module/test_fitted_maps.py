"""Fitted feature maps (hedgehog and t2r with "weights"; docs/estimators.md "Fitted maps"):
favor's output and gradients equal an independent numpy / torch evaluation of the stored
weights, per head and for one named head; the refusals name the file and what is wrong;
scripts/fit_maps.py writes weights favor reads and lowers the transfer loss."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import favor

FAVOR = os.environ["FAVOR"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write_weights(folder, kind, heads, d, w, seed, layer="layer0"):
    """A weights file as scripts/fit_maps.py writes it, with random weights; returns its path."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for side in ("q", "k"):
        arrays[f"{layer}.{side}_A"] = rng.normal(size=(heads, d, w)) * 0.7
        # t2r: b > 0 so that every row has a positive z (a relu row of zeros has no attention row)
        arrays[f"{layer}.{side}_b"] = rng.normal(size=(heads, w)) * 0.3 + (2.0 if kind == "t2r" else 0.0)
    path = os.path.join(folder, f"{kind}.npz")
    np.savez(path, **arrays)
    with open(os.path.join(folder, f"{kind}.json"), "w") as f:
        json.dump({"kind": kind, "layers": {layer: {"heads": heads, "fitted_on": None}}}, f)
    return path, arrays


def phi(kind, x, A, b):
    z = x @ A + b
    if kind == "t2r":
        return np.maximum(z, 0.0)
    e1 = np.exp(z - z.max(-1, keepdims=True))
    e2 = np.exp(-z - (-z).max(-1, keepdims=True))
    return np.concatenate([e1 / e1.sum(-1, keepdims=True), e2 / e2.sum(-1, keepdims=True)], -1)


def reference(kind, arrays, q, k, v, causal, heads_used, layer="layer0"):
    """Linear attention with the stored weights, head h of the inputs using stored head heads_used[h]."""
    d = q.shape[-1]
    out = np.empty(q.shape[:-1] + (v.shape[-1],))
    for h, s in enumerate(heads_used):
        x, y = q[0, h] / d ** 0.25, k[0, h] / d ** 0.25
        pq = phi(kind, x, arrays[f"{layer}.q_A"][s], arrays[f"{layer}.q_b"][s])
        pk = phi(kind, y, arrays[f"{layer}.k_A"][s], arrays[f"{layer}.k_b"][s])
        K = pq @ pk.T
        if causal:
            K = np.tril(K)
        out[0, h] = (K @ v[0, h]) / K.sum(-1, keepdims=True)
    return out


def qkv(seed, H=2, L=24, d=8):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(1, H, L, d)), rng.normal(size=(1, H, L, d)), rng.normal(size=(1, H, L, d))


@pytest.mark.parametrize("kind", ["hedgehog", "t2r"])
@pytest.mark.parametrize("causal", [False, True])
def test_output_equals_numpy_of_the_stored_weights(tmp_path, kind, causal):
    path, arrays = write_weights(str(tmp_path), kind, heads=2, d=8, w=6, seed=3)
    q, k, v = qkv(4)
    got = favor.attention(q, k, v, features=kind, causal=causal, dtype="float64", weights=path + ":layer0")
    want = reference(kind, arrays, q, k, v, causal, [0, 1])
    assert np.max(np.abs(got - want)) <= 1e-12 * np.max(np.abs(want))
    # float32: the same map to float32's rounding
    got32 = favor.attention(q, k, v, features=kind, causal=causal, dtype="float32", weights=path + ":layer0")
    assert np.max(np.abs(got32 - want)) <= 1e-5 * np.max(np.abs(want))
    # one named head serves every input head
    one = favor.attention(q, k, v, features=kind, causal=causal, dtype="float64", weights=path + ":layer0.head1")
    assert np.max(np.abs(one - reference(kind, arrays, q, k, v, causal, [1, 1]))) <= 1e-12 * np.max(np.abs(want))


def test_identity_hedgehog_is_softmax_dim(tmp_path):
    d = 8
    np.savez(tmp_path / "id.npz", **{f"layer0.{s}_A": np.eye(d)[None] for s in "qk"},
             **{f"layer0.{s}_b": np.zeros((1, d)) for s in "qk"})
    (tmp_path / "id.json").write_text(json.dumps({"kind": "hedgehog", "layers": {"layer0": {"heads": 1}}}))
    q, k, v = qkv(5, H=1)
    fitted = favor.attention(q, k, v, features="hedgehog", causal=True, dtype="float64", weights=str(tmp_path / "id.npz") + ":layer0")
    sd = favor.attention(q, k, v, features="softmax_dim", causal=True, dtype="float64")
    assert np.max(np.abs(fitted - sd)) <= 1e-13


@pytest.mark.parametrize("kind", ["hedgehog", "t2r"])
def test_gradients_equal_torch_autograd(tmp_path, kind):
    torch = pytest.importorskip("torch")
    path, arrays = write_weights(str(tmp_path), kind, heads=2, d=8, w=6, seed=6)
    q, k, v = qkv(7)
    g = np.random.default_rng(8).normal(size=v.shape)
    dq, dk, dv = favor.attention_grad(q, k, v, g, features=kind, causal=True, dtype="float64", weights=path + ":layer0")
    for h in range(2):
        Q, K, V = (torch.tensor(a[0, h], requires_grad=True) for a in (q, k, v))
        s = 8 ** -0.25

        def f(x, side):
            z = x * s @ torch.tensor(arrays[f"layer0.{side}_A"][h]) + torch.tensor(arrays[f"layer0.{side}_b"][h])
            return torch.relu(z) if kind == "t2r" else torch.cat([torch.softmax(z, -1), torch.softmax(-z, -1)], -1)

        Kern = torch.tril(f(Q, "q") @ f(K, "k").T)
        out = (Kern @ V) / Kern.sum(-1, keepdim=True)
        (out * torch.tensor(g[0, h])).sum().backward()
        for mine, ref in ((dq, Q), (dk, K), (dv, V)):
            assert np.max(np.abs(mine[0, h] - ref.grad.numpy())) <= 1e-10 * (1 + np.max(np.abs(ref.grad.numpy())))


def apply_cli(tmp_path, *params, d=8, H=2):
    q, k, v = qkv(9, H=H, d=d)
    for n, a in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / f"{n}.npy", a)
    return subprocess.run([FAVOR, "apply", "--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy", "--v", tmp_path / "v.npy",
                           "--features", params[0], *[x for p in params[1:] for x in ("--param", p)],
                           "--out", tmp_path / "out.npy"], capture_output=True, text=True)


@pytest.mark.parametrize("case,want", [
    (lambda p: ("t2r", f"weights={p}:layer0"), "holds hedgehog weights"),
    (lambda p: ("hedgehog", f"weights={p}:layer7"), "no layer 'layer7'"),
    (lambda p: ("hedgehog", f"weights={p}:layer0.head5"), "head 5 asked, the file holds 2"),
    (lambda p: ("hedgehog", f"weights={p}"), "give FILE.npz:LAYER"),
    # A missing .npz beside an existing manifest is named as the missing weights file (was: its manifest).
    (lambda p: ("hedgehog", f"weights={p[:-4]}_gone.npz:layer0"), "_gone.npz: cannot open fitted-weights file"),
])
def test_refusals_are_one_line(tmp_path, case, want):
    path, _ = write_weights(str(tmp_path), "hedgehog", heads=2, d=8, w=6, seed=1)
    r = apply_cli(tmp_path, *case(path))
    assert r.returncode == 2 and want in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "out.npy").exists()


def test_refuses_other_d_and_other_head_counts(tmp_path):
    path, _ = write_weights(str(tmp_path), "hedgehog", heads=2, d=8, w=6, seed=1)
    r = apply_cli(tmp_path, "hedgehog", f"weights={path}:layer0", d=4)
    assert r.returncode == 2 and "fitted to heads of d = 8, the inputs have d = 4" in r.stderr, r.stderr
    r = apply_cli(tmp_path, "hedgehog", f"weights={path}:layer0", H=3)
    assert r.returncode == 2 and "holds 2 heads, the inputs have 3" in r.stderr, r.stderr
    assert apply_cli(tmp_path, "hedgehog", f"weights={path}:layer0.head1", H=3).returncode == 0


def test_a_batch_uses_the_stored_heads_per_element(tmp_path):
    """(B, H, L, d) inputs: head h of every batch element uses stored head h (a model's batch, as
    favor.swap_in hands its windows over), in attention, attention_grad and features alike: each
    equals the call on that element alone."""
    path, _ = write_weights(str(tmp_path), "hedgehog", heads=2, d=8, w=6, seed=5)
    rng = np.random.default_rng(6)
    q, k, v, g = (rng.normal(size=(3, 2, 20, 8)) for _ in range(4))
    kw = dict(features="hedgehog", weights=path + ":layer0", causal=True)
    out = favor.attention(q, k, v, **kw)
    grads = favor.attention_grad(q, k, v, g, **kw)
    phi = favor.features(q, "hedgehog", weights=path + ":layer0")
    for b in range(3):
        one = lambda x: x[b:b + 1]
        assert np.array_equal(out[b:b + 1], favor.attention(one(q), one(k), one(v), **kw))
        for got, want in zip(grads, favor.attention_grad(one(q), one(k), one(v), one(g), **kw)):
            assert np.array_equal(got[b:b + 1], want)
        assert np.array_equal(phi[b:b + 1], favor.features(one(q), "hedgehog", weights=path + ":layer0"))


@pytest.mark.parametrize("H", [1, 3])
def test_every_entry_point_refuses_another_head_count(tmp_path, H):
    """Weights of a 2-head layer on inputs of 1 or 3 heads: attention, attention_grad and features
    refuse alike (with 1 head, head 0's weights would otherwise serve silently)."""
    path, _ = write_weights(str(tmp_path), "hedgehog", heads=2, d=8, w=6, seed=1)
    q, k, v = qkv(2, H=H)
    calls = [lambda: favor.attention(q, k, v, features="hedgehog", weights=path + ":layer0"),
             lambda: favor.attention_grad(q, k, v, v, features="hedgehog", weights=path + ":layer0"),
             lambda: favor.features(q, "hedgehog", weights=path + ":layer0")]
    for call in calls:
        with pytest.raises(Exception, match="holds 2 heads, the inputs have %d" % H):
            call()


def write_capture(cap, H, L, d, seed=11):
    """A one-layer capture folder as scripts/capture_qkv.py writes it (the keys fit_maps reads)."""
    rng = np.random.default_rng(seed)
    (cap / "layer0").mkdir(parents=True)
    files = {}
    for n in "qkv":
        a = (rng.normal(size=(1, H, L, d)) * (1.5 if n != "v" else 1.0)).astype(np.float32)
        np.save(cap / "layer0" / f"{n}.npy", a)
        files[n] = {"path": f"layer0/{n}.npy"}
    (cap / "manifest.json").write_text(json.dumps({"layers": [{"index": 0, "name": "blk", "scale": d ** -0.5, "files": files}]}))


def fit_maps(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "fit_maps.py"), *map(str, args)],
                          capture_output=True, text=True)


def test_fit_script_lowers_the_loss_and_favor_reads_it(tmp_path):
    pytest.importorskip("torch")
    H, L, d = 2, 48, 8
    cap = tmp_path / "cap"
    write_capture(cap, H, L, d)
    out = tmp_path / "fit" / "hh.npz"
    r = fit_maps(cap, "--kind", "hedgehog", "--out", out, "--steps", "40", "--lr", "0.05", "--threads", "1")
    assert r.returncode == 0, r.stderr
    man = json.loads((tmp_path / "fit" / "hh.json").read_text())
    curve = man["layers"]["layer0"]["curve"]
    for c in curve:
        assert c[-1][1] < c[0][1]   # the transfer loss went down on every head
    q, k, v = (np.load(cap / "layer0" / f"{n}.npy") for n in "qkv")
    arrays = dict(np.load(out))
    got = favor.attention(q, k, v, features="hedgehog", causal=True, dtype="float64", weights=f"{out}:layer0")
    assert np.max(np.abs(got - reference("hedgehog", arrays, q.astype(np.float64), k.astype(np.float64),
                                         v.astype(np.float64), True, [0, 1]))) <= 1e-10
    untrained = favor.attention(q, k, v, features="hedgehog", causal=True, dtype="float64", weights=f"{out}:init.layer0")
    sd = favor.attention(q, k, v, features="softmax_dim", causal=True, dtype="float64")
    assert np.max(np.abs(untrained - sd)) <= 1e-6   # A = I, b = 0 stored in float32


def test_fit_script_writes_through_no_planted_link(tmp_path):
    """Symbolic links planted at the names fit_maps used for its temporaries (OUT.tmp.npz,
    OUT.json.tmp) are not written through: the files they point at stay as they were, and the
    outputs are regular files with the process's usual permissions."""
    pytest.importorskip("torch")
    write_capture(tmp_path / "cap", 1, 16, 4)
    fit = tmp_path / "fit"
    fit.mkdir()
    victims = [tmp_path / "victim1", tmp_path / "victim2"]
    for v, name in zip(victims, ("hh.tmp.npz", "hh.json.tmp")):
        v.write_text("keep")
        os.symlink(v, fit / name)
    r = fit_maps(tmp_path / "cap", "--kind", "t2r", "--out", fit / "hh.npz", "--steps", "2", "--threads", "1")
    assert r.returncode == 0, r.stderr
    assert [v.read_text() for v in victims] == ["keep", "keep"]
    assert sorted(os.listdir(fit)) == ["hh.json", "hh.json.tmp", "hh.npz", "hh.tmp.npz"]
    umask = os.umask(0)
    os.umask(umask)
    for name in ("hh.npz", "hh.json"):
        assert not os.path.islink(fit / name) and os.stat(fit / name).st_mode & 0o777 == 0o666 & ~umask
    assert set(np.load(fit / "hh.npz").files) >= {"layer0.q_A", "init.layer0.k_b"}


@pytest.mark.parametrize("layers", ["0,x", "0,0", "0,,0"])
def test_fit_script_bad_layers_is_one_line(tmp_path, layers):
    write_capture(tmp_path / "cap", 1, 16, 4)
    r = fit_maps(tmp_path / "cap", "--kind", "t2r", "--out", tmp_path / "hh.npz", "--layers", layers, "--steps", "2")
    assert r.returncode == 2 and r.stderr.startswith("fit_maps: --layers:") and r.stderr.count("\n") == 1, r.stderr
    assert sorted(os.listdir(tmp_path)) == ["cap"]


@pytest.mark.parametrize("manifest", [[], {"layers": [{"index": 0}]}, {"layers": [{"files": "FILES"}]},
                                      {"layers": [{"index": "0", "scale": 0.5, "files": "FILES"}]}])
def test_fit_script_bad_manifest_is_one_line(tmp_path, manifest):
    """A manifest that is not a capture's (no layers list, a layer without files or index) is one
    line naming manifest.json, exit 2, and no output (today: a traceback)."""
    cap = tmp_path / "cap"
    write_capture(cap, 1, 16, 4)
    files = json.loads((cap / "manifest.json").read_text())["layers"][0]["files"]
    (cap / "manifest.json").write_text(json.dumps(manifest).replace('"FILES"', json.dumps(files)))
    r = fit_maps(cap, "--kind", "t2r", "--out", tmp_path / "hh.npz", "--steps", "2")
    assert r.returncode == 2 and r.stderr.startswith("fit_maps: %s" % (cap / "manifest.json")), r.stderr
    assert r.stderr.count("\n") == 1 and sorted(os.listdir(tmp_path)) == ["cap"], r.stderr


def test_config_run_per_head_and_the_fitted_input_flag(tmp_path):
    """favor run on a per-head capture: head h uses stored head h (the errors equal the module's),
    run.json records the weights, and a map evaluated on the q file it was fitted
    on says so in its name (fitted_on_eval_input), one fitted elsewhere does not."""
    H, L, d = 2, 32, 8
    q, k, v = qkv(12, H=H, L=L, d=d)
    for n, a in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / f"{n}.npy", a)
    path, _ = write_weights(str(tmp_path), "hedgehog", heads=H, d=d, w=6, seed=13)
    import hashlib
    man = json.loads((tmp_path / "hedgehog.json").read_text())
    man["layers"]["layer0"]["fitted_on"] = {"q_sha256": hashlib.sha256((tmp_path / "q.npy").read_bytes()).hexdigest()}
    man["layers"]["other"] = {"heads": H, "fitted_on": {"q_sha256": "0" * 64}}
    (tmp_path / "hedgehog.json").write_text(json.dumps(man))
    w = np.load(path)
    np.savez(path, **dict(w), **{k.replace("layer0", "other"): w[k] for k in w.files})
    cfg = {"name": "fit", "inputs": {"source": "npy", "q": "q.npy", "k": "k.npy", "v": "v.npy", "per_head": True},
           "causal": True, "m": 1, "trials": 1, "metrics": ["output_rel_error"], "output_dir": "out",
           "variants": [{"features": "hedgehog", "weights": "hedgehog.npz:layer0"},
                        {"features": "hedgehog", "weights": "hedgehog.npz:other", "name": "held_out"}]}
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    r = subprocess.run([FAVOR, "run", str(tmp_path / "c.json")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    import csv
    rows = list(csv.DictReader(open(tmp_path / "out" / "errors.csv")))
    assert {row["variant"] for row in rows} == {"hedgehog+fitted_on_eval_input", "held_out"}
    exact = favor.attention(q, k, v, exact=True, causal=True, dtype="float64")
    for variant, member in (("hedgehog+fitted_on_eval_input", "layer0"), ("held_out", "other")):
        approx = favor.attention(q, k, v, features="hedgehog", causal=True, dtype="float64", weights=f"{path}:{member}")
        for row in rows:
            if row["variant"] == variant:
                h = int(row["head"])
                want = np.linalg.norm(approx[0, h] - exact[0, h]) / np.linalg.norm(exact[0, h])
                assert abs(float(row["output_rel_error"]) - want) <= 1e-12 * want
    variants = json.loads((tmp_path / "out" / "run.json").read_text())["config"]["variants"]
    assert [v["weights"].endswith(m) for v, m in zip(variants, ("hedgehog.npz:layer0", "hedgehog.npz:other"))] == [True, True]
