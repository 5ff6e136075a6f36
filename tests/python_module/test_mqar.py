"""favor.models and data/mqar/ (scripts/train_mqar.py): the MQAR generator has Zoology's
properties; every committed model, loaded by favor.models.load_mqar, gives on its check batch
the recall recorded in its model.json (and >= 99%); each capture's manifest matches its files
and a fresh capture of the committed model; the attention follows favor.swap_in's protocol."""
import argparse
import glob
import hashlib
import json
import os
import sys

import numpy as np
import pytest

import favor

torch = pytest.importorskip("torch")
import favor.models as fm  # noqa: E402  (imports torch)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ALL = sorted(glob.glob(os.path.join(ROOT, "data", "mqar", "*", "model.pt")))


def _attention(weights):
    with open(os.path.splitext(weights)[0] + ".json") as f:
        return json.load(f).get("attention")


# The softmax-trained cells (with captures), and the models trained with an approximation
# (scripts/train_mqar.py --attention: no capture, recall measured with that approximation).
CELLS = [p for p in ALL if _attention(p) is None]
TRAINED_WITH = [p for p in ALL if _attention(p) is not None]
cell_ids = [os.path.basename(os.path.dirname(p)) for p in CELLS]


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_generator_properties():
    n, L, pairs, V = 300, 64, 4, 256
    tokens, labels = fm.mqar_batch(n, L, pairs, V, seed=5)
    assert tokens.shape == labels.shape == (n, L) and tokens.dtype == labels.dtype == torch.int64
    t, y = tokens.numpy(), labels.numpy()
    keys, values = t[:, 0:2 * pairs:2], t[:, 1:2 * pairs:2]
    assert ((keys >= 1) & (keys < V // 2)).all() and ((values >= V // 2) & (values < V)).all()
    for i in range(n):
        assert len(set(keys[i])) == pairs and len(set(values[i])) == pairs
        q = np.flatnonzero(y[i] != -100)
        # every key queried exactly once, after the context, at even offsets; label = its value
        assert len(q) == pairs and (q >= 2 * pairs).all() and ((q - 2 * pairs) % 2 == 0).all()
        assert sorted(t[i, q]) == sorted(keys[i])
        assert dict(zip(t[i, q], y[i, q])) == dict(zip(keys[i], values[i]))
        rest = np.ones(L, bool)
        rest[:2 * pairs] = False
        rest[q] = False
        assert (t[i, rest] == 0).all()
    again = fm.mqar_batch(n, L, pairs, V, seed=5)
    assert torch.equal(again[0], tokens) and torch.equal(again[1], labels)
    assert not torch.equal(fm.mqar_batch(n, L, pairs, V, seed=6)[0], tokens)


def test_gaps_follow_zoology_distribution():
    """Which gaps are drawn: as numpy's choice(space, pairs, replace=False, p) in Zoology's
    generator, p(g) ~ a (g + 1)^(a - 1) (inclusion frequencies within 0.02 over 4000 examples)."""
    n, L, pairs, a = 4000, 64, 4, 0.01
    space = (L - 2 * pairs) // 2
    _, labels = fm.mqar_batch(n, L, pairs, 256, seed=0)
    ours = np.bincount(((np.nonzero(labels.numpy() != -100)[1] - 2 * pairs) // 2), minlength=space) / n
    p = a * np.arange(1, space + 1) ** (a - 1)
    rng = np.random.default_rng(1)
    ref = np.bincount(np.concatenate([rng.choice(space, pairs, replace=False, p=p / p.sum()) for _ in range(n)]),
                      minlength=space) / n
    assert np.abs(ours - ref).max() < 0.02
    assert ours[0] > 2 * ours[-1]   # short gaps favoured


def test_generator_refuses_bad_arguments():
    with pytest.raises(favor.Error, match="mqar_batch: .*pairs 20"):
        fm.mqar_batch(4, 64, 20, 256, seed=0)   # 4 pairs > L


def test_load_refuses_a_pickle_and_a_missing_file(tmp_path):
    p = tmp_path / "model.pt"
    torch.save({"x": argparse.Namespace(a=1)}, p)   # not tensors only: weights_only refuses it
    with pytest.raises(favor.Error, match=f"{p}: cannot load the MQAR model: UnpicklingError") as e:
        fm.load_mqar(str(p))
    assert "\n" not in str(e.value)
    with pytest.raises(favor.Error, match="nope.pt: cannot load the MQAR model"):
        fm.load_mqar(str(tmp_path / "nope.pt"))


def test_the_committed_cells():
    names = {os.path.basename(os.path.dirname(p)) for p in CELLS}
    assert {"L64_kv4_d64", "L256_kv16_d64"} <= names and len(names) >= 3, names


@pytest.mark.parametrize("weights", CELLS, ids=cell_ids)
def test_committed_model_recall(weights):
    torch.set_num_threads(2)
    model, meta = fm.load_mqar(weights)
    task, check = meta["task"], meta["check"]
    tokens, labels = fm.mqar_batch(check["n"], task["L"], task["pairs"], task["vocab"], check["seed"])
    r = fm.recall(model, tokens, labels)
    assert abs(r - check["recall"]) <= 1 / (check["n"] * task["pairs"]) + 1e-12   # one query's tie at most
    assert r >= 0.99 and meta["test"]["recall"] >= 0.99
    assert len([m for m in model.modules() if hasattr(m, "attention_fn")]) == meta["config"]["n_layers"]


@pytest.mark.parametrize("weights", TRAINED_WITH, ids=[os.path.basename(os.path.dirname(p)) for p in TRAINED_WITH])
def test_model_trained_with_an_approximation_recall(weights):
    """Its check batch's recall with its approximation set as in training (favor.torch, W of layer l
    from (seed + l, trial = the last step)) is the recorded one, within one query's tie."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import train_mqar
    torch.set_num_threads(2)
    model, meta = fm.load_mqar(weights)
    att = meta["attention"]
    train_mqar.trained_with(model, {k: att[k] for k in ("features", "projection", "m")}, meta["recipe"]["seed"],
                            [meta["steps"]])
    task, check = meta["task"], meta["check"]
    tokens, labels = fm.mqar_batch(check["n"], task["L"], task["pairs"], task["vocab"], check["seed"])
    r = fm.recall(model, tokens, labels)
    assert abs(r - check["recall"]) <= 1 / (check["n"] * task["pairs"]) + 1e-12
    assert not os.path.exists(os.path.join(os.path.dirname(weights), "capture"))


@pytest.mark.parametrize("weights", CELLS, ids=cell_ids)
def test_capture_matches_its_files_and_the_model(weights, tmp_path):
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from capture_qkv import capture
    folder = os.path.join(os.path.dirname(weights), "capture")
    with open(os.path.join(folder, "manifest.json")) as f:
        man = json.load(f)
    inp = man["input"]
    assert inp["model_sha256"] == sha256(weights)
    model, meta = fm.load_mqar(weights)
    assert len(man["layers"]) == meta["config"]["n_layers"]
    tokens, labels = fm.mqar_batch(inp["n"], inp["L"], inp["pairs"], inp["vocab"], inp["seed"])
    tokens, labels = tokens[:inp["rows"]], labels[:inp["rows"]]
    fresh = capture(model, tokens, out=str(tmp_path), causal=True,
                    loss_fn=lambda logits: fm.query_loss(logits, labels))
    for lay, new in zip(man["layers"], fresh["layers"]):
        assert lay["causal"] and lay["check"]["passed"] and set(lay["files"]) == {"q", "k", "v", "g"}
        assert lay["H"] == meta["config"]["n_heads"] and lay["L"] == inp["L"]
        for w, entry in lay["files"].items():
            path = os.path.join(folder, entry["path"])
            a = np.load(path, allow_pickle=False)
            assert entry["sha256"] == sha256(path)
            assert list(a.shape) == entry["shape"] and str(a.dtype) == entry["dtype"] == "float32"
            b = np.load(os.path.join(tmp_path, new["files"][w]["path"]))
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * np.abs(b).max())


def test_swap_in_protocol_with_favor_exact_attention():
    """attention_fn = favor's exact causal attention reproduces the model's logits."""
    model, meta = fm.load_mqar(CELLS[0])
    task = meta["task"]
    tokens, _ = fm.mqar_batch(4, task["L"], task["pairs"], task["vocab"], seed=9)
    with torch.no_grad():
        own = model(tokens)
        layers = [m for m in model.modules() if hasattr(m, "attention_fn")]

        def exact(q, k, v, scale, causal):
            d = q.shape[-1]
            return favor.attention((q * scale * d ** 0.5).double(), k.double(), v.double(), exact=True,
                                   causal=causal).float()
        try:
            for m in layers:
                m.attention_fn = exact
            swapped = model(tokens)
        finally:
            for m in layers:
                m.attention_fn = None
    torch.testing.assert_close(swapped, own, rtol=1e-4, atol=1e-4)
