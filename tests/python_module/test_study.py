"""favor.study (issue 41 item 1, docs/design.md 9.3): a small torch model trained here in
seconds, captured with its next-token loss's upstream gradient (scripts/capture_qkv.py), then
studied; the report's table is checked against the result sets it was made from.

Run: PYTHONPATH=build/python /usr/bin/python3 -m pytest -q tests/python_module/test_study.py
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pd = pytest.importorskip("pandas")
import favor  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import capture_qkv  # noqa: E402

nn = torch.nn
L, E, H, VOCAB, PERIOD = 32, 32, 2, 16, 5


class SmallLM(nn.Module):
    """A researcher's own model: token + learned position embeddings, two causal
    nn.MultiheadAttention blocks with MLPs, tied-free logits."""

    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, E), nn.Parameter(0.1 * torch.randn(L, E))
        self.attn = nn.ModuleList(nn.MultiheadAttention(E, H, batch_first=True) for _ in range(2))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(E, 2 * E), nn.GELU(), nn.Linear(2 * E, E)) for _ in range(2))
        self.norm = nn.ModuleList(nn.LayerNorm(E) for _ in range(4))
        self.head = nn.Linear(E, VOCAB)
        self.register_buffer("mask", torch.ones(L, L, dtype=torch.bool).triu(1))

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos[: tokens.shape[1]]
        for i in range(2):
            h = self.norm[2 * i](x)
            x = x + self.attn[i](h, h, h, attn_mask=self.mask, need_weights=False)[0]
            x = x + self.mlp[i](self.norm[2 * i + 1](x))
        return self.head(x)


def batch(g, n):
    """Sequences that repeat a random block of PERIOD tokens: the next token is the one PERIOD back."""
    block = torch.randint(0, VOCAB, (n, PERIOD), generator=g)
    return block.repeat(1, L // PERIOD + 1)[:, :L]


@pytest.fixture(scope="module")
def studied(tmp_path_factory):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    model = SmallLM()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    with torch.no_grad():
        first = float(capture_qkv.next_token_loss(model(batch(g, 64)), batch(torch.Generator().manual_seed(0), 64)))
    for _ in range(300):
        x = batch(g, 32)
        loss = capture_qkv.next_token_loss(model(x), x)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    tmp = tmp_path_factory.mktemp("study")
    x = batch(torch.Generator().manual_seed(1), 1)
    man = capture_qkv.capture(model, x, out=str(tmp / "cap"), loss_fn="next_token")
    report = favor.study(str(tmp / "cap"), out=str(tmp / "study"), budgets=(8, 24), grad=True, threads=2)
    return dict(first=first, loss=float(loss), man=man, report=report, out=str(tmp / "study"), cap=str(tmp / "cap"))


def md_table(text, first_cell, nth=0):
    """The header and rows of the Markdown table whose header starts with first_cell (lists of
    cells: the budgets repeat column names)."""
    lines = text.splitlines()
    start = [i for i, s in enumerate(lines) if s.startswith(f"| {first_cell} |")][nth]
    head = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for s in lines[start + 2:]:
        if not s.startswith("|"):
            break
        rows.append([c.strip() for c in s.strip("|").split("|")])
    return head, rows


def test_model_trained_and_captured(studied):
    """The model learnt its task (the loss fell well below its start) and the capture holds two
    causal layers with their upstream gradients."""
    assert studied["loss"] < 0.25 * studied["first"]
    lays = studied["man"]["layers"]
    assert len(lays) == 2 and all(lay["causal"] and "g" in lay["files"] for lay in lays)
    assert all(lay["upstream_gradient"]["loss"].startswith("next-token cross-entropy") for lay in lays)


def test_report_table_is_the_result_sets(studied):
    """Every row of report.md's table, recomputed from layer<i>/F<F>/summary.csv and
    comparisons_output_rel_error_read.csv (the capture has G: the study ranks by output_rel_error_read):
    uniform's error, the variant with the lowest mean error, its ratio to uniform's, its verdict
    against uniform, FAVOR+'s ratio, the best one's output_rel_error ratio."""
    m = "output_rel_error_read"
    text = open(studied["report"]).read()
    head, rows = md_table(text, "layer.head")
    assert len(rows) == 2 * H
    words = {"a better": "below uniform", "a worse": "above uniform", "n.s.": "n.s.", "underpowered": "underpowered"}
    for row in rows:
        layer, h = map(int, row[0].split("."))
        for F, col in zip((8, 24), (3, 8)):
            assert head[col] == f"best at F = {F}"
            d = os.path.join(studied["out"], f"layer{layer}", f"F{F}")
            s = pd.read_csv(os.path.join(d, "summary.csv"))
            s = s[s["head"] == h]
            assert row[2] == f"{s[f'baseline_{m}'].iloc[0]:.4g}"
            best = s.loc[s[f"{m}_mean"].idxmin()]
            assert set(s["num_features"]) == {F}   # every variant at exactly F columns
            c = pd.read_csv(os.path.join(d, f"comparisons_{m}.csv"), keep_default_na=False)
            c = c[(c["b"] == "uniform") & (c["a"] == best["variant"]) & (c["head"] == h)]
            cells = row[col:col + 5]
            plus = s[s["variant"] == "positive-orthogonal"]
            assert cells == [best["variant"], f"{best[f'{m}_mean'] / best[f'baseline_{m}']:.3g}",
                             words.get(c["verdict"].iloc[0], c["verdict"].iloc[0]),
                             f"{float(plus[f'{m}_mean'].iloc[0] / plus[f'baseline_{m}'].iloc[0]):.3g}",
                             f"{best['output_rel_error_mean'] / best['baseline_output_rel_error']:.3g}"]


def test_trials_reach_verdicts_and_gradient_is_the_models(studied):
    """Each run's trials follow the stated rule (trials_for over its heads x random variants),
    no comparison against uniform is underpowered, the runs read the capture's g.npy, and the
    gradient table is there."""
    info = json.load(open(os.path.join(studied["out"], "study.json")))
    assert info["grad_source"].startswith("next-token cross-entropy")
    for r in info["runs"]:
        d = os.path.join(studied["out"], f"layer{r['layer']}", f"F{r['F']}")
        s = pd.read_csv(os.path.join(d, "summary.csv"))
        n_random = sum(1 for v in set(s["variant"]) if not v.startswith(("none", "t2r")))
        assert r["trials"] == favor.trials_for(H * n_random) == int(s["trials"].max())
        c = pd.read_csv(os.path.join(d, "comparisons_output_rel_error.csv"), keep_default_na=False)
        assert not (c["verdict"] == "underpowered").any()
        run = json.load(open(os.path.join(d, "run.json")))
        assert run["config"]["inputs"]["grad"].endswith(f"layer{r['layer']}/g.npy")
    text = open(studied["report"]).read()
    head, rows = md_table(text, "layer.head", nth=1)
    assert head[1] == "best gradient at F = 8" and len(rows) == 2 * H


def test_command_line(studied, tmp_path):
    """python3 -m favor study: the same report from the shell; a folder that is not a capture is
    one line on stderr and exit 2, with no report written."""
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-m", "favor", "study", studied["cap"], "--budgets", "8", "--trials", "2",
                        "--out", str(tmp_path / "s")], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(tmp_path / "s" / "report.md") and os.path.isfile(r.stdout.strip())
    r = subprocess.run([sys.executable, "-m", "favor", "study", str(tmp_path), "--out", str(tmp_path / "t")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "manifest.json" in r.stderr
    assert not (tmp_path / "t").exists()


def test_variants_from_a_config(studied, tmp_path):
    """--variants takes a config's variants; a map with its own F (elu: F = d = 16) is reported
    only at the budget equal to it, every other variant at every budget."""
    cfg = tmp_path / "v.json"
    cfg.write_text(json.dumps({"variants": [{"features": "positive", "projection": "orthogonal"}, {"features": "elu"}]}))
    favor.study(studied["cap"], out=str(tmp_path / "s"), budgets=(16, 24), trials=2, variants=str(cfg), layers=[0])
    t = pd.read_csv(tmp_path / "s" / "study.csv")
    assert (t["num_features"] == t["F"]).all()
    assert sorted(set(zip(t["variant"], t["F"]))) == [("elu", 16), ("positive-orthogonal", 16),
                                                      ("positive-orthogonal", 24)]
    with pytest.raises(favor.Error, match="no \"variants\" list"):
        favor.study(studied["cap"], out=str(tmp_path / "t"), variants=str(tmp_path / "s" / "study.json"))


@pytest.mark.parametrize("causal", [True, False])
def test_entropy_ratio_is_head_stats(studied, causal):
    """The report's entropy ratio (favor.study's blocked float64 computation) is
    scripts/head_stats.py's entropy_ratio on every head, causal and not, to rounding; blocks of
    5 rows cover the block edges."""
    import head_stats
    from favor._study import entropy_ratios
    for lay in studied["man"]["layers"]:
        q, k = (np.load(os.path.join(studied["cap"], lay["files"][w]["path"])) for w in "qk")
        got = entropy_ratios(q, k, causal, block=5)
        want = [head_stats.head_stats(q[0, h], k[0, h], causal=causal)["entropy_ratio"] for h in range(H)]
        np.testing.assert_allclose(got, want, rtol=1e-12)


# --- issue 55 item 5: the study ranks by the loss-aware error when the capture has G ---

MQAR = os.path.join(ROOT, "data", "mqar", "L64_kv4_d64", "capture")
FEW = [{"features": "positive", "projection": "orthogonal"}, {"features": "none", "window": 8},
       {"features": "positive", "projection": "orthogonal", "window": 4}]


def small_study(cap, out, layers):
    """favor.study at F = 8 with FEW variants and 3 trials: its report.md's text and study.csv."""
    report = favor.study(cap, out=str(out), budgets=(8,), trials=3, variants=FEW, layers=layers, threads=2)
    return open(report).read(), pd.read_csv(os.path.join(str(out), "study.csv"))


def test_study_with_g_ranks_by_output_rel_error_read(tmp_path):
    """A capture with g.npy (mqar's query-position loss): the runs read it and hold
    output_rel_error_read and loss_delta_abs, the report says it ranks by output_rel_error_read
    (the error on the query rows), and each head's best variant is the lowest
    output_rel_error_read / uniform's of the run's summary.csv (on this capture not always
    output_rel_error's lowest: the ranking changed)."""
    text, table = small_study(MQAR, tmp_path / "s", [0])
    assert "Ranked by output_rel_error_read, not output_rel_error" in text and "Metric: output_rel_error_read," in text
    d = tmp_path / "s" / "layer0" / "F8"
    run = json.load(open(d / "run.json"))
    assert run["config"]["inputs"]["grad"].endswith("layer0/g.npy")
    s = pd.read_csv(d / "summary.csv")
    assert s["output_rel_error_read_mean"].notna().all() and s["loss_delta_abs_mean"].notna().all()
    assert (d / "comparisons_output_rel_error_read.csv").is_file()
    head, rows = md_table(text, "layer.head")
    assert head[3:8] == ["best at F = 8", "ratio", "verdict", "FAVOR+ ratio", "its output_rel_error ratio"]
    changed = 0
    for row in rows:
        h = int(row[0].split(".")[1])
        sh = s[s["head"] == h]
        ratios = sh["output_rel_error_read_mean"] / sh["baseline_output_rel_error_read"]
        assert row[3] == sh["variant"][ratios.idxmin()] and row[4] == f"{ratios.min():.3g}"
        changed += row[3] != sh["variant"][sh["output_rel_error_mean"].idxmin()]
        t = table[table["head"] == h].set_index("variant")
        np.testing.assert_allclose(t.loc[sh["variant"], "ratio"], ratios, rtol=1e-12)
    assert changed > 0


def test_study_without_g_on_every_layer_ranks_by_output_rel_error(tmp_path):
    """The mqar capture copied with layer 1's g taken out of the manifest: studying both layers
    ranks by output_rel_error as before (the runs neither read g nor ask the loss-aware metrics);
    studying layer 0 alone, whose g is there, ranks by output_rel_error_read (the decision is over the
    studied layers)."""
    import shutil
    cap = tmp_path / "cap"
    shutil.copytree(MQAR, cap)
    man = json.load(open(cap / "manifest.json"))
    del man["layers"][1]["files"]["g"]
    (cap / "manifest.json").write_text(json.dumps(man))
    text, table = small_study(str(cap), tmp_path / "both", [0, 1])
    assert "Metric: output_rel_error," in text and "loss_delta" not in text
    assert "output_rel_error_ratio" not in table
    for layer in (0, 1):
        run = json.load(open(tmp_path / "both" / f"layer{layer}" / "F8" / "run.json"))
        assert "grad" not in run["config"]["inputs"] and "loss_delta_abs" not in run["config"]["metrics"]
    s = pd.read_csv(tmp_path / "both" / "layer0" / "F8" / "summary.csv")
    head, rows = md_table(text, "layer.head")
    assert len(head) == 7 and rows[0][3] == s["variant"][s[s["head"] == 0]["output_rel_error_mean"].idxmin()]
    text, _ = small_study(str(cap), tmp_path / "first", [0])
    assert "Metric: output_rel_error_read," in text
