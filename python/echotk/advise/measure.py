"""What `python -m echotk advise` measures per site before it evaluates a candidate: a short trace
of the model's 16-bit run (echotk.capture), replayed through Echo 4-bit with and without the
compensator, as docs/outliers.md and docs/results-gemma3.md measure by hand (echotk.advise.sites
holds the arithmetic). Per site: max/RMS of the contributions, the groups past the fp16 scale
limit (wide groups, docs/numerics.md 2.4), whether a norm follows the site before its output
joins the residual stream (a post-norm, as Gemma 3's) and that norm's gain on the site's error,
the relative error, and per pass how much of the carried error cancels, before and after the
norms.
"""
from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import Dict, List, Optional

import numpy as np
import torch
from torch import nn

from .._allreduce import AllReduce
from .._spec import Spec
from ..capture import capture
from ..tensor_parallel import SITE_MODULES, decoder_layers
from . import sites

TRACE_PASSES = 2
TRACE_TOKENS = 64   # per pass; the calibration trace of docs/outliers.md is 2 x 64 tokens too
# The replays whose errors are measured: Echo 4-bit as the paper defines it, and the same
# quantizer without the compensator.
REPLAYS = {"echo4": Spec(), "nocomp4": Spec(compensator="off")}
# The narrowest codes any candidate sends; a group past the fp16 scale limit at 4 bits is one
# that `overflow_groups="poison"` would turn into NaN (docs/numerics.md 2.1, 2.4).
NARROWEST = Spec(bits=4, compensator="off", overflow_groups="poison")


@dataclasses.dataclass
class SiteMeasures:
    """Per site k (arrays of length sites) and per replay (keys of REPLAYS)."""

    kind: np.ndarray            # ATTENTION (0) or MLP (1)
    peak_to_rms: np.ndarray     # max|x| / rms(x) of the contributions
    wide_groups: np.ndarray     # groups past the fp16 scale limit at 4 bits, over the trace
    post_norm: np.ndarray       # a norm takes the site's output before the residual stream
    gain: np.ndarray            # the norm's ||f_k|| / ||e_k|| under Echo 4-bit (median over passes); 1 without one
    relative_error: Dict[str, np.ndarray]       # ||e_k|| / ||sum_i x_k,i|| (mean over passes)
    cancellation: Dict[str, np.ndarray]         # per pass, of e (before the norms)
    cancellation_after: Dict[str, np.ndarray]   # per pass, of f (after the norms)
    tokens: int                 # per pass of the trace
    passes: int


def _site_linears(model: nn.Module) -> List[nn.Module]:
    """The row-parallel projections in site order (2l: attention o_proj, 2l + 1: MLP down_proj)."""
    linears = []
    for layer in decoder_layers(model):
        for where in SITE_MODULES[type(model).__name__]:
            owner = layer
            for name in where.linear.split("."):
                owner = getattr(owner, name)
            linears.append(owner)
    return linears


@torch.no_grad()
def find_post_norms(model: nn.Module, input_ids: torch.Tensor) -> List[Optional[nn.Module]]:
    """Per site, the norm module whose input is the site's output itself (Gemma 3's
    post_attention_layernorm and post_feedforward_layernorm), or None where the output joins the
    residual stream as it is (pre-norm models): found by running `model` once on `input_ids`."""
    outputs: List[tuple] = []   # (output tensor, site) of the pass, kept alive for the identity test
    found: List[Optional[nn.Module]] = [None] * (2 * len(decoder_layers(model)))

    def on_site(site):
        return lambda module, args, out: outputs.append((out, site))

    def on_norm(module, args):
        for out, site in outputs:
            if args and args[0] is out and found[site] is None:
                found[site] = module

    handles = [m.register_forward_hook(on_site(k)) for k, m in enumerate(_site_linears(model))]
    handles += [m.register_forward_pre_hook(on_norm) for m in model.modules() if "norm" in type(m).__name__.lower()]
    try:
        model(input_ids=input_ids[:1], use_cache=False)
    finally:
        for h in handles:
            h.remove()
    return found


def record(model: nn.Module, input_ids: torch.Tensor, ranks: int) -> np.ndarray:
    """The bf16 contributions [passes, sites, ranks, n] of the 16-bit run, through echotk.capture
    (a trace file in a temporary folder, read back and removed)."""
    import h5py

    with tempfile.TemporaryDirectory(prefix="echotk-advise-") as folder:
        path = os.path.join(folder, "trace.h5")
        capture(model, input_ids, ranks=ranks, path=path, hidden_states=False, source="python -m echotk advise")
        with h5py.File(path, "r") as f:
            return f["contributions"][:]


def replay(contributions: np.ndarray, spec: Spec, device) -> tuple:
    """(y, e) [passes, sites, n] float64: each site's all-reduced output and net error
    y - sum_i x_i, the sites of a pass in order with the state carried (reset every pass), as
    `echotk replay --save-outputs` gives them."""
    passes, num_sites, ranks, n = contributions.shape
    reduce = AllReduce(ranks=ranks, spec=spec, device=device)
    y = np.empty((passes, num_sites, n))
    e = np.empty((passes, num_sites, n))
    for p in range(passes):
        reduce.reset()
        for k in range(num_sites):
            x = torch.from_numpy(contributions[p, k]).to(torch.bfloat16).to(device)
            y[p, k] = reduce(x).double().cpu().numpy()
            e[p, k] = y[p, k] - contributions[p, k].astype(np.float64).sum(axis=0)
    return y, e


def count_wide_groups(contributions: np.ndarray, device) -> np.ndarray:
    """Per site, the groups of a 4-bit call (pushed contributions and gathered sum) whose fp16
    scale overflows: the poisoned groups of NARROWEST, which travel as wide groups under the
    default overflow_groups="wide"."""
    passes, num_sites, ranks, _ = contributions.shape
    reduce = AllReduce(ranks=ranks, spec=NARROWEST, device=device)
    counts = np.zeros(num_sites, dtype=np.int64)
    for p in range(passes):
        for k in range(num_sites):
            reduce.reset()
            reduce(torch.from_numpy(contributions[p, k]).to(torch.bfloat16).to(device))
            counts[k] += reduce.report.poisoned_groups
    return counts


def _norm_function(norms: List[Optional[nn.Module]], device):
    """norm(k, v) for sites.post_norm_errors: site k's norm module on v (float64 in, float64 out;
    the module computes in its own precision), the identity where a site has none."""
    @torch.no_grad()
    def norm(k, v):
        if norms[k] is None:
            return v
        return norms[k](torch.from_numpy(v).float().to(device)).double().cpu().numpy()
    return norm


def measure_sites(model: nn.Module, input_ids: torch.Tensor, ranks: int, device) -> SiteMeasures:
    """Every measurement of SiteMeasures on `model` (not tensor-parallel) over `input_ids`
    [passes, tokens] on `device`."""
    norms = find_post_norms(model, input_ids)
    contributions = record(model, input_ids, ranks)
    passes, num_sites = contributions.shape[:2]
    hidden = model.config.hidden_size
    norm = _norm_function(norms, device)
    exact = contributions.astype(np.float64).sum(axis=2)
    relative, before, after, gains = {}, {}, {}, None
    for name, spec in REPLAYS.items():
        y, e = replay(contributions, spec, device)
        f, _ = sites.post_norm_errors(y, e, hidden, norm)
        with np.errstate(divide="ignore", invalid="ignore"):  # a site whose sum is zero: inf or nan
            relative[name] = (sites.site_norms(e) / sites.site_norms(exact)).mean(axis=0)
        before[name], after[name] = sites.cancellation(e), sites.cancellation(f)
        if gains is None:
            gains = np.median(sites.norm_gain(f, e), axis=0)
    return SiteMeasures(kind=np.array([k % 2 for k in range(num_sites)]),
                        peak_to_rms=sites.peak_to_rms(contributions),
                        wide_groups=count_wide_groups(contributions, device),
                        post_norm=np.array([m is not None for m in norms]), gain=gains,
                        relative_error=relative, cancellation=before, cancellation_after=after,
                        tokens=int(input_ids.shape[1]), passes=passes)
