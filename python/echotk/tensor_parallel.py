"""echotk.tensor_parallel: emulates P-way tensor parallelism in a Hugging Face causal LM.

Every row-parallel site (attention o_proj and MLP down_proj of each layer, in that order: site
2l and 2l + 1) becomes an echotk.nn.RowParallelLinear over one TensorParallelGroup: it computes P
partial products over contiguous slices of its input features, [r * in / P, (r + 1) * in / P) as
docs/model.md splits SmolLM2 (head-aligned whenever P divides the head count), rounds them to the
all-reduce's dtype as a 16-bit GEMM's output would be, and combines them with the given
all-reduce; the bias is added once, after. The all-reduce is reset at the start of every forward
pass. Each site's record (echotk.nn.Site) carries the weight of the norm the model applies to the
site's output before the residual add, where it has one (Gemma 3).
"""
from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Tuple

from torch import nn

from .nn import ATTENTION, MLP, RowParallelLinear, Site, TensorParallelGroup, slice_begin


@dataclasses.dataclass(frozen=True)
class SiteModules:
    """Where a decoder layer keeps what one site needs, as attribute paths from the layer."""

    linear: str                # the row-parallel Linear
    input_norm: str            # the norm whose input is the residual stream before the site
    post_norm: Optional[str]   # the norm applied to the site's output before the residual add
    post_norm_offset: float = 0.0  # the norm scales by weight + offset (Gemma 3: 1 + weight)


_PRE_NORM = (SiteModules("self_attn.o_proj", "input_layernorm", None),
             SiteModules("mlp.down_proj", "post_attention_layernorm", None))
_GEMMA3 = (SiteModules("self_attn.o_proj", "input_layernorm", "post_attention_layernorm", 1.0),
           SiteModules("mlp.down_proj", "pre_feedforward_layernorm", "post_feedforward_layernorm", 1.0))
# Per architecture, each decoder layer's sites in order (ATTENTION, then MLP), under model.model.layers.
SITE_MODULES: Dict[str, Tuple[SiteModules, SiteModules]] = {
    "LlamaForCausalLM": _PRE_NORM, "MistralForCausalLM": _PRE_NORM, "Qwen2ForCausalLM": _PRE_NORM,
    "Qwen3ForCausalLM": _PRE_NORM, "Gemma3ForCausalLM": _GEMMA3}
SUPPORTED = tuple(SITE_MODULES)


@dataclasses.dataclass
class _Conversion:
    """What tensor_parallel() did to a model, for undo_tensor_parallel()."""

    group: TensorParallelGroup
    hook: object                                    # the forward pre-hook that starts each pass
    replaced: List[Tuple[nn.Module, str, nn.Linear]]  # (owner, attribute, the original Linear)


def _path(module: nn.Module, path: str) -> Tuple[nn.Module, str]:
    """(owner, attribute) of a dotted attribute path below `module`."""
    *owners, attr = path.split(".")
    for name in owners:
        module = getattr(module, name)
    return module, attr


def decoder_layers(model: nn.Module):
    """model.model.layers of a supported architecture (ValueError naming the class otherwise)."""
    name = type(model).__name__
    if name not in SUPPORTED:
        raise ValueError(f"echotk.tensor_parallel supports {', '.join(SUPPORTED)}; got {name}")
    layers = getattr(getattr(model, "model", None), "layers", None)
    if layers is None or len(layers) == 0:
        raise ValueError(f"{name} has no decoder layers at model.model.layers")
    return layers


def residual_stream_inputs(model: nn.Module) -> List[nn.Module]:
    """Per site in order, the module whose input is the residual stream before the site, then the
    final norm (whose input is the stream after the last site): where echotk.capture reads it."""
    modules = []
    for layer in decoder_layers(model):
        for where in SITE_MODULES[type(model).__name__]:
            owner, attr = _path(layer, where.input_norm)
            modules.append(getattr(owner, attr))
    return modules + [model.model.norm]


def tensor_parallel(model: nn.Module, ranks: int, allreduce) -> nn.Module:
    """Makes `model` (in place, and returns it) compute its 2 x layers row-parallel sites as P
    partial sums all-reduced by `allreduce` (an echotk.AllReduce or ExactAllReduce of P ranks)."""
    layers = decoder_layers(model)
    if getattr(model, "_echotk_tp", None) is not None:
        raise ValueError("the model is tensor-parallel already; call echotk.tensor_parallel once")
    group = TensorParallelGroup(ranks, allreduce)  # ValueError unless allreduce has `ranks` ranks
    replaced = []
    for layer_idx, layer in enumerate(layers):
        for kind, where in zip((ATTENTION, MLP), SITE_MODULES[type(model).__name__]):
            owner, attr = _path(layer, where.linear)
            linear = getattr(owner, attr)
            if not isinstance(linear, nn.Linear):
                raise ValueError(f"layer {layer_idx}: {where.linear} is {type(linear).__name__}, not nn.Linear")
            post_norm = None
            if where.post_norm is not None:
                norm_owner, norm_attr = _path(layer, where.post_norm)
                post_norm = getattr(norm_owner, norm_attr).weight
            setattr(owner, attr, RowParallelLinear.from_linear(group, linear, 2 * layer_idx + kind, kind, post_norm,
                                                               where.post_norm_offset))
            replaced.append((owner, attr, linear))
    # Every forward pass starts the compensator afresh, as the paper and `echotk ppl` do.
    hook = model.register_forward_pre_hook(lambda module, args: group.reset())
    model._echotk_tp = _Conversion(group, hook, replaced)
    return model


def tensor_parallel_group(model: nn.Module) -> Optional[TensorParallelGroup]:
    """The TensorParallelGroup of a model tensor_parallel() converted (None for any other)."""
    conversion = getattr(model, "_echotk_tp", None)
    return None if conversion is None else conversion.group


def undo_tensor_parallel(model: nn.Module) -> nn.Module:
    """Puts the original Linear modules back (echotk.capture uses it for models it converted)."""
    conversion = getattr(model, "_echotk_tp", None)
    if conversion is None:
        return model
    for owner, attr, linear in conversion.replaced:
        setattr(owner, attr, linear)
    conversion.hook.remove()
    model._echotk_tp = None
    return model


__all__ = ["tensor_parallel", "undo_tensor_parallel", "tensor_parallel_group", "decoder_layers",
           "residual_stream_inputs", "RowParallelLinear", "Site", "SUPPORTED", "slice_begin"]
