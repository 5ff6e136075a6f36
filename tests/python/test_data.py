"""The committed capture under data/ loads and matches data/manifest.json: every layer's
q, k, v have the recorded shape, dtype and sha256, the shapes fit together, the values are
finite, and each layer's favor config validates."""
import hashlib
import json
import os
import subprocess

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.path.join(ROOT, "data")
FAVOR = os.environ.get("FAVOR", os.path.join(ROOT, "build", "favor"))


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def manifest():
    with open(os.path.join(DATA, "manifest.json")) as f:
        return json.load(f)


def test_files_match_manifest():
    man = manifest()
    assert man["layers"], "manifest.json lists no layer"
    assert man["input"]["model_sha256"] == sha256(os.path.join(ROOT, man["input"]["model"]))
    for lay in man["layers"]:
        arrays = {}
        for w in "qkv":
            info = lay["files"][w]
            path = os.path.join(DATA, info["path"])
            assert sha256(path) == info["sha256"], path
            a = np.load(path)
            assert list(a.shape) == info["shape"] and str(a.dtype) == info["dtype"], path
            assert np.isfinite(a).all(), path
            arrays[w] = a
        B, H, L, d = arrays["q"].shape
        assert (B, H, L, d) == (lay["B"], lay["H"], lay["L"], lay["d"])
        assert arrays["k"].shape == (B, H, lay["Lk"], d)
        assert arrays["v"].shape == (B, H, lay["Lk"], lay["d_v"])
        assert lay["causal"] and L == lay["Lk"] == man["input"]["L"]
        assert sha256(os.path.join(DATA, lay["config"])) == lay["config_sha256"]


def test_configs_validate():
    for lay in manifest()["layers"]:
        r = subprocess.run([FAVOR, "validate", os.path.join(DATA, lay["config"])],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
