#!/usr/bin/python3
"""Train the MQAR recall models of data/mqar/ (the one pinned recipe), measure their recall,
and capture their attention.

    nice -n 10 /usr/bin/python3 scripts/train_mqar.py [--cells NAME,...] [--out data/mqar]
        [--seed 0] [--threads 2] [--max-minutes M] [--bench STEPS]

Task and model: favor.models (python/favor/models.py; its docstring): MQAR as Zoology's
generator (random_non_queries=False), V = 256; 2 attention-only layers with a token shift
(a causal depthwise convolution of width 2) before the first, learned positions, pre-LayerNorm.
Cells (CELLS below): (L, pairs, d_model, heads); each folder is named L<L>_kv<pairs>_d<d>[_h<H>].

Recipe (every cell): torch.manual_seed(seed) for the initial weights; training batches (64;
16 at L = 512) drawn in step order from numpy Generator(seed) (an endless stream); AdamW (betas 0.9/0.98,
weight decay 0.1 on matrices), lr warm-up over 50 steps then cosine decay to 0 at the cell's
step cap, gradient norm clipped at 1; the loss is the cross entropy on the query positions.
Every 50 steps (100 at L = 512) the recall on a fixed held-out set (512 examples, seed + 1)
is measured; training stops when it reaches 0.995 or at the step cap (or after --max-minutes,
recorded as stopped_by_time_cap). Then the recall on a test set
(2000 examples, seed + 2) with its binomial standard error over the queries, the recall on
the check batch (mqar_batch(256, ..., seed + 2): what tests/python_module/test_mqar.py
recomputes), and a capture of the check batch's first B examples. torch.set_num_threads,
torch.use_deterministic_algorithms(True).

Each cell writes, when it finishes and only if its test recall is >= 0.99, OUT/<cell>/:
model.pt (float32 state_dict), model.json (config, recipe, numbers), README.md, and capture/
(scripts/capture_qkv.py's capture(), causal=True, loss_fn = the query-position cross
entropy, so g.npy = dLoss/dOut; float32). OUT/README.md lists every cell run so far
(results.json keeps them, shipped or not): with seed 0, L512_kv64_d64 did not take off within
its step cap (about an hour here) and is not shipped; the default --cells still runs it.

--attention FEATURES:PROJECTION:M trains the same recipe with favor.torch's approximation in
every layer (W of layer l from (seed + l, trial = the step): redrawn every step) and measures
the recalls with it (the last step's W); it writes OUT/<cell>_<features>_m<M>/ (model.pt,
model.json with an "attention" record, README.md; no capture: the capture's self-check rebuilds
softmax attention) whatever the recall. The study that compares it with the post-hoc swap:
scripts/recall_study.py.
"""
import argparse
import hashlib
import json
import math
import os
import resource
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# favor.models' file alone: the recipe needs torch and numpy, not the built extension.
sys.path.insert(0, os.path.join(ROOT, "python", "favor"))
sys.path.insert(0, HERE)
import models  # noqa: E402
from capture_qkv import capture  # noqa: E402

VOCAB, WARMUP, N_HELD, N_TEST, N_CHECK = 256, 50, 512, 2000, 256
STOP_AT, SHIP_AT = 0.995, 0.99
# name: (L, pairs, d_model, heads, batch, lr, step cap, eval every, capture batch). L = 512 at
# batch 16: a step of 64 took ~4 s there (2 shared cores), and 16 x 64 queries still beat the
# 64 x 4 of L = 64.
CELLS = {
    "L64_kv4_d64": (64, 4, 64, 1, 64, 2e-3, 3000, 50, 8),
    "L64_kv4_d128_h2": (64, 4, 128, 2, 64, 2e-3, 3000, 50, 8),
    "L256_kv16_d64": (256, 16, 64, 1, 64, 2e-3, 3000, 50, 8),
    "L512_kv64_d64": (512, 64, 64, 1, 16, 2e-3, 4000, 100, 2),
}


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def lr_at(step, total, peak):
    if step < WARMUP:
        return peak * (step + 1) / WARMUP
    return peak * 0.5 * (1 + math.cos(math.pi * (step - WARMUP) / max(1, total - WARMUP)))


def parse_attention(text):
    """--attention FEATURES:PROJECTION:M -> favor.torch's keywords, or None."""
    if text is None:
        return None
    parts = text.split(":")
    if len(parts) != 3 or not parts[2].isdigit() or int(parts[2]) < 1:
        print(f"train_mqar.py: --attention: FEATURES:PROJECTION:M (e.g. positive:orthogonal:64), got {text!r}",
              file=sys.stderr)
        sys.exit(2)
    return {"features": parts[0], "projection": parts[1], "m": int(parts[2])}


def trained_with(model, attention, seed, step):
    """Sets every layer's attention_fn to favor.torch's approximation `attention` (forward and
    analytic backward), W of layer l drawn from (seed + l, trial = step[0]): redrawn each step."""
    sys.path.insert(0, os.path.join(ROOT, "build", "python"))   # favor.torch is the built module's
    import favor.torch as ft
    for layer, attn in enumerate(model.attns):
        def fn(q, k, v, scale, causal, layer=layer):
            assert abs(scale - q.shape[-1] ** -0.5) < 1e-12   # favor's logits are q k^T / sqrt(d)
            return ft.attention(q, k, v, seed=seed + layer, trial=step[0], causal=causal, layout="BHLD",
                                **attention)
        attn.attention_fn = fn


def cell_name(name, attention):
    return name if attention is None else f"{name}_{attention['features']}_m{attention['m']}"


def train_cell(name, seed, threads, bench=None, max_minutes=None, attention=None):
    """Trains one cell (at most max_minutes of wall time, if given), with softmax attention or,
    given `attention`, with favor.torch's approximation in every layer; returns (model, record)
    (record: model.json's fields but config)."""
    L, pairs, d, heads, batch, lr, cap, every, _ = CELLS[name]
    steps = bench or cap
    torch.manual_seed(seed)
    model = models.MQARModel({"vocab": VOCAB, "d_model": d, "n_heads": heads, "n_layers": 2, "max_len": L})
    step_of_w = [0]
    if attention is not None:
        trained_with(model, attention, seed, step_of_w)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.98))
    stream = np.random.default_rng(seed)
    held = models.mqar_batch(N_HELD, L, pairs, VOCAB, seed + 1)
    curve = []
    wall0, cpu0 = time.time(), cpu_seconds()
    step = 0
    while step < steps:
        model.train()
        x, y = models.mqar_batch(batch, L, pairs, VOCAB, stream)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, cap, lr)
        q = y != -100   # the read-out only where the loss looks
        loss = torch.nn.functional.cross_entropy(model.head(model.hidden(x)[q]), y[q])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        step_of_w[0] = step
        timed_out = max_minutes is not None and time.time() - wall0 > 60 * max_minutes
        if step % every == 0 or step == steps or bench or timed_out:
            r = models.recall(model.eval(), *held)
            curve.append([step, round(r, 6)])
            print(f"{name}: step {step}/{cap} loss {loss.item():.4f} held-out recall {r:.4f} "
                  f"{time.time() - wall0:.0f} s wall {cpu_seconds() - cpu0:.0f} s CPU", flush=True)
            if r >= STOP_AT or timed_out:
                break
    record = {"cell": cell_name(name, attention), "task": {"generator": "favor.models.mqar_batch", "L": L, "pairs": pairs,
                                     "vocab": VOCAB, "power_a": models.POWER_A, "random_non_queries": False},
              "recipe": {"seed": seed, "batch": batch, "lr": lr, "betas": [0.9, 0.98], "weight_decay": 0.1,
                         "warmup": WARMUP, "schedule": "cosine to 0 at step_cap", "step_cap": cap,
                         "grad_clip": 1.0, "stop_at_held_out_recall": STOP_AT, "eval_every": every,
                         "held_out": {"n": N_HELD, "seed": seed + 1}, "train_stream_seed": seed,
                         "torch_seed": seed, "threads": threads},
              "steps": step, "stopped_by_time_cap": bool(timed_out), "held_out_curve": curve,
              "train_wall_s": round(time.time() - wall0, 1), "train_cpu_s": round(cpu_seconds() - cpu0, 1),
              "torch": torch.__version__, "parameters": sum(p.numel() for p in model.parameters()),
              "command": " ".join(["scripts/train_mqar.py", *sys.argv[1:]])}
    if attention is not None:
        record["attention"] = {**attention, "layers": "all", "seed": f"{seed} + layer", "trial": "the step (W redrawn every step)",
                               "by": "favor.torch.attention"}
    return model.eval(), record


def measure(model, record, seed):
    """Adds the test recall (+ SE) and the check batch's recall to record."""
    L, pairs = record["task"]["L"], record["task"]["pairs"]
    tokens, labels = models.mqar_batch(N_TEST, L, pairs, VOCAB, seed + 2)
    r = models.recall(model, tokens, labels)
    n = N_TEST * pairs
    record["test"] = {"n": N_TEST, "seed": seed + 2, "queries": n, "recall": r,
                      "se": math.sqrt(max(r * (1 - r), 1.0 / n) / n)}
    ct, cl = models.mqar_batch(N_CHECK, L, pairs, VOCAB, seed + 2)
    record["check"] = {"n": N_CHECK, "seed": seed + 2, "recall": models.recall(model, ct, cl)}
    return ct, cl


def write_cell(folder, model, record, ct, cl, rows):
    """model.pt, model.json, capture/ (the check batch's first `rows` examples; none when rows
    is None: a model trained with an approximation, whose layers' outputs are not the softmax
    the capture's self-check rebuilds), README.md."""
    os.makedirs(folder, exist_ok=True)
    weights = os.path.join(folder, "model.pt")
    models.save_mqar(weights, model, record)
    model, record = models.load_mqar(weights)   # capture (and describe) what was written
    if rows is None:
        write_readme(folder, record, None, None)
        return
    tokens, labels = ct[:rows], cl[:rows]
    cap_dir = os.path.join(folder, "capture")
    man = capture(model, tokens, out=cap_dir, causal=True,
                  loss_fn=lambda logits: models.query_loss(logits, labels))
    man["input"] = {"generator": "favor.models.mqar_batch", "n": N_CHECK, "rows": rows, "L": record["task"]["L"],
                    "pairs": record["task"]["pairs"], "vocab": VOCAB, "seed": record["check"]["seed"],
                    "loss": "query-position cross entropy (favor.models.query_loss)",
                    "model": "model.pt", "model_sha256": sha256(weights)}
    with open(os.path.join(cap_dir, "manifest.json"), "w") as f:
        json.dump(man, f, indent=2)
        f.write("\n")
    write_readme(folder, record, man, census_of(cap_dir, tokens, labels))


def census_of(cap_dir, tokens=None, labels=None):
    """favor.heads' census of the capture (tokens.npy and targets.npy saved beside it when given:
    the retrieval score's copy targets are the labels)."""
    sys.path.insert(0, os.path.join(ROOT, "build", "python"))   # the census is favor's (scripts/setup.sh builds it)
    from favor import heads
    if tokens is not None:
        np.save(os.path.join(cap_dir, "tokens.npy"), tokens.numpy())
        np.save(os.path.join(cap_dir, "targets.npy"), labels.numpy())
    return heads.write(cap_dir)


def write_readme(folder, rec, man, census):
    """README.md of a cell from its record, its capture's manifest and census (both None for a
    model trained with an approximation: it has no capture)."""
    c, t, r, att = rec["config"], rec["test"], rec["recipe"], rec.get("attention")
    size = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(folder) for f in fs if f != "README.md")
    base = rec["cell"] if att is None else rec["cell"][:rec["cell"].index(f"_{att['features']}_m")]
    lines = [
        f"# data/mqar/{rec['cell']}/: a 2-layer attention model trained here on MQAR"
        + ("" if att is None else f", with {trained_label(rec)} in every layer"),
        "",
        "Written by `scripts/train_mqar.py` (every number below is computed).",
        "",
        f"Task: MQAR (favor.models.mqar_batch), L = {rec['task']['L']}, {rec['task']['pairs']} key-value pairs, "
        f"V = {VOCAB}, query gaps g = 0, 1, ... drawn with p(g) ~ a (g + 1)^(a - 1), a = {rec['task']['power_a']}, "
        "non-query positions 0.",
        f"Model: d_model {c['d_model']}, {c['n_layers']} attention-only layers of {c['n_heads']} head(s) of "
        f"dimension {c['d_model'] // c['n_heads']}, token shift (causal depthwise conv, width 2) before them, "
        f"learned positions, pre-LayerNorm, no MLP: {rec['parameters']} parameters.",
        *([] if att is None else [
            f"Attention while training and measuring: favor.torch.attention, {att['features']} features, "
            f"{att['projection']} W, m = {att['m']}, in every layer; W of layer l drawn from (seed + l, trial = the "
            "step): redrawn every step (the test below used the last step's W). Loaded with "
            "favor.models.load_mqar the model has softmax attention: set the approximation (favor.swap_in) to "
            "use it as trained."]),
        f"Training: seed {r['seed']}, batch {r['batch']}, AdamW lr {r['lr']:g}, cosine over {r['step_cap']} steps, "
        f"stopped at step {rec['steps']}" + (" (the time cap)" if rec.get("stopped_by_time_cap") else "")
        + f" (held-out recall {rec['held_out_curve'][-1][1]:.4f} on {r['held_out']['n']} "
        f"examples, seed {r['held_out']['seed']}); {rec['train_wall_s'] / 60:.1f} min wall, "
        f"{rec['train_cpu_s'] / 60:.1f} min CPU on {r['threads']} threads (torch {rec['torch']}, nice -n 10 on a "
        "shared 2-core machine).",
        "",
        f"**Test recall {100 * t['recall']:.2f}% +- {100 * t['se']:.2f}** ({t['n']} examples, seed {t['seed']}, "
        f"{t['queries']} queries; binomial SE over the queries). Check batch (mqar_batch({rec['check']['n']}, ..., "
        f"seed {rec['check']['seed']}), recomputed by tests/python_module/test_mqar.py): "
        f"{100 * rec['check']['recall']:.2f}%.",
        "",
        "## Files",
        "",
        "- `model.pt`: float32 state_dict (torch.load(weights_only=True)); `model.json`: config, recipe, "
        "numbers, held-out curve. Load: `favor.models.load_mqar(\"model.pt\")`.",
    ]
    if man is not None:
        lay = man["layers"][0]
        lines.append(
            f"- `capture/`: scripts/capture_qkv.py's capture() of the check batch's first {lay['B']} examples, "
            f"causal: `layer<i>/q.npy, k.npy, v.npy, g.npy` ({lay['B']}, {lay['H']}, {lay['L']}, {lay['d']}) "
            f"{lay['dtype']} for i = 0..{len(man['layers']) - 1}, g = dLoss/dOut of the query-position cross "
            "entropy; `manifest.json` (shapes, sha256, self-check: max |diff| "
            + ", ".join(f"{m['check']['max_abs_diff']:.1e}" for m in man["layers"])
            + "), `layer<i>.json` favor configs.")
    lines += [
        f"- In all {size / 1e6:.1f} MB (README.md aside).",
        "",
        f"Remake: `nice -n 10 /usr/bin/python3 scripts/train_mqar.py --cells {base} --threads {r['threads']}"
        + ("" if att is None else f" --attention {att['features']}:{att['projection']}:{att['m']}") + "`.",
        "",
    ]
    if census is not None:
        from favor import heads
        lines += [
            "## Head census of the capture",
            "",
            "`python3 -m favor heads capture` (favor.heads; definitions in its docstring; also capture/heads.md, "
            "heads.png): the weight on the last 16 / 64 / 256 keys, the sink share (first 4 keys), the row entropy "
            "(nats) and its ratio to the uniform row's, the induction score, the retrieval score (how often the "
            "head's top-1 key is the token the query position must output: Wu et al.'s), and the kind they imply.",
            "",
            heads.markdown(census),
        ]
    with open(os.path.join(folder, "README.md"), "w") as f:
        f.write("\n".join(lines))


def trained_label(rec):
    a = rec.get("attention")
    return "softmax" if a is None else f"{a['features']} ({a['projection']}), m = {a['m']}"


def write_index(out, name=None, record=None):
    """Adds record (if given) to OUT/results.json (every cell run, shipped or not; read again
    here, as another run may have added cells) and writes OUT/README.md from it."""
    path = os.path.join(out, "results.json")
    results = {}
    if os.path.exists(path):
        with open(path) as f:
            results = json.load(f)
    if record is not None:
        results[name] = record
        with open(path, "w") as f:
            json.dump(results, f, indent=2)
            f.write("\n")
    lines = ["# data/mqar/: MQAR recall models trained here", "",
             "Written by `scripts/train_mqar.py` (the recipe is its docstring; per cell README.md and "
             "model.json). Cells with test recall >= 99% are shipped in a folder of their name; a model trained with "
             "an approximation (--attention; <cell>_<features>_m<M>) is shipped whatever its recall, measured "
             "with that approximation: it is the post-hoc swap's comparison (results/recall/).", "",
             "| cell | L | pairs | d_model | heads | trained with | steps | wall min | test recall | SE | shipped |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    base = lambda name: next(c for c in CELLS if name == c or name.startswith(c + "_"))
    for name, rec in sorted(results.items(), key=lambda kv: (list(CELLS).index(base(kv[0])), kv[0])):
        t = rec["test"]
        lines.append(f"| {name} | {rec['task']['L']} | {rec['task']['pairs']} | {rec['config']['d_model']} | "
                     f"{rec['config']['n_heads']} | {trained_label(rec)} | {rec['steps']} | {rec['train_wall_s'] / 60:.1f} | "
                     f"{100 * t['recall']:.2f}% | {100 * t['se']:.2f} | {'yes' if rec['shipped'] else 'no'} |")
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write("\n".join(lines + [""]))


def main(argv=None):
    ap = argparse.ArgumentParser(usage="%(prog)s [--cells C,...] [--out DIR] [options]   (-h lists them)", description=__doc__.split("\n")[0])
    ap.add_argument("--cells", default=",".join(CELLS), help="comma-separated cell names (default: all, in order)")
    ap.add_argument("--out", default=os.path.join(ROOT, "data", "mqar"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-minutes", type=float, default=None,
                    help="stop a cell's training after this much wall time (recorded; not part of the recipe)")
    ap.add_argument("--docs-only", action="store_true",
                    help="rewrite the README.md files of the shipped --cells and OUT/README.md from their JSON")
    ap.add_argument("--bench", type=int, default=None, metavar="STEPS", help="time STEPS steps per cell, write nothing")
    ap.add_argument("--attention", default=None, metavar="FEATURES:PROJECTION:M",
                    help="train with favor.torch's approximation in every layer (W redrawn every step), e.g. "
                         "positive:orthogonal:64; the folder is <cell>_<features>_m<M>, shipped whatever its "
                         "recall (a study's object), without a capture")
    a = ap.parse_args(argv)
    names = a.cells.split(",")
    bad = [n for n in names if n not in CELLS]
    if bad:
        print(f"train_mqar.py: --cells: no cell {bad[0]!r} (cells: {', '.join(CELLS)})", file=sys.stderr)
        sys.exit(2)
    if a.docs_only:
        for name in names:
            folder = os.path.join(a.out, name)
            if os.path.exists(os.path.join(folder, "model.json")):
                with open(os.path.join(folder, "model.json")) as f, \
                        open(os.path.join(folder, "capture", "manifest.json")) as g:
                    write_readme(folder, json.load(f), json.load(g), census_of(os.path.join(folder, "capture")))
        write_index(a.out)
        return
    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    attention = parse_attention(a.attention)
    for name in names:
        model, record = train_cell(name, a.seed, a.threads, a.bench, a.max_minutes, attention)
        if a.bench:
            continue
        record["config"] = model.config
        ct, cl = measure(model, record, a.seed)
        record["shipped"] = record["test"]["recall"] >= SHIP_AT or attention is not None
        folder = record["cell"]   # the cell's name, or <cell>_<features>_m<M> when trained with an approximation
        print(f"{folder}: test recall {record['test']['recall']:.4f} +- {record['test']['se']:.4f}, check "
              f"{record['check']['recall']:.4f}, {record['steps']} steps, {record['train_wall_s']:.0f} s "
              f"{'shipped' if record['shipped'] else 'NOT shipped'}", flush=True)
        if record["shipped"]:
            write_cell(os.path.join(a.out, folder), model, {k: v for k, v in record.items() if k != "config"},
                       ct, cl, None if attention is not None else CELLS[name][-1])
        os.makedirs(a.out, exist_ok=True)
        write_index(a.out, folder, record)


if __name__ == "__main__":
    main()
