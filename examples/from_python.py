"""The README's "From Python" example: a trained model's attention heads (data/layer1: q, k, v
of shape (1, 2, 1024, 64), captured by scripts/capture_qkv.py), exact causal attention, and
three random-feature estimators' output MSE against it as m grows, plotted beside uniform
attention's (the baseline of docs/results.md).

    PYTHONPATH=build/python python3 examples/from_python.py [OUT_DIR]   # writes OUT_DIR/from_python.png
"""
import sys
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

import favor

out_dir = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
data = Path(__file__).resolve().parents[1] / "data" / "layer1"
q, k, v = (np.load(data / f"{n}.npy") for n in "qkv")          # float32, (B, H, L, d)
exact = favor.attention(q, k, v, exact=True, causal=True)        # (1, 2, 1024, 64), float64

ms, seeds = [16, 32, 64, 128, 256], range(3)
estimators = {"positive": dict(features="positive", projection="orthogonal"),
              "trig": dict(features="trig", projection="orthogonal"),
              "oprf": dict(features="oprf", projection="orthogonal")}
for name, kw in estimators.items():
    mse = [np.mean([np.mean((favor.attention(q, k, v, m=m, seed=s, causal=True, **kw) - exact) ** 2)
                    for s in seeds]) for m in ms]
    print(name, " ".join(f"m={m}: {e:.3g}" for m, e in zip(ms, mse)))
    plt.loglog(ms, mse, "o-", label=name)
# The baseline any estimator must beat: uniform causal attention (row i averages v_0..v_i).
uniform = np.cumsum(v, axis=-2, dtype=np.float64) / np.arange(1, v.shape[-2] + 1)[:, None]
base = np.mean((uniform - exact) ** 2)
print(f"uniform attention {base:.3g}")
plt.axhline(base, color="gray", ls="--", label="uniform attention")
plt.xlabel("m (random features)")
plt.ylabel(f"output MSE vs exact (mean of {len(seeds)} seeds)")
plt.title("data/layer1 (trained tiny LM), causal, both heads")
plt.legend()
plt.savefig(out_dir / "from_python.png", dpi=100)
