"""echotk.tensor_parallel: emulates P-way tensor parallelism in a Hugging Face causal LM.

Every row-parallel site (attention o_proj and MLP down_proj of each layer, in that order: site
2l and 2l + 1) computes P partial products over contiguous slices of its input features,
[r * in / P, (r + 1) * in / P) as docs/model.md splits SmolLM2 (head-aligned whenever P divides
the head count), rounds them to the all-reduce's dtype as a 16-bit GEMM's output would be, and
combines them with the given all-reduce; the bias is added once, after. The all-reduce is reset
at the start of every forward pass.
"""
from __future__ import annotations

from typing import Callable, List, Optional

import torch
from torch import nn

from ._allreduce import TORCH_DTYPES

# Architectures whose decoder layers are self_attn.o_proj + mlp.down_proj under model.model.layers.
SUPPORTED = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
             "Gemma3ForCausalLM")
ATTENTION, MLP = 0, 1  # site kinds, as /site_kind in docs/trace-format.md

# Receives (site, kind, parts [P, n]) at every site of a pass (echotk.capture records them).
SiteObserver = Callable[[int, int, torch.Tensor], None]


def slice_begin(in_features: int, ranks: int, rank: int) -> int:
    """First input feature of rank `rank` (model/src/tensor_parallel.cpp)."""
    return in_features * rank // ranks


class RowParallelLinear(nn.Module):
    """A Linear whose input features are split over P ranks, its partial sums all-reduced."""

    def __init__(self, linear: nn.Linear, ranks: int, allreduce, site: int, kind: int, shared):
        super().__init__()
        if linear.in_features < ranks:
            raise ValueError(f"site {site} has {linear.in_features} input features for {ranks} ranks")
        self.weight = linear.weight  # the same Parameters: state_dict keys stay as they were
        self.bias = linear.bias
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.ranks, self.site, self.kind = ranks, site, kind
        self.allreduce = allreduce
        self._shared = shared
        self.__dict__["_original"] = linear  # kept for undo, not registered as a submodule
        width = max(slice_begin(self.in_features, ranks, r + 1) - slice_begin(self.in_features, ranks, r)
                    for r in range(ranks))
        self._even = self.in_features % ranks == 0
        if not self._even:
            # Uneven slices: gather each rank's features into a zero-padded [P, width] block
            # (index in_features is a zero column), so one batched matmul still does all ranks.
            index = torch.full((ranks, width), self.in_features, dtype=torch.long)
            for r in range(ranks):
                lo, hi = slice_begin(self.in_features, ranks, r), slice_begin(self.in_features, ranks, r + 1)
                index[r, : hi - lo] = torch.arange(lo, hi)
            self.register_buffer("_index", index, persistent=False)

    def partial_sums(self, x: torch.Tensor) -> torch.Tensor:
        """[P, tokens, out]: rank r's x[:, slice_r] @ W[:, slice_r]^T, one batched matmul."""
        P, tokens = self.ranks, x.shape[0]
        if self._even:
            width = self.in_features // P
            xs = x.reshape(tokens, P, width).transpose(0, 1)                   # [P, T, w]
            ws = self.weight.reshape(self.out_features, P, width).permute(1, 2, 0)  # [P, w, out]
        else:
            pad = lambda t: torch.cat([t, t.new_zeros(t.shape[0], 1)], dim=1)
            xs = pad(x)[:, self._index].transpose(0, 1)                         # [P, T, w]
            ws = pad(self.weight)[:, self._index].permute(1, 2, 0)              # [P, w, out]
        return torch.bmm(xs, ws.to(xs.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        flat = x.reshape(-1, self.in_features)
        # Each rank's GEMM writes its output in the serving dtype.
        parts = self.partial_sums(flat).to(TORCH_DTYPES[self.allreduce.dtype])
        parts = parts.reshape(self.ranks, -1)
        if self._shared.observer is not None:
            self._shared.observer(self.site, self.kind, parts)
        y = self.allreduce(parts).reshape(*lead, self.out_features).to(x.dtype)
        if self.bias is not None:
            y = y + self.bias
        return y

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"ranks={self.ranks}, site={self.site}, bias={self.bias is not None}")


class _Shared:
    """What the sites of one model share: the all-reduce, the observer, the pass hook."""

    def __init__(self, ranks: int, allreduce):
        self.ranks = ranks
        self.allreduce = allreduce
        self.observer: Optional[SiteObserver] = None
        self.sites: List[RowParallelLinear] = []
        self.hook = None


def _check_architecture(model: nn.Module):
    name = type(model).__name__
    if name not in SUPPORTED:
        raise ValueError(f"echotk.tensor_parallel supports {', '.join(SUPPORTED)}; got {name}")
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None or len(layers) == 0:
        raise ValueError(f"{name} has no decoder layers at model.model.layers")
    return layers


def tensor_parallel(model: nn.Module, ranks: int, allreduce) -> nn.Module:
    """Makes `model` (in place, and returns it) compute its 2 x layers row-parallel sites as P
    partial sums all-reduced by `allreduce` (an echotk.AllReduce or ExactAllReduce of P ranks)."""
    layers = _check_architecture(model)
    if getattr(model, "_echotk_tp", None) is not None:
        raise ValueError("the model is tensor-parallel already; call echotk.tensor_parallel once")
    if getattr(allreduce, "ranks", None) != ranks:
        raise ValueError(f"allreduce has ranks={getattr(allreduce, 'ranks', None)} but ranks={ranks}")
    shared = _Shared(ranks, allreduce)
    for layer_idx, layer in enumerate(layers):
        for attr_path, kind in (("self_attn.o_proj", ATTENTION), ("mlp.down_proj", MLP)):
            owner_name, attr = attr_path.split(".")
            owner = getattr(layer, owner_name)
            linear = getattr(owner, attr)
            if not isinstance(linear, nn.Linear):
                raise ValueError(f"layer {layer_idx}: {attr_path} is {type(linear).__name__}, not nn.Linear")
            site = RowParallelLinear(linear, ranks, allreduce, 2 * layer_idx + kind, kind, shared)
            setattr(owner, attr, site)
            shared.sites.append(site)
    # Every forward pass starts the compensator afresh, as the paper and `echotk ppl` do.
    shared.hook = model.register_forward_pre_hook(lambda module, args: shared.allreduce.reset())
    model._echotk_tp = shared
    return model


def undo_tensor_parallel(model: nn.Module) -> nn.Module:
    """Puts the original Linear modules back (echotk.capture uses it for models it converted)."""
    shared = getattr(model, "_echotk_tp", None)
    if shared is None:
        return model
    for layer in _check_architecture(model):
        for owner_name, attr in (("self_attn", "o_proj"), ("mlp", "down_proj")):
            owner = getattr(layer, owner_name)
            site = getattr(owner, attr)
            if isinstance(site, RowParallelLinear):
                setattr(owner, attr, site._original)
    shared.hook.remove()
    model._echotk_tp = None
    return model
