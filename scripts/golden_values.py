#!/usr/bin/python3
"""Writes tests/data/golden.json: pinned values of favor's random streams, inputs and W.

tests/experiments/test_golden.cpp checks the library against this file, so any change to the numbers
the same config gives (the promise of README "Seeding") fails the test suite, on every
compiler and platform it is built on.

Where the values come from:
  * mix64, tag, stream_key, uniform_at, normal_at, chi_at and random_inputs: an independent
    pure-Python implementation written from the specification in lib/include/favor/core/rng.hpp,
    lib/src/core/rng.cpp, lib/include/favor/experiments/inputs.hpp and lib/src/experiments/inputs.cpp (Python ints for the
    64-bit arithmetic, math.log/cos/sin/sqrt for Box-Muller). The inputs are also compared
    with `favor gen`.
  * W: written by the built `favor projection` for every projection (the QR-based ones
    depend on LAPACK and are pinned rather than reimplemented). Before writing, each W is
    compared with a Python implementation: to 1e-15 (the compiler may fuse a*b + c) for iid, hadamard,
    hadamard-fixed and givens, which are written here from lib/src/estimators/projections.cpp and
    lib/src/estimators/structured.cpp; to 1e-12 for orthogonal*, simplex, simplex-plus (numpy's QR); to
    4e-15 for qmc (lib/src/estimators/qmc.cpp: Sobol points from Joe & Kuo's direction numbers, read from
    SciPy's copy when SciPy is installed, else from lib/src/estimators/sobol_directions.cpp; the inverse
    normal CDF is Python's statistics.NormalDist.inv_cdf, the same AS241, which differs from
    the C++ build by FMA contraction only); to 1e-14 for fastfood (S H G Pi H B with the
    fwht above) and 4e-15 for lattice (the Korobov search and radical inverse written here
    from lib/src/estimators/projections/lattice.cpp, Phi^-1 as for qmc); orthogonal-pnc to 1e-12 (numpy's
    QR; the chi quantile written here from lib/src/estimators/projections/orthogonal_pnc.cpp).

The script never overwrites a golden file that differs from what it computes unless given
--update: a difference beyond the test's tolerances means the streams changed, which breaks
reproducibility of every earlier result, so it has to be deliberate. Differences within the
tolerances (another libm or LAPACK) leave the pinned file as it is.

Usage (from the repository root, after scripts/setup.sh):
  /usr/bin/python3 scripts/golden_values.py            write the file if absent, else compare
  /usr/bin/python3 scripts/golden_values.py --check    compare only; exit 1 if absent or different
  /usr/bin/python3 scripts/golden_values.py --update   overwrite after a deliberate change
Options: --favor PATH (default build/favor), --out PATH (default tests/data/golden.json).
"""
import argparse
import importlib.util
import json
import re
import statistics
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15            # rng.cpp kGamma
TWO_PI = 6.283185307179586476925286766559   # rng.cpp kTwoPi (the double nearest 2 pi)
assert TWO_PI == math.tau

# ---------------------------------------------------------------- the generator (rng.hpp/.cpp)


def mix64(z):
    z &= MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def tag(s):
    h = 0xCBF29CE484222325
    for byte in s.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) & MASK
    return h


def stream_key(ids):
    h = 0x6A09E667F3BCC909
    for i in ids:
        h = mix64(h ^ mix64((i + GAMMA) & MASK))
    return h


def uniform_at(key, i):
    bits = mix64((key + ((i + 1) * GAMMA)) & MASK) >> 11   # 53 bits
    return (float(bits) + 0.5) * 2.0 ** -53                # one IEEE add, an exact scaling


def normal_pair(key, p):
    r = math.sqrt(-2.0 * math.log(uniform_at(key, 2 * p)))
    t = TWO_PI * uniform_at(key, 2 * p + 1)
    return r * math.cos(t), r * math.sin(t)


def normal_at(key, i):
    return normal_pair(key, i // 2)[i % 2]


def fill_normal(key, n, first=0):
    return [normal_at(key, first + j) for j in range(n)]


def chi_at(key, i, d):
    sub = stream_key([key, i])
    s = 0.0
    for c in range(d):
        z = normal_at(sub, c)
        s += z * z
    return math.sqrt(s)


# ---------------------------------------------------------------- inputs (inputs.hpp/.cpp)


def normal_matrix(key, rows, cols, scale):
    flat = fill_normal(key, rows * cols)
    return [[flat[r * cols + c] * scale for c in range(cols)] for r in range(rows)]


def random_inputs(seed, L, d, dv, scale):
    return {"q": normal_matrix(stream_key([seed, tag("inputs-q"), d]), L, d, scale),
            "k": normal_matrix(stream_key([seed, tag("inputs-k"), d]), L, d, scale),
            "v": normal_matrix(stream_key([seed, tag("inputs-v"), dv]), L, dv, scale)}


# ---------------------------------------------------------------- W (projections.cpp, structured.cpp)


def next_pow2(d):
    p = 1
    while p < d:
        p *= 2
    return p


def fwht(v):
    p = len(v)
    h = 1
    while h < p:
        for i in range(0, p, 2 * h):
            for k in range(i, i + h):
                a, b = v[k], v[k + h]
                v[k], v[k + h] = a + b, a - b
        h *= 2
    s = 1.0 / math.sqrt(float(p))
    for k in range(p):
        v[k] *= s


def sorf_rows(key, p, d):
    signs = [[-1.0 if uniform_at(key, k * p + i) < 0.5 else 1.0 for i in range(p)] for k in range(3)]
    rows = [[0.0] * d for _ in range(p)]
    for j in range(d):
        col = [0.0] * p
        col[j] = 1.0
        col = [signs[2][i] * col[i] for i in range(p)]
        fwht(col)
        col = [col[i] * signs[1][i] for i in range(p)]
        fwht(col)
        col = [col[i] * signs[0][i] for i in range(p)]
        fwht(col)
        s = math.sqrt(float(p))
        for r in range(p):
            rows[r][j] = col[r] * s
    return rows


def givens_block(key, d):
    log2d = 0
    while (1 << log2d) < d:
        log2d += 1
    Q = [[1.0 if r == c else 0.0 for c in range(d)] for r in range(d)]
    for t in range(d * log2d):
        i = min(d - 1, int(uniform_at(key, 3 * t) * float(d)))
        j = min(d - 2, int(uniform_at(key, 3 * t + 1) * float(d - 1)))
        if j >= i:
            j += 1
        theta = TWO_PI * uniform_at(key, 3 * t + 2)
        c, s = math.cos(theta), math.sin(theta)
        for r in range(d):
            a, b = Q[r][i], Q[r][j]
            Q[r][i] = c * a - s * b
            Q[r][j] = s * a + c * b
    return Q


def orthogonal_block(key, d, sign_fix):
    g = np.array(fill_normal(key, d * d)).reshape(d, d)
    q, r = np.linalg.qr(g)
    return [[(-1.0 if sign_fix and r[j, j] < 0 else 1.0) * q[c, j] for c in range(d)] for j in range(d)]


def simplex_block(key, d):
    R = orthogonal_block(key, d, True)
    mean = [0.0] * d
    for k in range(d):
        for c in range(d):
            mean[c] += R[k][c] / float(d)
    a = math.sqrt(float(d) / float(d - 1))
    return [[a * (R[i][c] - mean[c]) for c in range(d)] for i in range(d)]


SIMPLEX_PLUS_SWEEPS = 5   # structured.hpp kSimplexPlusSweeps


def simplex_plus_directions(S, w, sweeps=SIMPLEX_PLUS_SWEEPS):
    d, n = len(S), len(S[0])
    S = [list(r) for r in S]
    for _ in range(sweeps):
        T = [0.0] * n
        for j in range(d):
            for c in range(n):
                T[c] += w[j] * S[j][c]
        for i in range(d):
            v = [T[c] - w[i] * S[i][c] for c in range(n)]
            vv = 0.0
            for c in range(n):
                vv += v[c] * v[c]
            if not vv > 0.0:
                continue
            inv = 1.0 / math.sqrt(vv)
            for c in range(n):
                S[i][c] = -v[c] * inv
                T[c] = v[c] + w[i] * S[i][c]
    return S


# ---------------------------------------------------------------- qmc (qmc.cpp)


def sobol_table(dims):
    """(poly, [m_1 .. m_s]) for dimensions 2 .. dims: SciPy's copy of Joe & Kuo's table
    (independent of the C++ one) when SciPy is installed, else lib/src/estimators/sobol_directions.cpp."""
    spec = importlib.util.find_spec("scipy")
    if spec is not None and spec.submodule_search_locations:
        z = np.load(os.path.join(list(spec.submodule_search_locations)[0], "stats", "_sobol_direction_numbers.npz"))
        out = []
        for j in range(1, dims):
            p = int(z["poly"][j])
            out.append((p, [int(v) for v in z["vinit"][j, :p.bit_length() - 1]]))
        return out
    text = open(os.path.join(ROOT, "lib", "src", "sobol_directions.cpp")).read()
    rows = re.findall(r"\{(\d+), \{([\d, ]+)\}\}", text)
    return [(int(p), [int(v) for v in ms.split(",")]) for p, ms in rows[:dims - 1]]


_SOBOL_V = {}


def sobol_directions(j):
    if j not in _SOBOL_V:
        if j == 0:
            _SOBOL_V[j] = [1 << (31 - k) for k in range(32)]
        else:
            p, ms = sobol_table(j + 1)[j - 1]
            s = p.bit_length() - 1
            V = [ms[k] << (31 - k) for k in range(s)]
            for k in range(s, 32):
                x = V[k - s] ^ (V[k - s] >> s)
                for t in range(1, s):
                    if (p >> (s - t)) & 1:
                        x ^= V[k - t]
                V.append(x)
            _SOBOL_V[j] = V
    return _SOBOL_V[j]


def sobol_int(i, j):
    g, x, V = i ^ (i >> 1), 0, sobol_directions(j)
    k = 0
    while g:
        if g & 1:
            x ^= V[k]
        g >>= 1
        k += 1
    return x


def owen_uniform(x, key):
    out = 0
    for k in range(32):
        node = (1 << k) | (x >> (32 - k))
        flip = 1 if uniform_at(key, node) < 0.5 else 0
        out |= (((x >> (31 - k)) & 1) ^ flip) << (31 - k)
    tail = math.floor(uniform_at(key, (1 << 32) + x) * 2.0 ** 20)
    return (float(out) * 2.0 ** 20 + tail + 0.5) * 2.0 ** -52


def qmc_gaussian(m, d, key):
    nd = statistics.NormalDist()
    W = [[0.0] * d for _ in range(m)]
    for j in range(d):
        kj = stream_key([key, j])
        for i in range(m):
            W[i][j] = nd.inv_cdf(owen_uniform(sobol_int(i, j), kj))
    return W


def fastfood_rows(key, P, d):
    """lib/src/estimators/projections/fastfood.cpp: unit rows of H G Pi H B (P x d)."""
    B = [-1.0 if uniform_at(key, i) < 0.5 else 1.0 for i in range(P)]
    perm = list(range(P))
    k = 0
    for i in range(P - 1, 0, -1):
        j = int(uniform_at(key, P + k) * float(i + 1))
        perm[i], perm[j] = perm[j], perm[i]
        k += 1
    G = fill_normal(stream_key([key, 1]), P)
    g2 = 0.0
    for g in G:
        g2 += g * g
    unit = math.sqrt(float(P) / g2)
    rows = [[0.0] * d for _ in range(P)]
    for j in range(d):
        v = [0.0] * P
        v[j] = B[j]
        fwht(v)
        t = [G[l] * v[perm[l]] for l in range(P)]
        fwht(t)
        for i in range(P):
            rows[i][j] = unit * t[i]
    return rows


def gamma_p(a, x):
    """lib/src/estimators/projections/orthogonal_pnc.cpp: the regularised lower incomplete gamma."""
    if x <= 0.0:
        return 0.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1.0:
        term = 1.0 / a
        total, n = term, 1.0
        while abs(term) > 1e-17 * total:
            term *= x / (a + n)
            total += term
            n += 1.0
        return math.exp(log_front) * total
    tiny = 1e-300
    b = x + 1.0 - a
    c, dd = 1.0 / tiny, 1.0 / b
    h = dd
    i = 1.0
    while i < 1000.0:
        an = -i * (i - a)
        b += 2.0
        dd = an * dd + b
        dd = 1.0 / (tiny if abs(dd) < tiny else dd)
        c = b + an / c
        if abs(c) < tiny:
            c = tiny
        delta = dd * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
        i += 1.0
    return 1.0 - math.exp(log_front) * h


def chi_quantile(u, d):
    a = 0.5 * d
    lo, hi = 0.0, math.sqrt(float(d)) + 40.0
    it = 0
    while it < 200 and hi - lo > 1e-15 * hi:
        mid = 0.5 * (lo + hi)
        if gamma_p(a, 0.5 * mid * mid) < u:
            lo = mid
        else:
            hi = mid
        it += 1
    return 0.5 * (lo + hi)


def pnc_norm(key, r, d):
    in_block = r % d
    u = uniform_at(key, r // d * d + in_block // 2 * 2)
    return chi_quantile(1.0 - u if in_block % 2 == 1 else u, d)


LATTICE_N = 1024


def korobov_vector(d):
    """lib/src/estimators/projections/lattice.cpp: the Korobov a minimising weighted P_2 (n = 1024)."""
    n = LATTICE_N
    b2 = []
    for k in range(n):
        x = float(k) / float(n)
        b2.append(2.0 * math.pi * math.pi * (x * x - x + 1.0 / 6.0))
    b2 = np.array(b2)
    ls = np.arange(n, dtype=np.int64)

    def p2(a):
        prod = np.ones(n)
        v = 1
        for j in range(d):
            prod = prod * (1.0 + (1.0 / float((j + 1) * (j + 1))) * b2[(ls * v) & (n - 1)])
            v = (v * a) & (n - 1)
        total = 0.0
        for x in prod:
            total += float(x)
        return total / float(n) - 1.0

    best_a, best = 1, p2(1)
    for a in range(3, n, 2):
        p = p2(a)
        if p < best * (1.0 - 1e-12):
            best, best_a = p, a
    z, v = [], 1
    for j in range(d):
        z.append(v)
        v = (v * best_a) & (n - 1)
    return z


def lattice_rows(m, d, key):
    z = korobov_vector(d)
    shift = [uniform_at(key, j) for j in range(d)]
    nd = statistics.NormalDist()
    W = []
    for i in range(m):
        phi = int(format(i, "032b")[::-1], 2)
        row = []
        for j in range(d):
            u = float((phi * z[j]) & 0xFFFFFFFF) * 2.0 ** -32 + shift[j]
            if u >= 1.0:
                u -= 1.0
            if u <= 0.0:
                u = 2.0 ** -53
            row.append(nd.inv_cdf(u))
        W.append(row)
    return W


def stack_blocks(m, block_rows, make_block, norm):
    W = []
    b = 0
    while b * block_rows < m:
        block = make_block(b)
        for j in range(min(block_rows, m - b * block_rows)):
            s = norm(b * block_rows + j)
            W.append([s * x for x in block[j]])
        b += 1
    return W


def draw_projection(p, m, d, seed, trial):
    def key(name):
        return stream_key([seed, tag(name), d, trial])

    def block_key(name, b):
        return stream_key([seed, tag(name), d, trial, b])

    if p == "iid":
        flat = fill_normal(key("W-iid"), m * d)
        return [flat[r * d:(r + 1) * d] for r in range(m)]
    if p in ("orthogonal", "orthogonal-fixed", "orthogonal-nosignfix"):
        nk = key("W-chi-norms")
        return stack_blocks(m, d, lambda b: orthogonal_block(block_key("W-orthogonal-block", b), d,
                                                             p != "orthogonal-nosignfix"),
                            lambda r: math.sqrt(float(d)) if p == "orthogonal-fixed" else chi_at(nk, r, d))
    if p in ("hadamard", "hadamard-fixed"):
        P = next_pow2(d)
        nk = key("W-hadamard-norms")
        return stack_blocks(m, P, lambda b: sorf_rows(block_key("W-hadamard-block", b), P, d),
                            lambda r: chi_at(nk, r, P) / math.sqrt(float(P)) if p == "hadamard" else 1.0)
    if p == "simplex":
        nk = key("W-simplex-norms")
        return stack_blocks(m, d, lambda b: simplex_block(block_key("W-simplex-block", b), d),
                            lambda r: chi_at(nk, r, d))
    if p == "simplex-plus":
        nk = key("W-simplex-norms")
        blocks = (m + d - 1) // d
        norms = [chi_at(nk, r, d) for r in range(blocks * d)]
        return stack_blocks(m, d, lambda b: simplex_plus_directions(simplex_block(block_key("W-simplex-block", b), d),
                                                                    norms[b * d:(b + 1) * d]),
                            lambda r: norms[r])
    if p == "qmc":
        return qmc_gaussian(m, d, key("W-qmc"))
    if p == "fastfood":
        P = next_pow2(d)
        nk = key("W-fastfood-norms")
        return stack_blocks(m, P, lambda b: fastfood_rows(block_key("W-fastfood-block", b), P, d),
                            lambda r: chi_at(nk, r, P))
    if p == "orthogonal-pnc":
        nk = key("W-pnc-norms")
        return stack_blocks(m, d, lambda b: orthogonal_block(block_key("W-orthogonal-block", b), d, True),
                            lambda r: pnc_norm(nk, r, d))
    if p == "lattice":
        return lattice_rows(m, d, key("W-lattice-shift"))
    if p == "givens":
        nk = key("W-givens-norms")
        return stack_blocks(m, d, lambda b: givens_block(block_key("W-givens-block", b), d),
                            lambda r: chi_at(nk, r, d))
    raise ValueError(p)


# ---------------------------------------------------------------- the cases

U64_MAX = MASK
STREAM_CASES = [  # (key, first index, d of chi_at)
    (0, 0, 1),
    (1, 0, 3),
    (0xDEADBEEFCAFEF00D, 0, 8),
    (U64_MAX, 0, 16),
    (stream_key([2024, tag("W-chi-norms"), 4, 0]), 0, 4),
    (0x0123456789ABCDEF, (1 << 63) + 3, 5),   # indices near 2^63: (i+1)*gamma wraps
]
MIX64_INPUTS = [0, 1, 2, GAMMA, 0x0123456789ABCDEF, U64_MAX]
TAG_INPUTS = ["", "a", "W-iid", "W-chi-norms", "W-orthogonal-block", "W-hadamard-norms",
              "W-givens-block", "W-simplex-block", "W-qmc", "inputs-q", "inputs-k", "inputs-v"]
STREAM_KEY_INPUTS = [[], [0], [1, 2, 3], [U64_MAX], [U64_MAX, 0, U64_MAX],
                     [7, tag("W-iid"), 4, 0], [7, tag("W-givens-block"), 8, 2, 1]]
INPUT_CASES = [  # (seed, L, d, d_v, scale, rows stored)
    (0, 3, 4, 4, 1.0, 3),
    (2024, 2, 3, 5, 0.25, 2),
    (12345, 64, 7, 2, 0.7, 3),
    (U64_MAX, 5, 16, 8, 1.5, 2),
]
W_CASES = [  # (projection, m, d, seed, trial)
    ("iid", 5, 3, 0, 0),
    ("iid", 8, 4, 42, 1),
    ("iid", 12, 8, U64_MAX, 3),
    ("orthogonal", 5, 3, 1, 0),
    ("orthogonal", 12, 8, 7, 2),
    ("orthogonal-fixed", 8, 4, 3, 0),
    ("orthogonal-fixed", 12, 8, 3, 1),
    ("orthogonal-nosignfix", 8, 4, 3, 0),
    ("orthogonal-nosignfix", 12, 8, 5, 1),
    ("simplex", 5, 3, 11, 0),
    ("simplex", 12, 8, 11, 0),
    ("hadamard", 5, 3, 13, 0),
    ("hadamard", 12, 8, 13, 1),
    ("hadamard-fixed", 8, 4, 17, 0),
    ("hadamard-fixed", 12, 3, 17, 2),
    ("givens", 5, 3, 19, 0),
    ("givens", 12, 8, 19, 0),
    ("givens", 8, 4, 23, 5),
    ("simplex-plus", 5, 3, 29, 0),
    ("simplex-plus", 6, 4, 29, 1),
    ("simplex-plus", 12, 8, 31, 2),
    ("qmc", 8, 4, 37, 0),
    ("qmc", 12, 16, 37, 1),
    ("qmc", 5, 3, U64_MAX, 2),
    ("fastfood", 5, 3, 41, 0),
    ("fastfood", 20, 8, 41, 1),
    ("lattice", 8, 4, 43, 0),
    ("lattice", 12, 16, 43, 1),
    ("orthogonal-pnc", 5, 3, 47, 0),
    ("orthogonal-pnc", 12, 4, 47, 1),
]
PYTHON_TOL = {"iid": 1e-15, "hadamard": 1e-15, "hadamard-fixed": 1e-15, "givens": 1e-15,
              "qmc": 4e-15, "fastfood": 1e-14, "lattice": 4e-15}  # else 1e-12


def hexu64(x):
    return "0x%016x" % x


def close(a, b, tol):
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def run(favor, *args):
    r = subprocess.run([favor, *map(str, args)], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("golden_values.py: %s %s failed: %s" % (favor, " ".join(map(str, args)), r.stderr.strip()))


def compute(favor):
    g = {
        "about": "Pinned values of favor's random streams, inputs and W; checked by "
                 "tests/experiments/test_golden.cpp, written by scripts/golden_values.py (see there and "
                 "README 'Seeding'). u64 values are hex strings.",
        "mix64": [{"in": hexu64(x), "out": hexu64(mix64(x))} for x in MIX64_INPUTS],
        "tag": [{"in": s, "out": hexu64(tag(s))} for s in TAG_INPUTS],
        "stream_key": [{"ids": [hexu64(i) for i in ids], "out": hexu64(stream_key(ids))}
                       for ids in STREAM_KEY_INPUTS],
        "streams": [],
        "inputs": [],
        "projections": [],
    }
    for key, first, d in STREAM_CASES:
        idx = [(first + j) & MASK for j in range(8)]
        g["streams"].append({"key": hexu64(key), "first": hexu64(first),
                             "uniform": [uniform_at(key, i) for i in idx],
                             "normal": [normal_at(key, i) for i in idx],
                             "chi_d": d, "chi": [chi_at(key, i, d) for i in idx]})
    with tempfile.TemporaryDirectory() as tmp:
        for n, (seed, L, d, dv, scale, rows) in enumerate(INPUT_CASES):
            py = random_inputs(seed, L, d, dv, scale)
            out = os.path.join(tmp, "in%d" % n)
            run(favor, "gen", "--L", L, "--d", d, "--dv", dv, "--scale", repr(scale), "--seed", seed, "--out", out)
            for name in "qkv":
                cpp = np.load(os.path.join(out, name + ".npy"))
                if not np.allclose(cpp, np.array(py[name]), rtol=1e-15, atol=0):
                    sys.exit("golden_values.py: favor gen %s differs from the Python random_inputs "
                             "for case %r" % (name, INPUT_CASES[n]))
            g["inputs"].append({"seed": hexu64(seed), "L": L, "d": d, "d_v": dv, "scale": scale,
                                **{name: py[name][:rows] for name in "qkv"}})
        for n, (p, m, d, seed, trial) in enumerate(W_CASES):
            path = os.path.join(tmp, "W%d.npy" % n)
            run(favor, "projection", "--projection", p, "--m", m, "--d", d, "--seed", seed,
                "--trial", trial, "--out", path)
            W = np.load(path)
            assert W.shape == (m, d) and W.dtype == np.float64
            py = draw_projection(p, m, d, seed, trial)
            tol = PYTHON_TOL.get(p, 1e-12)
            bad = [(r, c) for r in range(m) for c in range(d) if not close(W[r, c], py[r][c], tol)]
            if bad:
                r, c = bad[0]
                sys.exit("golden_values.py: favor projection %s m=%d d=%d seed=%d trial=%d differs from "
                         "the Python implementation at (%d, %d): %r vs %r"
                         % (p, m, d, seed, trial, r, c, W[r, c], py[r][c]))
            g["projections"].append({"projection": p, "m": m, "d": d, "seed": hexu64(seed), "trial": trial,
                                     "W": [[float(x) for x in row] for row in W]})
    return g


def dumps(obj, indent=0):
    """JSON with every list of scalars, and every short object, on one line."""
    pad = "  " * indent
    if isinstance(obj, dict) and len(json.dumps(obj)) > 100:
        items = ['%s  %s: %s' % (pad, json.dumps(k), dumps(v, indent + 1)) for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and any(isinstance(x, (dict, list)) for x in obj):
        return "[\n" + ",\n".join(pad + "  " + dumps(x, indent + 1) for x in obj) + "\n" + pad + "]"
    return json.dumps(obj)


# The test's tolerances (tests/experiments/test_golden.cpp): exact for integers and uniforms, relative
# 1e-15 for normals, chi and inputs (libm, FMA), 1e-12 for W (LAPACK).
FLOAT_TOL = {"streams": 1e-15, "inputs": 1e-15, "projections": 1e-12}


def differences(old, new, path="", tol=0.0):
    """Paths where old and new disagree beyond the test's tolerance for that section."""
    if isinstance(old, dict) and isinstance(new, dict):
        if old.keys() != new.keys():
            return [path or "/"]
        out = []
        for k in old:
            t = FLOAT_TOL.get(k, tol) if not path else tol
            if path.startswith("/streams") and k == "uniform":
                t = 0.0
            out += differences(old[k], new[k], path + "/" + k, t)
        return out
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return [path]
        return [d for i, (a, b) in enumerate(zip(old, new)) for d in differences(a, b, "%s/%d" % (path, i), tol)]
    if isinstance(old, float) and isinstance(new, float):
        bound = tol * (max(1.0, abs(old), abs(new)) if path.startswith("/projections")
                       else max(abs(old), abs(new)))
        return [] if abs(old - new) <= bound else [path]
    return [] if old == new and type(old) is type(new) else [path]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--favor", default=os.path.join(ROOT, "build", "favor"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "golden.json"))
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="compare with the file, write nothing")
    mode.add_argument("--update", action="store_true", help="overwrite a file that differs")
    a = ap.parse_args()
    if not os.access(a.favor, os.X_OK):
        sys.exit("golden_values.py: no favor binary at %s (run scripts/setup.sh)" % a.favor)
    new = compute(a.favor)
    text = dumps(new) + "\n"
    old_text = open(a.out).read() if os.path.exists(a.out) else None
    if old_text is None:
        if a.check:
            print("golden_values.py: %s does not exist" % a.out, file=sys.stderr)
            return 1
    elif old_text == text:
        print("golden_values.py: %s is up to date" % a.out)
        return 0
    elif not a.update:
        diff = differences(json.loads(old_text), new)
        if not diff:
            # Last-bit differences (another libm or LAPACK): the pinned file stays as it is.
            print("golden_values.py: %s agrees within the test's tolerances; left unchanged" % a.out)
            return 0
        print("golden_values.py: %s differs from the values computed now beyond the test's tolerances\n"
              "at %d places, first %s.\n"
              "The streams, inputs or W changed: earlier results are no longer reproducible.\n"
              "If that is deliberate, rerun with --update and say so in the commit."
              % (a.out, len(diff), ", ".join(diff[:5])), file=sys.stderr)
        return 1
    with open(a.out, "w") as f:
        f.write(text)
    print("golden_values.py: wrote %s" % a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
