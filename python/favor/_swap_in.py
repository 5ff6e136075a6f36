"""favor.swap_in: what an approximation does to the model. The model runs on held-out windows
with the attention of chosen layers computed by favor (any variant), and its metric (bits per
byte, MQAR recall or a user's function) is reported per window and trial, beside its own with
exact attention and with uniform attention, and each variant's state per head, as a favor
result set (errors.csv, summary.csv) that ``favor compare`` and
scripts/plot.py read as they read a run's. docs/design.md section 9 ("swap_in") is the
contract; scripts/swap_in.py the command line.

The protocol a model follows: each attention layer is a torch module with an attribute
``attention_fn`` (None: the module's own exact softmax), which its forward calls as
``attention_fn(q, k, v, scale, causal)`` with q, k (B, H, L, d) as they enter the softmax
(after RoPE), v (B, H, L, dv), the logit scale, and returns (B, H, L, dv). The modules in
``model.modules()`` order are the layers 0, 1, ... (scripts/tiny_lm.py's
RotaryCausalAttention follows it in three lines).
"""
import fnmatch
import hashlib
import json
import math
import os
import shutil
import sys
import tempfile
import time
import warnings

import numpy as np

KEYS = ["variant", "features", "projection", "L", "d", "m", "num_features", "state_bytes", "scale", "layers", "trial",
        "seed"]
STATS = ["mean", "std", "sem", "median", "p10", "p90"]
# A variant's keys that are favor.attention's own keywords (the rest are the map's keys).
ATTENTION_KEYS = {"features", "projection", "epsilon", "epsilon_after", "A", "window", "sinks", "support"}
# The files of a swap-in result set: what swap_in writes and what `favor compare` adds to it.
RESULT_FILES = ["errors.csv", "summary.csv", "windows.csv", "run.json", "comparisons_*.csv", "ranking_*.csv"]


def _favor():
    return sys.modules["favor"]


def _error(msg):
    return _favor().Error("swap_in: " + msg)


def _number(x):
    """A float as favor writes it (report.cpp's format_number: the shortest text that reads back
    to the same double; nan, inf, -inf)."""
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    t = repr(x)
    return t[:-2] if t.endswith(".0") else t


def attention_modules(model):
    """The model's attention layers under the protocol: its modules with an ``attention_fn``
    attribute, in ``model.modules()`` order."""
    return [m for m in model.modules() if hasattr(m, "attention_fn")]


def _layer_sets(layers, n):
    """The layer sets asked for as (label, indices): "all", an index, or a list of indices
    (label "0+2")."""
    if isinstance(layers, (str, int)) or (isinstance(layers, (list, tuple)) and layers
                                            and all(isinstance(x, int) for x in layers)):
        layers = [layers]
    out = []
    for item in layers:
        if item == "all":
            out.append(("all", list(range(n))))
            continue
        idx = sorted({item} if isinstance(item, int) else set(item)) if not isinstance(item, str) else None
        if idx is None or not idx or any(not isinstance(i, int) or isinstance(i, bool) for i in idx):
            raise _error(f"layers: {item!r} is not a layer set (\"all\", a layer index or a list of them)")
        for i in idx:
            if not 0 <= i < n:
                raise _error(f"layers: no layer {i} (the model has {n} attention layers: 0..{n - 1})")
        out.append(("+".join(str(i) for i in idx), idx))
    if len({label for label, _ in out}) != len(out):
        raise _error("layers: a layer set is listed twice")
    return out


def _variants(variants, d, causal):
    """Each variant dict with its m values resolved by favor (the config's rules and messages):
    a list of (spec, m, info) with info favor's name, features, projection, num_features (a
    non-causal window's 2w - 1 keys counted when causal is false)."""
    if isinstance(variants, dict):
        variants = [variants]
    out, names = [], set()
    for i, v in enumerate(variants):
        if not isinstance(v, dict):
            raise _error(f"variants[{i}]: must be an object (a config variant), got {type(v).__name__}")
        spec = dict(v)
        ms = spec.pop("m", None)
        spec.pop("dtype", None)
        # The weights of a fitted map without a layer name: each layer takes its own (":layer<l>").
        if isinstance(spec.get("weights"), str) and ":" not in os.path.basename(spec["weights"]):
            spec["weights"] = spec["weights"] + ":layer0"
        probe = _favor()._core.variant_info(json.dumps(spec), "swap_in", f"variants[{i}]", 1, int(d), causal)
        if not probe["uses_m"]:   # elu, none + window, ...: no m; its row's m is its feature columns
            if ms is not None:
                raise _error(f"variants[{i}].m: does not apply to '{probe['features']}' (its features do not "
                             "depend on m)")
            ms = [max(1, probe["num_features"])]
        ms = ms if isinstance(ms, (list, tuple)) else [ms]
        if any(m is None or isinstance(m, bool) or not isinstance(m, int) or m < 1 for m in ms):
            raise _error(f"variants[{i}].m: a positive integer or a list of them, got {v.get('m')!r}")
        for m in ms:
            info = _favor()._core.variant_info(json.dumps(spec), "swap_in", f"variants[{i}]", int(m), int(d), causal)
            if (info["name"], m) in names:
                raise _error(f"variants[{i}]: a second variant named {info['name']} at m = {m} (give it a \"name\")")
            names.add((info["name"], m))
            out.append((v, int(m), info))
    return out


def _attention_kwargs(v, m, info, seed, layer, trial, dtype):
    """favor.attention's keywords for variant dict v (resolved as `info`) in layer `layer`: W from
    (seed + layer, trial), so every layer draws its own W and a trial's layers differ. The
    projection is the resolved one, the config's default where v gives none (favor.attention's
    own default differs), so the attention draws the W its rows are named by."""
    kw = {k: v[k] for k in v if k not in ("name", "m", "dtype")}
    if kw.get("features") == "exact":   # favor's exact attention (a check of the swap itself)
        del kw["features"]
        kw["exact"] = True
    if isinstance(kw.get("weights"), str) and ":" not in os.path.basename(kw["weights"]):
        kw["weights"] = kw["weights"] + f":layer{layer}"
    kw.update(seed=seed + layer, trial=trial, dtype=v.get("dtype", dtype))
    if info["projection"]:
        kw["projection"] = info["projection"]
    if info["uses_m"]:
        kw["m"] = m
    return kw


class _Swap:
    """Sets attention_fn on the chosen modules for a block of code, and restores the old ones."""

    def __init__(self, modules, fns):
        self.modules, self.fns = modules, fns

    def __enter__(self):
        self.old = [m.attention_fn for m in self.modules]
        for m, f in zip(self.modules, self.fns):
            m.attention_fn = f

    def __exit__(self, *exc):
        for m, f in zip(self.modules, self.old):
            m.attention_fn = f


def _uniform(q, k, v, scale, causal):
    """Uniform attention: each query row's output is the mean of its visible rows of v."""
    import torch
    if not causal:
        return v.mean(dim=-2, keepdim=True).expand(*v.shape[:-2], q.shape[-2], v.shape[-1])
    n = torch.arange(1, v.shape[-2] + 1, dtype=v.dtype)[:, None]
    return v.cumsum(dim=-2) / n


def _bits(model, w):
    """Bits per predicted token of each window of w ((B, L + 1) ids): next-token cross-entropy /
    ln 2, the window's first L tokens in, its last L predicted."""
    import torch.nn.functional as F
    logits = model(w[:, :-1])
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(), w[:, 1:].reshape(-1),
                         reduction="none").view(len(w), -1)
    return (ce.sum(dim=1) / (ce.shape[1] * math.log(2))).numpy(), None


def _recall(model, batch):
    """Each example's recall as (hits, queries): favor.models.recall_counts of batch = (tokens, labels)."""
    import favor.models
    hits, queries = favor.models.recall_counts(model, *batch)
    return hits.double().numpy(), queries.double().numpy()


class _Metric:
    """The metric asked for (swap_in's `metric`) and the windows it reads: `value` its column
    (`delta_<value>` the other), `direction`, `what` its name in messages, `tensors` the windows
    (first axis: the window; `single`: given as one tensor), `n` their count, `info` run.json's
    record. evaluate(model, batch) gives per window of the batch
    a numerator and a denominator (None: 1): a window's value num / den, a set's pooled
    sum(num) / sum(den) (recall over all query positions; bits and a user's value: the mean)."""

    def __init__(self, metric, windows):
        import torch
        if metric is None or metric == "bits_per_byte":
            self.value, self.direction, self.evaluate, self.what = "bits_per_byte", "lower", _bits, "loss"
            w = torch.as_tensor(np.asarray(windows)).long()
            if w.dim() != 2 or w.shape[1] < 2 or w.shape[0] < 1:
                raise _error(f"windows: (N, L + 1) token ids with N >= 1 and L >= 1, got shape {tuple(w.shape)}")
            self.tensors, self.single = (w,), True
        elif metric == "recall":
            self.value, self.direction, self.evaluate, self.what = "recall", "higher", _recall, "recall"
            self.tensors, self.single = self._recall_windows(windows), False
        elif isinstance(metric, (tuple, list)) and len(metric) == 3:
            name, fn, direction = metric
            if not isinstance(name, str) or not name:
                raise _error(f"metric[0]: the metric's name, a non-empty string, got {name!r}")
            if not callable(fn):
                raise _error(f"metric[1]: a function fn(model, batch) -> one value per window, got "
                             f"{type(fn).__name__}")
            if direction not in ("lower", "higher"):
                raise _error(f"metric[2]: \"lower\" or \"higher\" (which is better), got {direction!r}")
            self.value = "task_loss" if direction == "lower" else "task_score"
            self.direction, self.what = direction, name
            self.evaluate = lambda model, batch: (self._values(fn(model, batch)), None)
            self.single = not isinstance(windows, (tuple, list))
            self.tensors = tuple(x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
                                 for x in ((windows,) if self.single else windows))
            if not self.tensors or any(t.dim() < 1 for t in self.tensors) or \
                    len({t.shape[0] for t in self.tensors}) != 1 or self.tensors[0].shape[0] < 1:
                raise _error("windows: a tensor or a tuple of tensors with the same first dimension N >= 1 (the "
                             f"windows), got shapes {[tuple(t.shape) for t in self.tensors]}")
        else:
            raise _error(f"metric: \"bits_per_byte\" (None), \"recall\" or (name, fn, \"lower\" | \"higher\"), "
                         f"got {metric!r}")
        self.n = self.tensors[0].shape[0]
        self.info = {"name": self.value, "direction": self.direction}
        if self.value in ("task_loss", "task_score"):   # a user's function: its name
            self.info["function"] = self.what

    @staticmethod
    def _recall_windows(windows):
        """(tokens, labels) as int64 tensors, each example with a query position."""
        import torch
        ok = isinstance(windows, (tuple, list)) and len(windows) == 2
        t = [torch.as_tensor(np.asarray(x)) for x in windows] if ok else []
        if not ok or any(x.is_floating_point() or x.is_complex() or x.dtype == torch.bool for x in t) or \
                t[0].dim() != 2 or t[0].shape != t[1].shape or min(t[0].shape) < 1:
            got = f"shapes {[tuple(x.shape) for x in t]}" if ok else type(windows).__name__
            raise _error("windows: with metric \"recall\", a pair (tokens, labels) of (N, L) int arrays, N, L >= 1 "
                         f"(as favor.models.mqar_batch returns them), got {got}")
        tokens, labels = (x.long() for x in t)
        empty = np.flatnonzero(((labels != -100).sum(dim=1) == 0).numpy())
        if len(empty):
            raise _error(f"windows: example {empty[0]} has no query position (all its labels are -100)")
        return tokens, labels

    def _values(self, r):
        """A user function's values as float64 numbers."""
        import torch
        try:
            return r.detach().cpu().double().numpy() if isinstance(r, torch.Tensor) else np.asarray(r, dtype=np.float64)
        except (TypeError, ValueError):
            raise _error(f"metric {self.what!r}: the function returned {type(r).__name__}, not numbers") from None

    def batch(self, b0, b1):
        """Windows b0 .. b1 - 1 as evaluate takes them (the user's: a tensor, or a tuple of them)."""
        part = tuple(t[b0:b1] for t in self.tensors)
        return part[0] if self.single else part

    def sha256(self):
        """The windows' sha256 (each tensor's little-endian bytes in turn; int64 ids for bits)."""
        h = hashlib.sha256()
        for t in self.tensors:
            a = t.detach().cpu().numpy()
            h.update(a.astype(a.dtype.newbyteorder("<")).tobytes())
        return h.hexdigest()


def _evaluate(model, metric, batch, check=None):
    """metric's value per window and pooled over all windows, `batch` windows a model call.
    check(b0) is called before each batch (b0 its first window) so that a swapped layer can say
    which window failed."""
    import torch
    n = metric.n
    num, den = np.empty(n), np.ones(n)
    with torch.no_grad():
        for b0 in range(0, n, batch):
            if check:
                check(b0)
            a, b = metric.evaluate(model, metric.batch(b0, b0 + batch))
            size = min(batch, n - b0)
            if np.shape(a) != (size,):
                raise _error(f"metric {metric.what!r}: the function returned shape {np.shape(a)} for a batch of "
                             f"{size} windows (one value per window)")
            bad = np.flatnonzero(~np.isfinite(a))
            if len(bad):
                raise _error(f"the model's {metric.what} is not finite in window {b0 + bad[0]}")
            num[b0:b0 + size] = a
            if b is not None:
                den[b0:b0 + size] = b
    return num / den, float(num.sum() / den.sum())


def _state_bytes(info, L, d, dv, causal):
    """A head's state in one layer with the variant resolved as `info`, in bytes of float32 (4 a
    number; the recurrent state Based and Zoology plot): exact attention keeps L keys and values,
    L (d + dv); each exact key of a window or the sinks d + dv (the keys num_features counts:
    w + s causal, 2w - 1 + s not, section 2.8; the top-k oracle chooses among all L keys, so it
    keeps L); a map's F remainder columns their sums of phi(k) v^T and phi(k), F (dv + 1)."""
    r = json.loads(info["resolved"])
    if info["features"] == "exact":
        return 4 * L * (d + dv)
    w, s, topk = r.get("window", 0), r.get("sinks", 0), r.get("support") == "topk"
    keys = w + s if causal or topk or w == 0 else 2 * w - 1 + s
    F = info["num_features"] - keys   # num_features counts the exact keys too
    return 4 * ((L if topk else keys) * (d + dv) + F * (dv + 1))


def _probe(model, modules, metric):
    """Runs the metric on the first window, recording what each layer's attention_fn gets:
    {H, L, d, dv, causal} per layer; refuses a module that has the attribute but does not call it."""
    import torch
    seen = {}

    def recorder(i):
        def fn(q, k, v, scale, causal):
            seen[i] = {"H": q.shape[1], "L": q.shape[-2], "d": q.shape[-1], "dv": v.shape[-1], "causal": bool(causal)}
            return _uniform(q, k, v, scale, causal)
        return fn

    with _Swap(modules, [recorder(i) for i in range(len(modules))]), torch.no_grad():
        metric.evaluate(model, metric.batch(0, 1))
    for i, m in enumerate(modules):
        if i not in seen:
            raise _error(f"layer {i} ({type(m).__name__}) has attention_fn but its forward did not call it")
    return seen


def _csv(columns, rows):
    """A table's CSV text, as favor writes it (cells already formatted)."""
    return ",".join(columns) + "\n" + "".join(",".join(r) + "\n" for r in rows)


def _stats(x):
    """summary.csv's statistics of one metric over a cell's values (design.md section 6)."""
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    std = float(np.std(x, ddof=1)) if n > 1 else math.nan
    return [float(np.mean(x)), std, std / math.sqrt(n) if n > 1 else math.nan, float(np.median(x)),
            float(np.quantile(x, 0.1)), float(np.quantile(x, 0.9))]


def _output_dir(out):
    """out's resolved path, if swap_in may replace it: missing, an empty folder or a swap-in
    result set (only RESULT_FILES, run.json of kind swap_in); else favor.Error, as favor run
    refuses such an --out (result_dir.cpp). Not a link, the root, a mount point, or the working
    directory or one holding it (a folder renamed away under the process)."""
    given = os.fspath(out)
    if given == "":
        raise _error("out: empty path")
    if os.path.islink(given):
        raise _error(f"out '{given}': is a link; choose the folder itself")
    path = os.path.realpath(given)
    if os.path.dirname(path) == path:
        raise _error(f"out '{given}': cannot be an output directory (it has no parent to swap it in)")
    cwd = os.getcwd()
    if cwd == path or cwd.startswith(path + os.sep):
        raise _error(f"out '{given}': is the working directory or holds it; swap_in replaces its output directory "
                     "whole, so use a directory inside it")
    if not os.path.lexists(path):
        return path
    if not os.path.isdir(path):
        raise _error(f"out '{given}': exists and is not a directory")
    if os.path.ismount(path):
        raise _error(f"out '{given}': is a mount point; swap_in replaces its output directory whole, so use a "
                     "directory inside it")
    names = sorted(os.listdir(path))
    for n in names:
        if os.path.isdir(os.path.join(path, n)) or not any(fnmatch.fnmatchcase(n, f) for f in RESULT_FILES):
            raise _error(f"out '{given}': not empty and not a swap-in result directory (it holds {n}, and swap_in "
                         "replaces it whole); choose another out")
    if names:
        try:
            with open(os.path.join(path, "run.json")) as f:
                kind = json.load(f).get("kind")
        except (OSError, ValueError, AttributeError):
            kind = None
        if kind != "swap_in":
            raise _error(f"out '{given}': not empty and not a swap-in result directory (no run.json of kind "
                         "swap_in); choose another out")
    return path


def _write_result_set(out, files):
    """Writes files ({name: text}) as the result set `out`, through a temporary folder beside it:
    the old set (if any) is removed only once the new one is complete, so a failure leaves the
    earlier results intact and no temporary folder."""
    path = _output_dir(out)   # again: the folder may have changed while the swap-in ran
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".swap_in-", dir=parent)
    try:
        for name, text in files.items():
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        if os.path.lexists(path):
            old = tempfile.mkdtemp(prefix=".old-", dir=parent)
            os.rename(path, os.path.join(old, "x"))
            os.rename(tmp, path)
            shutil.rmtree(old)
        else:
            os.rename(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def swap_in(model, windows, variants, layers="all", trials=1, seed=0, dtype="float32", out=None, batch=8,
            threads=None, progress=False, model_name=None, metric=None):
    """The model's metric on `windows` with the attention of `layers` computed by each variant.

    model: a torch module following the protocol (module doc); windows and metric: None or
    "bits_per_byte": (N, L + 1) token ids (int tensor or array), each window's first L tokens in
    and its last L predicted, bits per predicted token; "recall": an MQAR model's (tokens, labels)
    (N, L) as favor.models.mqar_batch returns them, the share of query positions (labels != -100)
    whose argmax logit is the label; (name, fn, "lower" | "higher"): windows a tensor or a tuple of
    tensors (first axis: the window), fn(model, batch) -> one value per window of batch (the
    windows' slice, sliced alike), "lower" or "higher" the better. variants:
    a config variant dict or a list of them ({"features": "positive", "m": [64, 256],
    "projection": "orthogonal", "window": 64, ...}: a run's variant keys plus "m" (an integer or a
    list) and "dtype"; a fitted map's "weights" without ":LAYER" takes layer l's from
    ":layer<l>"); layers: "all", a layer index, a list of indices, or a list of such sets (each
    its own cell, e.g. ["all", 0, 1]); trials: W draws per variant and m (layer l of trial t
    uses favor.projection(projection, m, d, seed + l, t); a map without a projection draws
    nothing, so its trials are computed once and copied); dtype: favor's compute dtype unless the
    variant sets one; batch: windows per model call; threads: favor's and torch's (a positive
    integer, None: as they are).

    Returns a dict: "errors", "summary", "windows" (tables; DataFrames when pandas imports;
    columns <metric> and delta_<metric>: bits_per_byte, recall, task_loss or task_score; a
    variant's state per head in state_bytes), "info" (what run.json holds: the metric, the exact
    and uniform values, windows' sha256, times), and writes them to `out` (errors.csv,
    summary.csv, windows.csv, run.json) when given: the
    directory is replaced whole once everything is computed; it must be missing, empty or a
    swap-in result set. Raises favor.Error for such an `out`, a layer that does not exist, a
    variant the heads cannot take, or a non-finite output (naming the variant, layer and
    window). The model's train / eval modes and torch's thread count are restored on return,
    also when it raises.
    """
    import torch
    if not isinstance(model, torch.nn.Module):
        raise _error(f"model: a torch.nn.Module following the protocol, got {type(model).__name__}")
    if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
        raise _error(f"threads: a positive integer or None, got {threads!r}")
    if out is not None:
        _output_dir(out)   # refused before any work
    modes = [(mod, mod.training) for mod in model.modules()]
    torch_threads = torch.get_num_threads()
    try:
        return _swap_in(model, windows, variants, layers, trials, seed, dtype, out, batch, threads, progress,
                        model_name, metric)
    finally:
        for mod, training in modes:
            mod.training = training
        torch.set_num_threads(torch_threads)


def _swap_in(model, windows, variants, layers, trials, seed, dtype, out, batch, threads, progress, model_name,
             metric):
    """swap_in's work (the caller restores the model's modes and torch's threads)."""
    import torch
    favor = _favor()
    t_start = time.time()
    if threads:
        torch.set_num_threads(threads)
    task = _Metric(metric, windows)
    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 1:
        raise _error(f"trials: a positive integer, got {trials!r}")
    N = task.n
    modules = attention_modules(model)
    if not modules:
        raise _error("the model has no attention layer with an attention_fn attribute (the protocol: favor.swap_in's doc)")
    sets = _layer_sets(layers, len(modules))
    model.eval()
    shapes = _probe(model, modules, task)
    ds = {s["d"] for s in shapes.values()}
    if len(ds) != 1:
        raise _error(f"the layers' heads have different dimensions {sorted(ds)}: one d per result set")
    d = ds.pop()
    rest = {(s["L"], s["dv"], s["causal"]) for s in shapes.values()}
    if len(rest) != 1:
        raise _error(f"the layers' heads differ in (L, dv, causal) {sorted(rest)}: one of each per result set")
    L, dv, causal = rest.pop()
    resolved = _variants(variants, d, causal)
    def fns(spec, m, info, trial, idx, state):
        name = info["name"]

        def make(layer):
            kw = _attention_kwargs(spec, m, info, seed, layer, trial, dtype)

            def fn(q, k, v, scale, causal):
                qq = q if scale == d ** -0.5 else q * (scale * math.sqrt(d))   # favor's logits are q k^T / sqrt(d)
                with warnings.catch_warnings(record=True) as said:
                    warnings.simplefilter("always")
                    try:
                        o = favor.attention(qq.detach(), k.detach(), v.detach(), causal=causal, threads=threads,
                                            layout="BHLD", **kw)
                    except favor.Error as e:
                        raise _error(f"{name} (m = {m}), layer {layer}: {e}") from None
                why = ""
                for w in said:   # short windows (L < d) are no layout mistake here; a non-finite output is raised
                    text = str(w.message)
                    if w.category is RuntimeWarning and "not finite" in text:
                        why = text[text.find("likely cause"):] if "likely cause" in text else ""
                    elif "fewer than d" not in text:
                        warnings.warn(text, w.category, stacklevel=2)
                o = o.to(q.dtype)
                if not torch.isfinite(o).all():
                    bad = (~torch.isfinite(o)).flatten(1).any(dim=1).nonzero()[0, 0].item()
                    raise _error(f"{name} (m = {m}), trial {trial}: layer {layer}'s attention output is not finite "
                                 f"in window {state['b0'] + bad} ({int((~torch.isfinite(o)).sum())} entries)"
                                 + (f"; {why}" if why else ""))
                return o
            return fn
        return [make(i) for i in idx]

    def run_with(make_fns, idx):
        """The metric (per window, pooled) with make_fns(state) swapped into layers idx;
        state["b0"] is the batch's first window (for the non-finite message)."""
        state = {"b0": 0}
        with _Swap([modules[i] for i in idx], make_fns(state)):
            return _evaluate(model, task, batch, lambda b0: state.update(b0=b0))

    t0 = time.time()
    exact, exact_mean = _evaluate(model, task, batch)
    exact_s = time.time() - t0
    uniform = {}
    for label, idx in sets:
        uniform[label] = run_with(lambda st: [_uniform] * len(idx), idx)
    err_rows, sum_rows, win_rows = [], [], []
    cell_seconds = []
    for label, idx in sets:
        for spec, m, info in resolved:
            # the key cells variant .. layers (scale blank: the model's)
            keys = [info["name"], info["features"], info["projection"], str(L), str(d), str(m),
                    str(info["num_features"]), str(_state_bytes(info, L, d, dv, causal)), "", label]
            values = []
            # A map without a projection draws nothing: its trials are identical, computed once
            # and copied (as a run copies them; favor.attention's output does not depend on trial).
            drawn = info["projection"] != ""
            for t in range(trials):
                t1 = time.time()
                if drawn or t == 0:
                    per_window, b = run_with(lambda st: fns(spec, m, info, t, idx, st), idx)
                    cell_seconds.append(time.time() - t1)
                delta = b - exact_mean
                values.append((b, delta))
                err_rows.append(keys + [str(t), str(seed), _number(b), _number(delta)])
                for w in range(N):
                    win_rows.append([info["name"], str(m), label, str(t), str(w), _number(per_window[w]),
                                     _number(per_window[w] - exact[w])])
                if progress:
                    shown = f"{b:.4f} bits/byte" if task.value == "bits_per_byte" else f"{task.value} {b:.4f}"
                    print(f"[swap_in] layers {label}: {info['name']} m={m} trial {t}: {shown} "
                          f"({delta:+.4f}), {time.time() - t1:.1f} s", file=sys.stderr, flush=True)
            u = uniform[label][1]
            row = keys + [str(trials)]
            for j in range(2):
                row += [_number(x) for x in _stats([val[j] for val in values])]
            row += [_number(u), _number(u - exact_mean)]
            sum_rows.append(row)
    metrics = [task.value, "delta_" + task.value]
    sum_cols = KEYS[:KEYS.index("layers") + 1] + ["trials"] + [f"{mt}_{s}" for mt in metrics for s in STATS] + \
        [f"baseline_{mt}" for mt in metrics]
    win_cols = ["variant", "m", "layers", "trial", "window"] + metrics
    win_rows = [["exact", "", "", "", str(w), _number(exact[w]), "0"] for w in range(N)] + \
        [["uniform", "", label, "", str(w), _number(uniform[label][0][w]), _number(uniform[label][0][w] - exact[w])]
         for label, _ in sets for w in range(N)] + win_rows
    info = {
        "kind": "swap_in", "favor": favor.__version__, "model": model_name or type(model).__name__,
        "metric": task.info, "windows": {"N": N, "L": L, "sha256": task.sha256()},
        "layers": {label: idx for label, idx in sets}, "attention_layers": len(modules), "d": d, "dv": dv,
        "heads": {str(i): shapes[i]["H"] for i in shapes}, "trials": trials, "seed": seed, "dtype": dtype,
        "variants": [dict(spec, m=m, name=i["name"], resolved=json.loads(i["resolved"])) for spec, m, i in resolved],
        f"exact_{task.value}": exact_mean, f"uniform_{task.value}": {k: v[1] for k, v in uniform.items()},
        # per head of one layer, float32 (state_bytes of the rows; uniform: its running sums of v and the count)
        "state_bytes": {"exact": _state_bytes({"features": "exact", "resolved": "{}"}, L, d, dv, causal),
                        "uniform": 4 * (dv + 1)},
        "seconds": {"total": time.time() - t_start, "exact": exact_s,
                    "per_setting_median": float(np.median(cell_seconds)) if cell_seconds else None},
        "threads": torch.get_num_threads(), "torch": torch.__version__,
    }
    texts = {"errors": _csv(KEYS + metrics, err_rows), "summary": _csv(sum_cols, sum_rows),
             "windows": _csv(win_cols, win_rows)}
    if out is not None:
        files = {name + ".csv": text for name, text in texts.items()}
        files["run.json"] = json.dumps(info, indent=2) + "\n"
        _write_result_set(out, files)
    tables = {name: favor._table(text.encode()) for name, text in texts.items()}
    tables["info"] = info
    return tables
