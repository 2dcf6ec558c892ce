"""echotk.AllReduce (Echo, compensated) and echotk.ExactAllReduce (fp32 sum in rank order)."""
from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

import numpy as np
import torch

from . import _C, ops
from ._spec import Spec

TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
DIRECTIONS = ("forward", "backward")


@dataclasses.dataclass(frozen=True)
class AllReduceReport:
    """What one call did. The norms are those of `echotk replay` (sim/src/replay.cpp), in float64
    over ranks in order, with y the result, x the contributions and x' = x + c (compensated)."""

    direction: str
    poisoned_groups: int    # groups whose output is NaN (non-finite input or overflow)
    scale_exponent: int     # backward calls: the shared power-of-two exponent k
    exact_path: bool        # the small-message exact path ran
    # The rest is None on the GPU when the AllReduce was made with norms=False.
    nonfinite_inputs: Optional[int]   # NaN/Inf elements among the contributions
    injected_error: Optional[float]   # ||delta|| = ||y - sum_i x'_i||
    net_error: Optional[float]        # ||rho|| = ||y - sum_i x_i||
    correction_norm: Optional[float]  # ||C|| = ||sum_i (x'_i - x_i)||
    sum_norm: Optional[float]         # ||sum_i x_i||

    @property
    def relative_error(self) -> Optional[float]:
        """||rho|| / ||sum_i x_i|| (0 when the sum is 0; None without norms)."""
        if self.net_error is None:
            return None
        return self.net_error / self.sum_norm if self.sum_norm > 0 else 0.0

    @staticmethod
    def from_tensor(direction: str, values: torch.Tensor) -> "AllReduceReport":
        v = values.detach().cpu().tolist()
        return AllReduceReport(direction, int(v[0]), int(v[1]), bool(v[2]), int(v[3]), v[4], v[5],
                               v[6], v[7])

    @staticmethod
    def from_device(direction: str, workspace: torch.Tensor, parts: Optional[torch.Tensor],
                    compensated: Optional[torch.Tensor], out: Optional[torch.Tensor]) -> "AllReduceReport":
        """The report of a GPU call: its workspace (copied to the host here, which waits for the
        stream) and, when the call kept x', the norms of from_tensor computed on the GPU in float64,
        rank sums in rank order as the reference forms them (the sums over elements are torch's, so
        the norms may differ from the CPU's in the last bits)."""
        poisoned, exponent, exact = _C.report_from_workspace(workspace.cpu())
        if compensated is None or compensated.numel() == 0:
            return AllReduceReport(direction, poisoned, exponent, exact, None, None, None, None, None)
        x = parts.double()
        xp = compensated.double()
        sx, sxp = x[0].clone(), xp[0].clone()
        for r in range(1, x.shape[0]):
            sx += x[r]
            sxp += xp[r]
        y = out.double()
        norm = lambda v: float(torch.linalg.vector_norm(v).item())  # noqa: E731
        nonfinite = int((~torch.isfinite(parts)).sum().item())
        return AllReduceReport(direction, poisoned, exponent, exact, nonfinite, norm(y - sxp), norm(y - sx),
                               norm(sxp - sx), norm(sx))


def _as_tensor(parts) -> torch.Tensor:
    if isinstance(parts, np.ndarray):
        return torch.from_numpy(parts)
    if not isinstance(parts, torch.Tensor):
        raise TypeError(f"parts must be a torch.Tensor or numpy.ndarray, got {type(parts).__name__}")
    return parts


def _check_parts(parts: torch.Tensor, ranks: int, dtype: str, device: torch.device) -> torch.Tensor:
    """The checks the op repeats in C++, made here so they read in torch's terms; returns parts
    with uint16 raw bits viewed as the spec's 16-bit type."""
    if parts.dim() != 2 or parts.shape[0] != ranks:
        raise ValueError(f"parts must have shape [P, n] with P = {ranks}, got {list(parts.shape)}")
    if parts.shape[1] < 1:
        raise ValueError("parts has no elements (shape [P, 0]); n must be >= 1")
    want = TORCH_DTYPES[dtype]
    if parts.dtype == torch.uint16 and dtype != "fp32":
        parts = parts.view(want)
    if parts.dtype != want:
        raise ValueError(f"parts has dtype {parts.dtype} but the spec's dtype is {dtype} ({want})")
    if parts.device.type != device.type or (device.index is not None and parts.device.index != device.index):
        raise ValueError(f"parts is on {parts.device} but this all-reduce runs on {device}")
    if not parts.is_contiguous():
        raise ValueError(f"parts (shape {list(parts.shape)}) is not contiguous; pass parts.contiguous()")
    return parts


def _call_arguments(parts, direction: str, ranks: int, dtype: str,
                    device: torch.device) -> Tuple[torch.Tensor, bool]:
    """What every all-reduce call checks first: the direction, and parts as a checked tensor;
    raw_bits says parts came as uint16 bits, so the result goes back as bits too."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be 'forward' or 'backward', got {direction!r}")
    parts = _as_tensor(parts)
    raw_bits = parts.dtype == torch.uint16
    return _check_parts(parts, ranks, dtype, device), raw_bits


def _device(device, need_cuda_build: bool = True) -> torch.device:
    device = torch.device(device)
    if device.type == "cuda":
        if need_cuda_build:
            ops._require_cuda_build()
        if device.index is None and torch.cuda.is_available():
            # "cuda" means the current GPU: a tensor on another one is refused, not moved.
            device = torch.device("cuda", torch.cuda.current_device())
    elif device.type != "cpu":
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device}")
    return device


class _DirectionState:
    """One direction's compensator state and whether a pass has begun: on the CPU m1, m2 [P, n]
    fp32; on the GPU one opaque uint8 tensor in the emulation kernel's layout (ops.state_bytes)."""

    def __init__(self):
        self.m1: Optional[torch.Tensor] = None
        self.m2: Optional[torch.Tensor] = None
        self.state: Optional[torch.Tensor] = None
        self.n = 0
        self.live = False


class AllReduce:
    """The Echo all-reduce over P emulated ranks: ar(parts [P, n]) -> [n], what every rank gets.

    Each direction ("forward", "backward") keeps its own per-rank compensator state across calls
    until reset() (call it at the start of every pass; echotk.tensor_parallel does).

    On the GPU each call is one launch sequence on the current stream with no host
    synchronization; `report` reads the last call's report from the device when asked. norms=True
    (the default) keeps each call's x' so that the report has its error norms; norms=False saves
    that [P, n] fp32 buffer and its memory traffic on the GPU (the norm fields then read None). The
    CPU reference always computes them."""

    def __init__(self, ranks: int, spec: Optional[Spec] = None, device="cpu", norms: bool = True):
        self.spec = spec if spec is not None else Spec()
        if not isinstance(self.spec, Spec):
            raise TypeError(f"spec must be an echotk.Spec, got {type(self.spec).__name__}")
        self.spec.handle(ranks)  # ValueError for ranks or a spec out of range
        if torch.device(device).type == "cuda" and self.spec.outliers != 0:
            # The emulation implements wide groups and the rotation, not outliers sent exactly (its
            # emulate_can_implement refuses them too); here before any GPU work or graph capture.
            raise ValueError(f"the CUDA path implements outliers 0 only (outliers sent exactly are CPU "
                             f"reference only), got outliers {self.spec.outliers}")
        self.ranks = ranks
        self.device = _device(device)
        self.dtype = self.spec.dtype
        self._key = self.spec.key()
        self.norms = bool(norms)
        self._states = {d: _DirectionState() for d in DIRECTIONS}
        self._report = None

    def reset(self, direction: Optional[str] = None):
        """Starts a pass: the compensator state of `direction` ("forward" or "backward"; None:
        both) begins again from zero at its next call."""
        if direction is not None and direction not in DIRECTIONS:
            raise ValueError(f"direction must be 'forward', 'backward' or None, got {direction!r}")
        for name, state in self._states.items():
            if direction is None or name == direction:
                state.live = False

    def __call__(self, parts, direction: str = "forward"):
        parts, raw_bits = _call_arguments(parts, direction, self.ranks, self.dtype, self.device)
        state = self._states[direction]
        n = parts.shape[1]
        if parts.device.type == "cuda":
            out = self._call_cuda(parts, state, direction)
            return out.view(torch.uint16) if raw_bits else out
        if state.m1 is None or state.m1.shape[1] != n:
            if state.live:
                raise ValueError(f"the {direction} state holds {state.m1.shape[1]} elements per rank "
                                 f"but parts has {n}; call reset() between passes of different size")
            state.m1 = torch.zeros(self.ranks, n, dtype=torch.float32, device=parts.device)
            state.m2 = torch.zeros(self.ranks, n, dtype=torch.float32, device=parts.device)
        out, report = torch.ops.echotk.allreduce(parts, state.m1, state.m2, self._key, self.ranks,
                                                 direction, not state.live)
        state.live = True
        self._report = (direction, report)
        return out.view(torch.uint16) if raw_bits else out

    def _call_cuda(self, parts: torch.Tensor, state: _DirectionState, direction: str) -> torch.Tensor:
        n = parts.shape[1]
        if state.state is None or state.n != n:
            if state.live:
                raise ValueError(f"the {direction} state holds {state.n} elements per rank but parts has "
                                 f"{n}; call reset() between passes of different size")
            # Not zeroed here: a state's first call is fresh, and the op resets it on the stream.
            state.state = torch.empty(ops.state_bytes(self._key, self.ranks, n), dtype=torch.uint8,
                                      device=parts.device)
            state.n = n
        out, workspace, compensated = torch.ops.echotk.emulate_allreduce(
            parts, state.state, self._key, self.ranks, direction, not state.live, self.norms)
        state.live = True
        self._report = (direction, workspace, parts, compensated, out)
        return out

    @property
    def report(self) -> Optional[AllReduceReport]:
        """The last call's report (None before the first call). On the GPU this waits for the
        stream; read it outside CUDA-graph capture (after a replay it describes the replayed call)."""
        if self._report is None:
            return None
        if len(self._report) == 5:
            return AllReduceReport.from_device(*self._report)
        return AllReduceReport.from_tensor(*self._report)

    def state(self, direction: str = "forward") -> Optional[Tuple[torch.Tensor, Optional[torch.Tensor]]]:
        """The ranks' compensator averages of `direction` as host fp32 tensors (m1 [P, n], and m2
        [P, n] in the dual mode, else None); None with the compensator off or no call since reset()."""
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be 'forward' or 'backward', got {direction!r}")
        state = self._states[direction]
        if self.spec.compensator == "off" or not state.live:
            return None
        dual = self.spec.compensator == "dual"
        if state.state is None:
            return state.m1.clone(), state.m2.clone() if dual else None
        m1 = torch.empty(self.ranks, state.n, dtype=torch.float32)
        m2 = torch.empty(self.ranks, state.n, dtype=torch.float32) if dual else m1.new_empty(0)
        _C.download_state_cuda(ops._handle(self._key, self.ranks), state.state, state.n, m1, m2,
                               torch.cuda.current_stream(state.state.device).cuda_stream)
        return m1, m2 if dual else None

    def __repr__(self):
        return (f"echotk.AllReduce(ranks={self.ranks}, spec={self.spec}, device='{self.device}'"
                + ("" if self.norms else ", norms=False") + ")")


class ExactAllReduce:
    """The exact ("16-bit") all-reduce: fp32 sum of the P contributions in rank order, rounded
    once to dtype (echo::exact_allreduce). Same call interface as AllReduce; it has no state."""

    def __init__(self, ranks: int, dtype: str = "bf16", device="cpu"):
        spec = Spec(dtype=dtype)
        if isinstance(ranks, bool) or not isinstance(ranks, int) or not 1 <= ranks <= 8:
            raise ValueError(f"ranks must lie in [1, 8], got {ranks!r}")
        self.ranks = ranks
        self.dtype = spec.dtype
        # The exact sum needs no CUDA build: on a GPU it runs as torch arithmetic (ops.py).
        self.device = _device(device, need_cuda_build=False)
        self._report = None

    def reset(self, direction: Optional[str] = None):
        if direction is not None and direction not in DIRECTIONS:
            raise ValueError(f"direction must be 'forward', 'backward' or None, got {direction!r}")

    def __call__(self, parts, direction: str = "forward"):
        parts, raw_bits = _call_arguments(parts, direction, self.ranks, self.dtype, self.device)
        out, report = torch.ops.echotk.exact_allreduce(parts, self.dtype, self.ranks)
        self._report = (direction, report)
        return out.view(torch.uint16) if raw_bits else out

    @property
    def report(self) -> Optional[AllReduceReport]:
        if self._report is None:
            return None
        return AllReduceReport.from_tensor(*self._report)

    def __repr__(self):
        return f"echotk.ExactAllReduce(ranks={self.ranks}, dtype='{self.dtype}', device='{self.device}')"


__all__ = ["AllReduce", "ExactAllReduce", "AllReduceReport", "TORCH_DTYPES"]
