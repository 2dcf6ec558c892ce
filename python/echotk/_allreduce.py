"""echotk.AllReduce (Echo, compensated) and echotk.ExactAllReduce (fp32 sum in rank order)."""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Callable, Optional, Tuple

import numpy as np
import torch

from . import _C, ops
from ._report import AllReduceReport
from ._spec import Spec
from ._util import DIRECTIONS, as_dtype, check_contiguous, check_direction, check_ranks, spec_or_default

if TYPE_CHECKING:
    from .nn import Site


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
    parts = as_dtype(parts, dtype, "parts")
    if parts.device.type != device.type or (device.index is not None and parts.device.index != device.index):
        raise ValueError(f"parts is on {parts.device} but this all-reduce runs on {device}")
    check_contiguous(parts, "parts")
    return parts


def _call_arguments(parts, direction: str, ranks: int, dtype: str,
                    device: torch.device) -> Tuple[torch.Tensor, bool]:
    """What every all-reduce call checks first: the direction, and parts as a checked tensor;
    raw_bits says parts came as uint16 bits, so the result goes back as bits too."""
    check_direction(direction)
    parts = _as_tensor(parts)
    raw_bits = parts.dtype == torch.uint16
    return _check_parts(parts, ranks, dtype, device), raw_bits


def _device(device, need_cuda_build: bool = True) -> torch.device:
    device = torch.device(device)
    if device.type == "cuda":
        if need_cuda_build:
            ops.require_cuda_build()
        if device.index is None and torch.cuda.is_available():
            # "cuda" means the current GPU: a tensor on another one is refused, not moved.
            device = torch.device("cuda", torch.cuda.current_device())
    elif device.type != "cpu":
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device}")
    return device


class _DirectionState:
    """One direction's compensator state and whether a pass has begun: on the CPU m1, m2 [P, n]
    fp32 (and with compensator_gains='sum' the row ratios [2, P, rows] fp32 and which kinds hold
    them, [2] uint8); on the GPU one opaque uint8 tensor in the emulation kernel's layout
    (ops.state_bytes), and with compensator_gains='sum' the row ratios' uint8 buffer
    (ops.ratios_bytes; which kinds it holds is in the state)."""

    def __init__(self):
        self.m1: Optional[torch.Tensor] = None
        self.m2: Optional[torch.Tensor] = None
        self.ratios: Optional[torch.Tensor] = None
        self.ratios_held: Optional[torch.Tensor] = None
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

    takes_site = True  # echotk.nn.TensorParallelGroup passes each call's Site (compensator_units)

    def __init__(self, ranks: int, spec: Optional[Spec] = None, device="cpu", norms: bool = True):
        self.spec = spec_or_default(spec)
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
        self._read_report: Optional[Callable[[], AllReduceReport]] = None  # the last call's, when asked

    def reset(self, direction: Optional[str] = None):
        """Starts a pass: the compensator state of `direction` ("forward" or "backward"; None:
        both) begins again from zero at its next call."""
        check_direction(direction, allow_none=True)
        for name, state in self._states.items():
            if direction is None or name == direction:
                state.live = False

    def __call__(self, parts, direction: str = "forward", site: Optional[Site] = None):
        """The sum of parts [P, n] as every rank gets it. `site` (an echotk.nn.Site, which
        echotk.tensor_parallel passes) is needed by forward calls of a spec with
        compensator_units='stream': its post-norm sets the call's gains; other specs ignore it."""
        parts, raw_bits = _call_arguments(parts, direction, self.ranks, self.dtype, self.device)
        site_row, site_weight_rms, site_weights = self._site_arguments(site, direction)
        site_kind = -1 if site is None else int(site.kind)
        state = self._states[direction]
        n = parts.shape[1]
        if parts.device.type == "cuda":
            out = self._call_cuda(parts, state, direction, site_row, site_weight_rms, site_weights, site_kind)
            return out.view(torch.uint16) if raw_bits else out
        if state.m1 is None or state.m1.shape[1] != n:
            if state.live:
                raise ValueError(f"the {direction} state holds {state.m1.shape[1]} elements per rank "
                                 f"but parts has {n}; call reset() between passes of different size")
            state.m1 = torch.zeros(self.ranks, n, dtype=torch.float32, device=parts.device)
            state.m2 = torch.zeros(self.ranks, n, dtype=torch.float32, device=parts.device)
        ratios, held = self._row_ratios(state, direction, n, site_row)
        if ratios is None:
            out, report = torch.ops.echotk.allreduce(parts, state.m1, state.m2, self._key, self.ranks,
                                                     direction, not state.live, site_row, site_weight_rms,
                                                     site_weights, site_kind)
        else:
            out, report = torch.ops.echotk.allreduce_ratios(parts, state.m1, state.m2, ratios, held, self._key,
                                                            self.ranks, direction, not state.live, site_row,
                                                            site_weight_rms, site_weights, site_kind)
        state.live = True
        self._read_report = functools.partial(AllReduceReport.from_tensor, direction, report)
        return out.view(torch.uint16) if raw_bits else out

    def _row_ratios(self, state: _DirectionState, direction: str, n: int, site_row: int
                    ) -> Tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
        """The state's row ratios where compensator_gains='sum' reads them (a post-norm site), made
        at a pass's first such call; (None, None) elsewhere."""
        if self.spec.compensator_gains != "sum" or site_row <= 0:
            return None, None
        rows = n // site_row
        if state.ratios is None or state.ratios.shape[2] != rows or not state.live:
            if state.live and state.ratios is not None and bool(state.ratios_held.any()):
                raise ValueError(f"the {direction} state holds row ratios of {state.ratios.shape[2]} rows but "
                                 f"this site has {rows}; call reset() between passes of different size")
            state.ratios = torch.zeros(2, self.ranks, rows, dtype=torch.float32)
            state.ratios_held = torch.zeros(2, dtype=torch.uint8)
        return state.ratios, state.ratios_held

    def _site_arguments(self, site: Optional[Site], direction: str
                        ) -> Tuple[int, float, Optional[torch.Tensor]]:
        """(site_row, site_weight_rms, site_weights) of echotk::allreduce for this call: (-1, 0, None)
        unless the spec's units are 'stream' on a forward call with the compensator on, which need
        `site`; the weights only where compensator_profile or compensator 'deficit' read them."""
        if (self.spec.compensator_units != "stream" or direction != "forward"
                or self.spec.compensator == "off"):
            return -1, 0.0, None
        if site is None:
            raise ValueError("compensator_units='stream' needs each forward call's site: call "
                             "ar(parts, 'forward', site=echotk.nn.Site(...)) with the site's post-norm, as "
                             "echotk.tensor_parallel does")
        scale = site.post_norm_scale()
        if scale is None:
            return 0, 0.0, None
        if scale.dim() != 1:
            raise ValueError(f"site {site.index}: the post-norm's weight has shape {list(scale.shape)}, not [hidden]")
        weights = None
        if self.spec.compensator_profile != "flat" or self.spec.compensator == "deficit":
            reader = ("compensator 'deficit'" if self.spec.compensator == "deficit"
                      else f"compensator_profile {self.spec.compensator_profile!r}")
            bad = torch.nonzero(~torch.isfinite(scale))
            if bad.numel() != 0:
                raise ValueError(f"site {site.index}: the post-norm's weight {int(bad[0])} is not finite "
                                 f"({reader} reads the weights)")
            weights = scale
        return scale.numel(), float(_C.post_norm_weight_rms(scale.numpy())), weights

    def _call_cuda(self, parts: torch.Tensor, state: _DirectionState, direction: str, site_row: int,
                   site_weight_rms: float, site_weights: Optional[torch.Tensor], site_kind: int) -> torch.Tensor:
        n = parts.shape[1]
        if state.state is None or state.n != n:
            if state.live:
                raise ValueError(f"the {direction} state holds {state.n} elements per rank but parts has "
                                 f"{n}; call reset() between passes of different size")
            # Not zeroed here: a state's first call is fresh, and the op resets it on the stream.
            state.state = torch.empty(ops.state_bytes(self._key, self.ranks, n), dtype=torch.uint8,
                                      device=parts.device)
            state.n = n
        ratios = None
        need = ops.ratios_bytes(self._key, self.ranks, direction, n, site_row, site_weight_rms)
        if need != 0:
            # Kept between a pass's calls; its contents count only where the state says a kind is held.
            if state.ratios is None or state.ratios.numel() != need:
                if state.live and state.ratios is not None:
                    raise ValueError(f"the {direction} state holds row ratios for {state.ratios.numel()} bytes but "
                                     f"this site needs {need}; call reset() between passes of different size")
                state.ratios = torch.empty(need, dtype=torch.uint8, device=parts.device)
            ratios = state.ratios
        weights = None if site_weights is None else site_weights.to(parts.device)
        if ratios is None:
            out, workspace, compensated = torch.ops.echotk.emulate_allreduce(
                parts, state.state, self._key, self.ranks, direction, not state.live, self.norms, site_row,
                site_weight_rms, weights, site_kind)
        else:
            out, workspace, compensated = torch.ops.echotk.emulate_allreduce_ratios(
                parts, state.state, ratios, self._key, self.ranks, direction, not state.live, self.norms,
                site_row, site_weight_rms, weights, site_kind)
        state.live = True
        self._read_report = functools.partial(AllReduceReport.from_device, direction, workspace, parts,
                                              compensated, out)
        return out

    @property
    def report(self) -> Optional[AllReduceReport]:
        """The last call's report (None before the first call). On the GPU this waits for the
        stream; read it outside CUDA-graph capture (after a replay it describes the replayed call)."""
        return None if self._read_report is None else self._read_report()

    def state(self, direction: str = "forward") -> Optional[Tuple[torch.Tensor, Optional[torch.Tensor]]]:
        """The ranks' compensator averages of `direction` as host fp32 tensors (m1 [P, n], and m2
        [P, n] in the dual mode, else None); None with the compensator off or no call since reset()."""
        check_direction(direction)
        state = self._states[direction]
        if self.spec.compensator == "off" or not state.live:
            return None
        dual = self.spec.compensator == "dual"
        if state.state is None:
            return state.m1.clone(), state.m2.clone() if dual else None
        m1 = torch.empty(self.ranks, state.n, dtype=torch.float32)
        m2 = torch.empty(self.ranks, state.n, dtype=torch.float32) if dual else m1.new_empty(0)
        _C.download_state_cuda(ops.spec_handle(self._key, self.ranks), state.state, state.n, m1, m2,
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
        self.ranks = check_ranks(ranks)
        self.dtype = spec.dtype
        # The exact sum needs no CUDA build: on a GPU it runs as torch arithmetic (ops.py).
        self.device = _device(device, need_cuda_build=False)
        self._read_report: Optional[Callable[[], AllReduceReport]] = None

    def reset(self, direction: Optional[str] = None):
        """Nothing to start (no state); checks `direction` as AllReduce.reset does."""
        check_direction(direction, allow_none=True)

    def __call__(self, parts, direction: str = "forward"):
        parts, raw_bits = _call_arguments(parts, direction, self.ranks, self.dtype, self.device)
        out, report = torch.ops.echotk.exact_allreduce(parts, self.dtype, self.ranks)
        self._read_report = functools.partial(AllReduceReport.from_tensor, direction, report)
        return out.view(torch.uint16) if raw_bits else out

    @property
    def report(self) -> Optional[AllReduceReport]:
        """The last call's report (None before the first call): exact_path and the norms."""
        return None if self._read_report is None else self._read_report()

    def __repr__(self):
        return f"echotk.ExactAllReduce(ranks={self.ranks}, dtype='{self.dtype}', device='{self.device}')"


__all__ = ["AllReduce", "ExactAllReduce", "AllReduceReport"]
