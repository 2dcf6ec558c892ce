"""The all-reduce as torch custom ops (torch.library), with fake implementations for torch.compile.

`echotk::allreduce(parts, m1, m2, spec, ranks, direction, fresh) -> (out, report)` runs the C++
reference on CPU tensors and mutates the compensator state m1, m2 ([P, n] fp32) in place; `report`
is a float64 tensor of REPORT_SLOTS values (echotk.AllReduceReport names them); site_row and
site_weight_rms give the call's site where the spec's compensator units are 'stream' (-1: not
given; 0: no post-norm; > 0: the post-norm's row length, with its weight RMS), site_weights
the post-norm's weights [site_row] fp32 (read by compensator profile 'sqrt' and compensator
'deficit'; None: not given),
and site_kind the site's kind (0 attention, 1 MLP, -1 unknown).
`echotk::allreduce_ratios(parts, m1, m2, ratios, ratios_held, spec, ranks, direction, fresh, site_row,
site_weight_rms, site_weights, site_kind)` is the same call where it keeps compensator gains 'sum''s
row ratios per site kind (docs/numerics.md 6.1 step 8): ratios [2, P, n / site_row] fp32 and
ratios_held [2] uint8, mutated in place like m1, m2 (every argument required).
`echotk::emulate_allreduce(parts, state, spec, ranks, direction, fresh, keep_compensated) -> (out,
workspace, compensated)` runs the one-GPU emulation kernel on CUDA tensors, on the current stream,
with no host synchronization (CUDA graphs capture it): `state` is the direction's opaque uint8
compensator state (mutated; reset first when fresh), `workspace` holds the report on the device
(_C.report_from_workspace decodes a host copy), `compensated` is x' [P, n] fp32 when
keep_compensated, else empty; site_row, site_weight_rms, site_weights ([site_row] fp32 on the
same GPU) and site_kind give the call's site as for echotk::allreduce;
`echotk::emulate_allreduce_ratios(parts, state, ratios, spec, ranks, direction, fresh, keep_compensated,
site_row, site_weight_rms, site_weights, site_kind)` also keeps compensator gains 'sum''s row ratios
between calls in ratios (uint8 [ratios_bytes] on the same GPU, mutated; every argument required).
`echotk::exact_allreduce(parts, dtype, ranks) -> (out, report)` is the exact sum on either device.
(echotk.distributed declares `echotk::comm_allreduce`, beside the communicators it calls.)
"""
from __future__ import annotations

import functools
from typing import Optional, Tuple

import torch

from . import _C
from ._report import SLOT
from ._spec import Spec

REPORT_SLOTS = _C.REPORT_SLOTS  # float64 values of a report array (echotk.AllReduceReport names them)


@functools.lru_cache(maxsize=None)
def spec_handle(spec_key: str, ranks: int):
    """The C++ spec of a Spec.key() for `ranks` ranks, made once per key and rank count."""
    return Spec.from_key(spec_key).handle(ranks)


def require_cuda_build():
    """RuntimeError unless the extension was built with the CUDA kernels."""
    if not getattr(_C, "HAS_CUDA", False):
        raise RuntimeError("echotk was built without CUDA: device='cuda' needs the extension built "
                           "with `pip install . -C cmake.define.ECHO_PYTHON_CUDA=ON` on a machine with nvcc")


def _allreduce(op, parts, m1, m2, spec, ranks, direction, fresh, site_row, site_weight_rms, site_weights, site_kind,
               ratios, ratios_held):
    """The CPU ops' body; op is the calling op's name, for the errors."""
    if parts.device.type != "cpu":
        raise ValueError(f"parts is on {parts.device}; {op} takes CPU tensors "
                         f"(CUDA tensors: {op.replace('::', '::emulate_')})")
    out = torch.empty(parts.shape[1], dtype=parts.dtype, device=parts.device)
    report = torch.zeros(REPORT_SLOTS, dtype=torch.float64, device=parts.device)
    handle = spec_handle(spec, ranks)
    _C.allreduce(handle, direction, parts, out, m1, m2, fresh, report, site_row, site_weight_rms, site_weights,
                 site_kind, ratios, ratios_held)
    return out, report


def _allreduce_fake(parts):
    return (parts.new_empty(parts.shape[1]),
            parts.new_empty(REPORT_SLOTS, dtype=torch.float64))


@torch.library.custom_op("echotk::allreduce", mutates_args=("m1", "m2"))
def allreduce(parts: torch.Tensor, m1: torch.Tensor, m2: torch.Tensor, spec: str, ranks: int,
              direction: str, fresh: bool, site_row: int = -1, site_weight_rms: float = 0.0,
              site_weights: Optional[torch.Tensor] = None, site_kind: int = -1) -> Tuple[torch.Tensor, torch.Tensor]:
    return _allreduce("echotk::allreduce", parts, m1, m2, spec, ranks, direction, fresh, site_row,
                      site_weight_rms, site_weights, site_kind, None, None)


@allreduce.register_fake
def _(parts, m1, m2, spec, ranks, direction, fresh, site_row=-1, site_weight_rms=0.0, site_weights=None,
      site_kind=-1):
    return _allreduce_fake(parts)


# Every argument required: a mutated argument left at its default is dropped by the dispatcher, which
# some torch releases' ADInplaceOrView kernel cannot take (it indexes every mutated argument).
@torch.library.custom_op("echotk::allreduce_ratios", mutates_args=("m1", "m2", "ratios", "ratios_held"))
def allreduce_ratios(parts: torch.Tensor, m1: torch.Tensor, m2: torch.Tensor, ratios: torch.Tensor,
                     ratios_held: torch.Tensor, spec: str, ranks: int, direction: str, fresh: bool, site_row: int,
                     site_weight_rms: float, site_weights: Optional[torch.Tensor],
                     site_kind: int) -> Tuple[torch.Tensor, torch.Tensor]:
    return _allreduce("echotk::allreduce_ratios", parts, m1, m2, spec, ranks, direction, fresh, site_row,
                      site_weight_rms, site_weights, site_kind, ratios, ratios_held)


@allreduce_ratios.register_fake
def _(parts, m1, m2, ratios, ratios_held, spec, ranks, direction, fresh, site_row, site_weight_rms, site_weights,
      site_kind):
    return _allreduce_fake(parts)


def state_bytes(spec: str, ranks: int, n: int) -> int:
    """Bytes of one direction's GPU compensator state for n elements per rank (0: compensator off)."""
    require_cuda_build()
    return _C.emulate_state_bytes(spec_handle(spec, ranks), n)


def ratios_bytes(spec: str, ranks: int, direction: str, n: int, site_row: int, site_weight_rms: float) -> int:
    """Bytes of the GPU row ratios compensator gains 'sum' keep between a pass's calls at post-norm
    sites of site_row elements per row (0 for every other call)."""
    require_cuda_build()
    return _C.emulate_ratios_bytes(spec_handle(spec, ranks), direction, n, site_row, site_weight_rms)


def _emulate_allreduce(op, parts, state, spec, ranks, direction, fresh, keep_compensated, site_row, site_weight_rms,
                       site_weights, site_kind, ratios):
    """The GPU ops' body; op is the calling op's name, for the errors."""
    if parts.device.type != "cuda":
        raise ValueError(f"parts is on {parts.device}; {op} takes CUDA tensors "
                         f"(CPU tensors: {op.replace('::emulate_', '::')})")
    require_cuda_build()
    n = parts.shape[1]
    out = torch.empty(n, dtype=parts.dtype, device=parts.device)
    # Zeroed: the kernel writes only the report's bytes, and the op's outputs must be deterministic.
    workspace = torch.zeros(_C.WORKSPACE_BYTES, dtype=torch.uint8, device=parts.device)
    shape = (ranks, n) if keep_compensated else (0,)
    compensated = torch.empty(shape, dtype=torch.float32, device=parts.device)
    handle = spec_handle(spec, ranks)
    # Compensator units 'stream' at a post-norm site: scratch for the rows' gains (else empty).
    gains = torch.empty(_C.emulate_gains_bytes(handle, direction, n, site_row, site_weight_rms),
                        dtype=torch.uint8, device=parts.device)
    with torch.cuda.device(parts.device):
        # The kernel runs on the caller's current stream (CUDA graphs capture it there).
        _C.allreduce_cuda(handle, direction, parts, out, state, fresh, workspace, compensated, site_row,
                          site_weight_rms, gains, site_weights,
                          torch.cuda.current_stream(parts.device).cuda_stream, site_kind, ratios)
    return out, workspace, compensated


def _emulate_fake(parts, ranks, keep_compensated):
    n = parts.shape[1]
    return (parts.new_empty(n), parts.new_empty(_C.WORKSPACE_BYTES, dtype=torch.uint8),
            parts.new_empty((ranks, n) if keep_compensated else (0,), dtype=torch.float32))


@torch.library.custom_op("echotk::emulate_allreduce", mutates_args=("state",))
def emulate_allreduce(parts: torch.Tensor, state: torch.Tensor, spec: str, ranks: int, direction: str,
                      fresh: bool, keep_compensated: bool, site_row: int = -1, site_weight_rms: float = 0.0,
                      site_weights: Optional[torch.Tensor] = None, site_kind: int = -1
                      ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _emulate_allreduce("echotk::emulate_allreduce", parts, state, spec, ranks, direction, fresh,
                              keep_compensated, site_row, site_weight_rms, site_weights, site_kind, None)


@emulate_allreduce.register_fake
def _(parts, state, spec, ranks, direction, fresh, keep_compensated, site_row=-1, site_weight_rms=0.0,
      site_weights=None, site_kind=-1):
    return _emulate_fake(parts, ranks, keep_compensated)


# Every argument required, as echotk::allreduce_ratios's.
@torch.library.custom_op("echotk::emulate_allreduce_ratios", mutates_args=("state", "ratios"))
def emulate_allreduce_ratios(parts: torch.Tensor, state: torch.Tensor, ratios: torch.Tensor, spec: str, ranks: int,
                             direction: str, fresh: bool, keep_compensated: bool, site_row: int,
                             site_weight_rms: float, site_weights: Optional[torch.Tensor], site_kind: int
                             ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _emulate_allreduce("echotk::emulate_allreduce_ratios", parts, state, spec, ranks, direction, fresh,
                              keep_compensated, site_row, site_weight_rms, site_weights, site_kind, ratios)


@emulate_allreduce_ratios.register_fake
def _(parts, state, ratios, spec, ranks, direction, fresh, keep_compensated, site_row, site_weight_rms, site_weights,
      site_kind):
    return _emulate_fake(parts, ranks, keep_compensated)


@torch.library.custom_op("echotk::exact_allreduce", mutates_args=())
def exact_allreduce(parts: torch.Tensor, dtype: str, ranks: int) -> Tuple[torch.Tensor, torch.Tensor]:
    if parts.device.type == "cpu":
        out = torch.empty(parts.shape[1], dtype=parts.dtype)
        report = torch.zeros(REPORT_SLOTS, dtype=torch.float64)
        _C.exact_allreduce(dtype, ranks, parts, out, report)
        return out, report
    # Elsewhere the same arithmetic in torch: fp32 adds in rank order, one rounding to dtype
    # (round to nearest even), as echo::exact_allreduce does. The report holds only exact_path.
    acc = parts[0].to(torch.float32, copy=True)  # a new tensor: an op's output may not alias its input
    for r in range(1, parts.shape[0]):
        acc = acc + parts[r].float()
    report = torch.zeros(REPORT_SLOTS, dtype=torch.float64, device=parts.device)
    report.narrow(0, SLOT["exact_path"], 1).fill_(1.0)  # a fill, not a host copy: CUDA graphs capture it
    return acc.to(parts.dtype), report


@exact_allreduce.register_fake
def _(parts, dtype, ranks):
    return (parts.new_empty(parts.shape[1]),
            parts.new_empty(REPORT_SLOTS, dtype=torch.float64))
