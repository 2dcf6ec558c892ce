"""echotk.capture: records a model's per-rank contributions as an echo-trace v1 file
(docs/trace-format.md) that `echotk replay`, `compare` and `prove` read."""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from torch import nn

from ._allreduce import ExactAllReduce
from ._util import atomic_path
from .tensor_parallel import (decoder_layers, residual_stream_inputs, tensor_parallel, tensor_parallel_group,
                              undo_tensor_parallel)

_DTYPE_ATTR = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def write_trace(path: str, contributions: np.ndarray, dtype: str, ranks: int, *,
                hidden_states: Optional[np.ndarray] = None, site_kind: Optional[np.ndarray] = None,
                tokens: Optional[int] = None, hidden: Optional[int] = None, model: str = "",
                source: str = "", direction: str = "forward",
                post_norm_weights: Optional[np.ndarray] = None, post_norm: Optional[str] = None) -> None:
    """Writes an echo-trace v1 file atomically: contributions [passes, sites, ranks, n] float32.
    post_norm_weights [sites, hidden] (each site's post-norm's effective scale) records post_norm
    'rmsnorm'; post_norm='none' records sites without one; neither leaves it unrecorded."""
    import h5py

    if contributions.ndim != 4 or contributions.shape[2] != ranks:
        raise ValueError(f"contributions must be [passes, sites, {ranks}, n], got {contributions.shape}")
    if post_norm_weights is not None and (hidden is None or post_norm_weights.shape != (contributions.shape[1], hidden)):
        raise ValueError(f"post_norm_weights must be [sites, hidden] = [{contributions.shape[1]}, {hidden}], "
                         f"got {list(post_norm_weights.shape)}")
    if post_norm_weights is None and post_norm not in (None, "none"):
        raise ValueError(f"post_norm must be 'none' without post_norm_weights, got {post_norm!r}")
    with atomic_path(path) as tmp, h5py.File(tmp, "w") as f:
        f.attrs["format"] = "echo-trace"
        f.attrs["version"] = np.int64(1)
        f.attrs["ranks"] = np.int64(ranks)
        f.attrs["direction"] = direction
        if tokens is not None:
            f.attrs["tokens"] = np.int64(tokens)
        if hidden is not None:
            f.attrs["hidden"] = np.int64(hidden)
        if model:
            f.attrs["model"] = model
        if source:
            f.attrs["source"] = source
        n = contributions.shape[3]
        c = f.create_dataset("contributions", data=contributions.astype(np.float32, copy=False),
                             chunks=(1, 1, ranks, n), compression="gzip", compression_opts=4)
        c.attrs["dtype"] = _DTYPE_ATTR[dtype]
        if hidden_states is not None:
            f.create_dataset("hidden_states", data=hidden_states.astype(np.float32, copy=False),
                             chunks=(1, hidden_states.shape[1], n), compression="gzip",
                             compression_opts=4)
        if site_kind is not None:
            f.create_dataset("site_kind", data=site_kind.astype(np.int8))
        if post_norm_weights is not None:
            f.attrs["post_norm"] = "rmsnorm"
            f.create_dataset("post_norm_weights", data=post_norm_weights.astype(np.float32, copy=False))
        elif post_norm is not None:
            f.attrs["post_norm"] = "none"


@torch.no_grad()
def capture(model: nn.Module, input_ids: torch.Tensor, ranks: int, path: str, *,
            dtype: str = "bf16", hidden_states: bool = True, model_name: Optional[str] = None,
            source: str = "echotk.capture") -> str:
    """Runs `model` once per row of input_ids ([passes, tokens] or [tokens]: one pass each) and
    writes every rank's contribution at every site, and the residual stream, to `path`.

    A model not yet tensor-parallel is made so for the capture with the exact all-reduce in
    `dtype` (as `echotk capture` does by default) and restored afterwards; a tensor-parallel
    model keeps its own all-reduce (its ranks must equal `ranks`)."""
    decoder_layers(model)  # ValueError for an architecture tensor_parallel does not know
    if input_ids.dim() == 1:
        input_ids = input_ids.unsqueeze(0)
    if input_ids.dim() != 2 or input_ids.shape[1] < 1 or input_ids.shape[0] < 1:
        raise ValueError(f"input_ids must be [passes, tokens] or [tokens], got {list(input_ids.shape)}")
    group = tensor_parallel_group(model)
    converted = group is None
    if converted:
        tensor_parallel(model, ranks, ExactAllReduce(ranks, dtype=dtype, device=input_ids.device))
        group = tensor_parallel_group(model)
    elif group.ranks != ranks:
        raise ValueError(f"the model is tensor-parallel over {group.ranks} ranks, not {ranks}")
    dtype = group.allreduce.dtype
    num_sites = len(group.sites)
    passes, tokens = input_ids.shape
    hidden_size = model.config.hidden_size
    n = tokens * hidden_size
    contributions = np.zeros((passes, num_sites, ranks, n), dtype=np.float32)
    hidden = np.zeros((passes, num_sites + 1, n), dtype=np.float32) if hidden_states else None
    current = {"pass": 0}

    def on_site(direction, site, kind, parts, out):
        contributions[current["pass"], site] = parts.float().cpu().numpy()

    def hidden_hook(index):
        def hook(module, args):
            hidden[current["pass"], index] = args[0].float().reshape(-1).cpu().numpy()
        return hook

    handles = []
    if hidden is not None:
        handles = [module.register_forward_pre_hook(hidden_hook(index))
                   for index, module in enumerate(residual_stream_inputs(model))]
    observer, group.observer = group.observer, on_site
    try:
        for p in range(passes):
            current["pass"] = p
            model(input_ids=input_ids[p : p + 1], use_cache=False)
    finally:
        group.observer = observer
        for h in handles:
            h.remove()
        if converted:
            undo_tensor_parallel(model)

    site_kind = np.array([site.kind for site in group.sites], dtype=np.int8)
    scales = [site.post_norm_scale() for site in group.sites]
    post_norm_weights = None
    if all(s is not None for s in scales):
        post_norm_weights = torch.stack(scales).numpy()
    elif any(s is not None for s in scales):
        raise ValueError("some sites have a post-norm and others not; the trace format records all or none")
    name = model_name or getattr(model.config, "name_or_path", "") or type(model).__name__
    write_trace(path, contributions, dtype, ranks, hidden_states=hidden, site_kind=site_kind,
                tokens=tokens, hidden=hidden_size, model=name, source=source,
                post_norm_weights=post_norm_weights, post_norm="none")
    return path
