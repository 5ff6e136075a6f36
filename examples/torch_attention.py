"""The README's "favor inside PyTorch" example: data/lm16's byte-level model with favor's FAVOR+
(m = 64 random features beside an exact window of 64 keys, W redrawn every step) in place of
every layer's softmax, fine-tuned for a few steps. favor.torch.Attention's forward is favor's
attention, its backward favor's analytic gradient.

    PYTHONPATH=build/python /usr/bin/python3 examples/torch_attention.py [--steps 20] [--L 512] [--batch 4]

Prints the model's loss (nats per byte) on one batch of training text before each step.
"""
import argparse
import sys
from pathlib import Path

import torch

import favor.torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from tiny_lm import load_tiny_lm  # noqa: E402
from train_tiny_lm import split_streams  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=20)
ap.add_argument("--L", type=int, default=512)
ap.add_argument("--batch", type=int, default=4)
a = ap.parse_args()
torch.manual_seed(0)
torch.set_num_threads(2)

model, _ = load_tiny_lm(ROOT / "data" / "lm16" / "tiny_lm.pt")
for i, block in enumerate(model.blocks):
    # favor's attention is softmax(q k^T / sqrt(d)) v: the model's scale is head_dim ** -0.5 already
    layer = favor.torch.Attention(features="positive", m=64, window=64, causal=True, seed=i, redraw=True)
    block.attn.attention_fn = lambda q, k, v, scale, causal, layer=layer: layer(q, k, v)

train, _, _, _ = split_streams()
text = torch.frombuffer(bytearray(train[:a.batch * (a.L + 1)]), dtype=torch.uint8).long().view(a.batch, a.L + 1)
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
model.train()
for step in range(a.steps + 1):
    logits = model(text[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), text[:, 1:].reshape(-1))
    print(f"step {step} loss {loss.item():.4f}")
    if step == a.steps:
        break
    opt.zero_grad()
    loss.backward()
    opt.step()
