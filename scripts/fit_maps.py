#!/usr/bin/env python3
"""Fit hedgehog or t2r feature maps to the heads of a capture (attention transfer).

For every head of the chosen layers of a capture (scripts/capture_qkv.py's manifest.json and
layer folders; data/ is one), fits the weights of a feature map so that linear attention's rows
match the exact softmax rows of that head, and writes them where favor reads them:

  OUT.npz   per layer <layer>.q_A, <layer>.k_A (heads, d, w) and <layer>.q_b, <layer>.k_b
            (heads, w), float32; the initial weights as init.<layer>.* (the untrained map)
  OUT.json  the manifest: kind, width, the loss, the optimiser, and per layer the capture it
            was fitted on (q's sha256: favor marks a run on that file fitted_on_eval_input),
            the loss curve and final train loss per head, and the held-out loss per head
            when --eval names another capture.

The maps (docs/estimators.md, "Fitted maps"), on the scaled rows x = q / d^(1/4) as favor
applies every map, with their own A, b for queries and keys:
  hedgehog  phi(x) = [softmax(x A + b), softmax(-(x A + b))], each half over its w entries
            (Zhang et al. 2024, arXiv 2402.04347), F = 2w
  t2r       phi(x) = relu(x A + b) (Kasai et al. 2021, arXiv 2103.13076), F = w

The loss is Hedgehog's attention transfer: the cross-entropy of the exact causal rows P_i
against the estimate's rows, mean over the L rows, -sum_j P_ij log Ahat_ij, with
Ahat_ij = K_ij / sum_j' K_ij' and K_ij = phi(x_i) . phi(y_j) (+ --mse-weight times the output
MSE |P V - Ahat V|^2 / (L d_v): LoLCATs' recipe uses 1000). With --window w the loss is the
hybrid's (docs/design.md 2.8): K_ij = exp(x_i . y_j) for the w newest keys i - w < j <= i, one
normaliser over both parts, so the map learns the remainder (LoLCATs' attention transfer).
Causal rows (the captures of a causal LM); --noncausal for bidirectional heads.

Full batch (the capture's L rows are one batch), float32, Adam, seeded; deterministic for a
thread count (torch.use_deterministic_algorithms). Initial weights: A = I when w = d (hedgehog then
starts as softmax_dim), else N(0, 1/d) entries from the seed; b = 0.

Usage: scripts/fit_maps.py CAPTURE_DIR --kind hedgehog|t2r --out fit/NAME.npz
           [--layers 0,1] [--width W] [--window W] [--steps N] [--lr X] [--mse-weight X]
           [--seed S] [--threads N] [--eval OTHER_CAPTURE_DIR] [--noncausal]
"""
import argparse
import json
import os
import sys
import tempfile
import time

np = None   # numpy, imported after the arguments are checked (-h and usage errors need none)


def fail(msg):
    print("fit_maps: " + msg, file=sys.stderr)
    sys.exit(2)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="fit_maps.py", usage="%(prog)s CAPTURE_DIR --kind hedgehog|t2r --out FILE.npz [options]"
                                "   (-h lists them)", description=__doc__.split("\n")[0])
    p.add_argument("capture", help="a capture folder (manifest.json + layer folders), e.g. data")
    p.add_argument("--kind", required=True, choices=["hedgehog", "t2r"])
    p.add_argument("--out", required=True, help="the weights file to write (.npz; OUT.json beside it)")
    p.add_argument("--layers", default="", help="comma-separated layer indices (default: all)")
    p.add_argument("--width", type=int, default=0, help="columns w of A (default d: F = 2d for hedgehog)")
    p.add_argument("--window", type=int, default=0, help="exact window of the hybrid in place while fitting")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--mse-weight", type=float, default=0.0, help="weight of the output MSE term (LoLCATs: 1000)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--eval", default="", help="another capture of the same model: held-out loss per head")
    p.add_argument("--noncausal", action="store_true", help="bidirectional rows (default causal)")
    a = p.parse_args(argv)
    if not a.out.endswith(".npz"):
        fail("--out: give a .npz path (got '%s')" % a.out)
    for name in ("steps", "threads"):
        if getattr(a, name) < 1:
            fail("--%s: must be >= 1" % name)
    for name in ("width", "window"):
        if getattr(a, name) < 0:
            fail("--%s: must be >= 0" % name)
    if not a.lr > 0 or not a.mse_weight >= 0:
        fail("--lr must be > 0 and --mse-weight >= 0")
    if a.layers:
        parts = a.layers.split(",")
        if not all(t.isdigit() for t in parts) or len(set(map(int, parts))) != len(parts):
            fail("--layers: give distinct layer indices separated by commas, e.g. 0,1 (got '%s')" % a.layers)
        a.layers = [int(t) for t in parts]
    return a


def read_capture(folder):
    """The manifest's layers: {index: (entry, q_file, q, k, v)} with q, k, v (H, L, d) float32."""
    path = os.path.join(folder, "manifest.json")
    try:
        with open(path) as f:
            manifest = json.load(f)
    except (OSError, ValueError) as e:
        fail("%s: cannot read the capture's manifest (%s)" % (path, e))
    entries = manifest.get("layers") if isinstance(manifest, dict) else None
    if not isinstance(entries, list):
        fail("%s: no \"layers\" list (a capture of scripts/capture_qkv.py)" % path)
    layers = {}
    for n, entry in enumerate(entries):
        try:
            index, files = entry["index"], {key: os.path.join(folder, entry["files"][key]["path"]) for key in "qkv"}
        except (KeyError, TypeError):
            index = files = None
        if type(index) is not int or index < 0:
            fail("%s: layers[%d]: needs an integer index >= 0 and files.q/k/v.path" % (path, n))
        arrays = []
        for file in files.values():
            try:
                x = np.load(file)
            except (OSError, ValueError) as e:
                fail("%s: cannot read (%s)" % (file, e))
            if not isinstance(x, np.ndarray) or x.ndim != 4 or x.shape[0] != 1:
                fail("%s: expected a .npy array (1, H, L, d), got %s" % (file, getattr(x, "shape", "an .npz")))
            if not np.all(np.isfinite(x)):
                fail("%s: not every value is finite" % file)
            arrays.append(x[0].astype(np.float32))
        if entry.get("q_multiplied_by", 1.0) != 1.0 or abs(entry.get("scale", 0) * np.sqrt(arrays[0].shape[-1]) - 1) > 1e-12:
            fail("%s: layer %s is not scaled 1/sqrt(d) with q as the model made it" % (path, index))
        layers[index] = (entry, files["q"], *arrays)
    if not layers:
        fail("%s: no layers" % path)
    return manifest, layers


def features(torch, kind, x, A, b):
    z = x @ A + b
    if kind == "hedgehog":
        return torch.cat([torch.softmax(z, -1), torch.softmax(-z, -1)], -1)
    return torch.relu(z)


def transfer_loss(torch, kind, x, y, v, P, out, params, window, causal, mse_weight):
    """Attention-transfer loss of one head (docstring)."""
    qA, qb, kA, kb = params
    L = x.shape[0]
    kern = features(torch, kind, x, qA, qb) @ features(torch, kind, y, kA, kb).T
    logk = torch.log(kern.clamp_min(1e-30))
    i = torch.arange(L).unsqueeze(1)
    j = torch.arange(y.shape[0]).unsqueeze(0)
    if window > 0:
        near = (i - j < window) & (j <= i) if causal else (i - j).abs() < window
        logk = torch.where(near, x @ y.T, logk)
    if causal:
        logk = logk.masked_fill(j > i, float("-inf"))
    logA = torch.log_softmax(logk, -1)
    loss = -(P * torch.where(P > 0, logA, torch.zeros_like(logA))).sum(-1).mean()
    if mse_weight > 0:
        loss = loss + mse_weight * ((torch.exp(logA) @ v - out) ** 2).mean()
    return loss


def exact_rows(torch, x, y, causal):
    s = x @ y.T
    if causal:
        L = x.shape[0]
        s = s.masked_fill(torch.arange(y.shape[0]).unsqueeze(0) > torch.arange(L).unsqueeze(1), float("-inf"))
    return torch.softmax(s, -1)


def init_weights(torch, d, width, generator):
    if width == d:
        A = torch.eye(d)
    else:
        A = torch.randn(d, width, generator=generator) / np.sqrt(d)
    return A, torch.zeros(width)


def head_loss(torch, a, q, k, v):
    """The transfer loss of one head as a function of its weights [qA, qb, kA, kb]."""
    s = q.shape[1] ** -0.25
    x, y, vv = torch.from_numpy(q * s), torch.from_numpy(k * s), torch.from_numpy(v)
    causal = not a.noncausal
    P = exact_rows(torch, x, y, causal)
    out = P @ vv
    return lambda params: transfer_loss(torch, a.kind, x, y, vv, P, out, params, a.window, causal, a.mse_weight)


def fit_head(torch, a, q, k, v, width, seed):
    """Adam on one head; returns (initial, fitted) weights [qA, qb, kA, kb] and the loss curve."""
    loss_of = head_loss(torch, a, q, k, v)
    g = torch.Generator().manual_seed(seed)
    init = [t for side in range(2) for t in init_weights(torch, q.shape[1], width, g)]
    params = [t.clone().requires_grad_(True) for t in init]
    opt = torch.optim.Adam(params, lr=a.lr)
    curve = []
    for step in range(a.steps):
        opt.zero_grad()
        loss = loss_of(params)
        if not torch.isfinite(loss):
            fail("the loss is not finite at step %d (try a smaller --lr)" % step)
        loss.backward()
        opt.step()
        if step % 10 == 0 or step == a.steps - 1:
            curve.append([step, float(loss)])
    with torch.no_grad():
        final = loss_of(params)
    return init, [t.detach() for t in params], curve, float(final)


def held_out_loss(torch, a, weights, q, k, v):
    with torch.no_grad():
        return float(head_loss(torch, a, q, k, v)(weights))


def main(argv):
    a = parse_args(argv)
    global np
    import numpy
    import torch

    np = numpy
    from capture_qkv import _sha256   # scripts/ is on sys.path: this script's folder

    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    manifest, layers = read_capture(a.capture)
    chosen = a.layers or sorted(layers)
    for i in chosen:
        if i not in layers:
            fail("--layers: the capture has layers %s, not %d" % (sorted(layers), i))
    evaluation = read_capture(a.eval)[1] if a.eval else None
    arrays, layer_meta = {}, {}
    d = layers[chosen[0]][2].shape[-1]
    width = a.width or d
    for i in chosen:
        entry, q_file, Q, K, V = layers[i]
        if Q.shape[-1] != d:
            fail("layer %d has d = %d, layer %d d = %d: one width per file" % (i, Q.shape[-1], chosen[0], d))
        name = "layer%d" % i
        start = time.process_time()
        per = [fit_head(torch, a, Q[h], K[h], V[h], width, a.seed * 1000 + i * 100 + h) for h in range(Q.shape[0])]
        seconds = time.process_time() - start
        for prefix, which in (("init." + name, 0), (name, 1)):
            for t, key in enumerate(("q_A", "q_b", "k_A", "k_b")):
                arrays["%s.%s" % (prefix, key)] = np.stack([r[which][t].numpy() for r in per]).astype(np.float32)
        meta = {"heads": Q.shape[0], "module": entry.get("name", ""),
                "fitted_on": {"capture": a.capture, "q": q_file,
                              "q_sha256": _sha256(q_file), "input": manifest.get("input", {})},
                "final_train_loss": [r[3] for r in per], "curve": [r[2] for r in per],
                "cpu_seconds": round(seconds, 2)}
        if evaluation is not None:
            if i not in evaluation:
                fail("--eval: %s has no layer %d" % (a.eval, i))
            _, _, Qe, Ke, Ve = evaluation[i]
            fitted = lambda h: [torch.from_numpy(arrays["%s.%s" % (name, key)][h])
                                for key in ("q_A", "q_b", "k_A", "k_b")]
            meta["held_out"] = {"capture": a.eval,
                                "loss": [held_out_loss(torch, a, fitted(h), Qe[h], Ke[h], Ve[h]) for h in range(Qe.shape[0])]}
        layer_meta[name] = meta
        layer_meta["init." + name] = {"heads": Q.shape[0], "fitted_on": None}
        print("fit_maps: %s %s: final train loss %s (%.1f CPU s)" %
              (a.kind, name, ", ".join("%.4f" % r[3] for r in per), seconds))
    out_json = {"kind": a.kind, "d": d, "width": width, "features": 2 * width if a.kind == "hedgehog" else width,
                "loss": "attention-transfer cross-entropy" + (" + %g * output MSE" % a.mse_weight if a.mse_weight else ""),
                "window": a.window, "causal": not a.noncausal, "optimizer": "Adam", "lr": a.lr, "steps": a.steps,
                "seed": a.seed, "threads": a.threads, "torch": torch.__version__, "layers": layer_meta}
    folder = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(folder, exist_ok=True)
    # Fresh temporaries (O_EXCL: never a file or link already there), renamed over the outputs
    umask = os.umask(0)
    os.umask(umask)
    temps = []
    try:
        for write in (lambda f: np.savez(f, **arrays),
                      lambda f: f.write((json.dumps(out_json, indent=1) + "\n").encode())):
            fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(a.out) + ".", suffix=".tmp")
            temps.append(tmp)
            os.fchmod(fd, 0o666 & ~umask)   # mkstemp's 0600 -> what open() would have made
            with os.fdopen(fd, "wb") as f:
                write(f)
        os.replace(temps[0], a.out)
        os.replace(temps[1], a.out[:-4] + ".json")
    finally:
        for tmp in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
