"""favor.study: which estimator for a model's heads, from a capture, in one call (issue 41
item 1; docs/design.md section 9.3).

    favor.study("CAPTURE_DIR", out="DIR", budgets=(64, 256), grad=False, causal="auto")
    python3 -m favor study CAPTURE_DIR [--budgets 64,256] [--grad] [--causal auto|yes|no] [--out DIR]

CAPTURE_DIR is what scripts/capture_qkv.py writes (manifest.json, layer<i>/{q,k,v}.npy and,
captured with a loss, layer<i>/g.npy: the model's dLoss/dOut). For every captured layer and
feature budget F the study runs one favor config (DIR/layer<i>/F<F>/: every head of the
layer, the estimator families below at exactly F columns, `trials` trials), compares every
variant with uniform attention (the mean of the visible rows of V: the trivial baseline) by
`favor compare --match num_features --against uniform`, and writes DIR/report.md (per head
and budget: the best variant, its error as a ratio to uniform's and the verdict; FAVOR+'s
ratio; the gradients' cosines with grad=True), DIR/report.png (every variant's ratio per
head) and DIR/study.csv (the rows the report is made of). The error is output_rel_error, or
output_rel_error_read (the rows G reads) when every studied layer has its g.npy (ranking_metric).
"""
import contextlib
import ctypes
import errno
import fcntl
import hashlib
import json
import math
import numbers
import os
import re
import secrets
import shutil
import signal
import threading
import warnings

import numpy as np

from . import Error, compare as _compare, run as _run, validate as _validate

__all__ = ["study", "default_variants", "trials_for"]

METRIC = "output_rel_error"
LOSS_METRICS = ["output_rel_error_read", "loss_delta_abs"]   # they need the capture's G (docs/design.md 3)
GRAD_METRICS = ["grad_cosine", "grad_q_rel_error", "grad_k_rel_error", "grad_v_rel_error"]
ALPHA = 0.05
MAX_BUDGET = 1 << 20   # feature columns; a sane bound, far above any study's


def ranking_metric(layers):
    """The metric the study ranks and reports by: output_rel_error_read, the output error over
    the rows the loss reads (G_i != 0, G = dLoss/dOut), when every studied layer has the
    capture's g.npy, else output_rel_error. Of the loss-aware errors it is the one whose ranking
    of variants agreed best with the task metric in results/recall (Spearman per layer, above
    output_rel_error's; loss_delta_abs, the first-order change of the loss, below it)."""
    return LOSS_METRICS[0] if all(lay["files"].get("g") for lay in layers) else METRIC


def _support(keys, causal):
    """{"window": w[, "sinks": s]} holding exactly `keys` exact keys an interior row: w = keys
    causal; non-causal a window of w holds 2w - 1 (design.md 2.8), so w = ceil(keys / 2) and one
    sink where keys is even."""
    if causal:
        return {"window": keys}
    w = (keys + 1) // 2
    return {"window": w, "sinks": 1} if 2 * w - 1 < keys else {"window": w}


def default_variants(F, d, causal=True):
    """The estimator families at F columns (section 2, 2.8 of docs/design.md): random features
    alone (FAVOR+ positive, FAVOR++ oprf, FAVOR# sderf, random Fourier trig; orthogonal W, at
    m = F or F/2), an exact window of F keys alone, FAVOR+ beside a window of F/2 keys, and
    the parameter-free relu(x) map (untrained T2R, d columns) beside a window of F - d keys (a
    window's keys counted as it holds them: 2w - 1 non-causal, _support)."""
    v = [{"features": f, "projection": "orthogonal"} for f in ("positive", "oprf", "sderf", "trig")]
    v.append({"features": "none", **_support(F, causal)})
    if F >= 4:
        v.append({"features": "positive", "projection": "orthogonal", **_support(F // 2, causal)})
    if F > d:
        v.append({"features": "t2r", **_support(F - d, causal)})
    return v


def _random(variant):
    """True when the variant draws W (its trials differ): a projection map."""
    return variant.get("features") not in ("none", "elu", "dpfp", "taylor2", "hedgehog", "t2r", "liger",
                                            "softmax_dim", "nystrom")


def trials_for(tests, alpha=ALPHA, margin=4):
    """Trials that let a verdict be reached with room: favor compare's one-sample sign-flip test
    has p_min = 2 / 2^n, Holm over `tests` rows needs tests * p_min < alpha (validate's power
    rule, docs/design.md section 4); n is the smallest with tests * 2 / 2^n <= alpha / margin
    (a difference whose trials are not all on one side still passes), at least 8."""
    n = 8
    while tests * 2.0 / 2.0 ** n > alpha / margin:
        n += 1
    return n


def _is_int(x):
    """An integer (a Python or numpy one), never a bool (JSON's true is not 1 here)."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _manifest(capture):
    """The capture's manifest.json with every layer's keys checked (_check_layer)."""
    path = os.path.join(capture, "manifest.json")
    try:
        with open(path) as f:
            man = json.load(f)
    except FileNotFoundError:
        raise Error(f"{capture}: no manifest.json (a capture of scripts/capture_qkv.py)") from None
    except (OSError, ValueError) as e:
        raise Error(f"{path}: {e}") from None
    if not isinstance(man, dict) or not str(man.get("format", "")).startswith("favor capture") \
            or not isinstance(man.get("layers"), list) or not man["layers"]:
        raise Error(f"{path}: not a favor capture manifest (format 'favor capture 1' with layers)")
    seen = {}
    for i, lay in enumerate(man["layers"]):
        _check_layer(lay, f"{path}: layers[{i}]")
        if lay["index"] in seen:
            raise Error(f"{path}: layers[{i}].index: {lay['index']} again (layers[{seen[lay['index']]}] has it)")
        seen[lay["index"]] = i
    return man


def _check_layer(lay, where):
    """The keys the study reads: index (a non-negative integer: layer<index>/ is made from
    it), B, H, L, Lk, d, d_v (positive integers), causal (a JSON boolean), files.{q,k,v}
    (and g, with upstream_gradient.loss) each with a path and an optional sha256."""
    if not isinstance(lay, dict):
        raise Error(f"{where}: not an object")
    if not _is_int(lay.get("index")) or lay["index"] < 0:
        raise Error(f"{where}.index: a non-negative integer, got {json.dumps(lay.get('index'))}")
    for key in ("B", "H", "L", "Lk", "d", "d_v"):
        if not _is_int(lay.get(key)) or lay[key] < 1:
            raise Error(f"{where}.{key}: a positive integer, got {json.dumps(lay.get(key))}")
    if not isinstance(lay.get("causal"), bool):
        raise Error(f"{where}.causal: true or false, got {json.dumps(lay.get('causal'))}")
    files = lay.get("files")
    if not isinstance(files, dict) or not all(w in files for w in "qkv"):
        raise Error(f"{where}.files: an object with q, k and v")
    for w in [w for w in "qkvg" if w in files]:
        f = files[w]
        if not isinstance(f, dict) or not isinstance(f.get("path"), str) or not f["path"] \
                or not isinstance(f.get("sha256", ""), str):
            raise Error(f"{where}.files.{w}: an object with a path (and its sha256)")
    if "g" in files and not isinstance((lay.get("upstream_gradient") or {}).get("loss"), str):
        raise Error(f"{where}.upstream_gradient.loss: the loss g.npy is the gradient of (a string)")


def _check_files(capture, layers, with_g):
    """Before any run: each file the study reads is a .npy whose shape (its header only) is
    the manifest's (q: B, H, L, d; k: B, H, Lk, d; v: B, H, Lk, d_v; g: B, H, L, d_v) and
    whose sha256 is the one the manifest records (a file replaced after the capture)."""
    for lay in layers:
        dims = {"q": ("L", "d"), "k": ("Lk", "d"), "v": ("Lk", "d_v"), "g": ("L", "d_v")}
        for w in [w for w in ("qkvg" if with_g else "qkv") if w in lay["files"]]:
            entry = lay["files"][w]
            path = os.path.join(capture, entry["path"])
            names = ("B", "H") + dims[w]
            want = tuple(lay[n] for n in names)
            try:
                shape = np.load(path, mmap_mode="r").shape   # the header; no pickle (allow_pickle=False)
            except (OSError, ValueError, EOFError, AttributeError) as e:
                raise Error(f"{path}: not a readable .npy array ({getattr(e, 'strerror', None) or e})") from None
            if shape != want:
                raise Error(f"{path}: shape {shape}, but the manifest's layer {lay['index']} has "
                            f"({', '.join(names)}) = {want}")
            if entry.get("sha256"):
                h = hashlib.sha256()
                with open(path, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        h.update(chunk)
                if h.hexdigest() != entry["sha256"]:
                    raise Error(f"{path}: sha256 {h.hexdigest()}, not the manifest's {entry['sha256']} "
                                "(the file changed after the capture)")


def _budgets(budgets):
    """The sorted distinct budgets of a list or a comma-separated text: integers 1 to MAX_BUDGET."""
    items = budgets.split(",") if isinstance(budgets, str) else [budgets] if _is_int(budgets) else budgets
    try:
        got = {int(b) if _is_int(b) or isinstance(b, str) and re.fullmatch(r"\s*[0-9]+\s*", b) else 0 for b in items}
    except TypeError:   # not a list
        got = set()
    if not got or not all(1 <= b <= MAX_BUDGET for b in got):
        raise Error(f"budgets: positive integers up to {MAX_BUDGET}, comma-separated, got {budgets!r}")
    return sorted(got)


def _config_variants(path):
    """The "variants" list of a favor config file, a relative `weights` taken from the file's
    folder (section 5's rule for a config's paths)."""
    try:
        with open(path) as f:
            v = json.load(f).get("variants")
    except (OSError, ValueError, AttributeError) as e:
        raise Error(f"variants: {path}: {getattr(e, 'strerror', None) or e}") from None
    if not isinstance(v, list) or not v:
        raise Error(f"variants: {path}: no \"variants\" list")
    folder = os.path.dirname(path)   # relative stays relative: from the working directory
    return [{**x, "weights": os.path.join(folder, x["weights"])}
            if isinstance(x, dict) and isinstance(x.get("weights"), str) else x for x in v]


def _causal_of(layer, causal, path):
    if causal == "auto":
        return layer["causal"]
    if causal in (True, "yes", "true"):
        if layer["L"] != layer["Lk"]:
            raise Error(f"{path}: layer {layer['index']}: causal needs as many keys as queries "
                        f"({layer['L']} and {layer['Lk']})")
        return True
    if causal in (False, "no", "false"):
        return False
    raise Error(f"causal: auto, yes or no, got {causal!r}")


def entropy_ratios(q, k, causal, block=512):
    """Per head (B, H flattened): the mean row entropy of softmax(q k^T / sqrt(d)) (causal
    rows over their visible keys) divided by the mean entropy of a uniform row, ln(visible
    keys): 0 for one-hot rows, 1 for uniform attention. float64, rows in blocks."""
    q = np.asarray(q, dtype=np.float64).reshape(-1, *q.shape[-2:])
    k = np.asarray(k, dtype=np.float64).reshape(-1, *k.shape[-2:])
    L, d = q.shape[-2:]
    Lk = k.shape[-2]
    visible = np.arange(1, L + 1) if causal else np.full(L, Lk)
    uniform = np.log(visible).mean()
    out = []
    for h in range(q.shape[0]):
        total = 0.0
        for r0 in range(0, L, block):
            s = q[h, r0:r0 + block] @ k[h].T / math.sqrt(d)
            if causal:
                s = np.where(np.arange(Lk)[None, :] <= np.arange(r0, r0 + len(s))[:, None], s, -np.inf)
            s -= s.max(axis=1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=1, keepdims=True)
            total += float(-(p * np.log(np.where(p > 0, p, 1.0))).sum())
        out.append(total / L / uniform if uniform > 0 else float("nan"))
    return out


def _config(capture, layer, F, variants, trials, causal, grad, metric, seed, out):
    """A run's config. Its paths are the capture's as given (relative ones from the working
    directory, as favor.run resolves a dict's), so run.json names no path of this machine.
    The capture's g.npy is inputs.grad for the gradient metrics (grad) and the loss-aware ones
    (metric, ranking_metric's)."""
    files = {w: os.path.join(capture, layer["files"][w]["path"]) for w in "qkv"}
    inputs = {"source": "npy", **files, "per_head": True}
    loss_aware = metric != METRIC
    metrics = [METRIC, "attention_tv"] + (GRAD_METRICS if grad else []) + (LOSS_METRICS if loss_aware else [])
    g = layer["files"].get("g")
    if g and (grad or loss_aware):
        inputs["grad"] = os.path.join(capture, g["path"])
    return {"name": f"study_layer{layer['index']}_F{F}",
            "description": f"favor study of {capture}: layer {layer['index']} ({layer.get('name', '')}), "
                           f"every head, the estimator families at F = {F} columns",
            "seed": seed, "inputs": inputs, "causal": causal, "variants": variants,
            "num_features": [F], "trials": trials, "metrics": metrics, "output_dir": out}


def study(capture, out=None, budgets=(64, 256), grad=False, causal="auto", trials=None, variants=None,
          seed=0, threads=None, layers=None, quiet=True):
    """Runs the study of a capture (module docstring) and returns the path of its report.md.

    budgets: feature columns F (each variant at exactly F: m = F for a map alone, the window's
    keys counted for hybrids). grad: also the gradient metrics, with the capture's upstream
    gradient g.npy where it has one (else favor's random G: said in the report). causal: "auto"
    (each layer as the model used it, from the manifest), "yes" or "no". trials: None picks
    trials_for(heads x random variants per layer and budget). variants: a list of favor variant
    dicts, or a function (F, d) -> list, instead of default_variants. layers: indices (default
    all). out: default out/study_<capture folder name>; a new or empty folder, or an earlier
    study's (it has study.json), which is replaced whole only when the study succeeded. A bad
    capture or argument raises favor.Error (one line) before anything is run or written;
    Ctrl-C (or SIGTERM) raises KeyboardInterrupt, `out` as it was.
    """
    capture = os.fspath(capture)
    man = _manifest(capture)
    budgets = _budgets(budgets)
    if trials is not None and (not _is_int(trials) or trials < 1):
        raise Error(f"trials: a positive integer, got {trials!r}")
    if isinstance(variants, (str, os.PathLike)):
        variants = _config_variants(os.fspath(variants))
    chosen = man["layers"] if layers is None else [lay for lay in man["layers"] if lay["index"] in set(layers)]
    if not chosen:
        raise Error(f"layers: none of {layers!r} in {capture}/manifest.json")
    metric = ranking_metric(chosen)
    _check_files(capture, chosen, grad or metric != METRIC)
    given = out or os.path.join("out", "study_" + os.path.basename(os.path.abspath(capture)))
    out = os.path.abspath(given)   # the checks, lock and swap; the runs' paths follow given
    grad_source = None
    if grad:
        has = [bool(lay["files"].get("g")) for lay in chosen]
        grad_source = (chosen[0]["upstream_gradient"]["loss"] if all(has) else
                       "favor's random G (docs/design.md section 7): the capture has no g.npy" if not any(has) else
                       "mixed: the capture's g.npy where present, else favor's random G")
    plan = []
    for lay in chosen:
        c = _causal_of(lay, causal, capture)
        heads = lay["B"] * lay["H"]
        for F in budgets:
            vs = (variants(F, lay["d"]) if callable(variants) else
                  list(variants) if variants is not None else default_variants(F, lay["d"], c))
            if not isinstance(vs, list) or not vs or not all(isinstance(v, dict) for v in vs):
                raise Error(f"variants: a non-empty list of favor variant objects, got {vs!r:.80}")
            n_random = sum(_random(v) for v in vs)
            n = trials if trials is not None else trials_for(max(1, heads * n_random))
            plan.append((lay, F, c, vs, n, heads * n_random))
    inputs = [os.path.join(capture, lay["files"][w]["path"]) for lay in chosen for w in "qkvg" if w in lay["files"]]
    inputs += [v["weights"].rsplit(":", 1)[0] for _, _, _, vs, _, _ in plan for v in vs
               if isinstance(v.get("weights"), str)]
    for path in inputs:   # an input inside out would go with the folder the study replaces
        if _inside(path, out):
            raise Error(f"{path}: inside out {out}, which the study replaces whole; choose another --out")
    created, swapped = _make_parents(out), False
    try:
        with _sigterm_raises(), _locked(out):
            _check_out(out)
            tmp = _new_sibling(out, "tmp")
            try:
                named = tmp if os.path.isabs(given) else os.path.relpath(tmp)   # in run.json as out was given
                _study_into(named, out, capture, man, chosen, plan, budgets, causal, grad, grad_source, metric, trials,
                            seed, threads)
                with _signals_deferred():   # a Ctrl-C meanwhile is raised after the swap
                    _swap(tmp, out)
                    created, swapped = [], True
            finally:
                with _signals_deferred():
                    shutil.rmtree(tmp, ignore_errors=True)
    except KeyboardInterrupt as e:
        if swapped:   # the study is complete in out
            raise
        sig = "SIGTERM" if "SIGTERM" in str(e) else "SIGINT"
        raise KeyboardInterrupt(f"stopped by {sig}: the study was interrupted; {out} is as it was (nothing of "
                                "this study kept); run it again") from None
    except OSError as e:   # disk full, a folder that cannot be written
        raise Error(f"out {out}: cannot write {e.filename or 'the study'} ({e.strerror or e}); nothing of this "
                    "study kept, the folder as it was") from None
    finally:
        for d in created:   # the parents made for an out that never came
            with contextlib.suppress(OSError):
                os.rmdir(d)
    return os.path.join(out, "report.md")


def _study_into(tmp, out, capture, man, chosen, plan, budgets, causal, grad, grad_source, metric, trials, seed,
                threads):
    """The study written into the fresh folder tmp: every config validated first (an odd
    budget trig refuses, a bad file), then run and compared, then the report."""
    configs = []
    for lay, F, c, vs, n, _ in plan:
        d = os.path.join(tmp, f"layer{lay['index']}", f"F{F}")
        cfg = _config(capture, lay, F, vs, n, c, grad, metric, seed, d)
        try:
            with warnings.catch_warnings():   # its warnings are the run's, which gives them
                warnings.simplefilter("ignore")
                _validate(cfg, threads=threads)
        except Error as e:
            raise Error(f"layer {lay['index']}, F = {F}: {e}") from None
        configs.append(cfg)
    rows, settings = [], []
    for cfg, (lay, F, c, vs, n, tests) in zip(configs, plan):
        d = cfg["output_dir"]
        _run(cfg, out=d, threads=threads)
        metrics = list(dict.fromkeys([METRIC, metric] + (["grad_cosine"] if grad else [])))
        _compare(d, metric=metrics, match="num_features", against="uniform", write=True)
        rows.append(_rows(d, lay, F, grad, metric))
        settings.append({"layer": lay["index"], "F": F, "causal": c, "trials": n, "tests": tests,
                         "variants": [v.get("name") or _name(v) for v in vs]})
    import pandas as pd
    table = pd.concat(rows, ignore_index=True)
    table.attrs["metric"] = metric   # what its error, uniform_error, ratio and verdict are of
    ent = {}
    for lay in chosen:
        q, k = (np.load(os.path.join(capture, lay["files"][w]["path"]), mmap_mode="r") for w in "qk")
        c = _causal_of(lay, causal, capture)
        for h, r in enumerate(entropy_ratios(q, k, c)):
            ent[(lay["index"], h)] = r
    table["entropy_ratio"] = [ent[(int(a), int(b))] for a, b in zip(table["layer"], table["head"])]
    # The capture as seen from the study's folder (no path of this machine in study.json).
    info = {"capture": os.path.relpath(os.path.abspath(capture), out), "budgets": budgets, "grad": bool(grad), "grad_source": grad_source,
            "trials_given": trials is not None,
            "alpha": ALPHA, "runs": settings, "seed": seed}
    _publish(tmp, table, info, man, capture)


def _inside(path, folder):
    """Whether path (resolved) is folder or lies inside it."""
    p, f = os.path.realpath(path), os.path.realpath(folder)
    return p == f or p.startswith(f.rstrip(os.sep) + os.sep)


def _make_parents(out):
    """Creates out's missing parent folders; returns them, deepest first, for removal if the
    study fails."""
    created, p = [], os.path.dirname(out)
    while not os.path.exists(p):
        created.append(p)
        p = os.path.dirname(p)
    try:
        os.makedirs(os.path.dirname(out), exist_ok=True)
    except OSError as e:
        raise Error(f"out {out}: cannot create {e.filename} ({e.strerror})") from None
    return created


def _check_out(out):
    """out must be missing, an empty folder or an earlier study's (study.json): files of the
    user's are never replaced."""
    if os.path.islink(out) or (os.path.exists(out) and not os.path.isdir(out)):
        raise Error(f"out {out}: not a folder (a file or a link); choose another --out")
    if os.path.isdir(out) and os.listdir(out) and not os.path.isfile(os.path.join(out, "study.json")):
        raise Error(f"out {out}: not empty and not a favor study (no study.json); choose a new or empty folder")


def _new_sibling(out, kind):
    """A fresh folder beside out, .<name>.favor-<kind>-<pid>-<nonce>: the names favor's own
    result sets use (lib/src/experiments/result_dir.cpp), removed under the lock if left."""
    path = os.path.join(os.path.dirname(out), f".{os.path.basename(out)}.favor-{kind}-{os.getpid()}-"
                                              f"{secrets.token_hex(4)}")
    os.mkdir(path)
    return path


@contextlib.contextmanager
def _locked(out):
    """The lock of out, favor's own (.<name>.favor-lock beside it, flock, the holder's pid
    inside; unlinked at release, so a lock taken on an unlinked file is not one), and the
    leftover temporaries of a killed study or run removed under it."""
    parent, name = os.path.dirname(out), os.path.basename(out)
    path = os.path.join(parent, f".{name}.favor-lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = os.path.samestat(os.fstat(fd), os.stat(path))
        except (BlockingIOError, FileNotFoundError):
            held = False
        if not held:
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise Error(f"out {out}: another favor process (pid {pid}) is writing this folder; wait for it "
                        "or choose another --out")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            for entry in os.listdir(parent):
                if entry.startswith((f".{name}.favor-tmp-", f".{name}.favor-old-")):
                    shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)   # while holding it
    finally:
        os.close(fd)


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt("stopped by SIGTERM")


@contextlib.contextmanager
def _sigterm_raises():
    """SIGTERM raises KeyboardInterrupt as Ctrl-C does, so the temporaries are removed on the
    way out (in the main thread only, where Python's handlers run; favor.run installs its own
    for a run's duration and raises the same)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL if before is None else before)


@contextlib.contextmanager
def _signals_deferred():
    """SIGINT and SIGTERM held back for the block (delivered, and raised, after it)."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _exchange(a, b):
    """Swaps the names a and b at once (Linux renameat2 RENAME_EXCHANGE); False where the
    system or file system lacks it."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), b)


def _swap(tmp, out):
    """The complete study tmp in place of out, the earlier one (if any) removed: one atomic
    exchange, or two renames where there is none (the earlier one moved back if the second
    fails)."""
    if not os.path.lexists(out):
        os.rename(tmp, out)
        return
    if _exchange(tmp, out):
        previous = tmp
    else:
        previous = _new_sibling(out, "old")
        os.rename(out, previous)   # onto the empty folder
        try:
            os.rename(tmp, out)
        except OSError:
            os.rename(previous, out)
            raise
    shutil.rmtree(previous, ignore_errors=True)


def _name(v):
    """favor's name of a variant (features-projection, +w<window>, +s<sinks>), as summary.csv has it."""
    n = v["features"] + (f"-{v['projection']}" if v.get("projection") else "")
    return n + (f"+w{v['window']}" if v.get("window") else "") + (f"+s{v['sinks']}" if v.get("sinks") else "")


def _rows(d, lay, F, grad, metric):
    """One row per (head, variant) of a run: mean error (of metric), uniform's, ratio, verdict
    against uniform; ranked by output_rel_error_read, also output_rel_error, loss_delta_abs and their ratios."""
    import pandas as pd
    s = pd.read_csv(os.path.join(d, "summary.csv"))
    c = pd.read_csv(os.path.join(d, f"comparisons_{metric}.csv"), dtype={"verdict": str}, keep_default_na=False)
    c = c[c["b"] == "uniform"]
    verdict = {(r["a"], int(r["head"])): r["verdict"] for _, r in c.iterrows()}
    r = pd.DataFrame({"layer": lay["index"], "head": s["head"].astype(int), "F": F, "variant": s["variant"],
                      "features": s["features"], "num_features": s["num_features"], "trials": s["trials"],
                      "error": s[f"{metric}_mean"], "uniform_error": s[f"baseline_{metric}"]})
    r = r[r["num_features"] == F].reset_index(drop=True)   # maps with their own F (elu: d) only at that budget
    s = s[s["num_features"] == F].reset_index(drop=True)
    r["ratio"] = r["error"] / r["uniform_error"]
    r["verdict"] = [verdict.get((v, h), "") for v, h in zip(r["variant"], r["head"])]
    for m in [METRIC, LOSS_METRICS[1]] if metric != METRIC else []:
        r[m] = s[f"{m}_mean"]
        r[f"{m}_ratio"] = s[f"{m}_mean"] / s[f"baseline_{m}"]
    if grad:
        gc = pd.read_csv(os.path.join(d, "comparisons_grad_cosine.csv"), dtype={"verdict": str},
                         keep_default_na=False)
        gc = gc[gc["b"] == "uniform"]
        gv = {(x["a"], int(x["head"])): x["verdict"] for _, x in gc.iterrows()}
        r["grad_cosine"] = s["grad_cosine_mean"]
        r["uniform_grad_cosine"] = s["baseline_grad_cosine"]
        r["grad_verdict"] = [gv.get((v, h), "") for v, h in zip(r["variant"], r["head"])]
    return r


def _fmt(x):
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.3g}"


VERDICT_WORDS = {"a better": "below uniform", "a worse": "above uniform", "n.s.": "n.s.", "underpowered": "underpowered",
                 "a=b": "equal", "": "-"}


def report_table(table, budgets):
    """The per-head Markdown table: per budget the best variant (lowest mean error), its ratio
    to uniform's error and its verdict, and FAVOR+'s (positive-orthogonal) ratio; ranked by
    output_rel_error_read, also the best one's output_rel_error ratio."""
    beside = table.attrs["metric"] != METRIC   # the best one's output_rel_error ratio too
    head = ["layer.head", "entropy ratio", "uniform's error"]
    for F in budgets:
        head += [f"best at F = {F}", "ratio", "verdict", "FAVOR+ ratio"] + ([f"its {METRIC} ratio"] if beside else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (layer, h), g in table.groupby(["layer", "head"], sort=True):
        row = [f"{layer}.{h}", f"{g['entropy_ratio'].iloc[0]:.3f}", f"{g['uniform_error'].iloc[0]:.4g}"]
        for F in budgets:
            gf = g[g["F"] == F]
            fin = gf[np.isfinite(gf["error"])]
            if fin.empty:
                row += ["-"] * (5 if beside else 4)
                continue
            best = fin.loc[fin["error"].idxmin()]
            plus = gf[gf["variant"] == "positive-orthogonal"]["ratio"]
            row += [best["variant"], _fmt(float(best["ratio"])), VERDICT_WORDS.get(best["verdict"], best["verdict"]),
                    _fmt(float(plus.iloc[0])) if len(plus) else "-"]
            row += [_fmt(float(best[f"{METRIC}_ratio"]))] if beside else []
        lines.append("| " + " | ".join(row) + " |")
    return lines


def grad_table(table, budgets):
    """Per head and budget: the variant whose gradient has the highest mean cosine with the
    exact gradient, that cosine, uniform attention's cosine, and the verdict against uniform."""
    head = ["layer.head"]
    for F in budgets:
        head += [f"best gradient at F = {F}", "cosine", "uniform's", "verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (layer, h), g in table.groupby(["layer", "head"], sort=True):
        row = [f"{layer}.{h}"]
        for F in budgets:
            gf = g[(g["F"] == F) & np.isfinite(g["grad_cosine"])]
            if gf.empty:
                row += ["-"] * 4
                continue
            best = gf.loc[gf["grad_cosine"].idxmax()]
            row += [best["variant"], _fmt(float(best["grad_cosine"])), _fmt(float(best["uniform_grad_cosine"])),
                    {"a better": "above uniform", "a worse": "below uniform"}.get(best["grad_verdict"],
                                                                                  best["grad_verdict"] or "-")]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _summary_lines(table, budgets):
    """Per budget: on how many heads the best variant, and a random-feature map alone (a map
    drawing W, no window or sinks), are below uniform by the verdict; the best one's ratios."""
    lines = []
    n = table.groupby(["layer", "head"]).ngroups
    alone = table["features"].map(lambda f: _random({"features": f})) & ~table["variant"].str.contains(r"\+[ws]\d")
    for F in budgets:
        t = table[(table["F"] == F) & np.isfinite(table["error"])]
        if t.empty:
            continue
        best = t.loc[t.groupby(["layer", "head"])["error"].idxmin()]
        rf = t[alone[t.index]]
        line = (f"- F = {F}: the best variant's error is below uniform's (verdict) on "
                f"{int((best['verdict'] == 'a better').sum())} of {n} heads (ratios {best['ratio'].min():.3g} to "
                f"{best['ratio'].max():.3g})")
        if len(rf):
            rbest = rf.loc[rf.groupby(["layer", "head"])["error"].idxmin()]
            line += (f"; the best random-feature map alone: ratios {rbest['ratio'].min():.3g} to "
                     f"{rbest['ratio'].max():.3g} (median {rbest['ratio'].median():.3g}), below uniform on "
                     f"{rf[rf['verdict'] == 'a better'].groupby(['layer', 'head']).ngroups} of {n} heads")
        lines.append(line + ".")
    return lines


YMAX = 3.0   # ratios above are named in the panel, not drawn (trig's can reach 10^3 on trained heads)


def _figure(table, budgets, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    heads = sorted({(int(a), int(b)) for a, b in zip(table["layer"], table["head"])})
    x = {hd: i for i, hd in enumerate(heads)}
    family = table["variant"].str.replace(r"\+w\d+", "+window", regex=True)   # the same map at every F
    families = list(dict.fromkeys(family))
    hybrid = any("+window" in f for f in families)
    fin = table["ratio"][np.isfinite(table["ratio"])]
    ymin = max(min(float(fin.min()) if len(fin) else 0.1, 0.5) * 0.8, 1e-4)
    fig, axes = plt.subplots(len(budgets), 1, figsize=(max(6.0, 0.42 * len(heads) + 2.5), 3.3 * len(budgets) + 0.6),
                             squeeze=False, sharey=True, sharex=True)
    axes = axes[:, 0]
    colors = plt.get_cmap("tab10" if len(families) <= 10 else "tab20").colors
    for ax, F in zip(axes, budgets):
        off = []
        for i, fam in enumerate(families):
            r = table[(table["F"] == F) & (family == fam)]
            if r.empty:
                continue
            name = r["variant"].iloc[0]
            bad = r[~np.isfinite(r["ratio"]) | (r["ratio"] > YMAX)]
            if len(bad):
                off.append(f"{name}: {len(bad)} head(s) " + (f"up to {bad['ratio'].max():.3g}"
                                                            if np.isfinite(bad["ratio"]).all() else "non-finite"))
            r = r[np.isfinite(r["ratio"]) & (r["ratio"] <= YMAX)]
            dx = (i - (len(families) - 1) / 2) * 0.5 / max(1, len(families))   # side by side within a head
            ax.plot([x[(int(a), int(b))] + dx for a, b in zip(r["layer"], r["head"])], r["ratio"],
                    "os^vDP*Xph<>"[i % 12], color=colors[i % len(colors)], ms=5, ls="none", label=fam)
        ax.axhline(1.0, color="0.4", ls=(0, (5, 3)), lw=1.2, label="uniform attention (mean of V) = 1")
        ax.set_yscale("log")
        ax.set_ylim(ymin, YMAX)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        if YMAX / ymin < 10:   # within a decade the minor ticks carry the labels
            ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
            ax.tick_params(axis="y", which="minor", labelsize=7)
        else:
            ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xticks(range(len(heads)))
        ax.set_xticklabels([f"{a}.{b}" for a, b in heads], rotation=90 if len(heads) > 24 else 0, fontsize=8)
        ax.set_title(f"F = {F} columns" + (" (a window of w keys: w of them)" if hybrid else "")
                     + ("".join(f"\nabove the panel: {o}" for o in off)), fontsize=9)
        ax.grid(alpha=0.3, which="both")
    axes[-1].set_xlabel("layer.head")
    for ax in axes:
        ax.set_ylabel(f"{table.attrs['metric']} / uniform's\n(below 1: better than the mean of V)", fontsize=8)
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8,
               title="+window: its window at each F" if hybrid else None, title_fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _publish(folder, table, info, man, capture):
    """report.md, report.png, study.csv and study.json written into folder (the study's
    temporary, swapped in whole by study)."""
    budgets = info["budgets"]
    lay0 = man["layers"][0]
    trials = sorted({r["trials"] for r in info["runs"]})
    tests = max(r["tests"] for r in info["runs"])
    names = list(dict.fromkeys(v for r in info["runs"] for v in r["variants"]))
    rel = os.path.relpath(capture)
    metric = table.attrs["metric"]
    why = ("" if metric == METRIC else
           f"Ranked by {metric}, not {METRIC}: the capture has the loss's upstream gradient G = dLoss/dOut, and "
           f"{metric} is the output error over the rows the loss reads (G_i != 0); the best variant's {METRIC} "
           f"ratio is beside it, study.csv has {LOSS_METRICS[1]} (|sum over rows of <G_i, out~_i - out_i>|, the "
           "first-order change of the loss) too. ")
    lines = [f"# favor study of {os.path.abspath(capture) if rel.startswith('..') else rel}", "",
             f"Every head of {len({r['layer'] for r in info['runs']})} layer(s) ({lay0.get('module', '')}: H = {lay0['H']}, "
             f"B = {lay0['B']}, L = {lay0['L']}, d = {lay0['d']}; "
             + ", ".join(f"layer {r['layer']} {'causal' if r['causal'] else 'not causal'}"
                         for r in info["runs"] if r["F"] == budgets[0]) + ")"
             + (f"; with B = {lay0['B']} inputs a head is numbered b x H + h (input b, head h)." if lay0["B"] > 1 else "."),
             f"Variants at exactly F columns (a window's keys count as columns): {', '.join(names)}. "
             f"{why}Metric: {metric}, mean over {'/'.join(map(str, trials))} trials, as a ratio to uniform attention's "
             "(the mean of the visible rows of V; below 1 is better than that trivial baseline). Verdict: "
             f"`favor compare --match num_features --against uniform` (one-sample sign-flip test of the trials, "
             f"Holm over each run's {tests} or fewer tested rows, alpha {ALPHA}; deterministic variants are exact "
             "differences). Trials: " + ("as given." if info["trials_given"] else
                                    "the smallest n with tests x 2/2^n <= alpha/4, at least 8 (favor.trials_for)."),
             "", "## Per head", ""]
    lines += _summary_lines(table, budgets) + [""] + report_table(table, budgets) + [""]
    if info["grad"]:
        lines += ["## Gradients", "",
                  f"Upstream gradient: {info['grad_source']}. grad_cosine: the cosine of the estimator's (dQ, dK, dV) "
                  "with exact attention's (higher is better; uniform attention's dQ = dK = 0).", ""]
        lines += grad_table(table, budgets) + [""]
    lines += ["Files: study.csv (every head x variant x budget row of these tables), study.json (the settings), "
              "layer<i>/F<F>/ (each run's result set and comparisons), report.png.", ""]
    kinds = {r["causal"] for r in info["runs"]}
    causal_words = "causal" if kinds == {True} else "not causal" if kinds == {False} else "causal and not"
    with open(os.path.join(folder, "report.md"), "w") as f:
        f.write("\n".join(lines))
    table.to_csv(os.path.join(folder, "study.csv"), index=False)
    with open(os.path.join(folder, "study.json"), "w") as f:
        json.dump(info, f, indent=2)
        f.write("\n")
    _figure(table, budgets, os.path.join(folder, "report.png"),
            f"favor study of {os.path.basename(info['capture'])} ({causal_words}): every head, "
            "each variant's error / uniform's")
