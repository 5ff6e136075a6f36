"""favor.attention's time on the tensors favor_bench wrote (its "python" section compares it
with the library call, apply_attention, on the same tensors):

    PYTHONPATH=build/python python3 bench/module_overhead.py DIR REPEATS

DIR holds q.npy, k.npy, v.npy (float32, L = 16384, d = 64); prints "module seconds: S", the
median of REPEATS timed calls after three warm-ups, positive + orthogonal, m = 256, float32,
seed 0, as favor_bench times the library."""
import sys
import time

import numpy as np

import favor

d, repeats = sys.argv[1], int(sys.argv[2])
q, k, v = (np.load(f"{d}/{n}.npy") for n in "qkv")
kw = dict(features="positive", projection="orthogonal", m=256, dtype="float32")
for _ in range(3):
    favor.attention(q, k, v, **kw)
times = []
for _ in range(repeats):
    t0 = time.perf_counter()
    favor.attention(q, k, v, **kw)
    times.append(time.perf_counter() - t0)
print(f"module seconds: {sorted(times)[len(times) // 2]:.6f}", flush=True)
