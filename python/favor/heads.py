"""favor.heads: a census of a capture's attention heads (issue 55 item 3): what each head looks at,
and the kind of approximation that can serve it.

    rows = favor.heads.census("CAPTURE_DIR")          # one dict per (layer, head)
    favor.heads.write("CAPTURE_DIR", out="DIR")        # DIR/heads.csv, heads.md, heads.png
    python3 -m favor heads CAPTURE_DIR [--out DIR] [--period P]

Per head, from its exact attention A = softmax(q k^T / sqrt(d)) (causal as captured), averaged over
the rows i and the batch:
  last_w       mean_i of the weight on the keys a window of w holds (causal: i - w < j <= i;
               non-causal: |i - j| < w), w = 16, 64, 256 (StreamingLLM / Based windows);
  sink         mean over the rows i >= 16 of the weight on the first 4 keys (StreamingLLM's sinks;
               rows past a 16-key window, so a sink is not counted as local);
  entropy      mean_i of H(A_i) in nats; entropy_ratio: over mean_i ln(visible keys of i);
  induction    with the tokens (below): mean over the rows with an earlier occurrence of their token
               of the weight on the key right after it (Olsson et al. 2022): with a period P (a span
               repeated after P tokens) the rows i >= P whose token equals the one P back, key
               i - P + 1; without, the most recent earlier occurrence;
  retrieval    with targets (the token being copied at row i: an MQAR label, the next token of a
               repeated span): the share of the rows with a target whose top-1 key j < i holds the
               target token (Wu et al. 2024's retrieval score, per row instead of per needle).
Tokens come from the `tokens` argument, CAPTURE/tokens.npy ((B, L) ints), or the manifest's `input`
(a text file, offset and L, its bytes checked against sha256_of_bytes); targets from `targets`,
CAPTURE/targets.npy ((B, L), -100 where none), or, with a period, the next token on the repeated
rows. The kind: retrieval if retrieval >= 0.5, else induction if induction >= 0.3, else sink if
sink >= 0.3, else local if last_64 >= 0.8, else global (none of these: a window will not serve it).
"""
import csv
import hashlib
import math
import os

import numpy as np

from . import Error

__all__ = ["census", "write", "attention_rows", "COLUMNS"]

WINDOWS = (16, 64, 256)
SINKS, SINK_FROM = 4, 16
COLUMNS = (["layer", "name", "head", "L", "causal"] + [f"last_{w}" for w in WINDOWS] +
           ["sink", "entropy", "entropy_ratio", "induction", "retrieval", "kind"])


def attention_rows(q, k, causal, block=256):
    """Yields (i0, A) for row blocks of the exact attention of one head: q (L, d), k (Lk, d) float64,
    A (rows, Lk) = softmax(q k^T / sqrt(d)), causal rows masked (j > i gets 0)."""
    L, d = q.shape
    for i0 in range(0, L, block):
        s = q[i0:i0 + block] @ k.T / math.sqrt(d)
        if causal:
            rows = np.arange(i0, i0 + s.shape[0])[:, None]
            s = np.where(np.arange(k.shape[0])[None, :] <= rows, s, -np.inf)
        s -= s.max(axis=1, keepdims=True)
        a = np.exp(s)
        yield i0, a / a.sum(axis=1, keepdims=True)


def _manifest(capture):
    """The manifest checked as favor.study checks it (one line naming the key), and its path."""
    from ._study import _manifest as checked
    return checked(capture), os.path.join(capture, "manifest.json")


def _load(capture, lay, key, path):
    f = lay.get("files", {}).get(key)
    rel = f.get("path") if isinstance(f, dict) else None
    if not isinstance(rel, str) or os.path.isabs(rel) or ".." in rel.split("/"):
        raise Error(f"{path}: layers[{lay.get('index')}].files.{key}.path: missing or not inside the capture")
    try:
        a = np.load(os.path.join(capture, rel), allow_pickle=False)
    except (OSError, ValueError) as e:
        raise Error(f"{os.path.join(capture, rel)}: {e}") from None
    if a.ndim != 4:
        raise Error(f"{os.path.join(capture, rel)}: expected (B, H, L, d), got shape {a.shape}")
    return a.astype(np.float64)


def _tokens(capture, man, path, tokens, B, L):
    """(B, L) int tokens or None."""
    if tokens is None and os.path.exists(os.path.join(capture, "tokens.npy")):
        tokens = np.load(os.path.join(capture, "tokens.npy"), allow_pickle=False)
    if tokens is None and isinstance(man.get("input"), dict) and "text" in man["input"]:
        inp = man["input"]
        text = inp["text"] if os.path.isabs(inp["text"]) else os.path.join(capture, inp["text"])
        try:
            with open(text, "rb") as f:
                f.seek(int(inp.get("offset", 0)))
                data = f.read(int(inp.get("L", L)))
        except OSError:
            return None   # the text is not on this machine: no token scores
        if inp.get("sha256_of_bytes") and hashlib.sha256(data).hexdigest() != inp["sha256_of_bytes"]:
            raise Error(f"{path}: input.text {inp['text']}: its bytes at offset {inp.get('offset', 0)} are not "
                        "those captured (sha256_of_bytes differs)")
        tokens = np.frombuffer(data, dtype=np.uint8)[None, :]
    if tokens is None:
        return None
    tokens = np.asarray(tokens)
    if tokens.ndim == 1:
        tokens = tokens[None, :]
    if tokens.shape[0] not in (1, B) or tokens.shape[1] < L:
        raise Error(f"{capture}: tokens of shape {tokens.shape} for a capture of B = {B}, L = {L}")
    return np.broadcast_to(tokens[:, :L], (B, L)).astype(np.int64)


def _targets(capture, targets, tokens, period, B, L):
    """(B, L) the token being copied at each row, -100 where none; or None."""
    if targets is None and os.path.exists(os.path.join(capture, "targets.npy")):
        targets = np.load(os.path.join(capture, "targets.npy"), allow_pickle=False)
    if targets is None and period and tokens is not None:
        targets = np.full((B, L), -100, dtype=np.int64)
        rows = np.arange(period, L - 1)
        same = tokens[:, rows] == tokens[:, rows - period]
        targets[:, rows] = np.where(same, tokens[:, rows + 1], -100)
    if targets is None:
        return None
    targets = np.asarray(targets, dtype=np.int64)
    if targets.shape != (B, L):
        raise Error(f"{capture}: targets of shape {targets.shape} for a capture of B = {B}, L = {L}")
    return targets


def _induction_keys(tok, period):
    """Per row i the key right after the earlier occurrence of tok[i], or -1 (see the module doc)."""
    L = len(tok)
    key = np.full(L, -1, dtype=np.int64)
    if period:
        i = np.arange(period, L)
        key[i] = np.where(tok[i] == tok[i - period], i - period + 1, -1)
        return key
    last = {}
    for i, t in enumerate(tok.tolist()):
        if t in last:
            key[i] = last[t] + 1
        last[t] = i
    return key


def _kind(r):
    if r["retrieval"] is not None and r["retrieval"] >= 0.5:
        return "retrieval"
    if r["induction"] is not None and r["induction"] >= 0.3:
        return "induction"
    if r["sink"] is not None and r["sink"] >= 0.3:
        return "sink"
    return "local" if r["last_64"] >= 0.8 else "global"


def _head(q, k, causal, tok, ind_key, target):
    """The scores of one (batch element, head): sums and counts, combined over the batch later."""
    L, Lk = q.shape[0], k.shape[0]
    acc = {f"last_{w}": 0.0 for w in WINDOWS}
    acc.update(sink=0.0, sink_n=0, entropy=0.0, uniform=0.0, ind=0.0, ind_n=0, ret=0.0, ret_n=0)
    j = np.arange(Lk)[None, :]
    for i0, A in attention_rows(q, k, causal):
        i = np.arange(i0, i0 + A.shape[0])[:, None]
        dist = i - j if causal else np.abs(i - j)
        for w in WINDOWS:
            acc[f"last_{w}"] += float(np.sum(np.where((dist >= 0) & (dist < w), A, 0.0)))
        far = i[:, 0] >= SINK_FROM
        acc["sink"] += float(A[far, :SINKS].sum())
        acc["sink_n"] += int(far.sum())
        with np.errstate(divide="ignore", invalid="ignore"):
            acc["entropy"] += float(-np.sum(np.where(A > 0, A * np.log(A), 0.0)))
        visible = np.minimum(i[:, 0] + 1, Lk) if causal else np.full(A.shape[0], Lk)
        acc["uniform"] += float(np.sum(np.log(np.maximum(visible, 1))))
        rows = np.arange(i0, i0 + A.shape[0])
        if ind_key is not None:
            has = ind_key[rows] >= 0
            acc["ind"] += float(A[has, ind_key[rows][has]].sum())
            acc["ind_n"] += int(has.sum())
        if target is not None:
            has = target[rows] >= 0
            if has.any():
                Ai = A[has].copy()
                Ai[np.arange(Ai.shape[0]), rows[has]] = -1.0   # the row's own key is not a retrieval
                top = Ai.argmax(axis=1)
                acc["ret"] += float(np.sum((tok[top] == target[rows][has]) & (top < rows[has])))
                acc["ret_n"] += int(has.sum())
    return acc


def census(capture, tokens=None, targets=None, period=None):
    """One dict per (layer, head) of the capture (COLUMNS), the scores of the module doc averaged over
    the batch; induction and retrieval None where the tokens (targets) are not known."""
    man, path = _manifest(capture)
    if period is None and isinstance(man.get("input"), dict):
        period = man["input"].get("repeat_period")
    if period is not None and (isinstance(period, bool) or not isinstance(period, int) or period < 1):
        raise Error(f"period: a positive integer, got {period!r}")
    out = []
    for n, lay in enumerate(man["layers"]):
        if not isinstance(lay, dict) or not isinstance(lay.get("causal"), bool):
            raise Error(f"{path}: layers[{n}].causal: must be true or false")
        q, k = _load(capture, lay, "q", path), _load(capture, lay, "k", path)
        B, H, L, _ = q.shape
        tok = _tokens(capture, man, path, tokens, B, L)
        tgt = _targets(capture, targets, tok, period, B, L) if tok is not None else None
        for h in range(H):
            accs = []
            for b in range(B):
                ind = _induction_keys(tok[b], period) if tok is not None else None
                accs.append(_head(q[b, h], k[b, h], lay["causal"], tok[b] if tok is not None else None, ind,
                                  tgt[b] if tgt is not None else None))
            tot = {key: sum(a[key] for a in accs) for key in accs[0]}
            rows = B * L
            r = {"layer": lay.get("index", n), "name": lay.get("name", ""), "head": h, "L": L, "causal": lay["causal"]}
            for w in WINDOWS:
                r[f"last_{w}"] = tot[f"last_{w}"] / rows
            r["sink"] = tot["sink"] / tot["sink_n"] if tot["sink_n"] else None
            r["entropy"] = tot["entropy"] / rows
            r["entropy_ratio"] = tot["entropy"] / tot["uniform"] if tot["uniform"] > 0 else None
            r["induction"] = tot["ind"] / tot["ind_n"] if tot["ind_n"] else None
            r["retrieval"] = tot["ret"] / tot["ret_n"] if tot["ret_n"] else None
            r["kind"] = _kind(r)
            out.append(r)
    return out


def _fmt(x):
    if x is None:
        return ""
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.3f}"
    return str(x)


def markdown(rows):
    """The census as a Markdown table (the capture READMEs' table)."""
    cols = [c for c in COLUMNS if c not in ("name", "L")]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_fmt(r[c]) for c in cols) + " |" for r in rows]
    kinds = {}
    for r in rows:
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    lines += ["", "Kinds: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) + f" of {len(rows)} heads."]
    return "\n".join(lines) + "\n"


def _figure(rows, path, title):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [f"{r['layer']}.{r['head']}\n{r['kind']}" for r in rows]
    series = [("last_16", "last 16 keys"), ("last_64", "last 64 keys"), ("sink", "first 4 keys (rows >= 16)"),
              ("induction", "induction"), ("retrieval", "retrieval")]
    x = np.arange(len(rows))
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(rows) + 2), 3.6))
    for n, (key, name) in enumerate(series):
        vals = [r[key] if r[key] is not None else np.nan for r in rows]
        ax.bar(x + (n - len(series) / 2 + 0.5) * width, vals, width, label=name)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_xlabel("layer.head and the kind it implies")
    ax.set_ylabel("weight / share")
    ax.set_ylim(0, 1.35)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, ncol=3, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _label(capture):
    """The capture as a reader knows it: its path from here if inside, else its last two names."""
    rel = os.path.relpath(capture)
    return rel if not rel.startswith("..") else os.path.join(*os.path.normpath(os.path.abspath(capture)).split(os.sep)[-2:])


def write(capture, out=None, tokens=None, targets=None, period=None):
    """census() into out (default: the capture folder): heads.csv, heads.md, heads.png. Returns the rows."""
    rows = census(capture, tokens=tokens, targets=targets, period=period)
    out = capture if out is None else out
    try:
        os.makedirs(out, exist_ok=True)
        tmp = os.path.join(out, ".heads.csv.tmp")
        with open(tmp, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(COLUMNS)
            for r in rows:
                w.writerow(["" if r[c] is None else repr(r[c]) if isinstance(r[c], float) else r[c] for c in COLUMNS])
        os.replace(tmp, os.path.join(out, "heads.csv"))
        with open(os.path.join(out, ".heads.md.tmp"), "w") as f:
            f.write(f"# Head census of {_label(capture)}\n\n"
                    "(favor.heads: python3 -m favor heads; definitions in its docstring)\n\n" + markdown(rows))
        os.replace(os.path.join(out, ".heads.md.tmp"), os.path.join(out, "heads.md"))
        _figure(rows, os.path.join(out, "heads.png"), f"head census: {_label(capture)}")
    except OSError as e:
        raise Error(f"{out}: cannot write the census ({e.strerror or e})") from None
    return rows
