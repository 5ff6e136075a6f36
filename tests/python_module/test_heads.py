"""favor.heads (issue 55 item 3): the census against heads built to be of one kind (a previous-token
head, a sink head, an induction head on a repeated span, a retrieval head), the kinds it names,
its files and command line, and data/lm16's shipped heads: local, no induction."""
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import favor
import favor.heads

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def capture_of(folder, targets, L, tokens=None, period=None):
    """A one-layer capture whose head h attends (almost) only to key targets[h][i] from row i:
    keys one-hot, q_i a large multiple of the target's key (causal)."""
    H, c = len(targets), 12.0
    k = np.zeros((1, H, L, L))
    q = np.zeros((1, H, L, L))
    for h, t in enumerate(targets):
        k[0, h] = np.eye(L) * c
        q[0, h, np.arange(L), t] = c
    v = np.random.default_rng(0).normal(size=(1, H, L, 4))
    os.makedirs(folder / "layer0")
    files = {}
    for n, a in (("q", q), ("k", k), ("v", v)):
        np.save(folder / "layer0" / f"{n}.npy", a)
        files[n] = {"path": f"layer0/{n}.npy", "shape": list(a.shape), "dtype": "float64",
                    "sha256": hashlib.sha256((folder / "layer0" / f"{n}.npy").read_bytes()).hexdigest()}
    man = {"format": "favor capture 1", "layers": [{"index": 0, "name": "attn", "B": 1, "H": H, "L": L, "Lk": L,
                                                    "d": L, "d_v": 4, "causal": True, "files": files}]}
    if period:
        man["input"] = {"repeat_period": period}
    (folder / "manifest.json").write_text(json.dumps(man))
    if tokens is not None:
        np.save(folder / "tokens.npy", tokens)
    return str(folder)


def test_heads_of_each_kind(tmp_path):
    L, P = 96, 40
    rng = np.random.default_rng(1)
    span = rng.integers(0, 256, P)
    tokens = np.concatenate([span, span, span])[:L][None, :]
    i = np.arange(L)
    prev = np.maximum(i - 1, 0)
    sink = np.zeros(L, int)
    induction = np.where(i >= P, i - P + 1, i)
    # Retrieval: from row i >= P, the key holding the next token of the copy (i - P + 1, a key j < i).
    cap = capture_of(tmp_path / "cap", [prev, sink, induction], L, tokens=tokens, period=P)
    rows = favor.heads.census(cap)
    by = {r["head"]: r for r in rows}
    assert by[0]["kind"] == "local" and by[0]["last_16"] > 0.99
    assert by[1]["kind"] == "sink" and by[1]["sink"] > 0.99 and by[1]["last_64"] < 0.7
    assert by[2]["induction"] > 0.99 and by[0]["induction"] < 0.05 and by[1]["induction"] < 0.05
    # The induction head's top-1 key holds the token being copied: it is a retrieval head too.
    assert by[2]["kind"] == "retrieval" and by[2]["retrieval"] > 0.99 and by[0]["retrieval"] < 0.1
    for r in rows:
        assert abs(r["entropy"]) < 0.05 and 0 <= r["entropy_ratio"] < 0.05


def test_without_tokens_no_token_scores(tmp_path):
    L = 32
    cap = capture_of(tmp_path / "cap", [np.maximum(np.arange(L) - 1, 0)], L)
    (r,) = favor.heads.census(cap)
    assert r["induction"] is None and r["retrieval"] is None and r["kind"] == "local"


def test_files_and_command_line(tmp_path):
    L = 32
    cap = capture_of(tmp_path / "cap", [np.arange(L), np.zeros(L, int)], L)
    r = subprocess.run([sys.executable, "-m", "favor", "heads", cap, "--out", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "| layer | head |" in r.stdout and "Kinds:" in r.stdout
    for f in ("heads.csv", "heads.md", "heads.png"):
        assert (tmp_path / "o" / f).stat().st_size > 0
    lines = (tmp_path / "o" / "heads.csv").read_text().splitlines()
    assert lines[0].split(",") == favor.heads.COLUMNS and len(lines) == 3
    h = subprocess.run([sys.executable, "-m", "favor", "heads", "-h"], capture_output=True, text=True)
    assert h.returncode == 0 and h.stdout.startswith("usage: python3 -m favor heads")
    bad = subprocess.run([sys.executable, "-m", "favor", "heads", str(tmp_path / "nothing")], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no manifest.json" in bad.stderr


def test_lm16_heads_are_local_and_do_not_copy():
    """The shipped byte model's heads (data/lm16/excerpt0, heapq.py): a window serves them, and none
    is an induction head (the issue's premise, now measured)."""
    cap = os.path.join(ROOT, "data", "lm16", "excerpt0")
    rows = favor.heads.census(cap)
    assert len(rows) == 16
    assert min(r["last_64"] for r in rows) > 0.7 and max(r["induction"] for r in rows) < 0.15
    assert {r["kind"] for r in rows} <= {"local", "global"}


def test_mqar_models_have_a_retrieval_head():
    """The shipped recall model (data/mqar/L64_kv4_d64, its capture's tokens and targets): its second
    layer's head takes the value being recalled as its top-1 key on every query row."""
    rows = favor.heads.census(os.path.join(ROOT, "data", "mqar", "L64_kv4_d64", "capture"))
    last = [r for r in rows if r["layer"] == 1]
    assert last and all(r["kind"] == "retrieval" and r["retrieval"] >= 0.95 for r in last), last


SHIPPED_CAPTURES = [("data/mqar/L64_kv4_d64", "capture"), ("data/mqar/L64_kv4_d128_h2", "capture"),
                    ("data/mqar/L256_kv16_d64", "capture")] + [("data/lm16", f"excerpt{e}") for e in range(4)]


@pytest.mark.parametrize("folder,capture", SHIPPED_CAPTURES)
def test_every_shipped_capture_has_its_census_in_its_readme(folder, capture):
    """Issue 55 item 3: each shipped capture's README holds its census table as favor.heads computes
    it today from the committed files, and its heads.md the same table (so neither can drift)."""
    cap = os.path.join(ROOT, folder, capture)
    table = favor.heads.markdown(favor.heads.census(cap))
    with open(os.path.join(ROOT, folder, "README.md")) as f:
        assert table in f.read()
    with open(os.path.join(cap, "heads.md")) as f:
        assert f.read().endswith(table)
