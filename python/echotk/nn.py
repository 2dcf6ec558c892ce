"""echotk.nn: Megatron-style tensor-parallel layers, P ranks emulated on one device.

- ColumnParallelLinear (QKV, gate+up): rank r owns a slice of the output features; forward is the
  identity on the input (every rank holds it), backward all-reduces the P partial input gradients
  (direction "backward").
- RowParallelLinear (attention output, down): rank r owns a slice of the input features; forward
  all-reduces the P partial outputs (direction "forward"), backward is the identity (every rank
  gets the full output gradient). Its weight is its own shards [P, in / P, out] (a model built
  from these layers, echotk.train) or a Hugging Face Linear's [out, in] weight and bias
  (RowParallelLinear.from_linear, what echotk.tensor_parallel builds).

The P ranks' matmuls are one torch.bmm. Every all-reduce goes through the TensorParallelGroup's
echotk.AllReduce (or ExactAllReduce): one instance for all sites, whose per-direction compensator
state runs along the sites of a pass (forward sites in forward order, backward sites in the order
backward visits them) and is reset at the start of each pass, as the paper's Sec. 5.1 and 5.4 do
("one pair serves all sites of a pass", one pair per direction). Call group.begin_pass("forward")
before a forward pass; group.backward_start(output) puts a node on the output whose backward
resets the backward state before any backward site runs (echotk.train.model.TPLlama does both).

The group holds the model's sites: one Site record per all-reduce site (index, kind, post-norm
weight), which its layers share and every all-reduce call carries.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn

from ._util import TORCH_DTYPES, check_allreduce_ranks, check_direction, check_ranks

ATTENTION, MLP = 0, 1  # site kinds, as /site_kind of the trace format (docs/trace-format.md)
KINDS = (ATTENTION, MLP)


@dataclasses.dataclass(eq=False)
class Site:
    """One all-reduce site of a model: its index (0, 1, ... in forward order), its kind (ATTENTION
    or MLP), and post_norm, the weight of the RMSNorm the model applies to the site's output
    before adding it to the residual stream, as the model stores it (Gemma 3's
    post_attention_layernorm and post_feedforward_layernorm, whose scale is 1 + weight; None for
    pre-norm models: Llama, Mistral, Qwen, echotk.train's TPLlama). post_norm is the model's own
    Parameter, so it follows the model across devices; the norm scales by post_norm +
    post_norm_offset (1.0 for Gemma 3, 0.0 where the weight is the scale itself)."""

    index: int
    kind: int
    post_norm: Optional[torch.Tensor] = None
    post_norm_offset: float = 0.0

    def post_norm_scale(self) -> Optional[torch.Tensor]:
        """The post-norm's effective per-feature scale as float32 on the CPU (None without one):
        fp32(post_norm + post_norm_offset), as the norm computes it."""
        if self.post_norm is None:
            return None
        return (self.post_norm.detach().float().cpu() + self.post_norm_offset).contiguous()

    def __repr__(self):
        norm = "None" if self.post_norm is None else f"<weight {list(self.post_norm.shape)}>"
        return f"Site(index={self.index}, kind={self.kind}, post_norm={norm})"


# Called after every all-reduce: (direction, site index, kind, parts [P, n], out [n]).
Observer = Callable[[str, int, int, torch.Tensor, torch.Tensor], None]


class TensorParallelGroup:
    """What the sites of one model share: the P-rank all-reduce, the sites, and instruments.

    sites: the Site records, by index (site() makes them as the layers are built).
    An all-reduce whose class sets `takes_site = True` is called as allreduce(parts, direction,
    site=Site), so that it can act on the site; others (echotk.AllReduce, ExactAllReduce) are
    called as allreduce(parts, direction).

    record_reports: after each call keep (direction, site, kind, AllReduceReport) in `reports`
    (reading a GPU report waits for the stream; turn it on only for the steps you sample).
    timing: add each call's time to allreduce_seconds() (CUDA events on a GPU, no host wait).
    observer: called with each call's contributions and result (tests, echotk.capture)."""

    def __init__(self, ranks: int, allreduce):
        check_ranks(ranks)
        check_allreduce_ranks(allreduce, ranks)
        self.ranks = ranks
        self.allreduce = allreduce
        self.dtype = TORCH_DTYPES[allreduce.dtype]
        self._sites: Dict[int, Site] = {}
        self._takes_site = bool(getattr(type(allreduce), "takes_site", False))
        self.record_reports = False
        self.reports: List[Tuple[str, int, int, object]] = []
        self.timing = False
        self._cpu_seconds = 0.0
        self._events: List[Tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self.observer: Optional[Observer] = None

    @property
    def sites(self) -> List[Site]:
        """The sites in index order."""
        return [self._sites[i] for i in sorted(self._sites)]

    def site(self, index: int, kind: int, post_norm: Optional[torch.Tensor] = None,
             post_norm_offset: float = 0.0) -> Site:
        """The record of site `index`, made at its first use; later uses (a site's column- and
        row-parallel layers share it) must name the same kind and give no other post_norm."""
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ValueError(f"site index must be an integer >= 0, got {index!r}")
        if kind not in KINDS:
            raise ValueError(f"site {index}: kind must be ATTENTION (0) or MLP (1), got {kind!r}")
        record = self._sites.get(index)
        if record is None:
            record = self._sites[index] = Site(index, kind, post_norm, float(post_norm_offset))
        elif record.kind != kind:
            raise ValueError(f"site {index} is of kind {record.kind} already, not {kind}")
        elif post_norm is not None and post_norm is not record.post_norm:
            raise ValueError(f"site {index} has its post_norm already")
        return record

    def begin_pass(self, direction: str):
        """Starts a pass of `direction`: its compensator state begins from zero."""
        self.allreduce.reset(check_direction(direction))

    def reset(self):
        """Both directions' compensator states from zero (the explicit form of the pass hooks)."""
        self.allreduce.reset()

    def backward_start(self, output: torch.Tensor) -> torch.Tensor:
        """`output` unchanged, with a node whose backward starts the backward pass's state."""
        if not (torch.is_grad_enabled() and output.requires_grad):
            return output
        return _BackwardStart.apply(output, self)

    def all_reduce(self, parts: torch.Tensor, direction: str, site: Site) -> torch.Tensor:
        """[P, ...] contributions of `site` -> [...] sum, each rank's part rounded to the
        all-reduce's dtype first (what a rank's 16-bit GEMM hands over); the result comes back in
        parts' dtype."""
        shape = parts.shape[1:]
        flat = parts.to(self.dtype).reshape(self.ranks, -1).contiguous()
        cuda = flat.is_cuda
        if self.timing:
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
            else:
                begin = time.perf_counter()
        out = self.allreduce(flat, direction, site=site) if self._takes_site else self.allreduce(flat, direction)
        if self.timing:
            if cuda:
                end.record()
                self._events.append((start, end))
            else:
                self._cpu_seconds += time.perf_counter() - begin
        if self.record_reports:
            self.reports.append((direction, site.index, site.kind, self.allreduce.report))
        if self.observer is not None:
            self.observer(direction, site.index, site.kind, flat, out)
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
    def forward(ctx, x, group, site):
        ctx.group, ctx.site = group, site
        return x.unsqueeze(0).expand(group.ranks, *x.shape)

    @staticmethod
    def backward(ctx, grad):
        return ctx.group.all_reduce(grad, "backward", ctx.site), None, None


class _ReduceFromRanks(torch.autograd.Function):
    """Row-parallel exit: all-reduces the P partial outputs ([P, T, out] -> [T, out]); backward
    hands every rank the full output gradient."""

    @staticmethod
    def forward(ctx, parts, group, site):
        ctx.ranks = group.ranks
        return group.all_reduce(parts, "forward", site)

    @staticmethod
    def backward(ctx, grad):
        return grad.unsqueeze(0).expand(ctx.ranks, *grad.shape), None, None


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The matmul dtype: autocast's when it is on for x's device, else x's own."""
    device = x.device.type
    if torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return x.dtype


def slice_begin(in_features: int, ranks: int, rank: int) -> int:
    """First input feature of rank `rank` (model/src/tensor_parallel.cpp, docs/model.md)."""
    return in_features * rank // ranks


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
        self.site_record = group.site(site, kind)
        self.in_features, self.outs, self._single = in_features, outs, isinstance(out_features, int)
        self.weight = nn.Parameter(torch.empty(P, in_features, sum(outs) // P))
        nn.init.normal_(self.weight, std=init_std)

    def forward(self, x: torch.Tensor):
        lead = x.shape[:-1]
        flat = x.reshape(-1, self.in_features)
        dtype = compute_dtype(x)
        xs = _CopyToRanks.apply(flat.to(dtype), self.group, self.site_record)  # [P, T, in]
        ys = torch.bmm(xs, self.weight.to(dtype))                              # [P, T, sum o / P]
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
    """y = x W^T (+ bias, added once after the all-reduce) with rank r owning input features
    [slice_begin(in, P, r), slice_begin(in, P, r + 1)); the P partial products are all-reduced.

    RowParallelLinear(group, in, out, site, kind) has its own shards, weight[r] = [in / P, out]
    (P must divide in). With linear= (RowParallelLinear.from_linear) it computes with the Linear's
    own weight [out, in] and bias, the same Parameters (state_dict keys stay), P any number up to
    in; post_norm= (and post_norm_offset=) go to the site's record (Site.post_norm)."""

    def __init__(self, group: TensorParallelGroup, in_features: int, out_features: int, site: int, kind: int,
                 init_std: float = 0.02, *, linear: Optional[nn.Linear] = None,
                 post_norm: Optional[torch.Tensor] = None, post_norm_offset: float = 0.0):
        super().__init__()
        P = group.ranks
        if linear is None and (in_features < 1 or in_features % P):
            raise ValueError(f"site {site}: input width {in_features} is not a positive multiple of ranks={P}")
        if linear is not None and (linear.in_features, linear.out_features) != (in_features, out_features):
            raise ValueError(f"site {site}: the Linear is [{linear.out_features}, {linear.in_features}], "
                             f"not [{out_features}, {in_features}]")
        if in_features < P:
            raise ValueError(f"site {site} has {in_features} input features for {P} ranks")
        self.group, self.site, self.kind = group, site, kind
        self.site_record = group.site(site, kind, post_norm, post_norm_offset)
        self.in_features, self.out_features = in_features, out_features
        if linear is None:
            self.weight = nn.Parameter(torch.empty(P, in_features // P, out_features))
            nn.init.normal_(self.weight, std=init_std)
            self.bias: Optional[nn.Parameter] = None
            return
        self.weight, self.bias = linear.weight, linear.bias
        if in_features % P:
            # Uneven slices: gather each rank's features into a zero-padded [P, width] block
            # (index in_features is a zero column), so one batched matmul still does all ranks.
            bounds = [slice_begin(in_features, P, r) for r in range(P + 1)]
            index = torch.full((P, max(hi - lo for lo, hi in zip(bounds, bounds[1:]))), in_features,
                               dtype=torch.long, device=linear.weight.device)
            for r, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
                index[r, : hi - lo] = torch.arange(lo, hi)
            self.register_buffer("_index", index, persistent=False)

    @classmethod
    def from_linear(cls, group: TensorParallelGroup, linear: nn.Linear, site: int, kind: int,
                    post_norm: Optional[torch.Tensor] = None,
                    post_norm_offset: float = 0.0) -> "RowParallelLinear":
        """The row-parallel form of `linear`, computing with its weight and bias (the same
        Parameters); post_norm and its offset go to the site's record (Site.post_norm)."""
        return cls(group, linear.in_features, linear.out_features, site, kind, linear=linear, post_norm=post_norm,
                   post_norm_offset=post_norm_offset)

    def partial_sums(self, x: torch.Tensor) -> torch.Tensor:
        """[P, tokens, out]: rank r's x[:, slice_r] @ W[:, slice_r]^T, one batched matmul."""
        P, tokens = self.group.ranks, x.shape[0]
        if self.weight.dim() == 3:                                                 # own shards
            xs = x.reshape(tokens, P, self.in_features // P).transpose(0, 1)       # [P, T, in / P]
            return torch.bmm(xs, self.weight.to(x.dtype))
        if self.in_features % P == 0:                                              # a Linear's, even
            width = self.in_features // P
            xs = x.reshape(tokens, P, width).transpose(0, 1)                       # [P, T, w]
            ws = self.weight.reshape(self.out_features, P, width).permute(1, 2, 0)  # [P, w, out]
        else:                                                                      # a Linear's, uneven
            pad = lambda t: torch.cat([t, t.new_zeros(t.shape[0], 1)], dim=1)  # noqa: E731
            xs = pad(x)[:, self._index].transpose(0, 1)                            # [P, T, w]
            ws = pad(self.weight)[:, self._index].permute(1, 2, 0)                 # [P, w, out]
        return torch.bmm(xs, ws.to(xs.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        parts = self.partial_sums(x.reshape(-1, self.in_features).to(compute_dtype(x)))
        y = _ReduceFromRanks.apply(parts, self.group, self.site_record).reshape(*lead, self.out_features)
        return y if self.bias is None else y + self.bias

    def full_weight(self) -> torch.Tensor:
        """The nn.Linear weight [out, in] these shards make up."""
        if self.weight.dim() == 2:
            return self.weight
        return self.weight.permute(2, 0, 1).reshape(self.out_features, self.in_features)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, ranks={self.group.ranks}, "
                f"site={self.site}, bias={self.bias is not None}")


__all__ = ["TensorParallelGroup", "Site", "ColumnParallelLinear", "RowParallelLinear", "ATTENTION", "MLP",
           "compute_dtype", "slice_begin"]
