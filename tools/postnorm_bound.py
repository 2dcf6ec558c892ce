"""What any compensator that corrects a site's error at the next site can reach on a post-norm
model (docs/results-gemma3.md): the delayed exact cancellation.

Each site's all-reduce is the quantized transport without compensation (the reference's
echotk.AllReduce, compensator off), and beside it the exact sum of the same partial sums, rounded
to bf16 as the 16-bit row's all-reduce rounds it. At site k a hook on the post-norm takes
delta_k = norm_k(y_quantized) - norm_k(y_exact), the error site k's quantization puts into the
residual stream, and subtracts delta_(k-1) from site k's normalized output: the error of site
k - 1 leaves the stream exactly, one site after it entered, with no quantization of the
correction and no estimate of any gain. What stays is what no such compensator removes: each
error's effect on the block it passes through before it is cancelled, and the last site's error.
On a model without post-norms (SmolLM2) a site's output joins the stream as it is, and the
all-reduce itself returns its output minus the error of the call before.

    python tools/postnorm_bound.py --gguf $(scripts/setup_gemma3.sh) --text data/smollm2/moby-dick.txt.gz \
        --windows 16 --length 512 --out OUT --baseline OUT-p4-16bit.csv --rows q4 q4rot64

Rows: TRANSPORT[@delayD | @through[P] | @beside[P]] with TRANSPORT one of q4, q8, q4rot, q4rot64
(tools/postnorm_study.py); @delayD the sites between an error and its cancellation (1, the
default; 0 cancels each site's own error, the 16-bit row up to the norm's rounding, a check of the
hooks); @through[P] the cancellation one site late carried in the next site's message, through
the norm's first-order inverse with its per-feature profile to the power P (1 when not given;
CorrectedTransport; post-norm models only); @beside[P] the same correction added to the next
site's delivered sum exactly instead of inside its quantized message (a diagnostic, not a
compensator: it would need a second, 16-bit message), which separates the correction's
quantization from the norm's nonlinearity.
"""
from __future__ import annotations

import math
import os
import sys
import time
from collections import deque

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from postnorm_compensators import post_norm_weights  # noqa: E402
from postnorm_study import TRANSPORTS, report_line, run_arguments  # noqa: E402

from echotk import AllReduce, ExactAllReduce, Spec  # noqa: E402
from echotk.models import bos_id, load_model, load_tokenizer  # noqa: E402
from echotk.eval.ppl import paired, plan_windows, read_csv, read_text, score_windows, windows_of, write_csv  # noqa: E402,E501
from echotk.tensor_parallel import tensor_parallel, undo_tensor_parallel  # noqa: E402


class ExactBeside:
    """The quantized transport (compensator off) that also keeps the exact sum of its last call.
    With `delay` set (a model without post-norms, whose site outputs join the stream as they are),
    it cancels itself: each call returns its output minus the error delta = y_quantized - y_exact
    of the call `delay` sites before (the pass restarts at reset())."""

    def __init__(self, ranks: int, spec: Spec, delay=None):
        self.ranks, self.dtype = ranks, "bf16"
        self._quantized = AllReduce(ranks=ranks, spec=spec)
        self._exact = ExactAllReduce(ranks=ranks, dtype="bf16")
        self.last_exact = None
        self.delay = delay
        self._pending: deque = deque()

    def reset(self, direction=None):
        self._quantized.reset()
        self._pending.clear()

    def __call__(self, parts: torch.Tensor, direction: str = "forward") -> torch.Tensor:
        self.last_exact = self._exact(parts)
        y = self._quantized(parts)
        if self.delay is None:
            return y
        self._pending.append(y.float() - self.last_exact.float())
        if len(self._pending) > self.delay:
            return (y.float() - self._pending.popleft()).to(y.dtype)
        return y


def post_norms(model):
    """The post-norm module of each site in call order (2l: attention output, 2l + 1: MLP output)."""
    out = []
    for layer in model.model.layers:
        out += [layer.post_attention_layernorm, layer.post_feedforward_layernorm]
    return out


def install_cancellation(model, reduce: ExactBeside, delay: int):
    """Hooks on every post-norm: delta_k taken, delta_(k - delay) subtracted. Returns the handles."""
    norms = post_norms(model)
    pending: deque = deque()

    def hook(module, inputs, output):
        site = hook_site[id(module)]
        if site == 0:
            pending.clear()
        exact = module.forward(reduce.last_exact.reshape(inputs[0].shape).to(inputs[0].dtype))
        pending.append(output - exact)
        if len(pending) > delay:
            return output - pending.popleft()
        return output

    hook_site = {id(m): k for k, m in enumerate(norms)}
    return [m.register_forward_hook(hook) for m in norms]


class CorrectedTransport(ExactBeside):
    """`@through`: the previous site's stream error travels in this site's message, as a
    compensator's correction does. The hooks (install_through) leave each normalized output as it
    is and take eps_k = norm_k(y_k) - (norm_k(exact_k) - eps_(k-1)), what site k adds to the
    stream's error beyond cancelling eps_(k-1); the next call adds c = -eps_k * r / w_j to its
    partial sums (split evenly over the ranks) before the quantized transport, with r each token's
    RMS of the call's exact sum and w_j the post-norm's effective weights floored at FLOOR times
    their RMS: the norm's inverse to first order, without its radial term (`profile` p < 1: w_j's
    ratio to the weights' RMS taken to the power p, p = 0 the weights' RMS, as stream units
    convert). The exact error at gain 1: what is lost against the delayed exact cancellation is
    the correction's own quantization, the norm's nonlinearity and, for p < 1, its profile. With
    `beside` the correction is added to the delivered sum in fp32 (rounded to bf16 with it) instead
    of to the partial sums: it escapes the quantization, so what is still lost is the norm's."""

    FLOOR = 0.1

    def __init__(self, ranks: int, spec: Spec, weights, profile: float = 1.0, beside: bool = False):
        super().__init__(ranks, spec)
        self.weights = weights
        self.profile = profile
        self.beside = beside
        self.site = 0
        self.error = None   # eps of the previous site, in stream units [tokens, hidden]

    def reset(self, direction=None):
        super().reset(direction)
        self.site = 0
        self.error = None

    def __call__(self, parts: torch.Tensor, direction: str = "forward") -> torch.Tensor:
        self.last_exact = self._exact(parts)
        w = self.weights[self.site]
        self.site += 1
        if self.error is None:
            return self._quantized(parts)
        hidden = w.numel()
        rms = w.double().pow(2).mean().sqrt().float()
        ratio = (w.abs().clamp_min(self.FLOOR * rms) / rms).pow(self.profile)
        floored = torch.copysign(rms * ratio, w) if self.profile != 0 else rms * ratio
        r = self.last_exact.float().reshape(-1, hidden).pow(2).mean(dim=1, keepdim=True).sqrt()
        c = (-self.error.reshape(-1, hidden) * r / floored).reshape(-1)
        if self.beside:
            y = self._quantized(parts)
            return (y.float() + c).to(y.dtype)
        return self._quantized((parts.float() + c / parts.shape[0]).to(parts.dtype))


def install_through(model, reduce: CorrectedTransport):
    """Hooks for `@through`: each post-norm's eps_k handed to the next call. Returns the handles."""
    norms = post_norms(model)
    hook_site = {id(m): k for k, m in enumerate(norms)}

    def hook(module, inputs, output):
        site = hook_site[id(module)]
        exact = module.forward(reduce.last_exact.reshape(inputs[0].shape).to(inputs[0].dtype))
        previous = 0 if site == 0 or reduce.error is None else reduce.error.reshape(output.shape)
        reduce.error = (output - (exact - previous)).float().detach()
        return output

    return [m.register_forward_hook(hook) for m in norms]


def parse_row(name: str):
    """(spec, delay, through, beside) of a row TRANSPORT[@delayD | @through[P] | @beside[P]]: through
    None, or the profile's power P of CorrectedTransport (1 when not given); beside True for
    @beside."""
    transport, _, mod = name.partition("@")
    if transport not in TRANSPORTS:
        raise ValueError(f"row {name!r}: transport {transport!r} is not one of {list(TRANSPORTS)}")
    for word in ("through", "beside"):
        if mod.startswith(word):
            try:
                profile = float(mod[len(word):]) if mod[len(word):] else 1.0
            except ValueError:
                raise ValueError(f"row {name!r}: @{word}P takes the profile's power P") from None
            return Spec(compensator="off", **TRANSPORTS[transport]), 1, profile, word == "beside"
    if mod and not mod.startswith("delay"):
        raise ValueError(f"row {name!r}: unknown modifier @{mod}")
    try:
        delay = int(mod[5:]) if mod else 1
    except ValueError:
        raise ValueError(f"row {name!r}: @delay takes a whole number of sites") from None
    if delay < 0:
        raise ValueError(f"row {name!r}: the delay must be >= 0")
    return Spec(compensator="off", **TRANSPORTS[transport]), delay, None, False


def main(argv=None) -> int:
    p = run_arguments(__doc__.splitlines()[0], "prefix of the CSV files: OUT-bound-ROW.csv")
    p.add_argument("--baseline", required=True, help="the 16-bit row's CSV over the same windows")
    p.add_argument("--rows", nargs="+", required=True)
    args = p.parse_args(argv)
    rows = [(name, *parse_row(name)) for name in args.rows]
    base = read_csv(args.baseline)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    begin = time.perf_counter()
    ids = torch.tensor(load_tokenizer(args.gguf).encode(read_text(args.text)).ids, dtype=torch.long)
    starts = plan_windows(len(ids), args.windows, args.length)
    bos = bos_id(args.gguf)
    model = load_model(args.gguf)
    has_post_norms = type(model).__name__.startswith(("Gemma2", "Gemma3"))
    print(f"# {args.text}: {args.windows} x {args.length}; {torch.get_num_threads()} torch threads; "
          f"load {time.perf_counter() - begin:.0f} s", flush=True)
    for name, spec, delay, through, beside in rows:
        if through is not None and not has_post_norms:
            raise SystemExit(f"postnorm_bound: row {name}: @through and @beside need a model with post-norms")
        if through is not None:
            reduce = CorrectedTransport(args.ranks, spec, post_norm_weights(model), through, beside)
        else:
            reduce = ExactBeside(args.ranks, spec, None if has_post_norms else delay)
        tensor_parallel(model, ranks=args.ranks, allreduce=reduce)
        if through is not None:
            handles = install_through(model, reduce)
        else:
            handles = install_cancellation(model, reduce, delay) if has_post_norms else []
        try:
            scored = score_windows(model, ids, starts, args.length, bos, progress=False)
        finally:
            for h in handles:
                h.remove()
            undo_tensor_parallel(model)
        write_csv(f"{args.out}-bound-{name}.csv", scored)
        run = windows_of(scored)
        print(report_line(f"bound-{name}", run, base, f"{math.exp(paired(run, base)[0]):.3f}"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
