"""echotk.nn: Megatron-style tensor-parallel layers, P ranks emulated on one device.

- ColumnParallelLinear (QKV, gate+up): rank r owns a slice of the output features; forward is the
  identity on the input (every rank holds it), backward all-reduces the P partial input gradients
  (direction "backward").
- RowParallelLinear (attention output, down): rank r owns a slice of the input features; forward
  all-reduces the P partial outputs (direction "forward"), backward is the identity (every rank
  gets the full output gradient).

The P ranks' matmuls are one torch.bmm over a [P, ...] weight. Every all-reduce goes through the
TensorParallelGroup's echotk.AllReduce (or ExactAllReduce): one instance for all sites, whose
per-direction compensator state runs along the sites of a pass (forward sites in forward order,
backward sites in the order backward visits them) and is reset at the start of each pass, as the
paper's Sec. 5.1 and 5.4 do ("one pair serves all sites of a pass", one pair per direction).
Call group.begin_pass("forward") before a forward pass; group.backward_start(output) puts a node on
the output whose backward resets the backward state before any backward site runs
(echotk.train_model.TPLlama does both).
"""
from __future__ import annotations

import time
from typing import Callable, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from ._allreduce import DIRECTIONS, TORCH_DTYPES

ATTENTION, MLP = 0, 1  # site kinds, as echotk.tensor_parallel and /site_kind of the trace format

# Called after every all-reduce: (direction, site, kind, parts [P, n], out [n]).
Observer = Callable[[str, int, int, torch.Tensor, torch.Tensor], None]


class TensorParallelGroup:
    """What the sites of one model share: the P-rank all-reduce, and optional instruments.

    record_reports: after each call keep (direction, site, kind, AllReduceReport) in `reports`
    (reading a GPU report waits for the stream; turn it on only for the steps you sample).
    timing: add each call's time to allreduce_seconds() (CUDA events on a GPU, no host wait).
    observer: called with each call's contributions and result (tests)."""

    def __init__(self, ranks: int, allreduce):
        if isinstance(ranks, bool) or not isinstance(ranks, int) or not 1 <= ranks <= 8:
            raise ValueError(f"ranks must lie in [1, 8], got {ranks!r}")
        if getattr(allreduce, "ranks", None) != ranks:
            raise ValueError(f"allreduce has ranks={getattr(allreduce, 'ranks', None)} but ranks={ranks}")
        self.ranks = ranks
        self.allreduce = allreduce
        self.dtype = TORCH_DTYPES[allreduce.dtype]
        self.record_reports = False
        self.reports: List[Tuple[str, int, int, object]] = []
        self.timing = False
        self._cpu_seconds = 0.0
        self._events: List[Tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self.observer: Optional[Observer] = None

    def begin_pass(self, direction: str):
        """Starts a pass of `direction`: its compensator state begins from zero."""
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be 'forward' or 'backward', got {direction!r}")
        self.allreduce.reset(direction)

    def reset(self):
        """Both directions' compensator states from zero (the explicit form of the pass hooks)."""
        self.allreduce.reset()

    def backward_start(self, output: torch.Tensor) -> torch.Tensor:
        """`output` unchanged, with a node whose backward starts the backward pass's state."""
        if not (torch.is_grad_enabled() and output.requires_grad):
            return output
        return _BackwardStart.apply(output, self)

    def all_reduce(self, parts: torch.Tensor, direction: str, site: int, kind: int) -> torch.Tensor:
        """[P, ...] contributions -> [...] sum, each rank's part rounded to the all-reduce's dtype
        first (what a rank's 16-bit GEMM hands over); the result comes back in parts' dtype."""
        shape = parts.shape[1:]
        flat = parts.to(self.dtype).reshape(self.ranks, -1).contiguous()
        cuda = flat.is_cuda
        if self.timing:
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
            else:
                begin = time.perf_counter()
        out = self.allreduce(flat, direction)
        if self.timing:
            if cuda:
                end.record()
                self._events.append((start, end))
            else:
                self._cpu_seconds += time.perf_counter() - begin
        if self.record_reports:
            self.reports.append((direction, site, kind, self.allreduce.report))
        if self.observer is not None:
            self.observer(direction, site, kind, flat, out)
        return out.reshape(shape).to(parts.dtype)

    def allreduce_seconds(self) -> float:
        """Time spent in all-reduce calls since the last call of this (waits for the GPU events)."""
        total = self._cpu_seconds
        for start, end in self._events:
            end.synchronize()
            total += start.elapsed_time(end) / 1000.0
        self._events.clear()
        self._cpu_seconds = 0.0
        return total


class _BackwardStart(torch.autograd.Function):
    """Identity; its backward (the first node backward reaches) resets the backward state."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        ctx.group.begin_pass("backward")
        return grad, None


class _CopyToRanks(torch.autograd.Function):
    """Column-parallel entry: every rank gets the same input ([T, in] -> [P, T, in], a view);
    backward all-reduces the P ranks' partial input gradients."""

    @staticmethod
    def forward(ctx, x, group, site, kind):
        ctx.group, ctx.site, ctx.kind = group, site, kind
        return x.unsqueeze(0).expand(group.ranks, *x.shape)

    @staticmethod
    def backward(ctx, grad):
        return ctx.group.all_reduce(grad, "backward", ctx.site, ctx.kind), None, None, None


class _ReduceFromRanks(torch.autograd.Function):
    """Row-parallel exit: all-reduces the P partial outputs ([P, T, out] -> [T, out]); backward
    hands every rank the full output gradient."""

    @staticmethod
    def forward(ctx, parts, group, site, kind):
        ctx.ranks = group.ranks
        return group.all_reduce(parts, "forward", site, kind)

    @staticmethod
    def backward(ctx, grad):
        return grad.unsqueeze(0).expand(ctx.ranks, *grad.shape), None, None, None


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The matmul dtype: autocast's when it is on for x's device, else x's own."""
    device = x.device.type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return x.dtype


class ColumnParallelLinear(nn.Module):
    """y_i = x W_i^T for one or more outputs (e.g. (q, k, v) or (gate, up)) fused into one site.

    Rank r owns output features [r * o_i / P, (r + 1) * o_i / P) of every output i; its weight is
    weight[r] ([in, sum_i o_i / P]: its slice of output 0, then of output 1, ...). forward(x
    [..., in]) returns a tuple of [..., o_i] (or one tensor when one output was asked)."""

    def __init__(self, group: TensorParallelGroup, in_features: int, out_features: Union[int, Sequence[int]],
                 site: int, kind: int, init_std: float = 0.02):
        super().__init__()
        outs = (out_features,) if isinstance(out_features, int) else tuple(out_features)
        P = group.ranks
        for o in outs:
            if o < 1 or o % P:
                raise ValueError(f"site {site}: output width {o} is not a positive multiple of ranks={P}")
        self.group, self.site, self.kind = group, site, kind
        self.in_features, self.outs, self._single = in_features, outs, isinstance(out_features, int)
        self.weight = nn.Parameter(torch.empty(P, in_features, sum(outs) // P))
        nn.init.normal_(self.weight, std=init_std)

    def forward(self, x: torch.Tensor):
        lead = x.shape[:-1]
        flat = x.reshape(-1, self.in_features)
        dtype = compute_dtype(x)
        xs = _CopyToRanks.apply(flat.to(dtype), self.group, self.site, self.kind)  # [P, T, in]
        ys = torch.bmm(xs, self.weight.to(dtype))                                   # [P, T, sum o / P]
        P = self.group.ranks
        pieces = ys.split([o // P for o in self.outs], dim=-1)
        outs = tuple(p.transpose(0, 1).reshape(*lead, o) for p, o in zip(pieces, self.outs))
        return outs[0] if self._single else outs

    def full_weights(self) -> List[torch.Tensor]:
        """The nn.Linear weights [o_i, in] these shards make up (rank order = feature order)."""
        P, cols, start = self.group.ranks, [], 0
        for o in self.outs:
            w = self.weight[:, :, start : start + o // P]        # [P, in, o/P]
            cols.append(w.permute(0, 2, 1).reshape(o, self.in_features))
            start += o // P
        return cols

    def extra_repr(self):
        return f"in_features={self.in_features}, outs={self.outs}, ranks={self.group.ranks}, site={self.site}"


class RowParallelLinear(nn.Module):
    """y = x W^T with rank r owning input features [r * in / P, (r + 1) * in / P) (weight[r]:
    [in / P, out]); the P partial products are all-reduced."""

    def __init__(self, group: TensorParallelGroup, in_features: int, out_features: int, site: int, kind: int,
                 init_std: float = 0.02):
        super().__init__()
        P = group.ranks
        if in_features < 1 or in_features % P:
            raise ValueError(f"site {site}: input width {in_features} is not a positive multiple of ranks={P}")
        self.group, self.site, self.kind = group, site, kind
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.empty(P, in_features // P, out_features))
        nn.init.normal_(self.weight, std=init_std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        P = self.group.ranks
        dtype = compute_dtype(x)
        xs = x.reshape(-1, P, self.in_features // P).transpose(0, 1).to(dtype)  # [P, T, in / P]
        parts = torch.bmm(xs, self.weight.to(dtype))                            # [P, T, out]
        y = _ReduceFromRanks.apply(parts, self.group, self.site, self.kind)
        return y.reshape(*lead, self.out_features)

    def full_weight(self) -> torch.Tensor:
        """The nn.Linear weight [out, in] these shards make up."""
        return self.weight.permute(2, 0, 1).reshape(self.out_features, self.in_features)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, ranks={self.group.ranks}, "
                f"site={self.site}")


__all__ = ["TensorParallelGroup", "ColumnParallelLinear", "RowParallelLinear", "ATTENTION", "MLP",
           "compute_dtype"]
