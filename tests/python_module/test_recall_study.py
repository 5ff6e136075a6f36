"""The committed recall study (results/recall/, scripts/recall_study.py; issue 55 item 6):
its rows are what favor.swap_in gives today on the same held-out examples and W, and its
README and verdicts are what the script writes from the committed tables."""
import filecmp
import glob
import os
import shutil
import subprocess

import pandas as pd
import pytest

import favor

torch = pytest.importorskip("torch")
import favor.models as fm  # noqa: E402  (imports torch)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STUDY = os.path.join(ROOT, "results", "recall")
CELLS = ["L64_kv4_d64", "L64_kv4_d128_h2", "L256_kv16_d64"]


def test_committed_rows_are_todays_swap_in(tmp_path):
    """Trial 0 of a window, FAVOR+ (orthogonal, m = 64) and FAVOR# (iid, m = 16) in the retrieval
    layer of L64_kv4_d64, on the study's 1000 held-out examples (seed 2) with the study's seed:
    the recall equals the committed errors.csv row (same examples, same W; recall is a count
    over 4000 queries, so equal means equal)."""
    model, meta = fm.load_mqar(os.path.join(ROOT, "data", "mqar", "L64_kv4_d64", "model.pt"))
    t = meta["task"]
    tokens, labels = fm.mqar_batch(1000, t["L"], t["pairs"], t["vocab"], seed=2)
    variants = [{"name": "window", "features": "none", "window": 16},
                {"name": "positive-orthogonal", "features": "positive", "projection": "orthogonal", "m": [64]},
                {"name": "sderf-iid", "features": "sderf", "projection": "iid", "m": [16]}]
    favor.swap_in(model, (tokens, labels), variants, layers=[1], trials=1, seed=0, metric="recall",
                  out=str(tmp_path / "s"), batch=64, threads=2)
    now = pd.read_csv(tmp_path / "s" / "errors.csv", dtype={"layers": str})
    done = pd.read_csv(os.path.join(STUDY, "L64_kv4_d64", "errors.csv"), dtype={"layers": str})
    done = done[(done.layers == "1") & (done.trial == 0)]
    for _, r in now.iterrows():
        row = done[(done.variant == r.variant) & (done.m == r.m)]
        assert len(row) == 1, r.variant
        assert row.recall.iloc[0] == r.recall, (r.variant, r.m)
    assert len(now) == 3


def test_report_is_the_scripts_from_the_tables(tmp_path):
    """scripts/recall_study.py --report-only on a copy of the committed tables writes the
    committed README.md and per-layer-set comparisons byte for byte (the report's numbers come
    from the tables, and the verdicts from favor compare)."""
    out = tmp_path / "recall"
    shutil.copytree(STUDY, out, ignore=shutil.ignore_patterns("*.png", "windows.csv", "verdicts"))
    subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "scripts", "recall_study.py"), "--cells", ",".join(CELLS),
                    "--out", str(out), "--report-only"], check=True, cwd=ROOT, capture_output=True)
    assert filecmp.cmp(out / "README.md", os.path.join(STUDY, "README.md"), shallow=False)
    committed = sorted(glob.glob(os.path.join(STUDY, "*", "verdicts", "*", "*.csv")))   # rows and verdicts
    assert len(committed) == 4 * (3 + 3 + 2)   # errors, summary, comparisons, ranking; per layer set (L256: small ladder, 2 sets)
    for path in committed:
        assert filecmp.cmp(out / os.path.relpath(path, STUDY), path, shallow=False), path
    for cell in CELLS:
        assert (out / f"{cell}.png").stat().st_size > 10000
    # every verdict of the report is reachable: no row underpowered
    for path in committed:
        if path.endswith("comparisons_recall.csv"):
            assert "underpowered" not in set(pd.read_csv(path).verdict), path
