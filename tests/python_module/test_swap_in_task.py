"""favor.swap_in's `metric` and state_bytes (docs/design.md section 9.1; issue 55 item 4): an
MQAR model of data/mqar/ with favor's exact attention swapped in gives its own recall exactly
(favor.models.recall), uniform's is low; a user's function gives task_loss / task_score; the
state per head follows the formulas; bad metrics and threads are one line; `favor compare`
ranks a recall result set with higher better."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import favor

torch = pytest.importorskip("torch")
import favor.models as fm  # noqa: E402  (imports torch)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAVOR = os.environ.get("FAVOR", os.path.join(ROOT, "build", "favor"))
EXACT = {"features": "exact"}


@pytest.fixture(scope="module")
def mqar():
    """The L64_kv4_d64 model (2 layers, 1 head, d = 64) and 64 held-out examples of its task."""
    model, meta = fm.load_mqar(os.path.join(ROOT, "data", "mqar", "L64_kv4_d64", "model.pt"))
    t = meta["task"]
    tokens, labels = fm.mqar_batch(64, t["L"], t["pairs"], t["vocab"], seed=123)
    return model, tokens, labels


def per_example_recall(model, tokens, labels):
    """Each example's share of query positions predicted right, by plain torch."""
    with torch.no_grad():
        pred = model(tokens).argmax(dim=-1)
    q = labels != -100
    return (((pred == labels) & q).sum(dim=1).double() / q.sum(dim=1)).numpy()


def rows(table, variant, layers):
    return table[(table["variant"] == variant) & (table["layers"].astype(str) == layers)]


def test_exact_attention_gives_the_models_own_recall(mqar):
    model, tokens, labels = mqar
    r = favor.swap_in(model, (tokens, labels), [EXACT], layers=["all", 0, 1], metric="recall")
    own = fm.recall(model, tokens, labels)
    assert own > 0.99 and r["info"]["exact_recall"] == own
    assert r["info"]["metric"] == {"name": "recall", "direction": "higher"}
    e, win, s = r["errors"], r["windows"], r["summary"]
    assert list(e.columns[-2:]) == ["recall", "delta_recall"]
    for layers in ("all", "0", "1"):
        assert rows(e, "exact", layers)["recall"].tolist() == [own]
        assert rows(e, "exact", layers)["delta_recall"].tolist() == [0]
    # per window: the example's recall; every example has 4 queries, so the pooled value is their mean
    mine = per_example_recall(model, tokens, labels)
    np.testing.assert_array_equal(rows(win, "exact", "nan")["recall"].to_numpy(), mine)
    assert mine.mean() == own
    # uniform attention in every layer loses the recall (chance is 1/128); the baseline columns are it
    u = r["info"]["uniform_recall"]
    assert u["all"] < 0.2 and u["1"] < 0.2
    assert rows(win, "uniform", "all")["recall"].mean() == u["all"]
    assert rows(s, "exact", "all")["baseline_recall"].item() == u["all"]
    assert rows(s, "exact", "all")["baseline_delta_recall"].item() == u["all"] - own


def test_bits_per_byte_is_the_default_metric():
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from tiny_lm import load_tiny_lm
    model, _ = load_tiny_lm(os.path.join(ROOT, "data", "tiny_lm.pt"))
    w = np.random.default_rng(0).integers(0, 256, size=(3, 17))
    v = [{"features": "positive", "m": 8}]
    favor.swap_in(model, w, v)   # torch's first call in a process may differ in the last bits
    a, b = favor.swap_in(model, w, v), favor.swap_in(model, w, v, metric="bits_per_byte")
    for t in ("errors", "summary", "windows"):
        assert a[t].equals(b[t])
    assert list(a["errors"].columns[-2:]) == ["bits_per_byte", "delta_bits_per_byte"]
    assert a["info"]["metric"] == {"name": "bits_per_byte", "direction": "lower"}


def test_a_users_function_lower_and_higher(mqar):
    model, tokens, labels = mqar
    v = [EXACT, {"features": "positive", "m": 16}]
    seen = []

    def score(m, batch):
        seen.append(type(batch))
        return torch.as_tensor(per_example_recall(m, *batch))

    rec = favor.swap_in(model, (tokens, labels), v, trials=2, metric="recall", batch=16)
    hi = favor.swap_in(model, (tokens, labels), v, trials=2, metric=("my_recall", score, "higher"), batch=16)
    lo = favor.swap_in(model, [tokens, labels], v, trials=2, batch=16,
                       metric=("miss", lambda m, b: 1 - per_example_recall(m, *b), "lower"))
    assert set(seen) == {tuple}
    assert hi["info"]["metric"] == {"name": "task_score", "direction": "higher", "function": "my_recall"}
    assert lo["info"]["metric"] == {"name": "task_loss", "direction": "lower", "function": "miss"}
    for t, cols in (("errors", ["recall", "delta_recall"]), ("windows", ["recall", "delta_recall"]),
                    ("summary", ["recall_mean", "delta_recall_mean", "baseline_recall", "baseline_delta_recall"])):
        for c in cols:
            want = rec[t][c].to_numpy()
            np.testing.assert_allclose(hi[t][c.replace("recall", "task_score")].to_numpy(), want, rtol=0, atol=1e-12)
            one = 0 if "delta" in c else 1   # 1 - recall, and its deltas the negated ones
            np.testing.assert_allclose(lo[t][c.replace("recall", "task_loss")].to_numpy(), one - want,
                                       rtol=0, atol=1e-12)
    assert hi["info"]["exact_task_score"] == pytest.approx(rec["info"]["exact_recall"], abs=1e-15)


def test_state_bytes_per_head(mqar):
    model, tokens, labels = mqar
    L, d, m, w, s = 64, 64, 16, 8, 2
    v = [EXACT, {"features": "positive", "m": m}, {"features": "trig", "m": m}, {"features": "none", "window": w},
         {"features": "positive", "m": m, "window": w}, {"features": "none", "window": w, "sinks": s},
         {"features": "positive", "m": m, "window": w, "sinks": s}]
    r = favor.swap_in(model, (tokens[:8], labels[:8]), v, layers=["all", 1], metric="recall")
    key, value = 2 * d, d + 1   # float32 numbers a key (its k and v) and a feature column (phi v^T and phi)
    want = {"exact": 2 * L * d, "positive-iid": m * value, "trig-iid": 2 * m * value, "none+w8": w * key,
            "positive-iid+w8": w * key + m * value, "none+w8+s2": (w + s) * key,
            "positive-iid+w8+s2": (w + s) * key + m * value}
    for t in ("errors", "summary"):
        cols = list(r[t].columns)
        assert cols[cols.index("num_features") + 1] == "state_bytes"
        got = r[t].groupby("variant")["state_bytes"].unique()
        assert {k: list(x) for k, x in got.items()} == {k: [4 * n] for k, n in want.items()}
    assert r["info"]["state_bytes"] == {"exact": 4 * 2 * L * d, "uniform": 4 * (d + 1)}


class Bidirectional(torch.nn.Module):
    """A toy non-causal model under the protocol: embedding, one attention layer (d = 8), read-out."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.emb = torch.nn.Parameter(torch.randn(16, 8, generator=g))
        self.qkv = torch.nn.Parameter(torch.randn(8, 24, generator=g) / 3)
        self.attention_fn = None

    def forward(self, tokens):
        x = self.emb[tokens]
        q, k, v = (t[:, None] for t in (x @ self.qkv).split(8, dim=-1))
        o = self.attention_fn(q, k, v, 8 ** -0.5, False) if self.attention_fn else \
            torch.softmax(q @ k.transpose(-1, -2) / 8 ** 0.5, dim=-1) @ v
        return (x + o[:, 0]) @ self.emb.T


def test_a_non_causal_window_counts_its_2w_minus_1_keys():
    tokens = torch.randint(0, 16, (4, 12), generator=torch.Generator().manual_seed(1))
    metric = ("nll", lambda m, b: -torch.log_softmax(m(b), -1).gather(-1, b[..., None]).mean(dim=(1, 2)), "lower")
    r = favor.swap_in(Bidirectional(), tokens, [EXACT, {"features": "none", "window": 3}], metric=metric)
    e = r["errors"]
    assert rows(e, "exact", "all")["delta_task_loss"].abs().max() < 1e-6
    win = rows(e, "none+w3", "all")
    assert win["num_features"].item() == 5 and win["state_bytes"].item() == 4 * 5 * 16
    assert rows(e, "exact", "all")["state_bytes"].item() == 4 * 12 * 16


def test_bad_metrics_and_threads_are_one_line(mqar, tmp_path):
    model, tokens, labels = mqar
    tl, v, f = (tokens[:2], labels[:2]), [EXACT], (lambda m, b: torch.zeros(len(b[0])))

    def returning(r):   # a metric function that runs the model (the probe checks its layers call attention_fn)
        return lambda m, b: (m(b[0]), r(len(b[0])))[1]
    no_query = labels[:2].clone()
    no_query[1] = -100
    cases = [
        (dict(metric="accuracy"), r'metric: "bits_per_byte" \(None\), "recall" or \(name, fn, "lower" \| "higher"\), '
                                  r"got 'accuracy'"),
        (dict(metric=("x", f)), r"metric: .*got \('x', <function"),
        (dict(metric=("", f, "lower")), r"metric\[0\]: the metric's name, a non-empty string, got ''"),
        (dict(metric=("x", 3, "lower")), r"metric\[1\]: a function fn\(model, batch\) -> one value per window, got int"),
        (dict(metric=("x", f, "up")), r"metric\[2\]: \"lower\" or \"higher\" \(which is better\), got 'up'"),
        (dict(metric=("x", returning(lambda n: torch.zeros(3)), "lower")),
         r"metric 'x': the function returned shape \(3,\) for a batch of 1 windows \(one value per window\)"),
        (dict(metric=("x", returning(lambda n: "no"), "lower")), r"metric 'x': the function returned str, not numbers"),
        (dict(metric=("x", returning(lambda n: torch.full((n,), float("nan"))), "lower")),
         r"the model's x is not finite in window 0"),
        (dict(metric="recall", windows=tokens[:2]), r'windows: with metric "recall", a pair \(tokens, labels\) of '
                                                    r"\(N, L\) int arrays, N, L >= 1 .*, got Tensor"),
        (dict(metric="recall", windows=(tokens[:2], labels[:2].double())), r'windows: with metric "recall", .*got '
                                                                           r"shapes \[\(2, 64\), \(2, 64\)\]"),
        (dict(metric="recall", windows=(tokens[:2], no_query)),
         r"windows: example 1 has no query position \(all its labels are -100\)"),
        (dict(metric="recall", threads="x"), r"threads: a positive integer or None, got 'x'"),
        (dict(metric="recall", threads=0), r"threads: a positive integer or None, got 0"),
    ]
    out = tmp_path / "out"
    for kw, msg in cases:
        with pytest.raises(favor.Error) as e:
            favor.swap_in(model, kw.pop("windows", tl), v, out=out, batch=1, **kw)
        assert "\n" not in str(e.value)
        assert str(e.value).startswith("swap_in: ") and e.match("^swap_in: " + msg), str(e.value)
        assert not out.exists()


def test_compare_ranks_recall_higher_better(mqar, tmp_path):
    model, tokens, labels = mqar
    out = tmp_path / "rec"
    favor.swap_in(model, (tokens[:16], labels[:16]), [EXACT], metric="recall", out=out, trials=2)
    p = subprocess.run([FAVOR, "compare", str(out), "--metric", "recall"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    import pandas as pd
    rk = pd.read_csv(out / "ranking_recall.csv")
    assert rk["variant"].tolist() == ["exact", "uniform"] and rk["rank"].tolist() == [1, 2]
    assert rk["mean"].iloc[0] > rk["mean"].iloc[1] and rk["vs_uniform"].iloc[0] == "better"


def test_the_script_measures_an_mqar_model_by_recall(tmp_path):
    weights = os.path.join(ROOT, "data", "mqar", "L64_kv4_d64", "model.pt")
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"variants": [EXACT], "windows": 8, "model": weights}))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(favor.__file__)))
    script = [sys.executable, os.path.join(ROOT, "scripts", "swap_in.py"), str(cfg), "--out", str(tmp_path / "o"),
              "--quiet"]
    p = subprocess.run(script, capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    model, meta = fm.load_mqar(weights)
    t = meta["task"]
    own = fm.recall(model, *fm.mqar_batch(8, t["L"], t["pairs"], t["vocab"], seed=meta["test"]["seed"]))
    info = json.loads((tmp_path / "o" / "run.json").read_text())
    assert info["metric"]["name"] == "recall" and info["exact_recall"] == own
    assert f"8 test examples of 64 tokens; exact attention recall {own:.4f}" in p.stdout
    cfg.write_text(json.dumps({"variants": [EXACT], "windows": 8, "model": weights, "L": 32}))
    p = subprocess.run(script, capture_output=True, text=True, env=env)
    assert p.returncode == 2 and p.stderr == f"swap_in.py: {cfg}: L: an MQAR model runs at its task's L (64); remove it\n"
