"""favor from Python: random-feature attention (Performer / FAVOR+) on numpy arrays, and
favor's experiments, with the command line's checks, messages and bit-identical numbers.

    import favor
    out = favor.attention(q, k, v, features="positive", m=256)   # like `favor apply`
    tables = favor.run("configs/quick.json", trials=4)            # like `favor run`

Every function takes the `favor` command's flags as keywords (``epsilon_after`` for
``--epsilon-after``) and raises :class:`favor.Error` (a ValueError) with the command line's
one-line message for bad input. Computation runs with the GIL released; Ctrl-C stops
attention between heads and a run between cell trials (the run's journal kept, nothing
half-written: resume with ``resume=True``). docs/design.md section 9 has the API.
"""
import io
import json
import os
import warnings

import numpy as np

from . import _core
from ._core import Error

__all__ = ["Error", "attention", "attention_grad", "features", "projection", "run", "validate", "compare",
           "__version__"]
__version__ = _core.version()


def _text(x):
    """A keyword value as the flag text the command line would get (None: flag absent)."""
    if x is None:
        return None
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, (list, tuple)):
        return ",".join(_text(v) for v in x)
    if isinstance(x, float):
        return repr(x)
    return str(x)


def _array(x, name):
    """x as a float32 / float64 array in native byte order, without a copy when it is one
    already (any strides); float16 widened to float32 (exactly)."""
    a = np.asarray(x)
    if a.dtype == np.float16:
        a = a.astype(np.float32)
    if a.dtype not in (np.float32, np.float64) or not a.dtype.isnative:
        raise Error(f"{name}: dtype {a.dtype.str} is not supported; expected float16, float32 or float64")
    return a


def _flags(features, projection, m, seed, trial, epsilon, epsilon_after, A, dtype, threads, window=None, sinks=None,
           support=None):
    return {k: _text(v) for k, v in dict(features=features, projection=projection, m=m, seed=seed, trial=trial,
                                         epsilon=epsilon, epsilon_after=epsilon_after, A=A, dtype=dtype,
                                         threads=threads, window=window, sinks=sinks, support=support).items()
            if v is not None}


def _params(map_params):
    return [f"{k}={_text(v)}" for k, v in map_params.items()]


def _warn(lines):
    for w in lines:
        warnings.warn(w, stacklevel=3)


def attention(q, k, v, features=None, projection=None, m=None, seed=None, trial=None, causal=False, dtype=None,
              exact=False, epsilon=None, epsilon_after=None, A=None, threads=None, max_memory=None, window=None,
              sinks=None, support=None, **map_params):
    """Exact (``exact=True``) or random-feature attention softmax(q k^T / sqrt(d)) v: ``favor apply``.

    q: (L, d), (H, L, d) or (B, H, L, d); k: same leading shape, (Lk, d); v: (Lk, dv).
    float16, float32 or float64, any memory order. Returns lead + (L, dv): float64, or float32
    when ``dtype`` is not "float64" (as ``favor apply --out`` writes it).
    features: a feature map (``favor list``); m: random features; projection: default
    "orthogonal"; seed, trial: W drawn as a run draws it; dtype: float64 (default), float32,
    float16 or bfloat16 (emulated); map_params: the map's own keys (``--param``, e.g. t=0.8).
    window, sinks, support: a hybrid (``--window``, ``--sinks``, ``--support``; features="none": the
    window and sinks alone).
    Non-finite outputs: a RuntimeWarning with the command line's explanation.
    """
    out, warns, nonfinite = _core.attention(_array(q, "q"), _array(k, "k"), _array(v, "v"), exact, causal,
                                            _flags(features, projection, m, seed, trial, epsilon, epsilon_after, A,
                                                   dtype, threads, window, sinks, support), _params(map_params),
                                            _text(max_memory))
    _warn(warns)
    if nonfinite:
        warnings.warn(nonfinite, RuntimeWarning, stacklevel=2)
    return out


def attention_grad(q, k, v, g, features=None, projection=None, m=None, seed=None, trial=None, causal=False,
                   dtype=None, exact=False, epsilon=None, epsilon_after=None, A=None, threads=None, max_memory=None,
                   **map_params):
    """Gradients (dq, dk, dv) of attention(q, k, v, ...) for the upstream gradient g = dLoss/dOut:
    ``favor apply --grad``.

    g: lead + (L, dv), the output's shape. Returns dq: lead + (L, d), dk: lead + (Lk, d),
    dv: lead + (Lk, dv); float32 with dtype="float32", else float64. The half dtypes and maps
    that are not row-normalised (nystrom) have none (favor.Error).
    """
    dq, dk, dv, warns = _core.attention_grad(_array(q, "q"), _array(k, "k"), _array(v, "v"), _array(g, "g"), exact,
                                             causal, _flags(features, projection, m, seed, trial, epsilon,
                                                            epsilon_after, A, dtype, threads),
                                             _params(map_params), _text(max_memory))
    _warn(warns)
    return dq, dk, dv


def features(x, features, m=None, projection=None, seed=None, trial=None, side="query", other=None, dtype=None,
             epsilon=None, epsilon_after=None, A=None, log_scale=False, **map_params):
    """The random features phi(x) attention(..., features=F) uses, rows scaled by d^{-1/4}.

    x: (L, d), (H, L, d) or (B, H, L, d): queries (side="query") or keys (side="key");
    other: the other side (keys for queries), which data-dependent maps (oprf's A*, nystrom's
    landmarks) are fitted to as in attention (default: x itself). Returns lead + (L, F) with
    phi(x).phi(y) estimating exp(x.y); with log_scale=True the stabilised pair (phi~, s),
    s: lead + (L, 1), phi = exp(s) phi~ (docs/design.md section 2.3), which cannot overflow.
    """
    if side not in ("query", "key"):
        raise Error(f"features: side: expected 'query' or 'key', got {side!r}")
    phi, s = _core.features(_array(x, "k" if side == "key" else "q"),
                            None if other is None else _array(other, "q" if side == "key" else "k"), side == "key",
                            _flags(features, projection, m, seed, trial, epsilon, epsilon_after, A, dtype, None),
                            _params(map_params))
    if log_scale:
        return phi, s
    return phi * np.exp(s).astype(phi.dtype)


def projection(projection, m, d, seed, trial=None):
    """W (m, d), float64: the random matrix a run draws for (seed, projection, m, d, trial)
    (``favor projection``)."""
    return _core.projection(_text(projection), _text(m), _text(d), _text(seed), _text(trial))


def _source(config):
    """(name, text): a config file's path, or a dict as JSON named "config" (relative paths in
    it relative to the working directory)."""
    if isinstance(config, dict):
        return "config", json.dumps(config)
    return os.fspath(config), None


def _table(data):
    """A CSV's bytes as a DataFrame (pandas), else a numpy structured array."""
    try:
        import pandas as pd
    except ImportError:
        return np.genfromtxt(io.BytesIO(data), delimiter=",", names=True, dtype=None, encoding="utf-8")
    return pd.read_csv(io.BytesIO(data))


class Tables(dict):
    """A result set's tables by name ("summary", "errors", "baselines", "timing"), as the CSV
    files in ``out`` hold them; ``info``: run.json; ``out``: the directory written."""


def run(config, out=None, m=None, num_features=None, L=None, trials=None, seed=None, dtype=None, shard=None,
        threads=None, max_memory=None, set=(), resume=False):
    """Runs an experiment config (a path, or a dict) and writes its result set: ``favor run``.

    Keywords are the command's flags (m=[16, 32] for --m 16,32; set=["inputs.scale=0.5"]).
    Returns :class:`Tables`: the result set's tables (pandas DataFrames when pandas imports,
    numpy structured arrays otherwise). Ctrl-C stops it between cell trials: the finished ones
    kept in OUT/journal.jsonl, earlier results untouched, KeyboardInterrupt raised; continue
    with resume=True.
    """
    name, text = _source(config)
    flags = {k: _text(v) for k, v in dict(out=out, m=m, num_features=num_features, L=L, trials=trials, seed=seed,
                                          dtype=dtype, shard=shard, threads=threads,
                                          max_memory=max_memory).items() if v is not None}
    if isinstance(set, str):
        set = [set]
    r = _core.run(name, text, flags, list(set), resume)
    _warn(r["warnings"])
    t = Tables()
    for fname, data in r["files"].items():
        if fname.endswith(".csv"):
            t[fname[:-4]] = _table(data)
    t.info = json.loads(r["files"]["run.json"])
    t.out = r["out"]
    t.notes = r["notes_md"]
    return t


def validate(config, set=(), threads=None, max_memory=None, shard=None):
    """Checks a config (and its tensor inputs) without running it: ``favor validate``.

    Returns a dict: "config" (resolved), "cells", "threads", "peak_bytes" and "seconds" (the
    cost estimate), "estimate" (its summary), "budget_bytes", "warnings", "text" (what the
    command prints).
    """
    name, text = _source(config)
    if isinstance(set, str):
        set = [set]
    r = _core.validate(name, text, list(set), _text(threads), _text(max_memory), _text(shard))
    _warn(r["warnings"])
    r["config"] = json.loads(r["config"])
    return r


def compare(dir, metric=(), alpha=None, pairs=None, against=None, match=None):
    """Tests every pair of variants of an approximation result directory: ``favor compare``.

    Writes DIR/comparisons.csv and DIR/ranking.csv and returns them as tables
    ("comparisons", "ranking"; DataFrames when pandas imports) with "description",
    "warnings" and "summary" (one line per cell and metric). pairs: [("a", "b"), ...] or
    "a:b,c:d".
    """
    if isinstance(metric, str):
        metric = [metric]
    if pairs is not None and not isinstance(pairs, str):
        pairs = ",".join(f"{a}:{b}" for a, b in pairs)
    r = _core.compare(os.fspath(dir), list(metric), _text(alpha), pairs, against, match)
    _warn(r["warnings"])
    for name in ("comparisons", "ranking"):
        with open(os.path.join(os.fspath(dir), name + ".csv"), "rb") as f:
            r[name] = _table(f.read())
    return r
