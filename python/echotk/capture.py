"""echotk.capture: records a model's per-rank contributions as an echo-trace v1 file
(docs/trace-format.md) that `echotk replay`, `compare` and `prove` read."""
from __future__ import annotations

import os
import tempfile
from typing import Optional

import numpy as np
import torch
from torch import nn

from ._allreduce import ExactAllReduce
from .tensor_parallel import _check_architecture, tensor_parallel, undo_tensor_parallel

_DTYPE_ATTR = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def _norm_inputs(model: nn.Module, layer) -> tuple:
    """The norms whose inputs are the residual stream before the attention site and before the
    MLP site of `layer` (Gemma 3 normalizes the attention output before adding it)."""
    before_mlp = getattr(layer, "pre_feedforward_layernorm", None)
    if before_mlp is None:
        before_mlp = layer.post_attention_layernorm
    return layer.input_layernorm, before_mlp


def write_trace(path: str, contributions: np.ndarray, dtype: str, ranks: int, *,
                hidden_states: Optional[np.ndarray] = None, site_kind: Optional[np.ndarray] = None,
                tokens: Optional[int] = None, hidden: Optional[int] = None, model: str = "",
                source: str = "", direction: str = "forward") -> None:
    """Writes an echo-trace v1 file atomically: contributions [passes, sites, ranks, n] float32."""
    import h5py

    if contributions.ndim != 4 or contributions.shape[2] != ranks:
        raise ValueError(f"contributions must be [passes, sites, {ranks}, n], got {contributions.shape}")
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".echo-trace-", suffix=".h5", dir=folder)
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as f:
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
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


@torch.no_grad()
def capture(model: nn.Module, input_ids: torch.Tensor, ranks: int, path: str, *,
            dtype: str = "bf16", hidden_states: bool = True, model_name: Optional[str] = None,
            source: str = "echotk.capture") -> str:
    """Runs `model` once per row of input_ids ([passes, tokens] or [tokens]: one pass each) and
    writes every rank's contribution at every site, and the residual stream, to `path`.

    A model not yet tensor-parallel is made so for the capture with the exact all-reduce in
    `dtype` (as `echotk capture` does by default) and restored afterwards; a tensor-parallel
    model keeps its own all-reduce (its ranks must equal `ranks`)."""
    layers = _check_architecture(model)
    if input_ids.dim() == 1:
        input_ids = input_ids.unsqueeze(0)
    if input_ids.dim() != 2 or input_ids.shape[1] < 1 or input_ids.shape[0] < 1:
        raise ValueError(f"input_ids must be [passes, tokens] or [tokens], got {list(input_ids.shape)}")
    shared = getattr(model, "_echotk_tp", None)
    converted = shared is None
    if converted:
        tensor_parallel(model, ranks, ExactAllReduce(ranks, dtype=dtype, device=input_ids.device))
        shared = model._echotk_tp
    elif shared.ranks != ranks:
        raise ValueError(f"the model is tensor-parallel over {shared.ranks} ranks, not {ranks}")
    dtype = shared.allreduce.dtype
    num_sites = 2 * len(layers)
    passes, tokens = input_ids.shape
    hidden_size = model.config.hidden_size
    n = tokens * hidden_size
    contributions = np.zeros((passes, num_sites, ranks, n), dtype=np.float32)
    hidden = np.zeros((passes, num_sites + 1, n), dtype=np.float32) if hidden_states else None
    current = {"pass": 0}

    def on_site(site, kind, parts):
        contributions[current["pass"], site] = parts.float().cpu().numpy()

    def hidden_hook(index):
        def hook(module, args):
            if hidden is not None:
                hidden[current["pass"], index] = args[0].float().reshape(-1).cpu().numpy()
        return hook

    handles = []
    for layer_idx, layer in enumerate(layers):
        before_attention, before_mlp = _norm_inputs(model, layer)
        handles.append(before_attention.register_forward_pre_hook(hidden_hook(2 * layer_idx)))
        handles.append(before_mlp.register_forward_pre_hook(hidden_hook(2 * layer_idx + 1)))
    handles.append(model.model.norm.register_forward_pre_hook(hidden_hook(num_sites)))
    shared.observer = on_site
    try:
        for p in range(passes):
            current["pass"] = p
            model(input_ids=input_ids[p : p + 1], use_cache=False)
    finally:
        shared.observer = None
        for h in handles:
            h.remove()
        if converted:
            undo_tensor_parallel(model)

    site_kind = np.array([k % 2 for k in range(num_sites)], dtype=np.int8)
    name = model_name or getattr(model.config, "name_or_path", "") or type(model).__name__
    write_trace(path, contributions, dtype, ranks, hidden_states=hidden, site_kind=site_kind,
                tokens=tokens, hidden=hidden_size, model=name, source=source)
    return path
