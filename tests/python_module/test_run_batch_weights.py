"""One rule for fitted weights on (B, H, L, d) inputs (issue 56): `favor run` takes a batch as
`favor apply` does, head h of every batch element using stored head h, so a run's per-head row
(b, h) equals the run on batch element b alone; a batch of another head count is refused by
both in one line."""
import json
import os
import subprocess

import numpy as np
import pytest

import favor
from test_fitted_maps import write_weights

FAVOR = os.environ["FAVOR"]


def config(tmp_path, name, q, k, v, weights):
    for n, a in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / f"{name}_{n}.npy", a)
    cfg = {"name": name, "causal": True, "trials": 1, "metrics": ["output_rel_error", "output_mse"],
           "inputs": {"source": "npy", "q": f"{name}_q.npy", "k": f"{name}_k.npy", "v": f"{name}_v.npy", "per_head": True},
           "variants": [{"features": "hedgehog", "weights": weights}], "m": [1]}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    return path


def errors(path):
    t = favor.run(str(path), out=str(path.with_suffix("")))
    return t["errors"]


def test_a_batch_runs_as_apply_takes_it(tmp_path):
    w, _ = write_weights(str(tmp_path), "hedgehog", heads=2, d=8, w=6, seed=3)
    rng = np.random.default_rng(4)
    q, k, v = (rng.normal(size=(3, 2, 20, 8)) for _ in range(3))
    whole = errors(config(tmp_path, "all", q, k, v, w + ":layer0"))
    assert len(whole) == 6
    for b in range(3):
        one = errors(config(tmp_path, f"b{b}", q[b:b + 1], k[b:b + 1], v[b:b + 1], w + ":layer0"))
        for h in range(2):
            mine = whole[whole["head"] == 2 * b + h]
            ref = one[one["head"] == h]
            for c in ("output_rel_error", "output_mse"):
                assert mine[c].iloc[0] == ref[c].iloc[0], (b, h, c)


def test_another_head_count_is_refused_by_run_and_apply(tmp_path):
    w, _ = write_weights(str(tmp_path), "hedgehog", heads=2, d=8, w=6, seed=3)
    rng = np.random.default_rng(4)
    q, k, v = (rng.normal(size=(2, 3, 20, 8)) for _ in range(3))
    path = config(tmp_path, "h3", q, k, v, w + ":layer0")
    r = subprocess.run([FAVOR, "run", str(path), "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert r.returncode == 2 and "holds 2 heads, the inputs have 3" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    with pytest.raises(favor.Error, match="holds 2 heads, the inputs have 3"):
        favor.attention(q, k, v, features="hedgehog", weights=w + ":layer0")
