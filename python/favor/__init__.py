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
import sys
import warnings

import numpy as np

from . import _core
from ._core import Error

__all__ = ["Error", "attention", "attention_grad", "features", "projection", "run", "validate", "compare",
           "swap_in", "study", "trials_for", "__version__"]
__version__ = _core.version()


def _flag(x):
    """A keyword value as the flag text the command line would get (None: flag absent)."""
    if x is None:
        return None
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, (list, tuple)):
        return ",".join(_flag(v) for v in x)
    if isinstance(x, float):
        return repr(x)
    return os.fspath(x) if isinstance(x, os.PathLike) else str(x)


def _text(x, what="a value"):
    """_flag's text as the bytes the command line would get (os.fsencode: a file name's bytes
    restored from its surrogate escapes). Bytes that are not UTF-8 are refused as the command
    line refuses such an argument (process.cpp's check_arguments_utf8, by names.hpp's
    utf8_problem), naming `what`."""
    t = _flag(x)
    if t is None:
        return None
    b = os.fsencode(t)
    problem = _core.utf8_problem(b)
    if problem:
        shown = "".join(chr(c) if c < 0x80 else f"\\x{c:02x}" for c in b)
        raise Error(f"{what} '{shown}': not valid UTF-8 ({problem}); favor records names and values in run.json, "
                    "which holds UTF-8 only: rename it")
    return b


def _is_torch(x):
    """Whether x is a torch tensor (torch is not imported here: a caller with tensors has)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _array(x, name):
    """x as a float32 / float64 numpy array in native byte order, without a copy when it is
    one already (any strides); float16 widened to float32 (exactly); a byte-swapped array
    (">f4") converted, as favor's .npy reader converts one. A torch tensor: its values on
    the CPU (bfloat16 widened to float32, exactly); one that requires grad is refused."""
    if _is_torch(x):
        if x.requires_grad:
            raise Error(f"{name}: a torch tensor that requires grad: favor computes no torch gradients "
                        f"(favor.attention_grad gives them); pass {name}.detach()")
        x = x.cpu()
        a = (x.float() if x.dtype == sys.modules["torch"].bfloat16 else x).numpy()
    else:
        a = np.asarray(x)
    if a.dtype.kind == "f" and not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    if a.dtype == np.float16:
        a = a.astype(np.float32)
    if a.dtype not in (np.float32, np.float64):
        raise Error(f"{name}: dtype {a.dtype.str} is not supported; expected float16, bfloat16 (torch), float32 "
                    "or float64")
    return a


def _layout_perm(layout):
    """perm[j]: the axis of a `layout` array that becomes axis j of favor's order (B, H, L, D),
    by the C++ rule (layout_permutation); None without a layout or for one that is not valid
    (the reading call then refuses it as --layout is refused)."""
    if layout is None:
        return None
    return list(_core.layout_permutation(_text(layout, "layout"))) or None


def _in_layout(a, perm):
    """A result in favor's order returned in the layout's order, as ``apply --layout`` writes
    its outputs (docs/design.md section 4)."""
    if perm is None or a.ndim != len(perm):
        return a
    return np.ascontiguousarray(np.transpose(a, np.argsort(perm)))


def _from_layout(a, perm):
    """An array in the layout's order (attention_grad's g) as a view in favor's order."""
    return a if perm is None or a.ndim != len(perm) else np.transpose(a, perm)


def _dtype_name(x):
    """The favor dtype name of an input (torch or numpy)."""
    return str(x.dtype).replace("torch.", "") if _is_torch(x) else str(np.asarray(x).dtype)


def _torch_rule(inputs, dtype):
    """(dtype, torch dtype of the results or None), docs/design.md section 9: with a torch
    tensor among the inputs the computation's dtype defaults to the inputs' dtype (one dtype
    for all of them, or favor.Error) and the results are torch tensors of that dtype; numpy
    inputs keep the command line's default (float64) and its output dtypes."""
    named = {n: x for n, x in inputs.items() if x is not None}
    if not any(_is_torch(x) for x in named.values()):
        return dtype, None
    if dtype is None:
        kinds = {n: _dtype_name(x) for n, x in named.items()}
        if len(set(kinds.values())) > 1:
            raise Error(", ".join(named) + ": torch inputs of different dtypes (" +
                        ", ".join(f"{n} {d}" for n, d in kinds.items()) + "); pass dtype=")
        dtype = next(iter(kinds.values()))
    torch = sys.modules["torch"]
    return dtype, getattr(torch, _flag(dtype), None)


def _as_result(a, to):
    """A result array as the caller's kind: numpy, or a torch tensor of dtype `to`."""
    if to is None:
        return a
    return sys.modules["torch"].from_numpy(np.ascontiguousarray(a)).to(to)


def _flags(features, projection, m, seed, trial, epsilon, epsilon_after, A, dtype, threads, layout=None, window=None,
           sinks=None, support=None):
    return {k: _text(v, k) for k, v in dict(features=features, projection=projection, m=m, seed=seed, trial=trial,
                                            epsilon=epsilon, epsilon_after=epsilon_after, A=A, dtype=dtype,
                                            threads=threads, layout=layout, window=window, sinks=sinks,
                                            support=support).items() if v is not None}


def _params(map_params):
    return [_text(f"{k}={_flag(v)}", k) for k, v in map_params.items()]


def _warn(lines, stacklevel=3):
    for w in lines:
        warnings.warn(w, stacklevel=stacklevel)


def attention(q, k, v, features=None, projection=None, m=None, seed=None, trial=None, causal=False, dtype=None,
              exact=False, epsilon=None, epsilon_after=None, A=None, threads=None, max_memory=None, layout=None,
              window=None, sinks=None, support=None, **map_params):
    """Exact (``exact=True``) or random-feature attention softmax(q k^T / sqrt(d)) v: ``favor apply``.

    q: (L, d), (H, L, d) or (B, H, L, d); k: same leading shape, (Lk, d); v: (Lk, dv); or the
    axes ``layout`` names (``--layout``: "BLHD" for PyTorch's (B, L, H, d)); without a layout a
    rank 3 or 4 q with fewer rows than heads is refused (favor.Error), as the command line
    refuses the file. numpy arrays (float16, float32, float64, any byte order and memory order)
    or torch tensors (also bfloat16; not requiring grad). Returns lead + (L, dv), in the
    layout's order when ``layout`` is given (as ``apply --layout`` writes its output). numpy inputs: float64, or float32 when ``dtype``
    is not "float64" (as ``favor apply --out`` writes it). torch inputs: a torch tensor, dtype
    by default the inputs' (docs/design.md section 9).
    features: a feature map (``favor list``); m: random features; projection: default
    "orthogonal" ("iid" for maclaurin, which takes only iid); seed, trial: W drawn as a run draws it; dtype: float64 (default), float32,
    float16 or bfloat16 (emulated); map_params: the map's own keys (``--param``, e.g. t=0.8).
    window, sinks, support: a hybrid (``--window``, ``--sinks``, ``--support``; features="none": the
    window and sinks alone).
    Non-finite outputs: a RuntimeWarning with the command line's explanation.
    """
    return _attention(False, q, k, v, features, projection, m, seed, trial, causal, dtype, exact, epsilon,
                      epsilon_after, A, threads, max_memory, layout, window, sinks, support, **map_params)[0]


def _attention(save, q, k, v, features=None, projection=None, m=None, seed=None, trial=None, causal=False, dtype=None,
               exact=False, epsilon=None, epsilon_after=None, A=None, threads=None, max_memory=None, layout=None,
               window=None, sinks=None, support=None, **map_params):
    """(attention(...), saved): with `save` (favor.torch's forward) `saved` is what _attention_backward
    takes, or None where the call keeps no state (docs/design.md 9.2: exact, hybrids, maps without a
    gradient, the half dtypes); None without `save`."""
    dtype, to = _torch_rule(dict(q=q, k=k, v=v), dtype)
    out, warns, nonfinite, state = _core.attention(_array(q, "q"), _array(k, "k"), _array(v, "v"), exact, causal,
                                                   _flags(features, projection, m, seed, trial, epsilon, epsilon_after,
                                                          A, dtype, threads, layout, window, sinks, support),
                                                   _params(map_params), _text(max_memory, "max_memory"), save)
    _warn(warns, 4)   # the caller of attention
    if nonfinite:
        warnings.warn(nonfinite, RuntimeWarning, stacklevel=3)
    perm = _layout_perm(layout)
    return _as_result(_in_layout(out, perm), to), None if state is None else (state, perm, to)


def _attention_backward(saved, g):
    """(dq, dk, dv) of the _attention(True, ...) call that returned `saved`, for g (in the call's
    layout): attention_grad's results, from the forward's state instead of a second forward."""
    state, perm, to = saved
    grads = _core.attention_backward(state, _from_layout(_array(g, "g"), perm))
    return tuple(_as_result(_in_layout(x, perm), to) for x in grads)


def attention_grad(q, k, v, g, features=None, projection=None, m=None, seed=None, trial=None, causal=False,
                   dtype=None, exact=False, epsilon=None, epsilon_after=None, A=None, threads=None, max_memory=None,
                   layout=None, window=None, sinks=None, support=None, **map_params):
    """Gradients (dq, dk, dv) of attention(q, k, v, ...) for the upstream gradient g = dLoss/dOut:
    ``favor apply --grad``.

    q, k, v as in attention (``layout`` names their axes); g: lead + (L, dv), the output's shape
    (in the layout's order, like ``apply --grad``). Returns dq: lead + (L, d), dk: lead + (Lk, d),
    dv: lead + (Lk, dv), in the layout's order when one is given; float32 with dtype="float32", else float64 (torch inputs: torch tensors of
    the dtype). The half dtypes and maps that are not row-normalised (nystrom) have none
    (favor.Error). window, sinks, support: a hybrid's gradient, as attention's (``apply --grad
    --window``).
    """
    dtype, to = _torch_rule(dict(q=q, k=k, v=v, g=g), dtype)
    perm = _layout_perm(layout)
    dq, dk, dv, warns = _core.attention_grad(_array(q, "q"), _array(k, "k"), _array(v, "v"),
                                             _from_layout(_array(g, "g"), perm), exact,
                                             causal, _flags(features, projection, m, seed, trial, epsilon,
                                                            epsilon_after, A, dtype, threads, layout, window, sinks,
                                                            support),
                                             _params(map_params), _text(max_memory, "max_memory"))
    _warn(warns)
    return tuple(_as_result(_in_layout(x, perm), to) for x in (dq, dk, dv))


def features(x, features, m=None, projection=None, seed=None, trial=None, side="query", other=None, dtype=None,
             epsilon=None, epsilon_after=None, A=None, log_scale=False, layout=None, **map_params):
    """The random features phi(x) attention(..., features=F) uses, rows scaled by d^{-1/4}.

    x: (L, d), (H, L, d) or (B, H, L, d), or the axes ``layout`` names (as in attention):
    queries (side="query") or keys (side="key");
    other: the other side (keys for queries), which data-dependent maps (oprf's A*, nystrom's
    landmarks) are fitted to as in attention (default: x itself). Returns lead + (L, F) (in the
    layout's order when one is given, F in the place of D) with
    phi(x).phi(y) estimating exp(x.y); with log_scale=True the stabilised pair (phi~, s),
    s: lead + (L, 1), phi = exp(s) phi~ (docs/design.md section 2.3), which cannot overflow.
    torch inputs: torch tensors, phi of the dtype (by default the inputs'), s float64.
    """
    if side not in ("query", "key"):
        raise Error(f"features: side: expected 'query' or 'key', got {side!r}")
    xname, oname = ("k", "q") if side == "key" else ("q", "k")
    dtype, to = _torch_rule({xname: x, oname: other}, dtype)
    phi, s, warns = _core.features(_array(x, xname), None if other is None else _array(other, oname), side == "key",
                                   _flags(features, projection, m, seed, trial, epsilon, epsilon_after, A, dtype, None,
                                          layout), _params(map_params))
    _warn(warns)
    perm = _layout_perm(layout)
    if log_scale:
        return (_as_result(_in_layout(phi, perm), to),
                _as_result(_in_layout(s, perm), None if to is None else sys.modules["torch"].float64))
    return _as_result(_in_layout(phi * np.exp(s).astype(phi.dtype), perm), to)


def projection(projection, m, d, seed, trial=None):
    """W (m, d), float64: the random matrix a run draws for (seed, projection, m, d, trial)
    (``favor projection``)."""
    return _core.projection(_text(projection, "projection"), _text(m, "m"), _text(d, "d"), _text(seed, "seed"),
                            _text(trial, "trial"))


def _source(config):
    """(name, text): a config file's path, or a dict as JSON named "config" (relative paths in
    it relative to the working directory)."""
    if isinstance(config, dict):
        return b"config", json.dumps(config)
    return _text(config, "config"), None


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
    flags = {k: _text(v, k) for k, v in dict(out=out, m=m, num_features=num_features, L=L, trials=trials, seed=seed,
                                          dtype=dtype, shard=shard, threads=threads,
                                          max_memory=max_memory).items() if v is not None}
    if isinstance(set, str):
        set = [set]
    r = _core.run(name, text, flags, [_text(s, "set") for s in set], resume)
    _warn(r["warnings"])
    t = Tables()
    for fname, data in r["files"].items():
        if fname.endswith(".csv"):
            t[fname[:-4]] = _table(data)
    t.info = json.loads(r["files"]["run.json"])
    t.out = r["out"]
    t.notes = r["notes_md"]
    return t


def validate(config, set=(), threads=None, max_memory=None, shard=None, m=None, num_features=None, L=None):
    """Checks a config (and its tensor inputs) without running it: ``favor validate``.

    m, num_features, L override the grid as run's do (m=[16, 32] for --m 16,32).

    Returns a dict: "config" (resolved), "cells", "threads", "peak_bytes" and "seconds" (the
    cost estimate), "estimate" (its summary), "budget_bytes", "warnings", "text" (what the
    command prints).
    """
    name, text = _source(config)
    if isinstance(set, str):
        set = [set]
    r = _core.validate(name, text, [_text(s, "set") for s in set], _text(threads, "threads"),
                       _text(max_memory, "max_memory"), _text(shard, "shard"), _text(m, "m"),
                       _text(num_features, "num_features"), _text(L, "L"))
    _warn(r["warnings"])
    r["config"] = json.loads(r["config"])
    return r


def compare(dir, metric=(), alpha=None, pairs=None, against=None, match=None, write=False):
    """Tests every pair of variants of an approximation result directory: ``favor compare``.

    Returns the tables ("comparisons", "ranking": every compared metric's rows; DataFrames when
    pandas imports) with "metrics" (those compared), "description", "warnings" and "summary"
    (one line per cell and metric). Writes nothing unless write=True, which writes what the
    command writes: DIR/comparisons_<metric>.csv and DIR/ranking_<metric>.csv per metric.
    pairs: [("a", "b"), ...] or "a:b,c:d".
    """
    if isinstance(metric, str):
        metric = [metric]
    if pairs is not None and not isinstance(pairs, str):
        pairs = ",".join(f"{a}:{b}" for a, b in pairs)
    r = _core.compare(_text(dir, "dir"), [_text(m, "metric") for m in metric], _text(alpha, "alpha"),
                      _text(pairs, "pairs"), _text(against, "against"), _text(match, "match"), bool(write))
    _warn(r["warnings"])
    for name in ("comparisons", "ranking"):
        r[name] = _table(r[name])
    return r


from ._swap_in import attention_modules, swap_in  # noqa: E402  (torch is imported only when it runs)
from ._study import study, trials_for  # noqa: E402  (pandas and matplotlib are imported only when it runs)
