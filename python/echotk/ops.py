"""The all-reduce as torch custom ops (torch.library), with fake implementations for torch.compile.

`echotk::allreduce(parts, m1, m2, spec, ranks, direction, fresh) -> (out, report)` mutates the
compensator state m1, m2 ([P, n] fp32) in place; `echotk::exact_allreduce(parts, dtype, ranks)
-> (out, report)` is the exact sum. `report` is a float64 tensor of REPORT_SLOTS values
(echotk.AllReduceReport names them). CPU tensors run the C++ reference; CUDA tensors run the
one-GPU emulation kernel when the extension was built with it.
"""
from __future__ import annotations

import functools
from typing import Tuple

import torch

from . import _C
from ._spec import Spec

REPORT_SLOTS = _C.REPORT_SLOTS


@functools.lru_cache(maxsize=None)
def _handle(spec_key: str, ranks: int):
    return Spec.from_key(spec_key).handle(ranks)


def _require_cuda_build():
    if not getattr(_C, "HAS_CUDA", False):
        raise RuntimeError("echotk was built without CUDA: device='cuda' needs the extension built "
                           "with -C cmake.define.ECHO_ENABLE_CUDA=ON on a machine with nvcc")


@torch.library.custom_op("echotk::allreduce", mutates_args=("m1", "m2"))
def allreduce(parts: torch.Tensor, m1: torch.Tensor, m2: torch.Tensor, spec: str, ranks: int,
              direction: str, fresh: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    out = torch.empty(parts.shape[1], dtype=parts.dtype, device=parts.device)
    report = torch.zeros(REPORT_SLOTS, dtype=torch.float64, device=parts.device)
    handle = _handle(spec, ranks)
    if parts.device.type == "cpu":
        _C.allreduce(handle, direction, parts, out, m1, m2, fresh, report)
    elif parts.device.type == "cuda":
        _require_cuda_build()
        # The kernel runs on the caller's current stream (CUDA graphs capture it there).
        _C.allreduce_cuda(handle, direction, parts, out, m1, m2, fresh, report,
                          torch.cuda.current_stream(parts.device).cuda_stream)
    else:
        raise ValueError(f"parts is on {parts.device}; echotk runs on cpu or cuda")
    return out, report


@allreduce.register_fake
def _(parts, m1, m2, spec, ranks, direction, fresh):
    return (parts.new_empty(parts.shape[1]),
            parts.new_empty(REPORT_SLOTS, dtype=torch.float64))


@torch.library.custom_op("echotk::exact_allreduce", mutates_args=())
def exact_allreduce(parts: torch.Tensor, dtype: str, ranks: int) -> Tuple[torch.Tensor, torch.Tensor]:
    if parts.device.type == "cpu":
        out = torch.empty(parts.shape[1], dtype=parts.dtype)
        report = torch.zeros(REPORT_SLOTS, dtype=torch.float64)
        _C.exact_allreduce(dtype, ranks, parts, out, report)
        return out, report
    # Elsewhere the same arithmetic in torch: fp32 adds in rank order, one rounding to dtype
    # (round to nearest even), as echo::exact_allreduce does. The report holds only exact_path.
    acc = parts[0].float()
    for r in range(1, parts.shape[0]):
        acc = acc + parts[r].float()
    report = torch.zeros(REPORT_SLOTS, dtype=torch.float64, device=parts.device)
    report[2] = 1.0
    return acc.to(parts.dtype), report


@exact_allreduce.register_fake
def _(parts, dtype, ranks):
    return (parts.new_empty(parts.shape[1]),
            parts.new_empty(REPORT_SLOTS, dtype=torch.float64))
