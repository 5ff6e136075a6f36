"""favor.torch's training step (forward + backward) on the tensors favor_bench wrote, and the same
estimator written in torch (favor_bench's "python" section compares the first with the library's
favor_forward_saved + favor_backward_saved on the same tensors, and with the second):

    PYTHONPATH=build/python python3 bench/torch_overhead.py DIR REPEATS THREADS

DIR holds q.npy, k.npy, v.npy and g.npy (float32, L = 4096, d = dv = 64). FAVOR+ (positive
features, orthogonal W, m = 256, seed 0, trial 0), non-causal and causal. Prints, per case,
"torch seconds CASE: S" (the estimator in torch: W = favor.projection(...), phi(x) =
exp(W x - |x|^2 / 2) / sqrt(m) on x = q / d^(1/4), torch autograd's backward; causal in chunks
of 256 rows, the fastest of 64-512 here: the masked products within a chunk, the key sums of
the chunks before it as an exclusive cumulative sum, no (L, m, dv) tensor) and "favor.torch
seconds CASE: S", each the median of REPEATS timed steps (out = f(q, k, v); out.backward(g))
after three warm-ups; torch's is the faster of 1 and THREADS (favor's count) threads of its own
(its OpenMP regions stall on a busy 2-core machine). torch is timed first: favor's calls keep
OpenBLAS, which torch's products here call too, single-threaded for the rest of the process
(docs/design.md section 9)."""
import math
import sys
import time

import numpy as np
import torch

import favor
import favor.torch as ft

d_in, repeats, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
q, k, v = (torch.from_numpy(np.load(f"{d_in}/{n}.npy")).requires_grad_(True) for n in "qkv")
g = torch.from_numpy(np.load(f"{d_in}/g.npy"))
m, chunk = 256, 256
W = torch.from_numpy(favor.projection("orthogonal", m, q.shape[-1], 0, 0)).float()


def favor_plus(q, k, v, causal):
    """FAVOR+ in torch (Performer eq. 5 / Lemma 1), as tests/python_module/test_torch.py's, causal in chunks."""
    d = q.shape[-1]
    phi = lambda z: torch.exp(z @ W.T - (z * z).sum(-1, keepdim=True) / 2) / math.sqrt(m)
    pq, pk = phi(q / d ** 0.25), phi(k / d ** 0.25)
    v1 = torch.cat([v, torch.ones_like(v[..., :1])], -1)   # [V, 1]: numerators and denominators at once
    if causal:
        n = q.shape[-2] // chunk
        a, b, c = pq.reshape(n, chunk, m), pk.reshape(n, chunk, m), v1.reshape(n, chunk, -1)
        mask = torch.ones(chunk, chunk).tril()
        kv = b.transpose(-1, -2) @ c                        # each chunk's phiK^T [V, 1]
        nd = ((a @ b.transpose(-1, -2)) * mask) @ c + a @ (kv.cumsum(0) - kv)
        nd = nd.reshape(q.shape[-2], -1)
    else:
        nd = pq @ (pk.transpose(-1, -2) @ v1)
    return nd[..., :-1] / nd[..., -1:]


def median_step(f):
    def step():
        for x in (q, k, v):
            x.grad = None
        f(q, k, v).backward(g)
    for _ in range(3):
        step()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


cases = {"noncausal": False, "causal": True}
for name, causal in cases.items():   # torch first (see above)
    t = {}
    for n in sorted({1, threads}):
        torch.set_num_threads(n)
        t[n] = median_step(lambda q, k, v: favor_plus(q, k, v, causal))
    print(f"torch seconds {name}: {min(t.values()):.6f} (" +
          ", ".join(f"{n} thread{'s' * (n > 1)} {s * 1e3:.2f} ms" for n, s in t.items()) + ")", flush=True)
for name, causal in cases.items():
    t = median_step(lambda q, k, v: ft.attention(q, k, v, features="positive", projection="orthogonal", m=m,
                                                 causal=causal))
    print(f"favor.torch seconds {name}: {t:.6f}", flush=True)
