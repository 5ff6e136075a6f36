"""favor inside PyTorch: attention whose forward is favor's and whose backward is favor's
analytic backward (issue 41 item 3; docs/design.md section 9).

    import favor.torch
    out = favor.torch.attention(q, k, v, features="positive", m=256, seed=0)   # differentiable
    layer = favor.torch.Attention(features="positive", m=256, causal=True, redraw=True)

q, k, v: CPU tensors of float32 or float64, (L, d), (H, L, d) or (B, H, L, d), or the axes
`layout` names ("BLHD": PyTorch's (B, L, H, d)), as favor.attention takes them. The forward is
favor.attention (favor apply) and the backward favor.attention_grad's gradient (apply --grad)
with the same W: (seed, trial) draw it as a run draws it, so both passes see one random matrix.
Where favor's backward can start from the forward's state (a feature map with a gradient, no
window or sinks: docs/design.md 9.2) the forward keeps it (the key sums, denominators and
output, O(F dv + L dv) per head) and the backward reads it, the numbers of attention_grad's
second forward without running it; otherwise the backward is attention_grad itself. Data-fitted
parameters (oprf's A*, the FAVOR# matrices, nystrom's landmarks) are fitted in the forward and
held fixed by the backward, as favor's gradients hold them (docs/design.md 2.7): the gradient
is that of the estimator with its parameters frozen. Maps without a backward (nystrom) and the
half dtypes raise favor.Error in the backward, with the command line's message. The backward
is once-differentiable: a gradient taken with create_graph=True carries no second derivative,
so a gradient asked with create_graph=True raises favor.Error rather than contributing nothing.
"""
import torch

from . import Error, _attention, _attention_backward, attention_grad as _attention_grad

__all__ = ["attention", "Attention"]


def _check(name, x, dtype=None):
    """favor.Error unless x is a CPU tensor (of `dtype` when one is given)."""
    if not isinstance(x, torch.Tensor):
        raise Error(f"{name}: favor.torch takes torch tensors (favor.attention takes numpy arrays), got "
                    f"{type(x).__name__}")
    if x.device.type != "cpu":
        raise Error(f"{name}: a tensor on {x.device}: favor computes on the CPU and would copy it silently; "
                    f"pass {name}.cpu() and move the result back")
    if dtype is not None and x.dtype != dtype:
        raise Error(f"{name}: dtype {str(x.dtype).replace('torch.', '')}, q's is "
                    f"{str(dtype).replace('torch.', '')}: one dtype for q, k and v")


class _Function(torch.autograd.Function):
    """favor.attention forward keeping its state where it can, favor's backward from that state
    or else favor.attention_grad (the options are keyword arguments of both, W included through
    seed and trial)."""

    @staticmethod
    def forward(ctx, q, k, v, options):
        out, ctx.saved = _attention(True, q.detach(), k.detach(), v.detach(), **options)
        # The output is saved too where the state holds it (a single head's output is the state's
        # memory): autograd then refuses a backward after an in-place change of it, as for exp.
        ctx.save_for_backward(q, k, v, out if ctx.saved else None)
        ctx.options = options
        return out

    @staticmethod
    def backward(ctx, g):   # once-differentiable: favor's gradients are numbers, not a torch graph
        # create_graph=True runs the backward with grad mode on: its result would carry no graph
        # (a gradient penalty or Hessian-vector product would add nothing, silently), so refuse.
        if torch.is_grad_enabled():
            raise Error("favor.torch: no second derivative: favor's backward is once-differentiable, so a "
                        "gradient taken with create_graph=True cannot be differentiated again (docs/design.md 9.2)")
        q, k, v, _ = ctx.saved_tensors   # autograd's checks: freed (a second backward) or changed in place
        if ctx.saved:
            dq, dk, dv = _attention_backward(ctx.saved, g.detach())
        else:
            dq, dk, dv = _attention_grad(q.detach(), k.detach(), v.detach(), g.detach(), **ctx.options)
        return dq, dk, dv, None


def attention(q, k, v, features="positive", m=None, projection=None, seed=0, trial=0, causal=False, exact=False,
              window=None, sinks=None, layout=None, threads=None, **map_params):
    """Differentiable favor attention of torch tensors: favor.attention's result (a tensor of
    the inputs' dtype, float32 or float64) whose gradient with respect to q, k and v is
    favor.attention_grad's. Keywords as favor.attention's (features, m, projection, seed, trial,
    causal, exact, window, sinks, layout, threads, the map's own parameters); `seed` defaults to
    0 so that a call is reproducible. A non-tensor, a tensor off the CPU, of another dtype than
    float32 / float64, or of a dtype differing from q's raises favor.Error (one line). The result
    is differentiable once: a gradient with create_graph=True (for a second derivative) raises favor.Error."""
    _check("q", q)
    if q.dtype not in (torch.float32, torch.float64):
        raise Error(f"q: dtype {str(q.dtype).replace('torch.', '')}: favor.torch computes in float32 or float64 "
                    "(favor's backward has no half dtypes)")
    _check("k", k, q.dtype)
    _check("v", v, q.dtype)
    options = dict(causal=causal, layout=layout, threads=threads)
    if exact:   # exact attention takes no map keywords
        options["exact"] = True
    else:
        options.update(features=features, m=m, projection=projection, seed=seed, trial=trial, window=window,
                       sinks=sinks, **map_params)
    return _Function.apply(q, k, v, {k_: x for k_, x in options.items() if x is not None})


class Attention(torch.nn.Module):
    """A drop-in attention layer: forward(q, k, v) = favor.torch.attention(q, k, v, ...) with the
    settings given here. redraw=True draws a new W for every forward call in training mode (trial
    0, 1, 2, ... of `seed`: the Performer's feature redrawing), and keeps the last one in eval
    mode; redraw=False uses trial 0 always. The layer has no parameters of its own (a fitted
    map's weights are read from its file: `weights="fit.npz:layer0"`)."""

    def __init__(self, features="positive", m=None, projection=None, seed=0, causal=False, exact=False, window=None,
                 sinks=None, layout=None, redraw=False, threads=None, **map_params):
        super().__init__()
        self.options = dict(features=features, m=m, projection=projection, seed=seed, causal=causal, exact=exact,
                            window=window, sinks=sinks, layout=layout, threads=threads, **map_params)
        self.redraw = bool(redraw)
        self.draws = 0   # forward calls that drew a W (training mode with redraw)

    def trial(self):
        """The trial (W's draw) the next forward call uses."""
        return self.draws if self.redraw and self.training else max(self.draws - 1, 0)

    def forward(self, q, k, v):
        t = self.trial()
        if self.redraw and self.training:
            self.draws += 1
        return attention(q, k, v, trial=t, **self.options)

    def extra_repr(self):
        shown = {k: v for k, v in self.options.items() if v is not None and v is not False}
        return ", ".join(f"{k}={v!r}" for k, v in shown.items()) + (", redraw=True" if self.redraw else "")
