"""favor's backward passes (`favor apply --grad`) against torch autograd of an independent
torch implementation of each attention, written from the formulas of docs/estimators.md (the
unstabilised features, the L x L matrix of linear attention), given the same W
(`favor projection --out W.npy`): dQ, dK, dV within 1e-10 relative in float64, causal and not.
Fitted parameters (saderf's Psi and A, sderf's A) are fitted here too and detached, as favor
holds them fixed.

Run: /usr/bin/python3 -m pytest -q tests/python  (FAVOR=path/to/favor; default build/favor)
"""
import math
import os
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FAVOR = os.environ.get("FAVOR", os.path.join(ROOT, "build", "favor"))
L, D, DV, M = 10, 4, 3, 8
TOL = 1e-10


def favor(*args):
    subprocess.run([FAVOR, *map(str, args)], check=True, capture_output=True)


def a_star(rho):
    """oprf's optimal A for rho = mean |x + y|^2 / d (arXiv 2205.15317)."""
    return (1 - 2 * rho - torch.sqrt((2 * rho + 1) ** 2 + 8 * rho)) / 16


def oprf_features(u, W, A):
    """(1-4A)^{d/4}/sqrt(m) exp(A|w|^2 + sqrt(1-4A) w.u - |u|^2/2), A a number."""
    d, m = u.shape[1], W.shape[0]
    e = A * (W * W).sum(1) + math.sqrt(1 - 4 * A) * u @ W.T - 0.5 * (u * u).sum(1, keepdim=True)
    return (1 - 4 * A) ** (d / 4) / math.sqrt(m) * torch.exp(e)


def saderf_pair(x, y, W):
    with torch.no_grad():   # fitted, then held fixed
        sx, sy = (x * x).mean(0), (y * y).mean(0)
        psi = (sy / sx) ** 0.25
        rho = (2 * torch.sqrt(sx * sy).sum() + 2 * (x.mean(0) * y.mean(0)).sum()) / x.shape[1]
        A = float(a_star(rho))
    return oprf_features(x * psi, W, A), oprf_features(y / psi, W, A)


def sderf_pair(x, y, W):
    d, m = x.shape[1], W.shape[0]
    with torch.no_grad():
        Mm = x.T @ x / len(x) + y.T @ y / len(y)
        Mm = Mm + torch.outer(x.mean(0), y.mean(0)) + torch.outer(y.mean(0), x.mean(0))
        lam, U = torch.linalg.eigh(Mm)
        a = a_star(lam.clamp(min=0))
        A = U @ torch.diag(a) @ U.T
        B = U @ torch.diag(torch.sqrt(1 - 4 * a)) @ U.T
        c = torch.prod(1 - 4 * a) ** 0.25 / math.sqrt(m)
        wAw = ((W @ A) * W).sum(1)

    def phi(u):
        return c * torch.exp(wAw + u @ B @ W.T - 0.5 * (u * u).sum(1, keepdim=True))

    return phi(x), phi(y)


def same(f):
    return lambda x, y, W: (f(x, W), f(y, W))


def positive(u, W):
    return torch.exp(u @ W.T - 0.5 * (u * u).sum(1, keepdim=True)) / math.sqrt(W.shape[0])


def hyperbolic(u, W):
    h = torch.exp(-0.5 * (u * u).sum(1, keepdim=True)) / math.sqrt(2 * W.shape[0])
    return h * torch.cat([torch.exp(u @ W.T), torch.exp(-u @ W.T)], 1)


def trig(u, W):
    h = torch.exp(0.5 * (u * u).sum(1, keepdim=True)) / math.sqrt(W.shape[0])
    return h * torch.cat([torch.sin(u @ W.T), torch.cos(u @ W.T)], 1)


def dpfp(u, W):   # nu = 1, epsilon 0.05
    r = torch.relu(torch.cat([u, -u], 1))
    return r * torch.roll(r, 1, dims=1) + 0.05


# name -> (favor apply flags, features of (x, y) given W)
MAPS = {
    "positive": (["--m", M], same(positive)),
    "hyperbolic": (["--m", M], same(hyperbolic)),
    "trig": (["--m", M], same(trig)),
    # relu and dpfp with epsilon 0.05: a row whose features are all 0 would have D = 0
    "relu": (["--m", M, "--epsilon", 0.05], same(lambda u, W: (torch.relu(u @ W.T) + 0.05) / math.sqrt(W.shape[0]))),
    "oprf": (["--m", M, "--A", 0.05], same(lambda u, W: oprf_features(u, W, 0.05))),
    "gerf": (["--m", M, "--A", 0.05, "--param", "t=0.8"],
             lambda x, y, W: (oprf_features(0.8 * x, W, 0.05), oprf_features(y / 0.8, W, 0.05))),
    "saderf": (["--m", M], saderf_pair),
    "sderf": (["--m", M], sderf_pair),
    "elu": ([], same(lambda u, W: torch.nn.functional.elu(u) + 1)),
    "dpfp": (["--epsilon", 0.05], same(dpfp)),
}


def exact_attention(q, k, v, causal):
    s = q @ k.T / math.sqrt(q.shape[1])
    if causal:
        s = s.masked_fill(torch.ones(len(q), len(k), dtype=torch.bool).triu(1), float("-inf"))
    return s.softmax(-1) @ v


def linear_attention(phi_q, phi_k, v, causal):
    a = phi_q @ phi_k.T   # the L x L matrix: a direct reading of D^-1 phi(Q) phi(K)^T V
    if causal:
        a = a * torch.ones(len(phi_q), len(phi_k), dtype=a.dtype).tril()
    return (a @ v) / a.sum(1, keepdim=True)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("grad")
    rng = np.random.default_rng(5)
    for name, shape, scale in [("q", (L, D), 0.7), ("k", (L, D), 0.7), ("v", (L, DV), 1.0), ("g", (L, DV), 1.0)]:
        np.save(d / f"{name}.npy", scale * rng.standard_normal(shape))
    favor("projection", "--projection", "orthogonal", "--m", M, "--d", D, "--seed", 0, "--out", d / "W.npy")
    return d


def favor_grads(data, flags, causal, tag):
    out = data / tag
    out.mkdir()
    favor("apply", "--q", data / "q.npy", "--k", data / "k.npy", "--v", data / "v.npy", *flags,
          *(["--causal"] if causal else []), "--grad", data / "g.npy", "--out", out / "out.npy")
    return [np.load(out / f"out_{n}.npy") for n in ("dq", "dk", "dv")]


def torch_grads(data, forward):
    q, k, v = (torch.tensor(np.load(data / f"{n}.npy"), requires_grad=True) for n in "qkv")
    (torch.tensor(np.load(data / "g.npy")) * forward(q, k, v)).sum().backward()
    return [t.grad.numpy() for t in (q, k, v)]


def check(ours, theirs):
    for name, a, b in zip(("dq", "dk", "dv"), ours, theirs):
        err = np.linalg.norm(a - b) / np.linalg.norm(b)
        assert err < TOL, f"{name}: relative error {err:.3g}"


@pytest.mark.parametrize("causal", [False, True])
def test_exact(data, causal):
    ours = favor_grads(data, ["--exact"], causal, f"exact{causal}")
    check(ours, torch_grads(data, lambda q, k, v: exact_attention(q, k, v, causal)))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", list(MAPS))
def test_linear(data, name, causal):
    flags, pair = MAPS[name]
    W = torch.tensor(np.load(data / "W.npy"))
    scale = D ** -0.25

    def forward(q, k, v):
        phi_q, phi_k = pair(q * scale, k * scale, W)
        return linear_attention(phi_q, phi_k, v, causal)

    ours = favor_grads(data, ["--features", name, *flags], causal, f"{name}{causal}")
    check(ours, torch_grads(data, forward))
